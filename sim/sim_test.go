package sim

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"
)

func TestEventHeapOrdersByTimeThenInsertion(t *testing.T) {
	var h eventHeap
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		h.push(event{at: r.Int64N(50), seq: uint64(i)})
	}
	prev := event{at: -1}
	for len(h) > 0 {
		e := h.pop()
		if e.at < prev.at || (e.at == prev.at && e.seq < prev.seq) {
			t.Fatalf("popped %+v after %+v", e, prev)
		}
		prev = e
	}
	// Pushes and pops interleaved, as the scheduler does them: every pop
	// is the least of what is queued.
	seq := uint64(0)
	var queued []event
	for i := 0; i < 20000; i++ {
		if len(h) == 0 || r.IntN(3) > 0 {
			seq++
			e := event{at: int64(i/4) + r.Int64N(20), seq: seq}
			h.push(e)
			queued = append(queued, e)
			continue
		}
		e := h.pop()
		least := 0
		for j, q := range queued {
			if q.at < queued[least].at || q.at == queued[least].at && q.seq < queued[least].seq {
				least = j
			}
		}
		if queued[least] != e {
			t.Fatalf("pop %d: got %+v, want %+v", i, e, queued[least])
		}
		queued = append(queued[:least], queued[least+1:]...)
	}
}

func TestLatencyDistribution(t *testing.T) {
	d := Latency{Median: 6 * time.Millisecond, P99: 20 * time.Millisecond}.compile()
	r := rand.New(rand.NewPCG(3, 4))
	n, below, below99 := 20000, 0, 0
	for i := 0; i < n; i++ {
		x := d.draw(r)
		if x < int64(6*time.Millisecond) {
			below++
		}
		if x < int64(20*time.Millisecond) {
			below99++
		}
	}
	if f := float64(below) / float64(n); f < 0.48 || f > 0.52 {
		t.Errorf("median: %.3f of draws below 6ms", f)
	}
	if f := float64(below99) / float64(n); f < 0.985 || f > 0.995 {
		t.Errorf("p99: %.4f of draws below 20ms", f)
	}
}

func short(scenario string, d time.Duration) Config {
	return Config{Scenario: scenario, Seed: 7, Duration: d}
}

func mustRun(t *testing.T, cfg Config) *Report {
	t.Helper()
	rep, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func requireOK(t *testing.T, rep *Report) {
	t.Helper()
	for _, v := range rep.Violations {
		t.Errorf("%s: %s", v.Invariant, v.Detail)
	}
}

// Invariant 8: the same seed gives the same trace and the same report;
// another seed another trace.
func TestSameSeedSameTrace(t *testing.T) {
	for _, sc := range []string{"steady", "faults"} {
		t.Run(sc, func(t *testing.T) {
			cfg := short(sc, 4*time.Second)
			cfg.Tail = 2 * time.Second
			a, b := mustRun(t, cfg), mustRun(t, cfg)
			for _, v := range checkDeterminism(a.TraceHash, b.TraceHash) {
				t.Errorf("%s: %s", v.Invariant, v.Detail)
			}
			ja, _ := json.Marshal(a) // WallMs is 0: only the caller fills it in
			jb, _ := json.Marshal(b)
			if string(ja) != string(jb) {
				t.Errorf("same seed, different reports:\n%s\n%s", ja, jb)
			}
			cfg.Seed++
			c := mustRun(t, cfg)
			if c.TraceHash == a.TraceHash {
				t.Errorf("seeds %d and %d gave the same trace %s", cfg.Seed-1, cfg.Seed, a.TraceHash)
			}
			if reflect.DeepEqual(a.Timeline, c.Timeline) {
				t.Errorf("seeds %d and %d gave the same timeline", cfg.Seed-1, cfg.Seed)
			}
		})
	}
}

// scenarioSeeds is how many seeds TestScenarios runs each scenario on:
// SIM_SEEDS, or 3.
func scenarioSeeds(t *testing.T) int {
	v := os.Getenv("SIM_SEEDS")
	if v == "" {
		return 3
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("SIM_SEEDS=%q: want a positive number of seeds", v)
	}
	return n
}

// Every scenario runs clean for a few simulated seconds, on seeds 7, 8, 9
// (SIM_SEEDS sets how many).
func TestScenarios(t *testing.T) {
	seeds := scenarioSeeds(t)
	for _, sc := range Scenarios() {
		for seed := uint64(7); seed < 7+uint64(seeds); seed++ {
			t.Run(sc.Name+"/seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
				testScenario(t, sc, seed)
			})
		}
	}
}

func testScenario(t *testing.T, sc Scenario, seed uint64) {
	cfg := short(sc.Name, 5*time.Second)
	cfg.Seed = seed
	switch sc.Name {
	case "hot-entity":
		cfg.Rate = 2000
	case "idle-year":
		cfg.Duration = 10 * 24 * time.Hour
	case "quota-month":
		cfg.Duration = 0 // both midnights: the scenario's 62 minutes
	}
	rep := mustRun(t, cfg)
	requireOK(t, rep)
	if rep.Acquires == 0 || rep.Admitted == 0 {
		t.Fatalf("nothing happened: %+v", rep)
	}
	if sc.Name == "cascade" && rep.StoreRequests <= rep.RoundTrips {
		t.Errorf("cascade: %d requests in %d round trips: concurrent writes were not scheduled one by one",
			rep.StoreRequests, rep.RoundTrips)
	}
	if sc.Name == "faults" && (rep.Unavailable == 0 || rep.Throttled == 0) {
		t.Errorf("faults: no fault showed (unavailable %d, throttled %d)", rep.Unavailable, rep.Throttled)
	}
	if sc.Name == "idle-year" && (rep.ShardCountFinal != 1 || rep.ShardDoublings != 0) {
		t.Errorf("idle-year: shard count %d after %d doublings", rep.ShardCountFinal, rep.ShardDoublings)
	}
}

// A call timeout shorter than many round trips: lots of outcome-unknown
// writes, some applied after their client gave up. The checkers must
// account for them exactly.
func TestTimeoutsInSimulatedTime(t *testing.T) {
	cfg := short("cascade", 4*time.Second)
	cfg.CallTimeout = 7 * time.Millisecond
	cfg.Tail = -1
	rep := mustRun(t, cfg)
	requireOK(t, rep)
	if rep.Unavailable == 0 {
		t.Fatalf("no timeouts with a 7ms timeout: %+v", rep.Paths)
	}
}

func TestProgressAndTimeline(t *testing.T) {
	var calls int
	cfg := short("steady", 3*time.Second)
	cfg.Tail = time.Second
	cfg.Progress = func(p Progress) { calls++ }
	rep := mustRun(t, cfg)
	if calls != 4 || len(rep.Timeline) != 4 {
		t.Fatalf("progress called %d times, timeline %d entries; want 4 each", calls, len(rep.Timeline))
	}
	var sum uint64
	for i, s := range rep.Timeline {
		if s.TMs != int64(i)*1000 {
			t.Errorf("entry %d at %d ms", i, s.TMs)
		}
		sum += s.Admitted
	}
	if sum != rep.Admitted {
		t.Errorf("timeline admits %d, report %d", sum, rep.Admitted)
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Scenario: "nope"},
		{Workload: &Workload{}},
		{Workload: func() *Workload { w := steady(Config{}); w.Consume[1].Max = 1_000_000; return w }()},
	} {
		if _, err := Run(cfg); err == nil {
			t.Errorf("%+v: no error", cfg.Scenario)
		}
	}
}

// The sharding acceptance runs (long): SIM_ACCEPTANCE=1 go test -run Acceptance ./sim
func TestAcceptanceHotEntity(t *testing.T) {
	if os.Getenv("SIM_ACCEPTANCE") == "" {
		t.Skip("set SIM_ACCEPTANCE=1")
	}
	rep := mustRun(t, Config{Scenario: "hot-entity", Writers: 128, Rate: 10000, Duration: 120 * time.Second, Seed: 1})
	requireOK(t, rep)
	w := rep.AfterWarmUp
	t.Logf("after %v: throttled %.2f%% of attempts, admitted %.2f%% of offered; shards %d after %d doublings",
		time.Duration(w.FromMs)*time.Millisecond, w.ThrottledPc, w.AdmittedPc, rep.ShardCountFinal, rep.ShardDoublings)
	if w.FromMs != 30000 || w.ThrottledPc >= 1 || w.AdmittedPc < 99 {
		t.Errorf("after warm-up: %+v", w)
	}
	if n := rep.ShardCountFinal; n > 32 || n&(n-1) != 0 {
		t.Errorf("final shard count %d", n)
	}
}

func TestAcceptanceIdleYear(t *testing.T) {
	if os.Getenv("SIM_ACCEPTANCE") == "" {
		t.Skip("set SIM_ACCEPTANCE=1")
	}
	rep := mustRun(t, Config{Scenario: "idle-year", Seed: 1})
	requireOK(t, rep)
	if rep.ShardCountFinal != 1 || rep.ShardDoublings != 0 {
		t.Errorf("shard count %d after %d doublings", rep.ShardCountFinal, rep.ShardDoublings)
	}
}
