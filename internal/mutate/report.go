package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// equivalent.txt lists the mutants that survive the tests on purpose,
// one entry a line:
//
//	file | function | change | source line (trimmed) | reason
//
// A mutant matches an entry by all four keys (not by line number, which
// moves with every edit); "*" in function, change or source matches
// anything, for a reason that covers a whole function. A reason that
// starts with "cost:" marks mutants that change what a write path costs
// (writes, round trips), never what is admitted: they are reported apart
// from the equivalent ones and not counted as killed. Lines starting with
// # are comments.
type equivalent struct {
	file, fn, change, source, reason string
	used                             bool
}

func (e *equivalent) matches(m *Mutant) bool {
	return e.file == m.File && (e.fn == "*" || e.fn == m.Func) &&
		(e.change == "*" || e.change == m.Change) && (e.source == "*" || e.source == m.Source)
}

// costOnly reports whether the entry is a cost-only justification.
func (e *equivalent) costOnly() bool { return strings.HasPrefix(e.reason, "cost:") }

type equivalents []*equivalent

func loadEquivalents(path string) (equivalents, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var eq equivalents
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, " | ", 5)
		if len(parts) != 5 {
			return nil, fmt.Errorf("%s:%d: want 5 fields separated by \" | \", got %d", path, n, len(parts))
		}
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		eq = append(eq, &equivalent{file: parts[0], fn: parts[1], change: parts[2], source: parts[3], reason: parts[4]})
	}
	return eq, sc.Err()
}

// apply marks the survivors an entry justifies as equivalent, and returns
// the entries of the files of sel that matched no mutant (stale: the code
// changed).
func (eq equivalents) apply(ms []Mutant, sel []*target) []*equivalent {
	for i := range ms {
		m := &ms[i]
		if m.Status != statusLived && m.Status != statusNotCovered {
			continue
		}
		for _, e := range eq {
			if e.matches(m) {
				m.Status, m.Reason, e.used = statusEquivalent, e.reason, true
				if e.costOnly() {
					m.Status, m.Reason = statusCostOnly, strings.TrimSpace(strings.TrimPrefix(e.reason, "cost:"))
				}
				break
			}
		}
	}
	var stale []*equivalent
	for _, e := range eq {
		if !e.used && slices.ContainsFunc(sel, func(t *target) bool { return path.Dir(e.file) == t.dir }) {
			stale = append(stale, e)
		}
	}
	return stale
}

type results struct {
	mutants []Mutant
	stale   []*equivalent
	elapsed time.Duration
	cpu     time.Duration // the test runs' user and system time
	sel     []*target
	workers int
}

type tally struct{ total, killed, timedOut, lived, notCovered, equivalent, costOnly int }

func (t *tally) add(m *Mutant) {
	t.total++
	switch m.Status {
	case statusKilled:
		t.killed++
	case statusTimedOut:
		t.timedOut++
	case statusLived:
		t.lived++
	case statusNotCovered:
		t.notCovered++
	case statusEquivalent:
		t.equivalent++
	case statusCostOnly:
		t.costOnly++
	}
}

// score is killed / (total - equivalent): the share of the mutants that
// can be told apart from the original that the tests tell apart.
func (t tally) score() float64 {
	d := t.total - t.equivalent
	if d == 0 {
		return 100
	}
	return 100 * float64(t.killed+t.timedOut) / float64(d)
}

func (r *results) tallies() (map[string]*tally, tally) {
	per := map[string]*tally{}
	var all tally
	for i := range r.mutants {
		m := &r.mutants[i]
		if per[m.Target] == nil {
			per[m.Target] = &tally{}
		}
		per[m.Target].add(m)
		all.add(m)
	}
	return per, all
}

func (r *results) unjustified() int {
	n := 0
	for _, m := range r.mutants {
		if m.Status == statusLived || m.Status == statusNotCovered {
			n++
		}
	}
	return n
}

func (t tally) line() string {
	return fmt.Sprintf("%5d mutants: %5d killed, %3d timed out, %3d lived, %3d not covered, %3d equivalent, %3d cost only; score %.1f%%",
		t.total, t.killed, t.timedOut, t.lived, t.notCovered, t.equivalent, t.costOnly, t.score())
}

func (r *results) summary() string {
	per, all := r.tallies()
	var b strings.Builder
	for _, t := range r.sel {
		if c := per[t.name]; c != nil {
			fmt.Fprintf(&b, "%-10s %s\n", t.name, c.line())
		}
	}
	fmt.Fprintf(&b, "%-10s %s\n", "all", all.line())
	if r.workers > 0 {
		fmt.Fprintf(&b, "%s in all, %d workers; the test runs took %s of CPU (%s on 2 idle cores)\n",
			r.elapsed.Round(time.Second), r.workers, r.cpu.Round(time.Second), (r.cpu / 2).Round(time.Minute))
	}
	for _, m := range r.mutants {
		if m.Status == statusLived || m.Status == statusNotCovered {
			fmt.Fprintf(&b, "%s: #%d %s:%d %s %s in %s: %s\n", m.Status, m.ID, m.File, m.Line, m.Kind, m.Change, m.Func, m.Source)
		}
	}
	for _, e := range r.stale {
		fmt.Fprintf(&b, "stale entry in equivalent.txt (no such mutant now): %s | %s | %s | %s\n", e.file, e.fn, e.change, e.source)
	}
	return b.String()
}

// markdown is the report docs/mutation.md holds: the score per target and
// every surviving mutant with its reason.
func (r *results) markdown() string {
	per, all := r.tallies()
	var b strings.Builder
	b.WriteString("# Mutation report\n\n")
	b.WriteString("Generated by `make mutate`; [testing](testing.md#mutation-testing) says what it does and\n")
	b.WriteString("how to read it. Do not edit by hand: the reasons come from `internal/mutate/equivalent.txt`.\n\n")
	b.WriteString("| target | mutants | killed | timed out | lived | not covered | equivalent | cost only | score |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, c tally) {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %.1f %% |\n",
			name, c.total, c.killed, c.timedOut, c.lived, c.notCovered, c.equivalent, c.costOnly, c.score())
	}
	for _, t := range r.sel {
		if c := per[t.name]; c != nil {
			row(t.name, *c)
		}
	}
	row("**all**", all)
	b.WriteString("\nScore: killed and timed out over all mutants but the equivalent ones (cost-only survivors count\n")
	b.WriteString("as not killed).\n\n")
	section := func(title, intro string, keep func(*Mutant) bool, reason bool) {
		var ms []Mutant
		for i := range r.mutants {
			if keep(&r.mutants[i]) {
				ms = append(ms, r.mutants[i])
			}
		}
		if len(ms) == 0 {
			return
		}
		slices.SortStableFunc(ms, func(a, b Mutant) int { return strings.Compare(a.File, b.File) })
		fmt.Fprintf(&b, "## %s (%d)\n\n%s\n\n", title, len(ms), intro)
		if reason {
			b.WriteString("| where | change | source | reason |\n|---|---|---|---|\n")
		} else {
			b.WriteString("| where | change | source | status |\n|---|---|---|---|\n")
		}
		for _, m := range ms {
			last := m.Status
			if reason {
				last = mdEscape(m.Reason)
			}
			fmt.Fprintf(&b, "| `%s:%d` %s | %s | `%s` | %s |\n", m.File, m.Line, m.Func, mdEscape(m.Change), mdEscape(m.Source), last)
		}
		b.WriteString("\n")
	}
	section("Survivors not yet explained", "Each is a change no selected test notices: a missing test, or an entry missing from equivalent.txt.",
		func(m *Mutant) bool { return m.Status == statusLived || m.Status == statusNotCovered }, false)
	section("Equivalent mutants", "Each behaves exactly like the original code, for the reason given.",
		func(m *Mutant) bool { return m.Status == statusEquivalent }, true)
	section("Cost-only mutants", "Each changes which write an acquire makes or when, never what is admitted or refused: the\n"+
		"invariants hold with or without it. The simulator's reports (round trips and write units per\n"+
		"acquire) are where such a change shows.",
		func(m *Mutant) bool { return m.Status == statusCostOnly }, true)
	if len(r.stale) > 0 {
		fmt.Fprintf(&b, "## Stale entries of equivalent.txt (%d)\n\nEach matches no mutant of the code as it is: remove it or write it again.\n\n", len(r.stale))
		for _, e := range r.stale {
			fmt.Fprintf(&b, "- `%s` %s: %s `%s`\n", e.file, e.fn, mdEscape(e.change), mdEscape(e.source))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
