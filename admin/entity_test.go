package admin

import (
	"errors"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
)

// Stored limits override the caller's, most specific first, and are cached
// for the TTL.
func TestStoredLimitsResolutionOrder(t *testing.T) {
	e := newEnv(t)
	admin := e.limiter()
	put := func(s Scope, n int64) {
		if err := admin.PutLimits(e.ctx, s, rpm(n)); err != nil {
			t.Fatal(err)
		}
	}
	put(Scope{Resource: "gpt-4"}, 30)               // every entity on gpt-4
	put(Scope{Entity: "k1"}, 20)                    // k1 on every resource
	put(Scope{Entity: "k1", Resource: "gpt-4"}, 10) // k1 on gpt-4
	available := func(entity string) int64 {
		l := e.limiter()
		av, err := l.Status(e.ctx, entity, "gpt-4", rpm(99))
		if err != nil {
			t.Fatal(err)
		}
		return av[0].Remaining
	}
	if got := available("k1"); got != 10 {
		t.Fatalf("k1 on gpt-4: %d, want 10 (entity+resource)", got)
	}
	if got := available("k2"); got != 30 {
		t.Fatalf("k2 on gpt-4: %d, want 30 (resource)", got)
	}
	if err := admin.DeleteLimits(e.ctx, Scope{Entity: "k1", Resource: "gpt-4"}); err != nil {
		t.Fatal(err)
	}
	if got := available("k1"); got != 20 {
		t.Fatalf("k1 after delete: %d, want 20 (entity default)", got)
	}
	if err := admin.DeleteLimits(e.ctx, Scope{Entity: "k1"}); err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteLimits(e.ctx, Scope{Resource: "gpt-4"}); err != nil {
		t.Fatal(err)
	}
	if got := available("k1"); got != 99 {
		t.Fatalf("k1 with nothing stored: %d, want the caller's 99", got)
	}
	if ls, ok, err := admin.GetLimits(e.ctx, Scope{Entity: "k1"}); err != nil || ok || ls != nil {
		t.Fatalf("GetLimits after delete: %v %v %v", ls, ok, err)
	}
}

// The cache holds stored limits for its TTL; Invalidate drops it at once.
func TestStoredLimitsCacheTTLAndInvalidation(t *testing.T) {
	e := newEnv(t)
	admin := e.limiter()
	client := e.limiter(limiter.WithCacheTTL(time.Minute))
	e.mustAcquire(client, req("k1", rpm(100), one))
	if err := admin.PutLimits(e.ctx, Scope{Entity: "k1"}, rpm(1)); err != nil {
		t.Fatal(err)
	}
	e.mustAcquire(client, req("k1", rpm(100), one)) // still cached: 100 a minute
	e.clock.Add(61 * time.Second)
	e.mustAcquire(client, req("k1", rpm(100), one)) // reloaded: now 1 a minute
	e.mustReject(client, req("k1", rpm(100), one))
	if err := admin.DeleteLimits(e.ctx, Scope{Entity: "k1"}); err != nil {
		t.Fatal(err)
	}
	client.Invalidate()
	// Raising a limit grants no tokens back in time: the refill up to the
	// first write under the new limit accrues at the old rate (1 a minute).
	e.mustReject(client, req("k1", rpm(100), one))
	e.clock.Add(time.Minute)
	e.mustAcquire(client, req("k1", rpm(100), one)) // this write switches the bucket to 100 a minute
	e.clock.Add(time.Second)
	e.mustAcquire(client, req("k1", rpm(100), one)) // 1.67 refilled at the new rate
}

func TestEntityCRUDAndCycles(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	for _, ent := range []Entity{{ID: "org"}, {ID: "proj", Parent: "org"}, {ID: "key", Parent: "proj", Cascade: true}} {
		if err := l.PutEntity(e.ctx, ent); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := l.GetEntity(e.ctx, "key")
	if err != nil || !ok || got != (Entity{ID: "key", Parent: "proj", Cascade: true}) {
		t.Fatalf("GetEntity = %+v %v %v", got, ok, err)
	}
	for _, bad := range []Entity{{ID: "org", Parent: "org"}, {ID: "org", Parent: "key"}, {ID: "x", Cascade: true}, {ID: "a#b"}} {
		if err := l.PutEntity(e.ctx, bad); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("PutEntity(%+v) = %v, want a validation error", bad, err)
		}
	}
	if err := l.DeleteEntity(e.ctx, "key"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := l.GetEntity(e.ctx, "key"); ok {
		t.Fatal("entity still there after delete")
	}
}
