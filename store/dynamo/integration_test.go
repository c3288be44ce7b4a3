package dynamo_test

// Integration tests against DynamoDB Local for what the conformance suite
// does not cover: capacity figures, the table layout, data written by
// other clients, pagination and unprocessed keys at DynamoDB's size limits.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
	"github.com/shardlimit/limiter/store/internal/schema"
	"github.com/shardlimit/limiter/store/storetest"
)

func newStore(t *testing.T) (*dynamo.Store, *dynamotest.Server) {
	t.Helper()
	srv := dynamotest.Start(t)
	return dynamo.New(srv.Client, srv.NewTable(t)), srv
}

// The keys-only indexes are written when a bucket is created, never by a
// token update: the hot path costs 1 WCU.
func TestIndexWritesOnlyWhenIndexKeysChange(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	k := store.Key{PK: "ns/BUCKET#e#r#0", SK: "#STATE"}
	out, err := st.Put(ctx, store.PutInput{Item: store.Item{
		"PK": store.Str(k.PK), "SK": store.Str(k.SK),
		"GSI2PK": store.Str("ns/RESOURCE#r"), "GSI2SK": store.Str("BUCKET#e#0"),
		"GSI3PK": store.Str("ns/ENTITY#e"), "GSI3SK": store.Str("BUCKET#r#0"),
		"b_rpm_tk": store.Int(100_000), "b_rpm_tc": store.Int(0),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Consumed != (store.Capacity{WriteUnits: 3, IndexWriteUnits: 2}) {
		t.Errorf("create: Consumed = %+v, want 1 table + 2 index WCU", out.Consumed)
	}
	up, err := st.Update(ctx, store.UpdateInput{Key: k, Return: store.ReturnAllNew,
		Expr: storetest.Build(t, store.Update{}.Add("b_rpm_tk", store.Int(-1000)).Add("b_rpm_tc", store.Int(1000)),
			store.And(store.Name("PK").Exists(), store.Name("b_rpm_tk").GreaterThanEqual(store.Int(1000))))})
	if err != nil {
		t.Fatal(err)
	}
	if up.Consumed != (store.Capacity{WriteUnits: 1}) {
		t.Errorf("token update: Consumed = %+v, want 1 WCU and no index write", up.Consumed)
	}
	if n, _ := up.Attributes.Int("b_rpm_tk"); n != 99_000 {
		t.Errorf("ALL_NEW %v", up.Attributes)
	}
	got, err := st.Query(ctx, store.QueryInput{Index: store.IndexGSI3, PartitionKey: "ns/ENTITY#e", SortKeyPrefix: "BUCKET#"})
	if err != nil || len(got.Items) != 1 || len(got.Items[0]) != 4 {
		t.Errorf("keys-only GSI3 query: %v %v", got.Items, err)
	}
}

// A failed condition reports the old item (when asked) and the estimated
// capacity, which DynamoDB does not report.
func TestConditionFailureOnDynamoDBLocal(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	k := store.Key{PK: "p", SK: "s"}
	big := strings.Repeat("x", 1500)
	if _, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("s"), "tk": store.Int(5), "pad": store.Str(big)}}); err != nil {
		t.Fatal(err)
	}
	in := store.UpdateInput{Key: k, ReturnOldOnConditionFailure: true,
		Expr: storetest.Build(t, store.Update{}.Add("tk", store.Int(-10)), store.Name("tk").GreaterThanEqual(store.Int(10)))}
	out, err := st.Update(ctx, in)
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) {
		t.Fatalf("error %v", err)
	}
	if n, _ := cf.Item.Int("tk"); n != 5 || cf.Item["pad"] != store.Str(big) {
		t.Errorf("old item %v", cf.Item)
	}
	if out.Consumed.WriteUnits != 2 {
		t.Errorf("estimate for a 1.5 KB item: %+v, want 2 WCU", out.Consumed)
	}
	in.Key.SK = "absent"
	out, err = st.Update(ctx, in)
	if !errors.As(err, &cf) || cf.Item != nil || out.Consumed.WriteUnits != 1 {
		t.Errorf("missing item: %v %+v", err, out.Consumed)
	}
}

// Data that did not come through the store: other types are an error
// naming the attribute; integers in any notation read exactly.
func TestForeignData(t *testing.T) {
	st, srv := newStore(t)
	ctx := context.Background()
	put := func(sk string, attrs map[string]types.AttributeValue) {
		attrs["PK"] = &types.AttributeValueMemberS{Value: "p"}
		attrs["SK"] = &types.AttributeValueMemberS{Value: sk}
		if _, err := srv.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(st.Table()), Item: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	put("bool", map[string]types.AttributeValue{"flag": &types.AttributeValueMemberBOOL{Value: true}})
	put("frac", map[string]types.AttributeValue{"b_tpm_tk": &types.AttributeValueMemberN{Value: "1.5"}})
	put("huge", map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "123456789012345678901234567890"}})
	// DynamoDB Local keeps a number as it was sent; DynamoDB normalizes it.
	put("exp", map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "1e3"}, "m": &types.AttributeValueMemberN{Value: "100.00"}})

	for sk, want := range map[string]string{"bool": `"flag" (BOOL)`, "frac": `"b_tpm_tk" (N 1.5): not an integer`, "huge": `"n" (N 123456789012345678901234567890): out of the int64 range`} {
		_, err := st.Get(ctx, store.GetInput{Key: store.Key{PK: "p", SK: sk}, ConsistentRead: true})
		var de *dynamo.DecodeError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want a DecodeError saying %s", sk, err, want)
		}
	}
	got, err := st.Get(ctx, store.GetInput{Key: store.Key{PK: "p", SK: "exp"}, ConsistentRead: true})
	if n, _ := got.Item.Int("n"); err != nil || n != 1000 {
		t.Errorf("1e3: %v %v", got.Item, err)
	}
	if m, _ := got.Item.Int("m"); m != 100 {
		t.Errorf("100.00: %v", got.Item)
	}
	// An applied write whose result cannot be read: the outcome is known
	// to the server but not to the caller.
	_, err = st.Update(ctx, store.UpdateInput{Key: store.Key{PK: "p", SK: "bool"}, Return: store.ReturnAllNew,
		Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
	if !store.OutcomeUnknown(err) {
		t.Errorf("undecodable ALL_NEW: %v", err)
	}
	// The old item of a failed condition cannot be read: still a condition
	// failure.
	_, err = st.Update(ctx, store.UpdateInput{Key: store.Key{PK: "p", SK: "bool"}, ReturnOldOnConditionFailure: true,
		Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Name("n").GreaterThan(store.Int(5)))})
	var de *dynamo.DecodeError
	if !errors.Is(err, store.ErrConditionFailed) || !errors.As(err, &de) {
		t.Errorf("undecodable old item: %v", err)
	}
}

// A missing table is a configuration fault, not an outage.
func TestMissingTable(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, "no-such-table")
	_, err := st.Update(context.Background(), store.UpdateInput{Key: store.Key{PK: "a", SK: "b"},
		Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
	var api smithy.APIError
	if err == nil || errors.Is(err, store.ErrUnavailable) || !errors.As(err, &api) || api.ErrorCode() != "ResourceNotFoundException" {
		t.Errorf("error %v", err)
	}
}

func TestCreateTableOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	ctx := context.Background()
	name := srv.NewTable(t)
	if err := dynamo.CreateTable(ctx, srv.Client, name); err != nil {
		t.Errorf("second CreateTable: %v", err)
	}
	d, err := srv.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
	if err != nil {
		t.Fatal(err)
	}
	tbl := d.Table
	if tbl.TableStatus != types.TableStatusActive || tbl.LatestStreamArn == nil ||
		tbl.StreamSpecification == nil || tbl.StreamSpecification.StreamViewType != types.StreamViewTypeNewAndOldImages {
		t.Errorf("table %s, stream %v %+v", tbl.TableStatus, tbl.LatestStreamArn, tbl.StreamSpecification)
	}
	if tbl.BillingModeSummary == nil || tbl.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing %+v", tbl.BillingModeSummary)
	}
	for _, g := range tbl.GlobalSecondaryIndexes {
		if g.Projection.ProjectionType != types.ProjectionTypeKeysOnly {
			t.Errorf("index %s projects %s", *g.IndexName, g.Projection.ProjectionType)
		}
	}
	ttl, err := srv.Client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name})
	if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled || *ttl.TimeToLiveDescription.AttributeName != "ttl" {
		t.Errorf("ttl %+v %v", ttl, err)
	}

	other := schema.Default()
	other.Indexes = other.Indexes[:1]
	other.Indexes[0].Projection = schema.ProjectAll
	otherName := srv.NewTable(t, dynamo.WithSchema(other))
	err = dynamo.CreateTable(ctx, srv.Client, otherName)
	if !errors.Is(err, dynamo.ErrSchemaMismatch) || !strings.Contains(err.Error(), "index GSI2 projects ALL, want KEYS_ONLY; index GSI3 is missing") {
		t.Errorf("mismatch: %v", err)
	}
}

// Query follows LastEvaluatedKey across DynamoDB's 1 MB pages.
func TestQueryPagesOnDynamoDBLocal(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	const n = 30 // 30 x 100 KB: three or four pages
	pad := strings.Repeat("q", 100_000)
	for i := range n {
		if _, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str(fmt.Sprintf("%03d", i)), "pad": store.Str(pad)}}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := st.Query(ctx, store.QueryInput{PartitionKey: "p", ConsistentRead: true})
	if err != nil || len(out.Items) != n {
		t.Fatalf("%d items, %v", len(out.Items), err)
	}
	for i, it := range out.Items {
		if sk, _ := it.Str("SK"); sk != fmt.Sprintf("%03d", i) {
			t.Fatalf("item %d has SK %s", i, sk)
		}
	}
	// 3 MB strongly consistent: 1 RCU per 4 KB.
	if out.Consumed.ReadUnits < 700 {
		t.Errorf("Consumed = %+v", out.Consumed)
	}
	out, err = st.Query(ctx, store.QueryInput{PartitionKey: "p", ConsistentRead: true, Limit: 25})
	if err != nil || len(out.Items) != 25 {
		t.Errorf("limit 25: %d items, %v", len(out.Items), err)
	}
}

// A BatchGetItem answer is capped at 16 MB; DynamoDB leaves the rest in
// UnprocessedKeys, which BatchGet reads in further rounds.
func TestBatchGetUnprocessedKeysOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	api := &countingAPI{API: srv.Client}
	st := dynamo.New(api, srv.NewTable(t))
	ctx := context.Background()
	const n = 50 // 50 x 380 KB = 19 MB
	pad := strings.Repeat("b", 380_000)
	keys := make([]store.Key, 0, n+1)
	for i := range n {
		k := store.Key{PK: fmt.Sprintf("p%02d", i), SK: "s"}
		if _, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str(k.PK), "SK": store.Str(k.SK), "i": store.Int(int64(i)), "pad": store.Str(pad)}}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	keys = append(keys, store.Key{PK: "absent", SK: "s"})
	out, err := st.BatchGet(ctx, store.BatchGetInput{Keys: keys, ConsistentRead: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range out.Items[:n] {
		if got, _ := it.Int("i"); got != int64(i) {
			t.Fatalf("item %d: i = %d", i, got)
		}
	}
	if out.Items[n] != nil {
		t.Errorf("absent key: %v", out.Items[n])
	}
	if api.batchGets.Load() < 2 {
		t.Errorf("%d BatchGetItem calls: DynamoDB Local left no key unprocessed", api.batchGets.Load())
	}
	t.Logf("%d BatchGetItem rounds", api.batchGets.Load())
}

// countingAPI counts BatchGetItem calls.
type countingAPI struct {
	dynamo.API
	batchGets atomic.Int64
}

func (c *countingAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.batchGets.Add(1)
	return c.API.BatchGetItem(ctx, in, optFns...)
}

// Reserved words and odd limit names travel as placeholders.
func TestPlaceholderNames(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	k := store.Key{PK: "p", SK: "s"}
	out, err := st.Update(ctx, store.UpdateInput{Key: k, Return: store.ReturnUpdatedNew,
		Expr: storetest.Build(t, store.Update{}.Set("ttl", store.Int(1_800_000_000)).Add("b_gpt-3.5_tk", store.Int(-1)).Add("rate-limit", store.Int(1)).Set("size", store.Str("x")),
			store.Or(store.Name("PK").NotExists(), store.Name("ttl").LessThan(store.Int(0))))})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Attributes) != 4 {
		t.Errorf("UPDATED_NEW %v", out.Attributes)
	}
}
