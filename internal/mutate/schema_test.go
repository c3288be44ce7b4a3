package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"
)

const sample = `package p

const limit = 2 + 3

func f(a, b int64, ok bool, s string) int64 {
	if a < b && ok {
		return a + b
	}
	x := -a
	x++
	x += b
	g(x == 0)
	for i := 0; i < 3; i++ {
		x *= 2
	}
	_ = s + "!"
	_ = [limit * 2]int{}
	return x % 7
}

func g(bool) {}
`

// schema parses and type-checks a one-file package and collects its sites.
func schema(t *testing.T, src string) (*fileSchema, *ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	if _, err := (&types.Config{}).Check("p", fset, []*ast.File{f}, info); err != nil {
		t.Fatal(err)
	}
	fs := &fileSchema{fset: fset, tf: fset.File(f.Pos()), file: f, src: []byte(src), info: info}
	fs.collect(f)
	fs.number(1)
	return fs, f
}

// The schema of a file switches each site on its mutant ids, keeps every
// line where it was (so compiler errors name the site), and leaves alone
// what cannot switch at run time: constants, string concatenation, array
// lengths, a loop's post statement.
func TestSchemaRewritesEachSite(t *testing.T) {
	fs, f := schema(t, sample)
	out := string(fs.render())
	for _, want := range []string{
		"const limit = 2 + 3",
		"if zzLAND(1, zzLSS(2, a, b), func() bool { return ok }) {",
		"return zzADD(4, a, b)",
		"x := zzNEG(5, a)",
		"if zzOn(6) { x-- } else { x++ }",
		"if zzOn(7) { x -= b } else { x += b }",
		"if !zzOn(8) { g((zzOn(9) != (x == 0))) }",
		"for i := 0; zzLSS(10, i, 3); i++ {",
		"if zzOn(12) { x /= 2 } else { x *= 2 }",
		`_ = s + "!"`,
		"_ = [limit * 2]int{}",
		"return zzREM(13, x, 7)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("schema lacks %q:\n%s", want, out)
		}
	}
	if got, want := strings.Count(out, "\n"), strings.Count(sample, "\n"); got != want {
		t.Errorf("schema has %d lines, the source %d: lines must not move", got, want)
	}
	if _, err := parser.ParseFile(token.NewFileSet(), "p.go", out, 0); err != nil {
		t.Fatalf("schema does not parse: %v\n%s", err, out)
	}
	ms := fs.mutants("t", "p.go", indexFuncs(fs, f))
	if len(ms) != 13 {
		t.Fatalf("%d mutants, want 13: %+v", len(ms), ms)
	}
	for i, m := range ms {
		if m.ID != i+1 || m.Func != "f" {
			t.Errorf("mutant %d: %+v", i+1, m)
		}
	}
	if ms[1].Change != "< → <=" || ms[2].Change != "< → >=" || ms[7].Change != "remove g(…)" {
		t.Errorf("changes: %q %q %q", ms[1].Change, ms[2].Change, ms[7].Change)
	}
}

// Calls that only log or reserve capacity are not removed: nothing a test
// pins changes without them. Other calls on the same values are.
func TestLogAndCapacityCallsAreNotRemoved(t *testing.T) {
	const src = `package p

import (
	"log/slog"
	"strings"
)

func f(log *slog.Logger, sb *strings.Builder) {
	log.Info("hello")
	sb.Grow(8)
	sb.WriteString("x")
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	if _, err := (&types.Config{Importer: importer.ForCompiler(fset, "source", nil)}).Check("p", fset, []*ast.File{f}, info); err != nil {
		t.Fatal(err)
	}
	fs := &fileSchema{fset: fset, tf: fset.File(f.Pos()), file: f, src: []byte(src), info: info}
	fs.collect(f)
	fs.number(1)
	ms := fs.mutants("t", "p.go", indexFuncs(fs, f))
	if len(ms) != 1 || ms[0].Change != "remove sb.WriteString(…)" {
		t.Fatalf("mutants %+v, want only the removal of sb.WriteString", ms)
	}
}

// The helper file parses for any package name and id range.
func TestHelperFileParses(t *testing.T) {
	if _, err := parser.ParseFile(token.NewFileSet(), "zz.go", helperFile("engine", 17, 40), 0); err != nil {
		t.Fatal(err)
	}
}

// An entry of equivalent.txt matches by file, function, change and
// source; "*" matches anything.
func TestEquivalentEntriesMatch(t *testing.T) {
	m := Mutant{File: "a.go", Func: "f", Change: "< → <=", Source: "if a < b {", Status: statusLived}
	for _, tc := range []struct {
		e    equivalent
		want string
	}{
		{equivalent{file: "a.go", fn: "f", change: "< → <=", source: "if a < b {", reason: "same"}, statusEquivalent},
		{equivalent{file: "a.go", fn: "*", change: "*", source: "*", reason: "cost: fewer writes"}, statusCostOnly},
		{equivalent{file: "a.go", fn: "g", change: "*", source: "*", reason: "other"}, statusLived},
	} {
		ms := []Mutant{m}
		equivalents{&tc.e}.apply(ms, nil)
		if ms[0].Status != tc.want {
			t.Errorf("%+v: status %s, want %s", tc.e, ms[0].Status, tc.want)
		}
	}
}

// A change made at several places of one function with the same source
// line is told apart by its place among them, in source order, so that an
// entry of equivalent.txt justifies one of them, not all.
func TestRepeatedChangesAreNumbered(t *testing.T) {
	const src = `package p

func f(a, b, c bool, x, y int) bool {
	return a && b && c || x < y
}

func g(a bool) bool {
	if a {
		return false
	}
	return false
}
`
	fs, f := schema(t, src)
	var got []string
	for _, m := range fs.mutants("t", "p.go", indexFuncs(fs, f)) {
		got = append(got, m.Change)
	}
	want := "|| → && 2nd && → || 1st && → || < → <= < → >= 1st false → true 2nd false → true" // outermost first
	if strings.Join(got, " ") != want {
		t.Fatalf("changes %q, want %s", got, want)
	}
}
