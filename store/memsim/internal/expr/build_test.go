package expr

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/storetest"
)

// The builders' output (store.Build) parses, binds, checks and applies.
func TestBuildOutputRoundTrip(t *testing.T) {
	u := store.Update{}.
		Add("b_gpt-3.5_tk", N(-1000)).
		Set("rf", N(1700)).
		SetIfNotExists("ttl", N(9)).
		SetIfNotExistsPlus("n", N(0), N(1)).
		Remove("b_old_tk").
		Set("copy", store.Name("rf"))
	c := store.And(
		store.Name("PK").Exists(),
		store.Or(store.Name("rf").Equal(N(1600)), store.Not(store.Name("b_gpt-3.5_tk").LessThan(N(1000)))),
		store.Name("SK").BeginsWith("#"),
		store.Name("n").Between(N(0), N(10)),
	)
	e, p := buildParsed(t, u, c)
	b, err := p.Bind(e.Names, e.Values, isKey)
	if err != nil {
		t.Fatal(err)
	}
	old := item("PK", S("p"), "SK", S("#s"), "rf", N(1600), "b_gpt-3.5_tk", N(5000), "b_old_tk", N(3), "n", N(4))
	if ok := b.Check(old); !ok {
		t.Fatal("condition false")
	}
	if ok := b.Check(nil); ok {
		t.Fatal("condition true on a missing item")
	}
	got, touched, err := b.Apply(old, testKey)
	if err != nil {
		t.Fatal(err)
	}
	want := item("PK", S("p"), "SK", S("#s"), "rf", N(1700), "b_gpt-3.5_tk", N(4000), "ttl", N(9), "n", N(5), "copy", N(1600))
	if !sameItem(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if strings.Join(touched, ",") != "b_gpt-3.5_tk,b_old_tk,copy,n,rf,ttl" {
		t.Fatalf("touched %v", touched)
	}
	// The same names updated twice, through distinct placeholders, overlap.
	e, _ = store.Build(store.Update{}.Add("tokens", N(1)).Set("tokens", N(2)), store.Condition{})
	_, err = mustParse(t, e.Update, e.Condition).Bind(e.Names, e.Values, isKey)
	wantMessage(t, err, "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [tokens], path two: [tokens]")
	// A key attribute.
	e, _ = store.Build(store.Update{}.Set("SK", S("x")), store.Condition{})
	_, err = mustParse(t, e.Update, e.Condition).Bind(e.Names, e.Values, isKey)
	wantMessage(t, err, "One or more parameter values were invalid: Cannot update attribute SK. This attribute is part of the key")
}

// A random model check: random builder expressions over random items agree
// with a direct evaluation of DynamoDB's rules.
func TestBuildRandomAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	attrs := []string{"a", "b", "ttl", "size", "gpt-3.5", "x.y", "#h", "é"}
	randValue := func() store.Value {
		if r.IntN(2) == 0 {
			return N(int64(r.IntN(7) - 3))
		}
		return S([]string{"", "a", "ab", "b", "é"}[r.IntN(5)])
	}
	for iter := 0; iter < 3000; iter++ {
		old := store.Item{"PK": S("p"), "SK": S("s")}
		if r.IntN(5) == 0 {
			old = nil
		} else {
			for _, a := range attrs {
				if r.IntN(2) == 0 {
					old[a] = randValue()
				}
			}
		}
		cond, expect := randCond(r, attrs, randValue, 3)
		upd, model := randUpdate(r, attrs, randValue)
		e, p := buildParsed(t, upd, cond)
		b, err := p.Bind(e.Names, e.Values, isKey)
		if err != nil {
			if strings.Contains(err.Error(), "must be distinct") {
				continue // the generator compared an attribute with itself
			}
			t.Fatalf("Bind(%+v): %v", e, err)
		}
		if ok := b.Check(old); ok != expect(old) {
			t.Fatalf("condition %q on %v: got %v", e.Condition, old, ok)
		}
		got, _, err := b.Apply(old, testKey)
		want, wantErrs := model(old)
		if len(wantErrs) > 0 {
			// With several faults DynamoDB reports the first in its own
			// order; any of them is accepted here.
			if err == nil || !contains(wantErrs, err.Error()) {
				t.Fatalf("update %q on %v: got %v, %v; want one of %q", e.Update, old, got, err, wantErrs)
			}
			continue
		}
		if err != nil || !sameItem(got, want) {
			t.Fatalf("update %q on %v:\n got %v %v\nwant %v", e.Update, old, got, err, want)
		}
	}
}

type condModel func(store.Item) bool

func randCond(r *rand.Rand, attrs []string, val func() store.Value, depth int) (store.Condition, condModel) {
	if depth > 0 && r.IntN(3) == 0 {
		c1, m1 := randCond(r, attrs, val, depth-1)
		c2, m2 := randCond(r, attrs, val, depth-1)
		switch r.IntN(3) {
		case 0:
			return store.And(c1, c2), func(it store.Item) bool { return m1(it) && m2(it) }
		case 1:
			return store.Or(c1, c2), func(it store.Item) bool { return m1(it) || m2(it) }
		}
		return store.Not(c1), func(it store.Item) bool { return !m1(it) }
	}
	n := attrs[r.IntN(len(attrs))]
	name := store.Name(n)
	var o store.Operand
	var other func(store.Item) (store.Value, bool)
	if r.IntN(3) == 0 {
		m := attrs[r.IntN(len(attrs))]
		o = store.Name(m)
		other = func(it store.Item) (store.Value, bool) { v, ok := it[m]; return v, ok }
	} else {
		v := val()
		o = v
		other = func(store.Item) (store.Value, bool) { return v, true }
	}
	ord := func(it store.Item) (int, bool) {
		x, ok1 := it[n]
		y, ok2 := other(it)
		if !ok1 || !ok2 || x.Kind() != y.Kind() {
			return 0, false
		}
		c, _ := ordered(x, y)
		return c, true
	}
	switch r.IntN(9) {
	case 0:
		return name.Equal(o), func(it store.Item) bool { x, ok := it[n]; y, ok2 := other(it); return ok && ok2 && x == y }
	case 1:
		return name.NotEqual(o), func(it store.Item) bool { x, ok := it[n]; y, ok2 := other(it); return !(ok && ok2 && x == y) }
	case 2:
		return name.LessThan(o), func(it store.Item) bool { c, ok := ord(it); return ok && c < 0 }
	case 3:
		return name.LessThanEqual(o), func(it store.Item) bool { c, ok := ord(it); return ok && c <= 0 }
	case 4:
		return name.GreaterThan(o), func(it store.Item) bool { c, ok := ord(it); return ok && c > 0 }
	case 5:
		return name.GreaterThanEqual(o), func(it store.Item) bool { c, ok := ord(it); return ok && c >= 0 }
	case 6:
		lo := int64(r.IntN(5) - 2)
		hi := lo + int64(r.IntN(3))
		return name.Between(N(lo), N(hi)), func(it store.Item) bool {
			x, ok := it[n].AsInt()
			return ok && x >= lo && x <= hi
		}
	case 7:
		p := []string{"", "a", "é", "ab"}[r.IntN(4)]
		return name.BeginsWith(p), func(it store.Item) bool {
			s, ok := it[n].AsString()
			return ok && strings.HasPrefix(s, p)
		}
	}
	if r.IntN(2) == 0 {
		return name.Exists(), func(it store.Item) bool { _, ok := it[n]; return ok }
	}
	return name.NotExists(), func(it store.Item) bool { _, ok := it[n]; return !ok }
}

type updModel func(store.Item) (store.Item, []string)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func randUpdate(r *rand.Rand, attrs []string, val func() store.Value) (store.Update, updModel) {
	u := store.Update{}
	var steps []func(old, nw store.Item) string
	used := map[string]bool{}
	for k := r.IntN(4) + 1; k > 0; k-- {
		n := attrs[r.IntN(len(attrs))]
		if used[n] {
			continue
		}
		used[n] = true
		switch r.IntN(6) {
		case 0:
			v := val()
			u = u.Set(n, v)
			steps = append(steps, func(_, nw store.Item) string { nw[n] = v; return "" })
		case 1:
			src := attrs[r.IntN(len(attrs))]
			u = u.Set(n, store.Name(src))
			steps = append(steps, func(old, nw store.Item) string {
				v, ok := old[src]
				if !ok {
					return msgAttrNotFound
				}
				nw[n] = v
				return ""
			})
		case 2:
			v := val()
			u = u.SetIfNotExists(n, v)
			steps = append(steps, func(old, nw store.Item) string {
				if x, ok := old[n]; ok {
					nw[n] = x
				} else {
					nw[n] = v
				}
				return ""
			})
		case 3:
			start, delta := int64(r.IntN(5)), int64(r.IntN(5)-2)
			u = u.SetIfNotExistsPlus(n, N(start), N(delta))
			steps = append(steps, func(old, nw store.Item) string {
				x := N(start)
				if v, ok := old[n]; ok {
					x = v
				}
				i, ok := x.AsInt()
				if !ok {
					return msgIncorrectType
				}
				nw[n] = N(i + delta)
				return ""
			})
		case 4:
			u = u.Remove(n)
			steps = append(steps, func(_, nw store.Item) string { delete(nw, n); return "" })
		default:
			d := int64(r.IntN(5) - 2)
			u = u.Add(n, N(d))
			steps = append(steps, func(old, nw store.Item) string {
				v, ok := old[n]
				if !ok {
					nw[n] = N(d)
					return ""
				}
				i, isNum := v.AsInt()
				if !isNum {
					return msgIncorrectType
				}
				nw[n] = N(i + d)
				return ""
			})
		}
	}
	return u, func(old store.Item) (store.Item, []string) {
		nw := old.Clone()
		if nw == nil {
			nw = item("PK", S("p"), "SK", S("s"))
		}
		var errs []string
		for _, s := range steps {
			if e := s(old, nw); e != "" {
				errs = append(errs, e)
			}
		}
		if len(errs) > 0 {
			return nil, errs
		}
		if old == nil && !hasWrite(u) {
			return nil, nil
		}
		return nw, nil
	}
}

func hasWrite(u store.Update) bool {
	e, _ := store.Build(u, store.Condition{})
	return strings.Contains(e.Update, "SET") || strings.Contains(e.Update, "ADD")
}

// Parsed is shared between goroutines; Bound, Check and Apply run
// concurrently on it (run with -race).
func TestConcurrentUse(t *testing.T) {
	e := typicalExpr(t)
	p := mustParse(t, e.Update, e.Condition)
	old := typicalItem()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				b, err := p.Bind(e.Names, e.Values, isKey)
				if err != nil {
					panic(err)
				}
				if ok := b.Check(old); !ok {
					panic("condition false")
				}
				if _, _, err := b.Apply(old, testKey); err != nil {
					panic(err)
				}
			}
		}()
	}
	wg.Wait()
}

// typicalExpr is the limiter's common request: ten ADDs and a SET of the
// refill time, under a condition of five tests.
func typicalExpr(t testing.TB) store.Expr {
	u := store.Update{}
	for i := 0; i < 10; i++ {
		u = u.Add(fmt.Sprintf("b_l%d_tk", i), N(-1000))
	}
	u = u.Set("rf", N(1700000000123))
	c := store.And(
		store.Name("PK").Exists(),
		store.Name("rf").Equal(N(1700000000000)),
		store.Name("b_l0_tk").GreaterThanEqual(N(1000)),
		store.Name("b_l1_tk").GreaterThanEqual(N(1000)),
		store.Name("SK").BeginsWith("#"),
	)
	return storetest.Build(t, u, c)
}

func typicalItem() store.Item {
	it := item("PK", S("TENANT#t1#RES#gpt"), "SK", S("#BUCKET#0"), "rf", N(1700000000000), "ttl", N(1700086400),
		"GSI2PK", S("RES#gpt"), "GSI2SK", S("t1"), "GSI3PK", S("BUCKET"), "GSI3SK", S("t1#gpt"))
	for i := 0; i < 10; i++ {
		it[fmt.Sprintf("b_l%d_tk", i)] = N(500000)
	}
	return it
}
