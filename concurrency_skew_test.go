package limiter

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// skewed is a process's clock: the true clock plus its offset.
type skewed struct {
	e      *env
	offset time.Duration
}

func (c skewed) Now() time.Time { return c.e.clock.Now().Add(c.offset) }

// How clock skew moves a cap's bounds. A holder acquires the one slot of
// a cap (TTL 4 s, epochs E of 1 s) and dies; another process, whose clock
// differs from the holder's by skew, asks for the slot every 10 ms of true
// time until it gets it. With agreeing clocks the slot comes back between
// TTL and TTL + E after the acquire (by where in its epoch it fell); the
// holder's epoch is read on its clock and retired on the other's, so the
// whole window moves by the skew: a process whose clock is behind the
// holder's by s waits s longer, one ahead of it by s gets the slot s
// sooner, before the lease is TTL old (docs/limiter.md, "A holder that
// dies"). Measured over ten acquire instants across an epoch, for each
// skew (go test -run TestCapSlotBackUnderClockSkew -v .).
func TestCapSlotBackUnderClockSkew(t *testing.T) {
	const ttl, epoch, step = 4 * time.Second, time.Second, 10 * time.Millisecond
	one := Limit{Name: "inflight", Capacity: 1, Window: "concurrent", TTL: ttl}
	ask := req("k1", []Limit{one}, map[string]int64{"inflight": 1})
	for _, skew := range []time.Duration{-time.Second, -250 * time.Millisecond, 0, 250 * time.Millisecond, time.Second} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			lo, hi := time.Duration(1<<62), time.Duration(0)
			for phase := time.Duration(0); phase < epoch; phase += epoch / 10 {
				e := newEnv(t)
				e.clock.Add(phase + 5*time.Millisecond)
				holder := e.limiter(WithClock(skewed{e, skew}))
				other := e.limiter(WithClock(skewed{e, 0}))
				start := e.clock.Now()
				e.mustAcquire(holder, ask) // and dies: no Commit
				var back time.Duration
				for back == 0 {
					e.clock.Add(step)
					le, err := other.Acquire(e.ctx, ask)
					var rl *RateLimitedError
					switch {
					case err == nil:
						back = e.clock.Now().Sub(start)
						_ = le.Commit()
					case !errors.As(err, &rl):
						t.Fatal(err)
					case e.clock.Now().Sub(start) > 2*ttl+2*epoch:
						t.Fatalf("the dead holder's slot is not back %v after its acquire", e.clock.Now().Sub(start))
					}
				}
				lo, hi = min(lo, back), max(hi, back)
			}
			// The documented window, [TTL, TTL + E], moved by the skew
			// (one 10 ms step of polling on top).
			if lo < ttl+skew || hi > ttl+epoch+skew+step {
				t.Errorf("the slot came back %v to %v after its acquire; want within [%v, %v] moved by the skew %v", lo, hi, ttl, ttl+epoch, skew)
			}
			t.Logf("holder's clock %v from the other's: the slot back %v to %v after its acquire (TTL %v, E %v)", skew, lo, hi, ttl, epoch)
		})
	}
}
