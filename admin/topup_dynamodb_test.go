package admin_test

import (
	"context"
	"errors"
	"testing"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
)

// crashAfter applies the n-th transaction, then answers as a lost
// response would: the caller cannot know it applied.
type crashAfter struct {
	store.Store
	n int
}

func (c *crashAfter) TransactWrite(ctx context.Context, in store.TransactWriteInput) (store.WriteOutput, error) {
	out, err := c.Store.TransactWrite(ctx, in)
	if c.n--; c.n == 0 && err == nil {
		return out, &store.UnavailableError{Op: "TransactWrite", OutcomeUnknown: true, Err: context.DeadlineExceeded}
	}
	return out, err
}

// A top-up of a two-shard bucket on a real server, interrupted after its
// first shard's transaction applied, then resumed: each shard gets its
// share once.
func TestTopUpOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	ddb := dynamo.New(srv.Client, srv.NewTable(t))
	st := &crashAfter{Store: ddb}
	ctx := context.Background()
	lim, adm := planes(t, st)
	req := limiter.Request{Entity: "key-1", Resource: "gpt-4", Limits: []limiter.Limit{limiter.PerMinute("tpm", 100_000)},
		Consume: map[string]int64{"tpm": 30_000}}
	if _, err := lim.Acquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	ref := keys.Bucket{Namespace: "it", Entity: "key-1", Resource: "gpt-4"}
	get := func(s int) store.Item {
		out, err := ddb.Get(ctx, store.GetInput{Key: ref.WithShard(s).Key(), ConsistentRead: true})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	if _, err := ddb.Update(ctx, keys.DoubleShards(ref, 1, keys.LimitsOf(get(0)))); err != nil {
		t.Fatal(err)
	}
	lim.ForgetBucket("key-1", "gpt-4")
	req.Consume["tpm"] = 1
	for i := 0; get(1) == nil; i++ {
		if i == 100 {
			t.Fatal("100 acquires did not write shard 1")
		}
		if _, err := lim.Acquire(ctx, req); err != nil && !errors.Is(err, limiter.ErrRateLimited) {
			t.Fatal(err)
		}
	}
	tk := func(s int) int64 {
		n, _ := get(s).Int(bucket.AttrName("tpm", bucket.FieldTokens))
		return n
	}
	before := []int64{tk(0), tk(1)}

	st.n = 1
	rec, err := adm.TopUp(ctx, "key-1", "gpt-4", map[string]int64{"tpm": 10_000})
	if !store.OutcomeUnknown(err) || len(rec.Pending) != 2 {
		t.Fatalf("interrupted TopUp = %+v, %v", rec, err)
	}
	for range 2 {
		if _, err := adm.ResumeTopUps(ctx, "key-1", "gpt-4"); err != nil {
			t.Fatal(err)
		}
	}
	for s := range 2 {
		if got := tk(s) - before[s]; got != 5_000_000 {
			t.Errorf("shard %d: %d millitokens granted, want 5,000,000 (5,000 tokens) once", s, got)
		}
	}
	recs, err := adm.Audit(ctx, admin.AuditQuery{Entity: "key-1", Resource: "gpt-4"})
	if err != nil || len(recs) != 1 || recs[0].Action != admin.AuditTopUp || recs[0].After.Shards != 2 || len(recs[0].Pending) != 0 {
		t.Fatalf("audit: %+v, %v", recs, err)
	}
}
