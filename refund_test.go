package limiter

import (
	"errors"
	"github.com/shardlimit/limiter/internal/items"
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// remaining returns a limit's Remaining in states (fails when absent).
func remaining(t *testing.T, states []LimitState, name string) int64 {
	t.Helper()
	for _, s := range states {
		if s.Limit.Name == name {
			return s.Remaining
		}
	}
	t.Fatalf("no state for %s in %+v", name, states)
	return 0
}

// A lease never gives back more than it took. Another request committed
// 9,000 of the 10,000 tpm; a lease took 100 and refunds 5,000: only its
// 100 come back, and the other request's 9,000 stay consumed.
func TestRegressionRefundNeverExceedsTheCharge(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	other := e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1, "tpm": 9_000}))
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	le := e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1, "tpm": 100}))
	if err := le.Adjust(e.ctx, map[string]int64{"tpm": -5_000}); err != nil {
		t.Fatal(err)
	}
	if err := le.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := e.tokens("k1", "gpt-4", "tpm"); got != 1_000_000 {
		t.Fatalf("tk = %d after the capped refund, want 1000000 (the other request's 9,000 stay consumed)", got)
	}
	if got := e.consumed("k1", "gpt-4", "tpm"); got != 9_000_000 {
		t.Fatalf("tc = %d, want 9000000", got)
	}
}

// The cap counts every correction: what the acquire charged, plus further
// charges, less refunds so far. A refund past it is dropped; once the lease
// holds nothing, a refund or a Rollback makes no write. A limit the acquire
// did not charge but an Adjust did is returned by Rollback too.
func TestRefundsAndRollbackReturnWhatTheLeaseHolds(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	tpm0 := int64(10_000_000)
	le := e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1, "tpm": 500}))
	steps := []struct {
		delta map[string]int64
		tpm   int64 // tokens the lease holds after the step
	}{
		{map[string]int64{"tpm": 250}, 750},
		{map[string]int64{"tpm": -300}, 450},
		{map[string]int64{"tpm": -1_000}, 0}, // capped at 450
		{map[string]int64{"tpm": 40}, 40},
		{map[string]int64{"tpm": -100}, 0}, // capped at 40
	}
	for i, s := range steps {
		if err := le.Adjust(e.ctx, s.delta); err != nil {
			t.Fatal(err)
		}
		if got := e.tokens("k1", "gpt-4", "tpm"); got != tpm0-s.tpm*1_000 {
			t.Fatalf("step %d (%v): tk = %d, want %d", i, s.delta, got, tpm0-s.tpm*1_000)
		}
	}
	calls := e.st.Totals().Requests
	if err := le.Adjust(e.ctx, map[string]int64{"tpm": -1}); err != nil {
		t.Fatal(err)
	}
	if got := e.st.Totals().Requests; got != calls {
		t.Fatalf("a refund of a lease that holds nothing made %d store calls, want 0", got-calls)
	}
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got, tc := e.tokens("k1", "gpt-4", "tpm"), e.consumed("k1", "gpt-4", "tpm"); got != tpm0 || tc != 0 {
		t.Fatalf("after Rollback tpm tk %d, tc %d; want %d, 0", got, tc, tpm0)
	}
	if got := e.consumed("k1", "gpt-4", "rpm"); got != 0 {
		t.Fatalf("after Rollback rpm tc %d, want 0", got)
	}

	// A limit only an Adjust charged.
	le = e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1}))
	if err := le.Adjust(e.ctx, map[string]int64{"tpm": 300}); err != nil {
		t.Fatal(err)
	}
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got, tc := e.tokens("k1", "gpt-4", "tpm"), e.consumed("k1", "gpt-4", "tpm"); got != tpm0 || tc != 0 {
		t.Fatalf("after Rollback tpm tk %d, tc %d; want %d, 0 (the Adjust's 300 returned too)", got, tc, tpm0)
	}
}

// A refund whose outcome is unknown (the write applied, its answer was
// lost) counts as made: the Rollback that follows returns the rest, not
// the refund again.
func TestRegressionRollbackAfterAnUnknownRefund(t *testing.T) {
	sc := newScript()
	e := newEnv(t, memsim.WithFaults(sc.injector()))
	l := e.limiter()
	pk := childPKOf("k1")
	le := e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1, "tpm": 500}))
	sc.on(pk, memsim.FaultLostResponse)
	sc.arm()
	if err := le.Adjust(e.ctx, map[string]int64{"tpm": -200}); !store.OutcomeUnknown(err) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Adjust: %v, want an unavailability whose outcome is unknown", err)
	}
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got, tc := e.tokens("k1", "gpt-4", "tpm"), e.consumed("k1", "gpt-4", "tpm"); got != 10_000_000 || tc != 0 {
		t.Fatalf("tpm tk %d, tc %d; want 10000000, 0 (the refund returned once)", got, tc)
	}
}

// On a sharded bucket the cap applies to the shard the lease charged, and
// nothing moves elsewhere.
func TestShardedRefundIsCapped(t *testing.T) {
	limits := []Limit{PerSecond("rps", 400)}
	e, l := shardedEnv(t, "hot", limits)
	le := e.mustAcquire(l, Request{Entity: "hot", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 2}})
	shard := le.Shard()
	before := e.shardTC("hot", "rps")
	if err := le.Adjust(e.ctx, map[string]int64{"rps": -100}); err != nil {
		t.Fatal(err)
	}
	after := e.shardTC("hot", "rps")
	e.expectMoved("Adjust(-100)", before, after, shard, -2_000)
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.expectMoved("Rollback", after, e.shardTC("hot", "rps"), shard, 0)
}

// In a cascade the parent's side is capped at what the lease charged the
// parent: a refund never returns other keys' use of the project. When a
// further charge's outcome is unknown on one side, that side does not count
// it, and Rollback returns no more than each side surely holds.
func TestCascadeRefundIsCappedOnBothSides(t *testing.T) {
	sc := newScript()
	e, l := cascadeEnv(t, memsim.WithFaults(sc.injector()))
	for i := 0; i < 4; i++ { // key-2's use of the project
		if i == 0 {
			if err := l.putEntity(e.ctx, items.Entity{ID: "key-2", Parent: "project-1", Cascade: true}); err != nil {
				t.Fatal(err)
			}
		}
		e.mustAcquire(l, req("key-2", rpm(100), one))
	}
	le := e.mustAcquire(l, req("key-1", rpm(100), one))
	if err := le.Adjust(e.ctx, map[string]int64{"rpm": -50}); err != nil {
		t.Fatal(err)
	}
	if c, p := e.tokens("key-1", "gpt-4", "rpm"), e.tokens("project-1", "gpt-4", "rpm"); c != 100_000 || p != 6_000 {
		t.Fatalf("child tk %d, parent tk %d; want 100000 and 6000 (key-2's 4 stay consumed)", c, p)
	}
	if got := remaining(t, le.ParentLimits(), "rpm"); got != 6 {
		t.Fatalf("ParentLimits rpm remaining %d after the refund, want 6", got)
	}

	// +2, whose parent write applies but whose answer is lost.
	le = e.mustAcquire(l, req("key-1", rpm(100), one))
	sc.seen = map[string]int{}
	sc.on(parentPK, memsim.FaultLostResponse)
	sc.arm()
	if err := le.Adjust(e.ctx, map[string]int64{"rpm": 2}); !store.OutcomeUnknown(err) {
		t.Fatalf("Adjust: %v, want an unknown outcome", err)
	}
	sc.armed = false
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if c, p := e.tokens("key-1", "gpt-4", "rpm"), e.tokens("project-1", "gpt-4", "rpm"); c != 100_000 || p != 4_000 {
		t.Fatalf("child tk %d, parent tk %d; want 100000 (all returned) and 4000 (the +2 that may not have applied is kept)", c, p)
	}
}

// Limits (and ParentLimits) follow the lease's writes: after an Adjust
// they show the settled charge, from the item the Adjust's write returned,
// with no store call of their own; after a Rollback, the bucket as it left
// it.
func TestLimitsFollowAdjustAndRollback(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	le := e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1, "tpm": 500}))
	if got := remaining(t, le.Limits(), "tpm"); got != 9_500 {
		t.Fatalf("after the acquire tpm remaining %d, want 9500", got)
	}
	for _, s := range []struct {
		delta, want int64
	}{{300, 9_200}, {-100, 9_300}, {-5_000, 10_000}} {
		if err := le.Adjust(e.ctx, map[string]int64{"tpm": s.delta}); err != nil {
			t.Fatal(err)
		}
		calls := e.st.Totals().Requests
		if got := remaining(t, le.Limits(), "tpm"); got != s.want {
			t.Fatalf("after Adjust(%d) tpm remaining %d, want %d", s.delta, got, s.want)
		}
		if e.st.Totals().Requests != calls {
			t.Fatal("Limits made a store call")
		}
	}
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := remaining(t, le.Limits(), "rpm"); got != 100 {
		t.Fatalf("after Rollback rpm remaining %d, want 100", got)
	}

	// The parent's side of a cascade.
	e, l = cascadeEnv(t)
	le = e.mustAcquire(l, req("key-1", rpm(100), map[string]int64{"rpm": 2}))
	if err := le.Adjust(e.ctx, map[string]int64{"rpm": 3}); err != nil {
		t.Fatal(err)
	}
	if c, p := remaining(t, le.Limits(), "rpm"), remaining(t, le.ParentLimits(), "rpm"); c != 95 || p != 5 {
		t.Fatalf("after Adjust(+3) remaining child %d, parent %d; want 95 and 5", c, p)
	}
}

// childPKOf is the partition key of an entity's gpt-4 bucket (shard 0).
func childPKOf(entity string) string {
	return keys.Bucket{Namespace: "ns", Entity: entity, Resource: "gpt-4"}.PK()
}
