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
