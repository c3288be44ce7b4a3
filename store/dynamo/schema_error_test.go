package dynamo_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
	"github.com/shardlimit/limiter/store/storetest"
)

// wrongTable creates a table with the given keys (attribute name and type,
// hash first) and no index, deleted when t ends.
func wrongTable(t *testing.T, srv *dynamotest.Server, name string, keys ...[2]string) string {
	t.Helper()
	ctx := context.Background()
	in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest}
	for i, k := range keys {
		kt := types.KeyTypeHash
		if i > 0 {
			kt = types.KeyTypeRange
		}
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(k[0]), KeyType: kt})
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(k[0]), AttributeType: types.ScalarAttributeType(k[1])})
	}
	if _, err := srv.Client.CreateTable(ctx, in); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = srv.Client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	})
	return name
}

// Errors from a table with the wrong key schema name the table and point
// to the provisioning function (issue: they were DynamoDB's bare
// "The number of conditions on the keys is invalid").
func TestWrongKeySchemaNamesTableAndCreateTable(t *testing.T) {
	srv := dynamotest.Start(t)
	ctx := context.Background()
	k := store.Key{PK: "a", SK: "b"}
	item := store.Item{"PK": store.Str("a"), "SK": store.Str("b")}
	add := storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})
	ops := map[string]func(st *dynamo.Store) error{
		"Get": func(st *dynamo.Store) error { _, err := st.Get(ctx, store.GetInput{Key: k}); return err },
		"BatchGet": func(st *dynamo.Store) error {
			_, err := st.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{k}})
			return err
		},
		"Put": func(st *dynamo.Store) error { _, err := st.Put(ctx, store.PutInput{Item: item}); return err },
		"Update": func(st *dynamo.Store) error {
			_, err := st.Update(ctx, store.UpdateInput{Key: k, Expr: add})
			return err
		},
		"Delete": func(st *dynamo.Store) error { _, err := st.Delete(ctx, store.DeleteInput{Key: k}); return err },
		"Query":  func(st *dynamo.Store) error { _, err := st.Query(ctx, store.QueryInput{PartitionKey: "a"}); return err },
		"QueryGSI3": func(st *dynamo.Store) error {
			_, err := st.Query(ctx, store.QueryInput{Index: store.IndexGSI3, PartitionKey: "a"})
			return err
		},
	}
	for _, c := range []struct {
		table string
		keys  [][2]string
		ok    []string // operations this table happens to accept
	}{
		{"wrong-keys", [][2]string{{"id", "S"}}, nil},
		{"no-sort-key", [][2]string{{"PK", "S"}}, []string{"Put", "Query"}},
		{"number-keys", [][2]string{{"PK", "N"}, {"SK", "S"}}, nil},
		{"no-indexes", [][2]string{{"PK", "S"}, {"SK", "S"}}, []string{"Get", "BatchGet", "Put", "Update", "Delete", "Query"}},
	} {
		name := wrongTable(t, srv, c.table+"-"+strings.ToLower(t.Name()), c.keys...)
		st := dynamo.New(srv.Client, name)
		for op, call := range ops {
			err := call(st)
			accepted := false
			for _, o := range c.ok {
				accepted = accepted || o == op
			}
			if accepted {
				if err != nil {
					t.Errorf("%s %s: %v", c.table, op, err)
				}
				continue
			}
			var ve *store.ValidationError
			if !errors.Is(err, dynamo.ErrSchemaMismatch) || !errors.Is(err, store.ErrValidation) || !errors.As(err, &ve) ||
				!strings.Contains(err.Error(), `table "`+name+`"`) || !strings.Contains(err.Error(), "dynamo.CreateTable") {
				t.Errorf("%s %s: %v; want an error naming the table and dynamo.CreateTable, matching ErrSchemaMismatch", c.table, op, err)
			}
		}
	}
	// A malformed item on the right table is the caller's fault, not the
	// table's.
	st := dynamo.New(srv.Client, srv.NewTable(t))
	_, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("a")}})
	if !errors.Is(err, store.ErrValidation) || errors.Is(err, dynamo.ErrSchemaMismatch) {
		t.Errorf("Put without SK on the limiter's table: %v; want a plain validation error", err)
	}
}
