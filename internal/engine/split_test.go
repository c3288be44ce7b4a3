package engine

import (
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
)

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

// Right after a doubling, shard 1, new, fills as it is drained, and the
// client's image shows it empty a moment ago: the acquire passes it on
// that guess and goes on to shard 0, whose partition, crowded by the
// writers that have not learnt the count, throttles. No shard is left:
// the acquire ended unavailable beside shard 1's refill. It asks the
// store on shard 1 instead (one more write, to another partition).
func TestStoryAGuessedShardIsAskedAfterAThrottle(t *testing.T) {
	// 4,000 a second: 2,000 a shard at two, enough writes to heat each
	// partition (a throttle on a shard of fewer is a refusal, see
	// Charge.throttled).
	busy40 := Limit{Name: "rps", Limit: bucket.Limit{Capacity: 10_000, Burst: 10_000, RefillAmount: 4_000_000, RefillPeriod: 1000}}
	p := NewPlan(bucketRef, []Limit{busy40}, map[string]int64{"rps": 1})
	filling := func() *Memory {
		m := NewMemory(0)
		knows(t, m, bucketRef, shape{n: 2, rf: T - 5}.item(p), 2, T-5) // shard 0 full
		knows(t, m, bucketRef, shape{shard: 1, n: 2, rf: T, tk: map[string]int64{"rps": 0}}.item(p), 2, T)
		return m
	}

	c := NewCharge(filling(), p, picks(1, 0), Options{})
	last := converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 full", throttle},
		{"update 1 speculative", wrote(shape{shard: 1, n: 2, rf: T}.item(p))},
		{"done speculative", Result{}},
	})
	if last.Err != nil || c.Shard != 1 {
		t.Fatalf("err %v, shard %d: want the acquire charged on shard 1", last.Err, c.Shard)
	}

	// Shard 1 asked lacks the tokens: the store's refusal is the answer.
	c = NewCharge(filling(), p, picks(1, 0), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 full", throttle},
		{"update 1 speculative", failed(shape{shard: 1, n: 2, rf: T, tk: map[string]int64{"rps": 0}}.item(p))},
		{"refused reject", Result{}},
	})

	// Asked once: throttled there too, shard 0's count is read; it shows
	// no doubling, and the throttle (shard 1's) is the answer.
	c = NewCharge(filling(), p, picks(1, 0), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 full", throttle},
		{"update 1 speculative", throttle},
		{"get [0] discover", found(shape{n: 2, rf: T - 5}.item(p))},
		{"err", Result{}},
	})
}

// A client measured shard 0, the bucket's only shard, written at 1.8
// times the partition's ceiling: a rate the partition serves only from
// its burst. Its write is throttled, and shard 0's count, read, shows no
// one doubled the bucket. The burst is spent; waiting for two more
// throttles (the rule for a shard measured at its ceiling, where one
// throttle may be bad luck) left every write over the ceiling throttled
// meanwhile, each acquire answered unavailable. The client doubles the
// bucket at once, and writes shard 0 again.
func TestStoryAThrottleOverTheCeilingDoublesAtOnce(t *testing.T) {
	p := planBusy(bucketRef)
	one := shape{rf: T - 10, tk: map[string]int64{"rps": 8000}}.item(p)
	hot := func() *Memory {
		m := NewMemory(0)
		knows(t, m, bucketRef, one, 1, T-10)
		measured(m, bucketRef, 0, 1.8, 1.7, T, nil)
		return m
	}

	m := hot()
	c := NewCharge(m, p, picks(0), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 full", throttle},
		{"get [0] discover", found(one)},
		{"update 0 double", wrote(shape{n: 2, rf: T - 10, tk: map[string]int64{"rps": 8000}}.item(p))},
		{"update 0 full", Result{}},
	})
	if m.Count(bucketRef) != 2 {
		t.Fatalf("count %d after the doubling, want 2", m.Count(bucketRef))
	}

	// The doubling throttled too (the partition is at its ceiling): the
	// acquire writes shard 0 again, from the item the read returned.
	m = hot()
	c = NewCharge(m, p, picks(0), Options{})
	last := converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 full", throttle},
		{"get [0] discover", found(one)},
		{"update 0 double", throttle},
		{"update 0 full", wrote(shape{rf: T - 10, tk: map[string]int64{"rps": 7000}}.item(p))},
		{"done full", Result{}},
	})
	if last.Err != nil {
		t.Fatalf("err %v, want the acquire charged", last.Err)
	}

	// In a storm (throttles on many buckets at once) a throttle says
	// nothing of this partition: the throttle is the answer.
	m = hot()
	for i, e := range []string{"a", "b"} {
		other := planBusy(keys.Bucket{Namespace: "ns", Entity: e, Resource: "r"})
		c := NewCharge(m, other, picks(), Options{})
		converse(t, c.Start(T+int64(i)), c.Feed, T+int64(i), []exchange{{"update 0 full", throttle}, {"err", Result{}}})
	}
	c = NewCharge(m, p, picks(0), Options{})
	converse(t, c.Start(T+2), c.Feed, T+2, []exchange{
		{"update 0 full", throttle},
		{"get [0] discover", found(one)},
		{"err", Result{}},
	})
}

// A key gets hot from a cold start: its writers have not measured the
// shards' write rate yet (it takes two items 400 ms apart), and another
// client doubled the bucket. An acquire at the two shards this client
// knows is throttled on both, and ended unavailable. It reads shard 0's
// count instead (a consistent read: read capacity is not the partition's
// write ceiling) and goes on at the count it shows; when the count is the
// one it knows, the throttle is the answer.
func TestStoryThrottledEverywhereReadsTheCount(t *testing.T) {
	busy40 := Limit{Name: "rps", Limit: bucket.Limit{Capacity: 10_000, Burst: 10_000, RefillAmount: 4_000_000, RefillPeriod: 1000}}
	p := NewPlan(bucketRef, []Limit{busy40}, map[string]int64{"rps": 1})
	two := func() *Memory {
		m := NewMemory(0)
		m.learn(bucketRef, 0, nil, 2, T, 0, nil)
		vouch(m, bucketRef, T)
		return m
	}

	// Another client doubled to four: the acquire goes on to a new shard.
	m := two()
	c := NewCharge(m, p, picks(1, 0, 0), Options{})
	s := c.Start(T)
	for i := 0; i < 2; i++ {
		if s.Call == nil || s.Call.Update == nil {
			t.Fatalf("try %d: %q, want a write", i, describe(s))
		}
		s = c.Feed(throttle, T)
	}
	if describe(s) != "get [0] discover" {
		t.Fatalf("throttled on both shards: %q, want a read of shard 0's count", describe(s))
	}
	s = c.Feed(found(shape{n: 4, rf: T}.item(p)), T)
	if d := describe(s); len(d) < 8 || (d[:8] != "update 2" && d[:8] != "update 3") {
		t.Fatalf("shard 0 shows four shards: %q, want a write to shard 2 or 3", d)
	}
	if m.Count(bucketRef) != 4 {
		t.Fatalf("count %d, want 4 learnt", m.Count(bucketRef))
	}

	// No one doubled: the throttle is the answer (one client's throttles,
	// which a storm makes too, are no reason to double).
	c = NewCharge(two(), p, picks(1), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 1 speculative", throttle},
		{"update 0 full", throttle},
		{"get [0] discover", found(shape{n: 2, rf: T}.item(p))},
		{"err", Result{}},
	})
}
