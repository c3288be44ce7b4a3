package sim

import (
	"testing"

	"github.com/shardlimit/limiter/store"
)

// checker tests for deleted items (the time to live) and cancelled
// callers, on crafted histories.

// A sharded bucket "solo" at 2 shards: shard 0 created, doubled, shard 1
// created; then shard 0 expires.
func shardedSolo(s *story) {
	s.c.m.CheckDoublingCause = false
	n1 := item("solo", 0, 1, 0, full, fullT)
	n2 := item("solo", 0, 2, 0, full, fullT)
	s.c.Record(rec(1, 0, nil, n1), nil)
	s.c.Record(rec(2, 10, n1, n2), nil)
	s.c.Record(rec(3, 20, nil, item("solo", 1, 2, 0, lim{ra: 10}, lim{ra: 1000})), nil)
	s.c.Record(rec(4, 1000, n2, nil), nil)
	s.seq = 4
}

func TestCheckerAllowsShardZeroRecreatedAtItsSiblingsCount(t *testing.T) {
	s := newStory(t)
	shardedSolo(s)
	s.op(opAcquire, 2, 1500).write(2000, nil, item("solo", 0, 2, 2000, full, fullT)).done(2005, outAdmitted)
	if len(s.c.Violations()) != 0 || s.c.ShardZeroRecreated != 1 {
		t.Fatalf("recreated at its sibling's count: %v, %d recreations", s.c.Violations(), s.c.ShardZeroRecreated)
	}
}

func TestCheckerFlagsShardZeroRecreatedAboveItsSiblings(t *testing.T) {
	s := newStory(t)
	shardedSolo(s)
	s.op(opAcquire, 2, 1500).write(2000, nil, item("solo", 0, 4, 2000, full, fullT)).done(2005, outAdmitted)
	if !hasViolation(s.c, InvDoubling, "created with shard_count 4, want 1 or the count of a shard") {
		t.Fatalf("recreated above its siblings' count: %v", s.c.Violations())
	}
}

func TestCheckerFlagsShardZeroRecreatedAtOneBesideLiveShards(t *testing.T) {
	s := newStory(t)
	shardedSolo(s)
	s.op(opAcquire, 2, 1500).write(2000, nil, item("solo", 0, 1, 2000, full, fullT)).done(2005, outAdmitted)
	if !hasViolation(s.c, InvDoubling, "although shard 1 lived at 2 shards all the while") {
		t.Fatalf("recreated at one shard beside a live shard: %v", s.c.Violations())
	}
	// Shard 1 gone before the write could look: one shard is right, and
	// its count is no longer one to take.
	recreate := func(n int64) *checker {
		s := newStory(t)
		shardedSolo(s)
		s.c.Record(rec(5, 1200, item("solo", 1, 2, 0, lim{ra: 10}, lim{ra: 1000}), nil), nil)
		s.seq = 5
		s.op(opAcquire, 2, 1500).write(2000, nil, item("solo", 0, n, 2000, full, fullT)).done(2005, outAdmitted)
		return s.c
	}
	if c := recreate(1); len(c.Violations()) != 0 {
		t.Fatalf("recreated at one shard, alone: %v", c.Violations())
	}
	if c := recreate(2); !hasViolation(c, InvDoubling, "created with shard_count 2, want 1") {
		t.Fatalf("recreated at the count of a shard long gone: %v", c.Violations())
	}
}

// Invariant 1 counts what deleted items held: an item charged, deleted
// and charged again ends with the second charge alone.
func TestCheckerCountsTheTcOfDeletedItems(t *testing.T) {
	s := newStory(t)
	a := s.op(opAcquire, 2, 0, 1, 100).write(3, nil, soloA1)
	a.op.Shard = 0
	a.done(5, outAdmitted)
	s.seq++
	s.c.Record(rec(s.seq, 5000, soloA1, nil), nil) // expired
	b := s.op(opAcquire, 2, 6000, 1, 100).write(6003, nil, item("solo", 0, 1, 6000, lim{tk: 9, tc: 1, ra: 10}, lim{tk: 900, tc: 100, ra: 1000}))
	b.op.Shard = 0
	final := item("solo", 0, 1, 6000, lim{tk: 9, tc: 1, ra: 10}, lim{tk: 900, tc: 100, ra: 1000})
	b.done(6005, outAdmitted)
	s.expect([]store.Item{final}) // rf 6000 after 0 and the delete: a new item, not a rewind
	// A deleted item's tc that no operation explains is still flagged.
	s = newStory(t)
	s.c.Record(rec(1, 0, nil, soloA1), nil)
	s.c.Record(rec(2, 5000, soloA1, nil), nil)
	s.expect(nil, InvLostUpdate)
}

func TestCheckerFlagsCancelledAcquireAnsweredWithALease(t *testing.T) {
	s := newStory(t)
	a := s.op(opAcquire, 2, 0, 1, 100).write(3, solo0, soloA1)
	a.op.Cancelled = true
	a.done(5, outAdmitted)
	s.expect([]store.Item{soloA1}, InvCancelled)

	s = newStory(t)
	a = s.op(opAcquire, 2, 0, 1, 100)
	a.op.Cancelled, a.op.FailedOpen = true, true
	a.done(5, outUnavailable)
	s.expect(nil, InvCancelled)

	s = newStory(t)
	a = s.op(opAcquire, 2, 0, 1, 100)
	a.op.Cancelled = true
	a.done(5, outUnavailable) // not the context's error
	s.expect(nil, InvCancelled)

	s = newStory(t) // the context's error, a refusal: both fine
	a = s.op(opAcquire, 2, 0, 1, 100)
	a.op.Cancelled, a.op.CtxErr = true, true
	a.done(5, outUnavailable)
	b := s.op(opAcquire, 2, 10, 1, 100)
	b.op.Cancelled = true
	b.done(15, outRejected)
	s.expect(nil)

	s = newStory(t) // the compensation stopped by the caller's context
	a = s.op(opAcquire, 0, 0, 1, 100)
	a.op.Cancelled, a.op.CtxErr, a.op.UndoCancelled = true, true, true
	a.done(5, outUnavailable)
	s.expect(nil, InvCancelled)
}
