package engine

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// names is a store.Layout: the sorted names of an item.
type names struct{ at []string }

func (l *names) Slot(name string) int { return slices.Index(l.at, name) }

// slotted is an Item as a store.SlotView of the layout lay, which must
// hold every name of the item.
type slotted struct {
	store.View // the Item
	lay        *names
	byName     *int // counts the reads by name
}

func (v slotted) Layout() store.Layout { return v.lay }

func (v slotted) IntAt(i int) (int64, bool) {
	if i < 0 || i >= len(v.lay.at) {
		return 0, false
	}
	return v.View.Int(v.lay.at[i])
}

func (v slotted) Int(name string) (int64, bool) {
	*v.byName++
	return v.View.Int(name)
}

func layoutOf(it store.Item) *names { return &names{at: slices.Sorted(maps.Keys(it))} }

// A slot view decodes as its item does, read by slot: the same image, or
// the same failure, also for items the quick decoder hands to the full
// one (a field gone, a guard that is not a number, a layout with names
// the item lacks).
func TestDecodeForReadsSlotViewsAsItems(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rpm", 100), perMinute("tpm", 6000)}, map[string]int64{"rpm": 1})
	base := func() store.Item {
		it := p.create(0, 2, T).Item
		it[p.specs[0].fl], it[p.specs[0].fh] = store.Int(T+5), store.Int(T+9)
		it[p.specs[1].tk] = store.Int(-300)
		return it
	}
	cases := map[string]func(store.Item){
		"as made":                func(store.Item) {},
		"a guard not a number":   func(it store.Item) { it[p.specs[1].fh] = store.Str("?") },
		"a guard gone":           func(it store.Item) { delete(it, p.specs[0].fl) },
		"tokens gone":            func(it store.Item) { delete(it, p.specs[1].tk) },
		"another hash":           func(it store.Item) { it[keys.AttrLimitsHash] = store.Int(p.hash + 1) },
		"no refill time":         func(it store.Item) { delete(it, attrRefill) },
		"a capacity of 0":        func(it store.Item) { it[p.specs[0].cp] = store.Int(0) },
		"shard count not a num":  func(it store.Item) { it[keys.AttrShardCount] = store.Str("2") },
		"an attribute in place":  func(it store.Item) { delete(it, p.specs[0].rp); it["x"] = store.Int(1) },
		"a guard's place taken":  func(it store.Item) { delete(it, p.specs[1].fl); it["x"] = store.Int(1) },
		"a layout of more names": nil,
	}
	for name, change := range cases {
		for kind, decode := range map[string]func(store.View) (*Image, error){
			"any":     func(v store.View) (*Image, error) { return decodeFor(p, v, nil) },
			"written": func(v store.View) (*Image, error) { return decodeWritten(p, v, nil) },
			"hashed":  func(v store.View) (*Image, error) { return decodeQuick(p, v, nil, decodeHashed) },
		} {
			it := base()
			lay := layoutOf(it)
			if change != nil {
				change(it)
				lay = layoutOf(it)
			} else {
				lay.at = append(lay.at, "b_zz_tk", "b_zz_fl") // names the item lacks
			}
			// A field in slot 0 (the first limit's balance, when the item
			// has it).
			if j := slices.Index(lay.at, p.specs[0].tk); j > 0 {
				lay.at[0], lay.at[j] = lay.at[j], lay.at[0]
			}
			want, werr := decode(it)
			var byName int
			got, gerr := decode(slotted{it, lay, &byName})
			if name == "as made" && byName != 0 {
				t.Fatalf("%s, %s: %d reads by name of a slot view", name, kind, byName)
			}
			if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
				t.Fatalf("%s, %s: by slot %v, by name %v", name, kind, gerr, werr)
			}
			if werr != nil {
				continue
			}
			if diff := cmp.Diff(want.comp, got.comp); diff != "" || got.rf != want.rf || got.hash != want.hash ||
				got.shardCount != want.shardCount || got.guards != want.guards || got.specAt != want.specAt || got.pt != want.pt {
				t.Fatalf("%s, %s: a slot view decodes unlike its item: %s\n%+v\n%+v", name, kind, diff, got, want)
			}
		}
	}
}

// A template remembers the slots of its fields in the four layouts met
// last: a fifth replaces the oldest, and every layout reads right.
func TestSlotsInRemembersFourLayouts(t *testing.T) {
	// Limits of this test alone: the plan template, and its layouts, are
	// the process's.
	p := NewPlan(bucketRef, []Limit{perSecond("slotsin", 100)}, map[string]int64{"slotsin": 1})
	p.pt.slots.Store(nil) // (as a first run found it)
	var lays []*names
	for i := range 5 {
		it := p.create(0, 1, T).Item
		for j := range i {
			it["pad"+string(rune('a'+j))] = store.Int(1) // another layout: names before the fields
		}
		lays = append(lays, layoutOf(it))
	}
	slotsOf := func(l *names) []int32 { return p.pt.slotsIn(l) }
	slotsOf(lays[0])
	slotsOf(lays[1])
	if c := p.pt.slots.Load(); c.n != 2 || c.lays[0] != store.Layout(lays[1]) || c.lays[1] != store.Layout(lays[0]) {
		t.Fatalf("after two layouts, %d remembered: %v", c.n, c.lays)
	}
	for round := range 2 {
		for i, l := range lays {
			at := slotsOf(l)
			if want := int32(l.Slot(p.specs[0].tk)); at[fieldOf(0, fieldTokens)] != want {
				t.Fatalf("round %d, layout %d: tokens at slot %d, want %d", round, i, at[fieldOf(0, fieldTokens)], want)
			}
			if at[fieldOf(0, fieldFullLo)] != int32(l.Slot(p.specs[0].fl)) || at[fieldRefill] != int32(l.Slot(attrRefill)) {
				t.Fatalf("round %d, layout %d: slots %v", round, i, at)
			}
		}
	}
	c := p.pt.slots.Load()
	if c.n != 4 || c.lays[0] != store.Layout(lays[4]) {
		t.Fatalf("%d layouts remembered, newest %p: want 4, the last met first", c.n, c.lays[0])
	}
	for i, l := range lays[1:] {
		if allocs := testing.AllocsPerRun(20, func() { slotsOf(l) }); allocs != 0 {
			t.Fatalf("layout %d, one of the last four met, allocates %.0f times: not remembered", i+1, allocs)
		}
	}
}

// mapLayout is a layout of a type that == cannot compare.
type mapLayout map[string]int

func (l mapLayout) Slot(name string) int {
	if i, ok := l[name]; ok {
		return i
	}
	return -1
}

// odd is a slot view whose layout is lay (nil, or not comparable).
type odd struct {
	store.View
	lay store.Layout
}

func (v odd) Layout() store.Layout { return v.lay }

func (v odd) IntAt(i int) (int64, bool) {
	for name, j := range v.lay.(mapLayout) {
		if j == i {
			return v.View.Int(name)
		}
	}
	return 0, false
}

// A slot view whose layout is nil is read by name; one whose layout's type
// cannot be compared is read by slot but never remembered (comparing it
// would panic): both decode as their item, again and again.
func TestDecodeForOddLayouts(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rpm", 100)}, map[string]int64{"rpm": 1})
	it := p.create(0, 1, T).Item
	want, err := decodeFor(p, it, nil)
	if err != nil {
		t.Fatal(err)
	}
	lay := mapLayout{}
	for i, name := range layoutOf(it).at {
		lay[name] = i
	}
	for name, v := range map[string]store.View{"nil layout": odd{View: it}, "a map layout": odd{View: it, lay: lay}} {
		for range 3 {
			got, err := decodeFor(p, v, nil)
			if err != nil || got.rf != want.rf || got.guards != want.guards || got.comp.Limits[0] != want.comp.Limits[0] {
				t.Fatalf("%s: %+v (%v), want %+v", name, got, err, want)
			}
		}
	}
}
