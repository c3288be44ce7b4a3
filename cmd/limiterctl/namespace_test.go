package main

import (
	"testing"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
)

func TestNamespaceCommands(t *testing.T) {
	c := newCLI(t)
	c.ok("entity", "create", "key-1")
	c.ok("limits", "set", "--entity", "key-1", "rpm:10/min")
	rpm := []limiter.Limit{limiter.PerMinute("rpm", 10)}
	c.acquire(c.limiter(), "key-1", "gpt-4", rpm, map[string]int64{"rpm": 1})
	c.ns = "other"
	c.ok("entity", "create", "key-9")
	c.acquire(c.limiter(), "key-9", "gpt-4", rpm, map[string]int64{"rpm": 1})

	var list []admin.NamespaceInfo
	c.json(&list, "namespace", "list")
	if len(list) != 2 || list[0].Name != "default" || list[1].Name != "other" {
		t.Fatalf("namespace list: %+v", list)
	}
	// default: entity, stored limits, bucket, two audit records.
	want := admin.NamespaceInfo{Name: "default", Items: 5, Entities: 1, Buckets: 1, BucketItems: 1, Resources: 1, Limits: 1, AuditRecords: 2}
	if list[0] != want {
		t.Fatalf("namespace list: default is %+v, want %+v", list[0], want)
	}
	contains(t, c.ok("namespace", "list"), "NAMESPACE", "default", "other")
	contains(t, c.ok("namespace", "show", "default"), "entities", "1 (1 shard items, 1 resources)", "audit records")

	// Bad input changes nothing.
	c.fails(exitUsage, []string{"cannot be undone", "--yes"}, "namespace", "delete", "default")
	c.fails(exitUsage, []string{"invalid Namespace", "must match"}, "namespace", "delete", "", "--yes")
	c.fails(exitUsage, []string{"invalid Namespace"}, "namespace", "delete", "a/b", "--yes")
	c.fails(exitUsage, []string{"--rate 0 must be positive"}, "namespace", "delete", "default", "--yes", "--rate", "0")
	c.fails(exitFailure, []string{`namespace "nobody"`, "no item", "namespace list"}, "namespace", "delete", "nobody", "--yes")
	c.fails(exitFailure, []string{`namespace "nobody"`, "no item"}, "namespace", "show", "nobody")
	var again []admin.NamespaceInfo
	c.json(&again, "namespace", "list")
	if len(again) != 2 || again[0] != list[0] || again[1] != list[1] {
		t.Fatalf("namespace list after bad input: %+v, want %+v", again, list)
	}

	contains(t, c.ok("namespace", "delete", "default", "--yes"), "Deleted namespace default: 5 items")
	c.fails(exitFailure, []string{`namespace "default"`, "no item"}, "namespace", "show", "default")
	c.json(&again, "namespace", "list")
	if len(again) != 1 || again[0] != list[1] {
		t.Fatalf("namespace list after the delete: %+v, want only %+v", again, list[1])
	}
}
