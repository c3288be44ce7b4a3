package dynamo_test

// The cost of the store/dynamo layer over the raw SDK, on the limiter's hot
// path (the speculative consume), at 32 concurrent goroutines against
// DynamoDB Local:
//
//	go test -run '^$' -bench 'RawUpdateItem|StoreUpdate' -benchtime 5s ./store/dynamo/
//	go test -run '^$' -bench StoreVsRaw -benchtime 20x ./store/dynamo/
//
// Both send the same request bytes (same expression, placeholders,
// ReturnValues, ReturnConsumedCapacity and
// ReturnValuesOnConditionCheckFailure); each goroutine updates its own
// bucket item. The server dominates; compare ns/op of the two.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
)

const benchGoroutines = 32

// speculativeConsume is the limiter's hot-path update of one bucket.
func speculativeConsume(b *testing.B) store.Expr {
	e, err := store.Build(
		store.Update{}.
			Add("b_rpm_tk", store.Int(-1000)).Add("b_rpm_tc", store.Int(1000)).
			Add("b_wcu_tk", store.Int(-1000)).Add("b_wcu_tc", store.Int(1000)),
		store.And(store.Name("PK").Exists(),
			store.Name("b_rpm_tk").GreaterThanEqual(store.Int(1000)),
			store.Name("b_wcu_tk").GreaterThanEqual(store.Int(1000))))
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// benchFixture is the table, buckets and store every benchmark of the
// process shares: go test calls a benchmark function several times (for
// growing b.N), and each call must meet the same server state.
var benchFixture struct {
	once sync.Once
	st   *dynamo.Store
	keys []store.Key
	err  error
}

// benchSetup returns the shared table with one bucket per goroutine,
// creating it and warming the server up on the first call.
func benchSetup(b *testing.B) (*dynamotest.Server, *dynamo.Store, []store.Key) {
	srv := dynamotest.Start(b)
	f := &benchFixture
	f.once.Do(func() { f.st, f.keys, f.err = newBenchTable(srv, speculativeConsume(b)) })
	if f.err != nil {
		b.Fatal(f.err)
	}
	return srv, f.st, f.keys
}

func newBenchTable(srv *dynamotest.Server, e store.Expr) (*dynamo.Store, []store.Key, error) {
	ctx := context.Background()
	table := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := dynamo.CreateTable(ctx, srv.Client, table); err != nil {
		return nil, nil, err
	}
	st := dynamo.New(srv.Client, table)
	keys := make([]store.Key, benchGoroutines)
	for i := range keys {
		keys[i] = store.Key{PK: fmt.Sprintf("bench/BUCKET#e%d#gpt#0", i), SK: "#STATE"}
		it := store.Item{"PK": store.Str(keys[i].PK), "SK": store.Str(keys[i].SK), "rf": store.Int(1_700_000_000_000)}
		for _, a := range []string{"b_rpm_tk", "b_wcu_tk"} {
			it[a] = store.Int(1 << 60)
		}
		for _, a := range []string{"b_rpm_tc", "b_wcu_tc"} {
			it[a] = store.Int(0)
		}
		if _, err := st.Put(ctx, store.PutInput{Item: it}); err != nil {
			return nil, nil, err
		}
	}
	// Warm-up, once per process: a fresh server is up to 3 times slower for
	// its first thousands of requests (JIT compilation).
	errs := make(chan error, benchGoroutines)
	var wg sync.WaitGroup
	for g := range benchGoroutines {
		wg.Go(func() {
			for range 60 {
				if _, err := st.Update(ctx, store.UpdateInput{Key: keys[g], Expr: e, Return: store.ReturnAllNew}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return st, keys, <-errs
}

// reportLockRetries reports the requests the harness resent because
// DynamoDB Local timed out on its internal lock (see
// dynamotest.LockTimeoutRetries); call the result when the loop is done.
func reportLockRetries(b *testing.B) func() {
	before := dynamotest.LockTimeoutRetries()
	return func() {
		b.ReportMetric(float64(dynamotest.LockTimeoutRetries()-before)/float64(b.N), "lockretries/op")
	}
}

func parallelism() int { return (benchGoroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0) }

// rawInputs returns, per bucket, the UpdateItemInput store/dynamo sends
// for the speculative consume, built once.
func rawInputs(b *testing.B, table string, keys []store.Key) []*dynamodb.UpdateItemInput {
	e := speculativeConsume(b)
	values := make(map[string]types.AttributeValue, len(e.Values))
	for k, v := range e.Values {
		n, _ := v.AsInt()
		values[k] = &types.AttributeValueMemberN{Value: fmt.Sprint(n)}
	}
	ins := make([]*dynamodb.UpdateItemInput, len(keys))
	for i, k := range keys {
		ins[i] = &dynamodb.UpdateItemInput{
			TableName: aws.String(table),
			Key: map[string]types.AttributeValue{
				"PK": &types.AttributeValueMemberS{Value: k.PK},
				"SK": &types.AttributeValueMemberS{Value: k.SK},
			},
			UpdateExpression:                    aws.String(e.Update),
			ConditionExpression:                 aws.String(e.Condition),
			ExpressionAttributeNames:            e.Names,
			ExpressionAttributeValues:           values,
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnConsumedCapacity:              types.ReturnConsumedCapacityIndexes,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
	}
	return ins
}

func rawUpdate(ctx context.Context, c *dynamodb.Client, in *dynamodb.UpdateItemInput) error {
	out, err := c.UpdateItem(ctx, in)
	if err == nil && len(out.Attributes) == 0 {
		err = errors.New("no attributes")
	}
	return err
}

func storeUpdate(ctx context.Context, st *dynamo.Store, in store.UpdateInput) error {
	out, err := st.Update(ctx, in)
	if err == nil && len(out.Attributes) == 0 {
		err = errors.New("no attributes")
	}
	return err
}

// BenchmarkRawUpdateItem is the speculative consume through the bare SDK.
func BenchmarkRawUpdateItem(b *testing.B) {
	srv, st, keys := benchSetup(b)
	ins := rawInputs(b, st.Table(), keys)
	var next atomic.Int64
	b.SetParallelism(parallelism())
	defer reportLockRetries(b)()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		in := ins[int(next.Add(1)-1)%len(ins)]
		ctx := context.Background()
		for pb.Next() {
			if err := rawUpdate(ctx, srv.Client, in); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkStoreUpdate is the same update through store/dynamo.
func BenchmarkStoreUpdate(b *testing.B) {
	_, st, keys := benchSetup(b)
	e := speculativeConsume(b)
	var next atomic.Int64
	b.SetParallelism(parallelism())
	defer reportLockRetries(b)()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		in := store.UpdateInput{Key: keys[int(next.Add(1)-1)%len(keys)], Expr: e, Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}
		ctx := context.Background()
		for pb.Next() {
			if err := storeUpdate(ctx, st, in); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkStoreVsRaw measures the ratio directly, on a machine shared with
// other work: on one warm server, b.N rounds each run the raw loop and the
// store loop for 500 ms apiece at 32 goroutines (alternating which goes
// first), and it reports the store's throughput over the raw SDK's as
// "store/raw" (1.0: no overhead). Run it with a fixed round count:
//
//	go test -run '^$' -bench StoreVsRaw -benchtime 20x ./store/dynamo/
func BenchmarkStoreVsRaw(b *testing.B) {
	srv, st, keys := benchSetup(b)
	ins := rawInputs(b, st.Table(), keys)
	e := speculativeConsume(b)
	ctx := context.Background()
	ops := [2]func(g int) error{
		func(g int) error { return rawUpdate(ctx, srv.Client, ins[g]) },
		func(g int) error {
			return storeUpdate(ctx, st, store.UpdateInput{Key: keys[g], Expr: e, Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true})
		},
	}
	const phase = 500 * time.Millisecond
	var done [2]int64
	var spent [2]time.Duration
	defer reportLockRetries(b)()
	b.ResetTimer()
	for round := range b.N {
		for j := range 2 {
			which := (round + j) % 2
			start := time.Now()
			deadline := start.Add(phase)
			var n atomic.Int64
			var wg sync.WaitGroup
			for g := range benchGoroutines {
				wg.Go(func() {
					for time.Now().Before(deadline) {
						if err := ops[which](g); err != nil {
							b.Error(err)
							return
						}
						n.Add(1)
					}
				})
			}
			wg.Wait()
			done[which] += n.Load()
			spent[which] += time.Since(start)
		}
	}
	raw := float64(done[0]) / spent[0].Seconds()
	str := float64(done[1]) / spent[1].Seconds()
	b.ReportMetric(raw, "raw-ops/s")
	b.ReportMetric(str, "store-ops/s")
	b.ReportMetric(str/raw, "store/raw")
}
