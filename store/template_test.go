package store_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shardlimit/limiter/store"
)

// randomShape builds an update and a condition with each value passed
// through val, so that the same draws give the builders with values and
// with slots.
func randomShape(r *rand.Rand, val func(store.Value) store.Value) (store.Update, store.Condition) {
	names := []string{"a", "b", "ttl", "gpt-3.5", "rf"}
	v := func() store.Value {
		if r.IntN(4) == 0 {
			return val(store.Str([]string{"", "x"}[r.IntN(2)]))
		}
		return val(store.Int(int64(r.IntN(100) - 50)))
	}
	u := store.Update{}
	for range r.IntN(5) {
		n := names[r.IntN(len(names))]
		switch r.IntN(6) {
		case 0:
			u = u.Add(n, v())
		case 1:
			u = u.Set(n, v())
		case 2:
			u = u.SetIfNotExists(n, v())
		case 3:
			u = u.SetIfNotExistsPlus(n, v(), v())
		case 4:
			u = u.Remove(n)
		default:
			u = u.Set(n, store.Name(names[r.IntN(len(names))]))
		}
	}
	var conds []store.Condition
	for range r.IntN(4) {
		n := store.Name(names[r.IntN(len(names))])
		switch r.IntN(7) {
		case 0:
			conds = append(conds, n.Exists())
		case 1:
			conds = append(conds, store.Not(n.NotExists()))
		case 2:
			conds = append(conds, n.Between(v(), v()))
		case 3:
			conds = append(conds, n.BeginsWith("x"))
		case 4:
			conds = append(conds, store.Or(n.LessThan(v()), n.GreaterThanEqual(v())))
		default:
			conds = append(conds, n.Equal(v()))
		}
	}
	return u, store.And(conds...)
}

// A template's Expr is what Build makes of the same builders with the
// values in place of the slots, whatever the order of the slot numbers,
// whether the template is compiled or parametrized.
func TestTemplateExprEqualsBuild(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		seed := r.Uint64()
		var vals []store.Value
		plainU, plainC := randomShape(rand.New(rand.NewPCG(seed, 0)), func(v store.Value) store.Value { return v })
		slotU, slotC := randomShape(rand.New(rand.NewPCG(seed, 0)), func(v store.Value) store.Value {
			vals = append(vals, v)
			return store.Slot(len(vals) - 1)
		})
		want, err := store.Build(plainU, plainC)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := store.Compile(slotU, slotC)
		if err != nil {
			t.Fatal(err)
		}
		if tmpl.Slots() != len(vals) {
			t.Fatalf("Slots() = %d, want %d", tmpl.Slots(), len(vals))
		}
		for round := 0; round < 2; round++ {
			got := tmpl.Expr(vals)
			if !got.Equal(want) || !want.Equal(got) {
				t.Fatalf("template Expr %+v\nBuild %+v", got, want)
			}
			if diff := cmp.Diff(want, got); diff != "" { // cmp uses Expr.Equal
				t.Fatal(diff)
			}
			if tt, args := got.Template(); tt != tmpl || len(args) != len(want.Values) {
				t.Fatalf("Template() = %p, %v", tt, args)
			}
		}
		compact := tmpl.Compact(vals)
		if compact.Values != nil || !compact.Equal(want) || !store.Expr.Equal(want, compact) {
			t.Fatalf("Compact %+v (values %v)\nBuild %+v", compact, compact.ValueMap(), want)
		}
		if tt, args := compact.Template(); tt != tmpl || len(args) != len(want.Values) {
			t.Fatalf("Compact: Template() = %p, %v", tt, args)
		}
		// CompactArgs: the same values given by placeholder.
		args := make([]store.Value, len(tmpl.ValuePlaceholders()))
		for i := range args {
			if k := tmpl.SlotOf(i); k >= 0 {
				args[i] = vals[k]
			} // else a constant (BeginsWith's prefix): the template fills it in
		}
		if byArgs := tmpl.CompactArgs(args); byArgs.Values != nil || !byArgs.Equal(want) {
			t.Fatalf("CompactArgs %+v (values %v)\nBuild %+v", byArgs, byArgs.ValueMap(), want)
		}
		p, pvals, err := store.Parametrize(plainU, plainC)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Expr(pvals); !got.Equal(want) {
			t.Fatalf("Parametrize: %+v\nBuild %+v", got, want)
		}
		if ph := p.ValuePlaceholders(); len(ph) != len(want.Values) {
			t.Fatalf("ValuePlaceholders %v for %v", ph, want.Values)
		}
	}
}

func TestCompileRejects(t *testing.T) {
	for _, c := range []struct {
		u    store.Update
		c    store.Condition
		want string
	}{
		{store.Update{}.Add("a", store.Slot(1)), store.Condition{}, "Slot(1) is used, Slot(0) is not"},
		{store.Update{}.Add("a", store.Slot(0)).Add("b", store.Slot(2)), store.Condition{}, "Slot(2) is used, Slot(1) is not"},
		{store.Update{}.Add("a", store.Slot(-1)), store.Condition{}, "negative"},
		{store.Update{}.Add("", store.Slot(0)), store.Condition{}, "empty attribute name"},
		{store.Update{}.Add("a", store.Value{}), store.Condition{}, "invalid (zero) Value"},
	} {
		if _, err := store.Compile(c.u, c.c); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compile: %v, want an error containing %q", err, c.want)
		}
	}
	if _, err := store.Build(store.Update{}.Add("a", store.Slot(0)), store.Condition{}); err == nil || !strings.Contains(err.Error(), "outside a template") {
		t.Errorf("Build with a slot: %v", err)
	}
	if _, _, err := store.Parametrize(store.Update{}.Add("a", store.Slot(0)), store.Condition{}); err == nil {
		t.Error("Parametrize with a slot")
	}
	if s := store.Slot(3); s.IsValid() || s.Kind() != store.KindNone || s.String() != "<slot 3>" || s.GoString() != "store.Slot(3)" {
		t.Errorf("Slot(3): valid %v kind %v %q %q", s.IsValid(), s.Kind(), s.String(), s.GoString())
	}
}

// Expr.Template answers only for an Expr as its template made it, with
// every value there and valid.
func TestExprTemplate(t *testing.T) {
	tmpl := store.MustCompile(store.Update{}.Add("n", store.Slot(0)).Set("m", store.Int(7)), store.Name("n").LessThan(store.Slot(1)))
	full := []store.Value{store.Int(1), store.Int(2)}
	if tt, args := tmpl.Expr(full).Template(); tt != tmpl || len(args) != 3 {
		t.Fatalf("Template() = %v, %v", tt, args)
	}
	for name, e := range map[string]store.Expr{
		"a slot without a value": tmpl.Expr(full[:1]),
		"a zero value":           tmpl.Expr([]store.Value{{}, store.Int(2)}),
		"a slot as a value":      tmpl.Expr([]store.Value{store.Slot(0), store.Int(2)}),
		"a changed update":       func() store.Expr { e := tmpl.Expr(full); e.Update += " "; return e }(),
		"a changed condition":    func() store.Expr { e := tmpl.Expr(full); e.Condition = ""; return e }(),
		"replaced names": func() store.Expr {
			e := tmpl.Expr(full)
			e.Names = map[string]string{"#a0": "m", "#a1": "n"}
			return e
		}(),
		"replaced values": func() store.Expr {
			e := tmpl.Expr(full)
			e.Values = map[string]store.Value{":v0": store.Int(7), ":v1": store.Int(1), ":v2": store.Int(2)}
			return e
		}(),
		"built": store.MustBuild(store.Update{}.Add("n", store.Int(1)), store.Condition{}),
	} {
		if tt, args := e.Template(); tt != nil || args != nil {
			t.Errorf("%s: Template() = %v, %v", name, tt, args)
		}
	}
	// Missing slots leave their placeholders out of Values; extra values
	// are ignored.
	if e := tmpl.Expr(full[:1]); len(e.Values) != 2 || e.Values[":v2"].IsValid() {
		t.Errorf("short vals: %v", e.Values)
	}
	if e := tmpl.Expr(append(full, store.Int(9))); !e.Equal(tmpl.Expr(full)) {
		t.Errorf("extra vals: %v", e.Values)
	}
	// Compact with a fault in the values is the full Expr.
	if e := tmpl.Compact(full[:1]); e.Values == nil || !e.Equal(tmpl.Expr(full[:1])) {
		t.Errorf("Compact of short vals: %+v", e)
	}
	// CompactArgs takes values by placeholder (:v0 is the constant 7 of
	// the SET, :v1 n's ADD, :v2 the condition's), the constant from the
	// template; a fault in them (a short slice, a zero value) gives the
	// full Expr.
	if tmpl.SlotOf(0) != -1 || tmpl.SlotOf(1) != 0 || tmpl.SlotOf(2) != 1 || tmpl.SlotOf(3) != -1 || tmpl.SlotOf(-1) != -1 {
		t.Errorf("SlotOf: %d %d %d %d", tmpl.SlotOf(0), tmpl.SlotOf(1), tmpl.SlotOf(2), tmpl.SlotOf(3))
	}
	if e := tmpl.CompactArgs([]store.Value{{}, store.Int(1), store.Int(2)}); e.Values != nil || !e.Equal(tmpl.Expr(full)) {
		t.Errorf("CompactArgs: %+v", e)
	}
	if e := tmpl.CompactArgs([]store.Value{{}, store.Int(1)}); e.Values == nil || !e.Equal(tmpl.Expr(full[:1])) {
		t.Errorf("CompactArgs of short args: %+v", e)
	}
	if e := tmpl.CompactArgs([]store.Value{{}, {}, store.Int(2)}); e.Values == nil || !e.Equal(tmpl.Expr([]store.Value{{}, store.Int(2)})) {
		t.Errorf("CompactArgs with a zero value: %+v", e)
	}
	// A Compact Expr given a Values map is judged by it.
	e := tmpl.Compact(full)
	e.Values = map[string]store.Value{":v0": store.Int(5)}
	if tt, _ := e.Template(); tt != nil || e.ValueMap()[":v0"] != store.Int(5) {
		t.Errorf("Compact Expr with a Values map set: %v", e.ValueMap())
	}
	var nilT *store.Template
	if e := nilT.Expr(full); !e.IsZero() || !nilT.Compact(full).IsZero() || !nilT.CompactArgs(full).IsZero() || nilT.Slots() != 0 || nilT.ValuePlaceholders() != nil || nilT.SlotOf(0) != -1 {
		t.Error("nil Template")
	}
	if u, c := nilT.Strings(); u != "" || c != "" {
		t.Error("nil Template strings")
	}
}

func ExampleCompile() {
	// The shape of a write, compiled once: take n tokens if at least n are
	// left, and record when.
	take := store.MustCompile(
		store.Update{}.Add("tokens", store.Slot(0)).Set("at", store.Slot(1)),
		store.Name("tokens").GreaterThanEqual(store.Slot(2)),
	)
	// Each call fills in the values: no rendering, no placeholder naming,
	// and memsim runs it without parsing.
	n, now := int64(3), int64(1_700_000_000_000)
	e := take.Expr([]store.Value{store.Int(-n), store.Int(now), store.Int(n)})
	fmt.Println(e.Update)
	fmt.Println(e.Condition)
	fmt.Println(e.Names["#a0"], e.Names["#a1"], e.Values[":v0"], e.Values[":v1"], e.Values[":v2"])
	// Output:
	// SET #a0 = :v0 ADD #a1 :v1
	// #a1 >= :v2
	// at tokens 1700000000000 -3 3
}

// BenchmarkMakeExpr measures what a caller pays to make the Expr of the
// limiter's speculative write (10 ADDs, a SET, a condition of five terms)
// for new values: rendering it with Build, or filling a Template.
func BenchmarkMakeExpr(b *testing.B) {
	shape := func(val func(int64) store.Value) (store.Update, store.Condition) {
		u := store.Update{}
		conds := []store.Condition{store.Name(store.AttrPK).Exists()}
		for _, l := range []string{"rpm", "tpm", "itpm", "otpm", "wcu"} {
			u = u.Add("b_"+l+"_tk", val(-1000)).Add("b_"+l+"_tc", val(1000))
			if l != "otpm" {
				conds = append(conds, store.Name("b_"+l+"_tk").GreaterThanEqual(val(1000)))
			}
		}
		return u.Set("rf", val(1_767_225_600_001)), store.And(conds...)
	}
	var vals []store.Value
	tmpl := store.MustCompile(shape(func(v int64) store.Value {
		vals = append(vals, store.Int(v))
		return store.Slot(len(vals) - 1)
	}))
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := store.Build(shape(store.Int)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("template/expr", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = tmpl.Expr(vals)
		}
	})
	b.Run("template/compact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = tmpl.Compact(vals)
		}
	})
}

// Expr.Clone copies what the Expr's maker may reuse: a value buffer given
// to CompactArgs, a Values map, hand-made Names; a template's form stays.
func TestExprClone(t *testing.T) {
	tmpl := store.MustCompile(store.Update{}.Add("n", store.Slot(0)).Set("m", store.Int(7)), store.Name("n").LessThan(store.Slot(1)))
	buf := []store.Value{{}, store.Int(1), store.Int(2)}
	hand := store.Expr{Update: "ADD #n :one", Names: map[string]string{"#n": "n"}, Values: map[string]store.Value{":one": store.Int(1)}}
	for name, c := range map[string]struct {
		e        store.Expr
		reuse    func()
		template bool
	}{
		"compact args": {tmpl.CompactArgs(buf), func() { buf[1], buf[2] = store.Int(5), store.Int(6) }, true},
		"template map": {tmpl.Expr([]store.Value{store.Int(1), store.Int(2)}), nil, true},
		"by hand": {hand, func() {
			hand.Values[":one"], hand.Names["#n"] = store.Int(9), "m"
		}, false},
	} {
		want := store.Expr{Update: c.e.Update, Condition: c.e.Condition, Names: maps.Clone(c.e.Names), Values: maps.Clone(c.e.ValueMap())}
		cl := c.e.Clone()
		if c.reuse != nil {
			c.reuse()
		}
		if !cl.Equal(want) {
			t.Errorf("%s: the clone changed with its original: %+v, want %+v", name, cl, want)
		}
		if tt, _ := cl.Template(); (tt != nil) != c.template {
			t.Errorf("%s: the clone's template %v, want one: %v", name, tt, c.template)
		}
	}
	if cl := (store.Expr{}).Clone(); !cl.IsZero() || cl.Names != nil || cl.Values != nil {
		t.Errorf("Clone of the zero Expr = %+v", cl)
	}
}
