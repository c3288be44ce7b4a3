package expr

import (
	"maps"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Evaluation follows DynamoDB Local's ExpressionExecutor/OperatorExecutor.
// Items hold only top-level string and number attributes, so any nested path
// reads as missing, and any nested path an update writes is invalid.

func compareValues(a, b store.Value) int {
	if x, ok := a.AsInt(); ok {
		y, _ := b.AsInt()
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	x, _ := a.AsString()
	y, _ := b.AsString()
	return strings.Compare(x, y) // byte order: UTF-8, unsigned
}

func (b *Bound) lookup(pn *pathNode, item store.Item) (store.Value, bool) {
	if len(pn.els) > 1 {
		return store.Value{}, false
	}
	e := pn.els[0]
	v, ok := item[b.elName(e)]
	return v, ok
}

// get returns the attribute update action i writes, as it stands in old.
func (b *Bound) get(i int, old store.Item) (store.Value, bool) {
	v, ok := old[b.head(i)]
	return v, ok
}

// ---- conditions ----

func (b *Bound) condOperand(o *operandNode, item store.Item) (store.Value, bool) {
	switch o.kind {
	case oPath:
		return b.lookup(o.path, item)
	case oValue:
		return b.values[o.ph], true
	}
	// size, the only function a condition operand can be: the length of a
	// string in UTF-16 code units (Java's String.length()); missing for a
	// number.
	v, ok := b.condOperand(o.fn.args[0], item)
	if s, isStr := v.AsString(); ok && isStr {
		return store.Int(int64(utf16Len(s))), true
	}
	return store.Value{}, false
}

func ordered(x store.Value, xok bool, y store.Value, yok bool) (int, bool) {
	if !xok || !yok || x.Kind() != y.Kind() {
		return 0, false
	}
	return compareValues(x, y), true
}

func (b *Bound) evalCond(c *condNode, item store.Item) bool {
	switch c.kind {
	case cCmp:
		x, xok := b.condOperand(c.ops[0], item)
		y, yok := b.condOperand(c.ops[1], item)
		switch c.cmp {
		case cmpEQ:
			return xok && yok && x == y
		case cmpNE:
			return !(xok && yok && x == y)
		}
		r, ok := ordered(x, xok, y, yok)
		if !ok {
			return false
		}
		return orderHolds(c.cmp, r)
	case cIn:
		x, ok := b.condOperand(c.ops[0], item)
		if !ok {
			return false
		}
		for _, o := range c.ops[1:] {
			if y, yok := b.condOperand(o, item); yok && x == y {
				return true
			}
		}
		return false
	case cBetween:
		x, xok := b.condOperand(c.ops[0], item)
		lo, lok := b.condOperand(c.ops[1], item)
		hi, hok := b.condOperand(c.ops[2], item)
		r1, ok1 := ordered(x, xok, hi, hok)
		r2, ok2 := ordered(x, xok, lo, lok)
		return ok1 && ok2 && r1 <= 0 && r2 >= 0
	case cFunc:
		return b.evalFunc(c.fn, item)
	case cAnd:
		return b.evalCond(c.l, item) && b.evalCond(c.r, item)
	case cOr:
		return b.evalCond(c.l, item) || b.evalCond(c.r, item)
	case cNot:
		return !b.evalCond(c.l, item)
	}
	return false
}

func (b *Bound) evalFunc(f *funcNode, item store.Item) bool {
	x, xok := b.condOperand(f.args[0], item)
	switch f.name {
	case "attribute_exists":
		return xok
	case "attribute_not_exists":
		return !xok
	}
	y, yok := b.condOperand(f.args[1], item)
	switch f.name {
	case "attribute_type":
		t, _ := y.AsString()
		return xok && typeAbbr(x) == t
	case "begins_with":
		s, sok := x.AsString()
		p, pok := y.AsString()
		return xok && yok && sok && pok && strings.HasPrefix(s, p)
	case "contains":
		s, sok := x.AsString()
		p, pok := y.AsString()
		return xok && yok && sok && pok && strings.Contains(s, p)
	}
	return false
}

// ---- updates ----

type evalErr uint8

const (
	errNone evalErr = iota
	errNotFound
	errType
	errDocPath
	errOverflow
)

var evalMessages = [...]string{
	errNotFound: msgAttrNotFound,
	errType:     msgIncorrectType,
	errDocPath:  msgDocPath,
	errOverflow: msgOverflow,
}

func add(x, y int64, minus bool) (int64, evalErr) {
	if minus {
		d := x - y
		if (x >= 0 && y < 0 && d < 0) || (x < 0 && y > 0 && d >= 0) {
			return 0, errOverflow
		}
		return d, errNone
	}
	s := x + y
	if (x > 0 && y > 0 && s < 0) || (x < 0 && y < 0 && s >= 0) {
		return 0, errOverflow
	}
	return s, errNone
}

// updOperand evaluates an update operand against the old item: its value,
// whether it exists, or the execution fault.
func (b *Bound) updOperand(o *operandNode, old store.Item) (store.Value, bool, evalErr) {
	switch o.kind {
	case oPath:
		v, ok := b.lookup(o.path, old)
		return v, ok, errNone
	case oValue:
		return b.values[o.ph], true, errNone
	}
	x, xok, e := b.updOperand(o.fn.args[0], old)
	if e != errNone {
		return x, false, e
	}
	y, yok, e := b.updOperand(o.fn.args[1], old)
	if e != errNone {
		return y, false, e
	}
	if o.fn.name == "if_not_exists" {
		switch {
		case !yok:
			return y, false, errNotFound
		case !xok:
			return y, true, errNone
		}
		return x, true, errNone
	}
	// list_append: no attribute or value here is a list.
	if !xok {
		return x, false, errNotFound
	}
	return x, false, errType
}

func (b *Bound) setResult(v *setValue, old store.Item) (store.Value, evalErr) {
	x, xok, e := b.updOperand(v.l, old)
	if e != errNone {
		return x, e
	}
	if !v.arith {
		if !xok {
			return x, errNotFound
		}
		return x, errNone
	}
	y, yok, e := b.updOperand(v.r, old)
	if e != errNone {
		return y, e
	}
	if !xok {
		return x, errNotFound
	}
	m, isNum := x.AsInt()
	if !isNum {
		return x, errType
	}
	if !yok {
		return y, errNotFound
	}
	n, isNum := y.AsInt()
	if !isNum {
		return y, errType
	}
	r, e := add(m, n, v.minus)
	return store.Int(r), e
}

// actionResult computes action i against the old item. write reports
// whether the action writes its result (SET, ADD); cur and existed are the
// attribute it writes (or removes) in the old item.
func (b *Bound) actionResult(i int, old store.Item) (v store.Value, write bool, cur store.Value, existed bool, e evalErr) {
	a := b.p.actions[i]
	if len(a.path.els) > 1 {
		if a.kind == aRemove && old == nil {
			// DynamoDB ignores REMOVE x.y on a missing item (Alternator's
			// test_nested_attribute_remove_from_missing_item, run against AWS).
			return v, false, cur, false, errNone
		}
		return v, false, cur, false, errDocPath
	}
	cur, existed = b.get(i, old)
	switch a.kind {
	case aSet:
		v, e = b.setResult(a.val, old)
		return v, true, cur, existed, e
	case aAdd:
		delta := b.values[a.ph]
		if !existed {
			return delta, true, cur, false, errNone
		}
		x, isNum := cur.AsInt()
		if !isNum {
			return v, false, cur, true, errType
		}
		y, _ := delta.AsInt()
		r, e := add(x, y, false)
		return store.Int(r), true, cur, true, e
	case aDelete:
		return v, false, cur, existed, errType // unreachable: Bind rejects DELETE of a string or number
	}
	return v, false, cur, existed, errNone
}

// Change is what an applied update did to one top-level attribute: its
// value before (Had: it existed) and after (Has: it exists).
type Change struct {
	Name     string
	Old, New store.Value
	Had, Has bool
}

func (b *Bound) apply(old store.Item, keyAttrs [2]KeyAttr, chg []Change, track bool) (store.Item, []string, []Change, error) {
	p := b.p
	if !p.hasUpdate {
		if old == nil {
			return keyItem(keyAttrs, 0), nil, nil, nil
		}
		n := make(store.Item, len(old))
		for k, v := range old {
			n[k] = v
		}
		return n, nil, nil, nil
	}
	// Phase one: every result from the old item.
	track = track && chg != nil && p.flatLHS && old != nil
	chg = chg[:0]
	var buf [16]store.Value
	res := bufOrMake(buf[:], len(p.actions))
	writes, added := 0, 0
	for i := range p.actions {
		v, w, cur, existed, e := b.actionResult(i, old)
		if e != errNone {
			return nil, nil, nil, b.firstFault(old)
		}
		if w {
			res[i] = v
			writes++
			if !existed {
				added++
			}
		}
		if track {
			chg = append(chg, Change{Name: b.head(i), Old: cur, Had: existed, New: v, Has: w})
		}
	}
	if !track {
		chg = nil
	}
	if old == nil && writes == 0 {
		return nil, nil, nil, nil
	}
	// Phase two: write into one new map: a clone when no attribute is
	// added (cheaper than re-inserting every entry), else a map sized for
	// the additions.
	var n store.Item
	switch {
	case old == nil:
		n = keyItem(keyAttrs, writes)
	case added == 0:
		n = maps.Clone(old)
	default:
		n = make(store.Item, len(old)+added)
		for k, v := range old {
			n[k] = v
		}
	}
	for i, a := range p.actions {
		if len(a.path.els) > 1 {
			continue
		}
		switch a.kind {
		case aSet, aAdd:
			n[b.head(i)] = res[i]
		case aRemove:
			delete(n, b.head(i))
		}
	}
	return n, b.touched, chg, nil
}

func keyItem(keyAttrs [2]KeyAttr, extra int) store.Item {
	n := make(store.Item, 2+extra)
	for _, k := range keyAttrs {
		if k.Name != "" && k.Value.IsValid() {
			n[k.Name] = k.Value
		}
	}
	return n
}

// firstFault picks the fault DynamoDB reports when several actions fail: it
// builds the new item by walking the update tree's top-level HashMap, whose
// keys were inserted last action first, and stops at the first fault.
func (b *Bound) firstFault(old store.Item) error {
	acts := b.p.actions
	var keys []string
	var hashes []int32
	for i := len(acts) - 1; i >= 0; i-- {
		h := b.head(i)
		seen := false
		for _, k := range keys {
			seen = seen || k == h
		}
		if !seen {
			keys = append(keys, h)
			hashes = append(hashes, elHash(resolvedEl{name: h}))
		}
	}
	for _, k := range javaOrder(hashes) {
		for i := range acts {
			if b.head(i) != keys[k] {
				continue
			}
			if _, _, _, _, e := b.actionResult(i, old); e != errNone {
				return verr(evalMessages[e])
			}
		}
	}
	return verr(msgIncorrectType) // not reached: some action failed
}
