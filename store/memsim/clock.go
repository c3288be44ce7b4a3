package memsim

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Clock is memsim's only source of time: partition refill, stream record
// times, client-token expiry and the times handed to injectors all come
// from it. github.com/benbjohnson/clock's Clock satisfies it, as does
// [*ManualClock].
type Clock interface {
	// Now returns the current time. It may go backwards (see
	// ManualClock.Set).
	Now() time.Time
}

// wallClock is the default [Clock]: the time of day.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Epoch returns 2026-01-01T00:00:00Z, where the simulator's virtual time
// starts and a natural start for a [ManualClock]. Fault plans print their
// windows as offsets from it (see [During]).
func Epoch() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// ManualClock is a [Clock] that moves only when told to. It never sleeps
// and never reads the wall clock. It is safe for concurrent use. Times are
// kept with nanosecond precision, in UTC. The zero ManualClock stands at
// the Unix epoch; a nil *ManualClock reads the same and never moves.
type ManualClock struct {
	ns atomic.Int64 // Unix nanoseconds
}

// NewManualClock returns a clock standing at t.
func NewManualClock(t time.Time) *ManualClock {
	c := &ManualClock{}
	c.ns.Store(t.UnixNano())
	return c
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	if c == nil {
		return time.Unix(0, 0).UTC()
	}
	return time.Unix(0, c.ns.Load()).UTC()
}

// Set moves the clock to t (backwards too; memsim's partitions then simply
// refill nothing until the clock passes the latest time they saw).
func (c *ManualClock) Set(t time.Time) {
	if c != nil {
		c.ns.Store(t.UnixNano())
	}
}

// Add moves the clock forward by d (backward for a negative d) and returns
// the new time.
func (c *ManualClock) Add(d time.Duration) time.Time {
	if c == nil {
		return c.Now()
	}
	return time.Unix(0, c.ns.Add(int64(d))).UTC()
}

// Sleep moves the clock forward by d and returns at once: a wait in
// virtual time, taking no wall time (limiter.Wait sleeps with it when the
// limiter reads this clock). It moves nothing and returns ctx's error
// when ctx is done, and does nothing when d <= 0. A nil ctx is an error.
func (c *ManualClock) Sleep(ctx context.Context, d time.Duration) error {
	if ctx == nil {
		return errors.New("memsim: ManualClock.Sleep: ctx is nil")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		c.Add(d)
	}
	return nil
}
