package limiter

import (
	"context"
	"errors"
	"testing"
	"time"
)

// nowOnly hides a clock's Sleep: a clock that can only read the time.
type nowOnly struct{ c Clock }

func (n nowOnly) Now() time.Time { return n.c.Now() }

// cancelOnSleep is a Sleeper whose sleep is interrupted: it cancels the
// context it is given, as a caller giving up would, and reports it.
type cancelOnSleep struct {
	Clock
	cancel context.CancelFunc
}

func (c cancelOnSleep) Sleep(ctx context.Context, d time.Duration) error {
	c.cancel()
	return ctx.Err()
}

// Wait sleeps for the refusal's retry-after on the limiter's clock (a
// manual clock: it moves by the sleep) and is admitted on the next try.
func TestWaitSleepsTheRetryAfter(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	r := req("k", []Limit{PerSecond("rps", 2)}, map[string]int64{"rps": 1})
	e.mustAcquire(l, r)
	e.mustAcquire(l, r)
	_, err := l.Acquire(e.ctx, r)
	var rl *RateLimitedError
	if !errors.As(err, &rl) {
		t.Fatalf("third acquire: %v, want a refusal", err)
	}
	start, n := e.clock.Now(), len(e.events)
	le, err := l.Wait(e.ctx, r)
	if err != nil || le == nil {
		t.Fatalf("Wait: %v", err)
	}
	if waited := e.clock.Now().Sub(start); waited != rl.RetryAfter {
		t.Errorf("Wait slept %v, want the retry-after %v", waited, rl.RetryAfter)
	}
	if tries := len(e.events) - n; tries != 2 {
		t.Errorf("Wait made %d acquires, want 2 (refused, then admitted)", tries)
	}
}

// With a deadline that comes before the retry-after has passed, Wait
// returns the refusal at once, without sleeping.
func TestWaitReturnsTheRefusalWhenTheDeadlineComesFirst(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	r := req("k", rpm(1), one)
	e.mustAcquire(l, r)
	ctx, cancel := context.WithDeadline(e.ctx, time.Now().Add(30*time.Second)) // the retry-after is about a minute
	defer cancel()
	start, n := e.clock.Now(), len(e.events)
	le, err := l.Wait(ctx, r)
	var rl *RateLimitedError
	if le != nil || !errors.As(err, &rl) || rl.RetryAfter <= 30*time.Second {
		t.Fatalf("Wait: lease %v, err %v; want the refusal (retry-after over 30 s)", le, err)
	}
	if !e.clock.Now().Equal(start) || len(e.events)-n != 1 {
		t.Errorf("Wait slept %v and made %d acquires, want no sleep and 1", e.clock.Now().Sub(start), len(e.events)-n)
	}
}

// A context that ends while Wait sleeps: the context's error, no lease.
func TestWaitEndsWithItsContext(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	l := e.limiter(WithClock(cancelOnSleep{Clock: e.clock, cancel: cancel}))
	r := req("k", rpm(1), one)
	e.mustAcquire(l, r)
	le, err := l.Wait(ctx, r)
	if le != nil || !errors.Is(err, context.Canceled) || errors.Is(err, ErrRateLimited) {
		t.Fatalf("Wait: lease %v, err %v; want context.Canceled alone", le, err)
	}
}

// A clock without Sleep: Wait sleeps on a wall-clock timer, which the
// context ends (here cancelled by the observer as the refusal is told).
func TestWaitOnAClockWithoutSleep(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	l := e.limiter(WithClock(nowOnly{e.clock}), WithObserver(ObserverFunc(func(ev Event) {
		if ev.Outcome == Rejected {
			cancel()
		}
	})))
	r := req("k", rpm(1), one)
	e.mustAcquire(l, r)
	le, err := l.Wait(ctx, r)
	if le != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: lease %v, err %v; want context.Canceled", le, err)
	}
}

// Errors other than a refusal are Acquire's, returned at once.
func TestWaitReturnsOtherErrors(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	start := e.clock.Now()
	if _, err := l.Wait(e.ctx, req("", rpm(1), one)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad entity: %v", err)
	}
	if !e.clock.Now().Equal(start) {
		t.Fatal("Wait slept on bad input")
	}
}
