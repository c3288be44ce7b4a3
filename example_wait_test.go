package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/shardlimit/limiter"
)

// Wait queues instead of failing: refused, it sleeps for the retry-after
// and tries again, as long as the context allows.
func ExampleLimiter_Wait() {
	lim, clock := newLimiter() // on a manual clock: Wait's sleeps move it and take no wall time
	req := limiter.Request{Entity: "batch-job", Resource: "embeddings",
		Limits: []limiter.Limit{limiter.PerSecond("rps", 10)}, Consume: map[string]int64{"rps": 1}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := clock.Now()
	for range 15 {
		lease, err := lim.Wait(ctx, req) // the first 10 at once, then one every 100 ms
		if err != nil {
			fmt.Println(err) // the context's error, or the refusal when the deadline comes first
			return
		}
		_ = lease.Commit()
	}
	fmt.Println("15 requests in", clock.Now().Sub(start))
	// Output:
	// 15 requests in 500ms
}
