package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
	"github.com/shardlimit/limiter/store/memsim"
)

// The -store values.
const (
	storeMemsim        = "memsim"
	storeDynamoDBLocal = "dynamodb-local"
	storeDynamoDB      = "dynamodb"
)

// target is the store a run drives, and what the report says about it.
type target struct {
	st  store.Store
	mem *memsim.Store // memsim only: per-partition statistics
	// describe says what the store is, for the report.
	describe string
	table    string
	stream   bool
	// failedWritesBilled is false where the server reports no capacity for
	// a failed conditional write (DynamoDB Local); AWS bills 1 WCU.
	failedWritesBilled bool
	close              func()
}

// wallClock is memsim's clock in this tool: a load test runs in real time.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func openTarget(ctx context.Context, o *options) (*target, error) {
	switch o.store {
	case storeMemsim:
		mem := memsim.New(memsim.WithClock(wallClock{}), memsim.WithStream(o.stream), memsim.WithSharedResults(true),
			memsim.WithPartitionLimits(o.partitionWCU, 3000))
		ceiling := "no partition ceiling"
		if o.partitionWCU > 0 {
			ceiling = fmt.Sprintf("partition ceiling %g WCU/s", o.partitionWCU)
		}
		lat := "no server latency"
		if o.latency > 0 {
			lat = fmt.Sprintf("server latency %v per call (half before, half after the store applies it)", o.latency)
		}
		return &target{st: mem, mem: mem, describe: "memsim (" + ceiling + ", " + lat + ")",
			stream: o.stream, failedWritesBilled: true, close: func() {}}, nil
	case storeDynamoDBLocal:
		return openLocal(ctx, o)
	}
	return openAWS(ctx, o) // -store dynamodb (options.check allows no other)
}

// openLocal connects to DynamoDB Local at -endpoint, or starts one from
// the repository's npm package, and creates a fresh table (or uses -table).
func openLocal(ctx context.Context, o *options) (*target, error) {
	t := &target{failedWritesBilled: false, close: func() {}}
	endpoint := o.endpoint
	var client *dynamodb.Client
	if endpoint == "" {
		srv, err := dynamotest.Launch()
		if err != nil {
			return nil, fmt.Errorf("-store %s: start DynamoDB Local: %w", storeDynamoDBLocal, err)
		}
		t.close = srv.Stop
		endpoint, client = srv.Endpoint, srv.Client
	} else {
		client = dynamotest.NewClient(endpoint)
	}
	table, created := o.table, false
	if table == "" {
		table, created = "loadtest-"+strconv.FormatInt(time.Now().UnixNano(), 36), true
	}
	if err := provision(ctx, client, table, o.stream, true); err != nil {
		t.close()
		return nil, err
	}
	stream, err := hasStream(ctx, client, table)
	if err != nil {
		t.close()
		return nil, err
	}
	stop := t.close
	t.close = func() {
		if created && !o.keepTable {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = client.DeleteTable(dctx, &dynamodb.DeleteTableInput{TableName: &table})
			cancel()
		}
		stop()
	}
	t.st, t.table, t.stream = dynamo.New(client, table), table, stream
	t.describe = fmt.Sprintf("DynamoDB Local at %s, table %s (%s)", endpoint, table, streamWord(stream))
	return t, nil
}

// openAWS connects to DynamoDB with the default AWS configuration.
func openAWS(ctx context.Context, o *options) (*target, error) {
	var opts []func(*config.LoadOptions) error
	if o.region != "" {
		opts = append(opts, config.WithRegion(o.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("-store %s: AWS configuration: %w", storeDynamoDB, err)
	}
	client := dynamodb.NewFromConfig(cfg, func(do *dynamodb.Options) {
		if o.endpoint != "" {
			do.BaseEndpoint = aws.String(o.endpoint)
		}
	})
	if err := provision(ctx, client, o.table, o.stream, o.createTable); err != nil {
		return nil, err
	}
	stream, err := hasStream(ctx, client, o.table)
	if err != nil {
		return nil, err
	}
	return &target{st: dynamo.New(client, o.table), table: o.table, stream: stream, failedWritesBilled: true,
		describe: fmt.Sprintf("DynamoDB (region %s), table %s (%s)", cfg.Region, o.table, streamWord(stream)),
		close:    func() {}}, nil
}

// provision creates the table through store/dynamo's provisioning when
// asked to; it then exists with the limiter's keys and indexes.
func provision(ctx context.Context, client *dynamodb.Client, table string, stream, create bool) error {
	if !create {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := dynamo.CreateTable(pctx, client, table, dynamo.WithStream(stream)); err != nil {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	return nil
}

// hasStream reports whether the table has a stream: the one it has, which
// for a table that existed may differ from -stream.
func hasStream(ctx context.Context, client *dynamodb.Client, table string) (bool, error) {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		return false, fmt.Errorf("describe table %s: %w", table, err)
	}
	if out.Table == nil {
		return false, errors.New("describe table " + table + ": no description")
	}
	s := out.Table.StreamSpecification
	return s != nil && s.StreamEnabled != nil && *s.StreamEnabled, nil
}

func streamWord(on bool) string {
	if on {
		return "with a stream"
	}
	return "without a stream"
}
