package aggregator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// The fixture is what the limiter writes for: acquire (rpm 1, tpm 500) on a
// new bucket, Adjust tpm +250, acquire (rpm 1, tpm 800, gpt_4_tokens 3)
// after the hour turned, Rollback of that lease; between them the schema
// version item and an entity item, which the aggregator ignores.
func TestExtractDeltasFromLambdaFixture(t *testing.T) {
	ev := loadEvent(t, "acquire-adjust-rollback.json")
	at := func(s int64) time.Time { return time.Unix(s, 0).UTC() }
	d := func(limit string, amount, sec int64) Delta {
		return Delta{Namespace: "tenant-a", Entity: "api-key-123", Resource: "gpt-4", Shard: 0, Limit: limit,
			Amount: amount, At: at(sec)}
	}
	want := [][]Delta{
		nil, // #SCHEMA
		{d("rpm", 1000, 1767247198), d("tpm", 500_000, 1767247198)}, // INSERT: the whole tc; gpt_4_tokens is 0
		{d("tpm", 250_000, 1767247199)},                             // Adjust: wcu_tc unchanged, no delta anyway
		{d("gpt_4_tokens", 3000, 1767247200), d("rpm", 1000, 1767247200), d("tpm", 800_000, 1767247200)},
		{d("gpt_4_tokens", -3000, 1767247200), d("rpm", -1000, 1767247200), d("tpm", -800_000, 1767247200)},
		nil, // entity #META
	}
	if len(ev.Records) != len(want) {
		t.Fatalf("fixture has %d records", len(ev.Records))
	}
	for i, er := range ev.Records {
		r, err := FromLambda(er)
		if err != nil {
			t.Fatalf("record %d: FromLambda: %v", i, err)
		}
		if r.SequenceNumber != er.Change.SequenceNumber || r.EventID != er.EventID || r.EventName != er.EventName {
			t.Errorf("record %d: identity not carried over: %+v", i, r)
		}
		got, err := ExtractDeltas(r)
		if err != nil {
			t.Fatalf("record %d: ExtractDeltas: %v", i, err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("record %d (%s %s):\n got %+v\nwant %+v", i, r.EventName, r.Keys.PK, got, want[i])
		}
	}
}

func TestFromLambdaNumbersAreExact(t *testing.T) {
	ev := loadEvent(t, "acquire-adjust-rollback.json")
	er := ev.Records[3]
	// Above 2^53 a float64 cannot tell these apart.
	er.Change.OldImage["b_tpm_tc"] = events.NewNumberAttribute("9007199254740993")
	er.Change.NewImage["b_tpm_tc"] = events.NewNumberAttribute("9007199254740995")
	er.Change.NewImage["b_rpm_tc"] = events.NewNumberAttribute("-9223372036854775808")
	er.Change.OldImage["b_rpm_tc"] = events.NewNumberAttribute("-9223372036854775807")
	r, err := FromLambda(er)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.New.Int("b_tpm_tc"); v != 9007199254740995 {
		t.Errorf("b_tpm_tc = %d", v)
	}
	ds, err := ExtractDeltas(r)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, d := range ds {
		got[d.Limit] = d.Amount
	}
	if got["tpm"] != 2 || got["rpm"] != -1 {
		t.Errorf("deltas %v, want tpm 2, rpm -1", got)
	}
	// A change that does not fit an int64 is malformed, not wrapped.
	er.Change.OldImage["b_rpm_tc"] = events.NewNumberAttribute("1")
	r, _ = FromLambda(er)
	if _, err := ExtractDeltas(r); !isMalformed(err, "NewImage.b_rpm_tc") {
		t.Errorf("overflowing delta: err = %v", err)
	}
}

func TestTTLRemoveYieldsNothing(t *testing.T) {
	ev := loadEvent(t, "ttl-remove.json")
	r, err := FromLambda(ev.Records[0])
	if err != nil {
		t.Fatal(err)
	}
	if r.EventName != EventRemove || r.New != nil || r.Old == nil {
		t.Fatalf("record %+v", r)
	}
	if ds, err := ExtractDeltas(r); err != nil || ds != nil {
		t.Errorf("ExtractDeltas = %v, %v", ds, err)
	}
	st, _ := newStore(memsim.Epoch())
	resp, res := newProcessor(t, st, Options{Logger: quiet}).HandleLambda(context.Background(), ev)
	if len(resp.BatchItemFailures) != 0 || res.Stats.SnapshotWrites != 0 || st.Len() != 0 {
		t.Errorf("REMOVE wrote something: %+v %+v", resp, res.Stats)
	}
}

func isMalformed(err error, field string) bool {
	var me *MalformedError
	return errors.As(err, &me) && me.Field == field && errors.Is(err, ErrMalformed)
}

func TestMalformedFixtures(t *testing.T) {
	for _, tc := range []struct {
		file, field string
		stage       string // where it is caught: FromLambda, ExtractDeltas or Process
	}{
		{"bool-attribute.json", "NewImage.b_rpm_tc", "FromLambda"},
		{"fractional-number.json", "NewImage.b_tpm_tc", "FromLambda"},
		{"number-beyond-int64.json", "NewImage.b_tpm_tc", "FromLambda"},
		{"map-in-old-image.json", "OldImage.rf", "FromLambda"},
		{"numeric-key.json", "Keys.SK", "FromLambda"},
		{"missing-key.json", "Keys.PK", "FromLambda"},
		{"string-counter.json", "NewImage.b_rpm_tc", "ExtractDeltas"},
		{"modify-without-old-image.json", "OldImage", "ExtractDeltas"},
		{"insert-without-new-image.json", "NewImage", "ExtractDeltas"},
		{"unknown-event-name.json", "EventName", "ExtractDeltas"},
		{"image-of-another-item.json", "NewImage.PK", "ExtractDeltas"},
		{"bad-sequence-number.json", "SequenceNumber", "Process"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			ev := loadEvent(t, "malformed/"+tc.file)
			r, err := FromLambda(ev.Records[0])
			stage := "FromLambda"
			if err == nil {
				stage = "ExtractDeltas"
				_, err = ExtractDeltas(r)
			}
			st, _ := newStore(memsim.Epoch())
			if err == nil {
				stage = "Process"
				res := newProcessor(t, st, Options{Logger: quiet}).Process(context.Background(), []Record{r})
				if len(res.Failures) == 1 {
					err = res.Failures[0].Err
				}
			}
			if stage != tc.stage || !isMalformed(err, tc.field) {
				t.Fatalf("caught by %s: %v; want a MalformedError on %s from %s", stage, err, tc.field, tc.stage)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("message %q does not name %s", err, tc.field)
			}
			// By default the handler skips it; ReportMalformed retries it.
			resp, res := newProcessor(t, st, Options{Logger: quiet}).HandleLambda(context.Background(), ev)
			if len(resp.BatchItemFailures) != 0 || len(res.Failures) != 1 || !res.Failures[0].Malformed() {
				t.Errorf("default handler: %+v, failures %v", resp, res.Failures)
			}
			resp, _ = newProcessor(t, st, Options{Logger: quiet, ReportMalformed: true}).HandleLambda(context.Background(), ev)
			want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: ev.Records[0].Change.SequenceNumber}}
			if !reflect.DeepEqual(resp.BatchItemFailures, want) {
				t.Errorf("ReportMalformed: %+v", resp)
			}
			if st.Len() != 0 {
				t.Errorf("a malformed record wrote %d items", st.Len())
			}
		})
	}
}

func TestHandleLambdaWritesSnapshots(t *testing.T) {
	ev := loadEvent(t, "acquire-adjust-rollback.json")
	st, _ := newStore(memsim.Epoch())
	p := newProcessor(t, st, Options{Logger: quiet, Windows: []Window{Hourly, Daily, Monthly}})
	resp, res := p.HandleLambda(context.Background(), ev)
	if len(resp.BatchItemFailures) != 0 || len(res.Failures) != 0 {
		t.Fatalf("failures: %+v", res.Failures)
	}
	if s := res.Stats; s.Records != 6 || s.Ignored != 2 || s.Deltas != 9 || s.SnapshotWrites != 4 {
		t.Errorf("stats %+v", s)
	}
	h5 := time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC).UnixMilli()
	h6 := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC).UnixMilli()
	d1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	k := func(limit string, w keys.UsageWindow, start int64) snapKey {
		return snapKey{"tenant-a", "api-key-123", "gpt-4", limit, w, start}
	}
	want := map[snapKey]snapVal{
		k("rpm", keys.WindowHour, h5): {1000, 1}, k("tpm", keys.WindowHour, h5): {750_000, 2},
		k("rpm", keys.WindowHour, h6): {0, 2}, k("tpm", keys.WindowHour, h6): {0, 2}, k("gpt_4_tokens", keys.WindowHour, h6): {0, 2},
		k("rpm", keys.WindowDay, d1): {1000, 3}, k("tpm", keys.WindowDay, d1): {750_000, 4}, k("gpt_4_tokens", keys.WindowDay, d1): {0, 2},
		k("rpm", keys.WindowMonth, d1): {1000, 3}, k("tpm", keys.WindowMonth, d1): {750_000, 4}, k("gpt_4_tokens", keys.WindowMonth, d1): {0, 2},
	}
	if got := readSnapshots(st.Items()); !reflect.DeepEqual(got, want) {
		t.Errorf("snapshots\n got %v\nwant %v", got, want)
	}
	// The item as stored: the mark, the window and its expiry.
	it := st.Peek(keys.Usage{Namespace: "tenant-a", Entity: "api-key-123", Resource: "gpt-4", Window: keys.WindowHour,
		Start: time.UnixMilli(h5)}.Key())
	seq, _ := keys.EncodeSeq(ev.Records[2].Change.SequenceNumber)
	if v, _ := it.Str(keys.AttrUsageSeq); v != seq {
		t.Errorf("high-water mark %q, want %q (the last record of the hour)", v, seq)
	}
	if v, _ := it.Int(store.AttrTTL); v != time.UnixMilli(h6).Add(DefaultRetention(Hourly)).Unix() {
		t.Errorf("ttl %d", v)
	}
	if v, _ := it.Str(keys.AttrUsageWindow); v != "H" {
		t.Errorf("window %q", v)
	}

	// Delivered again, whole or in reverse order: nothing changes.
	before := st.Items()
	resp, res = p.HandleLambda(context.Background(), ev)
	if len(resp.BatchItemFailures) != 0 || res.Stats.SnapshotWrites != 0 || res.Stats.AlreadyApplied != 12 {
		t.Errorf("redelivery: %+v %+v", resp, res.Stats)
	}
	rev := events.DynamoDBEvent{}
	for i := len(ev.Records) - 1; i >= 0; i-- {
		rev.Records = append(rev.Records, ev.Records[i])
	}
	newProcessor(t, st, Options{Logger: quiet, Windows: []Window{Hourly, Daily, Monthly}}).HandleLambda(context.Background(), rev)
	if after := st.Items(); !reflect.DeepEqual(before, after) {
		t.Errorf("redelivery changed the snapshots")
	}
}

// A write that fails fails exactly the records it carried, named by their
// sequence numbers.
func TestHandleLambdaReportsFailedRecords(t *testing.T) {
	ev := loadEvent(t, "acquire-adjust-rollback.json")
	h5 := keys.Usage{Namespace: "tenant-a", Entity: "api-key-123", Resource: "gpt-4", Window: keys.WindowHour,
		Start: time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)}.Key()
	fail := true
	st, _ := newStore(memsim.Epoch(), memsim.WithFaults(memsim.Func("hour-5", func(op memsim.Op) memsim.Decision {
		if fail && op.Kind == memsim.OpUpdate && op.Keys[0] == h5 {
			return memsim.Decision{Fault: memsim.Fault5xxAfterApply}
		}
		return memsim.Decision{}
	})))
	p := newProcessor(t, st, Options{Logger: quiet})
	resp, res := p.HandleLambda(context.Background(), ev)
	want := []events.DynamoDBBatchItemFailure{
		{ItemIdentifier: ev.Records[1].Change.SequenceNumber},
		{ItemIdentifier: ev.Records[2].Change.SequenceNumber},
	}
	if !reflect.DeepEqual(resp.BatchItemFailures, want) {
		t.Fatalf("response %+v, want %+v", resp.BatchItemFailures, want)
	}
	if len(res.Failures) != 2 || !errors.Is(res.Failures[0].Err, store.ErrUnavailable) || res.Failures[0].Malformed() {
		t.Errorf("failures %+v", res.Failures)
	}
	// Lambda retries from the first failure on; the write had applied.
	fail = false
	retry := events.DynamoDBEvent{Records: ev.Records[1:]}
	resp, res = p.HandleLambda(context.Background(), retry)
	if len(resp.BatchItemFailures) != 0 || res.Stats.SnapshotWrites != 0 {
		t.Errorf("retry: %+v %+v", resp, res.Stats)
	}
	got := readSnapshots(st.Items())
	if v := got[snapKey{"tenant-a", "api-key-123", "gpt-4", "tpm", keys.WindowHour, h5Start()}]; v != (snapVal{750_000, 2}) {
		t.Errorf("hour 5 tpm = %+v after an applied-but-failed write and its retry", v)
	}
}

func h5Start() int64 { return time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC).UnixMilli() }
