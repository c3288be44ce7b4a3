package admin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/store/memsim"
)

// A nil context, a nil or zero Admin and a bad New are validation errors
// naming what is wrong, not panics, and write nothing.
func TestBadCallsAreValidationErrors(t *testing.T) {
	e := newEnv(t)
	a := e.limiter().Admin
	var nilCtx context.Context
	var zero Admin
	var nilAdmin *Admin
	calls := map[string]func(*Admin, context.Context) error{
		"PutEntity":    func(a *Admin, ctx context.Context) error { return a.PutEntity(ctx, Entity{ID: "k"}) },
		"GetEntity":    func(a *Admin, ctx context.Context) error { _, _, err := a.GetEntity(ctx, "k"); return err },
		"DeleteEntity": func(a *Admin, ctx context.Context) error { return a.DeleteEntity(ctx, "k") },
		"ListEntities": func(a *Admin, ctx context.Context) error { _, err := a.ListEntities(ctx, "", 0); return err },
		"PutLimits":    func(a *Admin, ctx context.Context) error { return a.PutLimits(ctx, Scope{Entity: "k"}, rpm(1)) },
		"GetLimits": func(a *Admin, ctx context.Context) error {
			_, _, err := a.GetLimits(ctx, Scope{Entity: "k"})
			return err
		},
		"DeleteLimits": func(a *Admin, ctx context.Context) error { return a.DeleteLimits(ctx, Scope{Entity: "k"}) },
		"ListLimits":   func(a *Admin, ctx context.Context) error { _, err := a.ListLimits(ctx, ""); return err },
		"Audit":        func(a *Admin, ctx context.Context) error { _, err := a.Audit(ctx, AuditQuery{Entity: "k"}); return err },
		"Usage": func(a *Admin, ctx context.Context) error {
			_, err := a.Usage(ctx, UsageQuery{Entity: "k", Window: UsageHourly, From: t0, To: t0.Add(1)})
			return err
		},
		"Buckets":            func(a *Admin, ctx context.Context) error { _, err := a.Buckets(ctx, "k", ""); return err },
		"ResetBucket":        func(a *Admin, ctx context.Context) error { _, err := a.ResetBucket(ctx, "k", "r"); return err },
		"InitTable":          func(a *Admin, ctx context.Context) error { return a.InitTable(ctx) },
		"TableSchemaVersion": func(a *Admin, ctx context.Context) error { _, _, err := a.TableSchemaVersion(ctx); return err },
	}
	for name, call := range calls {
		for _, c := range []struct {
			a     *Admin
			ctx   context.Context
			field string
		}{{a, nilCtx, "ctx"}, {&zero, e.ctx, "Admin"}, {nilAdmin, e.ctx, "Admin"}} {
			var ve *limiter.ValidationError
			if err := call(c.a, c.ctx); !errors.As(err, &ve) || ve.Field != c.field || !errors.Is(err, limiter.ErrInvalid) {
				t.Errorf("%s with a bad %s: %v, want a validation error on %s", name, c.field, err, c.field)
			}
		}
	}
	if n := e.st.Len(); n != 0 {
		t.Fatalf("bad calls wrote %d items", n)
	}
	for field, opts := range map[string][]Option{"Namespace": {WithNamespace("a/b")}, "WithClock": {WithClock(nil)}} {
		var ve *limiter.ValidationError
		if _, err := New(memsim.New(), opts...); !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("New with a bad %s: %v", field, err)
		}
	}
	if _, err := New(nil); !errors.Is(err, limiter.ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
}

// An Admin given a limiter (WithLimiter) drops its cache with every change
// and makes it forget a bucket it resets; one without leaves the limiter's
// cache alone until its TTL or Invalidate.
func TestWithLimiterKeepsTheLimiterUpToDate(t *testing.T) {
	e := newEnv(t)
	told := e.limiter(limiter.WithCacheTTL(time.Hour))
	lone, err := limiter.New(e.st, limiter.WithNamespace("ns"), limiter.WithClock(e.clock), limiter.WithCacheTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	loneReq := req("j", rpm(100), one)

	e.mustAcquire(told, req("k", rpm(100), one)) // each caches "nothing stored" for its entity
	if _, err := lone.Acquire(e.ctx, loneReq); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"k", "j"} {
		if err := told.PutLimits(e.ctx, Scope{Entity: id}, rpm(1)); err != nil {
			t.Fatal(err)
		}
	}
	// Under the caller's 100 a minute, 99 tokens are left; under the
	// stored 1, the next write caps them at 1.
	e.mustAcquire(told, req("k", rpm(100), one))
	e.mustReject(told, req("k", rpm(100), one))
	for i := 0; i < 2; i++ {
		if _, err := lone.Acquire(e.ctx, loneReq); err != nil {
			t.Fatalf("a limiter no Admin told: %v, want its cached limits (100) to apply until its TTL", err)
		}
	}
	lone.Invalidate()
	if _, err := lone.Acquire(e.ctx, loneReq); err != nil {
		t.Fatal(err)
	}
	if _, err := lone.Acquire(e.ctx, loneReq); !errors.Is(err, limiter.ErrRateLimited) {
		t.Fatalf("after Invalidate: %v, want the stored limit of 1", err)
	}

	// A reset: the told limiter forgets the bucket, so it does not refuse
	// from its memory of the empty bucket (a local refusal) but acquires
	// from a full one at once.
	if n, err := told.ResetBucket(e.ctx, "k", "gpt-4"); err != nil || n != 1 {
		t.Fatalf("ResetBucket: %d, %v", n, err)
	}
	e.mustAcquire(told, req("k", rpm(100), one))
	e.mustReject(told, req("k", rpm(100), one))
	var nilLimiter *limiter.Limiter
	nilLimiter.Invalidate()
	nilLimiter.ForgetBucket("k", "gpt-4")
}
