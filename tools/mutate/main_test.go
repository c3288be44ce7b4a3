package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const src = `package p

func f(a, b int) int {
	x := 0
	if a > b {
		x = a
	} else {
		x = b
	}
	if x < 0 {
		return 0
	}
	g()
	x++
	_ = x
	return min(x, b)
}

func g() {}
`

// Each kind of mutant is made where it applies, and each mutated file
// still parses: what it changes is the code, never the syntax.
func TestMutants(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "p", "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ms, err := mutants(root, &target{name: "p", dir: "p"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.kind+" "+m.desc)
		mutated := src[:m.start] + m.repl + src[m.end:]
		if _, err := parser.ParseFile(token.NewFileSet(), "p.go", mutated, 0); err != nil {
			t.Errorf("%s %s: the mutated file does not parse: %v", m.kind, m.desc, err)
		}
	}
	want := []string{
		"REMOVE_IF deleted: if a > b {…}",
		"REMOVE_ASSIGNMENT removed: x = a",
		"REMOVE_ASSIGNMENT removed: x = b",
		"REMOVE_IF deleted: if x < 0 {…}",
		"REMOVE_CALL removed: g()",
		"REMOVE_ASSIGNMENT removed: x++",
		"DROP_MIN_ARGUMENT min(x, b) → min(b) (dropped x)",
		"DROP_MIN_ARGUMENT min(x, b) → min(x) (dropped b)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("mutants:\n%q\nwant:\n%q", got, want)
	}
	// A deleted if block is one whose condition is false; a removed
	// assignment still computes its value, into _.
	if src[ms[0].start:ms[0].end] != "a > b" || ms[0].repl != "false" || ms[1].repl != "_ = a" || ms[5].repl != "" {
		t.Errorf("replacements %q → %q, %q, %q", src[ms[0].start:ms[0].end], ms[0].repl, ms[1].repl, ms[5].repl)
	}
	// The body of an if block must run for its deletion to count.
	if ms[0].cover.Line != 5 {
		t.Errorf("REMOVE_IF covered at line %d, want 5 (its body)", ms[0].cover.Line)
	}
}
