package limiter_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/store/memsim"
)

// Testing an application deterministically: memsim and the limiter read
// one manual clock, which moves only when the test moves it (clk.Add), so
// refills, retry-afters and Wait take no wall time and give the same
// answers on every run.
func Example_testing() {
	clk := memsim.NewManualClock(memsim.Epoch())
	lim, err := limiter.New(memsim.New(memsim.WithClock(clk)), limiter.WithClock(clk))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	req := limiter.Request{Entity: "key-1", Resource: "gpt-4",
		Limits: []limiter.Limit{limiter.PerMinute("rpm", 2)}, Consume: map[string]int64{"rpm": 1}}
	acquire := func() {
		lease, err := lim.Acquire(ctx, req)
		var rl *limiter.RateLimitedError
		switch {
		case errors.As(err, &rl):
			fmt.Println("refused, retry after", rl.RetryAfter)
		case err != nil:
			panic(err)
		default:
			fmt.Println("admitted")
			_ = lease.Commit() // keep the charge
		}
	}
	acquire()
	acquire()
	acquire()
	clk.Add(limiter.PerMinute("rpm", 2).Period / 2) // a token refills every 30 s
	acquire()
	// Wait sleeps on the limiter's clock: a manual clock moves by the sleep.
	start := clk.Now()
	if _, err := lim.Wait(ctx, req); err != nil {
		panic(err)
	}
	fmt.Println("Wait admitted after", clk.Now().Sub(start))
	// Output:
	// admitted
	// admitted
	// refused, retry after 30s
	// admitted
	// Wait admitted after 30s
}
