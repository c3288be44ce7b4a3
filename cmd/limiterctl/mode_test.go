package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shardlimit/limiter"
)

// An operator revokes a key and lets an internal caller through, from the
// command line and then from a manifest, and sees both in mode get,
// limits list, entity show, status and the audit trail; a service's
// limiter follows (once its cache expires: here a new limiter).
func TestModeCommandsAndManifest(t *testing.T) {
	c := newCLI(t)
	rpm := []limiter.Limit{limiter.PerMinute("rpm", 100)}
	one := map[string]int64{"rpm": 1}
	c.ok("limits", "set", "--entity", "key-1", "rpm:10/min")
	c.acquire(c.limiter(), "key-1", "gpt-4", rpm, one)
	contains(t, c.ok("mode", "set", "--entity", "key-1", "refuse"),
		`Mode of entity "key-1": refuse (every acquire refused without a write).`)
	contains(t, c.ok("mode", "get", "--entity", "key-1"), `entity "key-1": refuse`)
	if _, err := c.limiter().Acquire(context.Background(), limiter.Request{Entity: "key-1", Resource: "gpt-4", Consume: one}); !errors.Is(err, limiter.ErrDisabled) {
		t.Fatalf("a refused key: %v", err)
	}
	contains(t, c.ok("limits", "list"), "key-1", "rpm:10/min", "refuse")
	contains(t, c.ok("entity", "show", "key-1"), "limits (every resource)", "mode (every resource)", "refuse (every acquire refused without a write)")
	contains(t, c.ok("status", "key-1", "gpt-4"), `Mode of gpt-4: refuse, set on the entity: every acquire refused without a write.`)
	var st []bucketStatus
	c.json(&st, "status", "key-1", "gpt-4")
	if len(st) != 1 || st[0].Mode != "refuse" || st[0].ModeOf != "entity" {
		t.Fatalf("status -o json: %+v", st)
	}
	contains(t, c.ok("audit", "list", "key-1"), "scope.mode")
	c.fails(exitUsage, []string{`unknown mode "bypass": want enforce, admit, refuse or shadow`}, "mode", "set", "--entity", "key-1", "bypass")
	c.fails(exitUsage, []string{"needs --entity, --resource or both"}, "mode", "set", "admit")

	// The same as a manifest: key-1 back to enforcing (the mode left
	// out), a resource's internal caller admitted, a mode alone.
	dir := t.TempDir()
	m := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(m, []byte(`
scopes:
  - entity: key-1
    limits: [rpm:10/min]
  - entity: batch
    resource: gpt-4
    mode: admit
`), 0o644); err != nil {
		t.Fatal(err)
	}
	contains(t, c.ok("limits", "plan", "-f", m), `~ entity "key-1": rpm:10/min, mode refuse -> rpm:10/min`,
		`+ entity "batch" on resource "gpt-4": no limits, mode admit`, "Plan: 1 to add, 1 to change, 0 to delete")
	c.ok("limits", "apply", "-f", m)
	contains(t, c.ok("limits", "diff", "-f", m), "No changes")
	c.acquire(c.limiter(), "key-1", "gpt-4", rpm, one)
	contains(t, c.ok("mode", "get", "--entity", "batch", "--resource", "gpt-4"), "admit")
	contains(t, c.ok("limits", "export"), "mode: admit")

	// Taking the scope out of the manifest clears its mode.
	if err := os.WriteFile(m, []byte("scopes:\n  - entity: key-1\n    limits: [rpm:10/min]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	contains(t, c.ok("limits", "apply", "-f", m), `- entity "batch" on resource "gpt-4": no limits, mode admit (stored, not in the manifest)`)
	contains(t, c.ok("mode", "get", "--entity", "batch", "--resource", "gpt-4"), "enforce")

	// A bad mode in a manifest names the line; nothing is applied.
	if err := os.WriteFile(m, []byte("scopes:\n  - entity: key-9\n    mode: off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.fails(exitUsage, []string{`m.yaml:3: mode of a scope: unknown mode "off"`}, "limits", "apply", "-f", m)
	contains(t, c.ok("mode", "get", "--entity", "key-9"), "enforce")
}

// Rolling a limit out: added in shadow through a manifest, watched (an
// acquire over it is admitted, the lease reports it), then enforced by
// removing ":shadow", one audited change that plan shows (a change of the
// flag alone is a change, not "No changes").
func TestShadowRolloutByManifest(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	m := filepath.Join(dir, "m.yaml")
	write := func(text string) {
		if err := os.WriteFile(m, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("scopes:\n  - resource: gpt-4\n    limits: [rpm:100/min, rpd:1/day:shadow]\n")
	contains(t, c.ok("limits", "apply", "-f", m), `+ resource "gpt-4": rpm:100/min, rpd:1/day:shadow`)
	one := map[string]int64{"rpm": 1, "rpd": 1}
	lim := c.limiter()
	for i := 0; i < 3; i++ { // rpd would refuse the second and third
		c.acquire(lim, "key-1", "gpt-4", nil, one)
	}
	contains(t, c.ok("limits", "export"), "rpd:1/day:shadow")
	contains(t, c.ok("status", "key-1", "gpt-4"), "rpd (shadow)")
	write("scopes:\n  - resource: gpt-4\n    limits: [rpm:100/min, rpd:1/day]\n")
	contains(t, c.ok("limits", "plan", "-f", m), `~ resource "gpt-4": rpm:100/min, rpd:1/day:shadow -> rpm:100/min, rpd:1/day`)
	c.ok("limits", "apply", "-f", m)
	if _, err := c.limiter().Acquire(context.Background(), limiter.Request{Entity: "key-1", Resource: "gpt-4", Consume: one}); !errors.Is(err, limiter.ErrRateLimited) {
		t.Fatalf("enforced rpd: %v", err)
	}
	contains(t, c.ok("audit", "list", "--resource", "gpt-4"), "limits.put", "rpd:1/day:shadow")
	contains(t, c.ok("mode", "set", "--entity", "key-2", "shadow"), "every limit charged and reported, none refuses")
}
