package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/shardlimit/limiter/store/internal/schema"
)

// ProvisionAPI is the part of the DynamoDB client that [CreateTable] calls,
// each method the DynamoDB operation of its name.
// A *dynamodb.Client implements it.
type ProvisionAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// ErrSchemaMismatch is matched (errors.Is) by the error of [CreateTable]
// when the table exists with other keys or indexes than the schema's, and
// by the error of any Store call that the table refused because its keys
// or indexes are not the schema's (that error names the table and points
// to CreateTable; it also matches store.ErrValidation).
var ErrSchemaMismatch = errors.New("dynamo: the table exists with a different schema")

// CreateTable creates table with the limiter's layout (see [store.AttrPK])
// and waits until it and its indexes are ACTIVE:
//
//   - partition and sort keys of type S;
//   - the indexes GSI2 and GSI3 as global secondary indexes with S keys,
//     projecting KEYS_ONLY;
//   - billing mode PAY_PER_REQUEST;
//   - a stream with NEW_AND_OLD_IMAGES (for the usage aggregator), unless
//     [WithStream](false);
//   - time to live on the "ttl" attribute (UpdateTimeToLive), unless
//     [WithTTL](false).
//
// It is idempotent: when the table exists with the layout's key schema and
// indexes it only waits for it and enables time to live (an "already
// enabled" answer counts as success), leaving billing mode and stream as
// they are. When the table exists with other keys, or lacks an index or has
// it with other keys or projection, it returns an error matching
// [ErrSchemaMismatch] that says what differs. It waits as long as ctx
// allows. A nil ctx or client, or an empty table name, is a
// store.ValidationError, before any call.
func CreateTable(ctx context.Context, client ProvisionAPI, table string, opts ...Option) error {
	switch {
	case ctx == nil:
		return validationf("dynamo: CreateTable: ctx is nil: pass a context (context.Background() when there is none)")
	case client == nil:
		return validationf("dynamo: CreateTable: the client is nil")
	case table == "":
		return validationf("dynamo: CreateTable: the table name is empty")
	}
	o := buildOptions(opts)
	desc, err := describe(ctx, client, table)
	if err != nil {
		return err
	}
	if desc == nil {
		out, err := client.CreateTable(ctx, createTableInput(table, o.schema, !o.noStream))
		var inUse *types.ResourceInUseException
		switch {
		case errors.As(err, &inUse):
			// Created meanwhile by someone else: check it below.
			var derr error
			if desc, derr = describe(ctx, client, table); derr != nil {
				return derr
			}
			if desc == nil {
				return fmt.Errorf("dynamo: create table %s: %w", table, err)
			}
		case err != nil:
			return fmt.Errorf("dynamo: create table %s: %w", table, err)
		default:
			desc = out.TableDescription
		}
	}
	if err := checkSchema(table, desc, o.schema); err != nil {
		return err
	}
	if err := waitActive(ctx, client, table, desc); err != nil {
		return err
	}
	return enableTTL(ctx, client, table, o.schema.TTLAttribute)
}

// CheckTable reports whether a table, as DescribeTable describes it, has
// the limiter's keys and indexes, as [CreateTable] checks an existing
// table: the error
// matches [ErrSchemaMismatch] and lists every difference. It does no I/O;
// billing mode, stream and time to live are not part of the check.
func CheckTable(d *types.TableDescription, opts ...Option) error {
	if d == nil {
		return fmt.Errorf("%w: no table description", ErrSchemaMismatch)
	}
	return checkSchema(aws.ToString(d.TableName), d, buildOptions(opts).schema)
}

// describe returns the table's description, or nil when there is no table.
func describe(ctx context.Context, client ProvisionAPI, table string) (*types.TableDescription, error) {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dynamo: describe table %s: %w", table, err)
	}
	if out.Table == nil {
		return nil, fmt.Errorf("dynamo: describe table %s: no description in the answer", table)
	}
	return out.Table, nil
}

func createTableInput(table string, sc schema.Schema, stream bool) *dynamodb.CreateTableInput {
	var attrs []types.AttributeDefinition
	seen := map[string]bool{}
	def := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			attrs = append(attrs, types.AttributeDefinition{AttributeName: &name, AttributeType: types.ScalarAttributeTypeS})
		}
	}
	def(sc.PartitionKey)
	def(sc.SortKey)
	in := &dynamodb.CreateTableInput{
		TableName:   &table,
		KeySchema:   keySchema(sc.PartitionKey, sc.SortKey),
		BillingMode: types.BillingModePayPerRequest,
	}
	if stream {
		in.StreamSpecification = &types.StreamSpecification{
			StreamEnabled:  boolPtr(true),
			StreamViewType: types.StreamViewTypeNewAndOldImages,
		}
	}
	for _, ix := range sc.Indexes {
		def(ix.PartitionKey)
		def(ix.SortKey)
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  &ix.Name,
			KeySchema:  keySchema(ix.PartitionKey, ix.SortKey),
			Projection: &types.Projection{ProjectionType: projection(ix.Projection)},
		})
	}
	in.AttributeDefinitions = attrs
	return in
}

func keySchema(pk, sk string) []types.KeySchemaElement {
	ks := []types.KeySchemaElement{{AttributeName: &pk, KeyType: types.KeyTypeHash}}
	if sk != "" {
		ks = append(ks, types.KeySchemaElement{AttributeName: &sk, KeyType: types.KeyTypeRange})
	}
	return ks
}

func projection(p schema.Projection) types.ProjectionType {
	if p == schema.ProjectAll {
		return types.ProjectionTypeAll
	}
	return types.ProjectionTypeKeysOnly
}

// checkSchema compares an existing table with the schema: table keys,
// their types, and each of the schema's indexes (extra indexes are
// allowed).
func checkSchema(table string, d *types.TableDescription, sc schema.Schema) error {
	var diffs []string
	attrType := map[string]types.ScalarAttributeType{}
	for _, a := range d.AttributeDefinitions {
		attrType[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	keys := func(where string, got []types.KeySchemaElement, pk, sk string) {
		want := describeKeys(keySchema(pk, sk))
		if have := describeKeys(got); have != want {
			diffs = append(diffs, fmt.Sprintf("%s keys are %s, want %s", where, have, want))
			return
		}
		for _, n := range []string{pk, sk} {
			if n != "" && attrType[n] != types.ScalarAttributeTypeS {
				diffs = append(diffs, fmt.Sprintf("%s key %s has type %q, want S", where, n, attrType[n]))
			}
		}
	}
	keys("table", d.KeySchema, sc.PartitionKey, sc.SortKey)
	for _, ix := range sc.Indexes {
		var found bool
		for _, g := range d.GlobalSecondaryIndexes {
			if aws.ToString(g.IndexName) != ix.Name {
				continue
			}
			found = true
			keys("index "+ix.Name, g.KeySchema, ix.PartitionKey, ix.SortKey)
			var p string
			if g.Projection != nil {
				p = string(g.Projection.ProjectionType)
			}
			if want := string(projection(ix.Projection)); p != want {
				diffs = append(diffs, fmt.Sprintf("index %s projects %s, want %s", ix.Name, p, want))
			}
		}
		if !found {
			diffs = append(diffs, fmt.Sprintf("index %s is missing", ix.Name))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: table %s: %s", ErrSchemaMismatch, table, strings.Join(diffs, "; "))
	}
	return nil
}

func describeKeys(ks []types.KeySchemaElement) string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = aws.ToString(k.AttributeName) + " " + string(k.KeyType)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// provisionSleep pauses between DescribeTable polls; tests replace it.
var provisionSleep = sleepContext

// waitActive polls DescribeTable until the table and all its indexes are
// ACTIVE, starting from the description in hand.
func waitActive(ctx context.Context, client ProvisionAPI, table string, d *types.TableDescription) error {
	delay := 100 * time.Millisecond
	for !active(d) {
		if d.TableStatus == types.TableStatusDeleting {
			return fmt.Errorf("dynamo: table %s is being deleted", table)
		}
		if err := provisionSleep(ctx, delay); err != nil {
			return fmt.Errorf("dynamo: waiting for table %s to become ACTIVE (status %s): %w", table, d.TableStatus, err)
		}
		delay = min(2*delay, 2*time.Second)
		var err error
		if d, err = describe(ctx, client, table); err != nil {
			return err
		}
		if d == nil {
			return fmt.Errorf("dynamo: table %s disappeared while waiting for it", table)
		}
	}
	return nil
}

func active(d *types.TableDescription) bool {
	if d.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range d.GlobalSecondaryIndexes {
		if g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

// enableTTL turns on time to live; an answer that it already is counts as
// success.
func enableTTL(ctx context.Context, client ProvisionAPI, table, attr string) error {
	if attr == "" {
		return nil
	}
	_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: &attr,
			Enabled:       boolPtr(true),
		},
	})
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == codeValidation &&
		strings.Contains(strings.ToLower(api.ErrorMessage()), "already enabled") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dynamo: enable time to live on %s.%s: %w", table, attr, err)
	}
	return nil
}
