package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
)

// What each part of the limiter's write costs DynamoDB Local: variants of
// one UpdateItem, from the raw floor's bare ADD on a tiny item to the
// limiter's own consumption write (recorded from an acquire), sent by 32
// goroutines in a closed loop, interleaved in slices so that drift in the
// machine's load lands on all of them. Several minutes; run it alone:
//
//	LOADTEST_WRITE_COST=8 go test -run TestWriteCost -v -timeout 30m ./cmd/loadtest/
//
// LOADTEST_WRITE_COST is the number of rounds of 3 s slices of each
// variant (8 take about 5 minutes); each round starts at the next variant.
// A variant's ratio is taken against the raw floor of the same round.
// docs/performance.md gives the results.
func TestWriteCost(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("LOADTEST_WRITE_COST"))
	if rounds < 1 {
		t.Skip("set LOADTEST_WRITE_COST to a number of rounds to measure against DynamoDB Local")
	}
	srv := dynamotest.Start(t)
	ctx := context.Background()
	client := srv.Client
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	indexed, plain := "cost-indexed-"+suffix, "cost-plain-"+suffix
	if err := dynamo.CreateTable(ctx, client, indexed, dynamo.WithStream(false)); err != nil {
		t.Fatal(err)
	}
	pk, sk := store.AttrPK, store.AttrSK
	if _, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: &plain, BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: &pk, AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: &sk, AttributeType: types.ScalarAttributeTypeS}},
		KeySchema: []types.KeySchemaElement{{AttributeName: &pk, KeyType: types.KeyTypeHash}, {AttributeName: &sk, KeyType: types.KeyTypeRange}},
	}); err != nil {
		t.Fatal(err)
	}

	// The limiter's consumption write, as it sends it, and its item.
	rec := &recordingStore{Store: dynamo.New(client, indexed)}
	lim, err := limiter.New(rec, limiter.WithNamespace("cost"))
	if err != nil {
		t.Fatal(err)
	}
	limits, _ := parseLimits("limits", "rps:10000000/s")
	for range 3 {
		if _, err := lim.Acquire(ctx, limiter.Request{Entity: "e0", Limits: limits, Consume: map[string]int64{"rps": 1}}); err != nil {
			t.Fatal(err)
		}
	}
	spec := rec.last
	if spec == nil || spec.Expr.Condition == "" || strings.Contains(spec.Expr.Update, "SET") {
		t.Fatalf("no consumption write recorded: %+v", spec)
	}
	item := dynamoKey(spec.Key)
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &indexed, Key: item, ConsistentRead: aws.Bool(true)})
	if err != nil || len(got.Item) == 0 {
		t.Fatalf("read the bucket: %v", err)
	}
	// The hidden wcu limit holds 1,000 writes: give the copies room for the
	// replays (the condition stays the same).
	got.Item["b_wcu_tk"] = &types.AttributeValueMemberN{Value: "1000000000000000"}
	tiny := dynamoKey(store.Key{PK: "cost/RAW", SK: "#RAW"})
	for _, table := range []string{indexed, plain} {
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: got.Item}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: tiny}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("the limiter's item: %d attributes; its write: UPDATE %s CONDITION %s", len(got.Item), spec.Expr.Update, spec.Expr.Condition)

	names, values := spec.Expr.Names, map[string]types.AttributeValue{}
	for k, v := range spec.Expr.Values {
		values[k] = dynamoValue(v)
	}
	addN := func(table string, key map[string]types.AttributeValue, rv types.ReturnValue) *dynamodb.UpdateItemInput {
		return &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key, UpdateExpression: aws.String("ADD #n :one"),
			ExpressionAttributeNames:  map[string]string{"#n": "n"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
			ReturnValues:              rv, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes}
	}
	limiterWrite := func(table string, cond bool, rv types.ReturnValue, old bool) *dynamodb.UpdateItemInput {
		in := &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: item, UpdateExpression: aws.String(spec.Expr.Update),
			ExpressionAttributeNames: names, ExpressionAttributeValues: values, ReturnValues: rv,
			ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes}
		if cond {
			in.ConditionExpression = aws.String(spec.Expr.Condition)
		} else {
			// Without the condition, its values are unused: DynamoDB
			// refuses unused values.
			in.ExpressionAttributeNames, in.ExpressionAttributeValues = usedOnly(spec.Expr.Update, names, values)
		}
		if old {
			in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		}
		return in
	}
	variants := []struct {
		name string
		in   *dynamodb.UpdateItemInput
	}{
		{"raw floor: ADD n 1 on a tiny item, NONE", addN(indexed, tiny, types.ReturnValueNone)},
		{"ADD n 1 on the limiter's item, NONE", addN(indexed, item, types.ReturnValueNone)},
		{"ADD n 1 on the limiter's item, ALL_NEW", addN(indexed, item, types.ReturnValueAllNew)},
		{"the limiter's ADDs, no condition, NONE", limiterWrite(indexed, false, types.ReturnValueNone, false)},
		{"the limiter's ADDs and condition, NONE", limiterWrite(indexed, true, types.ReturnValueNone, false)},
		{"the limiter's ADDs and condition, UPDATED_NEW", limiterWrite(indexed, true, types.ReturnValueUpdatedNew, false)},
		{"the limiter's ADDs and condition, ALL_NEW", limiterWrite(indexed, true, types.ReturnValueAllNew, false)},
		{"the limiter's write (ALL_NEW, ALL_OLD on failure)", limiterWrite(indexed, true, types.ReturnValueAllNew, true)},
		{"the limiter's write, table without indexes", limiterWrite(plain, true, types.ReturnValueAllNew, true)},
		{"raw floor, table without indexes", addN(plain, tiny, types.ReturnValueNone)},
	}
	const writers, slice, warmup = 32, 3 * time.Second, 20 * time.Second
	send := func(in *dynamodb.UpdateItemInput, d time.Duration) (ok, failed int64) {
		var okN, failN atomic.Int64
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for time.Now().Before(end) {
					if _, err := client.UpdateItem(ctx, in); err != nil {
						failN.Add(1)
						continue
					}
					okN.Add(1)
				}
			})
		}
		wg.Wait()
		return okN.Load(), failN.Load()
	}
	send(variants[7].in, warmup/2) // a fresh server is slower for its first tens of seconds
	send(variants[0].in, warmup/2)
	rate := make([][]float64, len(variants)) // per variant, per round
	for r := range rounds {
		// Each round starts at another variant, so that none always follows
		// the same one (the server warms up for minutes).
		for k := range variants {
			i := (k + r) % len(variants)
			v := variants[i]
			ok, failed := send(v.in, slice)
			if failed > 0 {
				t.Errorf("%s: %d failed writes in round %d", v.name, failed, r+1)
			}
			rate[i] = append(rate[i], float64(ok)/slice.Seconds())
		}
	}
	var out strings.Builder
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\twrites/s (median)\tover the raw floor (median)\t(range)\t")
	for i, v := range variants {
		ratios := make([]float64, rounds)
		for r := range rounds {
			ratios[r] = rate[i][r] / rate[0][r]
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.3f-%.3f\t\n", v.name, median(rate[i]), median(ratios), slices.Min(ratios), slices.Max(ratios))
	}
	tw.Flush()
	t.Logf("%d writers, %d rounds of %v slices, DynamoDB Local:\n%s", writers, rounds, slice, out.String())
}

// recordingStore keeps a copy of the last conditional update without SET
// it sent: the limiter's consumption write (a store keeps nothing of an
// input: the limiter reuses its values).
type recordingStore struct {
	store.Store
	last *store.UpdateInput
}

func (s *recordingStore) Update(ctx context.Context, in store.UpdateInput) (store.WriteOutput, error) {
	if in.Expr.Condition != "" && !strings.Contains(in.Expr.Update, "SET") {
		cp := in
		cp.Expr = in.Expr.Clone()
		s.last = &cp
	}
	return s.Store.Update(ctx, in)
}

func dynamoKey(k store.Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		store.AttrPK: &types.AttributeValueMemberS{Value: k.PK},
		store.AttrSK: &types.AttributeValueMemberS{Value: k.SK},
	}
}

func dynamoValue(v store.Value) types.AttributeValue {
	if s, ok := v.AsString(); ok {
		return &types.AttributeValueMemberS{Value: s}
	}
	n, _ := v.AsInt()
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// usedOnly returns the names and values expr uses.
func usedOnly(expr string, names map[string]string, values map[string]types.AttributeValue) (map[string]string, map[string]types.AttributeValue) {
	n, v := map[string]string{}, map[string]types.AttributeValue{}
	for _, tok := range strings.FieldsFunc(expr, func(r rune) bool { return r == ' ' || r == ',' || r == '(' || r == ')' }) {
		if name, ok := names[tok]; ok {
			n[tok] = name
		}
		if val, ok := values[tok]; ok {
			v[tok] = val
		}
	}
	return n, v
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
