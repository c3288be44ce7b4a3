package sim

import (
	"context"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/internal/zerotest"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// tiny is a custom workload that simulates a second in a moment.
func tiny() *Workload {
	return &Workload{
		Limits:   []limiter.Limit{limiter.PerSecond("rps", 10)},
		Entities: []Entity{{ID: "k"}}, Resources: []string{"r"},
		Consume: []Range{{Min: 1, Max: 1}},
		Writers: 2, Rate: 20, Duration: time.Second,
	}
}

// Run and New with a zero Config, nonsense overrides and nonsense
// workloads, and the package's other exported functions and methods on
// nil or zero receivers: an error naming the field, or a run that ends,
// never a panic.
func TestStoryNilAndZeroInputsNeverPanic(t *testing.T) {
	with := func(f func(w *Workload)) Config {
		w := tiny()
		f(w)
		return Config{Workload: w, Tail: -1}
	}
	short := Config{Workload: tiny(), Tail: -1}
	cases := []struct {
		name string
		cfg  Config
		run  bool   // Run, not only New
		want string // "" no error, else the error names it
	}{
		{"zero Config (New only: the default scenario's 30 s)", Config{}, false, ""},
		{"tiny workload", short, true, ""},
		{"negative Writers", Config{Workload: tiny(), Tail: -1, Writers: -1}, true, ""},
		{"NaN Rate", Config{Workload: tiny(), Tail: -1, Rate: math.NaN()}, true, ""},
		{"-Inf Rate", Config{Workload: tiny(), Tail: -1, Rate: math.Inf(-1)}, true, ""},
		{"+Inf Rate", Config{Workload: tiny(), Tail: -1, Rate: math.Inf(1)}, true, "rate"},
		{"huge Writers", Config{Workload: tiny(), Tail: -1, Writers: math.MaxInt}, true, "writers"},
		{"negative Duration", Config{Workload: tiny(), Tail: -1, Duration: -time.Second}, true, ""},
		{"negative Skew", Config{Workload: tiny(), Tail: -1, Skew: -1}, true, ""},
		{"huge Skew", Config{Workload: tiny(), Tail: -1, Skew: math.MaxInt64}, true, "skew"},
		{"negative CallTimeout", Config{Workload: tiny(), Tail: -1, CallTimeout: -1}, true, ""},
		{"zero Latency", Config{Workload: tiny(), Tail: -1, Latency: &LatencyModel{}}, true, ""},
		{"negative Latency", Config{Workload: tiny(), Tail: -1, Latency: &LatencyModel{Read: Latency{-1, -2}, Write: Latency{time.Millisecond, -1}}}, true, ""},
		{"nil Actor", Config{Workload: tiny(), Tail: -1, Actors: []Actor{nil}}, true, "Actors"},
		{"zero AggregatorActor", Config{Workload: tiny(), Tail: -1, Actors: []Actor{&AggregatorActor{}}}, true, ""},
		{"unknown Scenario", Config{Scenario: "nope"}, false, "scenario"},
		{"zero Workload", Config{Workload: &Workload{}}, false, "writers"},
		{"no Limits", with(func(w *Workload) { w.Limits = nil }), false, "limits"},
		{"zero Limit", with(func(w *Workload) { w.Limits = []limiter.Limit{{}} }), false, "Name"},
		{"no Consume", with(func(w *Workload) { w.Consume = nil }), false, "Consume"},
		{"negative Consume", with(func(w *Workload) { w.Consume = []Range{{Min: -1, Max: -1}} }), false, "Consume"},
		{"no Entities", with(func(w *Workload) { w.Entities = nil }), false, "entity"},
		{"empty Entity ID", with(func(w *Workload) { w.Entities = []Entity{{}} }), true, "entity"},
		{"no Resources", with(func(w *Workload) { w.Resources = nil }), false, "resource"},
		{"empty Resource", with(func(w *Workload) { w.Resources = []string{""} }), false, "resource"},
		{"empty Also", with(func(w *Workload) { w.Also = []string{""} }), false, "resource"},
		{"NaN Zipf", with(func(w *Workload) { w.Zipf = math.NaN() }), false, "Zipf"},
		{"NaN probabilities", with(func(w *Workload) { w.AdjustProb, w.RollbackProb, w.RetryProb = math.NaN(), math.NaN(), math.NaN() }), false, "AdjustProb"},
		{"out-of-range probabilities", with(func(w *Workload) { w.AdjustProb, w.RollbackProb, w.RetryProb = 2, -1, 7 }), false, "AdjustProb"},
		{"NaN AdjustSpread", with(func(w *Workload) { w.AdjustSpread = math.NaN() }), false, "AdjustSpread"},
		{"NaN Uneven", with(func(w *Workload) { w.Uneven = math.NaN() }), false, "Uneven"},
		{"+Inf Uneven", with(func(w *Workload) { w.Uneven = math.Inf(1) }), false, "Uneven"},
		{"negative Uneven", with(func(w *Workload) { w.Uneven = -3 }), false, "Uneven"},
		{"negative durations", with(func(w *Workload) {
			w.MaxRetryWait, w.StartSpread, w.CrashEvery, w.CrashDowntime, w.CacheTTL, w.WarmUp = -1, -1, -1, -1, -1, -1
			w.CallTime = Latency{-time.Second, -time.Second}
		}), true, ""},
		{"negative PartitionWCU", with(func(w *Workload) { w.PartitionWCU = -1 }), true, "PartitionWCU"},
		{"NaN PartitionWCU", with(func(w *Workload) { w.PartitionWCU = math.NaN() }), true, "PartitionWCU"},
		{"unknown Mode", with(func(w *Workload) { w.Entities[0].Mode = "nope" }), false, "mode"},
		{"zero FaultPlan", with(func(w *Workload) { w.Faults, w.FaultPlan = true, &FaultPlan{} }), true, ""},
		{"NaN FaultPlan", with(func(w *Workload) {
			w.Faults, w.FaultPlan = true, &FaultPlan{StormEvery: -1, StormLength: -1, StormP: math.NaN(), P5xxBefore: math.NaN(),
				P5xxAfter: -1, PLost: 2, PConflict: math.Inf(1), PSpike: math.NaN(), Spike: Latency{-1, -1}, ExpiryDelay: -1, PCancel: math.NaN()}
		}), true, ""},
	}
	for _, c := range cases {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", c.name, p)
				}
			}()
			var err error
			if c.run {
				var rep *Report
				rep, err = Run(c.cfg)
				if err == nil {
					_ = rep.WriteTable(io.Discard)
					if !rep.OK() {
						t.Errorf("%s: violations %v", c.name, rep.Violations)
					}
				}
			} else {
				_, err = New(c.cfg)
			}
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s: %v, want no error", c.name, err)
			case c.want != "" && (err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.want))):
				t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
			}
		}()
	}

	var nilRep *Report
	var nilSim *Sim
	var nilAgg *AggregatorActor
	calls := map[string]func(){
		"nil Report":            func() { nilRep.OK(); _ = nilRep.WriteSVG(io.Discard); _ = nilRep.WriteTable(io.Discard) },
		"zero Report":           func() { r := &Report{}; r.OK(); _ = r.WriteSVG(io.Discard); _ = r.WriteTable(io.Discard) },
		"nil AggregatorActor":   func() { _ = nilAgg.Name(); nilAgg.Stats(); nilAgg.Records(nil); nilAgg.Run(nil) },
		"zero AggregatorActor":  func() { a := &AggregatorActor{}; _ = a.Name(); a.Stats(); a.Records([]memsim.Record{{}}) },
		"FixedLatency negative": func() { FixedLatency(-1); FixedLatency(math.MaxInt64) },
		"Lookup empty":          func() { Lookup(""); Lookup("\x00") },
		"names": func() {
			_ = opKind(255).String()
			_ = outcome(255).String()
			_ = opKind(0).String()
			_ = outcome(0).String()
		},
		"nil Env": func() {
			for _, e := range []*Env{nil, {}} {
				e.Now()
				e.Rand().IntN(2)
				e.Sleep(time.Second)
				st := e.Store()
				if _, err := st.Get(context.Background(), store.GetInput{}); err == nil {
					t.Error("the store of a zero Env answered a Get")
				}
				_, _ = st.Scan(context.Background(), store.ScanInput{})
				st.WriteConcurrently(context.Background(), []store.Write{{}})
			}
		},
	}
	// A Sim that cannot run (nil, zero, run already) reports why.
	twice, err := New(Config{Workload: tiny(), Tail: -1})
	if err != nil {
		t.Fatal(err)
	}
	twice.Run()
	for name, s := range map[string]*Sim{"nil": nilSim, "zero": {}, "second": twice} {
		calls[name+" Sim.Run"] = func() {
			if rep := s.Run(); rep.OK() || rep.Violations[0].Invariant != InvHarness {
				t.Errorf("%s Sim.Run: %+v, want a harness violation", name, rep)
			}
		}
	}
	// Every registered scenario passes the checks added for nonsense.
	for _, sc := range Scenarios() {
		if _, err := New(Config{Scenario: sc.Name}); err != nil {
			t.Errorf("scenario %s: %v", sc.Name, err)
		}
	}
	zerotest.NoPanics(t, calls)
}
