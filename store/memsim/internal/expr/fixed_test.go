package expr

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// placeholderArgs returns the value placeholders of e in order (:v0, :v1,
// ...) and their values: what a store.Template hands a backend.
func placeholderArgs(e store.Expr) ([]string, []store.Value) {
	phs := make([]string, len(e.Values))
	args := make([]store.Value, len(e.Values))
	for i := range phs {
		phs[i] = ":v" + strconv.Itoa(i)
		args[i] = e.Values[phs[i]]
	}
	return phs, args
}

func sameErr(a, b error) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error())
}

// Fixed.Bind, and the Program where there is one, give what Bind, Check and
// Apply give on the maps, for random builder expressions (key attributes,
// overlaps, type mismatches and overflows included) on random items, and
// keep doing so when the same Fixed is bound again with values of other
// types (its memo).
func TestFixedMatchesBind(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	attrs := []string{"a", "b", "ttl", "gpt-3.5", "PK", "n"}
	randValue := func() store.Value {
		switch r.IntN(6) {
		case 0:
			return S([]string{"", "a", "b"}[r.IntN(3)])
		case 1:
			return N(1<<63 - 1 - int64(r.IntN(2)))
		}
		return N(int64(r.IntN(7) - 3))
	}
	programs := 0
	for iter := 0; iter < 4000; iter++ {
		old := store.Item{"PK": S("p"), "SK": S("s")}
		if r.IntN(5) == 0 {
			old = nil
		} else {
			for _, a := range attrs[:4] {
				if r.IntN(2) == 0 {
					old[a] = randValue()
				}
			}
		}
		var cond store.Condition
		if r.IntN(4) > 0 {
			cond, _ = randCond(r, attrs, randValue, 2)
		}
		upd, _ := randUpdate(r, attrs, randValue)
		e, p := buildParsed(t, upd, cond)
		phs, args := placeholderArgs(e)
		f, ok := p.Fix(e.Names, phs)
		if !ok {
			t.Fatalf("Fix(%+v) refused a builder expression", e)
		}
		for round := 0; round < 2; round++ {
			if round == 1 {
				// Other values, perhaps of other types, through the same
				// Fixed: a fresh Parse and Bind on the maps judges them.
				for i := range args {
					if r.IntN(3) == 0 {
						args[i] = randValue()
						e.Values[phs[i]] = args[i]
					}
				}
				var err error
				if p, err = Parse(e.Update, e.Condition); err != nil {
					t.Fatal(err)
				}
			}
			b1, err1 := p.Bind(e.Names, e.Values, isKey)
			b2, ok, err2 := f.Bind(args, isKey)
			if !ok || !sameErr(err1, err2) {
				t.Fatalf("%+v: Bind %v, Fixed.Bind %v (ok %v)", e, err1, err2, ok)
			}
			if err1 != nil {
				continue
			}
			c1, _ := b1.Check(old)
			c2, _ := b2.Check(old)
			n1, t1, e1 := b1.Apply(old, testKey)
			n2, t2, e2 := b2.Apply(old, testKey)
			if c1 != c2 || !sameErr(e1, e2) || !sameItem(n1, n2) || !equalStrings(t1, t2) {
				t.Fatalf("%+v on %v: Bind gives %v %v %v %v; Fixed.Bind %v %v %v %v", e, old, c1, n1, t1, e1, c2, n2, t2, e2)
			}
			pr := f.Program()
			if pr == nil || old == nil {
				continue
			}
			programs++
			attrs := Attrs{}.MakeAttrs(len(f.Names()))
			for i, n := range f.Names() {
				v, has := old[n]
				attrs.Set(i, v, has)
			}
			if got := pr.Check(b2.Values(), attrs); got != c1 {
				t.Fatalf("%+v on %v: Program.Check %v, Check %v", e, old, got, c1)
			}
			out := Attrs{}.MakeAttrs(pr.Len())
			ok = pr.Apply(b2.Values(), attrs, f.Heads(), out)
			if ok != (e1 == nil) {
				t.Fatalf("%+v on %v: Program.Apply ok=%v, Apply error %v", e, old, ok, e1)
			}
			if !ok {
				continue
			}
			got := old.Clone()
			for i, h := range f.Heads() {
				name := f.Names()[h]
				if v, has := out.Get(i); has {
					got[name] = v
				} else {
					delete(got, name)
				}
			}
			if !sameItem(got, n1) {
				t.Fatalf("%+v on %v: Program gives %v, Apply %v", e, old, got, n1)
			}
			b1.Release()
			b2.Release()
		}
	}
	if programs < 1000 {
		t.Fatalf("only %d expressions ran as Programs", programs)
	}
}

// Fix refuses what Bind must judge from the maps.
func TestFixRefuses(t *testing.T) {
	p := mustParse(t, "SET #a = :v", "#b = :w")
	for _, c := range []struct {
		names  names
		values []string
	}{
		{names{"#a": "x"}, []string{":v", ":w"}},                                    // #b undefined
		{names{"#a": "x", "#b": "y", "#c": "z"}, []string{":v", ":w"}},              // #c unused
		{names{"#a": "", "#b": "y"}, []string{":v", ":w"}},                          // empty name
		{names{"#a": "x", "#b": "y"}, []string{":v"}},                               // :w undefined
		{names{"#a": "x", "#b": "y"}, []string{":v", ":x"}},                         // :w undefined, :x unused
		{names{"#a": string(make([]byte, 70000)), "#b": "y"}, []string{":v", ":w"}}, // too long
	} {
		if _, ok := p.Fix(c.names, c.values); ok {
			t.Errorf("Fix(%v, %v) accepted", c.names, c.values)
		}
	}
	f, ok := p.Fix(names{"#a": "x", "#b": "y"}, []string{":v", ":w"})
	if !ok {
		t.Fatal("Fix refused an exact pair")
	}
	if _, ok, _ := f.Bind([]store.Value{N(1)}, isKey); ok {
		t.Error("Bind with a value missing")
	}
	if _, ok, _ := f.Bind([]store.Value{N(1), {}}, isKey); ok {
		t.Error("Bind with a zero value")
	}
	if _, ok := mustParse(t, "SET a = :v", "").Fix(nil, []string{":v"}); !ok {
		t.Error("Fix refused raw names")
	}
}
