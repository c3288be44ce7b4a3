package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
	"github.com/shardlimit/limiter/store/memsim"
)

// The one rule for a done context, on DynamoDB: Acquire, Adjust, Rollback,
// Status and a configuration read return the context's error, never
// ErrUnavailable, with nothing sent; the lease stays usable.
func TestDoneContextOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	clock := memsim.NewManualClock(time.Now().UTC().Truncate(time.Second))
	lim, err := limiter.New(st, limiter.WithNamespace("it"), limiter.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(st, admin.WithNamespace("it"), admin.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	limits := []limiter.Limit{limiter.PerMinute("rpm", 10)}
	r := limiter.Request{Entity: "key-1", Resource: "gpt-4", Limits: limits, Consume: map[string]int64{"rpm": 1}}
	ctx := context.Background()
	lease, err := lim.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for name, call := range map[string]func() error{
		"Acquire":   func() error { _, err := lim.Acquire(done, r); return err },
		"Wait":      func() error { _, err := lim.Wait(done, r); return err },
		"Adjust":    func() error { return lease.Adjust(done, map[string]int64{"rpm": 1}) },
		"Rollback":  func() error { return lease.Rollback(done) },
		"Status":    func() error { _, err := lim.Status(done, "key-1", "gpt-4", limits); return err },
		"GetEntity": func() error { _, _, err := adm.GetEntity(done, "key-1"); return err },
	} {
		err := call()
		if !errors.Is(err, context.Canceled) || errors.Is(err, limiter.ErrUnavailable) || store.OutcomeUnknown(err) {
			t.Errorf("%s: %v; want context.Canceled, not ErrUnavailable, nothing applied", name, err)
		}
	}
	if err := lease.Rollback(ctx); err != nil {
		t.Fatalf("Rollback after the cancelled calls: %v", err)
	}
}
