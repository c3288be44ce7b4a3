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
