package aggregator

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// A record with several bad attributes is reported by the first of them
// by name, whatever the order the map is walked in: the same record gives
// the same error on every redelivery.
func TestMalformedRecordsNameTheFirstBadAttribute(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	newImg := bucketItem(b, 1, t0, rpmOnly, nil)
	newImg["b_zz_tc"], newImg["b_aa_tc"] = store.Str("x"), store.Str("y")
	r := Record{EventName: EventInsert, SequenceNumber: "1", Keys: b.Key(), New: newImg, At: t0}
	for i := 0; i < 20; i++ {
		_, err := ExtractDeltas(r)
		if !isMalformed(err, "NewImage.b_aa_tc") {
			t.Fatalf("error %v, want NewImage.b_aa_tc (first by name)", err)
		}
	}
	// Two counters whose change overflows: the first by name.
	old, cur := bucketItem(b, 1, t0, rpmOnly, nil), bucketItem(b, 1, t0, rpmOnly, nil)
	for _, n := range []string{"b_zz_tc", "b_aa_tc"} {
		old[n], cur[n] = store.Int(math.MinInt64), store.Int(math.MaxInt64)
	}
	r = Record{EventName: EventModify, SequenceNumber: "2", Keys: b.Key(), Old: old, New: cur, At: t0}
	for i := 0; i < 20; i++ {
		if _, err := ExtractDeltas(r); !isMalformed(err, "NewImage.b_aa_tc") {
			t.Fatalf("error %v, want NewImage.b_aa_tc (first by name)", err)
		}
	}
	// The same through Lambda's attribute values.
	ev := events.DynamoDBEventRecord{EventName: EventInsert, Change: events.DynamoDBStreamRecord{SequenceNumber: "3",
		Keys: map[string]events.DynamoDBAttributeValue{"PK": events.NewStringAttribute(b.PK()), "SK": events.NewStringAttribute(keys.SKBucket)},
		NewImage: map[string]events.DynamoDBAttributeValue{"b_zz_tc": events.NewBooleanAttribute(true), "b_aa_tc": events.NewBooleanAttribute(true),
			"b_mm_tc": events.NewBooleanAttribute(true)}}}
	for i := 0; i < 20; i++ {
		if _, err := FromLambda(ev); !isMalformed(err, "NewImage.b_aa_tc") {
			t.Fatalf("error %v, want NewImage.b_aa_tc (first by name)", err)
		}
	}
}

// Lambda retries from the lowest failure it is told of, so the failures
// of a batch come in batch order, the malformed records found on
// conversion among the others.
func TestLambdaFailuresComeInBatchOrder(t *testing.T) {
	st, _ := newStore(memsim.Epoch(), memsim.WithFaults(memsim.Func("snapshots", func(op memsim.Op) memsim.Decision {
		if op.Kind == memsim.OpUpdate {
			return memsim.Decision{Fault: memsim.Fault5xxBeforeApply}
		}
		return memsim.Decision{}
	})))
	ev := loadEvent(t, "acquire-adjust-rollback.json")
	bad := loadEvent(t, "malformed/bool-attribute.json").Records[0]
	ev.Records = append([]events.DynamoDBEventRecord{ev.Records[0], bad}, ev.Records[1:]...)
	ev.Records[1].Change.SequenceNumber = "1"
	_, res := newProcessor(t, st, Options{Logger: quiet, ReportMalformed: true}).HandleLambda(context.Background(), ev)
	if len(res.Failures) < 2 {
		t.Fatalf("failures %+v, want the malformed one and the failed writes", res.Failures)
	}
	for i := 1; i < len(res.Failures); i++ {
		if res.Failures[i-1].Index >= res.Failures[i].Index {
			t.Fatalf("failures out of batch order: %+v", res.Failures)
		}
	}
	if res.Failures[0].Index != 1 || !res.Failures[0].Malformed() {
		t.Fatalf("the malformed record (batch index 1, the first to fail) is not first: %+v", res.Failures)
	}
}

// A duplicate of a record that failed fails with it: Lambda must
// redeliver it too. Also when the original is the first of the batch.
func TestADuplicateFailsWithItsOriginal(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	st, _ := newStore(t0, memsim.WithFaults(memsim.Func("snapshots", func(op memsim.Op) memsim.Decision {
		if op.Kind == memsim.OpUpdate {
			return memsim.Decision{Fault: memsim.Fault5xxBeforeApply}
		}
		return memsim.Decision{}
	})))
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	putBucket(t, st, bucketItem(b, 1, t0, rpmOnly, map[string]int64{"rpm": 1000}))
	r := fromMemsim(st.Stream(0))[0]
	res := newProcessor(t, st, Options{Logger: quiet}).Process(context.Background(), []Record{r, r})
	if len(res.Failures) != 2 || res.Failures[0].Index != 0 || res.Failures[1].Index != 1 {
		t.Fatalf("failures %+v, want the record and its duplicate", res.Failures)
	}
}

// A window's name; one the package does not know says its number.
func TestWindowNames(t *testing.T) {
	if Hourly.String() != "hourly" || Window(9).String() != "Window(9)" {
		t.Fatalf("%q %q", Hourly.String(), Window(9).String())
	}
}

// A retention of 0 means the snapshots never expire: no expiry is set.
func TestSnapshotsWithoutRetentionNeverExpire(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	st, _ := newStore(t0)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	putBucket(t, st, bucketItem(b, 1, t0, rpmOnly, map[string]int64{"rpm": 1000}))
	recs := fromMemsim(st.Stream(0))
	p := newProcessor(t, st, Options{Logger: quiet, Windows: []Window{Hourly}, Retention: map[Window]time.Duration{Hourly: 0}})
	if res := p.Process(context.Background(), recs); res.Stats.SnapshotWrites != 1 {
		t.Fatalf("%+v", res.Stats)
	}
	for _, it := range st.Items() {
		if sk, _ := it.Str(store.AttrSK); sk != keys.SKBucket {
			if _, ok := it.Int(store.AttrTTL); ok {
				t.Fatalf("snapshot %v has an expiry", it)
			}
		}
	}
}

// The processor's memory of buckets is bounded: past maxKnown buckets it
// starts over.
func TestKnownBucketsAreBounded(t *testing.T) {
	st, _ := newStore(memsim.Epoch())
	p := newProcessor(t, st, Options{Logger: quiet})
	for i := 0; i <= maxKnown; i++ {
		p.learn("pk"+strconv.Itoa(i), "1", 1, memsim.Epoch(), false, false)
	}
	if n := len(p.known); n != 1 {
		t.Fatalf("%d buckets known after %d, want 1 (started over)", n, maxKnown+1)
	}
	p.learn("pk0", "2", 2, memsim.Epoch(), false, false)
	p.learn("pk0", "3", 2, memsim.Epoch(), false, false)
	if n := len(p.known); n != 2 {
		t.Fatalf("%d buckets known, want 2 (a known one adds nothing)", n)
	}
}

// Propagation runs when shard 0's count grew, or shard 0 was made at more
// than one shard; a record of shard 0 at its count, or made at one
// shard, queries for no siblings.
func TestPropagationOnlyWhenTheCountGrew(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	for _, c := range []struct {
		name    string
		count   int64
		queries uint64
	}{{"made at one shard", 1, 0}, {"made at two", 2, 1}} {
		st, _ := newStore(t0)
		putBucket(t, st, bucketItem(b, c.count, t0, rpmOnly, nil))
		charge(t, st, b, map[string]int64{"rpm": 1000}) // a MODIFY at the same count
		p := newProcessor(t, st, Options{Logger: quiet, HotPercent: -1})
		p.Process(context.Background(), fromMemsim(st.Stream(0)))
		if q := st.Totals().Ops[memsim.OpQuery].Requests; q != c.queries {
			t.Errorf("%s: %d queries, want %d", c.name, q, c.queries)
		}
	}
}

// A shard count missing from an image, or below 1, reads as 1, as the
// limiter reads it.
func TestShardCountOfAnImage(t *testing.T) {
	for _, c := range []struct {
		it   store.Item
		want int64
	}{{store.Item{}, 1}, {store.Item{keys.AttrShardCount: store.Int(0)}, 1}, {store.Item{keys.AttrShardCount: store.Int(4)}, 4}} {
		if got := keys.ShardCount(c.it); got != c.want {
			t.Errorf("ShardCount(%v) = %d, want %d", c.it, got, c.want)
		}
	}
}
