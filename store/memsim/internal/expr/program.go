package expr

import "github.com/shardlimit/limiter/store"

// Program is a Fixed expression simple enough to run as a flat list of
// steps over the attributes it names, without walking the tree and without
// looking anything up: the shape of the writes store's builders make for a
// rate limiter. Its condition is a conjunction of attribute_exists(#n),
// attribute_not_exists(#n) and comparisons #n op :v; its actions are
// ADD #n :v, SET #n = :v, SET #n = if_not_exists(#m, :v), optionally
// followed by + :d or - :d, and REMOVE #n, every #n a name placeholder.
//
// A Program gives the results Check and Apply give on the same item; where
// Apply would fail, Program.Apply says so and the caller takes Apply for
// DynamoDB's message.
type Program struct {
	conds []progCond
	acts  []progAct
}

type progCond struct {
	kind uint8 // cCmp or cFunc
	cmp  uint8 // cCmp: the comparator
	not  bool  // cFunc: attribute_not_exists
	name int32 // name placeholder index
	val  int32 // cCmp: value placeholder index
}

// Program step kinds.
const (
	psAdd    uint8 = iota // ADD #n :v
	psSet                 // SET #n = :v
	psIfNE                // SET #n = if_not_exists(#m, :v)
	psArith               // SET #n = if_not_exists(#m, :v) +/- :d
	psRemove              // REMOVE #n
)

type progAct struct {
	kind  uint8
	minus bool
	src   int32 // psIfNE, psArith: #m
	val   int32
	delta int32 // psArith: :d
}

// Result is what one action of a Program does: write V (Write) or remove
// the attribute.
type Result struct {
	V     store.Value
	Write bool
}

// Program returns f as a Program, or nil when its expressions are not of
// that shape.
func (f *Fixed) Program() *Program {
	if v := f.prog.Load(); v != nil {
		return v.p
	}
	pr := compileProgram(f.p)
	f.prog.Store(&progBox{pr})
	return pr
}

type progBox struct{ p *Program }

func compileProgram(p *Parsed) *Program {
	pr := &Program{}
	if p.cond != nil && !pr.cond(p.cond) {
		return nil
	}
	for _, a := range p.actions {
		if len(a.path.els) != 1 || a.path.els[0].kind != peName {
			return nil
		}
		var st progAct
		switch a.kind {
		case aAdd:
			st = progAct{kind: psAdd, val: a.ph}
		case aRemove:
			st = progAct{kind: psRemove}
		case aSet:
			v := a.val
			src, val, ok := ifNotExists(v.l)
			switch {
			case !v.arith && v.l.kind == oValue:
				st = progAct{kind: psSet, val: v.l.ph}
			case !v.arith && ok:
				st = progAct{kind: psIfNE, src: src, val: val}
			case v.arith && ok && v.r.kind == oValue:
				st = progAct{kind: psArith, src: src, val: val, delta: v.r.ph, minus: v.minus}
			default:
				return nil
			}
		default:
			return nil
		}
		pr.acts = append(pr.acts, st)
	}
	return pr
}

// nameOperand returns the name placeholder of a one-element path operand.
func nameOperand(o *operandNode) (int32, bool) {
	if o.kind == oPath && len(o.path.els) == 1 && o.path.els[0].kind == peName {
		return o.path.els[0].ph, true
	}
	return 0, false
}

// ifNotExists matches if_not_exists(#m, :v).
func ifNotExists(o *operandNode) (src, val int32, ok bool) {
	if o.kind != oFunc || o.fn.name != "if_not_exists" || len(o.fn.args) != 2 || o.fn.args[1].kind != oValue {
		return 0, 0, false
	}
	src, ok = nameOperand(o.fn.args[0])
	return src, o.fn.args[1].ph, ok
}

func (pr *Program) cond(c *condNode) bool {
	switch c.kind {
	case cAnd:
		return pr.cond(c.l) && pr.cond(c.r)
	case cCmp:
		n, ok := nameOperand(c.ops[0])
		if !ok || c.ops[1].kind != oValue {
			return false
		}
		pr.conds = append(pr.conds, progCond{kind: cCmp, cmp: c.cmp, name: n, val: c.ops[1].ph})
		return true
	case cFunc:
		if c.fn.name != "attribute_exists" && c.fn.name != "attribute_not_exists" || len(c.fn.args) != 1 {
			return false
		}
		n, ok := nameOperand(c.fn.args[0])
		if !ok {
			return false
		}
		pr.conds = append(pr.conds, progCond{kind: cFunc, not: c.fn.name == "attribute_not_exists", name: n})
		return true
	}
	return false
}

// Check evaluates the condition of b (a Bound of the Program's Fixed) on
// the item whose attribute of name placeholder i is vals[i] when has[i].
func (pr *Program) Check(b *Bound, vals []store.Value, has []bool) bool {
	for _, c := range pr.conds {
		x, xok := vals[c.name], has[c.name]
		if c.kind == cFunc {
			if xok == c.not {
				return false
			}
			continue
		}
		y := b.values[c.val]
		var ok bool
		switch c.cmp {
		case cmpEQ:
			ok = xok && x == y
		case cmpNE:
			ok = !(xok && x == y)
		default:
			if !xok || x.Kind() != y.Kind() {
				return false
			}
			r := compareValues(x, y)
			switch c.cmp {
			case cmpLT:
				ok = r < 0
			case cmpLE:
				ok = r <= 0
			case cmpGT:
				ok = r > 0
			default:
				ok = r >= 0
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// Apply computes the result of each action of b's update (one per action,
// in action order) on the item whose attributes vals and has describe (as
// for Check); heads[i] is the name placeholder action i writes. It returns
// false when some action fails: the caller then takes Bound.Apply, which
// reports DynamoDB's error. The results belong to b.
func (pr *Program) Apply(b *Bound, vals []store.Value, has []bool, heads []int) ([]Result, bool) {
	out := b.results[:0]
	if cap(out) < len(pr.acts) {
		out = make([]Result, 0, len(pr.acts))
	}
	out = out[:len(pr.acts)]
	b.results = out
	for i, a := range pr.acts {
		h := heads[i]
		switch a.kind {
		case psAdd:
			d := b.values[a.val]
			if !has[h] {
				out[i] = Result{V: d, Write: true}
				continue
			}
			x, isNum := vals[h].AsInt()
			y, isNum2 := d.AsInt()
			r, e := add(x, y, false)
			if !isNum || !isNum2 || e != errNone {
				return nil, false
			}
			out[i] = Result{V: store.Int(r), Write: true}
		case psSet:
			out[i] = Result{V: b.values[a.val], Write: true}
		case psIfNE, psArith:
			v := b.values[a.val]
			if has[a.src] {
				v = vals[a.src]
			}
			if a.kind == psArith {
				x, isNum := v.AsInt()
				y, isNum2 := b.values[a.delta].AsInt()
				r, e := add(x, y, a.minus)
				if !isNum || !isNum2 || e != errNone {
					return nil, false
				}
				v = store.Int(r)
			}
			out[i] = Result{V: v, Write: true}
		default:
			out[i] = Result{}
		}
	}
	return out, true
}

// Len returns the number of update actions of pr.
func (pr *Program) Len() int { return len(pr.acts) }
