package bucket

import (
	"math"
	"math/big"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// Generators. Rapid's integer generators favour small values; these mix in
// the extremes, where overflow would show.

var edges = []int64{
	math.MinInt64, math.MinInt64 + 1, math.MinInt64 / 2, -MaxTokens - 1, -MaxTokens, -1, 0, 1,
	MaxTokens, MaxTokens + 1, math.MaxInt64 / 2, math.MaxInt64 - 1, math.MaxInt64,
}

// anyInt64 draws any int64: balances, timestamps and amounts are untrusted.
func anyInt64() *rapid.Generator[int64] {
	return rapid.OneOf(rapid.Int64(), rapid.Int64Range(-1_000_000, 1_000_000), rapid.SampledFrom(edges))
}

// amount draws a value in [lo, MaxTokens], lo <= MaxTokens.
func amount(lo int64) *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64Range(lo, MaxTokens),
		rapid.Int64Range(lo, max(lo, 1_000_000)),
		rapid.SampledFrom([]int64{lo, max(lo, 1000), max(lo, 100_000), MaxTokens}),
	)
}

// period draws a value in [1, MaxRefillPeriod].
func period() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64Range(1, MaxRefillPeriod),
		rapid.Int64Range(1, 100_000),
		rapid.SampledFrom([]int64{1, 1000, 60_000, 86_400_000, MaxRefillPeriod}),
	)
}

// validLimit draws a Limit that passes Validate.
var validLimit = rapid.Custom(func(t *rapid.T) Limit {
	cp := amount(1).Draw(t, "cp")
	return Limit{
		Capacity:     cp,
		Burst:        rapid.OneOf(rapid.Just(cp), amount(cp)).Draw(t, "bx"),
		RefillAmount: amount(1).Draw(t, "ra"),
		RefillPeriod: period().Draw(t, "rp"),
	}
})

// mathLimit draws a Limit in the domain of the State methods: it includes
// the zero fields and Burst < Capacity that PerShard and stored data may
// produce.
var mathLimit = rapid.OneOf(validLimit, rapid.Custom(func(t *rapid.T) Limit {
	return Limit{
		Capacity:     amount(0).Draw(t, "cp"),
		Burst:        amount(0).Draw(t, "bx"),
		RefillAmount: amount(0).Draw(t, "ra"),
		RefillPeriod: period().Draw(t, "rp"),
	}
}))

var anyState = rapid.Custom(func(t *rapid.T) State {
	return State{Limit: mathLimit.Draw(t, "limit"), Tokens: anyInt64().Draw(t, "tk"), TotalConsumed: anyInt64().Draw(t, "tc")}
})

// Reference implementation in math/big.

func bi(v int64) *big.Int { return big.NewInt(v) }

func refEffective(s State, rf, now int64) *big.Int {
	e := new(big.Int).Sub(bi(now), bi(rf))
	if e.Sign() < 0 {
		e.SetInt64(0)
	}
	r := new(big.Int).Mul(e, bi(s.RefillAmount))
	r.Quo(r, bi(s.RefillPeriod)) // non-negative: truncation is floor
	eff := r.Add(r, bi(s.Tokens))
	if eff.Cmp(bi(s.Burst)) > 0 {
		eff.SetInt64(s.Burst)
	}
	return eff
}

var maxInt64 = bi(math.MaxInt64)

func clampMax(v *big.Int) int64 {
	if v.Cmp(maxInt64) > 0 {
		return math.MaxInt64
	}
	return v.Int64()
}

func refRetryAfter(s State, rf, now, need int64) (int64, bool) {
	if need > s.Burst {
		return math.MaxInt64, false
	}
	if refEffective(s, rf, now).Cmp(bi(need)) >= 0 {
		return 0, true
	}
	if s.RefillAmount == 0 {
		return math.MaxInt64, false
	}
	// e = ceil((need - tk) * rp / ra); wait = rf + e - now.
	num := new(big.Int).Sub(bi(need), bi(s.Tokens))
	num.Mul(num, bi(s.RefillPeriod))
	num.Add(num, bi(s.RefillAmount-1))
	e := num.Quo(num, bi(s.RefillAmount))
	w := e.Add(e, bi(rf))
	w.Sub(w, bi(now))
	if w.Sign() <= 0 {
		panic("reference: non-positive wait")
	}
	return clampMax(w), true
}

// (5) Every method agrees with the math/big reference on every input within
// the documented bounds, so nothing overflows.
func TestPropReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := anyState.Draw(t, "s")
		rf, now, need := anyInt64().Draw(t, "rf"), anyInt64().Draw(t, "now"), anyInt64().Draw(t, "need")

		want := refEffective(s, rf, now)
		if got := s.Effective(rf, now); !want.IsInt64() || got != want.Int64() {
			t.Fatalf("Effective = %d, reference %v", got, want)
		}
		wantDelta := clampMax(new(big.Int).Sub(want, bi(s.Tokens)))
		if got := s.RefillDelta(rf, now); got != wantDelta {
			t.Fatalf("RefillDelta = %d, reference %d", got, wantDelta)
		}
		if got, want := s.Allows(rf, now, need), want.Cmp(bi(need)) >= 0; got != want {
			t.Fatalf("Allows = %v, reference %v", got, want)
		}
		w, ok := s.RetryAfter(rf, now, need)
		if rw, rok := refRetryAfter(s, rf, now, need); w != rw || ok != rok {
			t.Fatalf("RetryAfter = (%d, %v), reference (%d, %v)", w, ok, rw, rok)
		}
		amt := rapid.Int64Range(-MaxTokens, MaxTokens).Draw(t, "amount")
		c := s.Charge(amt)
		if wtk := clampBoth(new(big.Int).Sub(bi(s.Tokens), bi(amt))); c.Tokens != wtk {
			t.Fatalf("Charge Tokens = %d, reference %d", c.Tokens, wtk)
		}
		if wtc := clampBoth(new(big.Int).Add(bi(s.TotalConsumed), bi(amt))); c.TotalConsumed != wtc {
			t.Fatalf("Charge TotalConsumed = %d, reference %d", c.TotalConsumed, wtc)
		}
	})
}

func clampBoth(v *big.Int) int64 {
	if v.Cmp(bi(math.MinInt64)) < 0 {
		return math.MinInt64
	}
	return clampMax(v)
}

// (1) Refill never raises the balance above Burst, never lowers it except
// down to a lowered Burst, and never decreases as time passes.
func TestPropRefillBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := anyState.Draw(t, "s")
		rf, t1, t2 := anyInt64().Draw(t, "rf"), anyInt64().Draw(t, "t1"), anyInt64().Draw(t, "t2")
		if t1 > t2 {
			t1, t2 = t2, t1
		}
		e1, e2 := s.Effective(rf, t1), s.Effective(rf, t2)
		if e2 > s.Burst {
			t.Fatalf("effective %d above burst %d", e2, s.Burst)
		}
		if e1 < min(s.Tokens, s.Burst) {
			t.Fatalf("effective %d below min(tk, bx) = %d", e1, min(s.Tokens, s.Burst))
		}
		if e1 > e2 {
			t.Fatalf("effective fell from %d at %d to %d at %d", e1, t1, e2, t2)
		}
		if t1 <= rf && e1 != min(s.Tokens, s.Burst) {
			t.Fatalf("refill %d before rf", e1-s.Tokens)
		}
	})
}

// (2) Split additivity. Refilling [t0, tk] in one go gives at least as much
// as refilling it in k steps, each step materializing Tokens and moving rf
// to the step's end, and at most k millitokens more (one per split point,
// lost to rounding down). This holds with or without the Burst cap, since
// min(., Burst) is monotone and moves a difference by no more than it was.
// Splitting therefore never credits a window twice.
func TestPropSplitAdditivity(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := anyState.Draw(t, "s")
		t0 := rapid.Int64Range(-1<<62, 1<<62).Draw(t, "t0")
		steps := rapid.SliceOfN(rapid.OneOf(rapid.Int64Range(0, 1000), rapid.Int64Range(0, 1<<58)), 1, 8).Draw(t, "steps")

		split, rf := s, t0
		for _, d := range steps {
			now := rf + d
			split, rf = split.Refilled(rf, now), now
		}
		one := s.Effective(t0, rf)
		k := uint64(len(steps) - 1)
		if one < split.Tokens || uint64(one)-uint64(split.Tokens) > k {
			t.Fatalf("one go %d, in %d steps %d: difference must be in [0, %d]", one, len(steps), split.Tokens, k)
		}
	})
}

// (3) At RetryAfter the need is covered and one millisecond earlier it is not.
func TestPropRetryAfterTight(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := anyState.Draw(t, "s")
		rf := rapid.Int64Range(-1<<40, 1<<40).Draw(t, "rf")
		now := rf + rapid.Int64Range(-1_000_000, 1_000_000).Draw(t, "now-rf")
		need := rapid.OneOf(amount(0), anyInt64()).Draw(t, "need")

		w, ok := s.RetryAfter(rf, now, need)
		switch {
		case !ok:
			if w != math.MaxInt64 {
				t.Fatalf("ok = false with wait %d", w)
			}
			if s.Allows(rf, math.MaxInt64, need) {
				t.Fatalf("ok = false, yet %d available eventually", need)
			}
		case w < 0:
			t.Fatalf("negative wait %d", w)
		case w == math.MaxInt64 || w > math.MaxInt64-now:
			// Saturated or beyond the representable future: nothing to
			// check here (TestPropReference checks the saturation).
		default:
			if !s.Allows(rf, now+w, need) {
				t.Fatalf("after waiting %d: %d available, need %d", w, s.Effective(rf, now+w), need)
			}
			if w > 0 && s.Allows(rf, now+w-1, need) {
				t.Fatalf("wait %d not minimal: %d available 1 ms earlier", w, s.Effective(rf, now+w-1))
			}
		}
	})
}

// PerShard: n shards together never exceed the limit, and lose less than n.
func TestPropPerShard(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := validLimit.Draw(t, "l")
		n := rapid.OneOf(rapid.Int64Range(1, 4096), rapid.Int64Range(1, math.MaxInt64)).Draw(t, "n")
		p := l.PerShard(n)
		if p.RefillPeriod != l.RefillPeriod || p.Burst < p.Capacity {
			t.Fatalf("PerShard(%d) = %+v", n, p)
		}
		for _, f := range [][2]int64{{l.Capacity, p.Capacity}, {l.Burst, p.Burst}, {l.RefillAmount, p.RefillAmount}} {
			total := new(big.Int).Mul(bi(f[1]), bi(n))
			if total.Cmp(bi(f[0])) > 0 || new(big.Int).Sub(bi(f[0]), total).Cmp(bi(n)) >= 0 {
				t.Fatalf("%d shards of %d against %d", n, f[1], f[0])
			}
		}
	})
}

// names draws distinct, non-empty limit names: mostly what the limiter
// accepts, sometimes arbitrary strings.
var names = rapid.SliceOfNDistinct(rapid.OneOf(
	rapid.StringMatching(`[a-zA-Z][a-zA-Z0-9_.\-]{0,63}`),
	rapid.StringMatching(`[a-z](_[a-z0-9]{0,3}){0,4}(_tk|_cp|_rf)?`),
	rapid.StringN(1, 20, -1),
), 0, 12, rapid.ID[string])

var storedState = rapid.Custom(func(t *rapid.T) State {
	return State{
		Limit: Limit{
			Capacity:     amount(1).Draw(t, "cp"),
			Burst:        amount(1).Draw(t, "bx"),
			RefillAmount: amount(1).Draw(t, "ra"),
			RefillPeriod: period().Draw(t, "rp"),
		},
		Tokens:        anyInt64().Draw(t, "tk"),
		TotalConsumed: anyInt64().Draw(t, "tc"),
	}
})

// (4) Codec round trip for arbitrary names and states, in any attribute order.
func TestPropCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var c Composite
		c.Refill = anyInt64().Draw(t, "rf")
		for _, n := range names.Draw(t, "names") {
			c.Set(n, storedState.Draw(t, "state"))
		}
		attrs := collect(c)
		if len(attrs) != 1+6*len(c.Limits) {
			t.Fatalf("%d attributes for %d limits", len(attrs), len(c.Limits))
		}
		for _, a := range attrs[1:] {
			if _, _, ok := ParseAttrName(a.k); !ok {
				t.Fatalf("ParseAttrName(%q) failed", a.k)
			}
		}
		shuffled := attrList(rapid.Permutation(attrs).Draw(t, "order"))
		got, err := Decode(shuffled.seq())
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Limits) == 0 {
			c.Limits = nil
		}
		if !equalComposite(got, c) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
		}
		if !slices.Equal(collect(got), attrs) {
			t.Fatal("re-encoding changed the attribute order")
		}
	})
}

func TestPropAttrName(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.StringN(1, 30, -1).Draw(t, "name")
		field := rapid.SampledFrom(fields[:]).Draw(t, "field")
		l, f, ok := ParseAttrName(AttrName(name, field))
		if !ok || l != name || f != field {
			t.Fatalf("ParseAttrName(AttrName(%q, %q)) = (%q, %q, %v)", name, field, l, f, ok)
		}
	})
}
