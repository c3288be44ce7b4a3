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
			m := NewMemory(0)
			knows(t, m, bucketRef, shape{rf: T - 10, tk: map[string]int64{"rps": 80_000_000}}.item(p), 1, T-10)
			m.learn(bucketRef, 0, image(t, shape{n: 2, rf: T - 5, tk: map[string]int64{"rps": 40_000_000}}.item(p)), 2, T-5, 0, nil)
			if !m.grewRecently(bucketRef, T) {
				t.Fatal("the doubling is not recent")
			}
			measured(m, bucketRef, 0, 1, 0.9, T, nil)
			for i := 0; i < tc.throttled+tc.went; i++ {
				m.noteWrite(bucketRef, 0, 2, i < tc.throttled, busyCeiling, T-4+int64(i)/4)
			}
			c := NewCharge(m, p, picks(0, 1), Options{})
			converse(t, c.Start(T), c.Feed, T, []exchange{{"update 0 speculative", throttle}, {tc.want, Result{}}})
		})
	}
}
