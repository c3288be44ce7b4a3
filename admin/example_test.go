package admin_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/store/memsim"
)

// Cascade: every acquire of a key also charges its project, all or
// nothing. The project has a smaller limit stored for it.
func ExampleAdmin_PutEntity() {
	clock := memsim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := memsim.New(memsim.WithClock(clock))
	lim, err := limiter.New(st, limiter.WithNamespace("tenant-a"), limiter.WithClock(clock))
	if err != nil {
		panic(err)
	}
	adm, err := admin.New(st, admin.WithNamespace("tenant-a"), admin.WithClock(clock), admin.WithLimiter(lim))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(adm.PutEntity(ctx, admin.Entity{ID: "project-1"}))
	must(adm.PutEntity(ctx, admin.Entity{ID: "key-1", Parent: "project-1", Cascade: true}))
	must(adm.PutLimits(ctx, admin.Scope{Entity: "project-1"}, []limiter.Limit{limiter.PerMinute("rpm", 2)}))

	for i := 0; i < 3; i++ {
		_, err := lim.Acquire(ctx, limiter.Request{Entity: "key-1", Resource: "gpt-4",
			Limits: []limiter.Limit{limiter.PerMinute("rpm", 100)}, Consume: map[string]int64{"rpm": 1}})
		var rl *limiter.RateLimitedError
		if errors.As(err, &rl) {
			fmt.Printf("request %d: limited by %s (parent: %v)\n", i+1, rl.Entity, rl.Parent)
			continue
		}
		fmt.Printf("request %d: admitted\n", i+1)
	}
	av, _ := lim.Status(ctx, "key-1", "gpt-4", []limiter.Limit{limiter.PerMinute("rpm", 100)})
	fmt.Println("key-1 rpm left:", av[0].Remaining)
	// Output:
	// request 1: admitted
	// request 2: admitted
	// request 3: limited by project-1 (parent: true)
	// key-1 rpm left: 98
}
