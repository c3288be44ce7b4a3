package limiter_test

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/sim"
)

// TestProperty generates simulation configurations (100 to 256 writers,
// one to four limits, among them in a quarter of the configurations a
// calendar quota whose window ends during the run, in a quarter of the
// others a concurrency cap with processes crashing holding leases (also
// under sharding pressure),
// cascade on or off,
// acquires of several resources, sharding pressure, reservations (also
// under sharding pressure), faults, clock skew, seeds) and checks
// every invariant of the design on each run of the deterministic
// simulator (package sim).
//
// It runs 20 cases by default and shrinks a failure for at most 60 s; 2
// cases and 20 s under the race detector: the simulator runs one
// goroutine, so the race detector has nothing to watch there and only
// slows it down. make test (what CI runs) runs the package under -race
// for its concurrent tests, then this test alone without it at
// PROPERTY_CHECKS (500) cases. A failure is shrunk to a small configuration and
// saved in a fail file under
// testdata/rapid/TestProperty/; replay it exactly with
//
//	go test -run TestProperty -rapid.failfile=testdata/rapid/TestProperty/<file>.fail .
//
// A long campaign: more cases with -rapid.checks=N (or RAPID_CHECKS=N) and
// longer simulations per case with LIMITER_PROPERTY_LONG=1, e.g.
//
//	LIMITER_PROPERTY_LONG=1 go test -run TestProperty -rapid.checks=1000 -timeout 6h .
//
// LIMITER_PROPERTY_FORCE turns draws on in every case, a comma-separated
// list of pressure, quota, cascade, also and cap (a cap with several
// resources: "also,cap"), to hammer one combination, e.g.
//
//	LIMITER_PROPERTY_FORCE=pressure,quota,cascade go test -run '^TestProperty$' -rapid.checks=300 .
func TestProperty(t *testing.T) {
	if testing.Short() {
		t.Skip("simulations are not short")
	}
	if raceDetector() {
		// make test runs this package under -race, where a simulation is
		// several times slower; its plain run is the thorough one.
		defaultFlag("rapid.checks", "RAPID_CHECKS", "2")
		defaultFlag("rapid.shrinktime", "RAPID_SHRINKTIME", "20s")
	} else {
		defaultFlag("rapid.checks", "RAPID_CHECKS", "20")
		defaultFlag("rapid.shrinktime", "RAPID_SHRINKTIME", "60s")
	}
	if os.Getenv("CI") != "" {
		// CI is reproducible: the same generated configurations on every
		// run, so a red build always means a change broke something. Local
		// runs and make sim draw fresh seeds and explore.
		defaultFlag("rapid.seed", "RAPID_SEED", "1")
	}
	long := os.Getenv("LIMITER_PROPERTY_LONG") != ""
	rapid.Check(t, func(rt *rapid.T) {
		cfg := genConfig(rt, long)
		rep, err := sim.Run(cfg)
		if err != nil {
			rt.Fatalf("the generated configuration does not run: %v", err)
		}
		rt.Logf("trace %s: %d acquires (%d admitted, %d rejected, %d unavailable), %d throttled requests, shards %d",
			rep.TraceHash, rep.Acquires, rep.Admitted, rep.Rejected, rep.Unavailable, rep.Throttled, rep.ShardCountFinal)
		if !rep.OK() {
			var b strings.Builder
			for _, v := range rep.Violations {
				fmt.Fprintf(&b, "\n  %s: %s", v.Invariant, v.Detail)
			}
			rt.Fatalf("%d invariant violation(s):%s", len(rep.Violations), b.String())
		}
	})
}

// reservationsDrawn says whether a configuration without a cascade runs
// with reservations, from a draw in [0, 1). rapid draws small values far
// more often than large ones. Under sharding pressure a
// simulation with reservations costs four times one without (the load is
// up to twice as high, most of it answered from pools), so only the top
// of the draw takes them: 85 of the 761 such configurations among CI's
// 1,500, which keeps make test's time.
func reservationsDrawn(d float64, pressure bool) bool {
	if pressure {
		return d >= 0.9
	}
	return d < 0.35
}

// raceDetector reports whether the test binary was built with -race.
func raceDetector() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// defaultFlag sets one of rapid's flags unless the command line or the
// environment chose a value.
func defaultFlag(name, env, value string) {
	set := os.Getenv(env) != ""
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if !set {
		_ = flag.Set(name, value)
	}
}

// forced reports whether LIMITER_PROPERTY_FORCE names draw (see
// TestProperty).
func forced(draw string) bool {
	return slices.Contains(strings.Split(os.Getenv("LIMITER_PROPERTY_FORCE"), ","), draw)
}

var limitNames = []string{"rpm", "tpm", "img_per.min", "rps-2"}

func genConfig(t *rapid.T, long bool) sim.Config {
	wl := &sim.Workload{
		Writers: rapid.IntRange(100, 256).Draw(t, "writers"),
	}
	pressure := rapid.Float64Range(0, 1).Draw(t, "sharding_pressure") < 0.2 || forced("pressure")
	nl := rapid.IntRange(1, 4).Draw(t, "limits")
	scale := int64(1)
	if pressure {
		scale = 1000 // limits far above the load: only the partition ceiling binds
	}
	for i := 0; i < nl; i++ {
		period := rapid.SampledFrom([]time.Duration{time.Second, time.Minute}).Draw(t, "period")
		perSec := int64(rapid.IntRange(5, 1000).Draw(t, "refill_per_second")) * scale
		capacity := perSec * int64(period/time.Second)
		burst := capacity + capacity*int64(rapid.IntRange(0, 2).Draw(t, "extra_burst_halves"))/2
		hi := rapid.Int64Range(1, min(capacity, 40)).Draw(t, "max_charge")
		lo := rapid.Int64Range(1, hi).Draw(t, "min_charge")
		wl.Limits = append(wl.Limits, limiter.Limit{Name: limitNames[i], Capacity: capacity, Burst: burst, Refill: capacity, Period: period})
		wl.Consume = append(wl.Consume, sim.Range{Min: lo, Max: hi, Adjust: rapid.Bool().Draw(t, "adjust")})
	}
	// A calendar quota in place of the last limit: a day, week or month in
	// a zone, the run starting up to 2 s before midnight of 1 November
	// 2026 there (a Sunday: every kind of window ends then; in Havana the
	// clocks go back an hour later). Its quota is small enough to run out
	// within a window in some configurations. Under sharding pressure the
	// bucket splits around the boundary, with the clocks skewed or not
	// (sim's TestRegressionQuota* are two splits this found over-admitting).
	quota := rapid.Float64Range(0, 1).Draw(t, "quota") < 0.25 || forced("quota")
	if quota {
		zone := rapid.SampledFrom([]string{"", "Europe/Paris", "America/Havana", "Asia/Kolkata"}).Draw(t, "zone")
		window := rapid.SampledFrom([]string{"day", "week", "month"}).Draw(t, "window")
		hi := wl.Consume[nl-1].Max
		n := hi * int64(rapid.IntRange(20, 2000).Draw(t, "quota_charges"))
		wl.Limits[nl-1] = limiter.Limit{Name: limitNames[nl-1], Capacity: n, Window: window, TimeZone: zone}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatalf("zone %q: %v", zone, err)
		}
		wl.Start = time.Date(2026, 11, 1, 0, 0, 0, 0, loc).Add(-time.Duration(rapid.IntRange(0, 2000).Draw(t, "before_midnight_ms")) * time.Millisecond)
	}
	entities, resources := 1, 1
	if !pressure {
		entities = rapid.IntRange(1, 12).Draw(t, "entities")
		resources = rapid.IntRange(1, 2).Draw(t, "resources")
	}
	// Under sharding pressure the one hot key may cascade to a project
	// (in about a third of those configurations: the parent takes the
	// whole load and shards too, which doubles the work).
	cascade := rapid.Bool().Draw(t, "cascade")
	if pressure {
		cascade = rapid.IntRange(0, 2).Draw(t, "pressure_cascade") == 0
	}
	if forced("cascade") {
		cascade = true
	}
	// With a quota too: a cascade's compensation after the quota's window
	// ended leaves the charge in the window that ended (a window starts at
	// N whatever the one before took), which the checker counts as no
	// change. The same holds for several resources (Request.Also, below).
	wl.Resources = []string{"gpt-4o", "models/claude-3.5"}[:resources]
	// Acquires of several resources (Request.Also) in about a third of the
	// configurations without sharding pressure: each request also charges
	// one or two more resources of its entity (and their cascade
	// parents'), whose limits are stored at once or twice the request's,
	// or are the request's own. Invariant 3 is checked per bucket, so on
	// each resource.
	if !pressure && (rapid.IntRange(0, 2).Draw(t, "also_drawn") == 0 || forced("also")) {
		wl.Also = []string{"all-models", "models/all"}[:rapid.IntRange(1, 2).Draw(t, "also")]
		if factor := int64(rapid.IntRange(0, 2).Draw(t, "also_limit_factor")); factor > 0 {
			for _, l := range wl.Limits {
				l.Capacity, l.Burst, l.Refill = l.Capacity*factor, l.Burst*factor, l.Refill*factor
				wl.AlsoLimits = append(wl.AlsoLimits, l)
			}
		}
	}
	if cascade {
		projects := rapid.IntRange(1, 3).Draw(t, "projects")
		factor := int64(rapid.IntRange(1, 8).Draw(t, "parent_limit_factor"))
		for p := 0; p < projects; p++ {
			var ls []limiter.Limit
			for _, l := range wl.Limits {
				l.Capacity, l.Burst, l.Refill = l.Capacity*factor, l.Burst*factor, l.Refill*factor
				ls = append(ls, l)
			}
			wl.Entities = append(wl.Entities, sim.Entity{ID: fmt.Sprintf("project-%d", p), NoTraffic: true, Limits: ls})
		}
		for e := 0; e < entities; e++ {
			wl.Entities = append(wl.Entities, sim.Entity{ID: fmt.Sprintf("key-%d", e), Parent: fmt.Sprintf("project-%d", e%projects), Cascade: true})
		}
	} else {
		for e := 0; e < entities; e++ {
			wl.Entities = append(wl.Entities, sim.Entity{ID: fmt.Sprintf("key-%d", e)})
		}
	}
	if pressure {
		wl.Rate = rapid.Float64Range(1200, 2500).Draw(t, "rate")
	} else {
		wl.Rate = rapid.Float64Range(100, 1500).Draw(t, "rate")
		wl.RetryProb = rapid.Float64Range(0, 1).Draw(t, "retry_prob")
		wl.Probe = true
	}
	// Adjusts and rollbacks, also on a bucket that doubles under them:
	// each goes to the shard its lease charged, at the shard count it was
	// charged at or the one the item shows since. Fewer under pressure,
	// where every operation is one more write at the partition ceiling.
	adjustMax, rollbackMax := 0.9, 0.2
	if pressure {
		adjustMax, rollbackMax = 0.3, 0.05
	}
	wl.AdjustProb = rapid.Float64Range(0, adjustMax).Draw(t, "adjust_prob")
	wl.AdjustSpread = 0.4
	wl.RollbackProb = rapid.Float64Range(0, rollbackMax).Draw(t, "rollback_prob")
	wl.CallTime = sim.Latency{Median: 200 * time.Millisecond, P99: 2 * time.Second}
	wl.Skew = rapid.SampledFrom([]time.Duration{0, 0, 20 * time.Millisecond, 250 * time.Millisecond, time.Second}).Draw(t, "skew")
	if rapid.Bool().Draw(t, "faults") {
		wl.Faults = true
		p := func(label string) float64 { return rapid.Float64Range(0, 0.03).Draw(t, label) }
		wl.FaultPlan = &sim.FaultPlan{
			Start:      500 * time.Millisecond,
			StormEvery: 3 * time.Second, StormLength: time.Second, StormP: p("storm_p") * 20,
			P5xxBefore: p("p_5xx_before"), P5xxAfter: p("p_5xx_after"), PLost: p("p_lost"), PConflict: p("p_conflict"),
			PSpike: p("p_spike"), Spike: sim.Latency{Median: 200 * time.Millisecond, P99: 1500 * time.Millisecond},
		}
	}
	// Reservations in about a third of the configurations without a
	// cascade, with processes crashing while they hold them in half of
	// those; under sharding pressure in some of the configurations without
	// a cascade (see reservationsDrawn), where a doubling halves a shard's burst under the pools'
	// holds and a pool's return meets a shard count changed since (its
	// rest dropped, its hold left to its generation's reclaim). There the
	// load is uneven across the writers and up to twice as high: a process
	// reserves only when its own demand is a request per 100 ms or more,
	// and pools take most acquires off the store, so the busiest reserve
	// while the others charge the store and drive the doublings (in about
	// a quarter of these configurations).
	if !cascade && len(wl.Also) == 0 && reservationsDrawn(rapid.Float64Range(0, 1).Draw(t, "reservations"), pressure) {
		wl.Reservations = true
		if pressure {
			wl.Uneven = rapid.Float64Range(0, 1).Draw(t, "uneven")
			wl.Rate *= rapid.Float64Range(1, 2).Draw(t, "pooled_rate_factor")
		}
		if rapid.Bool().Draw(t, "crashes") {
			wl.CrashEvery = time.Duration(rapid.IntRange(1, 5).Draw(t, "crash_every_s")) * time.Second
			wl.CrashDowntime = 200 * time.Millisecond
		}
	}
	// The tail leaves the clocks twice the skew to slew back before the
	// liveness probe starts.
	wl.Duration = 3 * time.Second
	tail := 3*time.Second + 2*wl.Skew
	if long {
		wl.Duration = time.Duration(rapid.IntRange(10, 60).Draw(t, "seconds")) * time.Second
		tail = 10*time.Second + 2*wl.Skew
	}
	// The fault kinds beyond the store's answers: callers cancelling
	// acquires, cascade compensations failing, and the time to live, which
	// needs an idle period longer than the TTL (an hour or more): then the
	// traffic comes in two phases of Duration each, two hours apart, and
	// the buckets (their shards, under sharding pressure) expire between
	// them, deleted in no order within ExpiryDelay of their expiry.
	if wl.FaultPlan != nil {
		wl.FaultPlan.PCancel = rapid.Float64Range(0, 0.05).Draw(t, "p_cancel")
		wl.FaultPlan.PUndoFail = rapid.Float64Range(0, 0.5).Draw(t, "p_undo_fail")
		if rapid.Bool().Draw(t, "expiry") {
			wl.FaultPlan.ExpiryDelay = time.Duration(rapid.IntRange(1, 120).Draw(t, "expiry_delay_minutes")) * time.Minute
			wl.DutyPeriod, wl.DutyOn = 2*time.Hour, wl.Duration
			wl.Duration += wl.DutyPeriod
		}
	}
	seed := rapid.Uint64().Draw(t, "seed")
	// Disabled scopes (drawn last, so the draws above stay as they were):
	// some entities, cascade parents included, admit every acquire or
	// refuse it, without a write. The checker requires that, and that no
	// other bucket's accounting sees them (a child of a refused parent is
	// still charged, its parent too).
	if !pressure {
		for i := range wl.Entities {
			wl.Entities[i].Mode = rapid.SampledFrom([]string{"", "", "", "", "admit", "refuse"}).Draw(t, "mode")
		}
	}
	// Shadow limits (the simulator does not adjust them): a limit the
	// requests carry in shadow refuses nothing and is charged only by the
	// acquires it has the tokens for; a shadow entity's are all shadow.
	adjusts := false
	for i := range wl.Limits {
		adjusts = adjusts || wl.Consume[i].Adjust
		if !wl.Consume[i].Adjust && rapid.IntRange(0, 3).Draw(t, "shadow_limit") == 0 {
			wl.Limits[i].Shadow = true
		}
	}
	if !pressure && !adjusts {
		for i := range wl.Entities {
			if wl.Entities[i].Mode == "" && rapid.IntRange(0, 5).Draw(t, "shadow_entity") == 0 {
				wl.Entities[i].Mode = "shadow"
			}
		}
	}
	// A concurrency cap in place of the last limit (drawn last, so the draws
	// above stay as they were), beside rates, in a quarter of the
	// configurations without a quota, with several resources too (each Also
	// resource's bucket has the cap, at its limits' factor, and so has a
	// cascade's parent; the checker follows the leases on every bucket an
	// acquire charges):
	// every lease is held for its call, the cap of 1 to 50 leases (200 to
	// 2,000 under sharding pressure, where the bucket doubles under the
	// leases and a smaller cap would stop the doublings) refuses some of
	// them, and leases outlive TTLs of 1 to 5 s when their process crashes
	// or their release fails under faults.
	if !quota && (rapid.Float64Range(0, 1).Draw(t, "cap") < 0.25 || forced("cap")) {
		ttl := rapid.SampledFrom([]time.Duration{time.Second, 2 * time.Second, 5 * time.Second}).Draw(t, "cap_ttl")
		lo, hi := int64(1), int64(50)
		if pressure {
			lo, hi = 200, 2000
		}
		cp := limiter.Limit{Name: limitNames[nl-1], Capacity: rapid.Int64Range(lo, hi).Draw(t, "cap_slots"), Window: "concurrent", TTL: ttl}
		if len(wl.AlsoLimits) > 0 {
			factor := wl.AlsoLimits[nl-1].Capacity / wl.Limits[nl-1].Capacity
			wl.AlsoLimits[nl-1] = cp
			wl.AlsoLimits[nl-1].Capacity *= factor
		}
		for i := range wl.Entities {
			// A cascade's parents get the cap too, at their factor: a
			// team's cap above its keys' caps.
			if e := &wl.Entities[i]; e.NoTraffic && len(e.Limits) == nl {
				factor := e.Limits[nl-1].Capacity / wl.Limits[nl-1].Capacity
				e.Limits = slices.Clone(e.Limits)
				e.Limits[nl-1] = cp
				e.Limits[nl-1].Capacity *= factor
			}
		}
		wl.Limits[nl-1] = cp
		wl.Consume[nl-1] = sim.Range{Min: 1, Max: 1}
		wl.HoldLeases = true
		if wl.CrashEvery == 0 && rapid.Bool().Draw(t, "cap_crashes") {
			wl.CrashEvery, wl.CrashDowntime = time.Duration(rapid.IntRange(1, 5).Draw(t, "cap_crash_every_s"))*time.Second, 200*time.Millisecond
		}
	}
	return sim.Config{Workload: wl, Seed: seed, Tail: tail}
}
