package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/dynamotest"
)

// table create, check and describe on a table limiterctl creates itself,
// with the dummy credentials it uses for an --endpoint when the
// environment has none.
func TestTableCommands(t *testing.T) {
	c := newCLI(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	c.table = "ops-" + strings.ReplaceAll(t.Name(), "/", "-")
	own := dynamotest.NewClient(c.srv.Endpoint, func(o *dynamodb.Options) {
		o.Credentials = staticCredentials("local", "local") // limiterctl's database in DynamoDB Local
	})
	t.Cleanup(func() { _, _ = own.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &c.table}) })

	out := c.fails(exitFailure, []string{"does not exist", "limiterctl table create", "1 check(s) failed"}, "table", "check")
	contains(t, out, "FAIL")
	c.fails(exitStoreError, []string{"not found", "limiterctl table create"}, "entity", "list")

	contains(t, c.ok("table", "create"), "is ACTIVE", "GSI2 and GSI3 (keys only)", "schema version 1")
	c.ok("table", "create") // idempotent
	var check struct {
		OK     bool    `json:"ok"`
		Checks []check `json:"checks"`
	}
	c.json(&check, "table", "check")
	if !check.OK || len(check.Checks) != 6 {
		t.Fatalf("table check: %+v", check)
	}
	for _, ch := range check.Checks {
		if ch.Result != "ok" {
			t.Errorf("check %s: %s (%s)", ch.Name, ch.Result, ch.Detail)
		}
	}

	c.ok("entity", "create", "team")
	c.ok("entity", "create", "key-1", "--parent", "team")
	c.ok("limits", "set", "--entity", "team", "rpm:10/min")
	c.ok("limits", "set", "--resource", "gpt-4", "rpm:10/min")
	c.ns = "other"
	c.ok("entity", "create", "elsewhere")
	c.ns = "default"
	lim := c.limiterWith(own)
	for _, e := range []string{"key-1", "key-2"} {
		c.acquire(lim, e, "gpt-4", nil, map[string]int64{"rpm": 1})
	}
	var info tableInfo
	c.json(&info, "table", "describe", "--scan")
	if info.Status != "ACTIVE" || info.BillingMode != "PAY_PER_REQUEST" || info.Stream != "NEW_AND_OLD_IMAGES" ||
		info.SchemaVersion != 1 || info.Entities != 2 || info.StoredLimits != 2 || len(info.Indexes) != 2 {
		t.Fatalf("table describe: %+v", info)
	}
	want := []admin.NamespaceInfo{
		{Name: "default", Items: 10, Buckets: 2, BucketItems: 2, Resources: 1, Entities: 2, Limits: 2, AuditRecords: 4},
		{Name: "other", Items: 2, Entities: 1, AuditRecords: 1},
	}
	if len(info.Scan) != 2 || info.Scan[0] != want[0] || info.Scan[1] != want[1] {
		t.Fatalf("scan: %+v, want %+v", info.Scan, want)
	}
	out = c.ok("table", "describe")
	contains(t, out, "DynamoDB's estimates", "entities", "2 (from GSI3", "not counted: add --scan")
}

// A table with another layout fails the key check.
func TestTableCheckFindsAnotherLayout(t *testing.T) {
	c := newCLI(t)
	c.table = "other-layout"
	_, err := c.srv.Client.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            &c.table,
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: strPtr("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: strPtr("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.srv.Client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &c.table})
	})
	out := c.fails(exitFailure, []string{"check(s) failed"}, "table", "check")
	contains(t, out, "keys and indexes", "FAIL", "index GSI2 is missing", "stream", "warn")
	c.fails(exitFailure, []string{"different schema", "deploy/"}, "table", "create")
}

func strPtr(s string) *string { return &s }
