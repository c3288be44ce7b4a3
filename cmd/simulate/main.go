// Command simulate runs the limiter's deterministic simulation: a workload
// of simulated clients, each with its own limiter, over one simulated
// DynamoDB (memsim) on virtual time, checked against every invariant of
// the design.
//
//	go run ./cmd/simulate                       # the default scenario, a summary table
//	go run ./cmd/simulate -list                 # the scenarios
//	go run ./cmd/simulate -scenario hot-entity -writers 128 -rate 10000 -duration 120s -seed 1 -json
//	go run ./cmd/simulate -scenario faults -plot faults.svg
//
// Exit status: 0 when every invariant holds, 1 when any is violated, 2 for
// bad flags. docs/simulation.md documents the report.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"text/tabwriter"
	"time"

	"github.com/shardlimit/limiter/sim"
)

func main() {
	// The simulation allocates briskly and keeps little: trading memory for
	// fewer collections makes it about a third faster. GOGC still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a bad flag: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

type options struct {
	scenario string
	list     bool
	writers  int
	rate     float64
	duration time.Duration
	seed     uint64
	faults   bool
	json     bool
	plot     string
	quiet    bool
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.scenario, "scenario", sim.DefaultScenario, "scenario to run (see -list)")
	fs.BoolVar(&o.list, "list", false, "list the scenarios and exit")
	fs.IntVar(&o.writers, "writers", 0, "simulated clients (0: the scenario's default)")
	fs.Float64Var(&o.rate, "rate", 0, "offered acquires per second, all clients together (0: the scenario's default)")
	fs.DurationVar(&o.duration, "duration", 0, "simulated time before the fault-free tail, e.g. 120s (0: the scenario's default)")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed: the same seed gives the same run")
	fs.BoolVar(&o.faults, "faults", false, "inject the default fault plan (the faults scenario always does)")
	fs.BoolVar(&o.json, "json", false, "print the machine-readable report on stdout instead of the table")
	fs.StringVar(&o.plot, "plot", "", "write an SVG plot of the timeline to this file")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress line on stderr")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: simulate [flags]\n\nRuns a deterministic simulation of the limiter and checks its invariants.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, usageError{err.Error()}
	}
	switch {
	case fs.NArg() > 0:
		return o, usageError{fmt.Sprintf("unexpected argument %q (flags only)", fs.Arg(0))}
	case o.writers < 0:
		return o, usageError{fmt.Sprintf("-writers: %d must not be negative", o.writers)}
	case o.writers > 100_000:
		return o, usageError{fmt.Sprintf("-writers: %d is more than 100000", o.writers)}
	case o.rate < 0 || o.rate != o.rate:
		return o, usageError{fmt.Sprintf("-rate: %v must not be negative", o.rate)}
	case o.rate > 1e7:
		return o, usageError{fmt.Sprintf("-rate: %v is more than 10000000 per second", o.rate)}
	case o.duration < 0:
		return o, usageError{fmt.Sprintf("-duration: %v must not be negative", o.duration)}
	case o.duration > 0 && o.duration < time.Millisecond:
		return o, usageError{fmt.Sprintf("-duration: %v is shorter than 1ms", o.duration)}
	case o.duration > 3*366*24*time.Hour:
		return o, usageError{fmt.Sprintf("-duration: %v is longer than three years", o.duration)}
	}
	if !o.list {
		if _, ok := sim.Lookup(o.scenario); !ok {
			return o, usageError{fmt.Sprintf("-scenario: unknown scenario %q (see -list)", o.scenario)}
		}
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "simulate:", err)
		return 2
	}
	if o.list {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, s := range sim.Scenarios() {
			fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Summary)
		}
		tw.Flush()
		return 0
	}
	cfg := sim.Config{Scenario: o.scenario, Seed: o.seed, Writers: o.writers, Rate: o.rate, Duration: o.duration, Faults: o.faults}
	// The wall clock is read here, outside the simulated path, for wall_ms
	// and the progress line only.
	start := time.Now()
	p := &progress{w: stderr, start: start, last: start}
	if !o.quiet {
		cfg.Progress = p.update
	}
	s, err := sim.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "simulate:", err)
		return 2
	}
	rep := s.Run()
	rep.WallMs = time.Since(start).Milliseconds()
	p.done()
	return finish(rep, o, stdout, stderr)
}

// finish writes the plot and the report, and returns the exit status: 1
// when an invariant was violated.
func finish(rep *sim.Report, o options, stdout, stderr io.Writer) int {
	if o.plot != "" {
		if err := writePlot(o.plot, rep); err != nil {
			fmt.Fprintln(stderr, "simulate: -plot:", err)
			return 2
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "simulate:", err)
			return 1
		}
	} else if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintln(stderr, "simulate:", err)
		return 1
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

func writePlot(path string, rep *sim.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// progress prints one line on stderr, rewritten in place, for runs that
// last more than a second of wall time.
type progress struct {
	w           io.Writer
	start, last time.Time
	printed     bool
}

func (p *progress) update(pr sim.Progress) {
	now := time.Now()
	if now.Sub(p.start) < time.Second || now.Sub(p.last) < 250*time.Millisecond {
		return
	}
	p.last = now
	pc := 100 * float64(pr.Sim) / float64(max(pr.Total, 1))
	fmt.Fprintf(p.w, "\rsimulated %v of %v (%.0f%%), %d acquires, %v wall ", pr.Sim, pr.Total, pc, pr.Acquires, now.Sub(p.start).Round(100*time.Millisecond))
	p.printed = true
}

func (p *progress) done() {
	if p.printed {
		fmt.Fprintln(p.w)
	}
}
