package main

import (
	"strings"
	"testing"
)

func TestEntityCommands(t *testing.T) {
	c := newCLI(t)
	contains(t, c.ok("entity", "create", "team"), "Created entity team.")
	// Flags after the argument work too.
	contains(t, c.ok("entity", "create", "key-1", "--parent", "team", "--cascade"), "Created entity key-1 under team (cascade).")
	c.ok("entity", "create", "key-2", "--parent=team")
	c.fails(exitFailure, []string{`entity "key-1" exists`, "set-parent"}, "entity", "create", "key-1")
	c.fails(exitFailure, []string{`parent "nobody" does not exist`}, "entity", "create", "key-3", "--parent", "nobody")
	c.fails(exitUsage, []string{"invalid entity", "must match"}, "entity", "create", "bad#id")
	c.fails(exitUsage, []string{"takes ENTITY; got 0"}, "entity", "create")

	var list []entityJSON
	c.json(&list, "entity", "list")
	if len(list) != 3 || list[0] != (entityJSON{"key-1", "team", true}) || list[2].ID != "team" {
		t.Fatalf("entity list: %+v", list)
	}
	if out := c.ok("entity", "list", "--prefix", "key-", "--limit", "1"); !strings.Contains(out, "key-1") || strings.Contains(out, "key-2") {
		t.Fatalf("entity list --prefix key- --limit 1:\n%s", out)
	}

	c.ok("limits", "set", "--entity", "key-1", "rpm:10/min")
	contains(t, c.ok("entity", "show", "key-1"), "parent", "team", "cascade", "true", "limits (every resource)", "rpm:10/min")

	contains(t, c.ok("entity", "set-parent", "key-1", "--none"), "Updated entity key-1.")
	contains(t, c.ok("entity", "set-parent", "key-2", "key-1", "--cascade"), "Updated entity key-2 under key-1 (cascade).")
	c.fails(exitUsage, []string{"--none"}, "entity", "set-parent", "key-2")
	c.fails(exitFailure, []string{`entity "nobody" does not exist`}, "entity", "set-parent", "key-2", "nobody")
	c.fails(exitUsage, []string{"cycle"}, "entity", "set-parent", "key-1", "key-2")
	var shown map[string]any
	c.json(&shown, "entity", "show", "key-2")
	if shown["parent"] != "key-1" || shown["cascade"] != true {
		t.Fatalf("entity show -o json: %v", shown)
	}

	contains(t, c.ok("entity", "delete", "key-2"), "Deleted entity key-2.")
	c.fails(exitFailure, []string{`entity "key-2" does not exist`}, "entity", "delete", "key-2")
	c.fails(exitFailure, []string{`"key-2" has no entity item`}, "entity", "show", "key-2")
	// key-1 keeps its stored limits after its entity item goes.
	c.ok("entity", "delete", "key-1")
	contains(t, c.ok("entity", "show", "key-1"), "no entity item", "rpm:10/min")
}
