package limiter

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/internal/items"
)

// An operator disables a key in admit mode during an incident: its
// acquires must be admitted without touching its bucket, and, once the
// configuration is cached, without any store call at all (the point of
// admit mode is to take the key off the table). Its lease charged nothing,
// so Adjust and Rollback have nothing to do.
func TestModeAdmitWritesNothing(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	if err := l.putScope(e.ctx, scope{Entity: "vip"}, nil, items.ModeAdmit); err != nil {
		t.Fatal(err)
	}
	r := req("vip", rpm(1), map[string]int64{"rpm": 1})
	for i := 0; i < 5; i++ { // five times a limit of one
		le := e.mustAcquire(l, r)
		ev := e.last()
		if ev.Outcome != Admitted || ev.Mode != "admit" || ev.Path != PathNone {
			t.Fatalf("acquire %d: %+v, want admitted by mode admit without a write", i, ev)
		}
		// The first reads the configuration (and writes the table's
		// schema item, as any first acquire of a process does).
		if i > 0 && (ev.RoundTrips != 0 || ev.WriteUnits != 0) {
			t.Fatalf("acquire %d: %d store calls with the configuration cached, want 0", i, ev.RoundTrips)
		}
		if le.FailedOpen() || le.Limits() != nil {
			t.Fatalf("lease: failed open %v, limits %v", le.FailedOpen(), le.Limits())
		}
		if err := le.Adjust(e.ctx, map[string]int64{"rpm": 10}); err != nil {
			t.Fatal(err)
		}
		if err := le.Rollback(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if it := e.bucketItem("vip", "gpt-4", 0); it != nil {
		t.Fatalf("admit mode wrote the bucket: %v", it)
	}
	// Another key on the same resource is limited as before.
	e.mustAcquire(l, req("other", rpm(1), map[string]int64{"rpm": 1}))
	e.mustReject(l, req("other", rpm(1), map[string]int64{"rpm": 1}))
}

// A revoked key in refuse mode gets an answer a client can tell from a
// rate limit: ErrDisabled, no *RateLimitedError (so no retry-after to
// sleep on, and Wait returns at once rather than retrying forever), the
// Outcome Disabled, and no write.
func TestModeRefuseIsNotARateLimit(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	if err := l.putScope(e.ctx, scope{Entity: "revoked", Resource: "gpt-4"}, nil, items.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	e.mustAcquire(l, req("warm", rpm(100), map[string]int64{"rpm": 1})) // the process's schema check
	r := req("revoked", rpm(100), map[string]int64{"rpm": 1})
	_, err := l.Acquire(e.ctx, r)
	var rl *RateLimitedError
	if !errors.Is(err, ErrDisabled) || errors.Is(err, ErrRateLimited) || errors.As(err, &rl) {
		t.Fatalf("refuse mode: %v, want ErrDisabled and no rate limit", err)
	}
	if !strings.Contains(err.Error(), `entity "revoked" on resource "gpt-4"`) {
		t.Fatalf("the error does not name the scope that refused: %v", err)
	}
	if ev := e.last(); ev.Outcome != Disabled || ev.Mode != "refuse" || ev.WriteUnits != 0 || ev.Outcome.String() != "disabled" {
		t.Fatalf("event %+v", ev)
	}
	if _, err := l.Wait(e.ctx, r); !errors.Is(err, ErrDisabled) {
		t.Fatalf("Wait: %v", err)
	}
	if it := e.bucketItem("revoked", "gpt-4", 0); it != nil {
		t.Fatalf("refuse mode wrote the bucket: %v", it)
	}
	// Bad input is still reported as such, not as disabled.
	if _, err := l.Acquire(e.ctx, req("revoked", rpm(100), map[string]int64{"nope": 1})); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad consume in a refused scope: %v", err)
	}
}

// The most specific scope with a mode decides, as for limits: a resource
// taken out of service refuses every key, except one an operator lets
// through on that resource; an entity's own mode beats the resource's.
// Clearing a mode (deleting it) restores enforcement.
func TestModePrecedence(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.putScope(e.ctx, scope{Resource: "gpt-4"}, rpm(5), items.ModeRefuse))
	must(l.putScope(e.ctx, scope{Entity: "tester", Resource: "gpt-4"}, nil, items.ModeAdmit))
	must(l.putScope(e.ctx, scope{Entity: "ops"}, nil, items.ModeAdmit))
	must(l.putScope(e.ctx, scope{Entity: "ops", Resource: "gpt-4"}, nil, items.ModeRefuse))
	one := map[string]int64{"rpm": 1}
	for entity, want := range map[string]error{"anyone": ErrDisabled, "tester": nil, "ops": ErrDisabled} {
		if _, err := l.Acquire(e.ctx, req(entity, nil, one)); !errors.Is(err, want) && err != want {
			t.Errorf("%s: %v, want %v", entity, err, want)
		}
	}
	// ops on another resource: its entity-wide admit.
	if _, err := l.Acquire(e.ctx, Request{Entity: "ops", Resource: "claude", Limits: rpm(1), Consume: one}); err != nil || e.last().Mode != "admit" {
		t.Fatalf("ops on claude: %v %+v", err, e.last())
	}
	must(l.putScope(e.ctx, scope{Resource: "gpt-4"}, rpm(5), ""))
	e.mustAcquire(l, req("anyone", nil, one))
	if ev := e.last(); ev.Mode != "" || ev.WriteUnits == 0 {
		t.Fatalf("enforcing again: %+v", ev)
	}
}

// A mode written by a newer library is not silently taken as enforcing:
// the acquire fails, naming it.
func TestModeUnknownIsAnError(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	if err := l.putScope(e.ctx, scope{Entity: "k"}, nil, "bypass"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(e.ctx, req("k", rpm(1), map[string]int64{"rpm": 1})); err == nil || !strings.Contains(err.Error(), `"bypass"`) {
		t.Fatalf("unknown stored mode: %v", err)
	}
}

// A limit tried in shadow on real traffic: twice its rate offered, it
// refuses nobody, and it is charged by exactly the acquires it would have
// admitted, so its "would refuse" count is what enforcing it would refuse
// (here every acquire past its burst of 3), not every acquire after the
// first refusal (as a bucket driven into debt would say). The enforcing
// limit beside it is charged by every acquire.
func TestShadowLimitNeverRefusesAndIsChargedAsIfEnforced(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	rps3 := PerMinute("rpm", 3)
	rps3.Shadow = true
	limits := []Limit{rps3, PerMinute("tpm", 1000)}
	one := map[string]int64{"rpm": 1, "tpm": 1}
	var would int
	for i := 0; i < 10; i++ {
		le := e.mustAcquire(l, req("k", limits, one))
		if ev := e.last(); len(ev.WouldRefuse) > 0 {
			would++
			if ev.WouldRefuse[0] != "rpm" || ev.Outcome != Admitted {
				t.Fatalf("acquire %d: %+v", i, ev)
			}
		}
		if i == 9 {
			st := le.Limits()
			if st[0].Limit.Name != "rpm" || !st[0].Limit.Shadow || st[0].Remaining != 0 {
				t.Fatalf("the lease's shadow limit: %+v", st[0])
			}
		}
	}
	if would != 7 {
		t.Fatalf("%d acquires would have been refused, want 7", would)
	}
	if got := e.consumed("k", "gpt-4", "rpm"); got != 3000 {
		t.Fatalf("rpm consumed %d millitokens, want the 3 it admitted", got)
	}
	if got := e.consumed("k", "gpt-4", "tpm"); got != 10_000 {
		t.Fatalf("tpm consumed %d millitokens, want all 10", got)
	}
	// Enforced: the same limit now refuses.
	rps3.Shadow = false
	e.mustReject(l, req("k", []Limit{rps3, PerMinute("tpm", 1000)}, one))
}

// A scope in shadow mode makes every limit of its acquires shadow, the
// cascade parent's too: an operator watches a whole key's limits without
// refusing it. A stored limit can be shadow on its own (the stored form
// keeps the flag).
func TestShadowModeAndStoredShadowLimit(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	if err := l.putEntity(e.ctx, items.Entity{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := l.putEntity(e.ctx, items.Entity{ID: "k", Parent: "p", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.putScope(e.ctx, scope{Entity: "p"}, rpm(1), ""); err != nil {
		t.Fatal(err)
	}
	if err := l.putScope(e.ctx, scope{Entity: "k"}, nil, items.ModeShadow); err != nil {
		t.Fatal(err)
	}
	one := map[string]int64{"rpm": 1}
	for i := 0; i < 3; i++ {
		e.mustAcquire(l, req("k", rpm(1), one))
	}
	if ev := e.last(); ev.Mode != "shadow" || len(ev.WouldRefuse) != 2 {
		t.Fatalf("shadow mode: %+v", ev)
	}
	shadowRPM := rpm(1)
	shadowRPM[0].Shadow = true
	if err := l.putScope(e.ctx, scope{Entity: "solo"}, shadowRPM, ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		e.mustAcquire(l, req("solo", rpm(5), one))
	}
	if ev := e.last(); ev.Mode != "" || len(ev.WouldRefuse) != 1 || ev.WouldRefuse[0] != "rpm" {
		t.Fatalf("a stored shadow limit: %+v", ev)
	}
}

// A gateway charges an estimate of tokens and adjusts it to the real
// count; its new tokens-per-minute limit is tried in shadow. An acquire
// the shadow limit would have refused is admitted without charging it,
// and its lease's corrections leave it alone too: had the limit
// enforced, the request would not have run, so nothing of it is the
// limit's. A lease whose acquire charged the shadow limit adjusts it like
// any limit.
func TestShadowLimitTheAcquireSkippedIsNotAdjusted(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	tpm := PerMinute("tpm", 10)
	tpm.Shadow = true
	limits := []Limit{tpm, PerMinute("rpm", 1000)}
	est := map[string]int64{"tpm": 8, "rpm": 1}
	first := e.mustAcquire(l, req("k", limits, est)) // tpm has the tokens: charged
	if err := first.Adjust(e.ctx, map[string]int64{"tpm": 1}); err != nil {
		t.Fatal(err)
	}
	skipped := e.mustAcquire(l, req("k", limits, est)) // 1 left: skipped
	if ev := e.last(); !slices.Equal(ev.WouldRefuse, []string{"tpm"}) {
		t.Fatalf("%+v: want tpm to have been skipped", ev)
	}
	if err := skipped.Adjust(e.ctx, map[string]int64{"tpm": 4, "rpm": 1}); err != nil {
		t.Fatal(err)
	}
	if got := e.consumed("k", "gpt-4", "tpm"); got != 9000 {
		t.Fatalf("tpm consumed %d millitokens, want 9000 (the first lease's 8 + 1; the skipping one's +4 left out)", got)
	}
	if got := e.consumed("k", "gpt-4", "rpm"); got != 3000 {
		t.Fatalf("rpm consumed %d millitokens, want 3000 (two acquires and the adjust)", got)
	}
	if err := skipped.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got, r := e.consumed("k", "gpt-4", "tpm"), e.consumed("k", "gpt-4", "rpm"); got != 9000 || r != 1000 {
		t.Fatalf("after the rollback tpm %d, rpm %d millitokens; want 9000 and 1000", got, r)
	}
}
