package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLimitsCommands(t *testing.T) {
	c := newCLI(t)
	contains(t, c.ok("limits", "set", "--entity", "key-1", "rpm:100/min:150", "tpm:10000/min"),
		`Stored for entity "key-1": rpm:100/min:150, tpm:10000/min.`)
	c.ok("limits", "set", "--entity", "key-1", "--resource", "gpt-4", "rpm:10/min")
	c.ok("limits", "set", "--resource", "gpt-4", "rpm:1000/min")
	contains(t, c.ok("limits", "get", "--entity", "key-1"), "rpm:100/min:150", "150", "tpm:10000/min")

	var got storedLimitsJSON
	c.json(&got, "limits", "get", "--entity", "key-1", "--resource", "gpt-4")
	if got.Entity != "key-1" || got.Resource != "gpt-4" || len(got.Limits) != 1 ||
		got.Limits[0] != (limitJSON{Name: "rpm", Spec: "rpm:10/min", Capacity: 10, Burst: 10, Refill: 10, Period: "min", PeriodMs: 60000}) {
		t.Fatalf("limits get -o json: %+v", got)
	}
	var all []storedLimitsJSON
	c.json(&all, "limits", "list")
	if len(all) != 3 || all[0].Entity != "key-1" || all[1].Resource != "gpt-4" || all[2].Entity != "" {
		t.Fatalf("limits list: %+v", all)
	}
	if out := c.ok("limits", "list", "--entity", "key-1"); strings.Count(out, "key-1") != 2 {
		t.Fatalf("limits list --entity key-1:\n%s", out)
	}

	contains(t, c.ok("limits", "delete", "--entity", "key-1", "--resource", "gpt-4"), "Deleted the limits of")
	c.fails(exitFailure, []string{"no limits stored", "nothing deleted"}, "limits", "delete", "--entity", "key-1", "--resource", "gpt-4")
	c.fails(exitFailure, []string{"no limits stored", "limits set"}, "limits", "get", "--entity", "key-1", "--resource", "gpt-4")

	c.fails(exitUsage, []string{`invalid rate of limit "rpm:abc/min": "abc" must be a whole number`}, "limits", "set", "--entity", "k", "rpm:abc/min")
	c.fails(exitUsage, []string{`invalid period of limit "rpm:1/fortnight": "fortnight" must be`}, "limits", "set", "--entity", "k", "rpm:1/fortnight")
	c.fails(exitUsage, []string{"needs --entity, --resource or both"}, "limits", "set", "rpm:1/min")
	c.fails(exitUsage, []string{"takes LIMIT..."}, "limits", "set", "--entity", "k")
	c.fails(exitUsage, []string{"invalid Scope.Entity"}, "limits", "get", "--entity", "a#b")
}

// The manifest round-trips: apply, then diff exits 0; a change makes diff
// exit 1; export then apply elsewhere reproduces the namespace.
func TestManifestPlanApplyDiff(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c.ok("limits", "set", "--resource", "old-model", "rpm:1/min") // not in the manifest: deleted
	m := write("limits.yaml", `
namespace: default
scopes:
  - resource: gpt-4
    limits: [rpm:1000/min, tpm:1000000/min]
  - entity: team-a
    limits: [rpm:500/min:600]
  - entity: key-1
    resource: gpt-4
    limits:
      - rpm:100/min:150
      - {name: tpm, capacity: 100000, burst: 150000, refill: 50000, period: min}
`)
	out := c.ok("limits", "plan", "-f", m)
	contains(t, out, `+ entity "key-1" on resource "gpt-4": rpm:100/min:150, tpm(capacity 100000, burst 150000, refill 50000 per min)`,
		`+ entity "team-a": rpm:500/min:600`, `+ resource "gpt-4"`, `- resource "old-model": rpm:1/min (stored, not in the manifest)`,
		"Plan: 3 to add, 0 to change, 1 to delete", "limits apply -f")
	c.fails(exitFailure, nil, "limits", "diff", "-f", m)
	contains(t, c.ok("limits", "apply", "-f", m), "Applied: 3 to add, 0 to change, 1 to delete")
	contains(t, c.ok("limits", "diff", "-f", m), "No changes")
	contains(t, c.ok("limits", "apply", "-f", m), "No changes") // idempotent

	m2 := write("changed.yaml", `
scopes:
  - resource: gpt-4
    limits: [tpm:1000000/min, rpm:1000/min]   # same limits, another order: no change
  - entity: team-a
    limits: [rpm:600/min]
`)
	var plan struct {
		Changes []changeJSON `json:"changes"`
		Change  int          `json:"change"`
		Delete  int          `json:"delete"`
	}
	c.json(&plan, "limits", "plan", "-f", m2)
	if plan.Change != 1 || plan.Delete != 1 || plan.Changes[0].Entity != "key-1" || plan.Changes[0].Action != "delete" ||
		plan.Changes[1].Before[0].Spec != "rpm:500/min:600" || plan.Changes[1].After[0].Spec != "rpm:600/min" {
		t.Fatalf("plan -o json: %+v", plan)
	}
	out = c.fails(exitFailure, nil, "limits", "diff", "-f", m2)
	contains(t, out, `~ entity "team-a": rpm:500/min:600 -> rpm:600/min`, "Differences: 0 to add, 1 to change, 1 to delete")
	contains(t, c.ok("limits", "apply", "-f", m2, "--keep-unlisted"), "Applied: 0 to add, 1 to change, 0 to delete")
	contains(t, c.ok("limits", "diff", "-f", m2, "--keep-unlisted"), "No changes")

	// Export, then apply to another namespace: the same limits.
	exported := filepath.Join(dir, "export.yaml")
	c.ok("limits", "export", "-f", exported)
	data, _ := os.ReadFile(exported)
	contains(t, string(data), "namespace: default", "rpm:100/min:150", "capacity: 100000")
	copyNs := write("copy.yaml", strings.Replace(string(data), "namespace: default", "namespace: copy", 1))
	c.ns = "copy"
	c.fails(exitUsage, []string{`is for namespace "default", but --namespace`}, "limits", "apply", "-f", exported)
	c.ok("limits", "apply", "-f", copyNs)
	contains(t, c.ok("limits", "diff", "-f", copyNs), "No changes")
	contains(t, c.ok("limits", "export"), "namespace: copy", "rpm:600/min")

	// Manifest errors name the file and line; nothing is applied.
	for text, want := range map[string]string{
		"scopes:\n  - entity: k\n    limits: [rpm:abc/min]\n":                                          `bad.yaml:3: limiter: invalid rate of limit "rpm:abc/min": "abc" must be a whole number`,
		"scopes:\n  - entity: k\n    limits: [rpm:100]\n":                                              `bad.yaml:3: limiter: invalid period of limit "rpm:100": is missing`,
		"scopes:\n  - entity: k\n    limits: [rpm:1/s, rpm:2/s]\n":                                     `:3: limit "rpm" appears twice`,
		"scopes:\n  - entity: k\n    limits: [rpm:1/s]\n  - entity: k\n    limits: [x:1/s]\n":          "appears twice (also at line 2)",
		"scopes:\n  - limits: [rpm:1/s]\n":                                                             ":2: a scope needs an entity, a resource or both",
		"scopes:\n  - entity: k\n":                                                                     "needs a non-empty list of limits",
		"scope:\n  - entity: k\n":                                                                      `:1: unknown key "scope"`,
		"scopes:\n  - entity: k\n    limits: [{name: x, capacity: 1, refill: 1, period: fortnight}]\n": `period "fortnight": "fortnight" must be s, sec`,
		"scopes:\n  - entity: k\n    limits: [{name: x, capacity: 1, refill: 1, period: 0s}]\n":        `period "0s": 0s must be between 1ms and 366 days`,
		"scopes:\n  - entity: ok\n    limits: [rpm:1/s]\n  - entity: k#1\n    limits: [rpm:1/s]\n":     `bad.yaml:4: limiter: invalid Scope.Entity: "k#1" must match`,
		"scopes:\n  - resource: a b\n    limits: [rpm:1/s]\n":                                          `bad.yaml:2: limiter: invalid Scope.Resource`,
		"scopes: [\n": "yaml:",
	} {
		_, errOut, code := c.run("limits", "apply", "-f", write("bad.yaml", text))
		if code != exitUsage || !strings.Contains(errOut, want) {
			t.Errorf("manifest %q: exit %d, %q; want exit 2 with %q", text, code, errOut, want)
		}
	}
	c.fails(exitUsage, []string{"needs -f FILE"}, "limits", "plan")
	contains(t, c.ok("limits", "diff", "-f", copyNs), "No changes")
}

// A team's monthly budget in a manifest, in the limit syntax: applied,
// stored with its window, zone and anchor, exported as written, and shown
// by status with the time to the cycle's end.
func TestManifestWithACalendarQuota(t *testing.T) {
	c := newCLI(t)
	p := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(p, []byte(`
scopes:
  - entity: team-a
    limits: [rpm:500/min, "usd:50000000/month:15@Europe/Paris"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	contains(t, c.ok("limits", "apply", "-f", p), "Applied: 1 to add")
	contains(t, c.ok("limits", "diff", "-f", p), "No changes")
	var got storedLimitsJSON
	c.json(&got, "limits", "get", "--entity", "team-a")
	if len(got.Limits) != 2 || got.Limits[1].Spec != "usd:50000000/month:15@Europe/Paris" || got.Limits[1].Window != "month" ||
		got.Limits[1].TimeZone != "Europe/Paris" || got.Limits[1].MonthDay != 15 {
		t.Fatalf("limits get -o json: %+v", got)
	}
	c.fails(exitUsage, []string{`invalid zone of limit "usd:1/month@Mars/Olympus"`}, "limits", "set", "--entity", "k", "usd:1/month@Mars/Olympus")
}

// At most 10 requests in flight per key, in a manifest: applied, stored
// with its TTL, exported as written; a cap without a TTL is refused naming
// it.
func TestManifestWithAConcurrencyCap(t *testing.T) {
	c := newCLI(t)
	p := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(p, []byte(`
scopes:
  - entity: key-a
    limits: [rpm:500/min, inflight:10/concurrent:5m]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	contains(t, c.ok("limits", "apply", "-f", p), "Applied: 1 to add")
	contains(t, c.ok("limits", "diff", "-f", p), "No changes")
	var got storedLimitsJSON
	c.json(&got, "limits", "get", "--entity", "key-a")
	if len(got.Limits) != 2 || got.Limits[1].Spec != "inflight:10/concurrent:5min" || got.Limits[1].Window != "concurrent" || got.Limits[1].TTL != "5m0s" {
		t.Fatalf("limits get -o json: %+v", got)
	}
	c.fails(exitUsage, []string{`ttl of limit "inflight:10/concurrent"`}, "limits", "set", "--entity", "k", "inflight:10/concurrent")
}
