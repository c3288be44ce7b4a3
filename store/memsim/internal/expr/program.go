package expr

import "github.com/shardlimit/limiter/store"

// Program is a Fixed expression simple enough to run as a flat list of
// steps over the attributes it names, without walking the tree and without
// looking anything up: the shape of the writes store's builders make for a
// rate limiter. Its condition is made of attribute_exists(#n),
// attribute_not_exists(#n) and comparisons #n op :v joined by AND and OR;
// its actions are
// ADD #n :v, SET #n = :v, SET #n = if_not_exists(#m, :v), optionally
// followed by + :d or - :d, and REMOVE #n, every #n a name placeholder.
//
// A Program gives the results Check and Apply give on the same item; where
// Apply would fail, Program.Apply says so and the caller takes Apply for
// DynamoDB's message.
type Program struct {
	// conds are the terms of the condition's top-level conjunction; an OR
	// term's operands are in nodes.
	conds []progCond
	nodes []progCond
	acts  []progAct
}

type progCond struct {
	kind uint8 // cCmp, cFunc; cAnd and cOr below the top level
	cmp  uint8 // cCmp: the comparator
	not  bool  // cFunc: attribute_not_exists
	name int32 // name placeholder index
	val  int32 // cCmp: value placeholder index
	l, r int32 // cAnd, cOr: the operands' indexes in Program.nodes
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

// Attrs holds attribute values by index, numbers without pointers, so that
// a caller can keep them beside an item and update them on every write
// without the garbage collector's write barriers: Kind[i] is KindNone for
// an absent attribute; a number is in Num[i], a string in Str[i].
type Attrs struct {
	Kind []store.Kind
	Num  []int64
	Str  []string
}

// MakeAttrs returns Attrs for n attributes, reusing a's slices.
func (a Attrs) MakeAttrs(n int) Attrs {
	grow := func(s []int64) []int64 { return append(s[:0], make([]int64, n)...) }
	a.Kind = append(a.Kind[:0], make([]store.Kind, n)...)
	a.Num = grow(a.Num)
	a.Str = append(a.Str[:0], make([]string, n)...)
	return a
}

// Get returns attribute i, and whether it is present.
func (a Attrs) Get(i int) (store.Value, bool) {
	switch a.Kind[i] {
	case store.KindNumber:
		return store.Int(a.Num[i]), true
	case store.KindString:
		return store.Str(a.Str[i]), true
	}
	return store.Value{}, false
}

// Set makes attribute i v (absent unless has).
func (a Attrs) Set(i int, v store.Value, has bool) {
	if !has {
		a.Kind[i] = store.KindNone
		return
	}
	a.Kind[i] = v.Kind()
	if n, ok := v.AsInt(); ok {
		a.Num[i] = n
	} else {
		a.Str[i], _ = v.AsString()
	}
}

// Copy makes attribute i of a what attribute j of b is.
func (a Attrs) Copy(i int, b Attrs, j int) {
	a.Kind[i] = b.Kind[j]
	switch b.Kind[j] {
	case store.KindNumber:
		a.Num[i] = b.Num[j]
	case store.KindString:
		a.Str[i] = b.Str[j]
	}
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

// cond adds the terms of the conjunction c to pr.conds.
func (pr *Program) cond(c *condNode) bool {
	if c.kind == cAnd {
		return pr.cond(c.l) && pr.cond(c.r)
	}
	t, ok := pr.term(c)
	pr.conds = append(pr.conds, t)
	return ok
}

// term compiles c, adding the operands of an AND or OR to pr.nodes.
func (pr *Program) term(c *condNode) (progCond, bool) {
	switch c.kind {
	case cAnd, cOr:
		l, lok := pr.node(c.l)
		r, rok := pr.node(c.r)
		return progCond{kind: c.kind, l: l, r: r}, lok && rok
	case cCmp:
		n, ok := nameOperand(c.ops[0])
		if !ok || c.ops[1].kind != oValue {
			return progCond{}, false
		}
		return progCond{kind: cCmp, cmp: c.cmp, name: n, val: c.ops[1].ph}, true
	case cFunc:
		if c.fn.name != "attribute_exists" && c.fn.name != "attribute_not_exists" || len(c.fn.args) != 1 {
			return progCond{}, false
		}
		n, ok := nameOperand(c.fn.args[0])
		if !ok {
			return progCond{}, false
		}
		return progCond{kind: cFunc, not: c.fn.name == "attribute_not_exists", name: n}, true
	}
	return progCond{}, false
}

// node compiles c into pr.nodes and returns its index.
func (pr *Program) node(c *condNode) (int32, bool) {
	t, ok := pr.term(c)
	pr.nodes = append(pr.nodes, t)
	return int32(len(pr.nodes) - 1), ok
}

// Check evaluates the condition, with values args (by value placeholder),
// on the item whose attribute of name placeholder i is attrs' i.
func (pr *Program) Check(args []store.Value, attrs Attrs) bool {
	for i := range pr.conds {
		if !pr.holds(&pr.conds[i], args, attrs) {
			return false
		}
	}
	return true
}

// holds evaluates one term of the condition. No term can fail (a
// comparison of different types is false), so AND and OR need not say
// which operand they evaluated.
func (pr *Program) holds(c *progCond, args []store.Value, attrs Attrs) bool {
	switch c.kind {
	case cAnd:
		return pr.holds(&pr.nodes[c.l], args, attrs) && pr.holds(&pr.nodes[c.r], args, attrs)
	case cOr:
		return pr.holds(&pr.nodes[c.l], args, attrs) || pr.holds(&pr.nodes[c.r], args, attrs)
	}
	x, xok := attrs.Get(int(c.name))
	if c.kind == cFunc {
		return xok != c.not
	}
	y := args[c.val]
	switch c.cmp {
	case cmpEQ:
		return xok && x == y
	case cmpNE:
		return !(xok && x == y)
	}
	if !xok || x.Kind() != y.Kind() {
		return false
	}
	return orderHolds(c.cmp, compareValues(x, y))
}

// Apply computes the result of each action (as for Check, over args and
// attrs; heads[i] is the name placeholder action i writes) into out, one
// attribute per action: the value it writes, or absent for a REMOVE. It
// returns false when some action fails: the caller then takes Bound.Apply,
// which reports DynamoDB's error.
func (pr *Program) Apply(args []store.Value, attrs Attrs, heads []int, out Attrs) bool {
	for i, a := range pr.acts {
		h := heads[i]
		switch a.kind {
		case psAdd:
			d := args[a.val]
			if attrs.Kind[h] == store.KindNone {
				out.Set(i, d, true)
				continue
			}
			y, isNum := d.AsInt()
			r, e := add(attrs.Num[h], y, false)
			if attrs.Kind[h] != store.KindNumber || !isNum || e != errNone {
				return false
			}
			out.Kind[i], out.Num[i] = store.KindNumber, r
		case psSet:
			out.Set(i, args[a.val], true)
		case psIfNE, psArith:
			if attrs.Kind[a.src] != store.KindNone {
				out.Copy(i, attrs, int(a.src))
			} else {
				out.Set(i, args[a.val], true)
			}
			if a.kind == psArith {
				y, isNum := args[a.delta].AsInt()
				r, e := add(out.Num[i], y, a.minus)
				if out.Kind[i] != store.KindNumber || !isNum || e != errNone {
					return false
				}
				out.Num[i] = r
			}
		default:
			out.Kind[i] = store.KindNone
		}
	}
	return true
}

// Len returns the number of update actions of pr.
func (pr *Program) Len() int { return len(pr.acts) }
