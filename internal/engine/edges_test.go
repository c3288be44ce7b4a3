package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
)

// Edges of the decisions, each pinned where one comparison or one
// condition decides.

// A process counts on its part of the shard's writes only when the others
// consumed at least the whole refill, by an estimate no older than
// drainAge, that says others write and that it writes too.
func TestMineOnlyAfterTheOthersDrainedTheStore(t *testing.T) {
	rps := &plan1(bucketRef).specs[0]
	rate := 10.0 // millitokens a ms of rps10
	base := ShardView{At: T, RateAt: T, Rate: 1.6, Others: 1.5, Drain: map[string]float64{"rps": rate}}
	for _, c := range []struct {
		name string
		edit func(v *ShardView)
		want bool
	}{
		{"the others took exactly the refill", func(*ShardView) {}, true},
		{"just under it", func(v *ShardView) { v.Drain = map[string]float64{"rps": rate - 0.01} }, false},
		{"no estimate of the limit", func(v *ShardView) { v.Drain = map[string]float64{"tpm": rate} }, false},
		{"never estimated", func(v *ShardView) { v.RateAt = 0 }, false},
		{"an estimate drainAge old", func(v *ShardView) { v.RateAt = T - drainAge }, true},
		{"older", func(v *ShardView) { v.RateAt = T - drainAge - 1 }, false},
		{"no writes measured", func(v *ShardView) { v.Rate, v.Others = 0, 0 }, false},
		{"every write the others'", func(v *ShardView) { v.Others = v.Rate }, false},
	} {
		v := base
		c.edit(&v)
		mine, ok := v.mine(rps, rate)
		if ok != c.want || ok && mine != 1-v.Others/v.Rate {
			t.Errorf("%s: mine %v, %v; want %v", c.name, mine, ok, c.want)
		}
	}
}

// After a refusal's promised time, an acquire is refused locally only for
// what this process's own writes in flight take: the item's tokens at now
// less those, against the request, exactly.
func TestAfterThePromiseOnlyWritesInFlightRefuse(t *testing.T) {
	p := plan1(bucketRef)
	im := image(t, shape{rf: T, tk: map[string]int64{"rps": 2000}}.item(p)) // 2 tokens at T
	for _, c := range []struct {
		pending int64
		want    bool
	}{{1000, false}, {1001, true}} {
		v := ShardView{Img: im, At: T, Promise: T, Pending: map[string]int64{"rps": c.pending}}
		if got := p.refusesLocally(&v, 1, T, Options{}); got != c.want {
			t.Errorf("%d millitokens in flight of 2,000: refused %v, want %v", c.pending, got, c.want)
		}
	}
}

// The full write requires the shard count it computed the burst for: on a
// bucket another process doubled meanwhile it fails, or shard 0 would hold
// the whole burst again beside its new shards.
func TestTheFullWriteRequiresItsShardCount(t *testing.T) {
	p := plan1(bucketRef)
	for _, n := range []int64{1, 2} {
		st := sim(t, shape{rf: T - 5000, n: n}.item(p))
		ex, err := p.full(nil, 1, T, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex})
		if failed := errors.Is(err, store.ErrConditionFailed); failed != (n != 1) {
			t.Errorf("the full write at 1 shard on a bucket of %d: %v", n, err)
		}
	}
}

// The item a failed write returns is decoded in full: a limit field out of
// range under the plan's own hash is an error, not trusted as the plan's
// (only an item this client's write returned is read by the hash).
func TestAFailedWritesItemIsDecodedInFull(t *testing.T) {
	p := plan1(bucketRef)
	bad := shape{rf: T - 10, tk: map[string]int64{"rps": 5000}}.item(p)
	bad[p.specs[0].bx] = store.Int(-1)
	c := NewCharge(NewMemory(0), p, picks(), Options{})
	s := c.Start(T)
	s = c.Feed(failed(bad), T)
	if s.Err == nil {
		t.Fatalf("%q: want the item's decoding error", describe(s))
	}
}

// A shard whose share of a limit's refill rounds to nothing holds no
// share to count on: nothing is withheld, whatever the tokens in view.
func TestWithheldOnAShardThatNeverRefills(t *testing.T) {
	slow := Limit{Name: "slow", Limit: bucket.Limit{Capacity: 1_000_000, Burst: 1_000_000, RefillAmount: 1, RefillPeriod: 1000}}
	p := NewPlan(bucketRef, []Limit{slow}, map[string]int64{"slow": 1})
	im := image(t, shape{rf: T, n: 2, tk: map[string]int64{"slow": 400_000}}.item(p))
	v := ShardView{At: T, RateAt: T, Rate: 1, Others: 0.5, Drain: map[string]float64{"slow": 1}}
	if w := v.withheld(&p.specs[0], 2, im, T, T+100); w != 0 {
		t.Fatalf("withheld %d on a shard that never refills, want 0", w)
	}
}
