package memsim_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// viewTemplates are writes of one item by more templates than memsim keeps
// views of: overlapping names, ADDs, SETs, if_not_exists, REMOVEs, a
// string attribute, conditions on what the others write. slot(i) is the
// i-th value of a write.
func viewTemplates(slot func(int) store.Value) []struct {
	u store.Update
	c store.Condition
} {
	return []struct {
		u store.Update
		c store.Condition
	}{
		{store.Update{}.Add("a", slot(0)).Add("b", slot(1)), store.Name("a").GreaterThanEqual(slot(2))},
		{store.Update{}.Add("b", slot(0)).Set("c", slot(1)), store.Name("c").Exists()},
		{store.Update{}.Set("a", slot(0)).Remove("d"), store.Name("b").LessThan(slot(1))},
		{store.Update{}.SetIfNotExists("d", slot(0)).Add("e", slot(1)), store.Condition{}},
		{store.Update{}.SetIfNotExistsPlus("e", slot(0), slot(1)), store.Name("a").NotExists()},
		{store.Update{}.Set("s", slot(0)).Add("a", slot(1)), store.Name("s").NotEqual(slot(2))},
		{store.Update{}.Remove("a").Add("f", slot(0)), store.Name("f").LessThanEqual(slot(1))},
		{store.Update{}.Add("c", slot(0)).Add("f", slot(1)).Add("b", slot(2)), store.Name("d").Exists()},
		{store.Update{}.Add("b", slot(0)), store.Name("s").Equal(slot(1))}, // reads the string the sixth writes
	}
}

// The views memsim keeps beside an item for the templates that write it
// follow each other's writes: nine templates (more than it keeps views
// of) writing one item in a random order, now and then with a string-path
// write between them, give the answers (write units included: the item
// hovers around 1 KB) and items of the string path; with WithViews too,
// where the item is kept in slots, every other seed with more than 64
// attributes (two words of each kind bitset).
func TestTemplateViewsFollowEachOther(t *testing.T) {
	for _, views := range []bool{false, true} {
		t.Run(fmt.Sprint("views=", views), func(t *testing.T) { templateViewsFollowEachOther(t, views) })
	}
}

func templateViewsFollowEachOther(t *testing.T, views bool) {
	k := key("views")
	direct := func(i int) store.Value { return store.Slot(i) }
	tmpls := make([]*store.Template, 0, 8)
	for _, w := range viewTemplates(direct) {
		tmpls = append(tmpls, store.MustCompile(w.u, w.c))
	}
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 2))
		str, tpl := memsim.New(), memsim.New(memsim.WithViews(views))
		first := item(k, "a", 5, "b", 1, "c", 2, "s", "x", "filler", strings.Repeat("f", 960+int(seed)))
		if seed%2 == 1 {
			for i := range 70 {
				first[fmt.Sprintf("n%02d", i)] = store.Int(int64(i))
			}
		}
		for _, s := range []*memsim.Store{str, tpl} {
			// A filler near 1 KB: sizes that drift show in the write units.
			mustPut(t, s, first)
		}
		for op := range 200 {
			i := r.IntN(len(tmpls))
			vals := make([]store.Value, 3)
			for j := range vals {
				vals[j] = store.Int(int64(r.IntN(7)-3) * []int64{1, 100, 10_000, 1_000_000}[r.IntN(4)])
			}
			switch i {
			case 5:
				vals[0] = store.Str(fmt.Sprint("s", r.IntN(3)))
			case 8:
				vals[1] = store.Str(fmt.Sprint("s", r.IntN(3)))
			}
			w := viewTemplates(func(j int) store.Value { return vals[j] })[i]
			in := store.UpdateInput{Key: k, Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}
			var outs [2]outcome
			for side, s := range []*memsim.Store{str, tpl} {
				in.Expr = build(t, w.u, w.c)
				if side == 1 {
					in.Expr = tmpls[i].Expr(vals)
				}
				if r.IntN(20) == 0 && side == 0 {
					// A write of neither path's template, on both stores.
					other := store.UpdateInput{Key: k, Expr: build(t, store.Update{}.Add("b", store.Int(1)), store.Condition{})}
					mustUpdate(t, str, other)
					mustUpdate(t, tpl, other)
				}
				out, err := s.Update(ctx, in)
				outs[side] = observe(out.Image(), out.Consumed, err)
			}
			if d := cmp.Diff(outs[0], outs[1], valueCmp); d != "" {
				t.Fatalf("seed %d op %d (template %d, values %v) (-string path +template path):\n%s", seed, op, i, vals, d)
			}
		}
		if d := cmp.Diff(str.Items(), tpl.Items(), valueCmp); d != "" {
			t.Fatalf("seed %d: items differ:\n%s", seed, d)
		}
	}
}

// memsim keeps an item in slots in the order of its attributes' names,
// whatever the order of the map it came from: stores given the same item
// hand out its attributes in the same order, so a simulation repeats
// byte for byte.
func TestViewsOrderAttributesByName(t *testing.T) {
	k := key("order")
	it := item(k)
	for i := range 30 {
		it[fmt.Sprintf("x%02d", i)] = store.Int(int64(i))
	}
	add := store.MustCompile(store.Update{}.Add("x00", store.Slot(0)), store.Condition{})
	var first []string
	for run := range 5 {
		s := memsim.New(memsim.WithViews(true))
		mustPut(t, s, it)
		out := mustUpdate(t, s, store.UpdateInput{Key: k, Expr: add.Expr([]store.Value{store.Int(1)}), Return: store.ReturnAllNew})
		var names []string
		for name := range out.Image().All() {
			names = append(names, name)
		}
		if run == 0 {
			first = names
		} else if !slices.Equal(names, first) {
			t.Fatalf("store %d hands out the attributes in another order:\n%v\nthe first:\n%v", run, names, first)
		}
	}
}

// An item of exactly 64 attributes, the first ones strings, that a write
// extends by one more keeps the new one in its map. Slot 64 is the first
// past the old layout, whose bitsets end on a word: read there, the old
// record's string bits would pass for a number, the number bits (-8 here:
// slots 3 to 63) for its value, and the new attribute of that value would
// look unchanged.
func TestViewsItemOfAWriteThatAddsSlot64(t *testing.T) {
	k := key("wide")
	it := item(k, "a", "s") // PK, SK and a: slots 0 to 2, strings
	for i := 0; len(it) < 64; i++ {
		it[fmt.Sprintf("n%02d", i)] = store.Int(int64(i))
	}
	s := memsim.New(memsim.WithViews(true))
	mustPut(t, s, it)
	add := store.MustCompile(store.Update{}.Add("n00", store.Slot(0)), store.Condition{})
	out := mustUpdate(t, s, store.UpdateInput{Key: k, Expr: add.Expr([]store.Value{store.Int(1)}), Return: store.ReturnAllNew})
	_ = out.Image().Item() // the map the next write's item is built from
	set := store.MustCompile(store.Update{}.Set("zz", store.Slot(0)), store.Condition{})
	out = mustUpdate(t, s, store.UpdateInput{Key: k, Expr: set.Expr([]store.Value{store.Int(-8)}), Return: store.ReturnAllNew})
	if v, ok := out.Image().Item()["zz"]; !ok || !v.Equal(store.Int(-8)) {
		t.Fatalf("zz = %v (%v) in the item's map, want -8", v, ok)
	}
	if v, ok := s.Peek(k)["zz"]; !ok || !v.Equal(store.Int(-8)) {
		t.Fatalf("zz = %v (%v) stored, want -8", v, ok)
	}
}

// A NumberReader reads what View.Int reads, from views of many layouts
// (more than it remembers) in turn, from maps, and from no item: strings
// and absent names read as none.
func TestNumberReaderReadsWhatIntReads(t *testing.T) {
	s := memsim.New(memsim.WithViews(true))
	add := store.MustCompile(store.Update{}.Add("a", store.Slot(0)).Add("n03", store.Slot(1)), store.Condition{})
	// A0 sorts before every other name: a layout's slot 0.
	names := []string{"A0", "a", "s", "n00", "n03", "n07", "missing"}
	r := memsim.NewNumberReader(names...)
	var views []store.View
	for i := range 7 { // seven item shapes: seven layouts
		k := key(fmt.Sprint("shape", i))
		it := item(k, "s", "text")
		it["A0"] = store.Int(int64(100 + i))
		for j := range i + 2 { // n07 in the last only
			it[fmt.Sprintf("n%02d", j)] = store.Int(int64(10*i + j))
		}
		mustPut(t, s, it)
		out, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: add.Expr([]store.Value{store.Int(int64(i)), store.Int(1)}), Return: store.ReturnAllNew})
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, out.Image(), out.Image().Item())
	}
	views = append(views, nil)
	dst, ok := make([]int64, len(names)), make([]bool, len(names))
	for round := range 3 {
		for i, v := range views {
			r.Read(v, dst, ok)
			for j, name := range names {
				var want int64
				var wantOK bool
				if v != nil {
					want, wantOK = v.Int(name)
				}
				if dst[j] != want || ok[j] != wantOK {
					t.Fatalf("round %d view %d %s: read %d, %v; Int says %d, %v", round, i, name, dst[j], ok[j], want, wantOK)
				}
			}
		}
	}
}
