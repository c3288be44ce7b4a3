package limiter

import (
	"testing"

	"github.com/shardlimit/limiter/internal/items"
	"github.com/shardlimit/limiter/store/memsim"
)

func cascadeEnv(t *testing.T, opts ...memsim.Option) (*env, *Limiter) {
	e := newEnv(t, opts...)
	l := e.limiter()
	if err := l.putEntity(e.ctx, items.Entity{ID: "project-1"}); err != nil {
		t.Fatal(err)
	}
	if err := l.putEntity(e.ctx, items.Entity{ID: "key-1", Parent: "project-1", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.putLimits(e.ctx, scope{Entity: "project-1"}, rpm(10)); err != nil {
		t.Fatal(err)
	}
	return e, l
}

// With cascade on, an acquire charges the key and its project, both in one
// round trip of two concurrent writes (2 WCU).
func TestCascadeChargesChildAndParent(t *testing.T) {
	e, l := cascadeEnv(t)
	e.mustAcquire(l, req("key-1", rpm(100), one)) // creates both buckets
	e.mustAcquire(l, req("key-1", rpm(100), one))
	e.expectCost(PathSpeculative, 1, 0, 2)
	if c, p := e.tokens("key-1", "gpt-4", "rpm"), e.tokens("project-1", "gpt-4", "rpm"); c != 98_000 || p != 8_000 {
		t.Fatalf("child tk %d, parent tk %d; want 98000 and 8000 (the parent has its own stored limit of 10)", c, p)
	}
}

// When the parent is exhausted the child's charge is returned: the caller
// sees nothing charged anywhere, and the error names the parent.
func TestCascadeIsAllOrNothing(t *testing.T) {
	e, l := cascadeEnv(t)
	for i := 0; i < 10; i++ {
		e.mustAcquire(l, req("key-1", rpm(100), one))
	}
	child, childTC := e.tokens("key-1", "gpt-4", "rpm"), e.consumed("key-1", "gpt-4", "rpm")
	rl := e.mustReject(l, req("key-1", rpm(100), one))
	if !rl.Parent || rl.Entity != "project-1" {
		t.Fatalf("rejection %+v should name the parent", rl)
	}
	if c, tc := e.tokens("key-1", "gpt-4", "rpm"), e.consumed("key-1", "gpt-4", "rpm"); c != child || tc != childTC {
		t.Fatalf("child charged by a rejected cascade: tk %d->%d, tc %d->%d", child, c, childTC, tc)
	}
	// A sibling without cascade is not limited by the project.
	if err := l.putEntity(e.ctx, items.Entity{ID: "key-2", Parent: "project-1"}); err != nil {
		t.Fatal(err)
	}
	e.mustAcquire(l, req("key-2", rpm(100), one))
}

// When refill is due on one side, its consumption-only write is paid by
// the refill since rf (the refill route): no transaction, no lock.
func TestCascadeSideDueARefillPaysFromIt(t *testing.T) {
	e, l := cascadeEnv(t)
	for i := 0; i < 10; i++ {
		e.mustAcquire(l, req("key-1", rpm(100), one))
	}
	e.clock.Add(30_000_000_000) // 30 s: the project refilled 5
	other := e.limiter()        // no memory of either bucket: blind writes
	before := e.st.Totals().Ops[memsim.OpTransactWrite].Requests
	e.mustAcquire(other, req("key-1", rpm(100), one))
	if got := e.st.Totals().Ops[memsim.OpTransactWrite].Requests - before; got != 0 {
		t.Fatalf("%d transactions, want none", got)
	}
	// Stored -1 at the old rf: with the 5 refilled since, 4 left.
	if p := e.tokens("project-1", "gpt-4", "rpm"); p != -1_000 {
		t.Fatalf("parent tk = %d, want -1000", p)
	}
	// The client that knows both items predicts the refill: one round trip.
	e.clock.Add(20_000_000_000)
	e.mustAcquire(other, req("key-1", rpm(100), one))
	if ev := e.last(); ev.RoundTrips != 1 || ev.WriteUnits != 2 {
		t.Fatalf("informed cascade: %d round trips, %.0f WCU; want 1 and 2", ev.RoundTrips, ev.WriteUnits)
	}
}
