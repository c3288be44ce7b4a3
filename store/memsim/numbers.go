package memsim

import "github.com/shardlimit/limiter/store"

// NumberReader reads the same number attributes from many items. On the
// views of a store made [WithViews] it looks the names up once per item
// layout (the items one kind of write makes share one) and then reads
// slots, instead of looking every name up in every view; any other
// [store.View] is read name by name, with the same results. A reader is
// not safe for concurrent use.
type NumberReader struct {
	names []string
	// The slots of the names in the layouts met last (-1: not in it),
	// replaced in turn.
	cached [4]layoutSlots
	next   int
}

type layoutSlots struct {
	lay   *layout
	slots []int32
}

// NewNumberReader returns a reader of the named attributes.
func NewNumberReader(names ...string) *NumberReader {
	return &NumberReader{names: append([]string(nil), names...)}
}

// Read sets dst[i] to the number attribute names[i] holds in v, and ok[i]
// to whether it holds one (dst[i] is 0 when not: absent, or a string). A
// nil v holds none. It reads as many names as dst and ok both have room
// for (all of them when both are at least as long as the names); a nil
// reader reads none.
func (r *NumberReader) Read(v store.View, dst []int64, ok []bool) {
	if r == nil {
		return
	}
	n := min(len(r.names), len(dst), len(ok))
	dst, ok = dst[:n], ok[:n]
	rec, isRec := v.(*record)
	if isRec && rec != nil {
		slots := r.slotsOf(rec.lay)[:n]
		for i, j := range slots {
			dst[i], ok[i] = 0, false
			if j >= 0 && rec.isNumber(int(j)) {
				dst[i], ok[i] = rec.num[j], true
			}
		}
		return
	}
	for i, name := range r.names[:n] {
		dst[i], ok[i] = 0, false
		if v != nil && !isRec { // a nil record holds none, as a nil view
			dst[i], ok[i] = v.Int(name)
		}
	}
}

// slotsOf returns the slots of the names in lay.
func (r *NumberReader) slotsOf(lay *layout) []int32 {
	for i := range r.cached {
		if r.cached[i].lay == lay {
			return r.cached[i].slots
		}
	}
	c := &r.cached[r.next]
	r.next = (r.next + 1) % len(r.cached)
	c.lay = lay
	c.slots = c.slots[:0]
	for _, name := range r.names {
		j, found := lay.index[name]
		if !found {
			j = -1
		}
		c.slots = append(c.slots, j)
	}
	return c.slots
}
