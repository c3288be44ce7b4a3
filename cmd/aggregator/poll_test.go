package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/aggregator"
	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store/dynamo"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// -poll -once on DynamoDB Local: acquires become usage snapshots, and a
// second run (a restart reads the stream from the start) changes nothing.
func TestPollOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	table := srv.NewTable(t)
	st := dynamo.New(srv.Client, table)
	ctx := context.Background()
	lim, err := limiter.New(st, limiter.WithNamespace("ns"))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(st, admin.WithNamespace("ns"))
	if err != nil {
		t.Fatal(err)
	}
	req := limiter.Request{Entity: "key-1", Resource: "gpt-4", Limits: []limiter.Limit{limiter.PerMinute("tpm", 10_000)},
		Consume: map[string]int64{"tpm": 300}}
	for range 3 {
		if _, err := lim.Acquire(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	arn, err := streamARN(ctx, srv.Client, table)
	if err != nil {
		t.Fatal(err)
	}
	streams := dynamodbstreams.New(dynamodbstreams.Options{Region: dynamotest.Region, BaseEndpoint: aws.String(srv.Endpoint),
		Credentials: credentials.NewStaticCredentialsProvider(dynamotest.AccessKeyID, dynamotest.SecretAccessKey, "")})
	usage := func() int64 {
		snaps, err := adm.Usage(ctx, admin.UsageQuery{Entity: "key-1", Resource: "gpt-4", Window: admin.UsageHourly,
			From: time.Now().Add(-2 * time.Hour), To: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, s := range snaps {
			n += s.Tokens
		}
		return n
	}
	for run := 1; run <= 2; run++ {
		proc, err := aggregator.New(st, aggregator.Options{Windows: aggregator.DefaultWindows})
		if err != nil {
			t.Fatal(err)
		}
		p := &poller{streams: streams, arn: arn, proc: proc, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			iters: map[string]*string{}, ended: map[string]bool{}}
		if err := p.run(ctx, true); err != nil {
			t.Fatal(err)
		}
		if got := usage(); got != 900 {
			t.Fatalf("run %d: %d tokens of usage, want 900", run, got)
		}
	}
}
