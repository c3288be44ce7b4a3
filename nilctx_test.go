package limiter

import (
	"context"
	"errors"
	"testing"
)

// calls are the limiter's methods that take a context, each with input
// that is otherwise valid.
func ctxCalls(l *Limiter, le *Lease) map[string]func(context.Context) error {
	r := req("a", rpm(10), one)
	return map[string]func(context.Context) error{
		"Acquire":  func(ctx context.Context) error { _, err := l.Acquire(ctx, r); return err },
		"Wait":     func(ctx context.Context) error { _, err := l.Wait(ctx, r); return err },
		"Status":   func(ctx context.Context) error { _, err := l.Status(ctx, "a", "", rpm(10)); return err },
		"Close":    func(ctx context.Context) error { return l.Close(ctx) },
		"Adjust":   func(ctx context.Context) error { return le.Adjust(ctx, map[string]int64{"rpm": 1}) },
		"Rollback": func(ctx context.Context) error { return le.Rollback(ctx) },
	}
}

// A nil context is refused with a ValidationError naming ctx, before any
// store call, by every method that takes one; the lease stays usable.
func TestNilContextIsAValidationError(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithReservations())
	le := e.mustAcquire(l, req("a", rpm(10), one))
	var nilCtx context.Context
	before := e.st.Totals().Requests
	for name, call := range ctxCalls(l, le) {
		var ve *ValidationError
		if err := call(nilCtx); !errors.As(err, &ve) || ve.Field != "ctx" {
			t.Errorf("%s(nil ctx): got %v, want a ValidationError naming ctx", name, err)
		}
	}
	if n := e.st.Totals().Requests - before; n != 0 {
		t.Errorf("%d store calls with a nil ctx, want 0", n)
	}
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatalf("the lease after nil-ctx calls: %v", err)
	}
}

// A nil or zero Limiter is refused with a ValidationError naming Limiter
// by every method that takes a context (Close has nothing to return).
func TestNilLimiterIsAValidationError(t *testing.T) {
	for _, l := range []*Limiter{nil, {}} {
		for name, call := range ctxCalls(l, nil) {
			if name == "Close" || name == "Adjust" || name == "Rollback" {
				continue
			}
			var ve *ValidationError
			if err := call(context.Background()); !errors.As(err, &ve) || ve.Field != "Limiter" {
				t.Errorf("%s on %#v: got %v, want a ValidationError naming Limiter", name, l, err)
			}
		}
	}
}
