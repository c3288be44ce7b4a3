package main

import (
	"strings"
	"testing"

	"github.com/shardlimit/limiter/admin"
)

// A reset needs --yes, refills the bucket, and the audit trail shows it with
// every other change, newest first, by the principal.
func TestBucketResetAndAudit(t *testing.T) {
	c := newCLI(t)
	c.ok("entity", "create", "team")
	c.ok("entity", "create", "key-1", "--principal", "alice")
	c.ok("entity", "set-parent", "key-1", "team", "--principal", "bob")
	c.ok("limits", "set", "--entity", "key-1", "--resource", "gpt-4", "rpm:2/min")
	c.ok("limits", "set", "--resource", "gpt-4", "rpm:100/min")

	lim := c.limiter()
	c.acquire(lim, "key-1", "gpt-4", nil, map[string]int64{"rpm": 2})
	var st []bucketStatus
	c.json(&st, "status", "key-1", "gpt-4")
	if st[0].Limits[0].Available != 0 {
		t.Fatalf("before the reset: %+v", st)
	}
	c.fails(exitUsage, []string{"Add --yes to confirm", "a bucket of 1 shard(s)"}, "bucket", "reset", "key-1", "gpt-4")
	contains(t, c.ok("bucket", "reset", "key-1", "gpt-4", "--yes"), "deleted its 1 shard(s)", "finds it full")
	c.json(&st, "status", "key-1", "gpt-4")
	if st[0].Exists || st[0].Limits[0].Available != 2 {
		t.Fatalf("after the reset: %+v", st)
	}
	contains(t, c.ok("bucket", "reset", "key-1", "gpt-4", "--yes"), "nothing to reset")

	out := c.ok("audit", "list", "key-1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("audit list key-1: want a header and 4 records:\n%s", out)
	}
	for i, want := range [][]string{
		{"WHEN (UTC)", "WHO", "ACTION", "BEFORE", "AFTER"},
		{"test-operator", "bucket.reset", `entity "key-1" on resource "gpt-4"`, "1 shard(s)", "-"},
		{"test-operator", "limits.put", "-", "rpm:2/min"},
		{"bob", "entity.put", "no parent", "parent team"},
		{"alice", "entity.put", "-", "no parent"},
	} {
		contains(t, lines[i], want...)
	}
	var recs []auditJSON
	c.json(&recs, "audit", "list", "key-1", "--resource", "gpt-4", "--limit", "1")
	if len(recs) != 1 || recs[0].Action != string(admin.AuditResetBucket) || recs[0].Before.Shards != 1 || recs[0].After != nil {
		t.Fatalf("audit list -o json: %+v", recs)
	}
	recs = nil
	c.json(&recs, "audit", "list", "--resource", "gpt-4")
	if len(recs) != 1 || recs[0].Action != "limits.put" || recs[0].Entity != "" || recs[0].After.Limits[0].Spec != "rpm:100/min" {
		t.Fatalf("audit list --resource: %+v", recs)
	}
	// Nothing recorded is "not found", as for limits get: exit 1.
	c.fails(exitFailure, []string{`no audit records for entity "nobody" in namespace "default"`}, "audit", "list", "nobody")
	c.fails(exitFailure, []string{`no audit records for entity "key-1" on resource "gpt-5"`}, "audit", "list", "key-1", "--resource", "gpt-5", "-o", "json")
	c.fails(exitUsage, []string{"needs an ENTITY, --resource or both"}, "audit", "list")
	c.fails(exitUsage, []string{"AuditQuery.Limit"}, "audit", "list", "key-1", "--limit", "5000")
}

// Exit codes and errors that say what to do.
func TestExitCodesAndHelp(t *testing.T) {
	c := newCLI(t)
	out, errOut, code := c.run()
	if code != exitUsage || !strings.Contains(errOut, "Commands:") || out != "" {
		t.Fatalf("no command: exit %d\n%s", code, errOut)
	}
	contains(t, c.ok("help"), "table create", "limits plan", "usage summary", "Exit codes: 0 ok, 1 failure or difference, 2 bad usage, 3 store error")
	contains(t, c.ok("help", "limits"), "limits apply", "limits set")
	contains(t, c.ok("help", "limits", "set"), "-entity", "-resource")
	contains(t, c.ok("limits", "set", "-h"), "Usage: limiterctl limits set [flags] LIMIT...", "-entity")
	c.fails(exitUsage, []string{`unknown command "frobnicate"`, "limiterctl help"}, "frobnicate")
	c.fails(exitUsage, []string{"flag provided but not defined: -bogus"}, "entity", "list", "--bogus")
	c.fails(exitUsage, []string{`-o "yaml": want table or json`}, "entity", "list", "-o", "yaml")
	c.fails(exitUsage, []string{"invalid Namespace"}, "entity", "list", "--namespace", "a/b")

	var o, errs strings.Builder
	if code := run([]string{"--endpoint", c.srv.Endpoint, "entity", "list"}, &o, &errs); code != exitUsage ||
		!strings.Contains(errs.String(), "--table is required (or set LIMITER_TABLE)") {
		t.Fatalf("no table: exit %d, %s", code, errs.String())
	}
	c.table = "no-such-table"
	c.fails(exitStoreError, []string{"ResourceNotFoundException", `table "no-such-table" not found in region us-east-1`, "limiterctl table create"}, "entity", "list")
	errs.Reset()
	if code := run([]string{"--table", "t", "--endpoint", "http://127.0.0.1:1", "entity", "list"}, &o, &errs); code != exitStoreError ||
		!strings.Contains(errs.String(), "nothing answered at http://127.0.0.1:1: start DynamoDB Local") {
		t.Fatalf("no server: exit %d, %s", code, errs.String())
	}
}

// An operator revokes a key, then restores it, and reads the audit trail:
// each scope.mode record says which mode the scope went from and to, in
// the table and in JSON (the scope's limits alone would look unchanged).
func TestRegressionAuditListShowsTheModeChanged(t *testing.T) {
	c := newCLI(t)
	c.ok("limits", "set", "--entity", "key-1", "rpm:10/min")
	c.ok("mode", "set", "--entity", "key-1", "refuse")
	c.ok("mode", "set", "--entity", "key-1", "enforce")
	c.ok("mode", "set", "--entity", "key-2", "admit")

	out := c.ok("audit", "list", "key-1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("audit list key-1: want a header and 3 records:\n%s", out)
	}
	for i, want := range [][]string{
		{"scope.mode", "rpm:10/min, mode refuse", "rpm:10/min"},
		{"scope.mode", "rpm:10/min", "rpm:10/min, mode refuse"},
	} {
		contains(t, lines[i+1], want...)
	}
	contains(t, c.ok("audit", "list", "key-2"), "scope.mode", "no limits, mode admit")

	var recs []auditJSON
	c.json(&recs, "audit", "list", "key-1")
	if len(recs) != 3 || recs[0].Before == nil || recs[0].Before.Mode != "refuse" || recs[0].After == nil || recs[0].After.Mode != "" ||
		recs[1].After == nil || recs[1].After.Mode != "refuse" {
		t.Fatalf("audit list -o json: want the modes before and after: %+v", recs)
	}
}
