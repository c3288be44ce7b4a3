package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/storetest"
)

// fakeAPI implements API with functions; a nil function panics.
type fakeAPI struct {
	batchGet func(*dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error)
	query    func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error)
	update   func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	put      func(context.Context, *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
}

func (f *fakeAPI) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	panic("unexpected Scan")
}
func (f *fakeAPI) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	panic("unexpected GetItem")
}
func (f *fakeAPI) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return f.batchGet(in)
}
func (f *fakeAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return f.put(ctx, in)
}
func (f *fakeAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return f.update(ctx, in)
}
func (f *fakeAPI) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	panic("unexpected DeleteItem")
}
func (f *fakeAPI) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	panic("unexpected TransactWriteItems")
}
func (f *fakeAPI) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return f.query(in)
}

func sAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func nAV(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }

func rawItem(pk, sk string, n int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"PK": sAV(pk), "SK": sAV(sk), "n": nAV(fmt.Sprint(n))}
}

func skOf(key map[string]types.AttributeValue) string {
	return key["SK"].(*types.AttributeValueMemberS).Value
}

func half(f float64) *float64 { return &f }

// recordSleep replaces the store's sleep by one that records the pauses
// and returns at once.
func recordSleep(s *Store) *[]time.Duration {
	var slept []time.Duration
	s.sleep = func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		return ctx.Err()
	}
	return &slept
}

// BatchGet retries exactly the unprocessed keys, with growing jittered
// pauses, and aligns the result with the input keys.
func TestBatchGetRetriesUnprocessedKeys(t *testing.T) {
	stored := map[string]int{"a": 1, "c": 3, "d": 4}
	var rounds [][]string
	api := &fakeAPI{batchGet: func(in *dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error) {
		ka := in.RequestItems["t"]
		var sks []string
		for _, k := range ka.Keys {
			sks = append(sks, skOf(k))
		}
		rounds = append(rounds, sks)
		if ka.ConsistentRead == nil || !*ka.ConsistentRead {
			t.Errorf("round %d lost ConsistentRead", len(rounds))
		}
		out := &dynamodb.BatchGetItemOutput{
			Responses:        map[string][]map[string]types.AttributeValue{},
			ConsumedCapacity: []types.ConsumedCapacity{{TableName: aws.String("t"), CapacityUnits: half(1)}},
		}
		// Serve one key per round (the first); leave the rest unprocessed,
		// and make no progress at all in round 2.
		serve := ka.Keys[:1]
		if len(rounds) == 2 {
			serve = nil
		}
		for _, k := range serve {
			if n, ok := stored[skOf(k)]; ok {
				out.Responses["t"] = append(out.Responses["t"], rawItem("p", skOf(k), n))
			}
		}
		if left := ka.Keys[len(serve):]; len(left) > 0 {
			out.UnprocessedKeys = map[string]types.KeysAndAttributes{"t": {Keys: left}}
		}
		return out, nil
	}}
	s := New(api, "t")
	slept := recordSleep(s)
	keys := []store.Key{{PK: "p", SK: "d"}, {PK: "p", SK: "b"}, {PK: "p", SK: "a"}, {PK: "p", SK: "c"}}
	out, err := s.BatchGet(context.Background(), store.BatchGetInput{Keys: keys, ConsistentRead: true})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([][]string{{"d", "b", "a", "c"}, {"b", "a", "c"}, {"b", "a", "c"}, {"a", "c"}, {"c"}})
	if got := fmt.Sprint(rounds); got != want {
		t.Errorf("rounds %s, want %s", got, want)
	}
	for i, wantN := range []int64{4, -1, 1, 3} {
		n, ok := out.Items[i].Int("n")
		if wantN < 0 != (out.Items[i] == nil) || (ok && n != wantN) {
			t.Errorf("item %d = %v", i, out.Items[i])
		}
	}
	if out.Consumed.ReadUnits != 5 {
		t.Errorf("Consumed = %+v", out.Consumed)
	}
	if len(*slept) != 4 {
		t.Fatalf("slept %v", *slept)
	}
	for i, d := range *slept {
		hi := 25 * time.Millisecond << i
		if d < hi/2 || d > hi {
			t.Errorf("pause %d = %v, want in [%v, %v]", i, d, hi/2, hi)
		}
	}
}

func TestBatchGetGivesUpWithoutProgress(t *testing.T) {
	calls := 0
	api := &fakeAPI{batchGet: func(in *dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error) {
		calls++
		return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
	}}
	s := New(api, "t")
	slept := recordSleep(s)
	_, err := s.BatchGet(context.Background(), store.BatchGetInput{Keys: []store.Key{{PK: "p", SK: "a"}}})
	var te *store.ThrottledError
	if !errors.As(err, &te) || !errors.Is(err, store.ErrUnavailable) || store.OutcomeUnknown(err) {
		t.Fatalf("error %v", err)
	}
	if calls != 10 || len(*slept) != 9 {
		t.Errorf("%d calls, %d pauses, want 10 and 9", calls, len(*slept))
	}
	if max := (*slept)[8]; max < 500*time.Millisecond || max > time.Second {
		t.Errorf("the pause is capped at 1 s: %v", *slept)
	}
}

func TestBatchGetStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	api := &fakeAPI{batchGet: func(in *dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error) {
		cancel()
		return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
	}}
	s := New(api, "t")
	_, err := s.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{{PK: "p", SK: "a"}}})
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.Canceled) || store.OutcomeUnknown(err) {
		t.Fatalf("error %v", err)
	}
}

// Query follows LastEvaluatedKey to the end, or until Limit items.
func TestQueryFollowsPages(t *testing.T) {
	const total = 7
	var limits []int32
	api := &fakeAPI{query: func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
		if *in.KeyConditionExpression != "#pk = :pk AND begins_with(#sk, :sk)" ||
			in.ExpressionAttributeNames["#pk"] != "GSI2PK" || in.ExpressionAttributeNames["#sk"] != "GSI2SK" || *in.IndexName != "GSI2" {
			t.Errorf("request %+v", in)
		}
		start := 0
		if in.ExclusiveStartKey != nil {
			fmt.Sscan(skOf(in.ExclusiveStartKey), &start)
			start++
		}
		page := 3 // the server's page size
		if in.Limit != nil {
			limits = append(limits, *in.Limit)
			page = min(page, int(*in.Limit))
		} else {
			limits = append(limits, 0)
		}
		out := &dynamodb.QueryOutput{ConsumedCapacity: &types.ConsumedCapacity{CapacityUnits: half(0.5)}}
		for i := start; i < min(start+page, total); i++ {
			out.Items = append(out.Items, rawItem("p", fmt.Sprint(i), i))
		}
		if start+page < total {
			out.LastEvaluatedKey = rawItem("p", fmt.Sprint(start+page-1), 0)
		}
		return out, nil
	}}
	s := New(api, "t")
	in := store.QueryInput{Index: "GSI2", PartitionKey: "R#x", SortKeyPrefix: "E#"}
	out, err := s.Query(context.Background(), in)
	if err != nil || len(out.Items) != total || out.Consumed.ReadUnits != 1.5 {
		t.Fatalf("all: %d items, %+v, %v", len(out.Items), out.Consumed, err)
	}
	for i, it := range out.Items {
		if n, _ := it.Int("n"); n != int64(i) {
			t.Errorf("item %d = %v", i, it)
		}
	}
	limits = nil
	in.Limit = 5
	out, err = s.Query(context.Background(), in)
	if err != nil || len(out.Items) != 5 {
		t.Fatalf("limit 5: %d items, %v", len(out.Items), err)
	}
	if fmt.Sprint(limits) != "[5 2]" {
		t.Errorf("limits sent %v, want [5 2]", limits)
	}
	if _, err := s.Query(context.Background(), store.QueryInput{Index: "GSI9", PartitionKey: "x"}); !errors.Is(err, store.ErrValidation) ||
		!strings.Contains(err.Error(), "GSI9") {
		t.Errorf("unknown index: %v", err)
	}
}

// WriteConcurrently really runs the writes at the same time: each write
// blocks until all have started.
func TestWriteConcurrentlyRunsWritesAtOnce(t *testing.T) {
	const n = 8
	var started sync.WaitGroup
	started.Add(n)
	allStarted := make(chan struct{})
	go func() { started.Wait(); close(allStarted) }()
	wait := func(ctx context.Context) error {
		started.Done()
		select {
		case <-allStarted:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("the writes did not run concurrently")
		}
	}
	api := &fakeAPI{
		update: func(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			if err := wait(ctx); err != nil {
				return nil, err
			}
			if skOf(in.Key) == "3" {
				return nil, &types.ConditionalCheckFailedException{Item: rawItem("p", "3", 33)}
			}
			return &dynamodb.UpdateItemOutput{Attributes: rawItem("p", skOf(in.Key), 0)}, nil
		},
		put: func(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			if err := wait(ctx); err != nil {
				return nil, err
			}
			return &dynamodb.PutItemOutput{}, nil
		},
	}
	writes := make([]store.Write, n)
	for i := range writes {
		k := store.Key{PK: "p", SK: fmt.Sprint(i)}
		if i == 5 {
			writes[i] = store.Write{Put: &store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("5")}}}
			continue
		}
		writes[i] = store.Write{Update: &store.UpdateInput{Key: k, Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true,
			Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Name("n").LessThan(store.Int(10)))}}
	}
	res := New(api, "t").WriteConcurrently(context.Background(), append(writes, store.Write{}))
	if len(res) != n+1 {
		t.Fatalf("%d results", len(res))
	}
	for i, r := range res[:n] {
		switch i {
		case 3:
			var cf *store.ConditionFailedError
			if !errors.As(r.Err, &cf) || cf.Item == nil {
				t.Errorf("write 3: %v", r.Err)
			}
		case 5:
			if r.Err != nil || r.Output.Attributes != nil {
				t.Errorf("write 5: %+v", r)
			}
		default:
			if sk, _ := r.Output.Attributes.Str("SK"); r.Err != nil || sk != fmt.Sprint(i) {
				t.Errorf("write %d: %+v", i, r)
			}
		}
	}
	if !errors.Is(res[n].Err, store.ErrValidation) {
		t.Errorf("empty write: %v", res[n].Err)
	}
}
