package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/store/memsim"
)

// A limiter over an in-memory store; in production use
// dynamo.New(client, "rate-limits") instead of memsim.New.
func newLimiter() (*limiter.Limiter, *memsim.ManualClock) {
	clock := memsim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := memsim.New(memsim.WithClock(clock))
	lim, err := limiter.New(st, limiter.WithNamespace("tenant-a"), limiter.WithClock(clock))
	if err != nil {
		panic(err)
	}
	return lim, clock
}

// Two limits on one bucket, charged together: 100 requests and 10,000 LLM
// tokens a minute per API key and model.
func Example() {
	lim, _ := newLimiter()
	ctx := context.Background()
	limits := []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10_000)}

	for i := 0; i < 3; i++ {
		_, err := lim.Acquire(ctx, limiter.Request{
			Entity:   "api-key-123",
			Resource: "gpt-4",
			Limits:   limits,
			Consume:  map[string]int64{"rpm": 1, "tpm": 4_000},
		})
		var rl *limiter.RateLimitedError
		switch {
		case errors.As(err, &rl):
			fmt.Printf("request %d: rate limited, retry after %v\n", i+1, rl.RetryAfter)
		case err != nil:
			fmt.Println("error:", err)
		default:
			fmt.Printf("request %d: admitted\n", i+1)
		}
	}
	// Output:
	// request 1: admitted
	// request 2: admitted
	// request 3: rate limited, retry after 12s
}

// LLM token reconciliation: charge an estimate before the call, then
// correct it with the real count. The bucket may go into debt, which later
// requests wait out; a refund never returns more than the lease took.
func ExampleLease_Adjust() {
	lim, _ := newLimiter()
	ctx := context.Background()
	limits := []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10_000)}
	const estimate = 500

	lease, err := lim.Acquire(ctx, limiter.Request{Entity: "api-key-123", Resource: "gpt-4", Limits: limits,
		Consume: map[string]int64{"rpm": 1, "tpm": estimate}})
	if err != nil {
		panic(err)
	}
	actual := int64(1_250) // what the model reported
	if err := lease.Adjust(ctx, map[string]int64{"tpm": actual - estimate}); err != nil {
		panic(err)
	}
	// Limits shows the settled charge, from the item the Adjust's write
	// returned (no extra call).
	for _, a := range lease.Limits() {
		fmt.Printf("%s: %d left\n", a.Limit.Name, a.Remaining)
	}
	if err := lease.Commit(); err != nil {
		panic(err)
	}
	// Output:
	// rpm: 99 left
	// tpm: 8750 left
}
