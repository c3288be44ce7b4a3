package memsim_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/storegen"
	"github.com/shardlimit/limiter/store/memsim"
)

// pcgSource draws storegen's choices from a seeded PCG.
type pcgSource struct{ r *rand.Rand }

func (p pcgSource) Draw(_ string, n int) int { return p.r.IntN(n) }

// templateBuild is a storegen Build that makes every Expr from a
// store.Template, reusing the template of a shape already seen (so that a
// store meets the same template again, with new values, as it does the
// limiter's), and now and then one whose values are constants.
func templateBuild() func(u store.Update, c store.Condition) (store.Expr, error) {
	cache := map[string]*store.Template{}
	n := 0
	return func(u store.Update, c store.Condition) (store.Expr, error) {
		n++
		if n%5 == 0 {
			t, err := store.Compile(u, c) // no slots: every value a constant
			if err != nil {
				return store.Expr{}, err
			}
			return t.Expr(nil), nil
		}
		t, vals, err := store.Parametrize(u, c)
		if err != nil {
			return store.Expr{}, err
		}
		upd, cond := t.Strings()
		names := t.Expr(vals).Names
		keys := make([]string, 0, len(names))
		for k, v := range names {
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		shape := upd + "\x00" + cond + "\x00" + strings.Join(keys, ",")
		if old, ok := cache[shape]; ok {
			t = old
		} else {
			cache[shape] = t
		}
		if n%2 == 0 {
			return t.Compact(vals), nil
		}
		return t.Expr(vals), nil
	}
}

// outcome is everything a caller can observe of one request.
type outcome struct {
	Attributes store.Item
	Item       store.Item
	Items      []store.Item
	Consumed   store.Capacity
	Err        string
	CondItem   store.Item
	Reasons    []store.CancellationReason
	// Views lists where a view handed out disagrees with its own map
	// (empty for maps).
	Views string
}

func observe(attrs store.View, consumed store.Capacity, err error) outcome {
	o := outcome{Attributes: itemOf(attrs), Consumed: consumed, Views: viewFaults(attrs)}
	if err != nil {
		o.Err = fmt.Sprintf("%T: %v", err, err)
		var cf *store.ConditionFailedError
		if errors.As(err, &cf) {
			o.CondItem = itemOf(cf.Image())
			o.Views += viewFaults(cf.Image())
		}
		var tc *store.TransactionCanceledError
		if errors.As(err, &tc) {
			o.Reasons = tc.Reasons
		}
	}
	return o
}

// itemOf returns the map of a view (nil for none).
func itemOf(v store.View) store.Item {
	if v == nil {
		return nil
	}
	return v.Item()
}

// viewFaults returns where v's accessors disagree with its map (the map
// itself is compared with the string path's).
func viewFaults(v store.View) string {
	if v == nil {
		return ""
	}
	it, out := v.Item(), ""
	if v.Len() != len(it) {
		out += fmt.Sprintf("Len %d, map of %d; ", v.Len(), len(it))
	}
	all, nums := store.Item{}, store.Item{}
	for name, x := range v.All() {
		all[name] = x
	}
	for name, n := range v.Numbers() {
		nums[name] = store.Int(n)
	}
	for name, x := range it {
		got, ok := v.Get(name)
		n, nok := v.Int(name)
		str, sok := v.Str(name)
		wn, wnok := x.AsInt()
		ws, wsok := x.AsString()
		if !ok || got != x || all[name] != x || n != wn || nok != wnok || str != ws || sok != wsok || (nums[name] == x) != wnok {
			out += fmt.Sprintf("attribute %s: Get %v, All %v, Int %v, Str %q, Numbers %v; ", name, got, all[name], n, str, nums[name])
		}
	}
	if len(all) != len(it) {
		out += fmt.Sprintf("All yields %d; ", len(all))
	}
	if _, ok := v.Get("no such attribute"); ok {
		out += "a missing attribute found; "
	}
	return out
}

// imagesOf returns the records with their images as maps, whether the
// store handed them out as maps or views.
func imagesOf(recs []memsim.Record) []memsim.Record {
	for i := range recs {
		r := &recs[i]
		r.Old, r.New = itemOf(r.OldImage()), itemOf(r.NewImage())
		r.OldView, r.NewView = nil, nil
	}
	return recs
}

// side is one of the two stores a differential test feeds, with its
// generator. slots: the limiter-shape writes are compiled templates whose
// slots are numbered in the order the values are drawn (as the limiter
// numbers them), not in placeholder order.
type side struct {
	g     *storegen.Gen
	st    *memsim.Store
	slots bool
	cache map[string]*store.Template
}

// limiterShape draws a write of the limiter's shape on k: ADDs to token
// and counter attributes, SET of the refill time, a condition of
// attribute_exists and comparisons; with values that sometimes overflow,
// sometimes have the wrong type, sometimes make the condition false.
func (sd *side) limiterShape(k store.Key) store.UpdateInput {
	g := sd.g
	var vals []store.Value
	num := func(label string) store.Value {
		var v store.Value
		switch g.Draw(label, 20) {
		case 0:
			v = store.Int(math.MaxInt64 - int64(g.Draw(label+"big", 3)))
		case 1:
			v = store.Str("x") // ADD of a string: a validation error
		default:
			v = store.Int(int64(g.Range(label+"n", -5, 5)))
		}
		if !sd.slots {
			return v
		}
		vals = append(vals, v)
		return store.Slot(len(vals) - 1)
	}
	u := store.Update{}
	conds := []store.Condition{}
	if g.Chance("exists", 70) {
		conds = append(conds, store.Name(store.AttrPK).Exists())
	}
	for _, l := range []string{"rpm", "tpm", "wcu"}[:g.Range("limits", 1, 3)] {
		switch {
		case g.Chance("floor", 60):
			conds = append(conds, store.Name("b_"+l+"_tk").GreaterThanEqual(num("floor")))
		case g.Chance("route", 50):
			// The limiter's refill route: enough tokens, or refilled
			// far enough with no hold.
			conds = append(conds, store.Or(store.Name("b_"+l+"_tk").GreaterThanEqual(num("floor")),
				store.And(store.Name("rf").LessThanEqual(num("rfmax")), store.Name("b_"+l+"_tc").GreaterThanEqual(num("tcmin")),
					store.Name("b_"+l+"_hd").NotExists())))
		}
		u = u.Add("b_"+l+"_tk", num("tk")).Add("b_"+l+"_tc", num("tc"))
	}
	switch g.Draw("rf", 4) {
	case 0:
		u = u.Set("rf", num("rf"))
	case 1:
		u = u.SetIfNotExists("rf", num("rf"))
	case 2:
		u = u.SetIfNotExistsPlus("cnt", num("start"), num("delta"))
	}
	if g.Chance("rfcond", 30) {
		conds = append(conds, store.Name("rf").Equal(num("rfwas")))
	}
	if g.Chance("remove", 10) {
		u = u.Remove("gone")
	}
	in := store.UpdateInput{Key: k, Return: store.ReturnValue(g.Draw("ret", 5)), ReturnOldOnConditionFailure: g.Chance("retold", 50)}
	compact := g.Chance("compact", 50) // drawn on both sides: their draws stay in step
	if !sd.slots {
		in.Expr = g.Expr(u, store.And(conds...))
		return in
	}
	tmpl, err := store.Compile(u, store.And(conds...))
	if err != nil {
		panic(err)
	}
	upd, cond := tmpl.Strings()
	if old, ok := sd.cache[upd+"\x00"+cond]; ok {
		tmpl = old // the same names: limiterShape writes names in one order
	} else {
		sd.cache[upd+"\x00"+cond] = tmpl
	}
	if compact {
		in.Expr = tmpl.Compact(vals)
	} else {
		in.Expr = tmpl.Expr(vals)
	}
	return in
}

// runDrawn draws one request and runs it.
func (sd *side) runDrawn() (string, outcome) {
	g, st := sd.g, sd.st
	switch g.Draw("op", 12) {
	case 0, 1:
		in := g.PutInput(g.Key(), false)
		out, err := st.Put(ctx, in)
		return fmt.Sprintf("Put %+v", in), observe(out.Image(), out.Consumed, err)
	case 2, 3, 4:
		in := g.UpdateInput(g.Key(), false)
		out, err := st.Update(ctx, in)
		return fmt.Sprintf("Update %+v", in), observe(out.Image(), out.Consumed, err)
	case 5:
		in := g.DeleteInput(g.Key(), false)
		out, err := st.Delete(ctx, in)
		return fmt.Sprintf("Delete %+v", in), observe(out.Image(), out.Consumed, err)
	case 6, 7:
		in := g.TransactInput()
		out, err := st.TransactWrite(ctx, in)
		return fmt.Sprintf("TransactWrite %+v", in), observe(nil, out.Consumed, err)
	case 8:
		in := store.GetInput{Key: g.Key(), ConsistentRead: true}
		out, err := st.Get(ctx, in)
		o := observe(nil, out.Consumed, err)
		o.Item = out.Item
		return fmt.Sprintf("Get %+v", in), o
	}
	in := sd.limiterShape(g.Key())
	out, err := st.Update(ctx, in)
	return fmt.Sprintf("Update (limiter shape) %+v", in), observe(out.Image(), out.Consumed, err)
}

// TestTemplatePathMatchesStringPath runs the same random requests on two
// stores, one given Exprs from store.Build (the string path) and one the
// same Exprs from store.Templates (the structured path, with templates met
// again and again, with and without the Values map), and requires the same answers, errors and messages
// included, the same items, stream and counters.
func TestTemplatePathMatchesStringPath(t *testing.T) {
	seqs, ops := 300, 60
	if testing.Short() {
		seqs = 60
	}
	clk := memsim.WithClock(memsim.NewManualClock(memsim.Epoch())) // the stores' streams carry the same times
	for seed := range uint64(seqs) {
		str := &side{g: &storegen.Gen{Src: pcgSource{rand.New(rand.NewPCG(seed, 1))}, NS: "t"}, st: memsim.New(clk)}
		tpl := &side{g: &storegen.Gen{Src: pcgSource{rand.New(rand.NewPCG(seed, 1))}, NS: "t", Build: templateBuild()},
			st: memsim.New(clk), slots: true, cache: map[string]*store.Template{}}
		// The structured path again, its items in slots and its results
		// handed out as views.
		vw := &side{g: &storegen.Gen{Src: pcgSource{rand.New(rand.NewPCG(seed, 1))}, NS: "t", Build: templateBuild()},
			st: memsim.New(memsim.WithViews(true), clk), slots: true, cache: map[string]*store.Template{}}
		for i := range ops {
			desc, want := str.runDrawn()
			for _, sd := range []*side{tpl, vw} {
				_, got := sd.runDrawn()
				if d := cmp.Diff(want, got, valueCmp); d != "" {
					t.Fatalf("seed %d op %d (views %v): %s\n(-string path +template path):\n%s", seed, i, sd == vw, desc, d)
				}
			}
		}
		strS := str.st
		for _, st := range []*memsim.Store{tpl.st, vw.st} {
			if d := cmp.Diff(strS.Items(), st.Items(), valueCmp); d != "" {
				t.Fatalf("seed %d: items differ:\n%s", seed, d)
			}
			if d := cmp.Diff(strS.Stream(0), imagesOf(st.Stream(0)), valueCmp); d != "" {
				t.Fatalf("seed %d: streams differ:\n%s", seed, d)
			}
			if d := cmp.Diff(strS.Totals(), st.Totals()); d != "" {
				t.Fatalf("seed %d: totals differ:\n%s", seed, d)
			}
		}
	}
}

// A template Expr whose values are not all there, or not all valid, or
// whose maps were replaced, is judged from its strings and maps: the
// answer of the Expr written by hand.
func TestTemplateFallsBackToStrings(t *testing.T) {
	tmpl := store.MustCompile(store.Update{}.Add("n", store.Slot(0)).Set("m", store.Slot(1)),
		store.Name("n").LessThan(store.Slot(2)))
	hand := func(vals map[string]store.Value) store.Expr {
		return store.Expr{Update: "SET #a0 = :v0 ADD #a1 :v1", Condition: "#a1 < :v2",
			Names: map[string]string{"#a0": "m", "#a1": "n"}, Values: vals}
	}
	for _, c := range []struct {
		name string
		got  store.Expr
		want store.Expr
	}{
		{"a slot without a value", tmpl.Expr([]store.Value{store.Int(1), store.Int(2)}),
			hand(map[string]store.Value{":v0": store.Int(2), ":v1": store.Int(1)})},
		{"a zero value", tmpl.Expr([]store.Value{store.Int(1), {}, store.Int(3)}),
			hand(map[string]store.Value{":v0": {}, ":v1": store.Int(1), ":v2": store.Int(3)})},
		{"a string to ADD", tmpl.Expr([]store.Value{store.Str("x"), store.Int(2), store.Int(3)}),
			hand(map[string]store.Value{":v0": store.Int(2), ":v1": store.Str("x"), ":v2": store.Int(3)})},
		{"a replaced Values map", func() store.Expr {
			e := tmpl.Expr([]store.Value{store.Int(1), store.Int(2), store.Int(3)})
			e.Values = map[string]store.Value{":v0": store.Int(7), ":v1": store.Int(8), ":v2": store.Int(9)}
			return e
		}(), hand(map[string]store.Value{":v0": store.Int(7), ":v1": store.Int(8), ":v2": store.Int(9)})},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := key("fb")
			var outs [2]outcome
			for i, e := range []store.Expr{c.want, c.got} {
				s := memsim.New()
				mustPut(t, s, item(k, "n", 1))
				out, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: e, Return: store.ReturnAllNew})
				outs[i] = observe(out.Image(), out.Consumed, err)
			}
			if d := cmp.Diff(outs[0], outs[1], valueCmp); d != "" {
				t.Fatalf("(-by hand +template):\n%s", d)
			}
		})
	}
}

// The view a store keeps beside an item goes stale when another path
// writes the item: a template write after a string-path write, a Put, a
// transaction, a delete and a re-creation sees the item as it is.
func TestTemplateViewFollowsOtherWrites(t *testing.T) {
	s := memsim.New()
	k := key("v")
	tmpl := store.MustCompile(store.Update{}.Add("n", store.Slot(0)), store.Name("n").GreaterThanEqual(store.Slot(1)))
	add := func(d, floor int64) store.Item {
		t.Helper()
		out, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: tmpl.Expr([]store.Value{store.Int(d), store.Int(floor)}), Return: store.ReturnAllNew})
		if err != nil {
			t.Fatalf("add %d (n >= %d): %v", d, floor, err)
		}
		return out.Attributes
	}
	mustPut(t, s, item(k, "n", 10))
	wantItem(t, add(-1, 10), item(k, "n", 9))
	mustUpdate(t, s, store.UpdateInput{Key: k, Expr: build(t, store.Update{}.Add("n", store.Int(100)), store.Condition{})})
	wantItem(t, add(-1, 109), item(k, "n", 108))
	mustPut(t, s, item(k, "n", 5))
	wantItem(t, add(1, 5), item(k, "n", 6))
	if _, err := s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.TransactAction{
		{Update: &store.UpdateInput{Key: k, Expr: tmpl.Expr([]store.Value{store.Int(10), store.Int(0)})}},
		{Put: &store.PutInput{Item: item(key("other"))}},
	}}); err != nil {
		t.Fatal(err)
	}
	wantItem(t, add(1, 16), item(k, "n", 17))
	if _, err := s.Delete(ctx, store.DeleteInput{Key: k}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, item(k, "n", 2))
	wantItem(t, add(1, 2), item(k, "n", 3))
	_, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: tmpl.Expr([]store.Value{store.Int(1), store.Int(4)})})
	wantCondFailed(t, err)
}
