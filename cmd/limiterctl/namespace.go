package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/shardlimit/limiter/admin"
)

func init() {
	register(
		&command{path: "namespace list", maxArgs: 0,
			short: "the namespaces of the table and what they hold (scans the whole table)", setup: noFlags(namespaceList)},
		&command{path: "namespace show", args: "NAMESPACE", minArgs: 1, maxArgs: 1,
			short: "what a namespace holds, by kind (scans the whole table)", setup: noFlags(namespaceShow)},
		&command{path: "namespace delete", args: "NAMESPACE", minArgs: 1, maxArgs: 1,
			short: "delete every item of a namespace (needs --yes; run again to resume)",
			setup: func(c *cmdCtx) func() error {
				yes := c.fs.Bool("yes", false, "confirm: delete every item of the namespace, which cannot be undone")
				rate := c.fs.Int("rate", admin.DefaultDeleteRate, "write units per second the deletes may consume")
				return func() error { return namespaceDelete(c, *yes, *rate) }
			}},
	)
}

// printNamespaces writes one row per namespace.
func (c *cmdCtx) printNamespaces(list []admin.NamespaceInfo) error {
	w := c.tabular("NAMESPACE", "ITEMS", "BUCKETS", "SHARD ITEMS", "ENTITIES", "STORED LIMITS", "USAGE SNAPSHOTS", "AUDIT RECORDS", "OTHER")
	for _, n := range list {
		row(w, n.Name, n.Items, n.Buckets, n.BucketItems, n.Entities, n.Limits, n.UsageSnapshots, n.AuditRecords, n.Other)
	}
	return w.Flush()
}

func namespaceList(c *cmdCtx) error {
	st, err := c.openStore()
	if err != nil {
		return err
	}
	list, err := admin.ListNamespaces(c.ctx, st)
	if err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(list)
	}
	if len(list) == 0 {
		fmt.Fprintln(c.stdout, "No namespace: the table holds no limiter item.")
		return nil
	}
	return c.printNamespaces(list)
}

// namespaceAdmin returns an Admin of the namespace the command names.
func namespaceAdmin(c *cmdCtx) (*admin.Admin, error) {
	c.namespace = c.args[0]
	return c.admin()
}

func namespaceShow(c *cmdCtx) error {
	adm, err := namespaceAdmin(c)
	if err != nil {
		return err
	}
	info, err := adm.Namespace(c.ctx)
	if err != nil {
		return unknownNamespace(err)
	}
	if c.json() {
		return c.printJSON(info)
	}
	w := c.tabular()
	row(w, "namespace", info.Name)
	row(w, "items", info.Items)
	row(w, "entities", info.Entities)
	row(w, "buckets", fmt.Sprintf("%d (%d shard items, %d resources)", info.Buckets, info.BucketItems, info.Resources))
	row(w, "stored limits", info.Limits)
	row(w, "audit records", info.AuditRecords)
	row(w, "usage snapshots", info.UsageSnapshots)
	if info.Other > 0 {
		row(w, "other items", info.Other)
	}
	return w.Flush()
}

func unknownNamespace(err error) error {
	if errors.Is(err, admin.ErrUnknownNamespace) {
		return fmt.Errorf("%w; list the namespaces with limiterctl namespace list", err)
	}
	return err
}

func namespaceDelete(c *cmdCtx, yes bool, rate int) error {
	ns := c.args[0]
	if rate <= 0 {
		return usageErrorf("--rate %d must be positive (write units per second)", rate)
	}
	adm, err := namespaceAdmin(c)
	if err != nil {
		return err
	}
	if !yes {
		return usageErrorf("namespace delete removes every item of namespace %q and cannot be undone; "+
			"see what it holds with limiterctl namespace show %s, then add --yes", ns, ns)
	}
	ctx, stop := signal.NotifyContext(c.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	next := 1000
	deleted, err := adm.DeleteNamespace(ctx, admin.DeleteNamespaceOptions{WriteUnitsPerSecond: float64(rate),
		Progress: func(d admin.NamespaceInfo) {
			if d.Items >= next {
				fmt.Fprintf(c.stderr, "%d items deleted\n", d.Items)
				next = d.Items + 1000
			}
		}})
	if err != nil {
		return unknownNamespace(err)
	}
	if c.json() {
		return c.printJSON(deleted)
	}
	fmt.Fprintf(c.stdout, "Deleted namespace %s: %d items (%d entities, %d buckets in %d shard items, %d stored limits, %d audit records, %d usage snapshots).\n",
		ns, deleted.Items, deleted.Entities, deleted.Buckets, deleted.BucketItems, deleted.Limits, deleted.AuditRecords, deleted.UsageSnapshots)
	return nil
}
