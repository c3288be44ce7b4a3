package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"pgregory.net/rapid"
)

// A machine's speculative writes, from its memory of the last one or not,
// are what a fresh build of emitSpeculative gives, whatever the sequence
// of plans, shard counts and clocks (the edges of the remembered range
// included).
func TestRememberedSpeculativeMatchesFreshBuilds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"rpm", "tpm", "a_b", "x"}), 1, 4, rapid.ID).Draw(t, "names")
		var limits []Limit
		for _, n := range names {
			c := rapid.Int64Range(1, 1e6).Draw(t, "cap")
			limits = append(limits, Limit{Name: n, Limit: bucket.Limit{Capacity: c * 1000, Burst: c * 1000,
				RefillAmount: rapid.Int64Range(1, 1e6).Draw(t, "refill"),
				RefillPeriod: rapid.Int64Range(1, bucket.MaxRefillPeriod).Draw(t, "period")}})
		}
		var plans []*Plan
		for range 2 {
			consume := map[string]int64{}
			for _, n := range names {
				if rapid.Bool().Draw(t, "charged") {
					consume[n] = rapid.Int64Range(1, 3).Draw(t, "amount")
				}
			}
			plans = append(plans, NewPlan(keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}, limits, consume))
		}
		nows := rapid.SampledFrom([]int64{0, 1, 1 << 45, maxCachedNow - 1, maxCachedNow, maxCachedNow + 1, -1, 1 << 62})
		var b valueBuf
		for i := range rapid.IntRange(1, 12).Draw(t, "writes") {
			p := rapid.SampledFrom(plans).Draw(t, "plan")
			n := int64(1) << rapid.IntRange(0, 2).Draw(t, "shards")
			now := nows.Draw(t, "now")
			if rapid.Bool().Draw(t, "near") {
				now = rapid.Int64Range(0, 1<<45).Draw(t, "clock")
			}
			got, err := p.speculative(&b, n, now, nil)
			if err != nil {
				t.Fatal(err)
			}
			var d directSink
			p.emitSpeculative(&d, n, now, nil)
			want, err := store.Build(d.u, store.And(d.conds...))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmp.Comparer(store.Value.Equal)); diff != "" {
				t.Fatalf("write %d (now %d, %d shards, memory %v): differs from a fresh build:\n%s", i, now, n, b.spec.state, diff)
			}
		}
	})
}

// The second write of a key in a row builds the memory; the third is made
// from it; another key starts over.
func TestSpeculativeMemoryStates(t *testing.T) {
	p, q := plan1(bucketRef), NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 2})
	var b valueBuf
	for i, c := range []struct {
		p    *Plan
		want specState
	}{{p, specSeen}, {p, specBuilt}, {p, specBuilt}, {q, specSeen}, {p, specSeen}} {
		if _, err := c.p.speculative(&b, 1, T+int64(i), nil); err != nil {
			t.Fatal(err)
		}
		if b.spec.state != c.want {
			t.Errorf("write %d: memory %v, want %v", i, b.spec.state, c.want)
		}
	}
}
