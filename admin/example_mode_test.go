package admin_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/store/memsim"
)

// An operator rolls a daily cap out on a model: first in shadow (nothing
// refused, the would-refuse counted), then enforced; and revokes a key.
func ExampleAdmin_SetMode() {
	ctx := admin.ContextWithPrincipal(context.Background(), "alice")
	clk := memsim.NewManualClock(memsim.Epoch())
	st := memsim.New(memsim.WithClock(clk))
	var would []string
	lim, err := limiter.New(st, limiter.WithClock(clk), limiter.WithObserver(limiter.ObserverFunc(func(e limiter.Event) {
		would = append(would, e.WouldRefuse...)
	})))
	if err != nil {
		panic(err)
	}
	adm, err := admin.New(st, admin.WithClock(clk), admin.WithLimiter(lim))
	if err != nil {
		panic(err)
	}
	daily, _ := limiter.ParseLimit("rpd:2/day:shadow")
	if err := adm.PutLimits(ctx, admin.Scope{Resource: "gpt-4"}, []limiter.Limit{daily}); err != nil {
		panic(err)
	}
	req := limiter.Request{Entity: "key-1", Resource: "gpt-4", Consume: map[string]int64{"rpd": 1}}
	for i := 0; i < 3; i++ {
		_, err := lim.Acquire(ctx, req)
		fmt.Println("shadow:", err)
	}
	fmt.Println("would refuse:", would)

	daily.Shadow = false
	if err := adm.PutLimits(ctx, admin.Scope{Resource: "gpt-4"}, []limiter.Limit{daily}); err != nil {
		panic(err)
	}
	_, err = lim.Acquire(ctx, req)
	fmt.Println("enforced:", errors.Is(err, limiter.ErrRateLimited))

	if err := adm.SetMode(ctx, admin.Scope{Entity: "key-1"}, admin.ModeRefuse); err != nil {
		panic(err)
	}
	_, err = lim.Acquire(ctx, req)
	fmt.Println("revoked:", errors.Is(err, limiter.ErrDisabled), errors.Is(err, limiter.ErrRateLimited))
	// Output:
	// shadow: <nil>
	// shadow: <nil>
	// shadow: <nil>
	// would refuse: [rpd]
	// enforced: true
	// revoked: true false
}
