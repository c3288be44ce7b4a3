package dynamo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/shardlimit/limiter/store/internal/schema"
)

// fakeProvision keeps one table description and scripts TTL answers.
type fakeProvision struct {
	table     *types.TableDescription // nil: no table
	created   *dynamodb.CreateTableInput
	describes int
	// becomeActive is the number of DescribeTable calls after which a
	// CREATING table turns ACTIVE.
	becomeActive int
	ttlErr       error
	ttl          *types.TimeToLiveSpecification
}

func (f *fakeProvision) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	f.created = in
	d := &types.TableDescription{
		TableName:            in.TableName,
		TableStatus:          types.TableStatusCreating,
		KeySchema:            in.KeySchema,
		AttributeDefinitions: in.AttributeDefinitions,
	}
	for _, g := range in.GlobalSecondaryIndexes {
		d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, types.GlobalSecondaryIndexDescription{
			IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection, IndexStatus: types.IndexStatusCreating,
		})
	}
	f.table = d
	return &dynamodb.CreateTableOutput{TableDescription: d}, nil
}

func (f *fakeProvision) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if f.table == nil {
		return nil, &smithy.OperationError{Err: &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}}
	}
	f.describes++
	if f.describes >= f.becomeActive {
		f.table.TableStatus = types.TableStatusActive
		for i := range f.table.GlobalSecondaryIndexes {
			f.table.GlobalSecondaryIndexes[i].IndexStatus = types.IndexStatusActive
		}
	}
	return &dynamodb.DescribeTableOutput{Table: f.table}, nil
}

func (f *fakeProvision) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	f.ttl = in.TimeToLiveSpecification
	return &dynamodb.UpdateTimeToLiveOutput{}, f.ttlErr
}

func noSleep(t *testing.T) *[]time.Duration {
	var slept []time.Duration
	old := provisionSleep
	provisionSleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return ctx.Err() }
	t.Cleanup(func() { provisionSleep = old })
	return &slept
}

func TestCreateTableCreatesTheLimiterLayoutAndWaits(t *testing.T) {
	slept := noSleep(t)
	f := &fakeProvision{becomeActive: 3}
	if err := CreateTable(context.Background(), f, "limits"); err != nil {
		t.Fatal(err)
	}
	in := f.created
	if in == nil {
		t.Fatal("no CreateTable call")
	}
	if in.BillingMode != types.BillingModePayPerRequest || in.StreamSpecification == nil ||
		!*in.StreamSpecification.StreamEnabled || in.StreamSpecification.StreamViewType != types.StreamViewTypeNewAndOldImages {
		t.Errorf("billing/stream: %+v %+v", in.BillingMode, in.StreamSpecification)
	}
	if got := describeKeys(in.KeySchema); got != "(PK HASH, SK RANGE)" {
		t.Errorf("keys %s", got)
	}
	var defs []string
	for _, a := range in.AttributeDefinitions {
		defs = append(defs, *a.AttributeName+":"+string(a.AttributeType))
	}
	if got := strings.Join(defs, " "); got != "PK:S SK:S GSI2PK:S GSI2SK:S GSI3PK:S GSI3SK:S" {
		t.Errorf("attribute definitions %s", got)
	}
	if len(in.GlobalSecondaryIndexes) != 2 {
		t.Fatalf("indexes %+v", in.GlobalSecondaryIndexes)
	}
	for i, want := range []string{"GSI2 (GSI2PK HASH, GSI2SK RANGE) KEYS_ONLY", "GSI3 (GSI3PK HASH, GSI3SK RANGE) KEYS_ONLY"} {
		g := in.GlobalSecondaryIndexes[i]
		if got := *g.IndexName + " " + describeKeys(g.KeySchema) + " " + string(g.Projection.ProjectionType); got != want {
			t.Errorf("index %d: %s, want %s", i, got, want)
		}
	}
	if f.ttl == nil || *f.ttl.AttributeName != "ttl" || !*f.ttl.Enabled {
		t.Errorf("ttl %+v", f.ttl)
	}
	// Polled until ACTIVE, with growing pauses.
	if len(*slept) != 3 || (*slept)[0] != 100*time.Millisecond || (*slept)[1] != 200*time.Millisecond {
		t.Errorf("pauses %v", *slept)
	}
}

func TestCreateTableWithoutTTL(t *testing.T) {
	noSleep(t)
	f := &fakeProvision{}
	if err := CreateTable(context.Background(), f, "limits", WithTTL(false)); err != nil {
		t.Fatal(err)
	}
	if f.created == nil || f.ttl != nil {
		t.Fatalf("created %v, ttl %+v; want a table and no UpdateTimeToLive", f.created != nil, f.ttl)
	}
	if err := CreateTable(context.Background(), f, "limits", WithTTL(false), WithTTL(true)); err != nil || f.ttl == nil || *f.ttl.AttributeName != "ttl" {
		t.Fatalf("WithTTL(true) after false: %v, ttl %+v", err, f.ttl)
	}
}

func TestCreateTableIsIdempotent(t *testing.T) {
	noSleep(t)
	f := &fakeProvision{}
	if err := CreateTable(context.Background(), f, "limits"); err != nil {
		t.Fatal(err)
	}
	f.created = nil
	f.ttlErr = &smithy.OperationError{Err: &smithy.GenericAPIError{Code: "ValidationException", Message: "TimeToLive is already enabled"}}
	if err := CreateTable(context.Background(), f, "limits"); err != nil {
		t.Fatalf("second call: %v", err)
	}
	if f.created != nil {
		t.Error("the second call created the table again")
	}
	f.ttlErr = &smithy.OperationError{Err: &smithy.GenericAPIError{Code: "ValidationException", Message: "TimeToLive is active on a different AttributeName"}}
	if err := CreateTable(context.Background(), f, "limits"); err == nil || !strings.Contains(err.Error(), "different AttributeName") {
		t.Errorf("TTL on another attribute: %v", err)
	}
}

func TestCreateTableRejectsAnotherSchema(t *testing.T) {
	noSleep(t)
	other := schema.Default()
	other.SortKey = "sk"
	other.Indexes = []schema.Index{
		{Name: "GSI2", PartitionKey: "GSI2PK", SortKey: "GSI2SK", Projection: schema.ProjectAll},
	}
	f := &fakeProvision{}
	if err := CreateTable(context.Background(), f, "limits", WithSchema(other)); err != nil {
		t.Fatal(err)
	}
	err := CreateTable(context.Background(), f, "limits")
	if !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("error %v", err)
	}
	for _, want := range []string{
		"table keys are (PK HASH, sk RANGE), want (PK HASH, SK RANGE)",
		"index GSI2 projects ALL, want KEYS_ONLY",
		"index GSI3 is missing",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// A key of another type.
	f.table.KeySchema = keySchema("PK", "SK")
	f.table.AttributeDefinitions = []types.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: "S"}, {AttributeName: aws.String("SK"), AttributeType: "N"}}
	if err := CreateTable(context.Background(), f, "limits"); err == nil || !strings.Contains(err.Error(), `table key SK has type "N", want S`) {
		t.Errorf("key type: %v", err)
	}
}

func TestCreateTableWaitHonorsTheContext(t *testing.T) {
	noSleep(t)
	f := &fakeProvision{becomeActive: 1 << 30}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := CreateTable(ctx, f, "limits")
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "ACTIVE") {
		t.Errorf("error %v", err)
	}
}

// CheckTable judges a description as CreateTable judges an existing table.
func TestCheckTable(t *testing.T) {
	noSleep(t)
	f := &fakeProvision{}
	if err := CreateTable(context.Background(), f, "limits"); err != nil {
		t.Fatal(err)
	}
	if err := CheckTable(f.table); err != nil {
		t.Fatalf("the table CreateTable made: %v", err)
	}
	f.table.GlobalSecondaryIndexes[0].Projection = &types.Projection{ProjectionType: types.ProjectionTypeAll}
	if err := CheckTable(f.table); !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), "projects ALL") {
		t.Fatalf("an index projecting ALL: %v", err)
	}
	if err := CheckTable(nil); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("no description: %v", err)
	}
}

// WithStream(false) makes a table without a stream (load measurements:
// DynamoDB Local slows down with one).
func TestCreateTableWithoutStream(t *testing.T) {
	noSleep(t)
	f := &fakeProvision{}
	if err := CreateTable(context.Background(), f, "limits", WithStream(false)); err != nil {
		t.Fatal(err)
	}
	if f.created == nil || f.created.StreamSpecification != nil {
		t.Fatalf("created %+v, want no stream specification", f.created)
	}
	// The other options still apply: the table keeps its indexes and TTL.
	if len(f.created.GlobalSecondaryIndexes) != 2 || f.ttl == nil {
		t.Errorf("indexes %d, ttl %+v", len(f.created.GlobalSecondaryIndexes), f.ttl)
	}
}
