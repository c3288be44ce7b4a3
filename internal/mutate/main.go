// Command mutate runs the limiter's mutation tests: it changes the code
// of the write protocol (internal/engine), the bucket math, the key layout,
// memsim and its expression language, and the aggregator one small change
// (a mutant) at a time, and runs a fast selection of tests against each.
// A mutant the tests do not notice is a bug they would not catch, unless
// it is equivalent (behaves like the original); internal/mutate/equivalent.txt
// lists those, each with the reason.
//
//	go run ./internal/mutate                   # everything, the report on stdout
//	go run ./internal/mutate -targets engine   # one target
//	go run ./internal/mutate -list -targets keys
//	go run ./internal/mutate -mutants 812,813  # re-run some mutants
//	go run ./internal/mutate -json r.json      # keep every result...
//	go run ./internal/mutate -rescore r.json   # ...and judge them again after editing equivalent.txt
//	go run ./internal/mutate -rescore a.json,b.json -report docs/mutation.md  # one report from runs of separate targets
//
// Every mutant of a package is compiled into one build (mutant schemata:
// each site switches on the LIMITER_MUTANT environment variable), so a
// mutant costs a test run, not a build. A baseline run with no mutant
// active traces which sites the selected tests reach; a mutant whose site
// none reaches is NOT COVERED and not run. See docs/testing.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Mutant statuses.
const (
	statusKilled     = "KILLED"
	statusTimedOut   = "TIMED OUT"
	statusLived      = "LIVED"
	statusNotCovered = "NOT COVERED"
	statusEquivalent = "EQUIVALENT"
	statusCostOnly   = "COST ONLY"
)

func main() {
	var (
		only       = flag.String("targets", "", "comma-separated targets (default all: "+targetNames()+")")
		workers    = flag.Int("workers", runtime.NumCPU(), "mutants tested at once")
		list       = flag.Bool("list", false, "list the mutants and exit")
		ids        = flag.String("mutants", "", "comma-separated mutant ids to test (default all)")
		report     = flag.String("report", "", "write the Markdown report to this file")
		jsonOut    = flag.String("json", "", "write every mutant's result as JSON to this file")
		equivFile  = flag.String("equivalent", "internal/mutate/equivalent.txt", "the equivalent mutants, with reasons")
		factor     = flag.Float64("timeout-factor", 4, "a run taking this many times its baseline (plus 10 s) is a timeout")
		keep       = flag.Bool("keep", false, "keep the work directory (schemata, overlay, binaries)")
		verbose    = flag.Bool("v", false, "print every mutant's result")
		failOnLive = flag.Bool("strict", true, "exit 1 when a mutant lives that equivalent.txt does not justify")
		rescore    = flag.String("rescore", "", "instead of running, judge the results of earlier runs (their -json files, comma-separated; a target in a later file replaces the same target in an earlier one) against equivalent.txt as it is now")
	)
	flag.Parse()
	root, err := moduleRoot()
	check(err)
	sel, err := selectTargets(*only)
	check(err)
	if *rescore != "" {
		ms, err := readResults(strings.Split(*rescore, ","), sel)
		check(err)
		for i := range ms {
			if ms[i].Raw != "" {
				ms[i].Status, ms[i].Reason = ms[i].Raw, ""
			}
		}
		eq, err := loadEquivalents(filepath.Join(root, *equivFile))
		check(err)
		res := &results{mutants: ms, sel: sel}
		res.stale = eq.apply(ms, sel)
		if *report != "" {
			check(os.WriteFile(*report, []byte(res.markdown()), 0o644))
		}
		fmt.Print(res.summary())
		if *failOnLive && res.unjustified() > 0 {
			os.Exit(1)
		}
		return
	}
	work, err := os.MkdirTemp("", "limiter-mutate-")
	check(err)
	if !*keep {
		defer os.RemoveAll(work)
	} else {
		fmt.Fprintln(os.Stderr, "work directory:", work)
	}
	start := time.Now()

	b, err := prepare(root, work, sel)
	check(err)
	mutants := b.mutants
	if *list {
		for _, m := range mutants {
			fmt.Printf("%5d %-10s %s:%d %s %s  [%s]\n", m.ID, m.Target, m.File, m.Line, m.Kind, m.Change, m.Func)
		}
		return
	}
	if *ids != "" {
		want := map[int]bool{}
		for _, s := range strings.Split(*ids, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			check(err)
			want[n] = true
		}
		mutants = slices.DeleteFunc(mutants, func(m Mutant) bool { return !want[m.ID] })
	}
	fmt.Fprintf(os.Stderr, "%d mutants in %s; built in %s\n", len(mutants), strings.Join(targetList(sel), ", "), time.Since(start).Round(time.Second))

	base, err := baseline(root, work, b, sel)
	check(err)
	res := &results{}
	res.cpu = runMutants(root, b, base, mutants, *workers, *factor, *verbose)
	res.mutants = mutants
	for i := range mutants {
		mutants[i].Raw = mutants[i].Status
	}
	eq, err := loadEquivalents(filepath.Join(root, *equivFile))
	check(err)
	res.stale = eq.apply(mutants, sel)
	res.elapsed = time.Since(start)
	res.sel = sel
	res.workers = *workers

	md := res.markdown()
	if *report != "" {
		check(os.WriteFile(*report, []byte(md), 0o644))
	}
	if *jsonOut != "" {
		data, _ := json.MarshalIndent(mutants, "", "  ")
		check(os.WriteFile(*jsonOut, data, 0o644))
	}
	fmt.Print(res.summary())
	if *failOnLive && res.unjustified() > 0 {
		if !*keep {
			os.RemoveAll(work) // os.Exit skips the deferred removal
		}
		os.Exit(1)
	}
}

// readResults reads the -json files of earlier runs and keeps the mutants
// of the selected targets, a target's from the last file that has it, in
// the order of the targets.
func readResults(files []string, sel []*target) ([]Mutant, error) {
	last := map[string][]Mutant{}
	for _, f := range files {
		data, err := os.ReadFile(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		var ms []Mutant
		if err := json.Unmarshal(data, &ms); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		here := map[string][]Mutant{}
		for _, m := range ms {
			here[m.Target] = append(here[m.Target], m)
		}
		for t, ms := range here {
			last[t] = ms
		}
	}
	var out []Mutant
	for _, t := range sel {
		out = append(out, last[t.name]...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no results of targets %s in %s", strings.Join(targetList(sel), ","), strings.Join(files, ", "))
	}
	return out, nil
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
}

func targetNames() string {
	var s []string
	for _, t := range targets {
		s = append(s, t.name)
	}
	return strings.Join(s, ",")
}

func targetList(ts []*target) []string {
	var s []string
	for _, t := range ts {
		s = append(s, t.name)
	}
	return s
}

func selectTargets(only string) ([]*target, error) {
	var out []*target
	for i := range targets {
		if only == "" || slices.Contains(strings.Split(only, ","), targets[i].name) {
			out = append(out, &targets[i])
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no target named %q (targets: %s)", only, targetNames())
	}
	return out, nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not in a Go module")
	}
	return filepath.Dir(mod), nil
}

// build is the schemata of the selected targets, compiled into one test
// binary per package whose tests run.
type build struct {
	pkgs    []*pkgSchema
	mutants []Mutant
	bins    map[string]string // test package dir → binary
}

// prepare writes the schemata, builds the test binaries, and drops the
// sites the compiler refuses (a handful: a rewrite that changes a type),
// rebuilding until the build succeeds.
func prepare(root, work string, sel []*target) (*build, error) {
	modPath, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		return nil, err
	}
	mod := strings.TrimSpace(string(modPath))
	var paths []string
	for _, t := range sel {
		paths = append(paths, importPath(mod, t.dir))
	}
	all, err := goList(root, true, paths...)
	if err != nil {
		return nil, err
	}
	skip := map[string]map[int]bool{}
	for attempt := 0; ; attempt++ {
		b := &build{bins: map[string]string{}}
		next := 1
		for _, t := range sel {
			ps, err := loadTarget(root, t, all[importPath(mod, t.dir)], all, skip)
			if err != nil {
				return nil, err
			}
			b.mutants = append(b.mutants, ps.number(next)...)
			next = ps.end
			b.pkgs = append(b.pkgs, ps)
		}
		overlay, err := writeSchemata(work, b)
		if err != nil {
			return nil, err
		}
		refused, err := buildBinaries(root, work, overlay, sel, b)
		if err == nil {
			return b, nil
		}
		if len(refused) == 0 || attempt >= 8 {
			return nil, err
		}
		for file, lines := range refused {
			if skip[file] == nil {
				skip[file] = map[int]bool{}
			}
			for l := range lines {
				skip[file][l] = true
				fmt.Fprintf(os.Stderr, "mutate: no mutants on %s:%d (the rewrite does not compile there)\n", file, l)
			}
		}
	}
}

func importPath(mod, dir string) string {
	if dir == "." || dir == "" {
		return mod
	}
	return mod + "/" + filepath.ToSlash(dir)
}

// writeSchemata writes every mutated file and the helper files, and the
// overlay that puts them in place of the originals.
func writeSchemata(work string, b *build) (string, error) {
	replace := map[string]string{}
	for _, ps := range b.pkgs {
		for i, fs := range ps.files {
			dst := filepath.Join(work, "src", ps.names[i])
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return "", err
			}
			if err := os.WriteFile(dst, fs.render(), 0o644); err != nil {
				return "", err
			}
			replace[filepath.Join(ps.pkg.Dir, filepath.Base(ps.names[i]))] = dst
		}
		helper := filepath.Join(work, "src", ps.target.dir, "zz_mutants.go")
		if err := os.MkdirAll(filepath.Dir(helper), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(helper, helperFile(ps.pkg.Name, ps.first, ps.end), 0o644); err != nil {
			return "", err
		}
		replace[filepath.Join(ps.pkg.Dir, "zz_mutants.go")] = helper
	}
	data, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	path := filepath.Join(work, "overlay.json")
	return path, os.WriteFile(path, data, 0o644)
}

var compileError = regexp.MustCompile(`(?m)^(?:\./)?([^\s:]+\.go):(\d+):\d+: `)

// buildBinaries compiles the test binary of every package a selected run
// uses. On a compile error it returns the mutated lines the compiler
// refused.
func buildBinaries(root, work, overlay string, sel []*target, b *build) (map[string]map[int]bool, error) {
	var dirs []string
	for _, t := range sel {
		for _, r := range t.runs {
			if !slices.Contains(dirs, r.dir) {
				dirs = append(dirs, r.dir)
			}
		}
	}
	for _, dir := range dirs {
		bin := filepath.Join(work, "bin", strings.ReplaceAll(filepath.Clean(dir), "/", "_")+".test")
		cmd := exec.Command("go", "test", "-c", "-overlay", overlay, "-o", bin, "./"+dir)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			refused := map[string]map[int]bool{}
			for _, m := range compileError.FindAllStringSubmatch(string(out), -1) {
				file := mutatedFile(b, m[1])
				if file == "" {
					continue
				}
				line, _ := strconv.Atoi(m[2])
				if refused[file] == nil {
					refused[file] = map[int]bool{}
				}
				refused[file][line] = true
			}
			return refused, fmt.Errorf("building the tests of %s: %v\n%s", dir, err, out)
		}
		b.bins[dir] = bin
	}
	return nil, nil
}

// mutatedFile returns the mutated file (relative to the module root) that
// a compiler's path names, or "".
func mutatedFile(b *build, path string) string {
	path = filepath.ToSlash(path)
	for _, ps := range b.pkgs {
		for _, name := range ps.names {
			if path == name || strings.HasSuffix(path, "/"+name) || strings.HasSuffix(name, "/"+path) {
				return name
			}
		}
	}
	return ""
}

// baseline runs every selected target's tests with no mutant active,
// tracing the sites they reach; every run must pass. It returns, per
// target, the reached mutant ids and each run's duration.
type baselineResult struct {
	reached map[string]map[int]bool
	took    map[string][]time.Duration
}

func baseline(root, work string, b *build, sel []*target) (*baselineResult, error) {
	br := &baselineResult{reached: map[string]map[int]bool{}, took: map[string][]time.Duration{}}
	for _, t := range sel {
		trace := filepath.Join(work, "trace-"+t.name+".txt")
		for _, r := range t.runs {
			start := time.Now()
			out, _, err := runTest(root, b.bins[r.dir], r, 0, trace, time.Hour)
			if err != nil {
				return nil, fmt.Errorf("the tests of target %s fail with no mutant (%s -run %q): %v\n%s", t.name, r.dir, r.run, err, tail(out))
			}
			br.took[t.name] = append(br.took[t.name], time.Since(start))
		}
		br.reached[t.name] = readTrace(trace)
	}
	return br, nil
}

func readTrace(path string) map[int]bool {
	m := map[int]bool{}
	f, err := os.Open(path)
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n, err := strconv.Atoi(sc.Text()); err == nil {
			m[n] = true
		}
	}
	return m
}

var errTimeout = errors.New("timed out")

// runTest runs one test binary in its package directory with mutant id
// active (0: none), tracing to trace when set.
func runTest(root, bin string, r testRun, id int, trace string, timeout time.Duration) ([]byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := []string{"-test.count=1", "-test.failfast", "-test.timeout=" + (timeout + time.Minute).String()}
	if r.run != "" {
		args = append(args, "-test.run="+r.run)
	}
	if r.skip != "" {
		args = append(args, "-test.skip="+r.skip)
	}
	args = append(args, r.flags...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = filepath.Join(root, r.dir)
	cmd.Env = append(os.Environ(), "LIMITER_MUTANT="+strconv.Itoa(id), "LIMITER_MUTANT_TRACE="+trace, "GOMAXPROCS=1", "CI=true")
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	var cpu time.Duration
	if ps := cmd.ProcessState; ps != nil {
		cpu = ps.UserTime() + ps.SystemTime()
	}
	if ctx.Err() != nil {
		return out, cpu, errTimeout
	}
	return out, cpu, err
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// runMutants tests the covered mutants, workers at a time, and sets each
// one's status.
func runMutants(root string, b *build, base *baselineResult, mutants []Mutant, workers int, factor float64, verbose bool) (cpu time.Duration) {
	byTarget := map[string]*target{}
	for _, ps := range b.pkgs {
		byTarget[ps.target.name] = ps.target
	}
	queue := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	start := time.Now()
	for w := 0; w < max(1, workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range queue {
				m := &mutants[i]
				t := byTarget[m.Target]
				m.Status = statusLived
				for j, r := range t.runs {
					limit := time.Duration(float64(base.took[t.name][j])*factor) + 10*time.Second
					out, took, err := runTest(root, b.bins[r.dir], r, m.ID, "", limit)
					mu.Lock()
					cpu += took
					mu.Unlock()
					if err == nil {
						continue
					}
					m.Status = statusKilled
					if errors.Is(err, errTimeout) {
						m.Status = statusTimedOut
					}
					m.Killer = r.dir
					if f := failLine.FindSubmatch(out); f != nil {
						m.Killer += " " + string(f[1])
					} else if m.Status == statusKilled {
						m.Killer += " (" + firstLine(out) + ")"
					}
					break
				}
				mu.Lock()
				done++
				if verbose {
					fmt.Fprintf(os.Stderr, "%5d %-11s %s:%d %s %s %s\n", m.ID, m.Status, m.File, m.Line, m.Change, m.Func, m.Killer)
				} else if done%50 == 0 {
					fmt.Fprintf(os.Stderr, "mutate: %d mutants tested in %s\n", done, time.Since(start).Round(time.Second))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range mutants {
		m := &mutants[i]
		if !base.reached[m.Target][m.ID] {
			m.Status = statusNotCovered
			continue
		}
		queue <- i
	}
	close(queue)
	wg.Wait()
	return cpu
}

func firstLine(out []byte) string {
	for _, l := range bytes.Split(out, []byte("\n")) {
		if s := strings.TrimSpace(string(l)); s != "" && !strings.HasPrefix(s, "===") {
			if len(s) > 120 {
				s = s[:120] + "…"
			}
			return s
		}
	}
	return "no output"
}

func tail(out []byte) string {
	if len(out) > 4000 {
		return "…" + string(out[len(out)-4000:])
	}
	return string(out)
}
