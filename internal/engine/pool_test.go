package engine

import (
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
)

// A process's pools, step by step: the demand it measures, what it
// reserves from it, and what a pool serves, takes back and returns. Amounts
// are millitokens of rps10 (a token is 1000; a shard's burst 10,000, so a
// pool holds at most 1,250 at one shard).

// rpsPlan charges tokens of rps10.
func rpsPlan(tokens int64) *Plan {
	return NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": tokens})
}

// Demand is what the process was granted per ms over the last window of
// demandWindowMs; a window becomes the estimate once that long. The
// current one counts from 20 ms on, when it says more.
func TestPoolDemand(t *testing.T) {
	ps := NewPools()
	for i := int64(0); i < 10; i++ {
		ps.Granted(rpsPlan(1), T+i)
	}
	p := ps.get(bucketRef)
	if d := p.demand("rps", T+19); d != 0 {
		t.Fatalf("demand %v after 19 ms, want none yet", d)
	}
	if d := p.demand("rps", T+20); d != 500 {
		t.Fatalf("demand %v, want 10 tokens in 20 ms: 500 a ms", d)
	}
	ps.Granted(rpsPlan(2), T+demandWindowMs-1) // still the first window
	ps.Granted(NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"tpm": 1}), T+demandWindowMs)
	if d := p.rate["rps"]; d != 12_000.0/demandWindowMs {
		t.Fatalf("the window's rate %v, want 12 tokens in %d ms", d, demandWindowMs)
	}
	// A window without rps grants sets its rate to 0.
	ps.Granted(NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"tpm": 1}), T+2*demandWindowMs)
	if d := p.rate["rps"]; d != 0 {
		t.Fatalf("rate %v after a window without rps, want 0", d)
	}
	if d := p.rate["tpm"]; d != 1000.0/demandWindowMs {
		t.Fatalf("tpm rate %v, want a token in %d ms", d, demandWindowMs)
	}
}

// What a write reserves: demand over PoolHorizonMs in whole tokens, at
// most 1/PoolShare of a shard's burst, less what the pool still holds;
// nothing when less than one more request's worth is coming, or for a
// pool's life after the bucket refused this process.
func TestPoolExtra(t *testing.T) {
	busy := func(perMs int64) *Pools { // granted perMs tokens a ms over a window
		ps := NewPools()
		ps.Granted(rpsPlan(perMs*demandWindowMs), T)
		ps.Granted(rpsPlan(0), T+demandWindowMs)
		return ps
	}
	if x := busy(0).Extra(rpsPlan(1), 1, T+demandWindowMs); x != nil {
		t.Fatalf("reserved %v with no demand", x)
	}
	// 1 token per 100 ms: exactly one more request's worth.
	ps := NewPools()
	ps.Granted(rpsPlan(2), T)
	ps.Granted(rpsPlan(0), T+demandWindowMs)
	if x := ps.Extra(rpsPlan(1), 1, T+demandWindowMs); x["rps"] != 1000 {
		t.Fatalf("reserved %v at a request per horizon, want one token", x)
	}
	if x := ps.Extra(rpsPlan(2), 1, T+demandWindowMs); x != nil {
		t.Fatalf("reserved %v for requests of 2 at 1 per horizon, want nothing", x)
	}
	if x := busy(1).Extra(rpsPlan(1), 1, T+demandWindowMs); x["rps"] != 1000 {
		t.Fatalf("reserved %v at 100 tokens a horizon, want the cap: a token (1,250 rounded down)", x)
	}
	ps = busy(1)
	if back := ps.Add(rpsPlan(1), map[string]int64{"rps": 700}, 0, 1, 1, T+demandWindowMs, (T+demandWindowMs)+PoolLifeMs); back != nil {
		t.Fatalf("a first pool returned %v", back)
	}
	if x := ps.Extra(rpsPlan(1), 1, T+demandWindowMs); x != nil {
		t.Fatalf("reserved %v beside a pool of 700: 1,250 - 700 is under a token", x)
	}
	if x := ps.Extra(rpsPlan(1), 1, T+demandWindowMs+PoolLifeMs); x["rps"] != 1000 {
		t.Fatalf("reserved %v beside an expired pool, want the cap again", x)
	}
	refused := busy(1)
	refused.Refused(bucketRef, T+demandWindowMs)
	if x := refused.Extra(rpsPlan(1), 1, T+demandWindowMs+PoolLifeMs-1); x != nil {
		t.Fatalf("reserved %v within a pool's life of a refusal", x)
	}
	if x := refused.Extra(rpsPlan(1), 1, T+demandWindowMs+PoolLifeMs); x == nil {
		t.Fatal("no reservation a pool's life after a refusal")
	}
}

// A pool serves a charge it holds entirely, while alive and of the same
// limits; the charge counts as demand.
func TestPoolTake(t *testing.T) {
	ps := NewPools()
	if _, ok := ps.Take(rpsPlan(1), T); ok {
		t.Fatal("served from no pool")
	}
	ps.Add(rpsPlan(1), map[string]int64{"rps": 2000}, 3, 4, 1, T, T+PoolLifeMs)
	s, ok := ps.Take(rpsPlan(2), T+PoolLifeMs-1)
	if !ok || s.Shard != 3 || s.N != 4 || ps.Held(bucketRef, "rps", T) != 0 {
		t.Fatalf("served %+v %v, held %d: want shard 3 of 4, the pool empty", s, ok, ps.Held(bucketRef, "rps", T))
	}
	if ps.get(bucketRef).asked["rps"] != 2000 {
		t.Fatal("a charge served from the pool is not demand")
	}
	if _, ok := ps.Take(rpsPlan(1), T); ok {
		t.Fatal("served from an empty pool")
	}
	ps.Add(rpsPlan(1), map[string]int64{"rps": 2000}, 3, 4, 1, T, T+PoolLifeMs)
	if _, ok := ps.Take(rpsPlan(1), T+PoolLifeMs); ok {
		t.Fatal("served from a pool at the end of its life")
	}
	two := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"rps": 1})
	if _, ok := ps.Take(two, T); ok {
		t.Fatal("served a plan of other limits")
	}
	if _, ok := ps.Take(NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 3}), T); ok {
		t.Fatal("served more than the pool holds")
	}
	if _, ok := ps.Take(rpsPlan(0), T); !ok || ps.Held(bucketRef, "rps", T) != 2000 {
		t.Fatal("a charge of nothing took from the pool or was refused")
	}
}

// Adding to a pool on another shard, count or set of limits, or to an
// expired one, returns the old pool's rest to refund; otherwise the pool
// grows and lives on.
func TestPoolAddReturnsAStalePool(t *testing.T) {
	for _, c := range []struct {
		name  string
		plan  *Plan
		shard int
		n     int64
		at    int64
		back  bool
	}{
		{"same shard, alive", rpsPlan(1), 0, 1, T + PoolLifeMs - 1, false},
		{"another shard", rpsPlan(1), 1, 2, T, true},
		{"another count", rpsPlan(1), 0, 2, T, true},
		{"other limits", NewPlan(bucketRef, []Limit{perSecond("rps", 20)}, map[string]int64{"rps": 1}), 0, 1, T, true},
		{"expired", rpsPlan(1), 0, 1, T + PoolLifeMs, true},
	} {
		ps := NewPools()
		ps.Add(rpsPlan(1), map[string]int64{"rps": 1000}, 0, 1, 1, T, T+PoolLifeMs)
		back := ps.Add(c.plan, map[string]int64{"rps": 500}, c.shard, c.n, 1, c.at, c.at+PoolLifeMs)
		if (back != nil) != c.back {
			t.Errorf("%s: returned %+v, want a return %v", c.name, back, c.back)
			continue
		}
		held := ps.Held(bucketRef, "rps", c.at)
		switch {
		case c.back && (back.Shard != 0 || back.N != 1 || back.Plan.Amounts()["rps"] != -1000 || held != 500):
			t.Errorf("%s: returned %+v %v, holds %d; want 1000 back to shard 0 of 1, 500 held", c.name, back, back.Plan.Amounts(), held)
		case !c.back && held != 1500:
			t.Errorf("%s: holds %d, want 1500", c.name, held)
		}
	}
}

// Expired returns the rests of pools at the end of their life (all of
// them on Close), each once; an empty rest returns nothing.
func TestPoolExpired(t *testing.T) {
	ps := NewPools()
	ps.Add(rpsPlan(1), map[string]int64{"rps": 1000}, 0, 1, 1, T, T+PoolLifeMs)
	other := bucketRef
	other.Entity = "other"
	ps.Add(NewPlan(other, []Limit{rps10}, nil), map[string]int64{"rps": 0}, 0, 1, 1, T, T+PoolLifeMs)
	if out := ps.Expired(bucketRef, T+PoolLifeMs-1, false); len(out) != 0 {
		t.Fatalf("returned %d pools before the end of their life", len(out))
	}
	if out := ps.Expired(bucketRef, T+PoolLifeMs, false); len(out) != 1 || out[0].Plan.Amounts()["rps"] != -1000 {
		t.Fatalf("returned %+v at the end of its life, want the 1000 held", out)
	}
	if out := ps.Expired(bucketRef, T+PoolLifeMs, false); len(out) != 0 {
		t.Fatal("a pool returned twice")
	}
	ps.Add(rpsPlan(1), map[string]int64{"rps": 1000}, 0, 1, 1, T, T+PoolLifeMs)
	if out := ps.Expired(keys.Bucket{}, T, true); len(out) != 1 {
		t.Fatalf("Close returned %d pools, want the one holding tokens", len(out))
	}
	if ps.Held(bucketRef, "rps", T) != 0 {
		t.Fatal("a returned pool still holds tokens")
	}
}

// Refunds go back into a live pool on the charged shard; charges (an
// adjust) come out of it when it holds them all. Neither mixes: a refund
// with a charge in it, or a charge with a refund, goes to the store.
func TestPoolGiveAndDebit(t *testing.T) {
	two := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, nil)
	fresh := func() *Pools {
		ps := NewPools()
		ps.Add(two, map[string]int64{"rps": 1000, "tpm": 1000}, 2, 4, 1, T, T+PoolLifeMs)
		return ps
	}
	for _, c := range []struct {
		name    string
		shard   int
		milli   map[string]int64
		at      int64
		give    bool
		debit   bool
		planned *Plan
	}{
		{"a refund", 2, map[string]int64{"rps": -500}, T, true, false, two},
		{"a charge it holds", 2, map[string]int64{"rps": 1000, "tpm": 1}, T, false, true, two},
		{"a charge above it", 2, map[string]int64{"rps": 1001}, T, false, false, two},
		{"mixed", 2, map[string]int64{"rps": 100, "tpm": -100}, T, false, false, two},
		{"another shard", 1, map[string]int64{"rps": -5}, T, false, false, two},
		{"at the end of its life", 2, map[string]int64{"rps": -5}, T + PoolLifeMs, false, false, two},
		{"other limits", 2, map[string]int64{"rps": -5}, T, false, false, rpsPlan(0)},
	} {
		ps := fresh()
		if got := ps.Give(c.planned, c.shard, c.milli, c.at); got != c.give {
			t.Errorf("%s: Give %v, want %v", c.name, got, c.give)
		}
		if c.give && ps.Held(bucketRef, "rps", T) != 1500 {
			t.Errorf("%s: holds %d after the refund, want 1500", c.name, ps.Held(bucketRef, "rps", T))
		}
		ps = fresh()
		if got := ps.Debit(c.planned, c.shard, c.milli, c.at); got != c.debit {
			t.Errorf("%s: Debit %v, want %v", c.name, got, c.debit)
		}
		if c.debit && (ps.Held(bucketRef, "rps", T) != 0 || ps.Held(bucketRef, "tpm", T) != 999) {
			t.Errorf("%s: holds %d and %d after the debit, want 0 and 999", c.name, ps.Held(bucketRef, "rps", T), ps.Held(bucketRef, "tpm", T))
		}
	}
	if NewPools().Give(two, 0, map[string]int64{"rps": -1}, T) || NewPools().Debit(two, 0, map[string]int64{"rps": 1}, T) {
		t.Fatal("no pool took a refund or gave a charge")
	}
	if NewPools().Held(bucketRef, "rps", T) != 0 {
		t.Fatal("no pool holds something")
	}
}

// The pool's edges: a limit the plan charges nothing gets no
// reservation; a refund of 0 beside others goes back to the pool; at the
// end of its life a pool holds nothing and takes no charge; a charge of 0
// beside others is taken.
func TestPoolEdges(t *testing.T) {
	two := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"rps": 1})
	ps := NewPools()
	ps.Granted(NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"rps": 200, "tpm": 200}), T)
	ps.Granted(two.WithAmounts(nil), T+demandWindowMs)
	if x := ps.Extra(two, 1, T+demandWindowMs); x["rps"] == 0 || x["tpm"] != 0 {
		t.Fatalf("reserved %v, want rps only (the plan charges no tpm)", x)
	}
	ps = NewPools()
	ps.Add(two, map[string]int64{"rps": 1000, "tpm": 1000}, 0, 1, 1, T, T+PoolLifeMs)
	if !ps.Give(two, 0, map[string]int64{"rps": -500, "tpm": 0}, T) {
		t.Fatal("a refund with a 0 in it did not go back to the pool")
	}
	if !ps.Debit(two, 0, map[string]int64{"rps": 500, "tpm": 0}, T) {
		t.Fatal("a charge with a 0 in it was not taken")
	}
	if ps.Held(bucketRef, "tpm", T+PoolLifeMs) != 0 || ps.Debit(two, 0, map[string]int64{"tpm": 1}, T+PoolLifeMs) {
		t.Fatal("a pool at the end of its life holds tokens or takes charges")
	}
}
