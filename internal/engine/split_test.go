package engine

import "testing"

// A bucket far below its limit splits because its partition is hot. A
// client measured, at one shard, the other writers consuming 750 tokens a
// second of busy10's 1,000: three quarters of the refill, not at the
// limit. Then it learns the doubling: each shard now refills 500 a second.
// The others' 750 a second spreads over both shards (375 each); counted
// whole against shard 0's halved share, it said the others take more than
// 90 % of the refill (at the limit), and an acquire that lost two races on
// shard 0, whose item showed it full, was refused: a false refusal made by
// the split itself, while the writers that had not learnt the count yet
// crowded shard 0 (it went on to shard 1, new and empty, and was
// refused there). It writes shard 0 again instead.
func TestStoryADoublingSpreadsWhatTheOthersConsume(t *testing.T) {
	p := planBusy(bucketRef)
	m := NewMemory(0)
	knows(t, m, bucketRef, shape{rf: T - 300}.item(p), 1, T-300)
	measured(m, bucketRef, 0, 0.8, 0.75, T-200, map[string]float64{"rps": 750})
	knows(t, m, bucketRef, shape{n: 2, rf: T - 5, tc: map[string]int64{"wcu": 1000}}.item(p), 2, T-5)
	if v := m.View(bucketRef, 0); v.Drain["rps"] != 375 {
		t.Fatalf("drain after the doubling %v millitokens/ms, want 375 (750 over two shards)", v.Drain["rps"])
	}

	c := NewCharge(m, p, picks(0, 0, 0), Options{})
	s := c.Start(T)
	for i := int64(1); i <= outrunRaces; i++ {
		if describe(s)[:8] != "update 0" {
			t.Fatalf("step %d: %q, want a write to shard 0", i, describe(s))
		}
		// Shard 0 full at two shards; others wrote it meanwhile.
		s = c.Feed(failed(shape{n: 2, rf: T, tc: map[string]int64{"wcu": (1 + i*10) * 1000}}.item(p)), T)
	}
	if describe(s) != "update 0 normal" {
		t.Fatalf("after %d lost races on a full shard: %q, want another write to shard 0", outrunRaces, describe(s))
	}
}

// Right after a doubling, the writers that have not learnt it crowd shard
// 0, whose partition throttles while shard 0 holds its tokens; shard 1,
// new, fills as it is drained. An acquire throttled on shard 0 goes on to
// shard 1, its last shard, whose image shows it empty a moment ago. That
// is a guess, and the only shard that answered (shard 0) refused nothing:
// a local refusal there refused the acquire beside shard 0's tokens. The
// store is asked instead.
func TestStoryAThrottleOnShardZeroThenAFillingShardAsksTheStore(t *testing.T) {
	p := planBusy(bucketRef)
	m := NewMemory(0)
	knows(t, m, bucketRef, shape{n: 2, rf: T - 5}.item(p), 2, T-5) // shard 0 full
	knows(t, m, bucketRef, shape{shard: 1, n: 2, rf: T, tk: map[string]int64{"rps": 0}}.item(p), 2, T)

	c := NewCharge(m, p, picks(0, 0), Options{})
	if s := c.Start(T); describe(s)[:8] != "update 0" {
		t.Fatalf("first step %q, want a write to shard 0", describe(s))
	}
	if s := c.Feed(throttle, T); s.Call == nil || describe(s)[:8] != "update 1" {
		t.Fatalf("after shard 0's throttle: %q, want a write to shard 1", describe(s))
	}

	// With a shard refused before, the guess stands: shard 1 empty, and
	// shard 0 was refused by its tokens.
	knows(t, m, bucketRef, shape{n: 2, rf: T, tk: map[string]int64{"rps": 0}}.item(p), 2, T)
	c = NewCharge(m, p, picks(0, 0), Options{})
	if s := c.Start(T); describe(s) != "refused local" {
		t.Fatalf("both shards empty in view: %q, want a local refusal", describe(s))
	}
}
