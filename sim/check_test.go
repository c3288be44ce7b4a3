package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// A crafted world: namespace "ns", limits rpm (10/s) and tpm (1000/s), a
// child bucket "k"/"m" (index 0) cascading to a parent "p"/"m" (index 1),
// and a plain bucket "solo"/"m" (index 2).

var testBase = memsim.Epoch().UnixNano()

func testModel() *model {
	ls := []limiter.Limit{limiter.PerSecond("rpm", 10), limiter.PerSecond("tpm", 1000)}
	return &model{
		Namespace:  "ns",
		LimitNames: []string{"rpm", "tpm"},
		Buckets: []bucketModel{
			{Entity: "k", Resource: "m", Limits: ls, Parent: 1},
			{Entity: "p", Resource: "m", Limits: ls, Parent: -1},
			{Entity: "solo", Resource: "m", Limits: ls, Parent: -1},
		},
		TailStart:          0,
		CheckDoublingCause: true,
	}
}

// lim is one limit's stored fields in tokens (tk, tc) and its rate.
type lim struct{ tk, tc, ra float64 }

// item builds a bucket item: shard, shard_count, rf (ms), rpm and tpm.
func item(entity string, shard int, n, rf int64, rpm, tpm lim) store.Item {
	pk := fmt.Sprintf("ns/BUCKET#%s#m#%d", entity, shard)
	it := store.Item{store.AttrPK: store.Str(pk), store.AttrSK: store.Str("#STATE"),
		"rf": store.Int(rf), "shard_count": store.Int(n)}
	set := func(name string, l lim) {
		it[bucket.AttrName(name, bucket.FieldTokens)] = store.Int(int64(l.tk * 1000))
		it[bucket.AttrName(name, bucket.FieldTotalConsumed)] = store.Int(int64(l.tc * 1000))
		it[bucket.AttrName(name, bucket.FieldRefillAmount)] = store.Int(int64(l.ra * 1000))
		it[bucket.AttrName(name, bucket.FieldRefillPeriod)] = store.Int(1000)
		it[bucket.AttrName(name, bucket.FieldBurst)] = store.Int(int64(l.ra * 1000))
	}
	set("rpm", rpm)
	set("tpm", tpm)
	return it
}

func rec(seq uint64, atMs int64, old, new store.Item) *memsim.Record {
	r := &memsim.Record{Seq: seq, Old: old, New: new, At: time.Unix(0, testBase+atMs*int64(time.Millisecond)).UTC()}
	src := new
	if src == nil {
		src = old
	}
	pk, _ := src.Str(store.AttrPK)
	r.Keys = store.Key{PK: pk, SK: "#STATE"}
	switch {
	case old == nil:
		r.Event = memsim.EventInsert
	case new == nil:
		r.Event = memsim.EventRemove
	default:
		r.Event = memsim.EventModify
	}
	return r
}

// story drives a checker through a crafted history.
type story struct {
	t   *testing.T
	c   *checker
	seq uint64
	ops uint64
}

func newStory(t *testing.T) *story {
	return &story{t: t, c: newChecker(testModel(), testBase)}
}

// op starts an operation; write feeds its records; done finishes it.
type craftedOp struct {
	s     *story
	op    operation
	eff   effects
	cause cause
}

func (s *story) op(kind opKind, bucket int32, startMs int64, amount ...int64) *craftedOp {
	s.ops++
	o := &craftedOp{s: s, op: operation{ID: s.ops, Kind: kind, Bucket: bucket, Start: startMs * int64(time.Millisecond), Shard: -1}}
	copy(o.op.Amount[:], amount)
	o.cause = cause{Op: o.op.ID, Kind: kind, Bucket: bucket, Amount: o.op.Amount, Start: o.op.Start, Effects: &o.eff}
	return o
}

func (o *craftedOp) write(atMs int64, old, new store.Item) *craftedOp {
	o.s.seq++
	o.s.c.Record(rec(o.s.seq, atMs, old, new), &o.cause)
	return o
}

func (o *craftedOp) done(endMs int64, out outcome) *operation {
	o.op.End = endMs * int64(time.Millisecond)
	o.op.Outcome = out
	o.s.c.OpDone(&o.op, &o.eff)
	return &o.op
}

// expect checks that exactly the wanted invariants were flagged.
func (s *story) expect(final []store.Item, want ...string) {
	s.t.Helper()
	s.c.Finish(final)
	got := map[string]bool{}
	for _, v := range s.c.Violations() {
		got[v.Invariant] = true
	}
	for _, w := range want {
		if !got[w] {
			s.t.Errorf("invariant %s was not flagged; violations: %v", w, s.c.Violations())
		}
		delete(got, w)
	}
	for inv := range got {
		s.t.Errorf("unexpected violation of %s: %v", inv, s.c.Violations())
	}
}

var (
	full   = lim{tk: 10, ra: 10}
	fullT  = lim{tk: 1000, ra: 1000}
	solo0  = item("solo", 0, 1, 0, full, fullT)
	soloA1 = item("solo", 0, 1, 0, lim{tk: 9, tc: 1, ra: 10}, lim{tk: 900, tc: 100, ra: 1000})
)

func TestCheckerCleanHistoryPasses(t *testing.T) {
	s := newStory(t)
	// Create (full minus the charge), then a speculative charge, an adjust
	// into debt, and a rollback of the first lease.
	a := s.op(opAcquire, 2, 0, 1, 100).write(5, nil, soloA1)
	a.op.Shard = 0
	a.done(8, outAdmitted)
	after2 := item("solo", 0, 1, 0, lim{tk: 8, tc: 2, ra: 10}, lim{tk: 800, tc: 200, ra: 1000})
	b := s.op(opAcquire, 2, 10, 1, 100).write(15, soloA1, after2)
	b.op.Shard = 0
	b.done(20, outAdmitted)
	debt := item("solo", 0, 1, 0, lim{tk: 8, tc: 2, ra: 10}, lim{tk: -300, tc: 1300, ra: 1000})
	adj := s.op(opAdjust, 2, 30, 0, 1100).write(35, after2, debt)
	adj.op.Shard = 0
	adj.done(40, outAdmitted)
	back := item("solo", 0, 1, 0, lim{tk: 9, tc: 1, ra: 10}, lim{tk: -200, tc: 1200, ra: 1000})
	rb := s.op(opRollback, 2, 50, 1, 100).write(55, debt, back)
	rb.op.Shard = 0
	rb.done(60, outAdmitted)
	// A rejection changes nothing.
	s.op(opAcquire, 2, 70, 9, 100).done(75, outRejected)
	s.expect([]store.Item{back})
}

func TestCheckerFlagsLostUpdate(t *testing.T) {
	s := newStory(t)
	a := s.op(opAcquire, 2, 0, 1, 100).write(5, nil, soloA1)
	a.op.Shard = 0
	a.done(6, outAdmitted)
	// A second admitted acquire whose write the store lost: the stream shows
	// nothing, the final tc counts one charge instead of two.
	b := s.op(opAcquire, 2, 10, 1, 100)
	b.eff.LastApply[0], b.eff.Changes[0] = 12*int64(time.Millisecond), 1 // as if a write had applied
	b.eff.Net[0] = [MaxLimits]int64{1000, 100000}
	b.op.Shard = 0
	b.done(15, outAdmitted)
	s.expect([]store.Item{soloA1}, InvLostUpdate)
}

func TestCheckerAllowsUnknownOutcomeWithinItsAmount(t *testing.T) {
	s := newStory(t)
	// An acquire that timed out after its write applied: tc ends one charge
	// above the admitted sum, which an unknown outcome allows.
	s.op(opAcquire, 2, 0, 1, 100).write(5, nil, soloA1).done(1000, outUnavailable)
	s.expect([]store.Item{soloA1})

	s = newStory(t)
	// ... but not more than its own amount.
	three := item("solo", 0, 1, 0, lim{tk: 7, tc: 3, ra: 10}, lim{tk: 700, tc: 300, ra: 1000})
	s.op(opAcquire, 2, 0, 1, 100).write(5, nil, soloA1).done(1000, outUnavailable)
	s.expect([]store.Item{three}, InvLostUpdate)
}

func TestCheckerFlagsDoubleCreditedRefill(t *testing.T) {
	s := newStory(t)
	empty := item("solo", 0, 1, 1000, lim{tk: 0, tc: 10, ra: 10}, lim{tk: 0, tc: 1000, ra: 1000})
	// 100 ms later two refills each credit the same 100 ms (1 rpm token at
	// 10/s): the second one moves rf by nothing but credits again.
	r1 := item("solo", 0, 1, 1100, lim{tk: 0, tc: 11, ra: 10}, lim{tk: 0, tc: 1100, ra: 1000})
	r2 := item("solo", 0, 1, 1100, lim{tk: 0, tc: 12, ra: 10}, lim{tk: 0, tc: 1200, ra: 1000})
	s.op(opAdjust, 2, 0).write(1000, nil, empty)
	s.seq++
	s.c.Record(rec(s.seq, 1100, empty, r1), nil)
	s.seq++
	s.c.Record(rec(s.seq, 1101, r1, r2), nil)
	s.c.Finish(nil)
	if !hasViolation(s.c, InvDoubleRefill, "credited 1000 millitokens of refill while rf advanced 0 ms") {
		t.Fatalf("double refill not flagged: %v", s.c.Violations())
	}
}

func TestCheckerFlagsRefillTimestampGoingBack(t *testing.T) {
	s := newStory(t)
	a := item("solo", 0, 1, 1000, full, fullT)
	b := item("solo", 0, 1, 900, full, fullT)
	s.c.Record(rec(1, 1000, a, b), nil)
	if !hasViolation(s.c, InvDoubleRefill, "rf went backwards") {
		t.Fatalf("rf going back not flagged: %v", s.c.Violations())
	}
}

func TestCheckerFlagsOverAdmission(t *testing.T) {
	s := newStory(t)
	s.c.m.CheckDoublingCause = false
	// The whole burst (10 rpm tokens) at 0 ms on shard 0; a doubling; then
	// shard 1 is born with tokens of its own and admits 10 more at 100 ms,
	// when refill at 10/s has made 1: 19 tokens over the bound.
	drained := item("solo", 0, 1, 0, lim{tk: 0, tc: 10, ra: 10}, lim{tk: 1000, ra: 1000})
	doubled := item("solo", 0, 2, 0, lim{tk: 0, tc: 10, ra: 10}, lim{tk: 1000, ra: 1000})
	shard1 := item("solo", 1, 2, 100, lim{tk: 0, tc: 10, ra: 10}, lim{tk: 1000, ra: 1000})
	a := s.op(opAcquire, 2, 0, 10).write(0, nil, drained)
	a.op.Shard = 0
	a.done(5, outAdmitted)
	s.seq++
	s.c.Record(rec(s.seq, 50, drained, doubled), nil)
	b := s.op(opAcquire, 2, 100, 10).write(100, nil, shard1)
	b.op.Shard = 1
	b.done(105, outAdmitted)
	s.expect([]store.Item{doubled, shard1}, InvOverAdmit)
	if !hasViolation(s.c, InvOverAdmit, "admitted 20.000 tokens") {
		t.Errorf("detail: %v", s.c.Violations())
	}
}

func TestCheckerCountsRefundsInWindows(t *testing.T) {
	s := newStory(t)
	// Burst, a rollback of 5 at 50 ms, 5 more at 60 ms: legitimate.
	drained := item("solo", 0, 1, 0, lim{tk: 0, tc: 10, ra: 10}, lim{tk: 1000, ra: 1000})
	refunded := item("solo", 0, 1, 0, lim{tk: 5, tc: 5, ra: 10}, lim{tk: 1000, ra: 1000})
	again := item("solo", 0, 1, 0, lim{tk: 0, tc: 10, ra: 10}, lim{tk: 1000, ra: 1000})
	a := s.op(opAcquire, 2, 0, 10).write(0, nil, drained)
	a.op.Shard = 0
	a.done(5, outAdmitted)
	rb := s.op(opRollback, 2, 40, 5).write(50, drained, refunded)
	rb.op.Shard = 0
	rb.done(55, outAdmitted)
	b := s.op(opAcquire, 2, 58, 5).write(60, refunded, again)
	b.op.Shard = 0
	b.done(65, outAdmitted)
	s.expect([]store.Item{again})
}

func TestCheckerFlagsNegativeBalanceOnAcquire(t *testing.T) {
	s := newStory(t)
	// rf at the write: no refill pays the stored debt.
	neg := item("solo", 0, 1, testBase/1e6+3, lim{tk: -1, tc: 11, ra: 10}, lim{tk: 900, tc: 100, ra: 1000})
	a := s.op(opAcquire, 2, 0, 11, 100).write(3, solo0, neg)
	a.op.Shard = 0
	a.done(5, outAdmitted)
	s.c.Finish(nil)
	if !hasViolation(s.c, InvNegative, "left tk = -1000") {
		t.Fatalf("negative balance not flagged: %v", s.c.Violations())
	}
	// rf 100 ms before the write: the refill since (a token at 10 a
	// second) pays the stored -1 token (the refill route).
	s = newStory(t)
	paid := item("solo", 0, 1, testBase/1e6+3-100, lim{tk: -1, tc: 11, ra: 10}, lim{tk: 900, tc: 100, ra: 1000})
	s.op(opAcquire, 2, 0, 11, 100).write(3, solo0, paid).done(5, outAdmitted)
	for _, v := range s.c.Violations() {
		if v.Invariant == InvNegative {
			t.Fatalf("a balance the refill since rf pays flagged: %v", v)
		}
	}
	// An adjust may take a bucket into debt.
	s = newStory(t)
	s.op(opAdjust, 2, 0, 11).write(3, solo0, neg).done(5, outAdmitted)
	for _, v := range s.c.Violations() {
		if v.Invariant == InvNegative {
			t.Fatalf("adjust into debt flagged: %v", v)
		}
	}
}

func TestCheckerFlagsHalfChargedMultiLimitAcquire(t *testing.T) {
	s := newStory(t)
	// rpm charged, tpm not: one write that charged only some limits.
	half := item("solo", 0, 1, 0, lim{tk: 9, tc: 1, ra: 10}, lim{tk: 1000, ra: 1000})
	a := s.op(opAcquire, 2, 0, 1, 100).write(3, solo0, half)
	a.op.Shard = 0
	a.done(5, outAdmitted)
	s.c.Finish(nil)
	if !hasViolation(s.c, InvAllOrNothing, "unevenly") {
		t.Fatalf("half charge not flagged: %v", s.c.Violations())
	}
}

func TestCheckerFlagsCascadeParentNotCharged(t *testing.T) {
	s := newStory(t)
	child := item("k", 0, 1, 0, lim{tk: 9, tc: 1, ra: 10}, lim{tk: 900, tc: 100, ra: 1000})
	a := s.op(opAcquire, 0, 0, 1, 100).write(3, nil, child)
	a.op.Shard = 0
	a.done(5, outAdmitted) // the parent's bucket never saw a write
	s.c.Finish([]store.Item{child})
	if !hasViolation(s.c, InvAllOrNothing, "wrote nothing to bucket p/m") {
		t.Fatalf("uncharged parent not flagged: %v", s.c.Violations())
	}
}

func TestCheckerFlagsChargeOnRejection(t *testing.T) {
	s := newStory(t)
	s.op(opAcquire, 2, 0, 1, 100).write(3, solo0, soloA1).done(5, outRejected)
	s.c.Finish(nil)
	if !hasViolation(s.c, InvAllOrNothing, "was rejected but changed") {
		t.Fatalf("charged rejection not flagged: %v", s.c.Violations())
	}
}

func TestCheckerFlagsSkippedDoubling(t *testing.T) {
	s := newStory(t)
	n1 := item("solo", 0, 1, 0, full, fullT)
	n4 := item("solo", 0, 4, 0, full, fullT)
	s.c.Record(rec(1, 0, nil, n1), nil)
	s.c.Record(rec(2, 10, n1, n4), nil)
	if !hasViolation(s.c, InvDoubling, "shard_count went from 1 to 4") {
		t.Fatalf("skipped doubling not flagged: %v", s.c.Violations())
	}
	s = newStory(t)
	n2 := item("solo", 0, 2, 0, full, fullT)
	s.c.Record(rec(1, 0, nil, n2), nil)
	if !hasViolation(s.c, InvDoubling, "created with shard_count 2") {
		t.Fatalf("bad initial count not flagged: %v", s.c.Violations())
	}
	s = newStory(t)
	s.c.m.CheckDoublingCause = false
	s.c.Record(rec(1, 0, nil, n1), nil)
	s.c.Record(rec(2, 10, n1, n2), nil)
	s.c.Record(rec(3, 20, n2, n1), nil)
	if !hasViolation(s.c, InvDoubling, "went from 2 to 1") {
		t.Fatalf("decrease not flagged: %v", s.c.Violations())
	}
}

func TestCheckerFlagsDoublingWithoutHotPartition(t *testing.T) {
	s := newStory(t)
	n1 := item("solo", 0, 1, 0, full, fullT)
	n2 := item("solo", 0, 2, 0, full, fullT)
	n1[bucket.AttrName(wcuName, bucket.FieldTokens)] = store.Int(999_000)
	n1[bucket.AttrName(wcuName, bucket.FieldTotalConsumed)] = store.Int(1000)
	n2[bucket.AttrName(wcuName, bucket.FieldTokens)] = store.Int(999_000)
	n2[bucket.AttrName(wcuName, bucket.FieldTotalConsumed)] = store.Int(1000)
	s.c.Record(rec(1, 0, nil, n1), nil)
	s.c.Record(rec(2, 10, n1, n2), nil) // one write, then a doubling
	if !hasViolation(s.c, InvDoubling, "no shard was at its write ceiling") {
		t.Fatalf("unjustified doubling not flagged: %v", s.c.Violations())
	}
	// The same after the partition refused a write for its ceiling: fine.
	s = newStory(t)
	s.c.Record(rec(1, 0, nil, n1), nil)
	s.c.PartitionThrottled("ns/BUCKET#solo#m#0", 5*int64(time.Millisecond))
	s.c.Record(rec(2, 10, n1, n2), nil)
	s.c.Finish(nil)
	if len(s.c.Violations()) != 0 {
		t.Fatalf("doubling after a real throttle flagged: %v", s.c.Violations())
	}
}

func TestCheckerFlagsRetryAfterThatDidNotSuffice(t *testing.T) {
	s := newStory(t)
	rej := s.op(opAcquire, 2, 1000, 5)
	rej.op.RetryAfter = int64(100 * time.Millisecond)
	first := rej.done(1005, outRejected)
	ri := &retryInfo{Rejection: first.ID, Start: first.Start, End: first.End, RetryAfter: first.RetryAfter}
	retry := s.op(opAcquire, 2, 1105, 5)
	retry.op.Retry = ri
	retry.op.RetryAfter = int64(50 * time.Millisecond)
	retry.done(1110, outRejected)
	s.c.Finish(nil)
	if !hasViolation(s.c, InvLiveness, "waited the retry-after 100ms") {
		t.Fatalf("insufficient retry-after not flagged: %v", s.c.Violations())
	}
	// Someone else wrote the bucket meanwhile: not judged.
	s = newStory(t)
	rej = s.op(opAcquire, 2, 1000, 5)
	rej.op.RetryAfter = int64(100 * time.Millisecond)
	first = rej.done(1005, outRejected)
	ri = &retryInfo{Rejection: first.ID, Start: first.Start, End: first.End, RetryAfter: first.RetryAfter}
	s.op(opAcquire, 2, 1050, 1).write(1052, solo0, soloA1).done(1055, outAdmitted)
	retry = s.op(opAcquire, 2, 1105, 5)
	retry.op.Retry = ri
	retry.done(1110, outRejected)
	if hasViolation(s.c, InvLiveness, "") {
		t.Fatalf("judged although another client consumed: %v", s.c.Violations())
	}
}

func TestCheckDeterminismFlagsDifferentTraces(t *testing.T) {
	if v := checkDeterminism("00000000000000aa", "00000000000000aa"); v != nil {
		t.Fatalf("equal traces flagged: %v", v)
	}
	v := checkDeterminism("00000000000000aa", "00000000000000ab")
	if len(v) != 1 || v[0].Invariant != InvDeterminism {
		t.Fatalf("different traces not flagged: %v", v)
	}
}

func hasViolation(c *checker, inv, substr string) bool {
	for _, v := range c.Violations() {
		if v.Invariant == inv && strings.Contains(v.Detail, substr) {
			return true
		}
	}
	return false
}
