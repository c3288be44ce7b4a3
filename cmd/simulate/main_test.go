package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/sim"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb, false)
	return code, out.String(), errb.String()
}

func TestBadFlagsExit2NamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"-writers", "-3"}, "-writers"},
		{[]string{"-rate", "-1"}, "-rate"},
		{[]string{"-duration", "-5s"}, "-duration"},
		{[]string{"-duration", "10"}, "-duration"}, // no unit
		{[]string{"-scenario", "nope"}, "-scenario"},
		{[]string{"-seed", "x"}, "-seed"},
		{[]string{"-bogus"}, "-bogus"},
		{[]string{"extra"}, "extra"},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.flag) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, code, stderr, tc.flag)
		}
	}
}

func TestList(t *testing.T) {
	code, out, _ := runCLI("-list")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, name := range []string{"steady", "contention", "cascade", "skew", "faults", "expiry", "hot-entity", "idle-year"} {
		if !strings.Contains(out, name) {
			t.Errorf("-list does not show %s:\n%s", name, out)
		}
	}
}

func TestJSONReportAndPlot(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "run.svg")
	code, out, stderr := runCLI("-duration", "2s", "-writers", "100", "-rate", "500", "-seed", "3", "-json", "-quiet", "-plot", plot)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"scenario", "seed", "writers", "sim_duration_ms", "wall_ms", "acquires", "admitted", "rejected",
		"throttled", "unavailable", "round_trips", "wcu", "rcu", "shard_count_final", "shard_doublings", "violations",
		"trace_hash", "timeline"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
	tl := rep["timeline"].([]any)
	if len(tl) == 0 {
		t.Fatal("empty timeline")
	}
	for _, k := range []string{"t_ms", "attempts", "admitted", "rejected", "throttled", "shard_count"} {
		if _, ok := tl[0].(map[string]any)[k]; !ok {
			t.Errorf("timeline entry lacks %q", k)
		}
	}
	svg, err := os.ReadFile(plot)
	if err != nil || !bytes.HasPrefix(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("</svg>")) {
		t.Fatalf("plot: %v %.80q", err, svg)
	}
	if !bytes.Contains(svg, []byte("unavailable/s")) {
		t.Error("the plot has no unavailable line")
	}
}

// A bad flag is reported once, naming the flag, with where to look.
func TestErrorPrintedOnce(t *testing.T) {
	for _, args := range [][]string{{"-bogus"}, {"-seed", "x"}, {"-writers", "-3"}, {"-duration", "5"}} {
		code, out, stderr := runCLI(args...)
		if code != 2 || out != "" || strings.Count(stderr, "simulate:") != 1 || strings.Count(stderr, args[0]) != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
}

func TestDurationNeedsAUnit(t *testing.T) {
	_, _, stderr := runCLI("-duration", "5")
	if !strings.Contains(stderr, "5 has no unit: add one, such as 5s or 5m") {
		t.Errorf("stderr %q", stderr)
	}
	_, _, stderr = runCLI("-duration", "soon")
	if !strings.Contains(stderr, `"soon" is not a duration`) {
		t.Errorf("stderr %q", stderr)
	}
}

func TestHelpListsScenariosAndExitStatuses(t *testing.T) {
	code, out, stderr := runCLI("-h")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"-duration", "-plot", "Scenarios:", "Exit status:", "0  every invariant holds",
		"1  an invariant was violated", "2  a bad flag"} {
		if !strings.Contains(out, want) {
			t.Errorf("-h lacks %q:\n%s", want, out)
		}
	}
	for _, s := range sim.Scenarios() {
		if !strings.Contains(out, s.Name) {
			t.Errorf("-h lacks scenario %s", s.Name)
		}
	}
}

// -plot is checked before the run: an unknown format or a file that
// cannot be created ends the command at once, with no report.
func TestPlotCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "run.png"), "name a .svg file"},
		{filepath.Join(dir, "run"), "name a .svg file"},
		{filepath.Join(dir, "missing", "run.svg"), "-plot:"},
	} {
		code, out, stderr := runCLI("-plot", tc.path, "-duration", "8760h")
		if code != 2 || out != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", tc.path, code, out, stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left: %v", entries)
	}
	if code, _, _ := runCLI("-plot", filepath.Join(dir, "RUN.SVG"), "-duration", "1s", "-writers", "2", "-rate", "10"); code != 0 {
		t.Errorf(".SVG: exit %d", code)
	}
}

func TestProgressOnlyOnATerminal(t *testing.T) {
	p := &progress{}
	if p.hook(false) != nil || p.hook(true) == nil {
		t.Error("progress hook")
	}
}

func TestTable(t *testing.T) {
	code, out, _ := runCLI("-duration", "2s", "-quiet")
	if code != 0 || !strings.Contains(out, "invariants: all hold") || !strings.Contains(out, "trace hash:") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestViolationExits1(t *testing.T) {
	rep := &sim.Report{Scenario: "x", Violations: []sim.Violation{{Invariant: sim.InvOverAdmit, Detail: "crafted"}}}
	var out, errb bytes.Buffer
	if code := finish(rep, options{}, nil, &out, &errb); code != 1 || !strings.Contains(out.String(), "crafted") {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	out.Reset()
	if code := finish(&sim.Report{Scenario: "x"}, options{json: true}, nil, &out, &errb); code != 0 {
		t.Fatalf("clean report: exit %d", code)
	}
}

// The table prints the hot path's cost beside the average over every path
// and says what the difference is; the JSON report has it as hot_path: the
// acquires admitted by one write that read nothing, one WCU each here.
func TestHotPathBesideTheAverage(t *testing.T) {
	code, out, stderr := runCLI("-duration", "2s", "-writers", "20", "-rate", "200", "-seed", "3", "-quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{"hot path (admitted by one write, nothing read):", "1.000 RT, 1.000 WCU",
		"every path over the admitted acquires:", "reads of limits not cached yet", "creations, full writes, lost races, refusals"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI("-duration", "2s", "-writers", "20", "-rate", "200", "-seed", "3", "-quiet", "-json")
	var rep sim.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("exit %d, %v", code, err)
	}
	h, spec, full := rep.HotPath, rep.PathCosts["speculative"], rep.PathCosts["full"]
	if h.Acquires == 0 || h.Admitted != h.Acquires || h.Acquires > spec.Admitted+full.Admitted || h.RoundTrips != h.Acquires ||
		h.WCU != float64(h.Acquires) || h.RCU != 0 {
		t.Errorf("hot_path %+v (speculative: %+v, full: %+v)", h, spec, full)
	}
}

// -cpuprofile writes a profile pprof reads, and a file that cannot be
// created is a bad flag, reported before the run.
func TestCPUProfile(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.out")
	code, _, stderr := runCLI("-duration", "1s", "-writers", "10", "-rate", "100", "-quiet", "-cpuprofile", prof)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
		t.Fatalf("no profile written: %v", err)
	}
	code, _, stderr = runCLI("-duration", "1s", "-cpuprofile", filepath.Join(t.TempDir(), "missing", "cpu.out"))
	if code != 2 || !strings.Contains(stderr, "-cpuprofile") {
		t.Errorf("exit %d, stderr %q; want 2 naming -cpuprofile", code, stderr)
	}
}
