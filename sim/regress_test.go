package sim

import (
	"testing"
	"time"

	"github.com/shardlimit/limiter"
)

// Regression scenarios for limiter bugs the simulator found and that are
// fixed: they must keep passing. (Open ones are in knownbugs_test.go.)

// RetryAfter was computed from the caller's clock only (projected()
// returned rf = now): when another client's faster clock had moved the
// bucket's rf ahead of the caller's now, the bucket does not refill before
// rf, so waiting RetryAfter and retrying was refused again.
// Here clocks stay skewed in the tail (TailKeep), where invariant 7 is
// judged.
func TestRegressionRetryAfterIgnoresFutureRefillTimestamp(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	cfg := Config{Scenario: "faults", Seed: 1, Duration: 20 * time.Second}
	wl := faulty(cfg)
	wl.TailClock = TailKeep
	cfg.Workload = wl
	requireOK(t, mustRun(t, cfg))
}

// Normal's optimistic lock is "rf = :seen", but Normal wrote
// rf = max(rf, now): a writer whose clock was at or behind rf changed the
// item without moving rf, so another writer holding an older image still
// passed the lock (now rf = max(rf+1, now)). With seed 8 below, a client that knows shard_count 4 rewrites
// shard 1 from 2 to 4 shards without moving rf (seq 4092), then a client
// holding the n=2 image credits 27 ms of refill at the n=2 per-shard rate
// (94.5 tokens, the item allows 47.25) and leaves tk above the n=4 burst
// (seq 4094): invariant 2.
func TestRegressionStaleNormalWriteAfterShardChange(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := &Workload{Writers: 101, Limits: []limiter.Limit{{Name: "rpm", Capacity: 7000, Burst: 7000, Refill: 7000, Period: time.Second}},
		Consume: []Range{{Min: 1, Max: 1}}, Entities: []Entity{{ID: "key-0"}}, Resources: []string{"gpt-4o"},
		Rate: 4000, Skew: 250 * time.Millisecond, Duration: 4 * time.Second}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 8, Tail: 3 * time.Second}))
}

// Hot entity: the partition saturates at 1000 WCU/s, but about half of
// those writes are failed conditional writes (billed by DynamoDB, and by
// memsim) that do not charge the hidden wcu limit, so wcu never ran dry,
// shards never doubled and 95 % of requests were throttled for good (now
// repeated throttles also double). The acceptance itself is
// TestAcceptanceHotEntity (SIM_ACCEPTANCE=1).
func TestRegressionHotEntityNeverDoubles(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	rep := mustRun(t, Config{Scenario: "hot-entity", Seed: 1, Duration: 20 * time.Second, Tail: -1})
	if rep.ShardDoublings == 0 || rep.AfterWarmUp.ThrottledPc > 1 {
		t.Errorf("after warm-up %.1f%% of attempts throttled; %d doublings", rep.AfterWarmUp.ThrottledPc, rep.ShardDoublings)
	}
}
