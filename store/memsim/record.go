package memsim

import (
	"iter"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shardlimit/limiter/store"
)

// Items in slots. With WithViews, a write that a template's Program
// computes stores the new item as a record: its values in the slots of a
// layout (the item's attribute names, interned per store), so that copy
// on write is one copy of a slice, with no hashing and no map. The map form
// is built only when something asks for it, and then once per record.
// Without WithViews every item is a map, as the results handed out are.

// layout is an interned list of attribute names: the slots of the records
// that use it. Its names and index never change once made; next and heads
// are guarded by the store's mutex.
type layout struct {
	names []string
	index map[string]int32
	// next: the layout with one more name, appended (interned per parent,
	// so items that gain the same names in the same order share layouts).
	next map[string]*layout
	// heads: per plan, the slot of each attribute its actions write (-1:
	// not in this layout).
	heads planMemo
}

func (l *layout) extend(name string) *layout {
	if n := l.next[name]; n != nil {
		return n
	}
	n := &layout{names: append(slices.Clip(l.names), name), index: make(map[string]int32, len(l.names)+1)}
	for i, nm := range n.names {
		n.index[nm] = int32(i)
	}
	if l.next == nil {
		l.next = make(map[string]*layout)
	}
	l.next[name] = n
	return n
}

// slotsOf returns, for each of pl's actions, the slot of the attribute it
// writes (-1 when the layout has none).
func (l *layout) slotsOf(pl *tplan) []int32 {
	if f, ok := l.heads.get(pl); ok {
		return f
	}
	f := make([]int32, len(pl.head))
	for i, h := range pl.head {
		f[i] = -1
		if j, ok := l.index[pl.names[h]]; ok {
			f[i] = j
		}
	}
	l.heads.put(pl, f)
	return f
}

// record is a stored item in slots: the value of attribute lay.names[i]
// is slot i. Numbers and the kinds of the slots live in one slice without
// pointers (a write copies it with a memmove the garbage collector need
// not scan); strings in another, shared by the records of one item until
// a write changes one of them. The values never change once stored; m,
// the map form, is built on demand. A record is a [store.View].
type record struct {
	lay *layout
	// num holds len(lay.names) numbers, then two bitsets of as many bits:
	// the slots that hold a number, the slots that hold a string.
	num []int64
	str []string // by slot (possibly shorter: no string beyond)
	n   int32    // attributes present
	// mapped is set once m is built: a writer deriving the next record
	// asks on every write, without taking mu.
	mapped atomic.Bool

	mu sync.Mutex // guards base and m
	// base is the record this one was computed from, while it has a map
	// and this one has not: the map is then built by copying base's.
	base *record
	m    store.Item
}

var _ store.View = (*record)(nil)

// newRecord returns a record of lay with no attribute. Every write of an
// item makes one: for the layouts of most items its numbers come in the
// same allocation as the record itself.
func newRecord(lay *layout) *record {
	l := len(lay.names)
	n := l + 2*words(l)
	var r *record
	var num []int64
	switch {
	case n <= 32: // a bucket of one limit (31 words)
		b := new(record32)
		r, num = &b.record, b.num[:n:n]
	case n <= 40: // two limits (39 words)
		b := new(record40)
		r, num = &b.record, b.num[:n:n]
	case n <= 48: // three limits
		b := new(record48)
		r, num = &b.record, b.num[:n:n]
	default:
		r, num = new(record), make([]int64, n)
	}
	r.lay, r.num = lay, num
	return r
}

// A record with room for its numbers (see newRecord), in the allocator's
// size classes of 352, 416 and 480 bytes.
type (
	record32 struct {
		record
		num [32]int64
	}
	record40 struct {
		record
		num [40]int64
	}
	record48 struct {
		record
		num [48]int64
	}
)

// words is the number of 64-bit words of a bitset of l bits.
func words(l int) int { return (l + 63) / 64 }

// kind returns the kind of slot i.
func (r *record) kind(i int) store.Kind {
	l := len(r.lay.names)
	w, bit := i/64, uint64(1)<<(i%64)
	switch {
	case uint64(r.num[l+w])&bit != 0:
		return store.KindNumber
	case uint64(r.num[l+words(l)+w])&bit != 0:
		return store.KindString
	}
	return store.KindNone
}

// isNumber reports whether slot i holds a number.
func (r *record) isNumber(i int) bool {
	l := len(r.lay.names)
	return uint64(r.num[l+i/64])&(1<<(i%64)) != 0
}

// at returns the value of slot i, and whether there is one.
func (r *record) at(i int) (store.Value, bool) {
	switch r.kind(i) {
	case store.KindNumber:
		return store.Int(r.num[i]), true
	case store.KindString:
		return store.Str(r.str[i]), true
	}
	return store.Value{}, false
}

// set makes slot i v (absent unless has), keeping n. The strings are
// copied before the first string is written: the caller says, in shared,
// whether they are still another record's.
func (r *record) set(i int, v store.Value, has bool, shared *bool) {
	k, n, str := store.KindNone, int64(0), ""
	if has {
		var isNum bool
		if n, isNum = v.AsInt(); isNum {
			k = store.KindNumber
		} else {
			k = store.KindString
			str, _ = v.AsString()
		}
	}
	r.setKind(i, k, n, str, shared)
}

// setKind is set with the value given by its kind: the number n, the
// string str, or none.
func (r *record) setKind(i int, k store.Kind, n int64, str string, shared *bool) {
	l := len(r.lay.names)
	w, bit := i/64, int64(1)<<(i%64)
	nb, sb := &r.num[l+w], &r.num[l+words(l)+w]
	has := k == store.KindNumber || k == store.KindString
	if had := (*nb|*sb)&bit != 0; had != has {
		if has {
			r.n++
		} else {
			r.n--
		}
	}
	*nb &^= bit
	*sb &^= bit
	switch k {
	case store.KindNumber:
		r.num[i] = n
		*nb |= bit
	case store.KindString:
		if *shared || len(r.str) <= i {
			s := make([]string, l)
			copy(s, r.str)
			r.str, *shared = s, false
		}
		r.str[i] = str
		*sb |= bit
	}
}

// Get implements [store.View.Get].
func (r *record) Get(name string) (store.Value, bool) {
	if i, ok := r.lay.index[name]; ok {
		return r.at(int(i))
	}
	return store.Value{}, false
}

// Int implements [store.View.Int].
func (r *record) Int(name string) (int64, bool) {
	if i, ok := r.lay.index[name]; ok && r.isNumber(int(i)) {
		return r.num[i], true
	}
	return 0, false
}

// Str implements [store.View.Str].
func (r *record) Str(name string) (string, bool) {
	if i, ok := r.lay.index[name]; ok && r.kind(int(i)) == store.KindString {
		return r.str[i], true
	}
	return "", false
}

// Len implements [store.View.Len].
func (r *record) Len() int { return int(r.n) }

// All implements [store.View.All]: in slot order.
func (r *record) All() iter.Seq2[string, store.Value] {
	return func(yield func(string, store.Value) bool) {
		for i, name := range r.lay.names {
			if v, ok := r.at(i); ok && !yield(name, v) {
				return
			}
		}
	}
}

// Numbers implements [store.View.Numbers].
func (r *record) Numbers() iter.Seq2[string, int64] {
	return func(yield func(string, int64) bool) {
		for i, name := range r.lay.names {
			if r.isNumber(i) && !yield(name, r.num[i]) {
				return
			}
		}
	}
}

// Item implements [store.View.Item]: the record's own map, built once.
func (r *record) Item() store.Item {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m != nil {
		return r.m
	}
	if b := r.base; b != nil {
		r.m = clone(b.m)
		nb := len(b.lay.names)
		for i, name := range r.lay.names {
			v, has := r.at(i)
			if i < nb {
				if w, had := b.at(i); had == has && w == v {
					continue
				}
			}
			if has {
				r.m[name] = v
			} else {
				delete(r.m, name)
			}
		}
		r.base = nil
		r.mapped.Store(true)
		return r.m
	}
	r.m = r.copyItem()
	r.mapped.Store(true)
	return r.m
}

// copyItem returns a new map of the record's attributes.
func (r *record) copyItem() store.Item {
	m := make(store.Item, r.n)
	for name, v := range r.All() {
		m[name] = v
	}
	return m
}

// hasMap reports whether the record's map is built.
func (r *record) hasMap() bool { return r.mapped.Load() }

// grown returns a copy of r in lay, a layout that extends r's: the same
// values, the strings shared (see set).
func (r *record) grown(lay *layout) *record {
	c := newRecord(lay)
	l, ol := len(lay.names), len(r.lay.names)
	w, ow := words(l), words(ol)
	copy(c.num, r.num[:ol])
	copy(c.num[l:l+w], r.num[ol:ol+ow])
	copy(c.num[l+w:], r.num[ol+ow:])
	c.str, c.n = r.str, r.n
	return c
}

// img is a stored item, or none: a map (m), or a record (r; m is then
// nil). It is what an entry holds and what a write reads and makes.
type img struct {
	m store.Item
	r *record
}

// mapImg returns it as an img (none for nil).
func mapImg(it store.Item) img { return img{m: it} }

// none reports whether there is no item.
func (x img) none() bool { return x.m == nil && x.r == nil }

// item returns the map form (nil for none), built once for a record.
func (x img) item() store.Item {
	if x.r != nil {
		return x.r.Item()
	}
	return x.m
}

// get returns the value of attribute name.
func (x img) get(name string) (store.Value, bool) {
	if x.r != nil {
		return x.r.Get(name)
	}
	v, ok := x.m[name]
	return v, ok
}

// str returns the string stored under name.
func (x img) str(name string) (string, bool) {
	v, _ := x.get(name)
	return v.AsString()
}

// copyItem returns a map of the item the caller may keep and modify (nil
// for none).
func (x img) copyItem() store.Item {
	if x.r != nil {
		return x.r.copyItem()
	}
	return clone(x.m)
}

// view returns the item as a store.View (a nil View for none).
func (x img) view() store.View {
	switch {
	case x.r != nil:
		return x.r
	case x.m != nil:
		return x.m
	}
	return nil
}

// slotted returns x as a record, converting a map (its names in sorted
// order, interned from the store's root layout). Call with s.mu held.
func (s *Store) slotted(x img) *record {
	if x.r != nil {
		return x.r
	}
	names := make([]string, 0, len(x.m))
	for name := range x.m {
		names = append(names, name)
	}
	slices.Sort(names)
	lay := s.root
	for _, name := range names {
		lay = lay.extend(name)
	}
	r, shared := newRecord(lay), false
	for i, name := range names {
		r.set(i, x.m[name], true, &shared)
	}
	r.m = x.m
	r.mapped.Store(true)
	return r
}
