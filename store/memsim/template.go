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
// Beside each stored item a store keeps the attributes the last template
// that wrote it reads (an itemView), so that the next write of the same
// template evaluates its condition and update without looking them up.

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
	// writesIndexKey: some action writes an index key attribute.
	writesIndexKey bool
}

// itemView holds, beside a stored item, the attributes plan's expressions
// name: vals[i] (present when has[i]) is the item's attribute names[i].
// plan nil: the view is stale.
type itemView struct {
	plan *tplan
	vals []store.Value
	has  []bool
	// size[i] is the stored size of attribute names[i] (name and value),
	// 0 when absent; next holds the sizes a write computed, until it
	// commits.
	size, next []int32
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
	}
	if s.plansN.Load() >= maxPlans {
		return pl
	}
	if v, loaded := s.plans.LoadOrStore(t, pl); loaded {
		return v.(*tplan)
	}
	s.plansN.Add(1)
	return pl
}

// useView makes the view of e hold the attributes pl's expressions read,
// and returns it. Call with s.mu held.
func (s *Store) useView(e *entry, pl *tplan) *itemView {
	v := e.view
	if v == nil {
		v = &itemView{}
		e.view = v
	}
	if v.plan != pl {
		n := len(pl.names)
		v.vals = slices.Grow(v.vals[:0], n)[:n]
		v.has = slices.Grow(v.has[:0], n)[:n]
		v.size = slices.Grow(v.size[:0], n)[:n]
		v.next = slices.Grow(v.next[:0], len(pl.head))[:len(pl.head)]
		for i, name := range pl.names {
			v.vals[i], v.has[i] = e.item[name]
			v.size[i] = attrSize(name, v.vals[i], v.has[i])
		}
		v.plan = pl
	}
	return v
}

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
	res, ok := pl.prog.Apply(w.bound, v.vals, v.has, pl.head)
	if !ok {
		return false
	}
	n := maps.Clone(ev.old)
	ev.newSize, ev.changed, ev.keysMoved = ev.oldSize, false, pl.writesIndexKey
	for i, r := range res {
		h := pl.head[i]
		name := pl.names[h]
		if r.Write {
			n[name] = r.V
		} else {
			delete(n, name)
		}
		size := attrSize(name, r.V, r.Write)
		v.next[i] = size
		ev.newSize += int(size - v.size[h])
		if r.Write != v.has[h] || r.V != v.vals[h] {
			ev.changed = true
		}
	}
	ev.new, ev.touched, ev.results = n, w.bound.Touched(), res
	return true
}

// updateView brings the view of e up to date after w replaced its item:
// from the results of w's Program when w's template is the view's, else
// the view goes stale. Call with s.mu held.
func (s *Store) updateView(e *entry, w *writeReq, res []expr.Result) {
	v := e.view
	if v == nil || v.plan == nil {
		return
	}
	if w.plan != v.plan || res == nil || len(res) != len(w.plan.heads) {
		v.plan = nil
		return
	}
	for i := range res {
		for _, j := range w.plan.heads[i] {
			v.vals[j], v.has[j], v.size[j] = res[i].V, res[i].Write, v.next[i]
		}
	}
}
