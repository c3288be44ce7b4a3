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
// exist). With no condition it returns true. The error is always nil: every
// fault a condition can have is found by Parse and Bind.
func (b *Bound) Check(item store.Item) (bool, error) {
	return b.p.cond == nil || b.eval(b.p.cond, item), nil
}

// Apply evaluates the update against old (nil when the item does not exist,
// in which case the result is created with keyAttrs, the table's key
// attributes and their values) and returns the new item as a fresh map
// (old is never modified) and the names of the attributes the update
// touched, as Touched.
//
// An update of a missing item that only removes attributes creates
// nothing, as in DynamoDB: Apply then returns a nil item and no names. With
// no update expression the new item is a copy of old (or the key item).
func (b *Bound) Apply(old store.Item, keyAttrs [2]KeyAttr) (store.Item, []string, error) {
	var n store.Item
	if old != nil {
		n = maps.Clone(old)
	} else {
		n = make(store.Item, 2+len(b.p.actions))
		for _, k := range keyAttrs {
			if k.Name != "" && k.Value.IsValid() {
				n[k.Name] = k.Value
			}
		}
	}
	wrote := false
	for i, a := range b.p.actions {
		v, write, e := b.action(i, old)
		switch {
		case e != errNone:
			return nil, nil, b.firstFault(old)
		case write:
			n[b.head(i)], wrote = v, true
		case a.kind == aRemove && len(a.path) == 1:
			delete(n, b.head(i))
		}
	}
	if old == nil && !wrote && b.p.hasUpdate {
		return nil, nil, nil
	}
	return n, b.touched, nil
}

func compareValues(a, b store.Value) int {
	if x, ok := a.AsInt(); ok {
		y, _ := b.AsInt()
		return cmp.Compare(x, y)
	}
	x, _ := a.AsString()
	y, _ := b.AsString()
	return strings.Compare(x, y) // byte order: UTF-8, unsigned
}

// evalErr is the message of a fault found while applying an update; ""
// for none.
type evalErr = string

const errNone evalErr = ""

// operand evaluates an operand against item: its value, whether it exists,
// or the fault of an update function. The functions are size in a
// condition and if_not_exists and list_append in an update (Parse allows
// no others).
func (b *Bound) operand(n *node, item store.Item) (store.Value, bool, evalErr) {
	switch n.kind {
	case nPath:
		if len(n.path) > 1 {
			return store.Value{}, false, errNone
		}
		v, ok := item[b.elName(n.path[0])]
		return v, ok, errNone
	case nValue:
		return b.values[n.ph], true, errNone
	}
	x, xok, e := b.operand(n.kids[0], item)
	if e != errNone {
		return x, false, e
	}
	if n.name == "size" {
		// The length of a string in UTF-16 code units (Java's
		// String.length()); missing for a number.
		if s, isStr := x.AsString(); xok && isStr {
			return store.Int(int64(utf16Len(s))), true, errNone
		}
		return store.Value{}, false, errNone
	}
	y, yok, e := b.operand(n.kids[1], item)
	switch {
	case e != errNone:
		return y, false, e
	case n.name == "if_not_exists" && !yok:
		return y, false, msgAttrNotFound
	case n.name == "if_not_exists" && !xok:
		return y, true, errNone
	case n.name == "if_not_exists":
		return x, true, errNone
	case !xok: // list_append: no attribute or value here is a list
		return x, false, msgAttrNotFound
	}
	return x, false, msgIncorrectType
}

func (b *Bound) value(n *node, item store.Item) (store.Value, bool) {
	v, ok, _ := b.operand(n, item)
	return v, ok
}

// ordered compares two operands that exist and are of one type.
func ordered(x store.Value, xok bool, y store.Value, yok bool) (int, bool) {
	if !xok || !yok || x.Kind() != y.Kind() {
		return 0, false
	}
	return compareValues(x, y), true
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
		x, ok := b.value(n.kids[0], item)
		for _, o := range n.kids[1:] {
			if y, yok := b.value(o, item); ok && yok && x == y {
				return true
			}
		}
		return false
	case nBetween:
		x, xok := b.value(n.kids[0], item)
		lo, lok := b.value(n.kids[1], item)
		hi, hok := b.value(n.kids[2], item)
		r1, ok1 := ordered(x, xok, hi, hok)
		r2, ok2 := ordered(x, xok, lo, lok)
		return ok1 && ok2 && r1 <= 0 && r2 >= 0
	case nCmp:
		x, xok := b.value(n.kids[0], item)
		y, yok := b.value(n.kids[1], item)
		if n.op == cmpEQ || n.op == cmpNE {
			return (xok && yok && x == y) == (n.op == cmpEQ)
		}
		r, ok := ordered(x, xok, y, yok)
		return ok && [...]bool{cmpLT: r < 0, cmpLE: r <= 0, cmpGT: r > 0, cmpGE: r >= 0}[n.op]
	}
	// A function.
	x, xok := b.value(n.kids[0], item)
	switch n.name {
	case "attribute_exists":
		return xok
	case "attribute_not_exists":
		return !xok
	}
	y, yok := b.value(n.kids[1], item)
	s, sok := x.AsString()
	t, tok := y.AsString()
	switch n.name {
	case "attribute_type":
		return xok && x.Kind().String() == t
	case "begins_with":
		return xok && yok && sok && tok && strings.HasPrefix(s, t)
	}
	return xok && yok && sok && tok && strings.Contains(s, t) // contains
}

// add adds (or with minus subtracts) two int64s, failing on overflow.
func add(x, y int64, minus bool) (int64, evalErr) {
	if minus {
		d := x - y
		if (x >= 0 && y < 0 && d < 0) || (x < 0 && y > 0 && d >= 0) {
			return 0, msgOverflow
		}
		return d, errNone
	}
	s := x + y
	if (x > 0 && y > 0 && s < 0) || (x < 0 && y < 0 && s >= 0) {
		return 0, msgOverflow
	}
	return s, errNone
}

// action computes update action i against the old item: the value it
// writes (write: SET and ADD of a top-level attribute), or its fault.
func (b *Bound) action(i int, old store.Item) (v store.Value, write bool, e evalErr) {
	a := b.p.actions[i]
	switch {
	case len(a.path) > 1 && a.kind == aRemove && old == nil:
		// DynamoDB ignores REMOVE x.y on a missing item (Alternator's
		// test_nested_attribute_remove_from_missing_item, run against AWS).
		return v, false, errNone
	case len(a.path) > 1:
		return v, false, msgDocPath
	case a.kind == aRemove:
		return v, false, errNone
	case a.kind == aDelete:
		return v, false, msgIncorrectType // unreachable: Bind rejects DELETE of a string or number
	}
	var x, y store.Value
	var xok, yok bool
	minus, arith := false, a.kind == aAdd
	if arith {
		x, xok = old[b.head(i)]
		if y, yok = b.values[a.ph], true; !xok {
			return y, true, errNone // ADD to a missing attribute
		}
	} else if arith = a.val.kind == nArith; !arith {
		x, xok, e = b.operand(a.val, old)
		if e == errNone && !xok {
			e = msgAttrNotFound
		}
		return x, true, e
	} else {
		minus = a.val.op == 1
		if x, xok, e = b.operand(a.val.kids[0], old); e == errNone {
			y, yok, e = b.operand(a.val.kids[1], old)
		}
		if e != errNone {
			return x, false, e
		}
	}
	m, isNum := x.AsInt()
	switch {
	case !xok:
		return x, false, msgAttrNotFound
	case !isNum:
		return x, false, msgIncorrectType
	case !yok:
		return y, false, msgAttrNotFound
	}
	n, isNum := y.AsInt()
	if !isNum {
		return y, false, msgIncorrectType
	}
	r, e := add(m, n, minus)
	return store.Int(r), true, e
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
			hashes = append(hashes, elHash(resolvedEl{name: h}))
		}
	}
	for _, k := range javaOrder(hashes) {
		for i := range b.p.actions {
			if _, _, e := b.action(i, old); b.head(i) == keys[k] && e != errNone {
				return validationf("%s", e)
			}
		}
	}
	return validationf("%s", msgIncorrectType) // not reached: some action failed
}
