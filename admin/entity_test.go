package limiter

import (
	"errors"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
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
	client := e.limiter(WithCacheTTL(time.Minute))
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

// Limits change while buckets live: a lowered limit caps the tokens at the
// next write, a new limit appears full, a removed one is REMOVEd, and the
// consumption counter of a limit that stays is kept.
func TestLimitChangesReachExistingBuckets(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("k1", []Limit{PerMinute("rpm", 100), PerMinute("old", 5)}, map[string]int64{"rpm": 2, "old": 1}))
	e.mustAcquire(l, req("k1", []Limit{PerMinute("rpm", 10), PerMinute("tpm", 1000)}, map[string]int64{"rpm": 1, "tpm": 7}))
	it := e.bucketItem("k1", "gpt-4", 0)
	if tk, _ := it.Int("b_rpm_tk"); tk != 9_000 {
		t.Fatalf("rpm tk = %d, want 9000: capped at the new burst of 10, minus 1", tk)
	}
	if tc, _ := it.Int("b_rpm_tc"); tc != 3_000 {
		t.Fatalf("rpm tc = %d, want 3000 (kept across the change)", tc)
	}
	if tk, _ := it.Int("b_tpm_tk"); tk != 993_000 {
		t.Fatalf("tpm tk = %d, want 993000 (new, full, minus 7)", tk)
	}
	for name := range it {
		if len(name) > 6 && name[:6] == "b_old_" {
			t.Fatalf("removed limit left %s behind", name)
		}
	}
	// The next acquire with the same limits is back on the hot path.
	e.mustAcquire(l, req("k1", []Limit{PerMinute("rpm", 10), PerMinute("tpm", 1000)}, map[string]int64{"rpm": 1}))
	e.expectCost(PathSpeculative, 1, 0, 1)
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
		if err := l.PutEntity(e.ctx, bad); !errors.Is(err, ErrInvalid) {
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

// A table written by a newer layout is refused before anything is written.
func TestUnknownSchemaVersionStopsTheLimiter(t *testing.T) {
	e := newEnv(t)
	k := keys.Schema()
	if _, err := e.st.Put(e.ctx, store.PutInput{Item: store.Item{"PK": store.Str(k.PK), "SK": store.Str(k.SK), "version": store.Int(2)}}); err != nil {
		t.Fatal(err)
	}
	_, err := e.limiter().Acquire(e.ctx, req("k1", rpm(10), one))
	if !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Acquire = %v, want ErrSchemaVersion", err)
	}
	if e.bucketItem("k1", "gpt-4", 0) != nil {
		t.Fatal("a bucket was written despite the unknown schema")
	}
}

// New values under the same limit names (rpm 100 → 10) reach a bucket at
// its next write, the hot path's included: the consumption-only write is
// conditional on the limits hash, so on a bucket written for other values
// it fails and the write that follows rewrites the limits. Without that
// condition the bucket would go on serving the 99 tokens it held under the
// old limit.
func TestChangedLimitValuesReachTheHotPath(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithLocalRefusals(false))
	e.mustAcquire(l, req("k1", rpm(100), one)) // 99 left, below the burst: the hot path's case
	admitted := 0
	for i := 0; i < 30; i++ {
		if _, err := l.Acquire(e.ctx, req("k1", rpm(10), one)); err == nil {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("%d admitted under a limit of 10 a minute (the bucket held 99 under the old limit of 100)", admitted)
	}
	if bx, _ := e.bucketItem("k1", "gpt-4", 0).Int("b_rpm_bx"); bx != 10_000 {
		t.Fatalf("stored burst %d, want 10000: the new limit was never written", bx)
	}
}
