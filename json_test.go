package limiter_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
)

// roundTrip marshals v, checks the JSON, and unmarshals it into a new *T
// that must equal v.
func roundTrip[T any](t *testing.T, v T, want string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %+v: %v", v, err)
	}
	if string(b) != want {
		t.Errorf("JSON of %T:\n got %s\nwant %s", v, b, want)
	}
	var back T
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	if d := cmp.Diff(v, back); d != "" {
		t.Errorf("%T does not round-trip (-before +after):\n%s", v, d)
	}
}

func TestJSONForms(t *testing.T) {
	roundTrip(t, limiter.PerMinute("tpm", 10_000).WithBurst(20_000),
		`{"name":"tpm","capacity":10000,"burst":20000,"refill":10000,"period":"1m0s"}`)
	roundTrip(t, limiter.Limit{Name: "x", Capacity: 5, Refill: 1, Period: 250 * time.Millisecond},
		`{"name":"x","capacity":5,"refill":1,"period":"250ms"}`)
	roundTrip(t, limiter.LimitState{Resource: "gpt-x", Limit: limiter.PerSecond("rps", 10), Shards: 2, Requested: 3, Remaining: 1,
		Reset: 900 * time.Millisecond, RetryAfter: 200 * time.Millisecond, Exceeded: true},
		`{"resource":"gpt-x","limit":{"name":"rps","capacity":10,"burst":10,"refill":10,"period":"1s"},"shards":2,"requested":3,"remaining":1,"reset":"900ms","retry_after":"200ms","exceeded":true}`)
	roundTrip(t, []limiter.LimitState{{Limit: limiter.PerDay("rpd", 1)}},
		`[{"limit":{"name":"rpd","capacity":1,"burst":1,"refill":1,"period":"24h0m0s"},"shards":0,"requested":0,"remaining":0,"reset":"0s","retry_after":"0s","exceeded":false}]`)
}

// The JSON forms of package admin's types.
func TestAdminJSONForms(t *testing.T) {
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	roundTrip(t, admin.Entity{ID: "key-1", Parent: "project-1", Cascade: true}, `{"id":"key-1","parent":"project-1","cascade":true}`)
	roundTrip(t, admin.Entity{ID: "project-1"}, `{"id":"project-1"}`)
	roundTrip(t, admin.Scope{Resource: "gpt-4"}, `{"resource":"gpt-4"}`)
	roundTrip(t, admin.Scope{Entity: "key-1", Resource: "gpt-4"}, `{"entity":"key-1","resource":"gpt-4"}`)
	roundTrip(t, admin.UsageQuery{Entity: "key-1", Resource: "gpt-4", Window: admin.UsageDaily, From: day, To: day.AddDate(0, 1, 0)},
		`{"entity":"key-1","resource":"gpt-4","window":"daily","from":"2026-03-01T00:00:00Z","to":"2026-04-01T00:00:00Z"}`)
	roundTrip(t, admin.UsageSnapshot{Entity: "key-1", Resource: "gpt-4", Limit: "tpm", Window: admin.UsageHourly,
		Start: day, End: day.Add(time.Hour), Tokens: 12, Millitokens: 12_500, Events: 3},
		`{"entity":"key-1","resource":"gpt-4","limit":"tpm","window":"hourly","start":"2026-03-01T00:00:00Z","end":"2026-03-01T01:00:00Z","tokens":12,"millitokens":12500,"events":3}`)
	roundTrip(t, map[admin.UsageWindow]int{admin.UsageMonthly: 1}, `{"monthly":1}`)
}

func TestJSONAcceptsAnyDurationForm(t *testing.T) {
	var l limiter.Limit
	if err := json.Unmarshal([]byte(`{"name":"rpm","capacity":100,"refill":100,"period":"1m"}`), &l); err != nil {
		t.Fatal(err)
	}
	if l != (limiter.Limit{Name: "rpm", Capacity: 100, Refill: 100, Period: time.Minute}) || l.Validate() != nil {
		t.Fatalf("%+v", l)
	}
}

func TestJSONErrorsNameTheProblem(t *testing.T) {
	for in, want := range map[string]string{
		`{"name":"rpm","period":60000000000}`: "must be a string",
		`{"name":"rpm","period":"a minute"}`:  "is not a duration",
	} {
		var l limiter.Limit
		if err := json.Unmarshal([]byte(in), &l); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", in, err, want)
		}
	}
	var w admin.UsageWindow
	if err := json.Unmarshal([]byte(`"weekly"`), &w); err == nil || !strings.Contains(err.Error(), "hourly, daily or monthly") {
		t.Errorf("weekly: %v", err)
	}
	if _, err := json.Marshal(admin.UsageWindow(0)); err == nil {
		t.Error("an invalid window marshalled")
	}
}
