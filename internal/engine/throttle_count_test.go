package engine

import "testing"

// Near its ceiling a shard is hot when throttles are at least half of the
// writes made to it (TestThrottlesMarkAHotShard), so every write a charge
// makes counts as an attempt: one that went through, one that failed its
// condition, a create. A charge that left them out would call a shard hot
// after a few throttles among many successes, and double it for nothing.
func TestEveryWriteCountsAmongTheThrottles(t *testing.T) {
	ref := bucketRef
	p := plan1(ref)
	for _, tc := range []struct {
		name     string
		turns    []exchange
		attempts int
	}{{
		name: "a write that went through",
		turns: []exchange{
			{"update 0 speculative", wrote(shape{rf: T - 3000, tk: map[string]int64{"rps": 9000}}.item(p))},
			{"done speculative", Result{}},
		},
		attempts: 2,
	}, {
		name: "a write that found no item, then the create",
		turns: []exchange{
			{"update 0 speculative", gone},
			{"query discover", Result{}},
			{"put 0 create", Result{}},
			{"done create", Result{}},
		},
		attempts: 3,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m := speculating(NewMemory(0))
			m.noteWrite(ref, 0, 1, true, busyNear, T) // a throttle a moment ago
			c := NewCharge(m, p, picks(), Options{})
			converse(t, c.Start(T), c.Feed, T, tc.turns)
			w := m.get(idOf(ref)).shard(0).throttle
			if w.attempts != tc.attempts || w.count != 1 {
				t.Fatalf("window of %d writes, %d throttled; want %d writes, 1 throttled", w.attempts, w.count, tc.attempts)
			}
		})
	}
}
