// Command mutate makes the mutants that operator mutation (gremlins, which
// flips operators) does not: it removes a call or an assignment, drops an
// argument of min or max, and deletes an if block (its condition made
// false). It runs each mutant's
// tests and reports the mutants no test noticed (LIVED): code whose
// removal no test notices, a guard or a cap the tests do not pin.
//
//	cd tools && go run ./mutate -root .. -report ../build/mutate/removals.txt
//	cd tools && go run ./mutate -root .. -targets bucket -list
//
// A mutant is applied with go's -overlay flag (the worktree is never
// changed) and costs one build and test run per test package of its
// target, stopping at the first failure. A baseline run with coverage
// finds the code the target's tests reach; a mutant of code they do not
// reach is NOT COVERED and not run. A mutant that does not compile (say, a
// removed call was the only use of a variable) is NOT VIABLE.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A target is code to mutate and the tests that judge its mutants, run in
// order, cheapest first.
type target struct {
	name  string
	dir   string   // the package, relative to the module root
	files []string // the files to mutate, in dir; nil: every non-test file
	runs  [][]string
}

// skipSlow leaves out the tests that start DynamoDB Local (store/dynamo
// is not what these targets are) and the root's property test (minutes).
// noFailFile keeps rapid, in the packages whose tests use it, from writing
// a mutant's failure into the worktree as a regression to replay.
const (
	skipSlow   = "-skip=^TestProperty$|DynamoDBLocal"
	noFailFile = "-rapid.nofailfile"
)

var targets = []target{
	{name: "bucket", dir: "bucket", runs: [][]string{{"./bucket", noFailFile}, {"./internal/engine", noFailFile}}},
	{name: "engine", dir: "internal/engine", runs: [][]string{{"./internal/engine", noFailFile}, {skipSlow, ".", noFailFile}}},
	{name: "keys", dir: "internal/keys", runs: [][]string{{"./internal/keys"}, {"./internal/engine", noFailFile}, {skipSlow, "./aggregator"}}},
	{name: "shards", dir: ".", files: []string{"reserve.go", "lease.go"}, runs: [][]string{{skipSlow, ".", noFailFile}}},
	{name: "memsim", dir: "store/memsim", files: []string{"write.go", "partition.go", "capacity.go"}, runs: [][]string{{"./store/memsim"}}},
	{name: "expr", dir: "store/memsim/internal/expr", files: []string{"eval.go"}, runs: [][]string{{"./store/memsim/internal/expr"}, {"./store/memsim"}}},
	{name: "items", dir: "internal/items", runs: [][]string{{"./internal/items"}, {skipSlow, "./admin"}}},
}

// Statuses of a mutant.
const (
	killed     = "KILLED"
	timedOut   = "TIMED OUT"
	lived      = "LIVED"
	notCovered = "NOT COVERED"
	notViable  = "NOT VIABLE"
)

// A mutant is one change to one file.
type mutant struct {
	target     *target
	file       string // relative to the module root
	line, col  int
	cover      token.Position // where the tests must reach for the mutant to count
	kind       string
	start, end int    // the bytes replaced
	repl       string // what replaces them
	desc       string
	status     string
}

func main() {
	root := flag.String("root", "..", "the limiter module's root directory")
	only := flag.String("targets", "", "comma-separated targets (default all: "+names()+")")
	files := flag.String("files", "", "comma-separated file names: only their mutants (default every file of the targets)")
	list := flag.Bool("list", false, "list the mutants and exit")
	report := flag.String("report", "", "write the report to this file (default standard output)")
	workers := flag.Int("workers", max(runtime.NumCPU()/2, 1), "mutants tested at once")
	timeout := flag.Float64("timeout-factor", 3, "a run taking this many times its baseline (plus 30 s) is TIMED OUT")
	lines := flag.String("lines", "", "comma-separated FILE:FROM-TO: only the mutants on these lines")
	own := flag.Bool("own", false, "run only each target's first tests (its own package's), for coverage too")
	flag.Parse()
	if *own {
		for i := range targets {
			targets[i].runs = targets[i].runs[:1]
		}
	}
	if err := run(*root, *only, *files, *lines, *list, *report, *workers, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func names() string {
	var s []string
	for _, t := range targets {
		s = append(s, t.name)
	}
	return strings.Join(s, ",")
}

func run(root, only, files, lines string, list bool, reportPath string, workers int, factor float64) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	var sel []*target
	for i := range targets {
		if only == "" || slices.Contains(strings.Split(only, ","), targets[i].name) {
			sel = append(sel, &targets[i])
		}
	}
	if len(sel) == 0 {
		return fmt.Errorf("-targets %q: no such target (have %s)", only, names())
	}
	work, err := os.MkdirTemp("", "mutate")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	var all []*mutant
	for _, t := range sel {
		ms, err := mutants(root, t)
		if err != nil {
			return err
		}
		if files != "" {
			ms = slices.DeleteFunc(ms, func(m *mutant) bool {
				return !slices.Contains(strings.Split(files, ","), filepath.Base(m.file))
			})
		}
		if lines != "" {
			ms = slices.DeleteFunc(ms, func(m *mutant) bool { return !onLines(lines, m) })
		}
		if list {
			for _, m := range ms {
				fmt.Printf("%s:%d:%d\t%s\t%s\n", m.file, m.line, m.col, m.kind, m.desc)
			}
			continue
		}
		covered, base, err := baseline(root, work, t)
		if err != nil {
			return err
		}
		limit := time.Duration(factor*float64(base)) + 30*time.Second
		var wg sync.WaitGroup
		sem := make(chan struct{}, max(workers, 1))
		for i, m := range ms {
			if !covered(m.cover) {
				m.status = notCovered
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				m.status = test(root, filepath.Join(work, strconv.Itoa(i)), m, limit)
				fmt.Fprintf(os.Stderr, "%s %s:%d:%d %s\n", m.status, m.file, m.line, m.col, m.kind)
			}()
		}
		wg.Wait()
		all = append(all, ms...)
	}
	if list {
		return nil
	}
	out := io.Writer(os.Stdout)
	if reportPath != "" {
		if err := os.MkdirAll(filepath.Dir(reportPath), 0o755); err != nil {
			return err
		}
		f, err := os.Create(reportPath)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	writeReport(out, sel, all)
	return nil
}

// mutants parses a target's files and makes its mutants, in source order.
func mutants(root string, t *target) ([]*mutant, error) {
	files := t.files
	if files == nil {
		ents, err := os.ReadDir(filepath.Join(root, t.dir))
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
				files = append(files, n)
			}
		}
	}
	var ms []*mutant
	for _, name := range files {
		rel := filepath.Join(t.dir, name)
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		text := func(n ast.Node) string {
			return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
		}
		add := func(n ast.Node, cover token.Pos, kind, repl, desc string) {
			p := fset.Position(n.Pos())
			ms = append(ms, &mutant{target: t, file: rel, line: p.Line, col: p.Column, cover: fset.Position(cover), kind: kind,
				start: p.Offset, end: fset.Position(n.End()).Offset, repl: repl, desc: desc})
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ExprStmt:
				if _, ok := n.X.(*ast.CallExpr); ok {
					add(n, n.Pos(), "REMOVE_CALL", "", "removed: "+oneLine(text(n)))
				}
			case *ast.AssignStmt:
				// The values are still computed (into _), so that what
				// they use stays used and the mutant compiles.
				if n.Tok != token.DEFINE && !isBlank(n.Lhs) {
					var rhs []string
					for _, e := range n.Rhs {
						rhs = append(rhs, text(e))
					}
					blanks := strings.Repeat("_, ", len(n.Lhs)-1) + "_"
					if n.Tok != token.ASSIGN { // x += y
						blanks = "_"
					}
					add(n, n.Pos(), "REMOVE_ASSIGNMENT", blanks+" = "+strings.Join(rhs, ", "), "removed: "+oneLine(text(n)))
				}
			case *ast.IncDecStmt:
				add(n, n.Pos(), "REMOVE_ASSIGNMENT", "", "removed: "+oneLine(text(n)))
			case *ast.IfStmt:
				// The block never runs: its condition becomes false (the
				// block stays, so that what it uses stays used and the
				// mutant compiles; the else branch, if any, runs). The
				// body must run in the tests for this to say anything.
				add(n.Cond, n.Body.Lbrace+1, "REMOVE_IF", "false", "deleted: if "+oneLine(text(n.Cond))+" {…}")
			case *ast.CallExpr:
				id, ok := n.Fun.(*ast.Ident)
				if !ok || (id.Name != "min" && id.Name != "max") || len(n.Args) < 2 {
					break
				}
				for i, a := range n.Args {
					var rest []string
					for j, b := range n.Args {
						if j != i {
							rest = append(rest, text(b))
						}
					}
					repl := id.Name + "(" + strings.Join(rest, ", ") + ")"
					add(n, n.Pos(), "DROP_"+strings.ToUpper(id.Name)+"_ARGUMENT", repl, oneLine(text(n))+" → "+oneLine(repl)+" (dropped "+oneLine(text(a))+")")
				}
			}
			return true
		})
	}
	return ms, nil
}

// onLines reports whether m is on one of the lines FILE:FROM-TO of spec.
func onLines(spec string, m *mutant) bool {
	for _, r := range strings.Split(spec, ",") {
		file, span, _ := strings.Cut(r, ":")
		from, to, _ := strings.Cut(span, "-")
		a, errA := strconv.Atoi(from)
		b, errB := strconv.Atoi(to)
		if errA == nil && errB == nil && filepath.Base(m.file) == file && a <= m.line && m.line <= b {
			return true
		}
	}
	return false
}

func isBlank(lhs []ast.Expr) bool {
	for _, e := range lhs {
		if id, ok := e.(*ast.Ident); !ok || id.Name != "_" {
			return false
		}
	}
	return true
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// baseline runs a target's tests unmutated with coverage of its package.
// It returns whether the tests reach a position, and the time they took.
func baseline(root, work string, t *target) (func(token.Position) bool, time.Duration, error) {
	type block struct{ l0, c0, l1, c1 int }
	reached := map[string][]block{} // file, relative to the module root
	began := time.Now()
	for i, args := range t.runs {
		prof := filepath.Join(work, "cover"+strconv.Itoa(i))
		out, err := goTest(context.Background(), root, append([]string{"-coverpkg=./" + strings.TrimPrefix(t.dir, "."), "-coverprofile=" + prof}, args...))
		if err != nil {
			return nil, 0, fmt.Errorf("target %s: the tests fail without a mutant (%v):\n%s", t.name, err, out)
		}
		data, err := os.ReadFile(prof)
		if err != nil {
			return nil, 0, err
		}
		for _, ln := range strings.Split(string(data), "\n")[1:] {
			// path/file.go:l0.c0,l1.c1 statements count
			var b block
			var stmts, count int
			i := strings.LastIndex(ln, ".go:")
			if i < 0 {
				continue
			}
			if _, err := fmt.Sscanf(ln[i+4:], "%d.%d,%d.%d %d %d", &b.l0, &b.c0, &b.l1, &b.c1, &stmts, &count); err != nil || count == 0 {
				continue
			}
			if _, file, ok := strings.Cut(ln[:i+3], "github.com/shardlimit/limiter/"); ok {
				reached[file] = append(reached[file], b)
			}
		}
	}
	after := func(l, c, l0, c0 int) bool { return l > l0 || l == l0 && c >= c0 }
	return func(p token.Position) bool {
		for _, b := range reached[p.Filename] {
			if after(p.Line, p.Column, b.l0, b.c0) && after(b.l1, b.c1, p.Line, p.Column) {
				return true
			}
		}
		return false
	}, time.Since(began), nil
}

// test runs a mutant's target's tests on the mutated file, in dir.
func test(root, dir string, m *mutant, limit time.Duration) string {
	src, err := os.ReadFile(filepath.Join(root, m.file))
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return "ERROR: " + err.Error()
	}
	mutated := append(append(slices.Clip(src[:m.start]), m.repl...), src[m.end:]...)
	file := filepath.Join(dir, filepath.Base(m.file))
	overlay := filepath.Join(dir, "overlay.json")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, m.file): file}})
	if err := errors.Join(os.WriteFile(file, mutated, 0o644), os.WriteFile(overlay, ov, 0o644)); err != nil {
		return "ERROR: " + err.Error()
	}
	defer os.RemoveAll(dir)
	for _, args := range m.target.runs {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		out, err := goTest(ctx, root, append([]string{"-overlay=" + overlay, "-failfast", "-timeout=" + limit.String()}, args...))
		late := ctx.Err() != nil
		cancel()
		switch {
		case late || err != nil && bytes.Contains(out, []byte("panic: test timed out")):
			return timedOut
		case err != nil && (bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]"))):
			return notViable
		case err != nil:
			return killed
		}
	}
	return lived
}

func goTest(ctx context.Context, root string, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-count=1", "-vet=off"}, args...)...)
	cmd.Dir = root
	return cmd.CombinedOutput()
}

// writeReport writes the counts per target and every mutant that lived.
func writeReport(w io.Writer, sel []*target, ms []*mutant) {
	statuses := []string{killed, timedOut, lived, notCovered, notViable}
	fmt.Fprintf(w, "%-8s %7s %9s %6s %11s %10s %9s\n", "target", "KILLED", "TIMED OUT", "LIVED", "NOT COVERED", "NOT VIABLE", "efficacy")
	for _, t := range sel {
		n := map[string]int{}
		for _, m := range ms {
			if m.target == t {
				n[m.status]++
			}
		}
		eff := "-"
		if k := n[killed] + n[timedOut]; k+n[lived] > 0 {
			eff = strconv.FormatFloat(100*float64(k)/float64(k+n[lived]), 'f', 1, 64) + " %"
		}
		fmt.Fprintf(w, "%-8s %7d %9d %6d %11d %10d %9s\n", t.name, n[statuses[0]], n[statuses[1]], n[statuses[2]], n[statuses[3]], n[statuses[4]], eff)
	}
	fmt.Fprintln(w, "\nLIVED (no test noticed the change):")
	for _, m := range ms {
		if m.status == lived || strings.HasPrefix(m.status, "ERROR") {
			fmt.Fprintf(w, "%s:%d:%d\t%s\t%s\t%s\n", m.file, m.line, m.col, m.kind, m.desc, m.status)
		}
	}
}
