package memsim_test

import (
	"fmt"
	"testing"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// memsim's views are slot views: a name's slot in the view's layout reads
// what Int reads by name (a string, an absent name and a slot out of range
// read as none), and the items one kind of write makes share one layout.
func TestViewsAreSlotViews(t *testing.T) {
	s := memsim.New(memsim.WithViews(true))
	add := store.MustCompile(store.Update{}.Add("a", store.Slot(0)), store.Condition{})
	var lays []store.Layout
	for i := range 2 {
		k := key(fmt.Sprint("item", i))
		it := item(k, "s", "text")
		it["a"], it["n"] = store.Int(int64(i)), store.Int(7)
		mustPut(t, s, it)
		out := mustUpdate(t, s, store.UpdateInput{Key: k, Expr: add.Expr([]store.Value{store.Int(5)}), Return: store.ReturnAllNew})
		v, ok := out.Image().(store.SlotView)
		if !ok {
			t.Fatalf("a view %T is not a slot view", out.Image())
		}
		lay := v.Layout()
		for _, name := range []string{"a", "n", "s", store.AttrPK, "missing"} {
			want, wantOK := v.Int(name)
			got, gotOK := v.IntAt(lay.Slot(name))
			if got != want || gotOK != wantOK {
				t.Errorf("%s: slot %d reads %d %v, by name %d %v", name, lay.Slot(name), got, gotOK, want, wantOK)
			}
		}
		if lay.Slot("missing") != -1 {
			t.Errorf("an absent name at slot %d, want -1", lay.Slot("missing"))
		}
		for _, i := range []int{-1, v.Len() + 5} {
			if n, ok := v.IntAt(i); ok || n != 0 {
				t.Errorf("slot %d reads %d %v, want none", i, n, ok)
			}
		}
		lays = append(lays, lay)
	}
	if lays[0] != lays[1] {
		t.Error("two items made alike have two layouts")
	}
}

// Names that share their bytes (one a prefix of another, cut from the same
// string) are told apart by their lengths: every one reads its own
// attribute, whatever order they are asked in, and a slot read by position
// reads what the name reads, slot 0 and the last slot included.
func TestViewsTellApartNamesSharingBytes(t *testing.T) {
	const all = "abcdefgh"
	s := memsim.New(memsim.WithViews(true))
	k := key("prefixes")
	it := item(k)
	for n := 1; n <= len(all); n++ {
		it[all[:n]] = store.Int(int64(n))
	}
	it["A0"] = store.Int(-1) // sorts first: slot 0
	mustPut(t, s, it)
	add := store.MustCompile(store.Update{}.Add("A0", store.Slot(0)), store.Condition{})
	v := mustUpdate(t, s, store.UpdateInput{Key: k, Expr: add.Expr([]store.Value{store.Int(0)}), Return: store.ReturnAllNew}).Image()
	for _, order := range [][]int{{1, 2, 3, 4, 5, 6, 7, 8}, {8, 7, 6, 5, 4, 3, 2, 1}, {3, 1, 4, 8, 5, 2, 6, 7}} {
		for round := range 2 {
			for _, n := range order {
				name := all[:n] // the same bytes every time
				if got, ok := v.Int(name); !ok || got != int64(n) {
					t.Fatalf("order %v, round %d: %q reads %d %v, want %d", order, round, name, got, ok, n)
				}
			}
		}
	}
	sv := v.(store.SlotView)
	lay := sv.Layout()
	if lay.Slot("A0") != 0 {
		t.Fatalf("A0 at slot %d, want 0", lay.Slot("A0"))
	}
	last := -1
	for name := range v.All() {
		last = max(last, lay.Slot(name))
	}
	for _, i := range []int{0, last} {
		var want int64
		var wantOK bool
		for name := range v.All() {
			if lay.Slot(name) == i {
				want, wantOK = v.Int(name)
			}
		}
		if got, ok := sv.IntAt(i); got != want || ok != wantOK {
			t.Errorf("slot %d reads %d %v, by name %d %v", i, got, ok, want, wantOK)
		}
	}
	if got, ok := sv.IntAt(last + 1); ok || got != 0 {
		t.Errorf("the slot after the last reads %d %v, want none", got, ok)
	}
}

// A layout of 64 names (its number bits fill one word exactly, the string
// bits follow): the slot just past the last reads as none, not as a bit of
// the words that follow the slots.
func TestIntAtPastSixtyFourSlots(t *testing.T) {
	s := memsim.New(memsim.WithViews(true))
	k := key("wide64")
	it := item(k) // PK and SK: strings, PK in slot 0
	for i := 0; len(it) < 64; i++ {
		it[fmt.Sprintf("n%02d", i)] = store.Int(int64(i))
	}
	mustPut(t, s, it)
	add := store.MustCompile(store.Update{}.Add("n00", store.Slot(0)), store.Condition{})
	sv := mustUpdate(t, s, store.UpdateInput{Key: k, Expr: add.Expr([]store.Value{store.Int(1)}), Return: store.ReturnAllNew}).Image().(store.SlotView)
	if sv.Len() != 64 || sv.Layout().Slot(store.AttrPK) != 0 {
		t.Fatalf("%d attributes, PK at slot %d: want 64, 0", sv.Len(), sv.Layout().Slot(store.AttrPK))
	}
	if got, ok := sv.IntAt(64); ok || got != 0 {
		t.Fatalf("slot 64 of 64 reads %d %v, want none", got, ok)
	}
}
