package limiter

import (
	"errors"
	"sync"

	"github.com/shardlimit/limiter/store"
)

// The circuit breaker: after breakerFailures unavailable answers in a row,
// no store call for breakerOpenMs (jittered between half and one and a
// half times, so that a fleet of processes does not probe in step), then
// one call probes; its success closes the breaker, its failure opens it
// again. Throttling does not count: it is one partition's load, not the
// store being down, and the write engine spreads or doubles on it.
const (
	breakerFailures = 5
	breakerOpenMs   = 1000
)

type breaker struct {
	mu        sync.Mutex
	fails     int
	openUntil int64 // ms; 0: closed
	probing   bool
}

// allow reports whether a call may go to the store now: clock returns
// the time (Unix ms), read only when the breaker is open.
func (b *breaker) allow(clock func() int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openUntil == 0 {
		return true
	}
	if clock() < b.openUntil || b.probing {
		return false
	}
	b.probing = true // half open: this call probes
	return true
}

// changes reports whether recording the outcome err would change the
// breaker: false for a success (or any error but unavailability) while
// it is closed with no failure counted, the common case, which record
// need not be called for.
func (b *breaker) changes(err error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.succeeded(err) || b.fails != 0 || b.openUntil != 0 || b.probing
}

func (b *breaker) succeeded(err error) bool {
	return err == nil || !errors.Is(err, store.ErrUnavailable)
}

// record takes the outcome of a call that went to the store; jitter is
// uniform in [0, 1).
func (b *breaker) record(err error, now int64, jitter float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.succeeded(err) {
		b.fails, b.openUntil, b.probing = 0, 0, false
		return
	}
	b.fails++
	if b.probing || b.fails >= breakerFailures {
		b.openUntil = now + int64(float64(breakerOpenMs)*(0.5+jitter))
		b.probing = false
	}
}
