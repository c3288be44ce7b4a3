package limiter

import (
	"math/rand/v2"
	"testing"
)

// panicSource is a caller's random source that fails.
type panicSource struct{}

func (panicSource) Uint64() uint64 { panic("the source failed") }

// A caller's source (WithRand) that panics leaves the lock free: a caller
// that recovers (as net/http does for a handler) must not find every
// later acquire blocked.
func TestARandThatPanicsLeavesItsLockFree(t *testing.T) {
	l := &lockedRand{r: rand.New(panicSource{})}
	for _, draw := range []func(){func() { l.IntN(4) }, func() { l.Float64() }} {
		func() {
			defer func() { _ = recover() }()
			draw()
		}()
		if !l.mu.TryLock() {
			t.Fatal("the lock is held after a draw panicked")
		}
		l.mu.Unlock()
	}
}
