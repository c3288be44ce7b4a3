package limiter

import (
	"context"
	"errors"
	"testing"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// When the store fails, fail-closed (the default) returns an
// UnavailableError wrapping the store's error; fail-open admits with a
// no-op lease and tells the observer. A rate limit is never failed open.
func TestUnavailabilityPolicy(t *testing.T) {
	e := newEnv(t, memsim.WithFaults(memsim.OnOps([]memsim.OpKind{memsim.OpUpdate, memsim.OpPut}, memsim.Always(memsim.Fault5xxBeforeApply))))
	closed := e.limiter()
	_, err := closed.Acquire(e.ctx, req("k1", rpm(10), one))
	var ue *UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("fail-closed: %v, want an UnavailableError wrapping the store's", err)
	}
	if e.last().Outcome != Unavailable {
		t.Fatalf("observer saw %v", e.last().Outcome)
	}
	open := e.limiter(WithPolicy(FailOpen))
	le, err := open.Acquire(e.ctx, req("k1", rpm(10), one))
	if err != nil || !le.FailedOpen() || e.last().Path != PathFailOpen {
		t.Fatalf("fail-open: %v %+v", err, e.last())
	}
	if le.Adjust(e.ctx, map[string]int64{"rpm": 5}) != nil || le.Rollback(e.ctx) != nil {
		t.Fatal("a fail-open lease's Adjust and Rollback are no-ops")
	}
	r := req("k1", rpm(10), one)
	r.Policy = FailOpen
	if le, err := closed.Acquire(e.ctx, r); err != nil || !le.FailedOpen() {
		t.Fatalf("per-call fail-open: %v", err)
	}
}

func TestRateLimitIsNeverFailedOpen(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithPolicy(FailOpen))
	e.mustAcquire(l, req("k1", rpm(1), one))
	e.mustReject(l, req("k1", rpm(1), one))
	if _, err := l.Acquire(e.ctx, req("k1", rpm(1), map[string]int64{"nope": 1})); !errors.Is(err, ErrInvalid) {
		t.Fatalf("validation under fail-open: %v", err)
	}
}

// Only a store that cannot answer is failed open: an error that says the
// configuration is wrong (a missing table, a denied permission) must
// surface, or a fail-open limiter would silently admit everything.
func TestConfigurationErrorsAreNeverFailedOpen(t *testing.T) {
	e := newEnv(t)
	denied := errors.New("AccessDeniedException: not authorized to perform dynamodb:BatchGetItem")
	l, err := New(deniedStore{e.st, denied}, WithNamespace("ns"), WithClock(e.clock), WithPolicy(FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	le, err := l.Acquire(e.ctx, req("k1", rpm(10), one))
	if !errors.Is(err, denied) || le != nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Acquire with a denied permission = %v, %v; want the error itself", le, err)
	}
}

type deniedStore struct {
	*memsim.Store
	err error
}

func (d deniedStore) BatchGet(context.Context, store.BatchGetInput) (store.BatchGetOutput, error) {
	return store.BatchGetOutput{}, d.err
}
