package expr

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Evaluation follows DynamoDB Local's ExpressionExecutor/OperatorExecutor.
// Items hold only top-level string and number attributes, so any nested path
// reads as missing, and any nested path an update writes is invalid.

// Check evaluates the condition against item (nil when the item does not
// exist); true when there is no condition. A condition cannot fail: Parse
// and Bind find every fault it can have.
func (b *Bound) Check(item store.Item) bool {
	return b.p.cond == nil || b.eval(b.p.cond, item)
}

// Apply evaluates the update against old (nil when the item does not
// exist, in which case the result starts as a copy of key, the item's key
// attributes) and returns the new item as a fresh map (old is never
// modified) and the names of the top-level attributes the update writes,
// sorted, without repeats (a slice that must not be modified).
//
// An update of a missing item that only removes attributes creates
// nothing, as in DynamoDB: Apply then returns a nil item and no names. With
// no update expression the new item is a copy of old (or of key).
func (b *Bound) Apply(old, key store.Item) (store.Item, []string, error) {
	n := maps.Clone(old)
	if n == nil {
		n = store.Item{}
		maps.Copy(n, key)
	}
	wrote := false
	for i, a := range b.p.actions {
		switch v, e := b.action(a, old); {
		case e != "":
			return nil, nil, b.firstFault(old)
		case v.IsValid():
			n[b.head(i)], wrote = v, true
		case a.kind == tREMOVE && len(a.path) == 1:
			delete(n, b.head(i))
		}
	}
	if old == nil && !wrote && len(b.p.actions) > 0 {
		return nil, nil, nil
	}
	return n, b.touched, nil
}

// operand evaluates an operand against item: its value (the zero Value
// when it does not exist), or the fault of an update function (size,
// if_not_exists and list_append are the only functions an operand can be).
func (b *Bound) operand(n *node, item store.Item) (store.Value, string) {
	switch n.kind {
	case nPath:
		if len(n.path) > 1 {
			return store.Value{}, ""
		}
		return item[b.elName(n.path[0])], ""
	case nValue:
		return b.values[n.ph], ""
	}
	x, e := b.operand(n.kids[0], item)
	if s, isStr := x.AsString(); n.spec.name == "size" {
		// The length of a string in UTF-16 code units (Java's
		// String.length()); missing for a number.
		if isStr {
			return store.Int(int64(utf16Len(s))), ""
		}
		return store.Value{}, ""
	}
	y, ye := b.operand(n.kids[1], item)
	switch {
	case e != "":
		return x, e
	case ye != "":
		return y, ye
	case n.spec.name == "if_not_exists" && !y.IsValid():
		return y, msgAttrNotFound
	case n.spec.name == "if_not_exists" && !x.IsValid():
		return y, ""
	case n.spec.name == "if_not_exists":
		return x, ""
	case !x.IsValid(): // list_append: no attribute or value here is a list
		return x, msgAttrNotFound
	}
	return x, msgIncorrectType
}

func (b *Bound) value(n *node, item store.Item) store.Value {
	v, _ := b.operand(n, item)
	return v
}

// ordered compares x with y when both exist and are of one type.
func ordered(x, y store.Value) (int, bool) {
	if !x.IsValid() || x.Kind() != y.Kind() {
		return 0, false
	}
	if m, ok := x.AsInt(); ok {
		n, _ := y.AsInt()
		return cmp.Compare(m, n), true
	}
	s, _ := x.AsString()
	t, _ := y.AsString()
	return strings.Compare(s, t), true // byte order: UTF-8, unsigned
}

func (b *Bound) eval(n *node, item store.Item) bool {
	switch n.kind {
	case nAnd:
		return b.eval(n.kids[0], item) && b.eval(n.kids[1], item)
	case nOr:
		return b.eval(n.kids[0], item) || b.eval(n.kids[1], item)
	case nNot:
		return !b.eval(n.kids[0], item)
	case nIn:
		x := b.value(n.kids[0], item)
		for _, o := range n.kids[1:] {
			if x.IsValid() && x == b.value(o, item) {
				return true
			}
		}
		return false
	case nBetween:
		x := b.value(n.kids[0], item)
		r1, ok1 := ordered(x, b.value(n.kids[2], item))
		r2, ok2 := ordered(x, b.value(n.kids[1], item))
		return ok1 && ok2 && r1 <= 0 && r2 >= 0
	case nCmp:
		x, y := b.value(n.kids[0], item), b.value(n.kids[1], item)
		r, ok := ordered(x, y)
		switch n.spec.name {
		case "=", "<>":
			return (x.IsValid() && x == y) == (n.spec.name == "=")
		case "<":
			return ok && r < 0
		case "<=":
			return ok && r <= 0
		case ">":
			return ok && r > 0
		}
		return ok && r >= 0
	}
	// A function.
	x := b.value(n.kids[0], item)
	switch n.spec.name {
	case "attribute_exists":
		return x.IsValid()
	case "attribute_not_exists":
		return !x.IsValid()
	}
	y := b.value(n.kids[1], item)
	s, sok := x.AsString()
	t, tok := y.AsString()
	switch n.spec.name {
	case "attribute_type":
		return x.IsValid() && x.Kind() == t
	case "begins_with":
		return sok && tok && strings.HasPrefix(s, t)
	}
	return sok && tok && strings.Contains(s, t) // contains
}

// add adds (or with minus subtracts) two int64s, failing on overflow.
func add(x, y int64, minus bool) (int64, string) {
	s := x + y
	if minus {
		s, y = x-y, ^y // x - y = x + ^y + 1: the sign test is that of x + ^y
	}
	if (x^s)&(y^s) < 0 {
		return 0, msgOverflow
	}
	return s, ""
}

// action computes an update action against the old item: the value it
// writes (none for REMOVE and DELETE), or its fault.
func (b *Bound) action(a *action, old store.Item) (store.Value, string) {
	var x, y store.Value
	var e string
	switch {
	case len(a.path) > 1 && a.kind == tREMOVE && old == nil:
		// DynamoDB ignores REMOVE x.y on a missing item (Alternator's
		// test_nested_attribute_remove_from_missing_item, run against AWS).
		return x, ""
	case len(a.path) > 1:
		return x, msgDocPath
	case a.kind == tREMOVE:
		return x, ""
	case a.kind == tDELETE:
		return x, msgIncorrectType // unreachable: Bind rejects DELETE of a string or number
	case a.kind == tADD:
		if x, y = old[b.elName(a.path[0])], b.values[a.ph]; !x.IsValid() {
			return y, "" // ADD to a missing attribute
		}
	case a.val.kind != nArith:
		if x, e = b.operand(a.val, old); e == "" && !x.IsValid() {
			e = msgAttrNotFound
		}
		return x, e
	default:
		if x, e = b.operand(a.val.kids[0], old); e == "" {
			y, e = b.operand(a.val.kids[1], old)
		}
		if e != "" {
			return x, e
		}
	}
	m, xNum := x.AsInt()
	n, yNum := y.AsInt()
	switch {
	case !x.IsValid() || !y.IsValid() && xNum:
		return x, msgAttrNotFound
	case !xNum || !yNum:
		return x, msgIncorrectType
	}
	r, e := add(m, n, a.kind == tSET && a.val.spec.name == "-")
	return store.Int(r), e
}

// firstFault picks the fault DynamoDB reports when several actions fail: it
// builds the new item by walking the update tree's top-level HashMap, whose
// keys were inserted last action first, and stops at the first fault.
func (b *Bound) firstFault(old store.Item) error {
	var keys []string
	var hashes []int32
	for i := len(b.p.actions) - 1; i >= 0; i-- {
		if h := b.head(i); !slices.Contains(keys, h) {
			keys = append(keys, h)
			hashes = append(hashes, elHash(pathEl{kind: tID, text: h}))
		}
	}
	for _, k := range javaOrder(hashes) {
		for i := range b.p.actions {
			if _, e := b.action(b.p.actions[i], old); b.head(i) == keys[k] && e != "" {
				return validationf("%s", e)
			}
		}
	}
	return validationf("%s", msgIncorrectType) // not reached: some action failed
}
