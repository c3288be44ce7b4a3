package engine

import "testing"

// A client learned a moment ago that the bucket doubled to 2 shards, and
// measured shard 0 at its ceiling. Within growthCooldown of a doubling it
// does not double again on throttles that a few successes dilute: the new
// shards need a moment to take load. But when the partition refuses at
// least two thirds of its writes at the new count, its load is three
// times what it takes, and one doubling cannot be enough: it doubles at
// once rather than throttle every write over the ceiling for a second.
func TestStoryAnOverloadedShardDoublesWithoutWaiting(t *testing.T) {
	// 100,000 a second: at 2 and 4 shards, far more acquires than a
	// partition's writes.
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100_000)}, map[string]int64{"rps": 1})
	for _, tc := range []struct {
		name      string
		went      int // writes of this client to shard 0 at count 2 that went through
		throttled int // and that were throttled, before the acquire below
		want      string
	}{
		{"five throttles of six writes: doubles again", 1, 4, "update 0 double"},
		{"five of eight: waits, tries the other shard", 3, 4, "update 1 speculative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := justDoubled(t, p, 80_000_000, 1, tc.went, tc.throttled)
			if !m.grewRecently(bucketRef, T) {
				t.Fatal("the doubling is not recent")
			}
			c := NewCharge(m, p, picks(0, 1), Options{})
			converse(t, c.Start(T), c.Feed, T, []exchange{{"update 0 speculative", throttle}, {tc.want, Result{}}})
		})
	}
}

// A client learned a moment ago that the bucket doubled to 2 shards, and
// measured shard 0 at its ceiling; its write there fails on the spent wcu
// gauge (no throttle: the estimate says the partition is full). As after
// throttles, it spreads to the other shard while the doubling is recent,
// unless the partition refused two thirds of its writes at the new count:
// then it doubles again at once.
func TestStoryAHotShardDoublesAgainOnlyWhenOverloaded(t *testing.T) {
	// 100,000 a second: doubles again; 800 a second: too few writes to
	// heat a partition at 4 shards, so an overloaded shard spreads.
	big := NewPlan(bucketRef, []Limit{perSecond("rps", 100_000)}, map[string]int64{"rps": 1})
	small := NewPlan(bucketRef, []Limit{perSecond("rps", 800)}, map[string]int64{"rps": 1})
	for _, tc := range []struct {
		name            string
		p               *Plan
		went, throttled int
		want            string
	}{
		{"five throttles of six writes: doubles again", big, 1, 5, "update 0 double"},
		{"five of eight: spreads", big, 3, 5, "update 1 speculative"},
		{"five of six, a bucket that cannot be split further: spreads", small, 1, 5, "update 1 speculative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			full := p.specs[0].orig.Burst
			spent := failed(shape{n: 2, rf: T, tk: map[string]int64{"rps": full / 2, "wcu": 0}}.item(p))
			m := justDoubled(t, p, full, 2, tc.went, tc.throttled)
			c := NewCharge(m, p, picks(0, 1), Options{})
			converse(t, c.Start(T), c.Feed, T, []exchange{{"update 0 speculative", spent}, {tc.want, Result{}}})
		})
	}
}

// justDoubled returns the memory of a client that knew p's bucket at one
// shard holding tk millitokens, learned 5 ms before T that it doubled to
// 2 (half of tk on shard 0), measured shard 0 at rate writes a ms, 0.9 of
// them others', and saw went of its writes there go through and
// throttled of them throttled, in the 4 ms before T.
func justDoubled(t *testing.T, p *Plan, tk int64, rate float64, went, throttled int) *Memory {
	t.Helper()
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, shape{rf: T - 10, tk: map[string]int64{"rps": tk}}.item(p), 1, T-10)
	m.learn(bucketRef, 0, image(t, shape{n: 2, rf: T - 5, tk: map[string]int64{"rps": tk / 2}}.item(p)), 2, T-5, 0, nil)
	measured(m, bucketRef, 0, rate, 0.9, T, nil)
	for i := 0; i < throttled+went; i++ {
		m.noteWrite(bucketRef, 0, 2, i < throttled, busyCeiling, T-4+int64(i)/4)
	}
	return m
}

// mayDouble, window by window, right after a doubling: at least
// hotThrottles throttles, at least two thirds of the client's writes to
// the shard, at the count asked about, within hotWindow of the window's
// first throttle (overloaded); never for a shard the memory has no entry
// of. Without a doubling learned within growthCooldown, always.
func TestMayDouble(t *testing.T) {
	type writes struct{ throttled, went int }
	grown := func(m *Memory, at int64) {
		m.learn(bucketRef, 0, nil, 1, at-1, 0, nil)
		m.learn(bucketRef, 0, nil, 2, at, 0, nil)
	}
	for _, c := range []struct {
		name string
		w    writes
		n    int64 // the count asked about (the writes are at 2)
		now  int64 // when asked (the window starts at T)
		want bool
	}{
		{"six throttles of nine: two thirds", writes{6, 3}, 2, T, true},
		{"six of ten: less", writes{6, 4}, 2, T, false},
		{"four of four: too few", writes{4, 0}, 2, T, false},
		{"five of five", writes{5, 0}, 2, T, true},
		{"at another count", writes{5, 0}, 4, T, false},
		{"hotWindow after the window began", writes{5, 0}, 2, T + hotWindow, true},
		{"later: the window is over", writes{5, 0}, 2, T + hotWindow + 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := NewMemory(0)
			grown(m, c.now)
			for i := 0; i < c.w.throttled+c.w.went; i++ {
				m.noteWrite(bucketRef, 0, 2, i < c.w.throttled, busyNo, T)
			}
			if got := m.mayDouble(bucketRef, 0, c.n, c.now); got != c.want {
				t.Fatalf("mayDouble %v, want %v", got, c.want)
			}
		})
	}
	m := NewMemory(0)
	if !m.mayDouble(bucketRef, 0, 1, T) {
		t.Fatal("a bucket the memory does not know may not double")
	}
	for i := 0; i < 5; i++ {
		m.noteWrite(bucketRef, 0, 2, true, busyNo, T)
	}
	if !m.mayDouble(bucketRef, 1, 2, T) {
		t.Fatal("a bucket never seen to double may not")
	}
	grown(m, T)
	if m.mayDouble(bucketRef, 1, 2, T) {
		t.Fatal("a shard the memory does not know is overloaded")
	}
	if !m.mayDouble(bucketRef, 1, 2, T+growthCooldown) || m.mayDouble(bucketRef, 1, 2, T+growthCooldown-1) {
		t.Fatal("the cooldown is not growthCooldown long")
	}
}
