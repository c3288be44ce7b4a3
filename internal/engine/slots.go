package engine

import (
	"reflect"

	"github.com/shardlimit/limiter/store"
)

// Reading an item by slot. A store whose results are slot views (memsim's)
// keeps each attribute of the items that share a layout in the same slot:
// the plan template finds the slots of its fields once per layout, and a
// decode then reads slots instead of looking every name up (a lookup by
// name hashes the name: fifteen of them per decode of a two-limit item).

// The fields of a plan template, as numbered for slot lookups: the
// item's three, then eight per limit in the template's order (fieldOf).
const (
	fieldRefill = iota
	fieldHash
	fieldShardCount
	itemFields
)

// A limit's fields, as offsets from fieldOf(i, 0).
const (
	fieldTokens = iota
	fieldTotal
	fieldFullLo
	fieldFullHi
	fieldCapacity
	fieldBurst
	fieldRefillAmount
	fieldRefillPeriod
	limitFields
)

// fieldOf returns the number of field j of the template's i-th limit.
func fieldOf(i, j int) int { return itemFields + i*limitFields + j }

// layoutSlots is the slots of a template's fields in the layouts met last:
// immutable once published, replaced whole.
type layoutSlots struct {
	n    int
	lays [4]store.Layout
	at   [4][]int32
}

// slotsIn returns the slot of each of the template's fields (see fieldOf)
// in lay, -1 for a field lay has none of. A template remembers the four
// layouts met last (a store interns layouts: the items of one shape share
// one), so that this is one comparison after the first time. (The plan
// template cache is the process's: a template may keep the last layouts of
// a store that is gone, and stores share its four entries.)
func (pt *planTemplate) slotsIn(lay store.Layout) []int32 {
	c := pt.slots.Load()
	if c != nil {
		for i := 0; i < c.n; i++ {
			if c.lays[i] == lay {
				return c.at[i]
			}
		}
	}
	at := make([]int32, itemFields+limitFields*len(pt.specs))
	slot := func(k int, name string) { at[k] = int32(lay.Slot(name)) }
	slot(fieldRefill, attrRefill)
	slot(fieldHash, attrLimitsHash)
	slot(fieldShardCount, attrShardCount)
	for i := range pt.specs {
		s, k := &pt.specs[i], fieldOf(i, 0)
		slot(k+fieldTokens, s.tk)
		slot(k+fieldTotal, s.tc)
		slot(k+fieldFullLo, s.fl)
		slot(k+fieldFullHi, s.fh)
		slot(k+fieldCapacity, s.cp)
		slot(k+fieldBurst, s.bx)
		slot(k+fieldRefillAmount, s.ra)
		slot(k+fieldRefillPeriod, s.rp)
	}
	if !reflect.TypeOf(lay).Comparable() {
		return at // never remembered: comparing it would panic
	}
	// The newest first; the oldest of four falls out. A race between two
	// publishers loses one of their entries: it is found again next time.
	next := &layoutSlots{n: 1}
	next.lays[0], next.at[0] = lay, at
	if c != nil {
		for i := 0; i < c.n && next.n < len(next.lays); i++ {
			next.lays[next.n], next.at[next.n] = c.lays[i], c.at[i]
			next.n++
		}
	}
	pt.slots.Store(next)
	return at
}
