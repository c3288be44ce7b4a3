package sim

import (
	"os"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
)

// A crafted world with a quota: bucket "solo"/"m" with rpm (10/s) and
// usd, 10 tokens a day (UTC).

var usdDay = &bucket.Calendar{Window: bucket.Day}

func quotaStory(t *testing.T) (*story, int64) {
	ls := []limiter.Limit{limiter.PerSecond("rpm", 10), {Name: "usd", Capacity: 10, Window: "day"}}
	m := &model{Namespace: "ns", LimitNames: []string{"rpm", "usd"}, Quotas: []*bucket.Calendar{nil, usdDay},
		Buckets: []bucketModel{{Entity: "solo", Resource: "m", Limits: ls, Parent: -1}}}
	day, _ := usdDay.Bounds(testBase / 1e6)
	return &story{t: t, c: newChecker(m, testBase)}, day
}

// qitem is the bucket with rpm charged rpmTC tokens and usd holding left
// of its window from ws, usdTC consumed.
func qitem(rpmTC, left, usdTC float64, ws int64) store.Item {
	return qshard(0, 1, rpmTC, left, usdTC, ws)
}

// qshard is qitem on shard of a bucket of n shards.
func qshard(shard int, n int64, rpmTC, left, usdTC float64, ws int64) store.Item {
	it := item("solo", shard, n, 0, lim{tk: 10 - rpmTC, tc: rpmTC, ra: 10}, lim{})
	for _, f := range []string{bucket.FieldTokens, bucket.FieldTotalConsumed, bucket.FieldRefillAmount, bucket.FieldRefillPeriod, bucket.FieldBurst} {
		delete(it, bucket.AttrName("tpm", f))
	}
	it[bucket.QuotaAttrName("usd", bucket.FieldTokens)] = store.Int(int64(left * 1000))
	it[bucket.QuotaAttrName("usd", bucket.FieldTotalConsumed)] = store.Int(int64(usdTC * 1000))
	it[bucket.QuotaAttrName("usd", bucket.FieldWindow)] = store.Int(ws)
	it[bucket.QuotaAttrName("usd", bucket.FieldCapacity)] = store.Int(10_000)
	return it
}

// Two acquires spend the day's 10; the next day starts at 10 again.
func TestCheckerQuotaCleanHistoryPasses(t *testing.T) {
	s, day := quotaStory(t)
	a := qitem(1, 4, 6, day)
	s.op(opAcquire, 0, 0, 1, 6).write(5, nil, a).done(6, outAdmitted)
	b := qitem(2, 0, 10, day)
	s.op(opAcquire, 0, 10, 1, 4).write(15, a, b).done(16, outAdmitted)
	s.op(opAcquire, 0, 20, 1, 1).done(21, outRejected)
	next := day + int64(24*time.Hour/time.Millisecond)
	at := next - testBase/1e6 + 10 // ms of virtual time, just after midnight
	c := qitem(3, 7, 13, next)
	s.op(opAcquire, 0, at, 1, 3).write(at+5, b, c).done(at+6, outAdmitted)
	s.expect([]store.Item{c})
}

// A third acquire that takes the day past its quota is flagged, and so is
// a write that dates the quota at an instant that is no boundary.
func TestCheckerFlagsQuotaOverTheWindow(t *testing.T) {
	s, day := quotaStory(t)
	a := qitem(1, 4, 6, day)
	s.op(opAcquire, 0, 0, 1, 6).write(5, nil, a).done(6, outAdmitted)
	b := qitem(2, 0, 10, day)
	s.op(opAcquire, 0, 10, 1, 4).write(15, a, b).done(16, outAdmitted)
	c := qitem(3, 0, 11, day+1) // a fresh "window" a millisecond after midnight: more than 10 in the day
	s.op(opAcquire, 0, 20, 1, 1).write(25, b, c).done(26, outAdmitted)
	s.expect([]store.Item{c}, InvQuota)
}

func TestCheckerFlagsQuotaOverAdmitted(t *testing.T) {
	s, day := quotaStory(t)
	a := qitem(1, 4, 6, day)
	s.op(opAcquire, 0, 0, 1, 6).write(5, nil, a).done(6, outAdmitted)
	b := qitem(2, 0, 11, day) // 11 of 10 (and its balance left at 0: only the window's sum shows it)
	s.op(opAcquire, 0, 10, 1, 5).write(15, a, b).done(16, outAdmitted)
	s.expect([]store.Item{b}, InvQuota)
}

// A refused acquire (a cascade's, or one of several resources) charged
// its bucket 5 ms before midnight and was compensated 5 ms after: the
// refund of the rate applied, the quota's did not (the day it was charged
// in is over, and the next one starts at 10 whatever that one took). The
// charge left in the ended day changes nothing a caller can see: no
// all-or-nothing violation, and the quota's total consumed keeps it.
func TestCheckerACompensationAfterMidnightLeavesTheQuotaCharge(t *testing.T) {
	s, day := quotaStory(t)
	next := day + int64(24*time.Hour/time.Millisecond)
	at := next - testBase/1e6 - 5
	a := qitem(1, 9, 1, day)
	s.op(opAcquire, 0, 0, 1, 1).write(1, nil, a).done(2, outAdmitted)
	charged := qitem(2, 8, 2, day)
	s.op(opAcquire, 0, at-10, 1, 1).write(at, a, charged).write(at+10, charged, qitem(1, 8, 2, day)).done(at+12, outRejected)
	s.expect([]store.Item{qitem(1, 8, 2, day)})
}

// A refused acquire (a cascade's) charged its bucket 300 ms before
// midnight by the clocks' middle. A writer whose clock runs 250 ms ahead
// then started the next day on the item (its midnight came 250 ms early),
// and the compensation, 100 ms before midnight, found the quota in that
// day: the rate's refund applied, the quota's was moot (the day it was
// charged in is over for the item), so the write changed the tc counters
// by [-1000 0]. The property test reported that write as uneven on a
// cascade parent (Havana, a week window, skew 250 ms): the clocks' spread
// puts the boundary within the operation, so the charge left in the ended
// window changes nothing a caller sees.
func TestCheckerACompensationBeforeMidnightOnAnItemAClockAheadMovedOn(t *testing.T) {
	for _, tc := range []struct {
		spread time.Duration
		want   []string
	}{
		{500 * time.Millisecond, nil},
		// Clocks that agree never start the next day early: the same
		// write then drops a refund within the day.
		{0, []string{InvAllOrNothing, InvQuota, InvLostUpdate}},
	} {
		t.Run(tc.spread.String(), func(t *testing.T) {
			s, day := quotaStory(t)
			s.c.m.SkewSpread = int64(tc.spread)
			next := day + int64(24*time.Hour/time.Millisecond)
			mid := next - testBase/1e6 // virtual ms of midnight
			a := qitem(1, 9, 1, day)
			s.op(opAcquire, 0, 0, 1, 1).write(1, nil, a).done(2, outAdmitted)
			charged := qitem(2, 8, 2, day)
			undo := s.op(opAcquire, 0, mid-310, 1, 1).write(mid-300, a, charged)
			ahead := qitem(3, 9, 3, next) // the next day, less this acquire's 1
			s.op(opAcquire, 0, mid-210, 1, 1).write(mid-200, charged, ahead).done(mid-190, outAdmitted)
			back := qitem(2, 9, 3, next)
			undo.write(mid-100, ahead, back).done(mid-90, outRejected)
			s.expect([]store.Item{back}, tc.want...)
		})
	}
}

// The same compensation within the day must return the quota too: a
// refused acquire that keeps a quota's charge in a window still running
// took what the caller was refused.
func TestCheckerFlagsAQuotaChargeKeptWithinTheDay(t *testing.T) {
	s, day := quotaStory(t)
	a := qitem(1, 9, 1, day)
	s.op(opAcquire, 0, 0, 1, 1).write(1, nil, a).done(2, outAdmitted)
	charged := qitem(2, 8, 2, day)
	s.op(opAcquire, 0, 10, 1, 1).write(20, a, charged).write(30, charged, qitem(1, 8, 2, day)).done(32, outRejected)
	s.expect([]store.Item{qitem(1, 8, 2, day)}, InvAllOrNothing, InvLostUpdate)
}

// On a bucket of two shards each holds 5 of the day's 10. An adjust
// charges shard 1 past its share (a debt of 3, which refuses that shard's
// acquires until the day ends); shard 0 then spends its own 5. The day's
// net charge is 13, but acquires took 10, the quota: a debt on one shard
// does not reach the others' shares (docs/limiter.md, "Shards and
// cascades"), and invariant 4 keeps the indebted shard's acquires out.
func TestCheckerQuotaDebtOnOneShardLeavesTheOthersShares(t *testing.T) {
	s, day := quotaStory(t)
	a0, a1 := qshard(0, 2, 0, 5, 0, day), qshard(1, 2, 0, 5, 0, day)
	b1 := qshard(1, 2, 1, 0, 5, day)
	s.op(opAcquire, 0, 0, 1, 5).write(5, a1, b1).done(6, outAdmitted)
	debt := qshard(1, 2, 1, -3, 8, day)
	s.op(opAdjust, 0, 10, 0, 3).write(15, b1, debt).done(16, outAdmitted)
	b0 := qshard(0, 2, 1, 0, 5, day)
	s.op(opAcquire, 0, 20, 1, 5).write(25, a0, b0).done(26, outAdmitted)
	s.expect([]store.Item{b0, debt})
}

// The same acquire on shard 0 taking 6 (its share and one more) is
// flagged: acquires took 11 of the day's 10.
func TestCheckerFlagsQuotaOverTheSharesBesideADebt(t *testing.T) {
	s, day := quotaStory(t)
	a0, a1 := qshard(0, 2, 0, 5, 0, day), qshard(1, 2, 0, 5, 0, day)
	b1 := qshard(1, 2, 1, 0, 5, day)
	s.op(opAcquire, 0, 0, 1, 5).write(5, a1, b1).done(6, outAdmitted)
	debt := qshard(1, 2, 1, -3, 8, day)
	s.op(opAdjust, 0, 10, 0, 3).write(15, b1, debt).done(16, outAdmitted)
	b0 := qshard(0, 2, 1, 0, 6, day)
	s.op(opAcquire, 0, 20, 1, 6).write(25, a0, b0).done(26, outAdmitted)
	s.expect([]store.Item{b0, debt}, InvQuota)
}

// A hot key whose month started on one shard (sc = 1): 2,500 acquires a
// second, the rate and the quota far above them, so only the partition
// ceiling binds. The bucket doubles twice, as it does without a quota
// (two or three times; four partitions take 2,500 writes a second); each new shard starts the
// month by a transfer from the shard it split from, so the acquires spread
// over all four, and nearly all are admitted: 418 of 39,004 end
// unavailable while the bucket splits (over seeds 1 to 4, 367 to 444 with
// the quota and 138 to 274 without it: see
// TestHotBucketWithAndWithoutAMonthlyQuota). (Before the transfers, the new
// shards held nothing of the month: the acquires stayed on shard 0,
// whose partition throttled 22,799 of 39,345 for the rest of the month,
// unavailable, with one doubling.)
func TestHotBucketWithAMonthlyQuotaStartedOnOneShard(t *testing.T) {
	wl := &Workload{
		Limits:   []limiter.Limit{limiter.PerSecond("rps", 1_000_000), {Name: "usd", Capacity: 1_000_000_000, Window: "month"}},
		Entities: []Entity{{ID: "hot"}}, Resources: []string{"gpt-4o"},
		Consume:  []Range{{Min: 1, Max: 1}, {Min: 1, Max: 40}},
		CallTime: Latency{Median: 200 * time.Millisecond, P99: 2 * time.Second},
		Writers:  200, Rate: 2500, Duration: 8 * time.Second,
		Start: time.Date(2026, 11, 14, 12, 0, 0, 0, time.UTC),
	}
	rep, err := Run(Config{Workload: wl, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	requireOK(t, rep)
	if rep.Rejected*100 > rep.Acquires || rep.Unavailable*100 > 3*rep.Acquires || rep.ShardDoublings > 2 {
		t.Fatalf("%d of %d acquires refused, %d unavailable, %d doublings: want under 1 %% refused (the quota has room), under 3 %% unavailable and at most two doublings",
			rep.Rejected, rep.Acquires, rep.Unavailable, rep.ShardDoublings)
	}
	t.Logf("%d acquires: %d admitted, %d refused, %d unavailable; %d doublings, %.0f WCU", rep.Acquires, rep.Admitted, rep.Rejected, rep.Unavailable, rep.ShardDoublings, rep.WCU)
}

// TestHotBucketWithAndWithoutAMonthlyQuota runs the hot key of
// TestHotBucketWithAMonthlyQuotaStartedOnOneShard over seeds 1 to 4, with
// the monthly quota and without it, and logs each run: the quota's
// transfers let the bucket split as a bucket without a quota does. Opt-in
// (SIM_QUOTA_COMPARE=1), as it takes longer than the suite's budget:
//
//	SIM_QUOTA_COMPARE=1 go test -count=1 -run TestHotBucketWithAndWithoutAMonthlyQuota -v ./sim
func TestHotBucketWithAndWithoutAMonthlyQuota(t *testing.T) {
	if os.Getenv("SIM_QUOTA_COMPARE") == "" {
		t.Skip("eight 8 s runs of a hot key: set SIM_QUOTA_COMPARE=1")
	}
	for _, quota := range []bool{false, true} {
		for seed := uint64(1); seed <= 4; seed++ {
			wl := &Workload{
				Limits:   []limiter.Limit{limiter.PerSecond("rps", 1_000_000)},
				Entities: []Entity{{ID: "hot"}}, Resources: []string{"gpt-4o"},
				Consume:  []Range{{Min: 1, Max: 1}},
				CallTime: Latency{Median: 200 * time.Millisecond, P99: 2 * time.Second},
				Writers:  200, Rate: 2500, Duration: 8 * time.Second,
				Start: time.Date(2026, 11, 14, 12, 0, 0, 0, time.UTC),
			}
			if quota {
				wl.Limits = append(wl.Limits, limiter.Limit{Name: "usd", Capacity: 1_000_000_000, Window: "month"})
				wl.Consume = append(wl.Consume, Range{Min: 1, Max: 40})
			}
			rep := mustRun(t, Config{Workload: wl, Seed: seed})
			requireOK(t, rep)
			t.Logf("quota %-5v seed %d: %d acquires, %d admitted, %d refused, %d unavailable, %d throttled writes; %d doublings, %.0f WCU",
				quota, seed, rep.Acquires, rep.Admitted, rep.Rejected, rep.Unavailable, rep.Throttled, rep.ShardDoublings, rep.WCU)
		}
	}
}

// An item that a write leaves in a quota's window must not expire before
// the window's end: deleted sooner, it would start the window again at
// the whole quota. The write that leaves it expiring an hour after
// midnight, as a writer whose clock is still in the day before computed
// it, is flagged; one an hour after the day's end passes.
func TestCheckerFlagsAQuotaItemExpiringWithinItsWindow(t *testing.T) {
	s, day := quotaStory(t)
	end := day + int64(24*time.Hour/time.Millisecond)
	a := qitem(1, 4, 6, day)
	a[store.AttrTTL] = store.Int(end/1000 + 3600)
	s.op(opAcquire, 0, 0, 1, 6).write(5, nil, a).done(6, outAdmitted)
	b := qitem(2, 3, 7, day)
	b[store.AttrTTL] = store.Int(day/1000 + 3600)
	s.op(opAcquire, 0, 10, 1, 1).write(15, a, b).done(16, outAdmitted)
	s.expect([]store.Item{b}, InvQuota)
}
