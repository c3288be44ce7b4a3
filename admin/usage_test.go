package admin_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/aggregator"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// countingStore counts the queries a Usage call makes.
type countingStore struct {
	store.Store
	queries  []store.QueryInput
	requests int
}

func (c *countingStore) Query(ctx context.Context, in store.QueryInput) (store.QueryOutput, error) {
	c.queries = append(c.queries, in)
	c.requests++
	return c.Store.Query(ctx, in)
}

func (c *countingStore) Get(ctx context.Context, in store.GetInput) (store.GetOutput, error) {
	c.requests++
	return c.Store.Get(ctx, in)
}

// putSnapshot writes a usage snapshot item the way the aggregator lays it
// out (internal/keys).
func putSnapshot(t *testing.T, st store.Store, ns, entity, resource string, w keys.UsageWindow, start time.Time, shard int,
	attrs map[string]int64) {
	t.Helper()
	u := keys.Usage{Namespace: ns, Entity: entity, Resource: resource, Window: w, Start: start, Shard: shard}
	k := u.Key()
	it := store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK), keys.AttrUsageSeq: store.Str("0242"),
		keys.AttrUsageWindow: store.Str(w.Code()), keys.AttrUsageStart: store.Int(start.UnixMilli()),
		keys.AttrEntity: store.Str(entity), keys.AttrResource: store.Str(resource), keys.AttrShard: store.Int(int64(shard))}
	for n, v := range attrs {
		it[n] = store.Int(v)
	}
	if _, err := st.Put(context.Background(), store.PutInput{Item: it}); err != nil {
		t.Fatal(err)
	}
}

func hour(d, h int) time.Time { return time.Date(2026, 1, d, h, 0, 0, 0, time.UTC) }

func TestUsageSumsShardsPerWindow(t *testing.T) {
	ctx := context.Background()
	mem := memsim.New()
	st := &countingStore{Store: mem}
	adm, err := admin.New(st, admin.WithNamespace("ns"))
	if err != nil {
		t.Fatal(err)
	}
	H, D := keys.WindowHour, keys.WindowDay
	put := func(resource string, w keys.UsageWindow, start time.Time, shard int, attrs map[string]int64) {
		putSnapshot(t, mem, "ns", "e", resource, w, start, shard, attrs)
	}
	put("gpt-4", H, hour(1, 10), 0, map[string]int64{"tc_rpm": 5500, "ev_rpm": 3, "tc_tpm": 1999, "ev_tpm": 2, "tc_wcu": 7, "ev_wcu": 7})
	put("gpt-4", H, hour(1, 10), 1, map[string]int64{"tc_rpm": 500, "ev_rpm": 1})
	put("gpt-4", H, hour(1, 11), 0, map[string]int64{"tc_rpm": -2500, "ev_rpm": 1}) // only a refund in this hour
	put("gpt-4", H, hour(1, 9), 0, map[string]int64{"tc_rpm": 1000, "ev_rpm": 1})   // before the range
	put("gpt-4", H, hour(1, 23), 0, map[string]int64{"tc_rpm": 4000, "ev_rpm": 1})
	put("gpt-4", H, hour(2, 0), 3, map[string]int64{"tc_rpm": 8000, "ev_rpm": 2})
	put("gpt-4", H, hour(2, 1), 0, map[string]int64{"tc_rpm": 9000, "ev_rpm": 1}) // at To: excluded
	put("gpt-4o", H, hour(1, 10), 0, map[string]int64{"tc_rpm": 100_000, "ev_rpm": 9})
	put("gpt-4", D, hour(1, 0), 0, map[string]int64{"tc_rpm": 99_000, "ev_rpm": 9})
	putSnapshot(t, mem, "other", "e", "gpt-4", H, hour(1, 10), 0, map[string]int64{"tc_rpm": 100_000, "ev_rpm": 9})

	snap := func(limit string, start time.Time, milli, events int64) admin.UsageSnapshot {
		return admin.UsageSnapshot{Entity: "e", Resource: "gpt-4", Limit: limit, Window: admin.UsageHourly,
			Start: start, End: start.Add(time.Hour), Tokens: floorDiv(milli, 1000), Millitokens: milli, Events: events}
	}
	got, err := adm.Usage(ctx, admin.UsageQuery{Entity: "e", Resource: "gpt-4", Window: admin.UsageHourly,
		From: hour(1, 10).Add(30 * time.Minute), To: hour(2, 1)})
	if err != nil {
		t.Fatal(err)
	}
	want := []admin.UsageSnapshot{
		snap("rpm", hour(1, 10), 6000, 4), snap("tpm", hour(1, 10), 1999, 2),
		snap("rpm", hour(1, 11), -2500, 1),
		snap("rpm", hour(1, 23), 4000, 1),
		snap("rpm", hour(2, 0), 8000, 2),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Usage:\n got %+v\nwant %+v", got, want)
	}
	if got[2].Tokens != -3 {
		t.Errorf("-2500 millitokens = %d tokens, want -3 (rounded down)", got[2].Tokens)
	}
	if len(st.queries) != 2 || st.queries[0].SortKeyPrefix != "H#gpt-4#2026-01-01T" || st.queries[1].SortKeyPrefix != "H#gpt-4#2026-01-02T" ||
		st.queries[0].PartitionKey != "ns/USAGE#e" {
		t.Errorf("queries %+v; want one per day of the range", st.queries)
	}

	got, err = adm.Usage(ctx, admin.UsageQuery{Entity: "e", Resource: "gpt-4", Limit: "tpm", Window: admin.UsageHourly,
		From: hour(1, 0), To: hour(3, 0)})
	if err != nil || !reflect.DeepEqual(got, []admin.UsageSnapshot{snap("tpm", hour(1, 10), 1999, 2)}) {
		t.Errorf("Limit tpm: %+v, %v", got, err)
	}
	got, err = adm.Usage(ctx, admin.UsageQuery{Entity: "e", Resource: "gpt-4", Window: admin.UsageDaily,
		From: hour(1, 12), To: hour(1, 13)})
	wantDay := admin.UsageSnapshot{Entity: "e", Resource: "gpt-4", Limit: "rpm", Window: admin.UsageDaily,
		Start: hour(1, 0), End: hour(2, 0), Tokens: 99, Millitokens: 99_000, Events: 9}
	if err != nil || !reflect.DeepEqual(got, []admin.UsageSnapshot{wantDay}) {
		t.Errorf("daily: %+v, %v", got, err)
	}
	if got, err := adm.Usage(ctx, admin.UsageQuery{Entity: "nobody", Resource: "gpt-4", Window: admin.UsageMonthly,
		From: hour(1, 0), To: hour(1, 1)}); err != nil || len(got) != 0 {
		t.Errorf("no snapshots: %+v, %v", got, err)
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func TestUsageValidation(t *testing.T) {
	st := &countingStore{Store: memsim.New()}
	adm, _ := admin.New(st)
	ok := admin.UsageQuery{Entity: "e", Resource: "r", Window: admin.UsageHourly, From: hour(1, 0), To: hour(2, 0)}
	for _, tc := range []struct {
		field string
		edit  func(*admin.UsageQuery)
	}{
		{"UsageQuery.Entity", func(q *admin.UsageQuery) { q.Entity = "" }},
		{"UsageQuery.Entity", func(q *admin.UsageQuery) { q.Entity = "a#b" }},
		{"UsageQuery.Resource", func(q *admin.UsageQuery) { q.Resource = "r#1" }},
		{"UsageQuery.Limit", func(q *admin.UsageQuery) { q.Limit = "9lives" }},
		{"UsageQuery.Limit", func(q *admin.UsageQuery) { q.Limit = "wcu" }},
		{"UsageQuery.Window", func(q *admin.UsageQuery) { q.Window = 0 }},
		{"UsageQuery.Window", func(q *admin.UsageQuery) { q.Window = 7 }},
		{"UsageQuery.From", func(q *admin.UsageQuery) { q.From = time.Time{} }},
		{"UsageQuery.From", func(q *admin.UsageQuery) { q.From = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"UsageQuery.To", func(q *admin.UsageQuery) { q.To = time.Time{} }},
		{"UsageQuery.To", func(q *admin.UsageQuery) { q.To = q.From }},
		{"UsageQuery.To", func(q *admin.UsageQuery) { q.To = q.From.Add(-time.Hour) }},
		{"UsageQuery.To", func(q *admin.UsageQuery) { q.To = q.From.AddDate(0, 0, 101) }},
		{"UsageQuery.To", func(q *admin.UsageQuery) { q.Window, q.To = admin.UsageDaily, q.From.AddDate(0, 101, 0) }},
		{"UsageQuery.To", func(q *admin.UsageQuery) { q.Window, q.To = admin.UsageMonthly, q.From.AddDate(101, 0, 0) }},
	} {
		q := ok
		tc.edit(&q)
		_, err := adm.Usage(context.Background(), q)
		var ve *limiter.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("%+v: err %v, want a ValidationError on %s", q, err, tc.field)
		}
	}
	if st.requests != 0 {
		t.Errorf("validation made %d store calls", st.requests)
	}
	// The longest ranges allowed.
	for _, q := range []admin.UsageQuery{
		{Entity: "e", Resource: "r", Window: admin.UsageHourly, From: hour(1, 0), To: hour(1, 0).AddDate(0, 0, 100)},
		{Entity: "e", Resource: "r", Window: admin.UsageDaily, From: hour(1, 0), To: hour(1, 0).AddDate(0, 100, 0)},
		{Entity: "e", Resource: "r", Window: admin.UsageMonthly, From: hour(1, 0), To: hour(1, 0).AddDate(100, 0, 0)},
	} {
		if _, err := adm.Usage(context.Background(), q); err != nil {
			t.Errorf("%v over %v: %v", q.Window, q.To.Sub(q.From), err)
		}
	}
}

// deliver runs the aggregator over the store's change stream since seq, as
// the Lambda function does in production, and returns the stream position.
func deliver(t testing.TB, st *memsim.Store, p *aggregator.Processor, seq uint64) uint64 {
	t.Helper()
	var recs []aggregator.Record
	for _, r := range st.Stream(seq) {
		recs = append(recs, aggregator.FromStream(strconv.FormatUint(r.Seq, 10), r.Event, r.Keys, r.Old, r.New, r.At))
		seq = r.Seq
	}
	if res := p.Process(context.Background(), recs); len(res.Failures) != 0 {
		t.Fatalf("aggregator: %+v", res.Failures)
	}
	return seq
}

// End to end: the limiter charges, adjusts and rolls back; the aggregator
// reads the stream (twice: at least once); Usage reports what was consumed.
func TestUsageEndToEnd(t *testing.T) {
	ctx := context.Background()
	clock := memsim.NewManualClock(hour(1, 9).Add(50 * time.Minute))
	st := memsim.New(memsim.WithClock(clock))
	lim, err := limiter.New(st, limiter.WithNamespace("tenant-a"), limiter.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(st, admin.WithNamespace("tenant-a"))
	if err != nil {
		t.Fatal(err)
	}
	agg, err := aggregator.New(st, aggregator.Options{Windows: []aggregator.Window{aggregator.Hourly, aggregator.Daily, aggregator.Monthly}})
	if err != nil {
		t.Fatal(err)
	}
	limits := []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 100_000)}
	acquire := func(tpm int64) *limiter.Lease {
		lease, err := lim.Acquire(ctx, limiter.Request{Entity: "key-1", Resource: "gpt-4", Limits: limits,
			Consume: map[string]int64{"rpm": 1, "tpm": tpm}})
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	l := acquire(500)
	if err := l.Adjust(ctx, map[string]int64{"tpm": 1200}); err != nil { // the real count was 1700
		t.Fatal(err)
	}
	clock.Add(5 * time.Minute)
	acquire(300)
	clock.Add(10 * time.Minute) // 10:05
	l = acquire(2000)
	if err := l.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	acquire(400)
	seq := deliver(t, st, agg, 0)
	deliver(t, st, agg, 0) // redelivered: counted once

	got, err := adm.Usage(ctx, admin.UsageQuery{Entity: "key-1", Resource: "gpt-4", Window: admin.UsageHourly,
		From: hour(1, 0), To: hour(2, 0)})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		limit          string
		start          time.Time
		tokens, events int64
	}
	var rows []row
	for _, s := range got {
		rows = append(rows, row{s.Limit, s.Start, s.Tokens, s.Events})
	}
	want := []row{
		{"rpm", hour(1, 9), 2, 2}, {"tpm", hour(1, 9), 2000, 3},
		{"rpm", hour(1, 10), 1, 3}, {"tpm", hour(1, 10), 400, 3},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("hourly usage\n got %+v\nwant %+v", rows, want)
	}
	got, err = adm.Usage(ctx, admin.UsageQuery{Entity: "key-1", Resource: "gpt-4", Limit: "tpm", Window: admin.UsageMonthly,
		From: hour(1, 0), To: hour(1, 1)})
	if err != nil || len(got) != 1 || got[0].Tokens != 2400 || got[0].Millitokens != 2_400_000 || got[0].Events != 6 ||
		!got[0].Start.Equal(hour(1, 0)) || !got[0].End.Equal(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("monthly tpm: %+v, %v", got, err)
	}
	// Later traffic is added to the same snapshots.
	clock.Add(time.Minute)
	acquire(100)
	deliver(t, st, agg, seq)
	got, _ = adm.Usage(ctx, admin.UsageQuery{Entity: "key-1", Resource: "gpt-4", Limit: "tpm", Window: admin.UsageDaily,
		From: hour(1, 0), To: hour(2, 0)})
	if len(got) != 1 || got[0].Tokens != 2500 {
		t.Errorf("daily tpm after more traffic: %+v", got)
	}
}

// Usage reads what the aggregator wrote from the change stream: per
// window, summed over the bucket's shards.
func ExampleAdmin_Usage() {
	ctx := context.Background()
	clock := memsim.NewManualClock(time.Date(2026, 1, 1, 9, 58, 0, 0, time.UTC))
	st := memsim.New(memsim.WithClock(clock))
	lim, _ := limiter.New(st, limiter.WithNamespace("tenant-a"), limiter.WithClock(clock))
	adm, _ := admin.New(st, admin.WithNamespace("tenant-a"))
	limits := []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10_000)}
	for _, tokens := range []int64{500, 1500, 700} {
		_, _ = lim.Acquire(ctx, limiter.Request{Entity: "api-key-123", Resource: "gpt-4", Limits: limits,
			Consume: map[string]int64{"rpm": 1, "tpm": tokens}})
		clock.Add(time.Minute)
	}

	// In production the aggregator runs as a Lambda function on the
	// table's stream (cmd/aggregator); here it reads memsim's stream.
	agg, _ := aggregator.New(st, aggregator.Options{})
	var recs []aggregator.Record
	for _, r := range st.Stream(0) {
		recs = append(recs, aggregator.FromStream(strconv.FormatUint(r.Seq, 10), r.Event, r.Keys, r.Old, r.New, r.At))
	}
	agg.Process(ctx, recs)

	usage, err := adm.Usage(ctx, admin.UsageQuery{
		Entity:   "api-key-123",
		Resource: "gpt-4",
		Window:   admin.UsageHourly,
		From:     time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		To:       time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, u := range usage {
		fmt.Printf("%s %s: %d tokens in %d requests\n", u.Start.Format("15:04"), u.Limit, u.Tokens, u.Events)
	}
	// Output:
	// 09:00 rpm: 2 tokens in 2 requests
	// 09:00 tpm: 2000 tokens in 2 requests
	// 10:00 rpm: 1 tokens in 1 requests
	// 10:00 tpm: 700 tokens in 1 requests
}

// A query without a resource reads the default resource's usage, as an
// acquire without one charges it.
func TestUsageOnTheDefaultResource(t *testing.T) {
	mem := memsim.New()
	adm, err := admin.New(mem, admin.WithNamespace("ns"))
	if err != nil {
		t.Fatal(err)
	}
	putSnapshot(t, mem, "ns", "k1", limiter.DefaultResource, keys.WindowHour, hour(1, 10), 0, map[string]int64{"tc_rpm": 2000, "ev_rpm": 2})
	got, err := adm.Usage(context.Background(), admin.UsageQuery{Entity: "k1", Window: admin.UsageHourly, From: hour(1, 0), To: hour(2, 0)})
	if err != nil || len(got) != 1 || got[0].Resource != limiter.DefaultResource || got[0].Tokens != 2 {
		t.Fatalf("Usage on the default resource: %+v, %v", got, err)
	}
}
