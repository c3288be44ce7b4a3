package sim

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
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

// Under contention the limiter rejects acquires that the bucket could
// serve: a bucket with one limit sits at its burst, every writer takes the
// blind Full path, their fh <= now conditions collide, the Normal fallbacks
// lose the rf race, and after maxSlowAttempts the limiter reports the
// latest state as a rejection with no limit exceeded. 128 writers on a
// 300/s bucket: 0.9 % false rejections at 150 req/s, 2.3 % at 250 req/s,
// with 2.7 to 3.2 round trips per acquire (BRIEF: at most 1 %, 1 round
// trip). Before the limiter's first fixes it was 8 % and 27 %.
func TestKnownBugFalseRejectionsUnderContention(t *testing.T) {
	knownBug(t, "lost races end as rejections")
	wl := contention(Config{})
	wl.Rate, wl.RetryProb, wl.AdjustProb, wl.RollbackProb = 250, 0, 0, 0
	wl.Limits, wl.Consume = wl.Limits[:1], wl.Consume[:1]
	rep := mustRun(t, Config{Workload: wl, Seed: 1, Duration: 30 * time.Second, Tail: -1})
	if rep.FalseRejections*100 > rep.Acquires {
		t.Errorf("%d false rejections of %d acquires (%.1f%%)", rep.FalseRejections, rep.Acquires,
			100*float64(rep.FalseRejections)/float64(rep.Acquires))
	}
}

// Doubling on repeated throttles (3 a second on a shard) cannot tell a hot
// partition from a throttle storm: here storms throttle 10 % of requests
// for 1 s every 3 s on a bucket whose partitions are far from their
// ceiling, and the shard count doubles anyway (invariant 6: a doubling must
// come from a partition really at its write ceiling).
func TestKnownBugThrottleStormDoublesShards(t *testing.T) {
	knownBug(t, "throttle storms trigger doublings")
	wl := hotEntity(Config{})
	wl.Rate, wl.Duration, wl.Faults = 800, 10*time.Second, true
	wl.FaultPlan = &FaultPlan{Start: time.Second, StormEvery: 3 * time.Second, StormLength: time.Second, StormP: 0.1}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 1, Tail: -1}))
}

// A cascading acquire that both buckets refuse reports the first one's
// retry-after (cascadeSlow returns at the child's shortfall): when the
// parent needs longer, waiting the child's retry-after is not enough. Here
// (found by TestProperty) conflicts during the fault phase left the parent
// with fewer tokens than the child; in the tail a client waits 63 ms, the
// child's retry-after, and the parent refuses it for 112 ms more
// (invariant 7; the overall retry-after must be the largest).
func TestKnownBugCascadeRetryAfterIgnoresParent(t *testing.T) {
	knownBug(t, "a cascade refusal reports only the first short bucket's retry-after")
	lim := limiter.Limit{Name: "rpm", Capacity: 17, Burst: 25, Refill: 17, Period: time.Second}
	wl := &Workload{Writers: 101, Limits: []limiter.Limit{lim}, Consume: []Range{{Min: 2, Max: 10}},
		Entities: []Entity{{ID: "project-0", NoTraffic: true, Limits: []limiter.Limit{lim}}, {ID: "project-1", NoTraffic: true, Limits: []limiter.Limit{lim}},
			{ID: "key-0", Parent: "project-0", Cascade: true}, {ID: "key-1", Parent: "project-1", Cascade: true}},
		Resources: []string{"gpt-4o"}, Rate: 119.421875, RollbackProb: 0.2, AdjustProb: 2.6797014927190635e-33, RetryProb: 0.10611112525589053, AdjustSpread: 0.4,
		CallTime: Latency{Median: 200 * time.Millisecond, P99: 2 * time.Second}, Probe: true, Skew: 20 * time.Millisecond, Faults: true,
		FaultPlan: &FaultPlan{Start: 500 * time.Millisecond, StormEvery: 3 * time.Second, StormLength: time.Second, StormP: 2.4574057058272157e-21 * 20,
			P5xxBefore: 0.0003631513349420545, P5xxAfter: 1.0587911840678754e-22, PLost: 7.228687555118531e-248, PConflict: 0.03,
			PSpike: 2.5494839064776897e-05, Spike: Latency{Median: 200 * time.Millisecond, P99: 1500 * time.Millisecond}},
		Duration: 3 * time.Second}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 2, Tail: 3 * time.Second}))
}

// A clock step (fast clocks jump back to true time, as an NTP step does)
// leaves refill timestamps up to the skew in the future of every clock: the
// hidden wcu limit stops refilling for that long, looks exhausted, and the
// bucket doubles again and again, 1 -> 256 in a quarter of a second, with
// its partitions at three quarters of their ceiling (invariant 6).
func TestKnownBugClockStepDoublesShards(t *testing.T) {
	knownBug(t, "a backward clock step makes wcu look exhausted")
	wl := &Workload{Writers: 100, Limits: []limiter.Limit{{Name: "rpm", Capacity: 5000, Burst: 5000, Refill: 5000, Period: time.Second}},
		Consume: []Range{{Min: 2, Max: 4}}, Entities: []Entity{{ID: "key-0"}}, Resources: []string{"gpt-4o"},
		Rate: 1200, Skew: time.Second, TailClock: TailStep, Duration: 3 * time.Second}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 0, Tail: 3 * time.Second}))
}

// Lease.Rollback refunds every part (the entity's bucket and the cascade
// parent's) what the first part holds (parts[0].net): when an Adjust
// applied to the child but definitely not to the parent (throttled), the
// rollback refunds the parent the adjustment it never got. Here the
// parent's tc ends at -5 tokens (invariant 1; the simulator's interval
// accounting tolerates it because the client saw the adjust fail).
func TestKnownBugRollbackRefundsParentTheChildsAdjust(t *testing.T) {
	knownBug(t, "Rollback uses the first lease part's adjustments for every part")
	clk := memsim.NewManualClock(memsim.Epoch())
	parentPK := "ns/BUCKET#p#r#0"
	st := memsim.New(memsim.WithClock(clk), memsim.WithFaults(memsim.OnKey(parentPK,
		memsim.OnOps([]memsim.OpKind{memsim.OpUpdate}, memsim.Nth(2, memsim.FaultThrottle))))) // the parent's adjust
	ctx := context.Background()
	l, err := limiter.New(st, limiter.WithClock(clk), limiter.WithNamespace("ns"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PutEntity(ctx, limiter.Entity{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := l.PutEntity(ctx, limiter.Entity{ID: "c", Parent: "p", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(ctx, limiter.Request{Entity: "c", Resource: "r",
		Limits: []limiter.Limit{limiter.PerMinute("tpm", 1000)}, Consume: map[string]int64{"tpm": 10}})
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Adjust(ctx, map[string]int64{"tpm": 5}); err == nil {
		t.Fatal("the parent's adjust was meant to be throttled")
	}
	if err := lease.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pk := range []string{"ns/BUCKET#c#r#0", parentPK} {
		tc, _ := st.Peek(store.Key{PK: pk, SK: "#STATE"}).Int("b_tpm_tc")
		if tc != 0 {
			t.Errorf("%s: tc = %d millitokens after the rollback, want 0", pk, tc)
		}
	}
}
