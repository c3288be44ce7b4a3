package main

import (
	"fmt"

	"github.com/shardlimit/limiter/admin"
)

func init() {
	register(
		&command{path: "entity create", admin: true, args: "ENTITY", minArgs: 1, maxArgs: 1,
			short: "create an entity, optionally under a parent",
			setup: func(c *cmdCtx) func() error {
				parent := c.fs.String("parent", "", "the parent entity (cascade charges it)")
				cascade := c.fs.Bool("cascade", false, "every acquire also charges the parent's bucket")
				return func() error { return entityCreate(c, *parent, *cascade) }
			}},
		&command{path: "entity show", admin: true, args: "ENTITY", minArgs: 1, maxArgs: 1,
			short: "an entity, its stored limits and its buckets", setup: noFlags(entityShow)},
		&command{path: "entity list", admin: true, short: "the entities of the namespace, in id order",
			setup: func(c *cmdCtx) func() error {
				prefix := c.fs.String("prefix", "", "only ids that begin with this")
				limit := c.fs.Int("limit", 1000, "at most this many (0: all)")
				return func() error { return entityList(c, *prefix, *limit) }
			}},
		&command{path: "entity set-parent", admin: true, args: "ENTITY [PARENT]", minArgs: 1, maxArgs: 2,
			short: "set or (with --none) remove an entity's parent",
			setup: func(c *cmdCtx) func() error {
				cascade := c.fs.Bool("cascade", false, "every acquire also charges the parent's bucket")
				none := c.fs.Bool("none", false, "remove the parent")
				return func() error { return entitySetParent(c, *cascade, *none) }
			}},
		&command{path: "entity delete", admin: true, args: "ENTITY", minArgs: 1, maxArgs: 1,
			short: "delete an entity (its stored limits and buckets stay)", setup: noFlags(entityDelete)},
	)
}

type entityJSON struct {
	ID      string `json:"id"`
	Parent  string `json:"parent,omitempty"`
	Cascade bool   `json:"cascade"`
}

func toEntityJSON(e admin.Entity) entityJSON { return entityJSON{e.ID, e.Parent, e.Cascade} }

func entityCreate(c *cmdCtx, parent string, cascade bool) error {
	id := c.args[0]
	if _, ok, err := c.adm.GetEntity(c.ctx, id); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("entity %q exists; change its parent with limiterctl entity set-parent", id)
	}
	if parent != "" {
		if _, ok, err := c.adm.GetEntity(c.ctx, parent); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("parent %q does not exist; create it first with limiterctl entity create %s", parent, parent)
		}
	}
	e := admin.Entity{ID: id, Parent: parent, Cascade: cascade}
	if err := c.adm.PutEntity(c.ctx, e); err != nil {
		return err
	}
	return c.printEntity("Created", e)
}

func (c *cmdCtx) printEntity(verb string, e admin.Entity) error {
	if c.json() {
		return c.printJSON(toEntityJSON(e))
	}
	fmt.Fprintf(c.stdout, "%s entity %s%s.\n", verb, e.ID, parentText(e))
	return nil
}

func parentText(e admin.Entity) string {
	switch {
	case e.Parent == "":
		return ""
	case e.Cascade:
		return " under " + e.Parent + " (cascade)"
	}
	return " under " + e.Parent
}

func (c *cmdCtx) mustEntity(id string) (admin.Entity, error) {
	e, ok, err := c.adm.GetEntity(c.ctx, id)
	if err != nil {
		return e, err
	}
	if !ok {
		return e, fmt.Errorf("entity %q does not exist in namespace %q; list them with limiterctl entity list", id, c.namespace)
	}
	return e, nil
}

func entityShow(c *cmdCtx) error {
	id := c.args[0]
	e, found, err := c.adm.GetEntity(c.ctx, id)
	if err != nil {
		return err
	}
	stored, err := c.adm.ListLimits(c.ctx, id)
	if err != nil {
		return err
	}
	buckets, err := c.adm.Buckets(c.ctx, id, "")
	if err != nil {
		return err
	}
	if !found && len(stored) == 0 && len(buckets) == 0 {
		return fmt.Errorf("entity %q has no entity item, stored limits or buckets in namespace %q", id, c.namespace)
	}
	if c.json() {
		out := map[string]any{"id": id, "exists": found, "stored_limits": storedJSON(stored), "buckets": bucketsJSON(buckets)}
		if found {
			out["parent"], out["cascade"] = e.Parent, e.Cascade
		}
		return c.printJSON(out)
	}
	w := c.tabular()
	switch {
	case !found:
		row(w, "entity", id+" (no entity item: no parent)")
	case e.Parent == "":
		row(w, "entity", id)
	default:
		row(w, "entity", id)
		row(w, "parent", e.Parent)
		row(w, "cascade", e.Cascade)
	}
	for _, s := range stored {
		if s.Limits != nil {
			row(w, "limits "+scopeResource(s.Scope), describeLimits(s.Limits))
		}
		if s.Mode != admin.ModeEnforce {
			row(w, "mode "+scopeResource(s.Scope), modeName(s.Mode)+" ("+modeMeaning(s.Mode)+")")
		}
	}
	for _, b := range buckets {
		row(w, "bucket "+b.Resource, fmt.Sprintf("%d shard(s), %s", b.Shards, describeLimits(b.Limits)))
	}
	return w.Flush()
}

// scopeResource names the resource part of an entity's scope.
func scopeResource(s admin.Scope) string {
	if s.Resource == "" {
		return "(every resource)"
	}
	return "on " + s.Resource
}

func entityList(c *cmdCtx, prefix string, limit int) error {
	ents, err := c.adm.ListEntities(c.ctx, prefix, limit)
	if err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(mapped(ents, toEntityJSON))
	}
	w := c.tabular("ENTITY", "PARENT", "CASCADE")
	for _, e := range ents {
		row(w, e.ID, e.Parent, e.Cascade)
	}
	w.Flush()
	if limit > 0 && len(ents) == limit {
		fmt.Fprintf(c.stderr, "(first %d; raise --limit or narrow with --prefix for more)\n", limit)
	}
	return nil
}

func entitySetParent(c *cmdCtx, cascade, none bool) error {
	switch {
	case none && len(c.args) == 2:
		return usageErrorf("entity set-parent: give a PARENT or --none, not both")
	case !none && len(c.args) == 1:
		return usageErrorf("entity set-parent: give a PARENT, or --none to remove the parent")
	case none && cascade:
		return usageErrorf("entity set-parent: --cascade needs a parent")
	}
	e, err := c.mustEntity(c.args[0])
	if err != nil {
		return err
	}
	e.Parent, e.Cascade = "", false
	if !none {
		if _, err := c.mustEntity(c.args[1]); err != nil {
			return err
		}
		e.Parent, e.Cascade = c.args[1], cascade
	}
	if err := c.adm.PutEntity(c.ctx, e); err != nil {
		return err
	}
	return c.printEntity("Updated", e)
}

func entityDelete(c *cmdCtx) error {
	e, err := c.mustEntity(c.args[0])
	if err != nil {
		return err
	}
	if err := c.adm.DeleteEntity(c.ctx, e.ID); err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(map[string]any{"deleted": toEntityJSON(e)})
	}
	fmt.Fprintf(c.stdout, "Deleted entity %s. Its stored limits and buckets stay (limiterctl entity show %s).\n", e.ID, e.ID)
	return nil
}

type bucketJSON struct {
	Resource string      `json:"resource"`
	Shards   int         `json:"shards"`
	Items    int         `json:"shard_items"`
	Limits   []limitJSON `json:"limits"`
}

func bucketsJSON(bs []admin.BucketInfo) []bucketJSON {
	return mapped(bs, func(b admin.BucketInfo) bucketJSON {
		return bucketJSON{b.Resource, b.Shards, b.Items, limitsJSON(b.Limits)}
	})
}
