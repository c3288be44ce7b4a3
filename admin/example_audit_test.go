package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/shardlimit/limiter"
)

// Configuration changes are audited: who changed what, from what to what.
func ExampleLimiter_Audit() {
	lim, clock := newLimiter()
	ctx := limiter.ContextWithPrincipal(context.Background(), "alice")
	key1 := limiter.Scope{Entity: "key-1"}
	_ = lim.PutLimits(ctx, key1, []limiter.Limit{limiter.PerMinute("rpm", 100)})
	clock.Add(time.Minute)
	_ = lim.PutLimits(limiter.ContextWithPrincipal(ctx, "bob"), key1, []limiter.Limit{limiter.PerMinute("rpm", 200)})
	_ = lim.PutLimits(ctx, key1, []limiter.Limit{limiter.PerMinute("rpm", 200)}) // no change: not recorded

	recs, err := lim.Audit(ctx, limiter.AuditQuery{Entity: "key-1"})
	if err != nil {
		panic(err)
	}
	capacity := func(s *limiter.AuditState) any {
		if s == nil {
			return "-"
		}
		return s.Limits[0].Capacity
	}
	for _, r := range recs { // newest first
		fmt.Printf("%s %s %v: %v -> %v\n", r.Principal, r.Action, r.Scope, capacity(r.Before), capacity(r.After))
	}
	// Output:
	// bob limits.put entity "key-1": 100 -> 200
	// alice limits.put entity "key-1": - -> 100
}
