package limiter

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store/memsim"
)

// A hundred writers, each its own Limiter (as a hundred servers would be),
// race for one bucket of 1,000 tokens that refills one token a year: over
// the simulated seconds of the race it refills none.
// They admit exactly the burst, no more (no lost update) and no fewer (no
// token left behind by a refusal after a lost race), and every admitted
// token is counted once in the bucket's consumption. The writers take
// turns with the scheduler, so the interleaving differs from run to run;
// the count never does.
func TestAHundredWritersAdmitExactlyTheBurst(t *testing.T) {
	const writers, burst = 100, 1000
	e := newEnv(t)
	limits := []Limit{{Name: "tokens", Capacity: burst, Refill: 1, Period: 366 * 24 * time.Hour}}
	one := map[string]int64{"tokens": 1}

	var admitted, attempts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		l, err := New(e.st, WithNamespace("ns"), WithClock(e.clock), WithRand(rand.New(rand.NewPCG(uint64(w), 7))))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each writer asks until the store itself says the bucket is
			// empty three times; a refusal from its own memory or after a
			// lost race is asked again after a little time has passed.
			for storeRefusals := 0; storeRefusals < 3; {
				attempts.Add(1)
				_, err := l.Acquire(e.ctx, req("tenant", limits, one))
				e.clock.Add(time.Millisecond)
				var rl *RateLimitedError
				switch {
				case err == nil:
					admitted.Add(1)
					storeRefusals = 0
				case errors.As(err, &rl):
					if !rl.Local && e.tokens("tenant", "gpt-4", "tokens") < 1000 {
						storeRefusals++
					}
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := admitted.Load(); got != burst {
		t.Fatalf("%d writers admitted %d from a bucket of %d (%d attempts)", writers, got, burst, attempts.Load())
	}
	if got := e.consumed("tenant", "gpt-4", "tokens"); got != burst*1000 {
		t.Fatalf("the bucket counts %d millitokens consumed, want %d", got, burst*1000)
	}
	tot := e.st.Totals()
	writes := tot.Ops[memsim.OpUpdate].Requests + tot.Ops[memsim.OpPut].Requests
	t.Logf("%d attempts, %d writes (%.2f per admitted token), %d failed conditions, simulated %v",
		attempts.Load(), writes, float64(writes)/burst, tot.ConditionFailures, e.clock.Now().Sub(t0))
}
