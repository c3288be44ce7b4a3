package main

import (
	"strings"
	"testing"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
)

// A top-up raises what status shows, up to the burst; status and the audit
// trail show it; bad input changes nothing.
func TestBucketTopUp(t *testing.T) {
	c := newCLI(t)
	lim := c.limiter()
	day := []limiter.Limit{limiter.Limit{Name: "rpd", Capacity: 10, Refill: 10, Period: 24 * 60 * 60 * 1e9}}
	c.acquire(lim, "key-1", "gpt-4", day, map[string]int64{"rpd": 8})

	out := c.ok("bucket", "top-up", "key-1", "gpt-4", "rpd=5", "--principal", "alice")
	contains(t, out, "Topped up key-1 on gpt-4: rpd +5 over 1 shard(s).", "AVAILABLE", "Last top-up of gpt-4:", "by alice: rpd +5 over 1 shard(s).")
	var st []bucketStatus
	c.json(&st, "status", "key-1", "gpt-4")
	if st[0].Limits[0].Available != 7 || st[0].LastTopUp == nil || st[0].LastTopUp.After.Tokens["rpd"] != 5 || st[0].LastTopUp.Principal != "alice" {
		t.Fatalf("status after a top-up of 5 from 2: %+v", st)
	}
	c.ok("bucket", "top-up", "key-1", "gpt-4", "rpd=500")
	c.json(&st, "status", "key-1", "gpt-4")
	if st[0].Limits[0].Available != 10 || st[0].LastTopUp.After.Tokens["rpd"] != 500 {
		t.Fatalf("status after a top-up beyond the burst: %+v", st)
	}
	contains(t, c.ok("bucket", "top-up", "key-1", "gpt-4", "--resume"), "No unfinished top-up of key-1 on gpt-4.")
	lines := strings.Split(c.ok("audit", "list", "key-1"), "\n")
	contains(t, lines[1], "bucket.top-up", `entity "key-1" on resource "gpt-4"`, "rpd +500 over 1 shard(s)")
	var recs []auditJSON
	c.json(&recs, "audit", "list", "key-1", "--limit", "1")
	if recs[0].Action != string(admin.AuditTopUp) || recs[0].After.Tokens["rpd"] != 500 || recs[0].After.Shards != 1 {
		t.Fatalf("audit list -o json: %+v", recs)
	}

	for _, bad := range []struct {
		want []string
		args []string
	}{
		{[]string{"invalid tokens[rpd]", "between 1 and"}, []string{"rpd=0"}},
		{[]string{"invalid tokens[rpd]", "between 1 and 1000000000000 tokens"}, []string{"rpd=1000000000001"}},
		{[]string{`invalid tokens[tpm]`, `holds no limit "tpm" (it holds rpd)`}, []string{"rpd=1", "tpm=1"}},
		{[]string{`"rpd" must be LIMIT=N`}, []string{"rpd"}},
		{[]string{`"rpd=1.5" must be LIMIT=N`}, []string{"rpd=1.5"}},
		{[]string{"needs a grant"}, nil},
		{[]string{"--resume takes no LIMIT=N"}, []string{"rpd=1", "--resume"}},
	} {
		c.fails(exitUsage, bad.want, append([]string{"bucket", "top-up", "key-1", "gpt-4"}, bad.args...)...)
	}
	c.fails(exitUsage, []string{"no bucket of entity", "nothing was changed"}, "bucket", "top-up", "key-2", "gpt-4", "rpd=1")
	c.json(&recs, "audit", "list", "key-1")
	if len(recs) != 2 {
		t.Fatalf("bad input was recorded: %+v", recs)
	}
	c.json(&st, "status", "key-1", "gpt-4")
	if st[0].Limits[0].Available != 10 {
		t.Fatalf("bad input changed the bucket: %+v", st)
	}
}
