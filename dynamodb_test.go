package limiter_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
	"github.com/shardlimit/limiter/store/memsim"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// The limiter's stories against AWS's DynamoDB Local: the same write paths,
// costs and answers as on memsim, on a real server.
func TestOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	ctx := context.Background()
	// Start at the real time: DynamoDB Local's TTL sweeper deletes items
	// whose ttl (derived from this clock) is in the real past.
	clock := memsim.NewManualClock(time.Now().UTC().Truncate(time.Second))
	var last limiter.Event
	lim, err := limiter.New(st, limiter.WithNamespace("it"), limiter.WithClock(clock),
		limiter.WithObserver(limiter.ObserverFunc(func(e limiter.Event) { last = e })))
	if err != nil {
		t.Fatal(err)
	}
	limits := []limiter.Limit{limiter.PerMinute("rpm", 3), limiter.PerMinute("gpt-3.5", 1000)}
	r := limiter.Request{Entity: "key-1", Resource: "models/gpt-4", Limits: limits,
		Consume: map[string]int64{"rpm": 1, "gpt-3.5": 100}}
	tokens := func(entity, limit string) int64 {
		out, err := st.Get(ctx, store.GetInput{ConsistentRead: true,
			Key: keys.Bucket{Namespace: "it", Entity: entity, Resource: "models/gpt-4"}.Key()})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := out.Item.Int("b_" + limit + "_tk")
		return v
	}

	if _, err := lim.Acquire(ctx, r); err != nil || last.Path != limiter.PathCreate {
		t.Fatalf("create: %v, path %v", err, last.Path)
	}
	// A new bucket enters one index, GSI3: 1 WCU for the item and 1 for
	// its index entry, as DynamoDB reports it (it was 3 with a GSI2 entry).
	// (The first acquire above also wrote the table's schema version.)
	other := r
	other.Entity = "key-0"
	if _, err := lim.Acquire(ctx, other); err != nil || last.Path != limiter.PathCreate || last.WriteUnits != 2 {
		t.Fatalf("create on DynamoDB: %v, path %v, %.0f WCU; want 2 WCU", err, last.Path, last.WriteUnits)
	}
	if _, err := lim.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	if last.Path != limiter.PathSpeculative || last.RoundTrips != 1 || last.WriteUnits != 1 || last.ReadUnits != 0 {
		t.Fatalf("hot path on DynamoDB: %+v", last)
	}
	lease, err := lim.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lim.Acquire(ctx, r)
	var rl *limiter.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 20*time.Second {
		t.Fatalf("fourth request: %v, want a rate limit with retry after 20s", err)
	}
	if err := lease.Adjust(ctx, map[string]int64{"gpt-3.5": 400}); err != nil {
		t.Fatal(err)
	}
	if got := tokens("key-1", "gpt-3.5"); got != 300_000 {
		t.Fatalf("after adjust tk = %d, want 300000", got)
	}
	if err := lease.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tokens("key-1", "gpt-3.5"); got != 800_000 {
		t.Fatalf("after rollback tk = %d, want 800000", got)
	}
	clock.Add(rl.RetryAfter)
	if _, err := lim.Acquire(ctx, r); err != nil {
		t.Fatalf("after waiting RetryAfter: %v", err)
	}

	// Cascade: two concurrent writes, the child's undone when the parent
	// refuses: all or nothing.
	adm, err := admin.New(st, admin.WithNamespace("it"), admin.WithLimiter(lim))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []admin.Entity{{ID: "project"}, {ID: "key-2", Parent: "project", Cascade: true}} {
		if err := adm.PutEntity(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := adm.PutLimits(ctx, admin.Scope{Entity: "project"}, []limiter.Limit{limiter.PerMinute("rpm", 2), limiter.PerMinute("gpt-3.5", 1000)}); err != nil {
		t.Fatal(err)
	}
	r.Entity = "key-2"
	for i := 0; i < 2; i++ {
		if _, err := lim.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	before := tokens("key-2", "rpm")
	if _, err := lim.Acquire(ctx, r); !errors.As(err, &rl) || !rl.Parent {
		t.Fatalf("third cascading request: %v, want the parent's rate limit", err)
	}
	if got := tokens("key-2", "rpm"); got != before {
		t.Fatalf("child charged by a rejected cascade: %d -> %d", before, got)
	}
	clock.Add(30 * time.Second) // the project refills one
	if _, err := lim.Acquire(ctx, r); err != nil {
		t.Fatalf("cascade after the parent refilled: %v", err)
	}
}

// Several resources in one acquire on DynamoDB Local: a key's model and
// "all-models" (a stored limit of 2 a minute) are charged by two
// concurrent writes, 2 WCU in one round trip; when "all-models" refuses,
// the model's charge (of a third model, written in the same round trip) is
// refunded: nothing is charged. The lease settles both.
func TestSeveralResourcesOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	ctx := context.Background()
	clock := memsim.NewManualClock(time.Now().UTC().Truncate(time.Second))
	var last limiter.Event
	lim, err := limiter.New(st, limiter.WithNamespace("it"), limiter.WithClock(clock),
		limiter.WithObserver(limiter.ObserverFunc(func(e limiter.Event) { last = e })))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(st, admin.WithNamespace("it"), admin.WithLimiter(lim))
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.PutLimits(ctx, admin.Scope{Resource: "all-models"}, []limiter.Limit{limiter.PerMinute("rpm", 2)}); err != nil {
		t.Fatal(err)
	}
	consumed := func(resource string) int64 {
		out, err := st.Get(ctx, store.GetInput{ConsistentRead: true,
			Key: keys.Bucket{Namespace: "it", Entity: "key-1", Resource: resource}.Key()})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := out.Item.Int("b_rpm_tc")
		return v
	}
	r := limiter.Request{Entity: "key-1", Resource: "gpt-4", Also: []string{"all-models"},
		Limits: []limiter.Limit{limiter.PerMinute("rpm", 100)}, Consume: map[string]int64{"rpm": 1}}
	if _, err := lim.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	lease, err := lim.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if last.RoundTrips != 1 || last.WriteUnits != 2 || last.ReadUnits != 0 {
		t.Fatalf("two resources: %d round trips, %.0f WCU, %.0f RCU; want 1, 2, 0", last.RoundTrips, last.WriteUnits, last.ReadUnits)
	}
	if ls := lease.Limits(); len(ls) != 2 || ls[1].Resource != "all-models" || ls[1].Remaining != 0 {
		t.Fatalf("lease limits %+v, want gpt-4's then all-models' (0 left)", ls)
	}
	if err := lease.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if a, b := consumed("gpt-4"), consumed("all-models"); a != 1000 || b != 1000 {
		t.Fatalf("after the rollback: tc %d and %d, want 1000 each (the first acquire's)", a, b)
	}
	if _, err := lim.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	// all-models is spent: a fresh limiter (no memory of the buckets, so
	// every write goes out) asks for claude-3 and all-models.
	fresh, err := limiter.New(st, limiter.WithNamespace("it"), limiter.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	r.Resource = "claude-3"
	var rl *limiter.RateLimitedError
	if _, err := fresh.Acquire(ctx, r); !errors.As(err, &rl) || rl.Resource != "all-models" {
		t.Fatalf("all-models spent: %v, want its rate limit", err)
	}
	if got := consumed("claude-3"); got != 0 {
		t.Fatalf("claude-3 keeps %d millitokens of the refused acquire, want 0", got)
	}
	r.Also = []string{"all-models", "all-models"}
	var v *limiter.ValidationError
	if _, err := lim.Acquire(ctx, r); !errors.As(err, &v) || v.Field != "Request.Also[1]" {
		t.Fatalf("a resource twice: %v, want a validation error of Request.Also[1]", err)
	}
}

// A table with the wrong key schema: the limiter's first call says which
// table and how to provision it, and is not failed open.
func TestWrongKeySchemaOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	ctx := context.Background()
	name := "wrong-schema-" + strings.ToLower(t.Name())
	_, err := srv.Client.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = srv.Client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	})
	lim, err := limiter.New(dynamo.New(srv.Client, name), limiter.WithPolicy(limiter.FailOpen),
		limiter.WithDefaultLimits(limiter.PerMinute("rpm", 10)))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := lim.Acquire(ctx, limiter.Request{Entity: "key-1", Consume: map[string]int64{"rpm": 1}})
	if lease != nil || !errors.Is(err, dynamo.ErrSchemaMismatch) || !strings.Contains(err.Error(), `table "`+name+`"`) ||
		!strings.Contains(err.Error(), "dynamo.CreateTable") {
		t.Fatalf("Acquire on a table keyed by id: %v (lease %v); want an error naming the table and dynamo.CreateTable", err, lease)
	}
	t.Log(err)
}

// Sharded buckets and TTL on a real server: DynamoDB deletes expired shards
// one by one, in no order, any time after their ttl. With shard 0 gone and
// its three siblings full of tokens, processes that believe in one shard
// make shard 0 again at one shard; the process that remembers 4 shards has
// an image of shard 0 too old to vouch for that count, writes shard 0
// first and learns the count there. The siblings are never written again,
// and no more than one burst is admitted at one instant.
func TestShardedBucketTTLOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	ctx := context.Background()
	clock := memsim.NewManualClock(time.Now().UTC().Truncate(time.Second))
	newLimiter := func() *limiter.Limiter {
		l, err := limiter.New(st, limiter.WithNamespace("ttl"), limiter.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	r := limiter.Request{Entity: "hot", Resource: "r", Limits: []limiter.Limit{limiter.PerSecond("rps", 40)},
		Consume: map[string]int64{"rps": 1}}
	l := newLimiter()
	if _, err := l.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	ref := keys.Bucket{Namespace: "ttl", Entity: "hot", Resource: "r"}
	for _, from := range []int64{1, 2} {
		zero, err := st.Get(ctx, store.GetInput{Key: ref.Key(), ConsistentRead: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Update(ctx, keys.DoubleShards(ref, from, keys.LimitsOf(zero.Item))); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(2 * time.Second) // every shard full: 10 tokens each
	for i := 0; i < 200; i++ {
		if _, err := l.Acquire(ctx, r); err != nil {
			break
		}
	}
	zero, err := st.Get(ctx, store.GetInput{Key: ref.Key(), ConsistentRead: true})
	if err != nil {
		t.Fatal(err)
	}
	ttl, _ := zero.Item.Int(store.AttrTTL)
	clock.Set(time.Unix(ttl+1, 0)) // shard 0 expires first
	if _, err := st.Delete(ctx, store.DeleteInput{Key: ref.WithShard(0).Key()}); err != nil {
		t.Fatal(err)
	}
	siblings := func() []store.Item {
		var its []store.Item
		for s := 1; s < 4; s++ {
			out, err := st.Get(ctx, store.GetInput{Key: ref.WithShard(s).Key(), ConsistentRead: true})
			if err != nil {
				t.Fatal(err)
			}
			its = append(its, out.Item)
		}
		return its
	}
	before := siblings()
	admitted := 0
	for i := 0; i < 60; i++ {
		if _, err := newLimiter().Acquire(ctx, r); err == nil {
			admitted++
		}
		if _, err := l.Acquire(ctx, r); err == nil {
			admitted++
		}
	}
	if admitted > 40 {
		t.Fatalf("%d admitted at one instant against a burst of 40", admitted)
	}
	if !reflect.DeepEqual(siblings(), before) {
		t.Fatal("a shard left over from before shard 0 expired was written")
	}
}

// Reservations on a real server: a process takes a share of the bucket in
// one write and admits from it locally; Close returns what it did not use.
func TestReservationsOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	ctx := context.Background()
	clock := memsim.NewManualClock(time.Now().UTC().Truncate(time.Second))
	var writes, admitted int
	lim, err := limiter.New(st, limiter.WithNamespace("pool"), limiter.WithClock(clock), limiter.WithReservations("rps"),
		limiter.WithObserver(limiter.ObserverFunc(func(e limiter.Event) {
			writes += e.RoundTrips
			if e.Err == nil {
				admitted++
			}
		})))
	if err != nil {
		t.Fatal(err)
	}
	r := limiter.Request{Entity: "busy", Resource: "r", Limits: []limiter.Limit{limiter.PerSecond("rps", 1000)},
		Consume: map[string]int64{"rps": 1}}
	for i := 0; i < 2000; i++ {
		if _, err := lim.Acquire(ctx, r); err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		clock.Add(time.Millisecond) // 1,000 a second: the limit, exactly
	}
	if writes*10 > admitted {
		t.Fatalf("%d round trips for %d admitted; want under one in ten", writes, admitted)
	}
	if err := lim.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Consumption matched the refill, so with the unused share returned the
	// bucket is full again once it has refilled what the pool handed out
	// since its last reservation (at most 100 ms of its demand: the cap
	// stays lowered by a pool's hold until the write that gives it back):
	// a process without reservations then takes nearly all.
	clock.Add(100 * time.Millisecond)
	other, err := limiter.New(st, limiter.WithNamespace("pool"), limiter.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	r.Consume = map[string]int64{"rps": 990}
	if _, err := other.Acquire(ctx, r); err != nil {
		t.Fatalf("after Close: %v; the unused share was not returned", err)
	}
	t.Logf("%d round trips for %d admitted", writes, admitted)
}

// Holds on a real server: the first reservation starts a hold generation
// (hg, hs, b_rps_hd), later ones add to it, a crashed process's hold is
// reclaimed by another process's write once its generation is over, and
// the late return of that generation (the crashed process's Close) writes
// nothing. Every expression of the holds goes through DynamoDB Local.
func TestReservationsHoldsOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	ctx := context.Background()
	clock := memsim.NewManualClock(time.Now().UTC().Truncate(time.Second))
	newLimiter := func(opts ...limiter.Option) *limiter.Limiter {
		l, err := limiter.New(st, append([]limiter.Option{limiter.WithNamespace("hold"), limiter.WithClock(clock)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	pooled, other := newLimiter(limiter.WithReservations()), newLimiter()
	r := limiter.Request{Entity: "busy", Resource: "r", Limits: []limiter.Limit{limiter.PerSecond("rps", 1000)},
		Consume: map[string]int64{"rps": 1}}
	ref := keys.Bucket{Namespace: "hold", Entity: "busy", Resource: "r"}
	item := func() store.Item {
		out, err := st.Get(ctx, store.GetInput{Key: ref.WithShard(0).Key(), ConsistentRead: true})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	for i := 0; i < 1500; i++ { // past one pool's life: a return and more reservations
		if _, err := pooled.Acquire(ctx, r); err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		clock.Add(time.Millisecond)
	}
	it := item()
	gen, _ := it.Int("hg")
	if hd, ok := it.Int("b_rps_hd"); !ok || hd <= 0 || gen < 1 {
		t.Fatalf("hold %d (present %v) in generation %d, want a hold", hd, ok, gen)
	}
	// The pooled process stops (as if crashed); its generation ends.
	clock.Add(10*time.Minute + 6*time.Second)
	if _, err := other.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	it = item()
	if hd, _ := it.Int("b_rps_hd"); hd != 0 {
		t.Fatalf("hold %d after its generation, want it reclaimed", hd)
	}
	if g, _ := it.Int("hg"); g != gen+1 {
		t.Fatalf("generation %d after the reclaim, want %d", g, gen+1)
	}
	tk, _ := it.Int("b_rps_tk")
	if err := pooled.Close(ctx); err != nil { // the late return
		t.Fatal(err)
	}
	if got, _ := item().Int("b_rps_tk"); got != tk {
		t.Fatalf("the late return moved the tokens from %d to %d, want nothing written", tk, got)
	}
	// The reclaimed bucket refills to its whole burst.
	clock.Add(2 * time.Second)
	r.Consume = map[string]int64{"rps": 1000}
	if _, err := other.Acquire(ctx, r); err != nil {
		t.Fatalf("the whole burst after the reclaim: %v", err)
	}
}

// A lease never refunds more than it took, on a real server: another
// request's consumption stays consumed, and Limits follows the Adjust's
// write.
func TestLeaseRefundIsCappedOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	ctx := context.Background()
	clock := memsim.NewManualClock(time.Now().UTC().Truncate(time.Second))
	lim, err := limiter.New(st, limiter.WithNamespace("it"), limiter.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	limits := []limiter.Limit{limiter.PerMinute("tpm", 10_000)}
	r := limiter.Request{Entity: "key-1", Resource: "gpt-4", Limits: limits, Consume: map[string]int64{"tpm": 9_000}}
	other, err := lim.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	r.Consume = map[string]int64{"tpm": 100}
	lease, err := lim.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Adjust(ctx, map[string]int64{"tpm": -5_000}); err != nil {
		t.Fatal(err)
	}
	if got := lease.Limits()[0].Remaining; got != 1_000 {
		t.Fatalf("Limits after the refund: remaining %d, want 1000", got)
	}
	if err := lease.Rollback(ctx); err != nil { // holds nothing now
		t.Fatal(err)
	}
	out, err := st.Get(ctx, store.GetInput{ConsistentRead: true,
		Key: keys.Bucket{Namespace: "it", Entity: "key-1", Resource: "gpt-4"}.Key()})
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := out.Item.Int("b_tpm_tk")
	tc, _ := out.Item.Int("b_tpm_tc")
	if tk != 1_000_000 || tc != 9_000_000 {
		t.Fatalf("tk %d, tc %d; want 1000000 and 9000000 (the other request's 9,000 stay consumed)", tk, tc)
	}
}
