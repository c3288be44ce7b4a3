package admin_test

import (
	"context"
	"fmt"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/store/memsim"
)

// An incident charged a tenant 80 requests it never got: an operator gives
// them back. A grant beyond the burst stops at the burst.
func ExampleAdmin_TopUp() {
	ctx := admin.ContextWithPrincipal(context.Background(), "alice")
	clk := memsim.NewManualClock(memsim.Epoch()) // no refill while the example runs
	st := memsim.New(memsim.WithClock(clk))
	lim, err := limiter.New(st, limiter.WithClock(clk))
	if err != nil {
		panic(err)
	}
	limits := []limiter.Limit{limiter.PerHour("rph", 100)}
	if _, err := lim.Acquire(ctx, limiter.Request{Entity: "key-1", Resource: "gpt-4", Limits: limits,
		Consume: map[string]int64{"rph": 90}}); err != nil {
		panic(err)
	}
	adm, err := admin.New(st, admin.WithClock(clk), admin.WithLimiter(lim))
	if err != nil {
		panic(err)
	}
	for _, n := range []int64{80, 80} {
		rec, err := adm.TopUp(ctx, "key-1", "gpt-4", map[string]int64{"rph": n})
		if err != nil {
			panic(err)
		}
		st, err := lim.Status(ctx, "key-1", "gpt-4", limits)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s by %s: rph +%d over %d shard(s); available %d of %d\n",
			rec.Action, rec.Principal, rec.After.Tokens["rph"], rec.After.Shards, st[0].Remaining, st[0].Limit.Burst)
	}
	// Output:
	// bucket.top-up by alice: rph +80 over 1 shard(s); available 90 of 100
	// bucket.top-up by alice: rph +80 over 1 shard(s); available 100 of 100
}
