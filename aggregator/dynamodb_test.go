package aggregator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// streamReader reads a table's stream from the start, as Lambda's poller
// does, and converts the records to the Lambda event shape.
type streamReader struct {
	client *dynamodbstreams.Client
	arn    string
}

func newStreamReader(t *testing.T, srv *dynamotest.Server, table string) *streamReader {
	t.Helper()
	ctx := context.Background()
	out, err := srv.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Table.LatestStreamArn == nil {
		t.Fatal("the table has no stream: dynamo.CreateTable should have enabled NEW_AND_OLD_IMAGES")
	}
	if spec := out.Table.StreamSpecification; spec == nil || spec.StreamViewType != "NEW_AND_OLD_IMAGES" {
		t.Fatalf("stream specification %+v", spec)
	}
	client := dynamodbstreams.New(dynamodbstreams.Options{
		Region:       dynamotest.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(dynamotest.AccessKeyID, dynamotest.SecretAccessKey, ""),
		BaseEndpoint: aws.String(srv.Endpoint),
	})
	return &streamReader{client: client, arn: *out.Table.LatestStreamArn}
}

// all returns every record of the stream so far, shard by shard, each
// shard in order.
func (s *streamReader) all(t *testing.T) []events.DynamoDBEventRecord {
	t.Helper()
	ctx := context.Background()
	desc, err := s.client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.arn)})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.DynamoDBEventRecord
	for _, sh := range desc.StreamDescription.Shards {
		it, err := s.client.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.arn),
			ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for empty := 0; iter != nil && empty < 2; {
			recs, err := s.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			if len(recs.Records) == 0 {
				empty++
			}
			for _, r := range recs.Records {
				out = append(out, EventRecord(r))
			}
			iter = recs.NextShardIterator
		}
	}
	return out
}

// End to end on DynamoDB Local: bucket writes through store/dynamo, the
// table's real stream read with the dynamodbstreams client, converted to
// Lambda's event shape and handled as the Lambda function does; then the
// whole stream again (at-least-once) with the records that came since.
func TestEndToEndOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	table := srv.NewTable(t)
	st := dynamo.New(srv.Client, table)
	reader := newStreamReader(t, srv, table)
	ctx := context.Background()

	now := time.Now().UTC()
	limits := map[string]bucket.Limit{"rpm": perMinute(1000), "tpm": perMinute(100_000)}
	a := keys.Bucket{Namespace: "tenant-a", Entity: "api-key-1", Resource: "models/gpt-4"}
	other := keys.Bucket{Namespace: "tenant-a", Entity: "api-key-1", Resource: "models/gpt-4o", Shard: 1}
	putBucket(t, st, bucketItem(a, 2, now, limits, map[string]int64{"rpm": 1000, "tpm": 400_000}))
	putBucket(t, st, bucketItem(a.WithShard(1), 2, now, limits, nil))
	putBucket(t, st, bucketItem(other, 2, now, limits, nil))
	charge(t, st, a, map[string]int64{"rpm": 1000, "tpm": 2_500_000})
	charge(t, st, a.WithShard(1), map[string]int64{"rpm": 3000})
	charge(t, st, a, map[string]int64{"tpm": -900_000}) // a refund
	if _, err := st.Put(ctx, store.PutInput{Item: store.Item{store.AttrPK: store.Str(keys.EntityPK("tenant-a", "api-key-1")),
		store.AttrSK: store.Str(keys.SKEntity), "cascade": store.Int(0)}}); err != nil {
		t.Fatal(err)
	}
	// Shard 0 runs hot: 980 more write units consumed at once (two charges
	// made 2000 millitokens), though its stored balance looks full, as a
	// full write leaves it.
	set(t, st, a.Key(), map[string]int64{"b_wcu_tk": 999_000, "b_wcu_tc": 982_000, bucket.AttrRefill: time.Now().UnixMilli()})

	first := reader.all(t)
	if len(first) != 8 {
		t.Fatalf("%d stream records, want 8", len(first))
	}
	for _, er := range first {
		if len(er.Change.SequenceNumber) < 10 || er.Change.ApproximateCreationDateTime.IsZero() {
			t.Fatalf("record %+v", er.Change)
		}
	}
	p := newProcessor(t, st, Options{Logger: quiet})
	resp, res := p.HandleLambda(ctx, events.DynamoDBEvent{Records: first})
	if len(resp.BatchItemFailures) != 0 || len(res.Failures) != 0 {
		t.Fatalf("failures %+v", res.Failures)
	}
	if res.Stats.Doublings != 1 || res.Stats.Ignored != 1 || res.Stats.Deltas != 6 {
		t.Errorf("first batch: %+v", res.Stats)
	}
	count := func(b keys.Bucket) int64 {
		out, err := st.Get(ctx, store.GetInput{Key: b.Key(), ConsistentRead: true})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := out.Item.Int(keys.AttrShardCount)
		return n
	}
	if count(a) != 4 || count(a.WithShard(1)) != 2 {
		t.Fatalf("after the doubling: shard 0 has %d, shard 1 %d", count(a), count(a.WithShard(1)))
	}

	// Everything again, with what came since: the doubling (propagated to
	// shard 1, not to the other resource) and the snapshot writes (ignored).
	all := reader.all(t)
	if len(all) <= len(first) {
		t.Fatalf("no new records (%d)", len(all))
	}
	resp, res = newProcessor(t, st, Options{Logger: quiet}).HandleLambda(ctx, events.DynamoDBEvent{Records: all})
	// Already applied: shard 0's 3 records and shard 1's 1, hourly and daily.
	if len(resp.BatchItemFailures) != 0 || res.Stats.SnapshotWrites != 0 || res.Stats.Propagated != 1 ||
		res.Stats.AlreadyApplied != 8 || res.Stats.Doublings+res.Stats.DoublingsLost != 0 {
		t.Errorf("redelivery: %+v %+v", resp, res.Stats)
	}
	if count(a.WithShard(1)) != 4 || count(other) != 2 {
		t.Errorf("after propagation: shard 1 has %d, the other resource %d", count(a.WithShard(1)), count(other))
	}

	// The snapshots add up to the buckets' tc, per limit.
	q, err := st.Query(ctx, store.QueryInput{PartitionKey: keys.UsagePK("tenant-a", "api-key-1"), ConsistentRead: true})
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	for k, v := range readSnapshots(q.Items) {
		if k.window == keys.WindowHour {
			sums[k.limit] += v.consumed
		}
		if k.window == keys.WindowDay {
			sums["day "+k.limit] += v.consumed
		}
	}
	want := map[string]int64{"rpm": 5000, "tpm": 2_000_000, "day rpm": 5000, "day tpm": 2_000_000}
	for k, v := range want {
		if sums[k] != v {
			t.Errorf("%s: snapshots add up to %d, want %d", k, sums[k], v)
		}
	}
	for _, it := range q.Items {
		sq, _ := it.Str(keys.AttrUsageSeq)
		if len(sq) < 3 || sq[:2] != fmt.Sprintf("%02d", len(sq)-2) {
			t.Errorf("high-water mark %q is not length-prefixed", sq)
		}
	}
}
