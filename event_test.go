package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store/memsim"
)

// Event.Duration is the call's time by the limiter's clock: here every
// store call takes 5 ms.
func TestEventDuration(t *testing.T) {
	var e *env
	e = newEnv(t, memsim.WithHook(func(context.Context, memsim.Op) { e.clock.Add(5 * time.Millisecond) }))
	l := e.limiter()
	le := e.mustAcquire(l, req("k", rpm(10), one))
	if ev := e.last(); ev.Duration != time.Duration(ev.RoundTrips)*5*time.Millisecond || ev.Duration == 0 {
		t.Fatalf("acquire: %v for %d round trips", ev.Duration, ev.RoundTrips)
	}
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if ev := e.last(); ev.Op != "rollback" || ev.Duration != 5*time.Millisecond {
		t.Fatalf("rollback: %+v", ev)
	}
}
