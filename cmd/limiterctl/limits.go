package main

import (
	"cmp"
	"fmt"
	"os"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
)

func init() {
	// scoped is the setup of a command on the scope of --entity and
	// --resource, at least one of them.
	scoped := func(run func(*cmdCtx, admin.Scope) error) func(c *cmdCtx) func() error {
		return func(c *cmdCtx) func() error {
			entity := c.fs.String("entity", "", "the entity (with --resource: on that resource only)")
			resource := c.fs.String("resource", "", "the resource (without --entity: for every entity)")
			return func() error {
				if *entity == "" && *resource == "" {
					return usageErrorf("%s needs --entity, --resource or both", c.cmd.path)
				}
				return run(c, admin.Scope{Entity: *entity, Resource: *resource})
			}
		}
	}
	register(
		&command{path: "limits get", admin: true, short: "the limits stored for a scope (--entity, --resource or both)", setup: scoped(limitsGet)},
		&command{path: "limits set", admin: true, args: "LIMIT...", minArgs: 1, maxArgs: -1,
			short: "store limits for a scope: name:rate/period[:burst], e.g. rpm:100/min:150", setup: scoped(limitsSet)},
		&command{path: "limits delete", admin: true, short: "delete the limits stored for a scope (its mode stays)", setup: scoped(limitsDelete)},
		&command{path: "mode get", admin: true, short: "the mode of a scope (--entity, --resource or both): enforce, admit, refuse or shadow", setup: scoped(modeGet)},
		&command{path: "mode set", admin: true, args: "MODE", minArgs: 1, maxArgs: 1,
			short: "set a scope's mode: admit (admitted, no write), refuse (refused, no write), shadow (charged, never refused) or enforce", setup: scoped(modeSet)},
		&command{path: "limits list", admin: true, short: "every limit stored in the namespace (or for one --entity)",
			setup: func(c *cmdCtx) func() error {
				entity := c.fs.String("entity", "", "only this entity's")
				return func() error { return limitsList(c, *entity) }
			}},
		&command{path: "limits export", admin: true, short: "write the namespace's stored limits as a manifest (for plan, apply, diff)",
			setup: func(c *cmdCtx) func() error {
				file := c.fs.String("f", "", "write to this file instead of standard output")
				return func() error { return limitsExport(c, *file) }
			}},
	)
	for _, m := range []struct {
		name, short string
		mode        planMode
	}{
		{"plan", "print what apply would change to make the namespace's stored limits the manifest's", planOnly},
		{"apply", "make the namespace's stored limits the manifest's (idempotent)", planApply},
		{"diff", "print the differences; exit 1 when the table differs from the manifest (for CI)", planDiff},
	} {
		register(&command{path: "limits " + m.name, short: m.short,
			setup: func(c *cmdCtx) func() error {
				file := c.fs.String("f", "", "the manifest (YAML; - for standard input)")
				keep := c.fs.Bool("keep-unlisted", false, "leave stored limits the manifest does not list alone (default: they are deleted)")
				return func() error { return limitsPlan(c, *file, *keep, m.mode) }
			}})
	}
}

func limitsGet(c *cmdCtx, s admin.Scope) error {
	ls, ok, err := c.adm.GetLimits(c.ctx, s)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no limits stored for %v in namespace %q; set them with limiterctl limits set", s, c.namespace)
	}
	return c.printLimits(s, ls)
}

func (c *cmdCtx) printLimits(s admin.Scope, ls []limiter.Limit) error {
	if c.json() {
		return c.printJSON(storedLimitsJSON{Entity: s.Entity, Resource: s.Resource, Limits: limitsJSON(ls)})
	}
	w := c.tabular("LIMIT", "SPEC", "CAPACITY", "BURST", "REFILL", "PERIOD")
	for _, l := range ls {
		row(w, l.Name, l.String(), l.Capacity, l.EffectiveBurst(), l.Refill, formatPeriod(l.Period))
	}
	return w.Flush()
}

type storedLimitsJSON struct {
	Entity   string      `json:"entity,omitempty"`
	Resource string      `json:"resource,omitempty"`
	Limits   []limitJSON `json:"limits"`
	Mode     string      `json:"mode,omitempty"`
}

func storedJSON(stored []admin.StoredLimits) []storedLimitsJSON {
	return mapped(stored, func(s admin.StoredLimits) storedLimitsJSON {
		return storedLimitsJSON{s.Scope.Entity, s.Scope.Resource, limitsJSON(s.Limits), string(s.Mode)}
	})
}

// modeName is a mode as limiterctl writes it ("enforce" for the default).
func modeName(m admin.Mode) string { return cmp.Or(string(m), "enforce") }

// parseMode reads a mode as limiterctl takes it.
func parseMode(s string) (admin.Mode, error) {
	switch m := admin.Mode(s); m {
	case "enforce":
		return admin.ModeEnforce, nil
	case admin.ModeAdmit, admin.ModeRefuse, admin.ModeShadow:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q: want enforce, admit, refuse or shadow", s)
}

func modeGet(c *cmdCtx, s admin.Scope) error {
	m, err := c.adm.GetMode(c.ctx, s)
	if err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(map[string]any{"entity": s.Entity, "resource": s.Resource, "mode": modeName(m)})
	}
	fmt.Fprintf(c.stdout, "%v: %s (%s).\n", s, modeName(m), modeMeaning(m))
	return nil
}

// modeMeaning says what a mode does to an acquire.
func modeMeaning(m admin.Mode) string {
	switch m {
	case admin.ModeAdmit:
		return "every acquire admitted without a write"
	case admin.ModeRefuse:
		return "every acquire refused without a write"
	case admin.ModeShadow:
		return "every limit charged and reported, none refuses"
	}
	return "the limits apply"
}

func modeSet(c *cmdCtx, s admin.Scope) error {
	m, err := parseMode(c.args[0])
	if err != nil {
		return usageErrorf("%v", err)
	}
	if err := c.adm.SetMode(c.ctx, s, m); err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(map[string]any{"entity": s.Entity, "resource": s.Resource, "mode": modeName(m)})
	}
	fmt.Fprintf(c.stdout, "Mode of %v: %s (%s).\n", s, modeName(m), modeMeaning(m))
	return nil
}

func limitsSet(c *cmdCtx, s admin.Scope) error {
	ls, err := parseLimits(c.args)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if err := c.adm.PutLimits(c.ctx, s, ls); err != nil {
		return err
	}
	if c.json() {
		return c.printLimits(s, ls)
	}
	fmt.Fprintf(c.stdout, "Stored for %v: %s.\n", s, describeLimits(ls))
	return nil
}

func limitsDelete(c *cmdCtx, s admin.Scope) error {
	ls, ok, err := c.adm.GetLimits(c.ctx, s)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no limits stored for %v in namespace %q; nothing deleted (limiterctl limits list shows what is stored)", s, c.namespace)
	}
	if err := c.adm.DeleteLimits(c.ctx, s); err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(map[string]any{"deleted": storedLimitsJSON{s.Entity, s.Resource, limitsJSON(ls), ""}})
	}
	fmt.Fprintf(c.stdout, "Deleted the limits of %v (%s).\n", s, describeLimits(ls))
	return nil
}

func limitsList(c *cmdCtx, entity string) error {
	stored, err := c.adm.ListLimits(c.ctx, entity)
	if err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(storedJSON(stored))
	}
	w := c.tabular("ENTITY", "RESOURCE", "LIMITS", "MODE")
	for _, s := range stored {
		row(w, orDash(s.Scope.Entity), orDash(s.Scope.Resource), orDash(describeLimits(s.Limits)), modeName(s.Mode))
	}
	return w.Flush()
}

func orDash(s string) string { return cmp.Or(s, "-") }

func limitsExport(c *cmdCtx, file string) error {
	stored, err := c.adm.ListLimits(c.ctx, "")
	if err != nil {
		return err
	}
	b, err := encodeManifest(c.namespace, stored)
	if err != nil {
		return err
	}
	if file == "" || file == "-" {
		_, err = c.stdout.Write(b)
		return err
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "Wrote %d scope(s) of namespace %q to %s.\n", len(stored), c.namespace, file)
	return nil
}
