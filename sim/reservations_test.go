package sim

import (
	"testing"
	"time"

	"github.com/shardlimit/limiter"
)

// Reservations, as docs/reservations.md states them: one key, limits far
// above the load or just above it, every process its own limiter. At most
// a tenth of a write per admitted acquire, one shard, no doubling, no
// false refusals, crashes stranding nothing the others wait for; every
// invariant holds (the checker counts pool admissions and what pools move).
func TestReservationsTargets(t *testing.T) {
	for _, c := range []struct {
		name        string
		writers     int
		rate, limit float64
		crash       time.Duration
	}{
		{"16 processes at 10,000/s", 16, 10_000, 1_000_000, 0},
		{"64 processes at 40,000/s", 64, 40_000, 1_000_000, 0},
		{"16 processes at 90% of the limit", 16, 9_000, 10_000, 0},
		{"16 processes at 90%, crashing", 16, 9_000, 10_000, 10 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			wl := &Workload{Limits: []limiter.Limit{limiter.PerSecond("rps", int64(c.limit))}, Entities: []Entity{{ID: "k"}},
				Resources: []string{"r"}, Consume: []Range{{Min: 1, Max: 1}}, Writers: c.writers, Rate: c.rate, Uneven: 0.7,
				Reservations: true, CrashEvery: c.crash, Duration: 30 * time.Second}
			rep := mustRun(t, Config{Workload: wl, Seed: 1, Tail: -1})
			requireOK(t, rep)
			if w := rep.WCU / float64(rep.Admitted); w > 0.1 {
				t.Errorf("%.3f WCU per admitted acquire, want at most 0.1", w)
			}
			if rep.ShardCountFinal != 1 || rep.ShardDoublings != 0 {
				t.Errorf("%d shards after %d doublings, want one shard", rep.ShardCountFinal, rep.ShardDoublings)
			}
			if rep.Rejected*100 > rep.Acquires { // the limit is above the demand: every refusal is a false one
				t.Errorf("%d of %d acquires refused", rep.Rejected, rep.Acquires)
			}
			if c.crash > 0 && rep.Crashes == 0 {
				t.Error("no process crashed")
			}
			t.Logf("%.4f WCU per admitted acquire, %d refused of %d, %d unavailable, %d throttled, %d crashes", rep.WCU/float64(rep.Admitted), rep.Rejected, rep.Acquires, rep.Unavailable, rep.Throttled, rep.Crashes)
		})
	}
}
