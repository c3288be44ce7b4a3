package main

import (
	"fmt"
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
		&command{path: "audit list", args: "[ENTITY]", minArgs: 0, maxArgs: 1,
			short: "configuration changes of an entity (or, with --resource alone, of a resource's limits), newest first",
			setup: func(c *cmdCtx) func() error {
				resource := c.fs.String("resource", "", "only changes about this resource (alone: the resource's own limits)")
				limit := c.fs.Int("limit", 50, "at most this many records (up to 1000)")
				return func() error { return auditList(c, *resource, *limit) }
			}},
	)
}

func bucketReset(c *cmdCtx, yes bool) error {
	adm := c.adm
	entity, resource := c.args[0], c.args[1]
	if !yes {
		bs, err := adm.Buckets(c.ctx, entity, resource)
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
	shards, err := adm.ResetBucket(c.ctx, entity, resource)
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

type auditJSON struct {
	At        time.Time `json:"at"`
	Principal string    `json:"principal"`
	Action    string    `json:"action"`
	Entity    string    `json:"entity,omitempty"`
	Resource  string    `json:"resource,omitempty"`
	Before    *stateOut `json:"before"`
	After     *stateOut `json:"after"`
}

type stateOut struct {
	Parent    string      `json:"parent,omitempty"`
	Cascade   bool        `json:"cascade,omitempty"`
	Limits    []limitJSON `json:"limits,omitempty"`
	Shards    int         `json:"shards,omitempty"`
	Malformed string      `json:"malformed,omitempty"`
}

func toStateOut(s *admin.AuditState) *stateOut {
	if s == nil {
		return nil
	}
	return &stateOut{s.Parent, s.Cascade, limitsJSON(s.Limits), s.Shards, s.Malformed}
}

func auditList(c *cmdCtx, resource string, limit int) error {
	q := admin.AuditQuery{Resource: resource, Limit: limit}
	if len(c.args) == 1 {
		q.Entity = c.args[0]
	}
	if q.Entity == "" && q.Resource == "" {
		return usageErrorf("audit list needs an ENTITY, --resource or both")
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	recs, err := adm.Audit(c.ctx, q)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		// Not found, as limits get and entity show say it: exit code 1.
		return fmt.Errorf("no audit records for %v in namespace %q", admin.Scope{Entity: q.Entity, Resource: q.Resource}, c.namespace)
	}
	if c.json() {
		return c.printJSON(mapped(recs, func(r admin.AuditRecord) auditJSON {
			return auditJSON{r.At, r.Principal, string(r.Action), r.Scope.Entity, r.Scope.Resource, toStateOut(r.Before), toStateOut(r.After)}
		}))
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
	}
	return describeLimits(s.Limits)
}
