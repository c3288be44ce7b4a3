package sim

import (
	"os"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
)

// Scenarios for open limiter bugs the simulator found. They fail until the
// limiter is fixed; run them with
//
//	SIM_KNOWN_BUGS=1 go test -run KnownBug -v ./sim
//
// and move them to regress_test.go once they pass.

func knownBug(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("SIM_KNOWN_BUGS") == "" {
		t.Skip("known limiter bug (set SIM_KNOWN_BUGS=1 to run): " + what)
	}
}

// A throttle storm that refuses most writes doubles a bucket that is far
// from its ceiling (invariant 6). Found by the long property run
// (LIMITER_PROPERTY_LONG=1, rapid seed 7001): storms refuse 60 % of
// requests for 1 s every 3 s; a client sees five throttles that are at
// least half of its writes to a shard, the rule for a partition refusing
// most writes, and doubles 16 -> 32 -> 64 while the busiest partition runs
// at 100 to 260 write units a second (this scenario is the property run's
// configuration written out; the rapid run saw 120 to 190). Requiring the client's own measure
// of the shard's rate (a quarter of the ceiling) was tried and not enough
// (the shard ran at 347 a second in a later storm), and it slowed the
// hot-entity ramp: a storm of this strength and a saturated partition
// look alike to a client.
func TestKnownBugHeavyThrottleStormDoublesShards(t *testing.T) {
	knownBug(t, "a storm refusing most writes looks like a saturated partition")
	limits := []limiter.Limit{
		{Name: "rpm", Capacity: 418_000, Burst: 627_000, Refill: 418_000, Period: time.Second},
		{Name: "tpm", Capacity: 1_740_000, Burst: 2_610_000, Refill: 1_740_000, Period: time.Minute},
		{Name: "img_per.min", Capacity: 104_000, Burst: 208_000, Refill: 104_000, Period: time.Second},
	}
	wl := &Workload{Writers: 158, Limits: limits,
		Consume:  []Range{{Min: 1, Max: 2}, {Min: 10, Max: 38}, {Min: 2, Max: 4}},
		Entities: []Entity{{ID: "key-0"}}, Resources: []string{"gpt-4o"}, Rate: 1474.7, Faults: true,
		FaultPlan: &FaultPlan{Start: 500 * time.Millisecond, StormEvery: 3 * time.Second, StormLength: time.Second, StormP: 0.6,
			PConflict: 0.0234375, PSpike: 0.00068, Spike: Latency{Median: 200 * time.Millisecond, P99: 1500 * time.Millisecond}},
		Duration: 30 * time.Second}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 0x1e, Tail: 10 * time.Second}))
}
