package admin_test

import (
	"context"
	"fmt"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/store/memsim"
)

// Configuration changes are audited: who changed what, from what to what.
func ExampleAdmin_Audit() {
	clock := memsim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	adm, err := admin.New(memsim.New(memsim.WithClock(clock)), admin.WithNamespace("tenant-a"), admin.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := admin.ContextWithPrincipal(context.Background(), "alice")
	key1 := admin.Scope{Entity: "key-1"}
	_ = adm.PutLimits(ctx, key1, []limiter.Limit{limiter.PerMinute("rpm", 100)})
	clock.Add(time.Minute)
	_ = adm.PutLimits(admin.ContextWithPrincipal(ctx, "bob"), key1, []limiter.Limit{limiter.PerMinute("rpm", 200)})
	_ = adm.PutLimits(ctx, key1, []limiter.Limit{limiter.PerMinute("rpm", 200)}) // no change: not recorded

	recs, err := adm.Audit(ctx, admin.AuditQuery{Entity: "key-1"})
	if err != nil {
		panic(err)
	}
	capacity := func(s *admin.AuditState) any {
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
