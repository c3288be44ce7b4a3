package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter/admin"
)

func init() {
	register(
		&command{path: "bucket reset", admin: true, args: "ENTITY RESOURCE", minArgs: 2, maxArgs: 2,
			short: "delete every shard of a bucket so it starts full again (needs --yes)",
			setup: func(c *cmdCtx) func() error {
				yes := c.fs.Bool("yes", false, "confirm: delete the bucket's shard items")
				return func() error { return bucketReset(c, *yes) }
			}},
		&command{path: "bucket top-up", admin: true, args: "ENTITY RESOURCE LIMIT=N...", minArgs: 2, maxArgs: -1,
			short: "grant a bucket tokens now, up to its burst (audited); --resume finishes an interrupted top-up",
			setup: func(c *cmdCtx) func() error {
				resume := c.fs.Bool("resume", false, "grant what the bucket's interrupted top-ups have not granted yet (no LIMIT=N)")
				return func() error { return bucketTopUp(c, *resume) }
			}},
		&command{path: "audit list", admin: true, args: "[ENTITY]", minArgs: 0, maxArgs: 1,
			short: "configuration changes of an entity (or, with --resource alone, of a resource's limits), newest first",
			setup: func(c *cmdCtx) func() error {
				resource := c.fs.String("resource", "", "only changes about this resource (alone: the resource's own limits)")
				limit := c.fs.Int("limit", 50, "at most this many records (up to 1000)")
				return func() error { return auditList(c, *resource, *limit) }
			}},
	)
}

func bucketReset(c *cmdCtx, yes bool) error {
	entity, resource := c.args[0], c.args[1]
	if !yes {
		bs, err := c.adm.Buckets(c.ctx, entity, resource)
		if err != nil {
			return err
		}
		what := "no bucket (nothing to reset)"
		if len(bs) > 0 {
			what = fmt.Sprintf("a bucket of %d shard(s), %d shard item(s)", bs[0].Shards, bs[0].Items)
		}
		return usageErrorf("bucket reset deletes every shard of %s on %s (%s) so that it starts full; "+
			"requests charged before are forgotten. Add --yes to confirm", entity, resource, what)
	}
	shards, err := c.adm.ResetBucket(c.ctx, entity, resource)
	if err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(map[string]any{"entity": entity, "resource": resource, "reset": shards > 0, "shards": shards})
	}
	if shards == 0 {
		fmt.Fprintf(c.stdout, "No bucket for %s on %s: nothing to reset (it is full).\n", entity, resource)
		return nil
	}
	fmt.Fprintf(c.stdout, "Reset %s on %s: deleted its %d shard(s); the next request finds it full.\n", entity, resource, shards)
	return nil
}

func bucketTopUp(c *cmdCtx, resume bool) error {
	entity, resource, grants := c.args[0], c.args[1], c.args[2:]
	var recs []admin.AuditRecord
	switch {
	case resume && len(grants) > 0:
		return usageErrorf("bucket top-up --resume takes no LIMIT=N: it grants what the recorded top-ups have not granted yet")
	case resume:
		var err error
		if recs, err = c.adm.ResumeTopUps(c.ctx, entity, resource); err != nil {
			return err
		}
	case len(grants) == 0:
		return usageErrorf("bucket top-up needs a grant: LIMIT=N, e.g. tpm=5000 (whole tokens)")
	default:
		tokens := map[string]int64{}
		for _, g := range grants {
			name, n, ok := strings.Cut(g, "=")
			v, err := strconv.ParseInt(n, 10, 64)
			if !ok || err != nil {
				return usageErrorf("bucket top-up: %q must be LIMIT=N, N whole tokens (e.g. tpm=5000)", g)
			}
			tokens[name] = v
		}
		rec, err := c.adm.TopUp(c.ctx, entity, resource, tokens)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
	}
	if c.json() {
		return c.printJSON(mapped(recs, toAuditJSON))
	}
	if len(recs) == 0 {
		fmt.Fprintf(c.stdout, "No unfinished top-up of %s on %s.\n", entity, resource)
	}
	for _, r := range recs {
		fmt.Fprintf(c.stdout, "Topped up %s on %s: %s.\n", entity, resource, topUpText(r))
	}
	c.args = c.args[:2]
	return status(c, nil)
}

// topUpText describes a top-up record: "tpm +5000 over 2 shard(s)", and
// the shards it has not reached.
func topUpText(r admin.AuditRecord) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(r.After.Tokens)) {
		parts = append(parts, fmt.Sprintf("%s +%d", name, r.After.Tokens[name]))
	}
	s := strings.Join(parts, ", ") + fmt.Sprintf(" over %d shard(s)", r.After.Shards)
	if len(r.Missed) > 0 {
		s += fmt.Sprintf(", not granted on shard(s) %v (gone, or without the limit)", r.Missed)
	}
	if len(r.Pending) > 0 {
		s += fmt.Sprintf(", shard(s) %v pending: limiterctl bucket top-up %s %s --resume", r.Pending, r.Scope.Entity, r.Scope.Resource)
	}
	return s
}

type auditJSON struct {
	At        time.Time `json:"at"`
	Principal string    `json:"principal"`
	Action    string    `json:"action"`
	Entity    string    `json:"entity,omitempty"`
	Resource  string    `json:"resource,omitempty"`
	Before    *stateOut `json:"before"`
	After     *stateOut `json:"after"`
	// Pending and Missed are a top-up's shards not granted yet, and those
	// it could not reach.
	Pending []int `json:"pending,omitempty"`
	Missed  []int `json:"missed,omitempty"`
}

func toAuditJSON(r admin.AuditRecord) auditJSON {
	return auditJSON{r.At, r.Principal, string(r.Action), r.Scope.Entity, r.Scope.Resource, toStateOut(r.Before), toStateOut(r.After), r.Pending, r.Missed}
}

type stateOut struct {
	Parent  string      `json:"parent,omitempty"`
	Cascade bool        `json:"cascade,omitempty"`
	Limits  []limitJSON `json:"limits,omitempty"`
	// Mode is a scope's mode (admit, refuse or shadow; left out when it
	// enforces), on the records of its limits and mode.
	Mode      string           `json:"mode,omitempty"`
	Shards    int              `json:"shards,omitempty"`
	Tokens    map[string]int64 `json:"tokens,omitempty"`
	Malformed string           `json:"malformed,omitempty"`
}

func toStateOut(s *admin.AuditState) *stateOut {
	if s == nil {
		return nil
	}
	return &stateOut{s.Parent, s.Cascade, limitsJSON(s.Limits), string(s.Mode), s.Shards, s.Tokens, s.Malformed}
}

func auditList(c *cmdCtx, resource string, limit int) error {
	q := admin.AuditQuery{Resource: resource, Limit: limit}
	if len(c.args) == 1 {
		q.Entity = c.args[0]
	}
	if q.Entity == "" && q.Resource == "" {
		return usageErrorf("audit list needs an ENTITY, --resource or both")
	}
	recs, err := c.adm.Audit(c.ctx, q)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		// Not found, as limits get and entity show say it: exit code 1.
		return fmt.Errorf("no audit records for %v in namespace %q", admin.Scope{Entity: q.Entity, Resource: q.Resource}, c.namespace)
	}
	if c.json() {
		return c.printJSON(mapped(recs, toAuditJSON))
	}
	w := c.tabular("WHEN (UTC)", "WHO", "ACTION", "SCOPE", "BEFORE", "AFTER")
	for _, r := range recs {
		row(w, r.At.Format("2006-01-02 15:04:05.000"), r.Principal, r.Action, r.Scope, stateText(r.Action, r.Before), stateText(r.Action, r.After))
	}
	return w.Flush()
}

// stateText is one side of a change, for people.
func stateText(a admin.AuditAction, s *admin.AuditState) string {
	switch {
	case s == nil:
		return "-"
	case s.Malformed != "":
		return "malformed: " + s.Malformed
	case strings.HasPrefix(string(a), "entity."):
		if s.Parent == "" {
			return "no parent"
		}
		return "parent " + s.Parent + map[bool]string{true: " (cascade)"}[s.Cascade]
	case a == admin.AuditResetBucket:
		return fmt.Sprintf("%d shard(s)", s.Shards)
	case a == admin.AuditTopUp:
		return topUpText(admin.AuditRecord{After: s})
	}
	// A scope's limits and mode share an item, and each record of either
	// has both: a mode change shows in the mode.
	return describeScope(s.Limits, s.Mode)
}
