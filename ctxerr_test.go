package limiter

import (
	"context"
	"errors"
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// contextRule checks the one rule for a call whose context is done: the
// error is the context's (errors.Is), never ErrUnavailable, and
// store.OutcomeUnknown says whether a write may have applied.
func contextRule(t *testing.T, what string, err error, want error, unknown bool) {
	t.Helper()
	if !errors.Is(err, want) || errors.Is(err, ErrUnavailable) || store.OutcomeUnknown(err) != unknown {
		t.Errorf("%s: %v; want errors.Is %v, not ErrUnavailable, OutcomeUnknown %v", what, err, want, unknown)
	}
}

// A context done before the call: every method returns the context's
// error, changes nothing, and the lease stays usable.
func TestDoneContextIsTheContextsError(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	le := e.mustAcquire(l, req("k1", rpm(10), one))
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	before := e.st.Totals().Consumed
	for name, call := range ctxCalls(l, le) {
		if name != "Close" { // (nothing to return: no reservations)
			contextRule(t, name, call(ctx), context.Canceled, false)
		}
	}
	if c := e.st.Totals().Consumed; c != before {
		t.Errorf("capacity consumed with a done context: %+v, then %+v", before, c)
	}
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatalf("Rollback after the cancelled calls: %v (the lease should still be usable)", err)
	}
}

// A context that ends while a write is in flight, whose answer is then
// lost: Acquire and Adjust return the same kind of error, the context's,
// with an unknown outcome.
func TestContextEndingDuringAWrite(t *testing.T) {
	pk := keys.Bucket{Namespace: "ns", Entity: "k1", Resource: "gpt-4"}.PK()
	var cancel context.CancelFunc
	armed := false
	hook := func(_ context.Context, op memsim.Op) {
		if armed && op.Kind == memsim.OpUpdate && op.Keys[0].PK == pk {
			cancel() // the write is in flight: the caller gives up
		}
	}
	lost := memsim.Func("lost", func(op memsim.Op) memsim.Decision {
		if armed && op.Kind == memsim.OpUpdate && op.Keys[0].PK == pk {
			return memsim.Decision{Fault: memsim.FaultLostResponse}
		}
		return memsim.Decision{}
	})
	e := newEnv(t, memsim.WithHook(hook), memsim.WithFaults(lost))
	l := e.limiter()
	le := e.mustAcquire(l, req("k1", rpm(10), one))
	try := func(call func(context.Context) error) error {
		ctx, stop := context.WithCancel(e.ctx)
		defer stop()
		cancel, armed = stop, true
		defer func() { armed = false }()
		return call(ctx)
	}
	err := try(func(ctx context.Context) error { _, err := l.Acquire(ctx, req("k1", rpm(10), one)); return err })
	contextRule(t, "Acquire", err, context.Canceled, true)
	err = try(func(ctx context.Context) error { return le.Adjust(ctx, map[string]int64{"rpm": 1}) })
	contextRule(t, "Adjust", err, context.Canceled, true)
}
