package limiter

import (
	"context"
	"errors"
	"time"
)

// Sleeper is a Clock that can also wait. [Limiter.Wait] sleeps with the
// limiter's clock when it is a Sleeper, and on a timer of the wall clock
// otherwise. The system clock (the default) is one; so is
// memsim.ManualClock, whose Sleep moves the clock forward by d and returns
// at once, so that Wait in a test takes no wall time.
type Sleeper interface {
	// Sleep returns after d has passed on the clock (at once when d <= 0),
	// or with ctx's error as soon as ctx is done.
	Sleep(ctx context.Context, d time.Duration) error
}

// Sleep waits d on a timer of the wall clock, or until ctx is done.
func (systemClock) Sleep(ctx context.Context, d time.Duration) error { return sleepWall(ctx, d) }

func sleepWall(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d): // (collected when ctx wins: Go 1.23 and later)
		return nil
	}
}

// minWait is the least Wait sleeps between two tries: a bucket's time
// is kept in milliseconds.
const minWait = time.Millisecond

// Wait is Acquire that waits out refusals, for callers that would rather
// queue than fail: when a limit lacks the tokens, it sleeps for the
// refusal's RetryAfter (at least 1 ms) and tries again, until the request
// is admitted, Acquire returns another error, or ctx is done. Each try is
// an Acquire, with its cost and its Event for the observer; a sleep makes
// no store call.
//
// It returns the refusal (a *RateLimitedError) at once, without sleeping,
// when ctx has a deadline that comes before the retry-after has passed:
// the wait could not end in an admission. When ctx is done while it
// sleeps, it returns the context's error (errors.Is(err,
// context.Canceled) or context.DeadlineExceeded), never a lease. Other
// errors are Acquire's, returned as they are: a *ValidationError, an
// *UnavailableError, and under fail-open a lease whose FailedOpen is true.
//
// Time is the limiter's clock (WithClock): Wait sleeps with its Sleep
// method when it has one (see [Sleeper]), else on a wall-clock timer. The
// deadline is the context's, on the wall clock. The retry-after assumes no
// one else takes the tokens meanwhile: under contention a Wait may sleep
// several times, and callers waiting on one bucket are not served in
// order.
func (l *Limiter) Wait(ctx context.Context, req Request) (*Lease, error) {
	for {
		lease, err := l.Acquire(ctx, req)
		var rl *RateLimitedError
		if !errors.As(err, &rl) {
			return lease, err
		}
		d := max(rl.RetryAfter, minWait)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
			return nil, err
		}
		if err := l.sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

// sleep waits d on the limiter's clock (see Sleeper).
func (l *Limiter) sleep(ctx context.Context, d time.Duration) error {
	if s, ok := l.cfg.clock.(Sleeper); ok {
		return s.Sleep(ctx, d)
	}
	return sleepWall(ctx, d)
}
