package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/shardlimit/limiter/aggregator"
)

// Polling: the aggregator without Lambda. With -poll, the command reads the
// table's stream itself, as Lambda's poller does (every shard from its
// oldest record, batches of up to 1,000 records, a failed batch retried
// from its first failed record), and hands each batch to the same
// processor. It is for DynamoDB Local and for running the aggregator as a
// long-lived process; on AWS the event source mapping is the way (it
// checkpoints; this keeps its position in memory only, so a restart reads
// the stream again from the start, which the processor's idempotency
// makes harmless).

// streamsAPI is the part of the DynamoDB Streams client poll calls.
type streamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// poller reads one stream.
type poller struct {
	streams streamsAPI
	arn     string
	proc    *aggregator.Processor
	log     *slog.Logger
	// idle is the pause after a pass that found no record.
	idle  time.Duration
	iters map[string]*string // shard id -> next iterator
	ended map[string]bool    // shards read to their end
}

// streamARN returns the table's latest stream.
func streamARN(ctx context.Context, ddb *dynamodb.Client, table string) (string, error) {
	out, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		return "", fmt.Errorf("describe table %s: %w", table, err)
	}
	if out.Table == nil || out.Table.LatestStreamArn == nil {
		return "", fmt.Errorf("table %s has no stream: create it with dynamo.CreateTable or limiterctl table create (NEW_AND_OLD_IMAGES)", table)
	}
	return *out.Table.LatestStreamArn, nil
}

// run polls until ctx ends or, with once, until a pass over the shards
// finds no record.
func (p *poller) run(ctx context.Context, once bool) error {
	for {
		n, err := p.pass(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		if once {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.idle):
		}
	}
}

// pass reads one batch from every shard not read to its end and returns
// how many records it processed.
func (p *poller) pass(ctx context.Context) (int, error) {
	var shards []types.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: &p.arn}
	for {
		out, err := p.streams.DescribeStream(ctx, in)
		if err != nil {
			return 0, fmt.Errorf("describe stream: %w", err)
		}
		shards = append(shards, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
	total := 0
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		// A child shard waits for its parent: records of one item stay in
		// order across a split.
		if p.ended[id] || sh.ParentShardId != nil && !p.ended[*sh.ParentShardId] &&
			slices.ContainsFunc(shards, func(s types.Shard) bool { return aws.ToString(s.ShardId) == *sh.ParentShardId }) {
			continue
		}
		iter := p.iters[id]
		if iter == nil {
			out, err := p.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: &p.arn,
				ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			if err != nil {
				return total, fmt.Errorf("shard %s: %w", id, err)
			}
			iter = out.ShardIterator
		}
		out, err := p.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		if err != nil {
			return total, fmt.Errorf("shard %s: %w", id, err)
		}
		if err := p.handle(ctx, out.Records); err != nil {
			return total, err
		}
		total += len(out.Records)
		if out.NextShardIterator == nil {
			p.ended[id] = true
		}
		p.iters[id] = out.NextShardIterator
	}
	return total, nil
}

// maxBatchAttempts bounds how often a batch whose records keep failing is
// retried before the poller stops with an error.
const maxBatchAttempts = 10

// handle processes one batch, retrying from the first failed record as
// Lambda does with a partial batch response.
func (p *poller) handle(ctx context.Context, recs []types.Record) error {
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, len(recs))}
	for i, r := range recs {
		ev.Records[i] = aggregator.EventRecord(r)
	}
	for attempt := 1; len(ev.Records) > 0; attempt++ {
		resp, res := p.proc.HandleLambda(ctx, ev)
		s := res.Stats
		p.log.Info("aggregator: batch", "records", s.Records, "deltas", s.Deltas, "snapshot_writes", s.SnapshotWrites,
			"doublings", s.Doublings, "propagated", s.Propagated, "failures", len(res.Failures))
		if len(resp.BatchItemFailures) == 0 {
			return nil
		}
		if attempt == maxBatchAttempts {
			var errs []error
			for _, f := range res.Failures {
				errs = append(errs, f.Err)
			}
			return fmt.Errorf("a batch failed %d times, first at record %s: %w", attempt, resp.BatchItemFailures[0].ItemIdentifier, errors.Join(errs...))
		}
		first := resp.BatchItemFailures[0].ItemIdentifier
		isFirst := func(r events.DynamoDBEventRecord) bool { return r.Change.SequenceNumber == first }
		if i := slices.IndexFunc(ev.Records, isFirst); i >= 0 {
			ev.Records = ev.Records[i:]
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
	return nil
}
