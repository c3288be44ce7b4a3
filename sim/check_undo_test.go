package sim

import (
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// A cascade's compensation returns a charge that was taken when its write
// applied, possibly a second earlier (the other side's answer was lost).
// The tokens it brings back are not new: a window that starts after the
// charge and holds the undo may admit them again, as after a rollback.
func TestCheckerCountsACascadeUndoAsARefund(t *testing.T) {
	s := newStory(t)
	// 10 rpm a second, burst 10. An acquire that will fail takes the
	// burst at 0 ms; another takes 8 of the 8.9 refilled by 890 ms; the
	// first is undone at 900 ms; a third takes the burst at 950 ms, 10 of
	// the 10.9 + 0.6 the bucket would hold above it.
	drained := item("solo", 0, 1, 0, lim{tk: 0, tc: 10, ra: 10}, lim{tk: 1000, ra: 1000})
	refilled := item("solo", 0, 1, 890, lim{tk: 0.9, tc: 18, ra: 10}, lim{tk: 1000, ra: 1000})
	undone := item("solo", 0, 1, 890, lim{tk: 10.9, tc: 8, ra: 10}, lim{tk: 1000, ra: 1000})
	again := item("solo", 0, 1, 950, lim{tk: 0, tc: 18, ra: 10}, lim{tk: 1000, ra: 1000})
	a := s.op(opAcquire, 2, 0, 10).write(0, nil, drained)
	b := s.op(opAcquire, 2, 880, 8).write(890, drained, refilled)
	b.op.Shard = 0
	b.done(895, outAdmitted)
	a.write(900, refilled, undone)
	a.op.Shard = 0
	a.done(905, outUnavailable)
	c := s.op(opAcquire, 2, 940, 10).write(950, undone, again)
	c.op.Shard = 0
	c.done(955, outAdmitted)
	s.expect([]store.Item{again})
}

// A doubling written in the middle of a cascading acquire (its parent's
// partition throttled the charge) is no charge: the parent's charge that
// the caller's cancelled context then stops is no compensation. Only
// writes that move a total consumed, and puts, count as charges.
func TestADoublingIsNoCharge(t *testing.T) {
	b := keys.Bucket{Namespace: "sim", Entity: "project-0", Resource: "gpt-4o"}
	double := keys.DoubleShards(b, 1, keys.Limits{Names: []string{"rpm", "tpm"}, Hash: 7})
	if charges(double.Expr, true) {
		t.Fatal("a doubling counted as a charge")
	}
	charge, err := store.Build(store.Update{}.Add("b_rpm_tk", store.Int(-1000)).Add("b_rpm_tc", store.Int(1000)), store.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	if !charges(charge, true) || !charges(store.Expr{}, false) {
		t.Fatal("a charge, or a put, not counted as a charge")
	}
}
