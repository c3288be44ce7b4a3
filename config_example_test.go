package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/store/memsim"
)

// Plain per-key limiting: the limits are set once, requests name only the
// key and what to consume, and the resource is DefaultResource. A limit
// stored for one key overrides the default of the same name and leaves
// the others in force.
func ExampleWithDefaultLimits() {
	clock := memsim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := memsim.New(memsim.WithClock(clock))
	lim, err := limiter.New(st, limiter.WithClock(clock),
		limiter.WithDefaultLimits(limiter.PerMinute("rpm", 100), limiter.PerDay("rpd", 1000)))
	if err != nil {
		panic(err)
	}
	adm, err := admin.New(st, admin.WithLimiter(lim))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	// A key with a higher per-minute limit; its daily limit stays 1000.
	if err := adm.PutLimits(ctx, admin.Scope{Entity: "key-vip"}, []limiter.Limit{limiter.PerMinute("rpm", 500)}); err != nil {
		panic(err)
	}
	for _, key := range []string{"key-1", "key-vip"} {
		if _, err := lim.Acquire(ctx, limiter.Request{Entity: key, Consume: map[string]int64{"rpm": 1, "rpd": 1}}); err != nil {
			panic(err)
		}
		av, err := lim.Status(ctx, key, "", nil)
		if err != nil {
			panic(err)
		}
		for _, a := range av {
			fmt.Printf("%s %s: %d of %d left\n", key, a.Limit.Name, a.Remaining, a.Limit.Capacity)
		}
	}
	// Output:
	// key-1 rpd: 999 of 1000 left
	// key-1 rpm: 99 of 100 left
	// key-vip rpd: 999 of 1000 left
	// key-vip rpm: 499 of 500 left
}
