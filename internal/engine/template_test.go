package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"pgregory.net/rapid"
)

// directSink builds an expression with its real values, the slow way.
type directSink struct{ shapeSink }

func (d *directSink) add(name string, v int64) { d.u = d.u.Add(name, store.Int(v)) }
func (d *directSink) set(name string, v int64) { d.u = d.u.Set(name, store.Int(v)) }
func (d *directSink) cond(k condKind, name string, v int64) {
	d.conds = append(d.conds, directCond(term{k, name, v}))
}
func (d *directSink) either(a, b, c, e term) {
	d.conds = append(d.conds, store.Or(directCond(a), store.And(directCond(b), directCond(c), directCond(e))))
}

func directCond(t term) store.Condition {
	if t.k == condAbsent {
		return store.Name(t.name).NotExists()
	}
	return map[condKind]func(store.Operand) store.Condition{
		condEq: store.Name(t.name).Equal, condGe: store.Name(t.name).GreaterThanEqual,
		condGt: store.Name(t.name).GreaterThan, condLe: store.Name(t.name).LessThanEqual, condLt: store.Name(t.name).LessThan,
	}[t.k](store.Int(t.v))
}

// The template path and a fresh build give the same Expr, byte for byte,
// for any limits, charges, shard count and time.
func TestTemplatesMatchFreshBuilds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"rpm", "tpm", "a_b", "gpt-3.5", "ttl", "x"}), 1, 4, rapid.ID).Draw(t, "names")
		var limits []Limit
		consume := map[string]int64{}
		for _, n := range names {
			c := rapid.Int64Range(1, 1e6).Draw(t, "cap")
			limits = append(limits, Limit{Name: n, Limit: bucket.Limit{Capacity: c * 1000, Burst: c * 1000,
				RefillAmount: rapid.Int64Range(1, 1e6).Draw(t, "refill") * 1000,
				RefillPeriod: rapid.Int64Range(1, 1e7).Draw(t, "period")}})
			if rapid.Bool().Draw(t, "charged") {
				consume[n] = rapid.Int64Range(1, c).Draw(t, "amount")
			}
		}
		p := NewPlan(keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}, limits, consume)
		var burn []int64
		if rapid.Bool().Draw(t, "burn") {
			burn = make([]int64, len(p.specs))
			for i := range burn {
				burn[i] = rapid.Int64Range(0, 5000).Draw(t, "burn")
			}
		}
		n := int64(1) << rapid.IntRange(0, 5).Draw(t, "shards")
		now := rapid.Int64Range(0, 1<<45).Draw(t, "now")
		h := rapid.Int64Range(0, maxCushion).Draw(t, "cushion")
		adjust := map[string]int64{} // charges and refunds, in millitokens
		for _, n := range names {
			if a := rapid.Int64Range(-5000, 5000).Draw(t, "adjust"); a != 0 {
				adjust[n] = a
			}
		}
		if len(adjust) == 0 {
			adjust[names[0]] = 1000
		}
		ap := p.WithAmounts(adjust)
		// An item as the plan would have written it, some time ago.
		im, err := Decode(p.create(0, n, now).Item)
		if err != nil || !im.matches(p, n) {
			t.Fatalf("image %v: %v", im, err)
		}
		elapsed := rapid.Int64Range(0, 1e7).Draw(t, "elapsed")
		for _, c := range []struct {
			name string
			tmpl func() (store.Expr, error)
			emit func(sink)
		}{
			{"speculative", func() (store.Expr, error) { return p.speculative(nil, n, now, burn) }, func(k sink) { p.emitSpeculative(k, n, now, burn) }},
			{"full", func() (store.Expr, error) { return p.full(nil, n, now, h) }, func(k sink) { p.emitFull(k, n, now, h) }},
			{"adjust", func() (store.Expr, error) {
				return ap.build(nil, pathAdjust, func(k sink) { ap.emitAdjust(k, n, now) })
			},
				func(k sink) { ap.emitAdjust(k, n, now) }},
			{"normal", func() (store.Expr, error) { return p.normal(nil, im, n, now+elapsed, false, nil) },
				func(k sink) { p.emitNormal(k, im, n, now+elapsed, false, nil) }},
			{"normal with floors", func() (store.Expr, error) { return p.normal(nil, im, n, now+elapsed, true, burn) },
				func(k sink) { p.emitNormal(k, im, n, now+elapsed, true, burn) }},
		} {
			for round := 0; round < 2; round++ { // the first compiles, the second reuses
				got, err := c.tmpl()
				if err != nil {
					t.Fatal(err)
				}
				var d directSink
				c.emit(&d)
				want, err := store.Build(d.u, store.And(d.conds...))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got, cmp.Comparer(store.Value.Equal)); diff != "" {
					t.Fatalf("%s round %d: template differs from a fresh build:\n%s", c.name, round, diff)
				}
			}
		}
	})
}

// The quick decoder and the full one agree on every item a plan writes.
func TestDecodeForMatchesDecode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"rpm", "tpm", "a_b", "gpt-3.5", "ttl", "x", "zz"}), 1, 5, rapid.ID).Draw(t, "names")
		var limits []Limit
		for _, n := range names {
			c := rapid.Int64Range(1, 1e6).Draw(t, "cap")
			limits = append(limits, Limit{Name: n, Limit: bucket.Limit{Capacity: c * 1000, Burst: c * 1000,
				RefillAmount: rapid.Int64Range(1, 1e6).Draw(t, "refill") * 1000, RefillPeriod: rapid.Int64Range(1, 1e7).Draw(t, "period")}})
		}
		p := NewPlan(bucketRef, limits, map[string]int64{names[0]: 1})
		shard := rapid.IntRange(0, 3).Draw(t, "shard")
		it := p.create(shard, int64(1)<<rapid.IntRange(0, 3).Draw(t, "n"), rapid.Int64Range(0, 1<<45).Draw(t, "now")).Item
		want, err := Decode(it)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeFor(p, it, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.comp, got.comp); diff != "" || want.rf != got.rf || want.hash != got.hash || want.shardCount != got.shardCount {
			t.Fatalf("quick decode differs: %s", diff)
		}
		// An item of other limits falls back to the full decoder.
		q := NewPlan(bucketRef, limits[:len(limits)-1+boolInt(len(limits) == 1)], nil)
		if other, err := decodeFor(q, it, nil); err != nil || cmp.Diff(want.comp, other.comp) != "" {
			t.Fatalf("fallback differs: %v", err)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
