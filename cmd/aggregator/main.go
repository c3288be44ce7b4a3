// Command aggregator is the limiter's change-stream consumer as an AWS
// Lambda function: it receives batches of the table's DynamoDB Streams
// records, writes usage snapshots, doubles hot buckets' shard counts ahead
// of their clients and propagates shard counts to every shard (package
// aggregator), and answers with a partial batch response so that Lambda
// retries only from the first record that failed.
//
// Build it for the provided.al2023 runtime:
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./cmd/aggregator
//
// With -poll it reads the table's stream itself instead of running as a
// Lambda function (DynamoDB Local, a long-lived process; -once stops when
// the stream has nothing new):
//
//	AGGREGATOR_TABLE=rate-limits AWS_ENDPOINT_URL=http://localhost:8000 go run ./cmd/aggregator -poll -once
//
// It is configured by environment variables (AGGREGATOR_TABLE is
// required); docs/aggregator.md lists them with the event source mapping
// (NEW_AND_OLD_IMAGES, ReportBatchItemFailures) as CloudFormation and
// Terraform.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/shardlimit/limiter/aggregator"
	"github.com/shardlimit/limiter/store/dynamo"
)

func main() {
	pollMode := flag.Bool("poll", false, "read the table's stream directly instead of running as a Lambda function (DynamoDB Local, a long-lived process)")
	once := flag.Bool("once", false, "with -poll: stop when a pass over the stream finds no new record")
	flag.Parse()
	cfg, err := loadConfig(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aggregator:", err)
		os.Exit(1)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	cfg.opts.Logger = logger
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "aggregator: AWS configuration:", err)
		os.Exit(1)
	}
	ddb := dynamodb.NewFromConfig(awsCfg)
	proc, err := aggregator.New(dynamo.New(ddb, cfg.table), cfg.opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *pollMode {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		arn, err := streamARN(ctx, ddb, cfg.table)
		if err == nil {
			p := &poller{streams: dynamodbstreams.NewFromConfig(awsCfg), arn: arn, proc: proc, log: logger,
				idle: time.Second, iters: map[string]*string{}, ended: map[string]bool{}}
			err = p.run(ctx, *once)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "aggregator:", err)
			os.Exit(1)
		}
		return
	}
	lambda.Start(handler(proc, logger))
}

// handler adapts the processor to Lambda's handler signature. It never
// returns an error: failures are reported per record in the response, so
// that Lambda retries from the first failed record instead of the whole
// batch.
func handler(p *aggregator.Processor, log *slog.Logger) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		resp, res := p.HandleLambda(ctx, ev)
		s := res.Stats
		log.Info("aggregator: batch", "records", s.Records, "ignored", s.Ignored, "duplicates", s.Duplicates,
			"deltas", s.Deltas, "snapshot_writes", s.SnapshotWrites, "already_applied", s.AlreadyApplied,
			"doublings", s.Doublings, "doublings_lost", s.DoublingsLost, "propagated", s.Propagated,
			"failures", len(res.Failures), "reported", len(resp.BatchItemFailures),
			"wcu", s.Consumed.WriteUnits, "rcu", s.Consumed.ReadUnits)
		return resp, nil
	}
}
