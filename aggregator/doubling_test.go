package aggregator

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// hotRecords makes shard 0 of b, at count, hot twice: two records in one
// batch, each showing 900 write units used (at the record times at, at+10
// ms).
func hotRecords(t *testing.T, st *memsim.Store, b keys.Bucket, count int64, at time.Time) []Record {
	t.Helper()
	n := st.StreamLen()
	putBucket(t, st, bucketItem(b, count, at, rpmOnly, nil))
	consume(t, st, b, 900_000, at.UnixMilli())
	consume(t, st, b, 900_000, at.UnixMilli()+10)
	recs := fromMemsim(st.Stream(n))
	for i := range recs {
		recs[i].At = at.Add(time.Duration(i) * 5 * time.Millisecond)
	}
	return recs
}

// A batch with two hot records of shard 0: the first doubles it, the
// second is stale (the count it shows is behind the doubling) and tries
// nothing, also when the doubling was lost to another writer's.
func TestOneDoublingPerBatch(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 500_000_000, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	st, _ := newStore(t0)
	res := newProcessor(t, st, Options{Logger: quiet}).Process(context.Background(), hotRecords(t, st, b, 2, t0))
	if res.Stats.Doublings != 1 || res.Stats.DoublingsLost != 0 {
		t.Fatalf("%+v: want one doubling, no write tried after it", res.Stats)
	}
	// Another writer doubled to 8 before the processor saw the records.
	st, _ = newStore(t0)
	recs := hotRecords(t, st, b, 2, t0)
	set(t, st, b.Key(), map[string]int64{keys.AttrShardCount: 8})
	res = newProcessor(t, st, Options{Logger: quiet}).Process(context.Background(), recs)
	if res.Stats.Doublings != 0 || res.Stats.DoublingsLost != 1 {
		t.Fatalf("%+v: want one doubling lost, and the second record knowing better than to try", res.Stats)
	}
}

// Without a cooldown (negative ShardCooldown), a bucket still hot at its
// new count doubles again at once.
func TestNoCooldown(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 500_000_000, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	st, _ := newStore(t0)
	p := newProcessor(t, st, Options{Logger: quiet, ShardCooldown: -1})
	if res := p.Process(context.Background(), hotRecords(t, st, b, 1, t0)); res.Stats.Doublings != 1 {
		t.Fatalf("%+v", res.Stats)
	}
	n := st.StreamLen()
	consume(t, st, b, 900_000, t0.UnixMilli()+50)
	recs := fromMemsim(st.Stream(n))
	for i := range recs {
		recs[i].At = t0.Add(50 * time.Millisecond)
	}
	if res := p.Process(context.Background(), recs); res.Stats.Doublings != 1 {
		t.Fatalf("%+v: still hot at 2 shards with no cooldown, want a second doubling", res.Stats)
	}
}

// The cooldown runs from the latest record showing the growth: the
// doubling's own record, later than the record that triggered it,
// restarts it.
func TestTheCooldownRunsFromTheGrowthsRecord(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 500_000_000, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	st, _ := newStore(t0)
	p := newProcessor(t, st, Options{Logger: quiet})
	n := st.StreamLen()
	if res := p.Process(context.Background(), hotRecords(t, st, b, 1, t0)); res.Stats.Doublings != 1 {
		t.Fatalf("%+v", res.Stats)
	}
	// The doubling's record comes at t0 + 400 ms.
	dbl := fromMemsim(st.Stream(n + 3))
	for i := range dbl {
		dbl[i].At = t0.Add(400 * time.Millisecond)
	}
	p.Process(context.Background(), dbl)
	// Hot again at t0 + 700 ms: within the cooldown counted from t0+400.
	n = st.StreamLen()
	consume(t, st, b, 900_000, t0.UnixMilli()+700)
	recs := fromMemsim(st.Stream(n))
	for i := range recs {
		recs[i].At = t0.Add(700 * time.Millisecond)
	}
	if res := p.Process(context.Background(), recs); res.Stats.Doublings != 0 {
		t.Fatalf("%+v: doubled 300 ms after the doubling's record, inside the cooldown", res.Stats)
	}
}

// Shard 0 made again (it expired) starts over: what the processor knew of
// the count before is forgotten, and the new item doubles from its own.
func TestARemadeShardZeroStartsOver(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 500_000_000, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	st, _ := newStore(t0)
	p := newProcessor(t, st, Options{Logger: quiet})
	putBucket(t, st, bucketItem(b, 8, t0, rpmOnly, nil))
	p.Process(context.Background(), fromMemsim(st.Stream(0)))
	if _, err := st.Delete(context.Background(), store.DeleteInput{Key: b.Key()}); err != nil {
		t.Fatal(err)
	}
	n := st.StreamLen()
	later := t0.Add(2 * time.Hour)
	putBucket(t, st, bucketItem(b, 2, later, rpmOnly, nil))
	consume(t, st, b, 900_000, later.UnixMilli())
	recs := fromMemsim(st.Stream(n))
	for i := range recs {
		recs[i].At = later
	}
	if res := p.Process(context.Background(), recs); res.Stats.Doublings != 1 {
		t.Fatalf("%+v: the remade shard 0 at 2 shards is hot, want it doubled", res.Stats)
	}
	if c, _ := st.Peek(b.Key()).Int(keys.AttrShardCount); c != 4 {
		t.Fatalf("count %d, want 4", c)
	}
}

// A doubling that failed fails its record, also when the propagation that
// followed it succeeded.
func TestAFailedDoublingFailsItsRecord(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 500_000_000, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	failPropagation := false
	st, _ := newStore(t0, memsim.WithFaults(memsim.Func("doubling", func(op memsim.Op) memsim.Decision {
		switch {
		case op.Kind == memsim.OpUpdate && op.Keys[0] == b.Key():
			return memsim.Decision{Fault: memsim.Fault5xxBeforeApply}
		case op.Kind == memsim.OpUpdate && op.Keys[0] == b.WithShard(1).Key() && failPropagation:
			return memsim.Decision{Fault: memsim.FaultLostResponse}
		}
		return memsim.Decision{}
	})))
	putBucket(t, st, bucketItem(b.WithShard(1), 1, t0, rpmOnly, nil))
	n := st.StreamLen()
	// Shard 0 made (after it expired) at 2 shards, hot: its record
	// doubles and propagates.
	hot := bucketItem(b, 2, t0, rpmOnly, nil)
	hot["b_wcu_tc"] = store.Int(900_000)
	putBucket(t, st, hot)
	recs := fromMemsim(st.Stream(n))
	recs[0].At = t0
	res := newProcessor(t, st, Options{Logger: quiet}).Process(context.Background(), recs)
	if len(res.Failures) != 1 || res.Stats.Propagated != 1 {
		t.Fatalf("failures %+v, stats %+v: want the record failed by its doubling, the propagation made", res.Failures, res.Stats)
	}
	// Both fail: the record fails with the doubling's error, the first.
	set(t, st, b.WithShard(1).Key(), map[string]int64{keys.AttrShardCount: 1})
	failPropagation = true
	res = newProcessor(t, st, Options{Logger: quiet}).Process(context.Background(), recs)
	if len(res.Failures) != 1 || errors.Is(res.Failures[0].Err, memsim.ErrResponseLost) || !errors.Is(res.Failures[0].Err, memsim.ErrInternalServerError) {
		t.Fatalf("failures %+v: want the doubling's 5xx", res.Failures)
	}
}

// Usage sums saturate instead of wrapping.
func TestUsageSumsSaturate(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{math.MaxInt64, 1, math.MaxInt64}, {math.MinInt64, -1, math.MinInt64}, {-1, -2, -3}, {0, math.MinInt64, math.MinInt64},
	} {
		if got := bucket.AddSat(c.a, c.b); got != c.want {
			t.Errorf("bucket.AddSat(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// A record read with the Streams API converts to Lambda's shape, also
// without its change (nothing to convert) or its images.
func TestEventRecordConversion(t *testing.T) {
	if er := EventRecord(types.Record{EventName: types.OperationTypeInsert}); er.EventName != "INSERT" || er.Change.Keys != nil {
		t.Fatalf("a record without its change: %+v", er)
	}
	at := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	er := EventRecord(types.Record{EventName: types.OperationTypeModify, Dynamodb: &types.StreamRecord{
		Keys:                        map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "p"}},
		NewImage:                    map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "5"}},
		SequenceNumber:              aws.String("7"),
		ApproximateCreationDateTime: &at,
	}})
	if er.Change.OldImage != nil || er.Change.NewImage["n"].Number() != "5" || er.Change.SequenceNumber != "7" ||
		!er.Change.ApproximateCreationDateTime.Time.Equal(at) {
		t.Fatalf("%+v", er.Change)
	}
	if er := EventRecord(types.Record{Dynamodb: &types.StreamRecord{}}); !er.Change.ApproximateCreationDateTime.Time.IsZero() {
		t.Fatalf("a time without one: %v", er.Change.ApproximateCreationDateTime)
	}
}
