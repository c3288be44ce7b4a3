package engine

import (
	"maps"
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
	condAbsent // attribute_not_exists(name): takes no value
)

// sink receives the actions and conditions of an expression, values as
// int64 (the hot paths write numbers only).
type sink interface {
	add(name string, v int64)
	set(name string, v int64)
	cond(k condKind, name string, v int64)
	exists(name string)    // attribute_exists(name): no value
	notExists(name string) // attribute_not_exists(name): no value
	// either is the condition a OR (b AND c AND d), values in that order
	// (a condAbsent term takes none).
	either(a, b, c, d term)
}

// term is one comparison of an attribute with a value (condAbsent: the
// attribute's absence, no value).
type term struct {
	k    condKind
	name string
	v    int64
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
	s.conds = append(s.conds, s.compare(k, name))
}

func (s *shapeSink) either(a, b, c, d term) {
	ca := s.compare(a.k, a.name)
	cb := s.compare(b.k, b.name)
	cc := s.compare(c.k, c.name)
	cd := s.compare(d.k, d.name)
	s.conds = append(s.conds, store.Or(ca, store.And(cb, cc, cd)))
}

// compare is the comparison of name with the next value's placeholder
// (condAbsent: its absence, no placeholder).
func (s *shapeSink) compare(k condKind, name string) store.Condition {
	if k == condAbsent {
		return store.Name(name).NotExists()
	}
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
	return c
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
func (s *valueSink) either(a, b, c, d term) {
	for _, t := range [...]term{a, b, c, d} {
		if t.k != condAbsent {
			s.vals = append(s.vals, store.Int(t.v))
		}
	}
}

// argSink collects the values straight into the Expr's own slice, each
// at its placeholder's place (at[k] for the k-th value emitted): no copy
// from a slot-ordered slice.
type argSink struct {
	args []store.Value
	at   []int32
	k    int
}

func (s *argSink) put(v int64) {
	if s.k < len(s.at) {
		s.args[s.at[s.k]] = store.Int(v)
	}
	s.k++
}
func (s *argSink) add(_ string, v int64)              { s.put(v) }
func (s *argSink) set(_ string, v int64)              { s.put(v) }
func (s *argSink) cond(_ condKind, _ string, v int64) { s.put(v) }
func (s *argSink) exists(string)                      {}
func (s *argSink) notExists(string)                   {}
func (s *argSink) either(a, b, c, d term) {
	for _, t := range [...]term{a, b, c, d} {
		if t.k != condAbsent {
			s.put(t.v)
		}
	}
}

// template is a compiled expression shape: a store.Template whose slots
// are the values in the order emit gives them.
type template struct {
	t *store.Template
	// at maps the k-th value emitted (slot k) to its placeholder, when
	// every placeholder is one slot and every slot one placeholder (nil
	// otherwise: the values go through a valueSink).
	at []int32
}

func compile(emit func(sink)) (*template, error) {
	var sh shapeSink
	emit(&sh)
	t, err := store.Compile(sh.u, store.And(sh.conds...))
	if err != nil {
		return nil, err
	}
	return &template{t: t, at: placesOf(t)}, nil
}

// placesOf returns, for each slot of t, the placeholder that takes it; nil
// unless the slots and the placeholders correspond one to one.
func placesOf(t *store.Template) []int32 {
	n := len(t.ValuePlaceholders())
	if n != t.Slots() {
		return nil
	}
	at := make([]int32, n)
	seen := make([]bool, n)
	for i := 0; i < n; i++ {
		k := t.SlotOf(i)
		if k < 0 || seen[k] {
			return nil
		}
		seen[k], at[k] = true, int32(i)
	}
	return at
}

// expr fills the template with the sink's values: the Expr store/dynamo
// sends, and which memsim runs without parsing.
func (t *template) expr(vs *valueSink) store.Expr {
	return t.t.Compact(vs.vals) // copies the values out of vs.vals
}

// fill runs emit into the template's values: the Expr of expr, without
// the copy when the template's places are known. The values go into buf
// when it is not nil (see valueBuf), else into a new slice.
func (t *template) fill(buf *valueBuf, emit func(sink)) store.Expr {
	if t.at != nil {
		// The buffer's sink, or a pooled one: emit's interface call would
		// move a sink of the stack to the heap.
		var ex store.Expr
		var ok bool
		if buf != nil {
			ex, ok = t.fillAt(&buf.sink, buf.take(len(t.at)), emit)
		} else {
			as := argPool.Get().(*argSink)
			ex, ok = t.fillAt(as, make([]store.Value, len(t.at)), emit)
			argPool.Put(as)
		}
		if ok {
			return ex
		}
		// Not the shape compiled (cannot happen: a shape key fixes what
		// emit gives); the slot way handles any count.
	}
	vs := valuesPool.Get().(*valueSink)
	vs.vals = vs.vals[:0]
	emit(vs)
	ex := t.expr(vs)
	valuesPool.Put(vs)
	return ex
}

// fillAt fills args through the sink as, by place: false when emit gave
// another count of values than the template has places.
func (t *template) fillAt(as *argSink, args []store.Value, emit func(sink)) (store.Expr, bool) {
	*as = argSink{args: args, at: t.at}
	emit(as)
	k := as.k
	*as = argSink{} // the sink keeps nothing of the Expr
	if k != len(t.at) {
		return store.Expr{}, false
	}
	return t.t.CompactArgs(args), true
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
// The shapes are an immutable map behind an atomic pointer: read on every
// write without a lock (and hashed as a plain key, not through an
// interface as a sync.Map would), replaced by a copy once per new shape.
func (pt *planTemplate) shapeOf(k shapeKey) *template {
	if m := pt.shapes.Load(); m != nil {
		return (*m)[k]
	}
	return nil
}

// addShape records the template of shape k and returns the one recorded
// (the first one compiled, when two callers race).
func (pt *planTemplate) addShape(k shapeKey, t *template) *template {
	pt.shapesMu.Lock()
	defer pt.shapesMu.Unlock()
	old := pt.shapes.Load()
	var m map[shapeKey]*template
	if old != nil {
		if have := (*old)[k]; have != nil {
			return have
		}
		m = make(map[shapeKey]*template, len(*old)+1)
		maps.Copy(m, *old)
	} else {
		m = make(map[shapeKey]*template, 1)
	}
	m[k] = t
	pt.shapes.Store(&m)
	return t
}

var argPool = sync.Pool{New: func() any { return new(argSink) }}

var valuesPool = sync.Pool{New: func() any {
	return &valueSink{vals: make([]store.Value, 0, 64)}
}}

// valueBuf is a buffer of expression values that a machine reuses write
// after write (Charge.vals): fill puts a write's values in it rather than
// in a new slice. The Expr then points into the buffer and is valid until
// its next use, which is the next write of the same machine: by then the
// store has answered the last one, and a store keeps nothing of its input
// once the call returns (see store.Store). A nil *valueBuf allocates.
type valueBuf struct {
	vals []store.Value
	sink argSink // the sink fill runs emit into (saves a pool's round trip)
	// spec is the machine's last speculative write, full its last blind
	// full write (see speccache.go); find is where learning the latter
	// looks for its expiry.
	spec, full specValues
	find       valueOf
}

// take returns n values of the buffer (their old contents are to be
// overwritten), growing it when it is short. The memory of the last
// speculative write no longer has its values there (specValues.held).
func (b *valueBuf) take(n int) []store.Value {
	b.spec.held, b.full.held = false, false
	if cap(b.vals) < n {
		b.vals = make([]store.Value, n)
	}
	return b.vals[:n]
}

// build returns the expression emit describes, from the template cache,
// its values in buf (see valueBuf; nil: a new slice).
func (p *Plan) build(buf *valueBuf, path pathKind, emit func(sink)) (store.Expr, error) {
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
	t, err := p.shape(path, emit)
	if err != nil {
		return store.Expr{}, err
	}
	return t.fill(buf, emit), nil
}

// shape returns the template of the plan's write on path whose shape emit
// gives, compiled the first time. The plan must have a plan template.
func (p *Plan) shape(path pathKind, emit func(sink)) (*template, error) {
	charged, positive := p.chargedMask()
	k := shapeKey{path: path, charged: charged, positive: positive}
	t := p.pt.shapeOf(k)
	if t == nil {
		var err error
		if t, err = compile(emit); err != nil {
			return nil, err
		}
		t = p.pt.addShape(k, t)
	}
	return t, nil
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
