package limiter

import (
	"testing"
	"time"

	"github.com/shardlimit/limiter/store/memsim"
)

// A memsim made without a clock and a limiter made without one read the
// same clock, the wall clock: the store's partitions refill as the
// limiter's buckets do. (On a memsim whose clock stood still, a hot key
// was served one second of partition capacity and then answered
// unavailable for good.)
func TestMemsimDefaultClockIsTheLimiters(t *testing.T) {
	st := memsim.New()
	l, err := New(st)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	lim, mem := l.cfg.clock.Now(), st.Clock().Now()
	after := time.Now()
	for _, got := range []time.Time{lim, mem} {
		if got.Before(before) || got.After(after) {
			t.Fatalf("clocks read %v (limiter) and %v (memsim), want both in [%v, %v]", lim, mem, before, after)
		}
	}
}
