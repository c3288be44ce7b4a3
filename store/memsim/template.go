package memsim

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim/internal/expr"
)

// The structured path. An Expr made by a store.Template carries the
// template and its slot values; memsim runs the template's expressions
// parsed once and bound from the slot values, with the same checks, in the
// same order, as the string path on the Expr's strings and maps (which it
// falls back to whenever the slot values are not all there and valid).
//
// Beside each stored item a store keeps the attributes that the last few
// templates that wrote it read (an itemView each), so that the next write
// of one of them evaluates its condition and update without looking them
// up.

// Pre-bound forms of templates, shared by all stores (like parsed
// expressions): parsing and name resolution happen once per template.
var (
	fixedCache  sync.Map // *store.Template -> *expr.Fixed (nil: the template takes the string path)
	fixedCached atomic.Int64
)

// fixed returns the pre-bound form of t, or nil when t's Exprs must take
// the string path (a syntax error, a name Bind would reject). e is an Expr
// of t.
func fixed(t *store.Template, e store.Expr) *expr.Fixed {
	if v, ok := fixedCache.Load(t); ok {
		return v.(*expr.Fixed)
	}
	var f *expr.Fixed
	if p, err := parse(e.Update, e.Condition); err == nil {
		f, _ = p.Fix(e.Names, t.ValuePlaceholders())
	}
	if fixedCached.Load() < maxExprCache {
		if _, loaded := fixedCache.LoadOrStore(t, f); !loaded {
			fixedCached.Add(1)
		}
	}
	return f
}

// tplan is what a store knows of one template: its pre-bound form and
// what the store's schema says about the attributes it names.
type tplan struct {
	t     *store.Template
	fixed *expr.Fixed
	// isKey is the store's key test, or nil when no key check of Bind can
	// fail (no action writes a key attribute, no path is nested).
	isKey func(string) bool
	names []string // by name placeholder index
	// prog runs the template's expressions directly, when they are simple
	// enough (nil: through the expression engine).
	prog *expr.Program
	// head: per update action, the name placeholder of the attribute it
	// writes; heads: every name placeholder naming that attribute.
	head  []int
	heads [][]int
	// aliases: some attribute a head names has more than one name
	// placeholder (store's builders never make that).
	aliases bool
	// writesIndexKey: some action writes an index key attribute.
	writesIndexKey bool
	// carried: for another plan, where each of this plan's names is among
	// its names (see carry); written: where the attributes this plan's
	// actions write are among its names (see writes). Guarded by the
	// store's mutex.
	carried planMemo
	written planMemo
}

// planMemo remembers an index list per other plan, for at most
// maxCarried plans: a store sees few templates, and scanning a few
// pointers costs less than hashing one, on every write.
type planMemo struct {
	plans []*tplan
	lists [][]int32
}

// get returns the list remembered for pl.
func (m *planMemo) get(pl *tplan) ([]int32, bool) {
	for i, p := range m.plans {
		if p == pl {
			return m.lists[i], true
		}
	}
	return nil, false
}

// put remembers f for pl, unless maxCarried plans are remembered.
func (m *planMemo) put(pl *tplan, f []int32) {
	if len(m.plans) < maxCarried {
		m.plans = append(m.plans, pl)
		m.lists = append(m.lists, f)
	}
}

// itemViews holds, beside a stored item, views of it for up to maxViews
// templates: those that wrote it lately (the limiter alternates several on
// one item: acquires, adjusts, rollbacks). Every view whose plan is set is
// up to date with the item: a write of a template updates its own view
// from its results and passes the attributes it wrote on to the others;
// any other write that changes the item makes them all stale.
type itemViews struct {
	// plans[i] is the plan of view v[i] (nil: stale), used[i] the tick it
	// was last used at: kept apart from the views, so that finding one
	// reads a cache line, not every view.
	plans [maxViews]*tplan
	used  [maxViews]uint32
	v     []itemView
	tick  uint32 // counts uses, to replace the least recently used view
}

// maxViews bounds the views kept beside one item.
const maxViews = 6

// viewAge is how many uses of an item's views a view may go unused and
// still be kept up to date by the others' writes: one older is dropped
// instead (made again if its template writes again), so that an item
// written by one template most of the time (an acquire's speculative
// write) pays for no view its warm-up or a rare write left behind.
const viewAge = 64

// itemView holds the attributes its plan's expressions name (the plan is
// itemViews.plans' entry): attrs' i is the item's attribute names[i].
// Numbers are held without pointers, so that the writes that keep the
// view up to date cost no write barriers.
type itemView struct {
	// size[i] is the stored size of attribute names[i] (name and value),
	// 0 when absent.
	attrs expr.Attrs
	size  []int32
	// out and next are a write's results and their sizes, by action,
	// until it commits.
	out  expr.Attrs
	next []int32
}

// maxPlans bounds the templates a store remembers; beyond it, Exprs of new
// templates take the string path.
const maxPlans = 1 << 12

// plan returns the store's plan for t, or nil when t's Exprs take the
// string path. e is an Expr of t.
func (s *Store) plan(t *store.Template, e store.Expr) *tplan {
	if pl := s.lastPlan.Load(); pl != nil && pl.t == t {
		return pl
	}
	if v, ok := s.plans.Load(t); ok {
		pl := v.(*tplan)
		s.lastPlan.Store(pl)
		return pl
	}
	if s.plansN.Load() >= maxPlans {
		return nil // preparing a plan per call would cost more than parsing
	}
	f := fixed(t, e)
	if f == nil {
		return nil
	}
	pl := &tplan{t: t, fixed: f, names: f.Names(), prog: f.Program(), head: f.Heads()}
	if f.Nested() {
		pl.isKey = s.isKey
	}
	for _, h := range pl.head {
		var same []int
		if h >= 0 {
			name := pl.names[h]
			if s.isKey(name) {
				pl.isKey = s.isKey
			}
			if s.isIndexKey(name) {
				pl.writesIndexKey = true
			}
			for j, n := range pl.names {
				if n == name {
					same = append(same, j)
				}
			}
		}
		pl.heads = append(pl.heads, same)
		pl.aliases = pl.aliases || len(same) > 1
	}
	if v, loaded := s.plans.LoadOrStore(t, pl); loaded {
		return v.(*tplan)
	}
	s.plansN.Add(1)
	return pl
}

// useView returns a view of e's item for pl's expressions. When e has no
// view for pl, it makes one, from the attributes the most recently used
// view holds that pl names too, looking only the others up, in a free
// slot or in place of the least recently used view. Call with s.mu held.
func (s *Store) useView(e *entry, pl *tplan) *itemView {
	vs := e.views
	if vs == nil {
		vs = &itemViews{}
		e.views = vs
	}
	vs.tick++
	src, free, lru := -1, -1, -1
	n := len(vs.v)
	for i, p := range vs.plans[:n] {
		switch {
		case p == pl:
			vs.used[i] = vs.tick
			return &vs.v[i]
		case p == nil:
			if free < 0 {
				free = i
			}
		default:
			if src < 0 || vs.used[i] > vs.used[src] {
				src = i
			}
			if lru < 0 || vs.used[i] < vs.used[lru] {
				lru = i
			}
		}
	}
	at := free
	switch {
	case at >= 0:
	case n < maxViews:
		at = n
		vs.v = append(vs.v, itemView{})
	default:
		at = lru // maxViews > 1: src, the most recently used, is another
	}
	v := &vs.v[at]
	var from *itemView
	var fromPlan *tplan
	if src >= 0 {
		from, fromPlan = &vs.v[src], vs.plans[src]
	}
	s.fillView(e, v, pl, from, fromPlan)
	vs.plans[at], vs.used[at] = pl, vs.tick
	return v
}

// fillView makes v a view of e's item for pl, taking the attributes src
// (another up-to-date view of the item, of plan srcPlan, or nil) holds and
// looking the others up. Call with s.mu held.
func (s *Store) fillView(e *entry, v *itemView, pl *tplan, src *itemView, srcPlan *tplan) {
	n := len(pl.names)
	var from []int32 // pl's name i is src's from[i], or -1
	if src != nil {
		from = pl.carry(srcPlan)
	}
	v.make(n, len(pl.head))
	for i, name := range pl.names {
		if from != nil && from[i] >= 0 {
			v.attrs.Copy(i, src.attrs, int(from[i]))
			v.size[i] = src.size[from[i]]
			continue
		}
		x, has := e.item.get(name)
		v.attrs.Set(i, x, has)
		v.size[i] = attrSize(name, x, has)
	}
}

// make sizes v for n attributes and h results, all absent (their sizes
// left for the caller to set): in the
// slices it has when they are large enough, else in new ones, each kind
// of slice shared by the attributes and the results (a new view costs
// four allocations, not eight).
func (v *itemView) make(n, h int) {
	if cap(v.attrs.Kind) >= n && cap(v.out.Kind) >= h {
		// Each slice has the capacity of its Kind (made together below).
		v.attrs, v.out = cleared(v.attrs, n), cleared(v.out, h)
		v.size, v.next = v.size[:n], v.next[:h]
		return
	}
	kinds, nums, strs, sizes := make([]store.Kind, n+h), make([]int64, n+h), make([]string, n+h), make([]int32, n+h)
	v.attrs = expr.Attrs{Kind: kinds[:n:n], Num: nums[:n:n], Str: strs[:n:n]}
	v.out = expr.Attrs{Kind: kinds[n:], Num: nums[n:], Str: strs[n:]}
	v.size, v.next = sizes[:n:n], sizes[n:]
}

// cleared returns a resliced to n attributes, all absent.
func cleared(a expr.Attrs, n int) expr.Attrs {
	a.Kind, a.Num, a.Str = a.Kind[:n], a.Num[:n], a.Str[:n]
	clear(a.Kind)
	clear(a.Num)
	clear(a.Str)
	return a
}

// carry returns, for each of pl's names, its index among old's names, or
// -1: what a view of old's attributes gives a view of pl's. Remembered per
// pair of templates. Call with s.mu held.
func (pl *tplan) carry(old *tplan) []int32 {
	if f, ok := pl.carried.get(old); ok {
		return f
	}
	f := make([]int32, len(pl.names))
	for i, name := range pl.names {
		f[i] = int32(slices.Index(old.names, name))
	}
	pl.carried.put(old, f)
	return f
}

// writes returns where the attributes pl's actions write are among
// other's names: pairs of an action index and a name index of other, one
// pair per name of other that an action's attribute has. Remembered per
// pair of templates. Call with s.mu held.
func (pl *tplan) writes(other *tplan) []int32 {
	if f, ok := pl.written.get(other); ok {
		return f
	}
	var f []int32
	for i, h := range pl.head {
		name := pl.names[h]
		for j, n := range other.names {
			if n == name {
				f = append(f, int32(i), int32(j))
			}
		}
	}
	pl.written.put(other, f)
	return f
}

// maxCarried bounds the pairs of templates a plan remembers.
const maxCarried = 32

// attrSize is the stored size of an attribute: its name and value, 0 when
// absent.
func attrSize(name string, v store.Value, has bool) int32 {
	if !has {
		return 0
	}
	return int32(len(name) + ValueSize(v))
}

// runProgram computes w's update of the existing item ev.old with its
// template's Program, reading the attributes from the item's view v: the
// new item, its size, whether it changed. It returns false, having changed
// nothing, when an action fails: the expression engine then reports the
// error. Call with s.mu held.
func (s *Store) runProgram(w *writeReq, ev *evaluation, v *itemView) bool {
	pl := w.plan
	if !pl.prog.Apply(w.bound.Values(), v.attrs, pl.head, v.out) {
		return false
	}
	var n store.Item
	var r *record
	if s.views {
		r = s.derive(ev.old, pl, v)
	} else {
		n = maps.Clone(ev.old.m)
	}
	ev.newSize, ev.changed, ev.keysMoved = ev.oldSize, false, pl.writesIndexKey
	// The results and the attributes they replace, read by kind (what
	// Attrs.Get and comparing the Values it makes would say), each slice
	// cut to the length of its kinds.
	ok, ak := v.out.Kind, v.attrs.Kind
	onum, ostr, next := v.out.Num[:len(ok)], v.out.Str[:len(ok)], v.next[:len(ok)]
	anum, astr, asize := v.attrs.Num[:len(ak)], v.attrs.Str[:len(ak)], v.size[:len(ak)]
	for i, h := range pl.head {
		name := pl.names[h]
		k := ok[i]
		if r == nil {
			if x, has := v.out.Get(i); has {
				n[name] = x
			} else {
				delete(n, name)
			}
		}
		var size int32
		switch k {
		case store.KindNumber:
			size = int32(len(name) + NumberSize(onum[i]))
		case store.KindString:
			size = int32(len(name) + len(ostr[i]))
		}
		next[i] = size
		ev.newSize += int(size - asize[h])
		if !ev.changed && (ak[h] != k || k == store.KindNumber && anum[h] != onum[i] || k == store.KindString && astr[h] != ostr[i]) {
			ev.changed = true
		}
	}
	ev.new, ev.touched, ev.programmed = img{m: n, r: r}, w.bound.Touched(), true
	return true
}

// derive returns the record of old updated with the results of pl's
// Program (in v.out): a copy of old's values with the written slots
// replaced, in a layout extended by the attributes old lacked. Call with
// s.mu held.
func (s *Store) derive(old img, pl *tplan, v *itemView) *record {
	o := s.slotted(old)
	lay := o.lay
	slots := lay.slotsOf(pl)
	for i, j := range slots {
		if _, has := v.out.Get(i); j < 0 && has {
			lay = lay.extend(pl.names[pl.head[i]])
		}
	}
	if lay != o.lay {
		slots = lay.slotsOf(pl)
	}
	r, shared := o.grown(lay), true
	ok := v.out.Kind
	onum, ostr := v.out.Num[:len(ok)], v.out.Str[:len(ok)]
	for i, j := range slots {
		switch k := ok[i]; {
		case j < 0: // absent before and after
		case k == store.KindNumber && r.isNumber(int(j)):
			r.num[j] = onum[i] // a number replacing a number: n and the kinds stay
		default:
			r.setKind(int(j), k, onum[i], ostr[i], &shared)
		}
	}
	if o.hasMap() {
		r.base = o
	}
	return r
}

// updateView brings the views of e up to date after w replaced its item:
// from the results of w's Program (programmed), which ran on w's
// template's view, for that view and, for the attributes w wrote, the
// others; any other write makes them all stale. Call with s.mu held.
func (s *Store) updateView(e *entry, w *writeReq, programmed bool) {
	vs := e.views
	if vs == nil {
		return
	}
	n := len(vs.v)
	wi := -1
	if programmed {
		for i, p := range vs.plans[:n] {
			if p == w.plan {
				wi = i
				break
			}
		}
	}
	if wi < 0 {
		vs.plans = [maxViews]*tplan{}
		return
	}
	wv := &vs.v[wi]
	out, next := wv.out, wv.next
	// Attrs.Copy with the slices hoisted, each cut to the length of its
	// kinds (so that one bounds check covers the three slices of an
	// index): this loop runs for every attribute a write passes on to
	// each other view. A number is copied whatever the kind (Num is read
	// only for numbers); a string only when it is one.
	okind := out.Kind
	onum, ostr, onext := out.Num[:len(okind)], out.Str[:len(okind)], next[:len(okind)]
	for i, p := range vs.plans[:n] {
		if i != wi && p != nil {
			if vs.tick-vs.used[i] > viewAge {
				vs.plans[i] = nil // unused for long: dropped, not kept up to date
				continue
			}
			v := &vs.v[i]
			vk := v.attrs.Kind
			vn, vstr, vz := v.attrs.Num[:len(vk)], v.attrs.Str[:len(vk)], v.size[:len(vk)]
			for f := w.plan.writes(p); len(f) >= 2; f = f[2:] {
				a, j := f[0], f[1]
				kind := okind[a]
				vk[j], vn[j], vz[j] = kind, onum[a], onext[a]
				if kind == store.KindString {
					vstr[j] = ostr[a]
				}
			}
		}
	}
	a := &wv.attrs
	if !w.plan.aliases {
		ak := a.Kind
		an, astr, az := a.Num[:len(ak)], a.Str[:len(ak)], wv.size[:len(ak)]
		for i, j := range w.plan.head {
			k := okind[i]
			ak[j], an[j], az[j] = k, onum[i], onext[i]
			if k == store.KindString {
				astr[j] = ostr[i]
			}
		}
		return
	}
	for i, same := range w.plan.heads {
		for _, j := range same {
			a.Copy(j, out, i)
			wv.size[j] = wv.next[i]
		}
	}
}
