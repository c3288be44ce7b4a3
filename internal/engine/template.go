package engine

import (
	"sync"

	"github.com/shardlimit/limiter/store"
)

// The hot paths (speculative, full) build the same expression shape on
// every call; only the values change. Each is written once, against a sink:
// the first call for a shape records it through shapeSink and compiles a
// template (expression strings, names, the placeholder of each value); later
// calls run the same code through valueSink, which only collects values.
// TestTemplatesMatchFreshBuilds holds the two to the same bytes.

type condKind uint8

const (
	condEq condKind = iota
	condGe
	condGt
	condLe
	condLt
)

// sink receives the actions and conditions of an expression, values as
// int64 (the hot paths write numbers only).
type sink interface {
	add(name string, v int64)
	set(name string, v int64)
	cond(k condKind, name string, v int64)
	exists(name string)    // attribute_exists(name): no value
	notExists(name string) // attribute_not_exists(name): no value
}

type shapeSink struct {
	u     store.Update
	conds []store.Condition
	n     int64
}

func (s *shapeSink) next() store.Value        { v := store.Slot(int(s.n)); s.n++; return v }
func (s *shapeSink) add(name string, _ int64) { s.u = s.u.Add(name, s.next()) }
func (s *shapeSink) set(name string, _ int64) { s.u = s.u.Set(name, s.next()) }
func (s *shapeSink) exists(name string)       { s.conds = append(s.conds, store.Name(name).Exists()) }
func (s *shapeSink) notExists(name string)    { s.conds = append(s.conds, store.Name(name).NotExists()) }
func (s *shapeSink) cond(k condKind, name string, _ int64) {
	n, v := store.Name(name), s.next()
	var c store.Condition
	switch k {
	case condEq:
		c = n.Equal(v)
	case condGe:
		c = n.GreaterThanEqual(v)
	case condGt:
		c = n.GreaterThan(v)
	case condLe:
		c = n.LessThanEqual(v)
	case condLt:
		c = n.LessThan(v)
	}
	s.conds = append(s.conds, c)
}

// valueSink collects the values, as the store.Values the template's
// slots take (the Expr copies them out: a pooled sink is reused without
// allocating).
type valueSink struct{ vals []store.Value }

func (s *valueSink) add(_ string, v int64)              { s.vals = append(s.vals, store.Int(v)) }
func (s *valueSink) set(_ string, v int64)              { s.vals = append(s.vals, store.Int(v)) }
func (s *valueSink) cond(_ condKind, _ string, v int64) { s.vals = append(s.vals, store.Int(v)) }
func (s *valueSink) exists(string)                      {}
func (s *valueSink) notExists(string)                   {}

// template is a compiled expression shape: a store.Template whose slots
// are the values in the order emit gives them.
type template struct{ t *store.Template }

func compile(emit func(sink)) (*template, error) {
	var sh shapeSink
	emit(&sh)
	t, err := store.Compile(sh.u, store.And(sh.conds...))
	if err != nil {
		return nil, err
	}
	return &template{t}, nil
}

// expr fills the template with the sink's values: the Expr store/dynamo
// sends, and which memsim runs without parsing.
func (t *template) expr(vs *valueSink) store.Expr {
	return t.t.Compact(vs.vals) // copies the values out of vs.vals
}

type pathKind uint8

const (
	pathSpeculative pathKind = iota
	pathFull
	pathAdjust
	pathNormal       // the common case, without floors (adjust)
	pathNormalFloors // the common case, with floors (acquire)
)

// shapeKey identifies a shape within a plan template: the path, which
// limits this call charges or refunds, and which of those it charges.
type shapeKey struct {
	path              pathKind
	charged, positive uint64
}

// shapeOf returns the template of shape k, nil when not compiled yet.
// The shapes are a sync.Map: read on every write, without a lock, and
// added to once per shape.
func (pt *planTemplate) shapeOf(k shapeKey) *template {
	if t, ok := pt.shapes.Load(k); ok {
		return t.(*template)
	}
	return nil
}

// addShape records the template of shape k and returns the one recorded
// (the first one compiled, when two callers race).
func (pt *planTemplate) addShape(k shapeKey, t *template) *template {
	have, _ := pt.shapes.LoadOrStore(k, t)
	return have.(*template)
}

var valuesPool = sync.Pool{New: func() any {
	return &valueSink{vals: make([]store.Value, 0, 64)}
}}

// build returns the expression emit describes, from the template cache.
func (p *Plan) build(path pathKind, emit func(sink)) (store.Expr, error) {
	pt := p.pt
	if pt == nil {
		t, err := compile(emit)
		if err != nil {
			return store.Expr{}, err
		}
		var vs valueSink
		emit(&vs)
		return t.expr(&vs), nil
	}
	charged, positive := p.chargedMask()
	k := shapeKey{path: path, charged: charged, positive: positive}
	t := pt.shapeOf(k)
	if t == nil {
		var err error
		if t, err = compile(emit); err != nil {
			return store.Expr{}, err
		}
		t = pt.addShape(k, t)
	}
	vs := valuesPool.Get().(*valueSink)
	vs.vals = vs.vals[:0]
	emit(vs)
	ex := t.expr(vs)
	valuesPool.Put(vs)
	return ex, nil
}

// chargedMask returns which limits the plan charges or refunds (amount
// not 0), and which of them it charges (amount above 0).
func (p *Plan) chargedMask() (charged, positive uint64) {
	for i := range p.specs {
		if a := p.specs[i].amount; a != 0 {
			charged |= 1 << uint(i)
			if a > 0 {
				positive |= 1 << uint(i)
			}
		}
	}
	return charged, positive
}
