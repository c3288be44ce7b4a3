package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
)

func init() {
	register(
		&command{path: "table create", short: "create the table (keys, indexes, stream, TTL, on-demand) and write its schema version",
			setup: func(c *cmdCtx) func() error {
				timeout := c.fs.Duration("timeout", 5*time.Minute, "how long to wait for the table to become ACTIVE")
				return func() error { return tableCreate(c, *timeout) }
			}},
		&command{path: "table check", short: "check keys, indexes, stream, TTL and schema version (exit 1 on a failed check)",
			setup: noFlags(tableCheck)},
		&command{path: "table describe", short: "what the table holds: status, sizes, indexes, counts in the namespace",
			setup: func(c *cmdCtx) func() error {
				scan := c.fs.Bool("scan", false, "count every item per namespace and kind with a keys-only Scan (reads the whole table)")
				return func() error { return tableDescribe(c, *scan) }
			}},
	)
}

func tableCreate(c *cmdCtx, timeout time.Duration) error {
	table, client, err := c.tableClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	if err := dynamo.CreateTable(ctx, client, table); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	if err := adm.InitTable(c.ctx); err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(map[string]any{"table": table, "status": "ACTIVE", "schema_version": admin.SchemaVersion})
	}
	fmt.Fprintf(c.stdout, "Table %s is ACTIVE: keys PK and SK, indexes GSI2 and GSI3 (keys only), stream NEW_AND_OLD_IMAGES, "+
		"time to live on %s, on-demand billing; schema version %d.\n", table, store.AttrTTL, admin.SchemaVersion)
	fmt.Fprintln(c.stdout, "For production, also turn on point-in-time recovery and deletion protection (deploy/ does).")
	return nil
}

// check is one line of "table check".
type check struct {
	Name   string `json:"check"`
	Result string `json:"result"` // ok, warn, FAIL
	Detail string `json:"detail"`
}

func tableCheck(c *cmdCtx) error {
	table, client, err := c.tableClient()
	if err != nil {
		return err
	}
	var checks []check
	add := func(name, result, format string, a ...any) {
		checks = append(checks, check{name, result, fmt.Sprintf(format, a...)})
	}
	out, err := client.DescribeTable(c.ctx, &dynamodb.DescribeTableInput{TableName: &table})
	var nf *types.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		add("table", "FAIL", "%s does not exist in region %s: create it with limiterctl table create (or deploy/)", table, c.regionName())
		return c.reportChecks(checks)
	case err != nil:
		return err
	}
	d := out.Table
	if d.TableStatus == types.TableStatusActive {
		add("table", "ok", "%s is ACTIVE", table)
	} else {
		add("table", "warn", "%s is %s", table, d.TableStatus)
	}
	keysOK := dynamo.CheckTable(d)
	if keysOK != nil {
		add("keys and indexes", "FAIL", "%v", keysOK)
	} else {
		add("keys and indexes", "ok", "PK, SK; GSI2 and GSI3 keys-only")
	}
	if s := d.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) && s.StreamViewType == types.StreamViewTypeNewAndOldImages {
		add("stream", "ok", "NEW_AND_OLD_IMAGES")
	} else {
		add("stream", "warn", "no NEW_AND_OLD_IMAGES stream: the aggregator (usage, proactive sharding) cannot run")
	}
	ttl, err := client.DescribeTimeToLive(c.ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	switch {
	case err != nil:
		return err
	case ttl.TimeToLiveDescription != nil && ttl.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabled &&
		aws.ToString(ttl.TimeToLiveDescription.AttributeName) == store.AttrTTL:
		add("time to live", "ok", "on %s", store.AttrTTL)
	default:
		add("time to live", "warn", "not enabled on %s: idle buckets, usage snapshots and audit records never expire (limiterctl table create enables it)", store.AttrTTL)
	}
	if d.BillingModeSummary != nil && d.BillingModeSummary.BillingMode == types.BillingModeProvisioned {
		add("billing", "warn", "PROVISIONED: hot buckets shard at 1,000 writes a second per partition, which on-demand serves without capacity planning")
	} else {
		add("billing", "ok", "PAY_PER_REQUEST")
	}
	if keysOK != nil {
		add("schema version", "warn", "not read: the table has other keys")
		return c.reportChecks(checks)
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	switch v, found, err := adm.TableSchemaVersion(c.ctx); {
	case err != nil:
		return err
	case !found:
		add("schema version", "warn", "none yet: limiterctl table create writes it (so does a limiter's first read)")
	case v != admin.SchemaVersion:
		add("schema version", "FAIL", "%d; this limiterctl knows %d", v, admin.SchemaVersion)
	default:
		add("schema version", "ok", "%d", v)
	}
	return c.reportChecks(checks)
}

func (c *cmdCtx) reportChecks(checks []check) error {
	failed := 0
	for _, ch := range checks {
		if ch.Result == "FAIL" {
			failed++
		}
	}
	if c.json() {
		if err := c.printJSON(map[string]any{"table": c.table, "ok": failed == 0, "checks": checks}); err != nil {
			return err
		}
	} else {
		w := c.tabular("CHECK", "RESULT", "DETAIL")
		for _, ch := range checks {
			row(w, ch.Name, ch.Result, ch.Detail)
		}
		w.Flush()
	}
	if failed > 0 {
		return &failure{fmt.Sprintf("%d check(s) failed", failed)}
	}
	return nil
}

// tableInfo is "table describe" in -o json.
type tableInfo struct {
	Table              string                `json:"table"`
	Status             string                `json:"status"`
	BillingMode        string                `json:"billing_mode"`
	ItemCountEstimate  int64                 `json:"item_count_estimate"`
	SizeBytesEstimate  int64                 `json:"size_bytes_estimate"`
	Stream             string                `json:"stream"`
	TimeToLive         string                `json:"time_to_live"`
	PointInTime        string                `json:"point_in_time_recovery"`
	DeletionProtection bool                  `json:"deletion_protection"`
	SchemaVersion      int64                 `json:"schema_version"`
	Indexes            []indexInfo           `json:"indexes"`
	Namespace          string                `json:"namespace"`
	Entities           int64                 `json:"entities"`
	StoredLimits       int64                 `json:"stored_limits"`
	Scan               []admin.NamespaceInfo `json:"scan,omitempty"`
}

type indexInfo struct {
	Name              string `json:"name"`
	Keys              string `json:"keys"`
	Projection        string `json:"projection"`
	Status            string `json:"status"`
	ItemCountEstimate int64  `json:"item_count_estimate"`
}

func tableDescribe(c *cmdCtx, scan bool) error {
	table, client, err := c.tableClient()
	if err != nil {
		return err
	}
	out, err := client.DescribeTable(c.ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		return err
	}
	d := out.Table
	info := tableInfo{Table: table, Status: string(d.TableStatus), BillingMode: "PROVISIONED",
		ItemCountEstimate: aws.ToInt64(d.ItemCount), SizeBytesEstimate: aws.ToInt64(d.TableSizeBytes),
		DeletionProtection: aws.ToBool(d.DeletionProtectionEnabled), Stream: "off", Namespace: c.namespace,
		TimeToLive: "unknown", PointInTime: "unknown"}
	if d.BillingModeSummary != nil {
		info.BillingMode = string(d.BillingModeSummary.BillingMode)
	}
	if s := d.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
		info.Stream = string(s.StreamViewType)
	}
	for _, g := range d.GlobalSecondaryIndexes {
		ix := indexInfo{Name: aws.ToString(g.IndexName), Status: string(g.IndexStatus), ItemCountEstimate: aws.ToInt64(g.ItemCount)}
		var ks []string
		for _, k := range g.KeySchema {
			ks = append(ks, aws.ToString(k.AttributeName))
		}
		ix.Keys = strings.Join(ks, ", ")
		if g.Projection != nil {
			ix.Projection = string(g.Projection.ProjectionType)
		}
		info.Indexes = append(info.Indexes, ix)
	}
	if ttl, err := client.DescribeTimeToLive(c.ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table}); err == nil && ttl.TimeToLiveDescription != nil {
		info.TimeToLive = strings.TrimSpace(string(ttl.TimeToLiveDescription.TimeToLiveStatus) + " " + aws.ToString(ttl.TimeToLiveDescription.AttributeName))
	}
	if pb, err := client.DescribeContinuousBackups(c.ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: &table}); err == nil &&
		pb.ContinuousBackupsDescription != nil && pb.ContinuousBackupsDescription.PointInTimeRecoveryDescription != nil {
		info.PointInTime = string(pb.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus)
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	if info.SchemaVersion, _, err = adm.TableSchemaVersion(c.ctx); err != nil {
		return err
	}
	pk := keys.ConfigIndexPK(c.namespace)
	if info.Entities, err = countIndex(c.ctx, client, table, pk, keys.ConfigEntityPrefix); err != nil {
		return err
	}
	if info.StoredLimits, err = countIndex(c.ctx, client, table, pk, keys.ConfigLimitsPrefix); err != nil {
		return err
	}
	var namespaces []admin.NamespaceInfo
	if scan {
		st, err := c.openStore()
		if err != nil {
			return err
		}
		if namespaces, err = admin.ListNamespaces(c.ctx, st); err != nil {
			return err
		}
		info.Scan = namespaces
	}
	if c.json() {
		return c.printJSON(info)
	}
	w := c.tabular()
	row(w, "table", info.Table+" ("+info.Status+")")
	row(w, "billing", info.BillingMode)
	row(w, "items", fmt.Sprintf("%d, %s (DynamoDB's estimates, refreshed about every six hours)", info.ItemCountEstimate, bytesString(info.SizeBytesEstimate)))
	row(w, "stream", info.Stream)
	row(w, "time to live", info.TimeToLive)
	row(w, "point-in-time recovery", info.PointInTime)
	row(w, "deletion protection", info.DeletionProtection)
	if info.SchemaVersion == 0 {
		row(w, "schema version", "none yet (limiterctl table create writes it)")
	} else {
		row(w, "schema version", info.SchemaVersion)
	}
	for _, ix := range info.Indexes {
		row(w, "index "+ix.Name, fmt.Sprintf("(%s) %s, %s, %d entries (estimate)", ix.Keys, ix.Projection, ix.Status, ix.ItemCountEstimate))
	}
	row(w, "namespace", info.Namespace)
	row(w, "  entities", fmt.Sprintf("%d (from GSI3: exact up to index lag)", info.Entities))
	row(w, "  stored limits", fmt.Sprintf("%d (from GSI3: exact up to index lag)", info.StoredLimits))
	if !scan {
		row(w, "  buckets", "not counted: add --scan (reads the whole table)")
	}
	w.Flush()
	if scan {
		fmt.Fprintln(c.stdout, "\nScan (exact as of the scan):")
		return c.printNamespaces(namespaces)
	}
	return nil
}

func bytesString(n int64) string {
	for i, unit := range []string{"GiB", "MiB", "KiB"} {
		if size := int64(1) << (30 - 10*i); n >= size {
			return fmt.Sprintf("%.1f %s", float64(n)/float64(size), unit)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// countIndex counts GSI3 entries of a partition with a sort-key prefix
// (Select COUNT: reads the index keys only).
func countIndex(ctx context.Context, client *dynamodb.Client, table, pk, prefix string) (int64, error) {
	in := &dynamodb.QueryInput{TableName: &table, IndexName: aws.String(store.IndexGSI3), Select: types.SelectCount,
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :sk)"),
		ExpressionAttributeNames:  map[string]string{"#pk": store.AttrGSI3PK, "#sk": store.AttrGSI3SK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}, ":sk": &types.AttributeValueMemberS{Value: prefix}}}
	var n int64
	for p := dynamodb.NewQueryPaginator(client, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return 0, err
		}
		n += int64(out.Count)
	}
	return n, nil
}
