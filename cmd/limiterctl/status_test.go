package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
)

func TestStatus(t *testing.T) {
	c := newCLI(t)
	lim := c.limiter()
	rpm := []limiter.Limit{limiter.PerMinute("rpm", 60).WithBurst(120), limiter.PerMinute("tpm", 10000)}
	for range 3 {
		c.acquire(lim, "key-1", "gpt-4", rpm, map[string]int64{"rpm": 20, "tpm": 1000})
	}
	var st []bucketStatus
	c.json(&st, "status", "key-1", "gpt-4")
	if len(st) != 1 || !st[0].Exists || st[0].Shards != 1 || st[0].Request != "the bucket" || len(st[0].StoredFor) != 0 || len(st[0].Limits) != 2 {
		t.Fatalf("status: %+v", st)
	}
	r, tp := st[0].Limits[0], st[0].Limits[1]
	// 60 of 120 taken a moment ago (refilling at 1 a second since): a
	// minute or less to full.
	if r.Limit.Name != "rpm" || r.Limit.Burst != 120 || r.Available < 60 || r.Available >= 120 || r.TimeToFullMs > 60_000 ||
		r.TimeToFullMs != timeToFull(limiter.PerMinute("rpm", 60).WithBurst(120), r.Available).Milliseconds() ||
		tp.Limit.Name != "tpm" || tp.Available < 7000 || tp.Available >= 10000 {
		t.Fatalf("limits: %+v", st[0].Limits)
	}

	// Stored limits win, and status says which scopes store limits.
	c.ok("limits", "set", "--entity", "key-1", "rpm:1000/min")
	c.json(&st, "status", "key-1", "gpt-4")
	if len(st[0].StoredFor) != 1 || st[0].StoredFor[0] != "entity" || st[0].Limits[0].Limit.Name != "rpm" || st[0].Limits[0].Limit.Burst != 1000 {
		t.Fatalf("with stored limits: %+v", st)
	}

	// Every bucket of the entity; a doubled bucket shows its shard count.
	c.acquire(lim, "key-1", "gpt-3.5", rpm, map[string]int64{"rpm": 1})
	ref := keys.Bucket{Namespace: "default", Entity: "key-1", Resource: "gpt-3.5"}
	ddb := dynamo.New(c.srv.Client, c.table)
	zero, err := ddb.Get(context.Background(), store.GetInput{Key: ref.Key(), ConsistentRead: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ddb.Update(context.Background(), keys.DoubleShards(ref, 1, keys.LimitsOf(zero.Item))); err != nil {
		t.Fatal(err)
	}
	out := c.ok("status", "key-1")
	contains(t, out, "RESOURCE", "gpt-3.5", "gpt-4", "FULL IN", "STORED FOR", "entity")
	c.json(&st, "status", "key-1")
	if len(st) != 2 || st[0].Resource != "gpt-3.5" || st[0].Shards != 2 {
		t.Fatalf("status key-1: %+v", st)
	}

	// A bucket never written is full; without limits anywhere, --limit.
	c.fails(exitUsage, []string{"pass the limits your service requests with --limit"}, "status", "key-2", "gpt-4o")
	c.json(&st, "status", "key-2", "gpt-4o", "--limit", "rpm:5/s")
	if st[0].Exists || st[0].Request != "--limit" || st[0].Limits[0].Available != 5 || st[0].Limits[0].TimeToFullMs != 0 {
		t.Fatalf("never written: %+v", st)
	}
	contains(t, c.ok("status", "key-2", "gpt-4o", "--limit", "rpm:5/s"), "- (full)", "full")
	c.fails(exitFailure, []string{"has no buckets"}, "status", "key-2")
	c.fails(exitUsage, []string{`--limit: limiter: invalid limit "bad": must be name:rate/period[:burst]`}, "status", "key-2", "gpt-4o", "--limit", "bad")
}

// usage list and summary read the aggregator's snapshots.
func TestUsage(t *testing.T) {
	c := newCLI(t)
	st := dynamo.New(c.srv.Client, c.table)
	now := time.Now().UTC()
	hour := now.Truncate(time.Hour)
	put := func(start time.Time, shard int, tpm, events int64) {
		u := keys.Usage{Namespace: "default", Entity: "key-1", Resource: "gpt-4", Window: keys.WindowHour, Start: start, Shard: shard}
		k := u.Key()
		it := store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK),
			keys.UsageConsumedAttr("tpm"): store.Int(tpm * 1000), keys.UsageEventsAttr("tpm"): store.Int(events),
			keys.UsageConsumedAttr("rpm"): store.Int(events * 1000), keys.UsageEventsAttr("rpm"): store.Int(events)}
		if _, err := st.Put(context.Background(), store.PutInput{Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	put(hour.Add(-3*time.Hour), 0, 1000, 2)
	put(hour.Add(-1*time.Hour), 0, 3000, 3)
	put(hour.Add(-1*time.Hour), 1, 1000, 1) // two shards of one window: summed
	put(hour, 0, 500, 1)

	var rows []usageRow
	c.json(&rows, "usage", "list", "key-1", "gpt-4", "--limit", "tpm")
	if len(rows) != 3 || rows[1].Tokens != 4000 || rows[1].Events != 4 || rows[1].Window != "hourly" || !rows[1].Start.Equal(hour.Add(-time.Hour)) {
		t.Fatalf("usage list: %+v", rows)
	}
	out := c.ok("usage", "list", "key-1", "gpt-4")
	contains(t, out, "WINDOW START", "tpm", "4000", "██████████████████████████████", "rpm")

	var sum []usageSummaryJSON
	c.json(&sum, "usage", "summary", "key-1", "gpt-4", "--since", "6h")
	if len(sum) != 2 || sum[1].Limit != "tpm" || sum[1].Tokens != 5500 || sum[1].Events != 7 || sum[1].Peak != 4000 ||
		sum[1].Windows != 3 || len(sum[1].Series) < 6 {
		t.Fatalf("usage summary: %+v", sum)
	}
	contains(t, c.ok("usage", "summary", "key-1", "gpt-4", "--since", "6h"), "PEAK WINDOW", "5500", "█")
	_, errOut, code := c.run("usage", "list", "key-1", "gpt-3.5")
	if code != exitOK || !strings.Contains(errOut, "No usage recorded") || !strings.Contains(errOut, "aggregator") {
		t.Fatalf("no usage: exit %d, %q", code, errOut)
	}
	c.fails(exitUsage, []string{"--window \"weekly\""}, "usage", "list", "key-1", "gpt-4", "--window", "weekly")
	c.fails(exitUsage, []string{"--from \"yesterday\""}, "usage", "list", "key-1", "gpt-4", "--from", "yesterday")
	c.fails(exitUsage, []string{"UsageQuery.To"}, "usage", "list", "key-1", "gpt-4", "--since", "4000h")
}

// acquire takes tokens as a request would: with the stored limits, the
// bucket's own, or --limit.
func TestAcquire(t *testing.T) {
	c := newCLI(t)
	c.fails(exitUsage, []string{"no limits"}, "acquire", "key-1", "gpt-4", "--consume", "rpm=1")
	contains(t, c.ok("acquire", "key-1", "gpt-4", "--consume", "rpm=1", "--limit", "rpm:2/min"), "Admitted: key-1 took rpm=1 on gpt-4.")
	c.ok("acquire", "key-1", "gpt-4", "--consume", "rpm=1") // the bucket's limits
	out := c.fails(exitFailure, nil, "acquire", "key-1", "gpt-4", "--consume", "rpm=1")
	contains(t, out, "Refused by limit rpm:2/min: requested 1, remaining 0, enough in ", "Rate limited: retry after ")
	var no struct {
		Admitted  bool           `json:"admitted"`
		RetryMs   int64          `json:"retry_after_ms"`
		RefusedBy []refusedLimit `json:"refused_by"`
	}
	out = c.fails(exitFailure, nil, "acquire", "key-1", "gpt-4", "--consume", "rpm=1", "-o", "json")
	if err := json.Unmarshal([]byte(out), &no); err != nil || no.Admitted || len(no.RefusedBy) != 1 ||
		no.RefusedBy[0].Limit.Spec != "rpm:2/min" || no.RefusedBy[0].Requested != 1 || no.RefusedBy[0].RetryAfterMs != no.RetryMs {
		t.Fatalf("refused acquire -o json: %+v, %v\n%s", no, err, out)
	}
	// A cascade refused by the parent names it.
	c.ok("entity", "create", "team")
	c.ok("entity", "create", "key-3", "--parent", "team", "--cascade")
	c.ok("limits", "set", "--entity", "team", "rpm:1/min")
	c.ok("acquire", "key-3", "gpt-4", "--consume", "rpm=1", "--limit", "rpm:5/min")
	out = c.fails(exitFailure, nil, "acquire", "key-3", "gpt-4", "--consume", "rpm=1", "--limit", "rpm:5/min")
	contains(t, out, `Refused by the parent "team"'s limit rpm:1/min: requested 1, remaining 0, enough in `)
	c.ok("limits", "set", "--entity", "key-2", "rpm:5/min")
	for range 2 { // the stored 5 a minute, not the request's 1
		var res map[string]any
		c.json(&res, "acquire", "key-2", "gpt-4", "--consume", "rpm=1", "--limit", "rpm:1/min")
		if res["admitted"] != true {
			t.Fatalf("with stored limits: %v", res)
		}
	}
	c.fails(exitUsage, []string{"must be name=tokens"}, "acquire", "key-1", "gpt-4", "--consume", "rpm")
	c.fails(exitUsage, []string{"needs --consume"}, "acquire", "key-1", "gpt-4")
}

// acquire --also charges several resources all or none, and names the one
// that refused; status shows the buckets of the resources named (the
// refused acquire's other bucket full: its first write may have made it,
// and the refund gave its token back).
func TestAcquireAlsoAndStatusOfSeveralResources(t *testing.T) {
	c := newCLI(t)
	c.ok("limits", "set", "--resource", "all-models", "rpm:1/min")
	contains(t, c.ok("acquire", "key-1", "gpt-4", "--also", "all-models", "--consume", "rpm=1", "--limit", "rpm:5/min"),
		"Admitted: key-1 took rpm=1 on gpt-4 and all-models.")
	out := c.fails(exitFailure, nil, "acquire", "key-1", "claude-3", "--also", "all-models", "--consume", "rpm=1", "--limit", "rpm:5/min")
	contains(t, out, `Refused by limit rpm:1/min on "all-models": requested 1, remaining 0, enough in `)
	var st []bucketStatus
	c.json(&st, "status", "key-1", "gpt-4", "all-models", "claude-3", "--limit", "rpm:5/min")
	if len(st) != 3 || st[0].Resource != "gpt-4" || st[1].Resource != "all-models" || st[2].Resource != "claude-3" ||
		st[0].Limits[0].Available != 4 || st[1].Limits[0].Available != 0 || (st[2].Exists && st[2].Limits[0].Available != 5) {
		t.Fatalf("status of three resources: %+v", st)
	}
	c.fails(exitUsage, []string{"--also", "Request.Also[0]"}, "acquire", "key-1", "gpt-4", "--also", "gpt-4", "--consume", "rpm=1", "--limit", "rpm:5/min")

	// An operator lifts the all-models cap for key-1 (admit mode) and tries
	// a shadow limit on gpt-4: the acquire says what it left out and which
	// shadow limit would have refused.
	c.ok("mode", "set", "--entity", "key-1", "--resource", "all-models", "admit")
	c.ok("limits", "set", "--resource", "gpt-4", "rpm:1/min:shadow")
	c.ok("acquire", "key-1", "gpt-4", "--also", "all-models", "--consume", "rpm=1", "--limit", "rpm:5/min") // its token, if left
	out = c.ok("acquire", "key-1", "gpt-4", "--also", "all-models", "--consume", "rpm=1", "--limit", "rpm:5/min")
	contains(t, out, "Admitted: key-1 took rpm=1 on gpt-4.")
	contains(t, out, "Left out (admit mode, not charged): all-models.")
	contains(t, out, "Would have been refused by shadow limits (not charged by this acquire): rpm.")
	var got struct {
		Admitted    bool     `json:"admitted"`
		LeftOut     []string `json:"left_out"`
		WouldRefuse []string `json:"would_refuse"`
	}
	c.json(&got, "acquire", "key-1", "gpt-4", "--also", "all-models", "--consume", "rpm=1", "--limit", "rpm:5/min")
	if !got.Admitted || !slices.Equal(got.LeftOut, []string{"all-models"}) || !slices.Equal(got.WouldRefuse, []string{"rpm"}) {
		t.Fatalf("acquire -o json: %+v", got)
	}
}
