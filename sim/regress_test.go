package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
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

// Under contention the limiter rejected acquires that the bucket could
// serve: a bucket with one limit sits at its burst, every writer takes the
// full path, and a full write leaves the bucket not full for only one
// charge's refill time (3.3 ms at 300/s), so the writers queued on that
// window: 3.3 round trips per acquire, and 3.5 % of acquires lost ten
// races in a row and were refused with no limit exceeded (the bound is 1 %). A full write after a lost race now takes a cushion (paths.go):
// 0 false rejections, 2.0 round trips per acquire.
func TestRegressionFalseRejectionsUnderContention(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := contention(Config{})
	wl.Rate, wl.RetryProb, wl.AdjustProb, wl.RollbackProb = 250, 0, 0, 0
	wl.Limits, wl.Consume = wl.Limits[:1], wl.Consume[:1]
	wl.Duration = 10 * time.Second
	rep := mustRun(t, Config{Workload: wl, Seed: 1, Tail: -1})
	requireOK(t, rep)
	if rep.FalseRejections*100 > rep.Acquires {
		t.Errorf("%d false rejections of %d acquires (%.1f%%)", rep.FalseRejections, rep.Acquires,
			100*float64(rep.FalseRejections)/float64(rep.Acquires))
	}
}

// A cascading acquire that both buckets refused reported the first one's
// retry-after (cascadeSlow returned at the child's shortfall): when the
// parent needs longer, waiting the child's retry-after is not enough. Here
// (found by TestProperty) conflicts during the fault phase left the parent
// with fewer tokens than the child; in the tail a client waits 63 ms, the
// child's retry-after, and the parent refuses it for 112 ms more
// (invariant 7; the overall retry-after must be the largest, and now is).
func TestRegressionCascadeRetryAfterIgnoresParent(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
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
// hidden wcu limit stops refilling for that long and looked exhausted, and
// the bucket doubled again and again, 1 -> 256 in a quarter of a second,
// with its partitions at three quarters of their ceiling (invariant 6).
// Now wcu counts as exhausted only for a client whose own measurement of
// the shard's write rate (two images, one clock) is near the ceiling.
func TestRegressionClockStepDoublesShards(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := &Workload{Writers: 100, Limits: []limiter.Limit{{Name: "rpm", Capacity: 5000, Burst: 5000, Refill: 5000, Period: time.Second}},
		Consume: []Range{{Min: 2, Max: 4}}, Entities: []Entity{{ID: "key-0"}}, Resources: []string{"gpt-4o"},
		Rate: 1200, Skew: time.Second, TailClock: TailStep, Duration: 3 * time.Second}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 0, Tail: 3 * time.Second}))
}

// Lease.Rollback refunded every part (the entity's bucket and the cascade
// parent's) what the first part held (parts[0].net): when an Adjust
// applied to the child but definitely not to the parent (throttled), the
// rollback refunded the parent the adjustment it never got. Here the
// parent's tc ended at -5 tokens (invariant 1; the simulator's interval
// accounting tolerates it because the client saw the adjust fail).
func TestRegressionRollbackRefundsParentTheChildsAdjust(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	clk := memsim.NewManualClock(memsim.Epoch())
	parentPK := "ns/BUCKET#p#r#0"
	st := memsim.New(memsim.WithClock(clk), memsim.WithFaults(memsim.OnKey(parentPK,
		memsim.OnOps([]memsim.OpKind{memsim.OpUpdate}, memsim.Nth(2, memsim.FaultThrottle))))) // the parent's adjust
	ctx := context.Background()
	l, err := limiter.New(st, limiter.WithClock(clk), limiter.WithNamespace("ns"))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(st, admin.WithClock(clk), admin.WithNamespace("ns"), admin.WithLimiter(l))
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.PutEntity(ctx, admin.Entity{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := adm.PutEntity(ctx, admin.Entity{ID: "c", Parent: "p", Cascade: true}); err != nil {
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

// Doubling on repeated throttles (3 a second on a shard) could not tell a
// hot partition from a throttle storm: here storms throttle 10 % of
// requests for 1 s every 3 s on a bucket whose partitions are far from
// their ceiling, and the shard count doubled anyway (invariant 6: a
// doubling must come from a partition really at its write ceiling). Now
// throttles mark a shard hot only when they are at least half of the
// client's writes to it (a saturated partition refuses most, a storm
// some), or when the client measured the shard near its ceiling.
func TestRegressionThrottleStormDoublesShards(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := hotEntity(Config{})
	wl.Rate, wl.Duration, wl.Faults = 800, 10*time.Second, true
	wl.FaultPlan = &FaultPlan{Start: time.Second, StormEvery: 3 * time.Second, StormLength: time.Second, StormP: 0.1}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 1, Tail: -1}))
}

// In cascade, parents asked for two to four times their rate are raced for
// by forty children each: once retries piled up (from about 28 s in), 1.7 %
// of acquires lost ten transaction races in a row and were refused with no
// limit exceeded. The cascade's slow path now has twenty attempts.
func TestRegressionCascadeLostRaces(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	// 45 s of the scenario: 0.08 % with twenty attempts, 0.99 % with ten
	// (1.7 % over the scenario's 60 s). The bound is 1 %; the bar here is
	// half that, so that the regression shows.
	rep := mustRun(t, Config{Scenario: "cascade", Seed: 1, Duration: 45 * time.Second, Tail: -1})
	requireOK(t, rep)
	if rep.FalseRejections*200 > rep.Acquires {
		t.Errorf("%d false rejections of %d acquires (%.2f%%)", rep.FalseRejections, rep.Acquires,
			100*float64(rep.FalseRejections)/float64(rep.Acquires))
	}
	t.Logf("%d false rejections of %d acquires", rep.FalseRejections, rep.Acquires)
}

// A throttle storm that refuses most writes doubled a bucket far from its
// ceiling (invariant 6): storms refuse 60 % of requests for 1 s every 3 s,
// a client saw five throttles that were at least half of its writes to a
// shard, and the bucket went 16 -> 32 -> 64 while its busiest partition
// ran at 100 to 260 write units a second. A storm and a saturated
// partition look alike by their throttles; by the shard's write rate they
// do not, once the rate counts what the partition bills (failed
// conditional writes included, see engine.Memory.carry) and is fresh (an
// estimate older than a second says nothing). Throttles now mark a shard
// hot only on a shard measured at 80-90 % of the ceiling, and not while
// they hit several buckets at once.
func TestRegressionHeavyThrottleStormDoublesShards(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
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

// Doubling under total throttling: when a hot key's partition throttles
// every write, the doubling write is throttled too and, with no backoff,
// never landed: with zero latency at 4,000 req/s on a 1,500/s bucket,
// 58,682 of 60,000 acquires came back unavailable and the bucket never
// doubled. A client that decided to double keeps trying the doubling
// first on its next acquires, and the shard's write rate counts the failed
// writes the partition billed: the bucket doubles within the first second,
// and unavailability stays under 10 % (most of it the first seconds).
func TestRegressionDoublingUnderTotalThrottling(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	for _, lm := range []*LatencyModel{{}, nil} {
		wl := &Workload{Limits: []limiter.Limit{limiter.PerSecond("rps", 1500)}, Entities: []Entity{{ID: "hot"}},
			Resources: []string{"r"}, Consume: []Range{{Min: 1, Max: 1}}, Writers: 64, Rate: 4000, Duration: 15 * time.Second}
		rep := mustRun(t, Config{Workload: wl, Seed: 1, Tail: -1, Latency: lm})
		requireOK(t, rep)
		doubledAt := int64(-1)
		for _, s := range rep.Timeline {
			if s.ShardCount > 1 {
				doubledAt = s.TMs
				break
			}
		}
		if doubledAt < 0 || doubledAt >= 2000 {
			t.Errorf("latency %v: first doubling in the second starting at %d ms, want within 2 s", lm, doubledAt)
		}
		if rep.Unavailable*10 > rep.Acquires {
			t.Errorf("latency %v: %d of %d acquires unavailable", lm, rep.Unavailable, rep.Acquires)
		}
		t.Logf("latency %v: %d shards, %d of %d unavailable", lm, rep.ShardCountFinal, rep.Unavailable, rep.Acquires)
	}
}

// All shards of a sharded bucket expire (DynamoDB deletes idle items one
// by one). When traffic comes back, a new process, which knows of one
// shard, finds no shard by the index query and creates shard 0 at one
// shard, full; processes that remember the old count (16 here) meanwhile
// create shards 1..15 at 16 shards, empty. Each of those refills at a
// sixteenth of the rate, while shard 0 refills at the whole rate: the
// bucket's shards together refill at almost twice the rate. The processes
// at 16 shards keep writing shards 1..15 (their shard_count matches);
// when one writes shard 0 it learns the count there (1, then 2 after a
// doubling), and its next write to shard 1, which shows 16, sends it back
// to 16. Seed 2: 9,698 tokens admitted in 5.95 s on a 1,000/s limit with a
// burst of 1,000, 2,743 over the bound (invariant 3); without expiry
// (ExpiryDelay 0) the same run holds it. Now a missing shard other than 0
// is made only after a read of shard 0 shows a count that includes it.
func TestRegressionStrayShardsAfterExpiry(t *testing.T) {
	wl := &Workload{Limits: []limiter.Limit{limiter.PerSecond("rps", 1000)}, Entities: []Entity{{ID: "k"}}, Resources: []string{"r"},
		Consume: []Range{{Min: 1, Max: 1}}, Writers: 64, Rate: 4000, DutyPeriod: 2 * time.Hour, DutyOn: 6 * time.Second,
		Duration: 2*time.Hour + 6*time.Second, Faults: true, FaultPlan: &FaultPlan{ExpiryDelay: 10 * time.Minute},
		CrashEvery: 3 * time.Hour, LimitRate: 1000}
	rep := mustRun(t, Config{Workload: wl, Seed: 2, Tail: -1})
	if rep.Expired == 0 {
		t.Fatal("nothing expired: the scenario does not show what it is about")
	}
	requireOK(t, rep)
}

// A process that remembers a shard's item from before it expired ignores
// every image of the recreated item as "an answer overtaken by a newer
// one" (engine.Memory.learn: its write count, wcu_tc, starts again from
// zero, below the old item's) until the new item's write count passes the
// old one. Meanwhile the process decides from the item as it was before
// the expiry and takes no rate estimate: alone on its bucket, one process
// at 50 acquires a second for a minute, then again two hours later, makes
// 1.21 round trips per acquire when the bucket expired in between (862
// acquires needed a second write, the retry path), 1.00 when it did not.
// Now an image with fewer writes but a later refill is taken as the item
// made again.
func TestRegressionRecreatedShardImagesIgnored(t *testing.T) {
	run := func(expiry time.Duration) *Report {
		wl := &Workload{Limits: []limiter.Limit{limiter.PerSecond("rps", 100)}, Entities: []Entity{{ID: "k"}}, Resources: []string{"r"},
			Consume: []Range{{Min: 1, Max: 1}}, Writers: 1, Rate: 50, DutyPeriod: 2 * time.Hour, DutyOn: time.Minute,
			Duration: 2*time.Hour + time.Minute, Faults: true, FaultPlan: &FaultPlan{ExpiryDelay: expiry}}
		rep := mustRun(t, Config{Workload: wl, Seed: 1, Tail: -1})
		requireOK(t, rep)
		return rep
	}
	kept, expired := run(0), run(time.Minute)
	if expired.Expired == 0 {
		t.Fatal("nothing expired")
	}
	perAcquire := func(r *Report) float64 { return float64(r.RoundTrips) / float64(r.Acquires) }
	if a, b := perAcquire(kept), perAcquire(expired); b > a+0.02 {
		t.Errorf("%.3f round trips per acquire when the bucket expired in between, %.3f when it did not (paths %v)", b, a, expired.Paths)
	}
}

// A process holding a reservation pool when its traffic stops returns the
// pool's rest to the store at its next acquire of the bucket. Two hours
// later the bucket has expired and been deleted: the refund has nothing to
// return to and writes nothing (engine.Adjust: a refund of a shard that
// no longer exists is done at once), yet the acquire's Event reports the
// tokens as Returned to the store. The checkers account for reservations
// by those events, and find the counters short of what was returned
// (invariants 1 and 5; found by the property test with expiry and
// reservations). Now a refund that found the shard gone is not reported.
func TestRegressionPoolReturnedToAnExpiredBucket(t *testing.T) {
	wl := &Workload{Limits: []limiter.Limit{limiter.PerSecond("rps", 1000)}, Entities: []Entity{{ID: "k"}}, Resources: []string{"r"},
		Consume: []Range{{Min: 1, Max: 1}}, Writers: 16, Rate: 2000, Reservations: true, DutyPeriod: 2 * time.Hour, DutyOn: 3 * time.Second,
		Duration: 2*time.Hour + 3*time.Second, Faults: true, FaultPlan: &FaultPlan{ExpiryDelay: 10 * time.Minute}}
	rep := mustRun(t, Config{Workload: wl, Seed: 1, Tail: -1})
	if rep.Expired == 0 {
		t.Fatal("nothing expired")
	}
	requireOK(t, rep)
}

// A caller that cancelled while its acquire returned a reservation pool's
// rest to the store: the return ran on the caller's context, met the
// cancellation and failed, and the acquire, its own write applied, still
// answered with a lease (the cancelled-acquire check; found by the
// property test). Now the return runs on a context detached from the
// caller's, like a cascade's compensation, and the caller's call meets no
// cancellation it did not see.
func TestRegressionPoolReturnOnCancelledContext(t *testing.T) {
	wl := &Workload{Limits: []limiter.Limit{limiter.PerSecond("rps", 500), limiter.PerMinute("tpm", 60_000)},
		Entities: []Entity{{ID: "k"}}, Resources: []string{"r"}, Consume: []Range{{Min: 1, Max: 1}, {Min: 1, Max: 20}},
		Writers: 147, Rate: 2300, Duration: 3 * time.Second, Reservations: true, Faults: true,
		FaultPlan: &FaultPlan{Start: 500 * time.Millisecond, PCancel: 0.3}}
	for seed := uint64(1); seed <= 4; seed++ {
		rep := mustRun(t, Config{Workload: wl, Seed: seed, Tail: -1})
		requireOK(t, rep)
	}
}

// With reservations at a bucket's limit, processes crashing every second
// strand their pools' holds until the generation is reclaimed, and the
// holds come to nearly the whole burst. The full write set the balance to
// the cap (the burst less the holds) less the charge and the cushion
// without checking that the cap paid them: the balance went below zero on
// an acquire (invariant 4; after a doubling, holds above the halved share
// of the burst did the same). Found by the property test drawing
// reservations under sharding pressure.
func TestRegressionFullWriteBelowTheHoldsCap(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := &Workload{Writers: 100, Limits: []limiter.Limit{{Name: "rps", Capacity: 6000, Burst: 6000, Refill: 6000, Period: time.Second}},
		Consume: []Range{{Min: 2, Max: 11}}, Entities: []Entity{{ID: "key-0"}}, Resources: []string{"gpt-4o"},
		Rate: 1418, Uneven: 0.79, Reservations: true, CrashEvery: time.Second, CrashDowntime: 200 * time.Millisecond, Duration: 3 * time.Second}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 1, Tail: 3 * time.Second}))
}

// quotaSplitAtMidnight is one hot key whose only limit is a quota of 1,228
// requests of up to 5 tokens a window in Paris, under sharding pressure
// (rate acquires a second from writers, clocks skew apart), the run
// starting before midnight of 1 November 2026 there by before.
func quotaSplitAtMidnight(window string, writers int, rate float64, before, skew time.Duration, charges int64) *Workload {
	loc, _ := time.LoadLocation("Europe/Paris")
	return &Workload{Writers: writers,
		Limits:   []limiter.Limit{{Name: "req", Capacity: 5 * charges, Window: window, TimeZone: "Europe/Paris"}},
		Consume:  []Range{{Min: 1, Max: 5}},
		Entities: []Entity{{ID: "key-0"}}, Resources: []string{"gpt-4o"},
		Rate: rate, Skew: skew, Duration: 3 * time.Second,
		CallTime: Latency{Median: 200 * time.Millisecond, P99: 2 * time.Second},
		Start:    time.Date(2026, 11, 1, 0, 0, 0, 0, loc).Add(-before)}
}

// A bucket splitting to 8 shards around midnight under 2,500 acquires a
// second from 237 writers, clocks agreeing: shards other than 0 learn the
// shard count lazily, and a writer that chose a shard before midnight and
// wrote it again after started the new day there at its own stale count
// (a quarter of the quota on one shard, while shard 0 started the day at
// an eighth a shard): 37 % over the daily quota with this seed. Now a
// shard starts a window only at the count shard 0 started it at.
func TestRegressionQuotaStartedAtAStaleCountOnABucketSplittingAtMidnight(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := quotaSplitAtMidnight("day", 237, 2500, 2*time.Second, 0, 1228)
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 7, Tail: 3 * time.Second}))
}

// The same at a month's end with clocks ±1 s apart: a doubling made just
// after midnight by a process whose clock was behind dated its new shards
// in October, and November started on them with their share beside the
// shards that had started it before the doubling: 50 % over the monthly
// quota with this seed.
func TestRegressionQuotaOnShardsMadeByAClockBehindAtTheMonthsEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := quotaSplitAtMidnight("month", 200, 2000, 1500*time.Millisecond, time.Second, 2000)
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 3, Tail: 3*time.Second + 2*time.Second}))
}

// A weekly quota in Havana on a bucket splitting just before midnight,
// clocks ±1 s apart, then two hours idle while DynamoDB's time to live
// deletes what expired, then the same load again. Before midnight by the
// true time, processes whose clocks were ahead started the new week on
// the shards; a process whose clock was behind then wrote a shard (a full
// write, or the write that started the week there from what shard 0
// showed), dated in the week before: it set the shard's expiry an hour
// after that week's end, an hour into the new week it held. The shard was
// deleted in the idle time and made again with a whole share of the week:
// the acquires of the second phase took the week above its quota (up to
// 10,050 of 10,000 with this seed). Now a write's expiry covers the window
// the item is in, and the checker flags a write that leaves a quota's
// item expiring before its window's end.
func TestRegressionQuotaShardExpiredWithinTheWeekAClockBehindDated(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	loc, _ := time.LoadLocation("America/Havana")
	wl := &Workload{Writers: 256,
		Limits: []limiter.Limit{{Name: "rps", Capacity: 600_000, Burst: 600_000, Refill: 600_000, Period: time.Second},
			{Name: "req", Capacity: 10_000, Window: "week", TimeZone: "America/Havana"}},
		Consume:  []Range{{Min: 1, Max: 10}, {Min: 1, Max: 5}},
		Entities: []Entity{{ID: "key-0"}}, Resources: []string{"gpt-4o"},
		Rate: 2500, Skew: time.Second, Duration: 3 * time.Second,
		CallTime: Latency{Median: 200 * time.Millisecond, P99: 2 * time.Second},
		Start:    time.Date(2026, 11, 1, 0, 0, 0, 0, loc).Add(-3600 * time.Millisecond),
		Faults:   true, FaultPlan: &FaultPlan{ExpiryDelay: 10 * time.Minute},
		DutyPeriod: 2 * time.Hour, DutyOn: 3 * time.Second}
	wl.Duration += wl.DutyPeriod
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 1, Tail: 5 * time.Second}))
}

// A shadow limit (img_per.min) that empties before the enforcing ones:
// in the tail a client refused by rpm and tpm waits their retry-after
// (66 ms; the shadow limit's longer wait is left out of it) and is refused
// again without a store call, with a retry-after of 5.3 s, although no
// one wrote the bucket meanwhile (invariant 7). The limiter's promise of
// when the request fits counted the shadow limit's wait, so the retry came
// before it and was judged on a guess of what the others consume. The
// clocks agree: skew plays no part.
func TestRegressionShadowLimitWaitDelaysRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := &Workload{Writers: 100,
		Limits: []limiter.Limit{
			{Name: "rpm", Capacity: 7, Burst: 7, Refill: 7, Period: time.Second},
			{Name: "tpm", Capacity: 7, Burst: 7, Refill: 7, Period: time.Second},
			{Name: "img_per.min", Capacity: 8, Burst: 16, Refill: 8, Period: time.Second, Shadow: true},
			{Name: "rps-2", Capacity: 360, Burst: 540, Refill: 360, Period: time.Minute}},
		Consume:  []Range{{Min: 1, Max: 1, Adjust: true}, {Min: 1, Max: 1}, {Min: 5, Max: 8}, {Min: 4, Max: 4}},
		Entities: []Entity{{ID: "key-0"}}, Resources: []string{"gpt-4o", "models/claude-3.5"},
		Rate: 214.9, RetryProb: 1, Probe: true, AdjustProb: 0.0014, AdjustSpread: 0.4, Duration: 3 * time.Second,
		CallTime: Latency{Median: 200 * time.Millisecond, P99: 2 * time.Second}}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 0x7ae, Tail: 3500 * time.Millisecond}))
}

// rolloutWith returns the rollout scenario's workload with more scope
// changes, kept in time order.
func rolloutWith(changes ...ScopeChange) *Workload {
	wl := rollout(Config{})
	wl.ScopeChanges = append(wl.ScopeChanges, changes...)
	slices.SortStableFunc(wl.ScopeChanges, func(a, b ScopeChange) int { return cmp.Compare(a.At, b.At) })
	return wl
}

// The rollout scenario with a second shadow limit, tpm-new, whose charges
// are adjusted to the tokens used like tpm's. A refusal's promise in the
// engine's memory of when the request fits counted the shadow limits'
// wait while its RetryAfter left them out: a client that waited the
// RetryAfter (225 ms) was refused again locally, with a longer RetryAfter
// (738 ms), although no one else had written the bucket (invariant 7).
func TestRegressionRolloutAdjustedShadowLimitRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := rollout(Config{})
	tpmNew := limiter.PerMinute("tpm-new", 60_000)
	tpmNew.Shadow = true
	wl.Limits = append(wl.Limits, tpmNew)
	wl.Consume = append(wl.Consume, llmConsume()[1])
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 2}))
}

// The rollout scenario with every acquire also charging the key's
// "all-models" bucket (limits of the same names, wider rpm and tpm, the
// same shadow rpm-new), all-models admitted from 20 s to 50 s. The same
// promise counting the shadow limits' wait refused a client again locally
// after it had waited the RetryAfter (296 ms), now for 32 s, although no
// one else had written the bucket (invariant 7).
func TestRegressionRolloutAllModelsShadowLimitRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := rolloutWith(
		ScopeChange{At: 20 * time.Second, Resource: "all-models", Mode: "admit"},
		ScopeChange{At: 50 * time.Second, Resource: "all-models"})
	wl.Also = []string{"all-models"}
	wl.AlsoLimits = slices.Clone(wl.Limits)
	wl.AlsoLimits[0], wl.AlsoLimits[1] = limiter.PerMinute("rpm", 160), limiter.PerMinute("tpm", 150_000)
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 1}))
}

// A key offered 90 % of its 2,000/s limit by 32 writers splits (1,800
// writes a second heat one partition). Every refusal is false: the ideal
// bucket never empties, and no acquire may end unavailable for the split.
// Two causes refused acquires through the split: a client's estimate of
// what the others consume of shard 0, measured at one shard, was counted
// against the halved share (the bucket counted as at its limit, and an
// acquire that lost two races on a full shard 0 was refused); and an
// acquire throttled on shard 0 (crowded by the writers that had not
// learnt the count) was refused locally by the new shard 1, still
// filling, beside shard 0's tokens. Seeds 1 and 4 refused 20 acquires
// each; now at most a few, from lost races on the filling shard.
//
// Two more left acquires unavailable (37 and 30): before the first
// doubling, the clients measured the partition written at 1.8 times its
// ceiling but waited for three throttles each before doubling, every write
// over the ceiling throttled meanwhile; and after it, an acquire that
// passed the filling shard 1 on a guess and was throttled on shard 0 had
// no shard left. A throttle on a shard measured over its ceiling now
// doubles the bucket at once (and the acquire writes again), and the
// guessed shard is asked.
func TestRegressionSplitBelowTheLimitRefusesAlmostNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	for _, seed := range []uint64{1, 4} {
		wl := &Workload{Limits: []limiter.Limit{limiter.PerSecond("rps", 2000)},
			Entities: []Entity{{ID: "hot"}}, Resources: []string{"gpt-4o"},
			Consume: []Range{{Min: 1, Max: 1}}, Writers: 32, Rate: 1800, Duration: 8 * time.Second}
		rep := mustRun(t, Config{Workload: wl, Seed: seed, Tail: -1})
		requireOK(t, rep)
		t.Logf("seed %d: %d admitted, %d refused, %d unavailable, %d shards", seed, rep.Admitted, rep.Rejected, rep.Unavailable, rep.ShardCountFinal)
		if rep.Rejected > 3 {
			t.Errorf("seed %d: %d acquires refused at 90 %% of the limit, want at most 3", seed, rep.Rejected)
		}
		if rep.Unavailable > 0 {
			t.Errorf("seed %d: %d acquires unavailable through the split, want none", seed, rep.Unavailable)
		}
	}
}

// The run of TestRegressionSplitBelowTheLimitRefusesAlmostNothing over
// seeds 1 to 10, totals logged (docs/sharding.md quotes them): every
// invariant holds on each seed, and fewer than 1 in 1,000 acquires end
// refused or unavailable over the ten.
func TestSplitBelowTheLimitOverSeedsOneToTen(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	var acquires, refused, unavailable, roundTrips uint64
	for seed := uint64(1); seed <= 10; seed++ {
		wl := &Workload{Limits: []limiter.Limit{limiter.PerSecond("rps", 2000)},
			Entities: []Entity{{ID: "hot"}}, Resources: []string{"gpt-4o"},
			Consume: []Range{{Min: 1, Max: 1}}, Writers: 32, Rate: 1800, Duration: 8 * time.Second}
		rep := mustRun(t, Config{Workload: wl, Seed: seed, Tail: -1})
		requireOK(t, rep)
		acquires += rep.Acquires
		refused += rep.Rejected
		unavailable += rep.Unavailable
		roundTrips += rep.RoundTrips
	}
	t.Logf("seeds 1 to 10: %d acquires, %d refused, %d unavailable, %.3f round trips an acquire",
		acquires, refused, unavailable, float64(roundTrips)/float64(acquires))
	if (refused+unavailable)*1000 >= acquires {
		t.Errorf("%d refused and %d unavailable of %d acquires, want fewer than 1 in 1,000", refused, unavailable, acquires)
	}
}

// Two keys of a project, each acquire also charging the key's
// "all-models" and "models/all" (and the project's), each key's buckets
// with a cap of 1 lease. When one side was refused locally, the cascade's
// answer covered every side, judging the sides not yet answered from the
// process's last image: one showing the key's slot taken (its lease since
// committed) named the cap, with the time until that slot left the ring as
// the wait, a refusal by the cap with the slot free (concurrency-cap). A
// cap refuses only in the store. (Found by TestProperty with
// LIMITER_PROPERTY_FORCE=also,cap.)
func TestRegressionCascadeRefusalBlamedAFreeCap(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	limits := []limiter.Limit{
		{Name: "rpm", Capacity: 3180, Burst: 6360, Refill: 3180, Period: time.Minute},
		{Name: "tpm", Capacity: 840, Burst: 1680, Refill: 840, Period: time.Minute},
		{Name: "img_per.min", Capacity: 6, Burst: 6, Refill: 6, Period: time.Second},
		{Name: "rps-2", Capacity: 6, Burst: 9, Refill: 6, Period: time.Second},
	}
	keyLimits := slices.Clone(limits)
	keyLimits[3] = limiter.Limit{Name: "rps-2", Capacity: 1, Window: "concurrent", TTL: 2 * time.Second}
	wl := &Workload{
		Writers: 100, Limits: keyLimits,
		Consume:   []Range{{Min: 1, Max: 13}, {Min: 2, Max: 2, Adjust: true}, {Min: 1, Max: 1, Adjust: true}, {Min: 1, Max: 1}},
		Resources: []string{"gpt-4o"}, Also: []string{"all-models", "models/all"},
		Entities: []Entity{{ID: "project-0", NoTraffic: true, Limits: limits},
			{ID: "key-0", Parent: "project-0", Cascade: true}, {ID: "key-1", Parent: "project-0", Cascade: true}},
		Rate: 100, RetryProb: 0.125, Probe: true,
		AdjustProb: 0.25, AdjustSpread: 0.4, RollbackProb: 6.103515625e-05, HoldLeases: true,
		CallTime: Latency{Median: 200 * time.Millisecond, P99: 2 * time.Second},
		Duration: 3 * time.Second,
	}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 3, Tail: 3 * time.Second}))
}

// novemberFirst is midnight of 1 November 2026 in zone, less before: where
// TestProperty starts the runs with a calendar quota (every kind of window
// ends then).
func novemberFirst(t *testing.T, zone string, before time.Duration) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	return time.Date(2026, 11, 1, 0, 0, 0, 0, loc).Add(-before)
}

// keyEntities returns n entities key-0 to key-(n-1), as TestProperty
// names them, the first with the modes given.
func keyEntities(n int, modes ...string) []Entity {
	ents := make([]Entity, n)
	for e := range ents {
		ents[e].ID = fmt.Sprintf("key-%d", e)
		if e < len(modes) {
			ents[e].Mode = modes[e]
		}
	}
	return ents
}

// propertyCallTime is how long TestProperty's callers hold a lease.
var propertyCallTime = Latency{Median: 200 * time.Millisecond, P99: 2 * time.Second}

// A retry after a refusal by the rate limit, beside a shadow monthly quota
// already spent, was refused again with a new wait although no one else
// had written the bucket (liveness, 7 violations): the retry was refused
// from the process's last image, which showed the quota spent, and that
// refusal judged the rate on the guess of what the others consume (the
// root package then answers a refusal by shadow limits alone by charging
// again without them, but the rate counted as refusing too). (Found by
// TestProperty: a shadow quota of 2,250 a month in Asia/Kolkata, the
// month starting 860 ms into the run.)
func TestRegressionRetryBesideASpentShadowQuotaRefusedAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := &Workload{
		Writers: 100,
		Limits: []limiter.Limit{
			{Name: "rpm", Capacity: 794, Burst: 794, Refill: 794, Period: time.Second},
			{Name: "tpm", Capacity: 2250, Window: "month", TimeZone: "Asia/Kolkata", Shadow: true},
		},
		Consume:   []Range{{Min: 4, Max: 24, Adjust: true}, {Min: 1, Max: 18}},
		Resources: []string{"gpt-4o", "models/claude-3.5"},
		Entities:  keyEntities(7),
		Start:     novemberFirst(t, "Asia/Kolkata", 860*time.Millisecond),
		Rate:      1217.7562780780718, RetryProb: 1, Probe: true,
		AdjustProb: 0.1171875, AdjustSpread: 0.4, RollbackProb: 0.2,
		CallTime: propertyCallTime,
		Duration: 3 * time.Second,
	}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 3, Tail: 3 * time.Second}))
}

// A retry after a refusal by a 35/s limit, beside a 9/s shadow limit, with
// 115 writers on the key, was refused again with a wait of 5 s although
// no one else had written the bucket (liveness): its write failed on a
// guard, and the acquire was refused on a guess of what the others take
// over half a round trip from the shadow limit, a refusal that judged the
// 35/s limit by the process's share of it. (Found by TestProperty: a
// weekly quota in Paris beside them, faults before the tail.)
func TestRegressionRetryRefusedOnAGuessAlthoughNoOneWrote(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := &Workload{
		Writers: 115,
		Limits: []limiter.Limit{
			{Name: "rpm", Capacity: 9, Burst: 18, Refill: 9, Period: time.Second, Shadow: true},
			{Name: "tpm", Capacity: 35, Burst: 35, Refill: 35, Period: time.Second},
			{Name: "img_per.min", Capacity: 29 * 493, Window: "week", TimeZone: "Europe/Paris"},
		},
		Consume:   []Range{{Min: 2, Max: 3}, {Min: 8, Max: 11}, {Min: 12, Max: 29}},
		Resources: []string{"gpt-4o"},
		Entities:  keyEntities(8, "", "", "", "", "", "refuse", "admit"),
		Start:     novemberFirst(t, "Europe/Paris", 792*time.Millisecond),
		Rate:      647.2333984375, RetryProb: 0.5574490427970886, Probe: true,
		AdjustProb: 1.3690090043827074e-08, AdjustSpread: 0.4, RollbackProb: 3.975949420727915e-14,
		CallTime: propertyCallTime,
		Duration: 3 * time.Second,
		Faults:   true,
		FaultPlan: &FaultPlan{
			Start:      500 * time.Millisecond,
			StormEvery: 3 * time.Second, StormLength: time.Second, StormP: 0.03 * 20,
			P5xxBefore: 0.03, P5xxAfter: 0.03, PLost: 0.03, PConflict: 0.03,
			PSpike: 0.03, Spike: Latency{Median: 200 * time.Millisecond, P99: 1500 * time.Millisecond},
			PCancel: 0.05, PUndoFail: 1.0325962307433656e-11,
		},
	}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 0x13, Tail: 3 * time.Second}))
}

// A checker's false report (liveness): a request of gpt-4o that also
// charges all-models was refused from the limiter's memory on all-models
// (640 ms), and its retry by the store on gpt-4o (3.2 s), although no one
// else had written either bucket since the refusal. The process had
// heard of gpt-4o last before another writer's charge at 3.16 s (its
// other requests, of models/claude-3.5, kept all-models fresh): its
// refusal could not know gpt-4o's tokens, and the checker allowed for
// images a second old only. It now allows, for each bucket of a local
// refusal, for the writes since the client last heard of it. (Found by
// TestProperty: two resources and Also, a daily quota in Kolkata, 250 ms
// of skew.)
func TestRegressionLocalRefusalFromAnOlderItemOfAnotherResource(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	limits := []limiter.Limit{
		{Name: "rpm", Capacity: 360, Burst: 360, Refill: 360, Period: time.Minute},
		{Name: "tpm", Capacity: 480, Burst: 720, Refill: 480, Period: time.Minute},
		{Name: "img_per.min", Capacity: 8, Burst: 8, Refill: 8, Period: time.Second},
		{Name: "rps-2", Capacity: 18 * 20, Window: "day", TimeZone: "Asia/Kolkata"},
	}
	var also []limiter.Limit
	for _, l := range limits {
		l.Capacity, l.Burst, l.Refill = l.Capacity*2, l.Burst*2, l.Refill*2
		also = append(also, l)
	}
	wl := &Workload{
		Writers:   100,
		Limits:    limits,
		Consume:   []Range{{Min: 35, Max: 40, Adjust: true}, {Min: 2, Max: 37, Adjust: true}, {Min: 1, Max: 4}, {Min: 16, Max: 18, Adjust: true}},
		Resources: []string{"gpt-4o", "models/claude-3.5"},
		Also:      []string{"all-models"}, AlsoLimits: also,
		Entities: keyEntities(9, "", "", "admit", "admit", "", "refuse", "admit", "admit"),
		Start:    novemberFirst(t, "Asia/Kolkata", 0),
		Rate:     1500, RetryProb: 0.07383287884294987, Probe: true,
		AdjustProb: 2.692318828095541e-199, AdjustSpread: 0.4, RollbackProb: 2.110277493211518e-29,
		CallTime: propertyCallTime,
		Skew:     250 * time.Millisecond,
		Duration: 3 * time.Second,
	}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 0x3b9, Tail: 3*time.Second + 500*time.Millisecond}))
}

// An acquire on a hot key with a daily quota charged a new shard by a
// quota transfer (a transaction, which returns no item); its caller
// cancelled while the transaction was in flight, and the read that
// follows it, to learn the item, met the cancelled context. The limiter
// went on without the read and answered a lease: a store call had met
// the cancellation (cancelled-acquire). The read now runs on a context
// of its own, and not at all once the caller has gone: the acquire was
// decided when its charge landed. (Found by TestProperty: sharding
// pressure, a daily quota in Kolkata, callers cancelling.)
func TestRegressionAReadAfterAQuotaTransferMetTheCallersCancellation(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	wl := &Workload{
		Writers: 175,
		Limits: []limiter.Limit{
			{Name: "rpm", Capacity: 279000, Burst: 558000, Refill: 279000, Period: time.Second},
			{Name: "tpm", Capacity: 34_860_000, Burst: 69_720_000, Refill: 34_860_000, Period: time.Minute, Shadow: true},
			{Name: "img_per.min", Capacity: 41_220_000, Burst: 82_440_000, Refill: 41_220_000, Period: time.Minute, Shadow: true},
			{Name: "rps-2", Capacity: 6 * 1049, Window: "day", TimeZone: "Asia/Kolkata"},
		},
		Consume:    []Range{{Min: 2, Max: 10, Adjust: true}, {Min: 1, Max: 1}, {Min: 8, Max: 19}, {Min: 4, Max: 6, Adjust: true}},
		Resources:  []string{"gpt-4o"},
		Entities:   []Entity{{ID: "key-0"}},
		Start:      novemberFirst(t, "Asia/Kolkata", 554*time.Millisecond),
		Rate:       2500,
		AdjustProb: 0.27138328552246094, AdjustSpread: 0.4, RollbackProb: 9.841382762493953e-240,
		CallTime: propertyCallTime,
		Duration: 3*time.Second + 2*time.Hour, DutyPeriod: 2 * time.Hour, DutyOn: 3 * time.Second,
		Faults: true,
		FaultPlan: &FaultPlan{
			Start:      500 * time.Millisecond,
			StormEvery: 3 * time.Second, StormLength: time.Second, StormP: 5.181235792406369e-06 * 20,
			P5xxBefore: 1.2351048184200408e-08, P5xxAfter: 2.0767299994940796e-148, PLost: 1.7559269744354595e-91, PConflict: 6.760672022210201e-10,
			PSpike: 0.003900908077639542, Spike: Latency{Median: 200 * time.Millisecond, P99: 1500 * time.Millisecond},
			PCancel: 0.029296875, PUndoFail: 1.8619261711360536e-57, ExpiryDelay: 7 * time.Minute,
		},
	}
	requireOK(t, mustRun(t, Config{Workload: wl, Seed: 0x5f27, Tail: 3 * time.Second}))
}
