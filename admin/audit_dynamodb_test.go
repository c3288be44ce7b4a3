package admin_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
)

// raceOnce lets a rival write land just before the first transaction, as
// a concurrent operator would.
type raceOnce struct {
	store.Store
	rival func()
}

func (r *raceOnce) TransactWrite(ctx context.Context, in store.TransactWriteInput) (store.WriteOutput, error) {
	if f := r.rival; f != nil {
		r.rival = nil
		f()
	}
	return r.Store.TransactWrite(ctx, in)
}

// planes returns a limiter and an Admin that keeps it up to date, in
// namespace "it" of st.
func planes(t *testing.T, st store.Store) (*limiter.Limiter, *admin.Admin) {
	t.Helper()
	lim, err := limiter.New(st, limiter.WithNamespace("it"))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(st, admin.WithNamespace("it"), admin.WithLimiter(lim))
	if err != nil {
		t.Fatal(err)
	}
	return lim, adm
}

// The audited configuration writes on a real server: the conditional
// transaction, the record's Before after a lost race (the item DynamoDB
// returns with the cancellation), the listings through GSI3 and a reset.
func TestAuditOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := &raceOnce{Store: dynamo.New(srv.Client, srv.NewTable(t))}
	ctx := admin.ContextWithPrincipal(context.Background(), "alice")
	lim, adm := planes(t, st)
	rpm := func(n int64) []limiter.Limit { return []limiter.Limit{limiter.PerMinute("rpm", n)} }
	if err := adm.PutEntity(ctx, admin.Entity{ID: "key-1"}); err != nil {
		t.Fatal(err)
	}
	if err := adm.PutLimits(ctx, admin.Scope{Entity: "key-1"}, rpm(1)); err != nil {
		t.Fatal(err)
	}
	st.rival = func() {
		bob := admin.ContextWithPrincipal(context.Background(), "bob")
		if err := adm.PutLimits(bob, admin.Scope{Entity: "key-1"}, rpm(2)); err != nil {
			t.Error(err)
		}
	}
	if err := adm.PutLimits(ctx, admin.Scope{Entity: "key-1"}, rpm(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Acquire(ctx, limiter.Request{Entity: "key-1", Resource: "gpt-4", Limits: rpm(9),
		Consume: map[string]int64{"rpm": 1}}); err != nil {
		t.Fatal(err)
	}
	if n, err := adm.ResetBucket(ctx, "key-1", "gpt-4"); err != nil || n != 1 {
		t.Fatalf("reset: %d, %v", n, err)
	}
	recs, err := adm.Audit(ctx, admin.AuditQuery{Entity: "key-1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		s := string(r.Action) + " by " + r.Principal
		if r.After != nil && len(r.After.Limits) > 0 {
			s += " to " + strconv.FormatInt(r.After.Limits[0].Capacity, 10)
		}
		if r.Before != nil && len(r.Before.Limits) > 0 {
			s += " from " + strconv.FormatInt(r.Before.Limits[0].Capacity, 10)
		}
		got = append(got, s)
		if time.Since(r.At) > time.Minute {
			t.Errorf("record time %v", r.At)
		}
	}
	want := []string{"bucket.reset by alice", "limits.put by alice to 3 from 2", "limits.put by bob to 2 from 1",
		"limits.put by alice to 1", "entity.put by alice"}
	if len(got) != len(want) {
		t.Fatalf("records %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("records %q, want %q", got, want)
		}
	}
	ents, err := adm.ListEntities(ctx, "", 0)
	if err != nil || len(ents) != 1 || ents[0].ID != "key-1" {
		t.Fatalf("ListEntities: %+v, %v", ents, err)
	}
	ls, err := adm.ListLimits(ctx, "")
	if err != nil || len(ls) != 1 || ls[0].Limits[0].Capacity != 3 {
		t.Fatalf("ListLimits: %+v, %v", ls, err)
	}
}
