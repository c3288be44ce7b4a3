package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
)

// capModel is one bucket with a cap of 2 leases, TTL 20 s.
func capModel() *model {
	ls := []limiter.Limit{limiter.PerMinute("rpm", 600), {Name: "inflight", Capacity: 2, Window: "concurrent", TTL: 20 * time.Second}}
	return &model{Namespace: "ns", LimitNames: []string{"rpm", "inflight"},
		Buckets: []bucketModel{{Entity: "k", Resource: "m", Limits: ls, Parent: -1}}}
}

const sec = int64(time.Second)

// Three leases live at once on a cap of 2 is flagged; three in a row, each
// ended before the next, is not; a lease whose holder died stops counting
// after its TTL.
func TestCheckerCapLiveLeases(t *testing.T) {
	m := capModel()
	for _, c := range []struct {
		name   string
		leases []capLease
		bad    bool
	}{
		{"three at once", []capLease{{slots: 1, start: 0, admitted: sec, end: -1, ended: -1}, {slots: 1, start: 0, admitted: 2 * sec, end: 9 * sec, ended: 9 * sec}, {slots: 1, start: 0, admitted: 3 * sec, end: 4 * sec, ended: 4 * sec}}, true},
		{"in a row", []capLease{{slots: 1, admitted: sec, end: 2 * sec, ended: 2 * sec}, {slots: 1, admitted: 3 * sec, end: 4 * sec, ended: 4 * sec}, {slots: 1, admitted: 5 * sec, end: -1, ended: -1}}, false},
		{"dead holders past their TTL", []capLease{{slots: 1, admitted: sec, end: -1, ended: -1}, {slots: 1, admitted: sec, end: -1, ended: -1}, {slots: 1, start: 21 * sec, admitted: 22 * sec, end: -1, ended: -1}}, false},
	} {
		chk := newChecker(m, testBase)
		(&capLog{limit: 1, leases: c.leases}).check(chk, m)
		if got := chk.perInv[InvCap] > 0; got != c.bad {
			t.Errorf("%s: flagged %v, want %v", c.name, got, c.bad)
		}
	}
}

// A refusal while two dead holders' slots may still be counted is right;
// one after their TTL and a quarter is a slot that did not come back.
func TestCheckerCapRefusalAfterTheDeadSlotsCameBack(t *testing.T) {
	m := capModel()
	dead := []capLease{{slots: 1, admitted: sec, end: -1, ended: -1}, {slots: 1, admitted: sec, end: -1, ended: -1}}
	for _, c := range []struct {
		name string
		at   int64
		bad  bool
	}{{"within TTL + E", 25 * sec, false}, {"after TTL + E", 27 * sec, true}} {
		chk := newChecker(m, testBase)
		(&capLog{limit: 1, leases: dead, refused: []capRefusal{{slots: 1, start: c.at, end: c.at}}}).check(chk, m)
		if got := chk.perInv[InvCap] > 0; got != c.bad {
			t.Errorf("%s: flagged %v, want %v", c.name, got, c.bad)
		}
	}
}

// The leases-crash scenario, two simulated minutes: processes die holding
// leases, the cap refuses, and no lease is above the cap nor any refusal
// without the slots counted.
func TestLeasesCrashScenario(t *testing.T) {
	cfg := short("leases-crash", 2*time.Minute)
	rep := mustRun(t, cfg)
	requireOK(t, rep)
	if rep.Crashes == 0 || rep.Rejected == 0 || rep.Admitted == 0 {
		t.Fatalf("crashes %d, rejected %d, admitted %d: the scenario tests nothing", rep.Crashes, rep.Rejected, rep.Admitted)
	}
}

// The same with the writers' clocks up to 1 s apart either way: a slot
// is counted on the clock of the process that retires it, so its bounds
// move by the skew (the checker allows twice the clocks' spread), and the
// cap still holds.
func TestLeasesCrashScenarioWithSkew(t *testing.T) {
	cfg := short("leases-crash", 2*time.Minute)
	cfg.Skew = time.Second
	rep := mustRun(t, cfg)
	requireOK(t, rep)
	if rep.Crashes == 0 || rep.Rejected == 0 || rep.Admitted == 0 {
		t.Fatalf("crashes %d, rejected %d, admitted %d: the scenario tests nothing", rep.Crashes, rep.Rejected, rep.Admitted)
	}
}

// A hot key with a cap under sharding pressure: 3,000 acquires a second,
// each lease held about 200 ms, the cap of 400 leases binding now and
// then, writers crashing holding leases; the bucket doubles under the
// leases (new shards start full of phantom slots). Live leases never
// exceed the cap through the doublings.
func TestCapThroughDoublings(t *testing.T) {
	wl := &Workload{
		Limits:   []limiter.Limit{limiter.PerSecond("rps", 1_000_000), {Name: "inflight", Capacity: 400, Window: "concurrent", TTL: 2 * time.Second}},
		Entities: []Entity{{ID: "hot"}}, Resources: []string{"gpt-4o"},
		Consume:    []Range{{Min: 1, Max: 1}, {Min: 1, Max: 1}},
		HoldLeases: true, RollbackProb: 0.05,
		CallTime: Latency{Median: 100 * time.Millisecond, P99: 1500 * time.Millisecond},
		Writers:  128, Rate: 3000, Duration: 4 * time.Second,
		CrashEvery: 5 * time.Second, CrashDowntime: 200 * time.Millisecond,
	}
	rep := mustRun(t, Config{Workload: wl, Seed: 3})
	requireOK(t, rep)
	if rep.ShardDoublings == 0 || rep.Rejected == 0 {
		t.Fatalf("doublings %d, rejected %d: the run tests nothing", rep.ShardDoublings, rep.Rejected)
	}
	t.Logf("%d admitted, %d rejected, %d doublings, final shards %d", rep.Admitted, rep.Rejected, rep.ShardDoublings, rep.ShardCountFinal)
}

// Acquires of several resources: each charges its model's bucket and the
// entity's "all" bucket (Request.Also), each bucket with its own cap. Two
// models' leases, two on each model's cap of 2, are four live on the "all"
// bucket, whose cap is 3: the checker follows the lease on every bucket
// the acquire charged and flags the "all" bucket (following only the
// acquiring bucket, it saw two and two, within the caps). A refused
// acquire's slot, taken on the "all" bucket by a side that was then
// refunded, counts as possibly held there until the answer (a refund that
// fails makes the answer unavailable), not as a lease.
func TestCheckerCapFollowsTheAlsoBuckets(t *testing.T) {
	inflight := func(n int64) []limiter.Limit {
		return []limiter.Limit{limiter.PerMinute("rpm", 600), {Name: "inflight", Capacity: n, Window: "concurrent", TTL: 20 * time.Second}}
	}
	m := &model{Namespace: "ns", LimitNames: []string{"rpm", "inflight"}, Buckets: []bucketModel{
		{Entity: "k", Resource: "a", Limits: inflight(2), Parent: -1, Also: []int32{2}},
		{Entity: "k", Resource: "b", Limits: inflight(2), Parent: -1, Also: []int32{2}},
		{Entity: "k", Resource: "all", Limits: inflight(3), Parent: -1},
	}}
	g := newCapLog(&Workload{Limits: inflight(2)}, m)
	for i, b := range []int32{0, 0, 1, 1} {
		g.admitted(&operation{Bucket: b, Amount: [MaxLimits]int64{1, 1}, Start: int64(i) * sec, End: int64(i)*sec + 1})
	}
	if n := len(g.leases); n != 8 {
		t.Fatalf("%d leases recorded, want 8 (each acquire's on its bucket and on the all bucket)", n)
	}
	chk := newChecker(m, testBase)
	g.check(chk, m)
	vs := chk.Violations()
	if len(vs) != 1 || vs[0].Invariant != InvCap || !strings.Contains(vs[0].Detail, "k/all: 4 slots") {
		t.Fatalf("violations %v, want one: 4 slots live on k/all, above its cap 3", vs)
	}
	err := &limiter.RateLimitedError{Entity: "k", Resource: "a", Limits: []limiter.LimitState{{Limit: inflight(2)[1], Shards: 1, Exceeded: true}}}
	g.refusedBy(&operation{Bucket: 0, Amount: [MaxLimits]int64{1, 1}, Start: 5 * sec, End: 5*sec + 1}, err)
	if r := g.refused[len(g.refused)-1]; r.bucket != 0 {
		t.Fatalf("refusal recorded on bucket %d, want 0 (k/a refused)", r.bucket)
	}
	if l := g.leases[len(g.leases)-1]; l.bucket != 2 || !l.unknown || l.ended != 5*sec+1 {
		t.Fatalf("the refused acquire's slot on k/all: %+v, want unknown and given back by the answer", l)
	}
}

// Two models of one key, each acquire also charging "all-models", whose
// cap (at once the models' caps) binds: the leases on the shared bucket
// are followed, live leases there never exceed its cap, its refusals come
// only while its slots are counted, and processes crash holding leases on
// both buckets.
func TestCapWithSeveralResources(t *testing.T) {
	wl := &Workload{
		Limits:    []limiter.Limit{limiter.PerSecond("rps", 1000), {Name: "inflight", Capacity: 6, Window: "concurrent", TTL: 2 * time.Second}},
		Entities:  []Entity{{ID: "key-1"}, {ID: "key-2"}},
		Resources: []string{"gpt-4o", "claude"}, Also: []string{"all-models"},
		Consume:    []Range{{Min: 1, Max: 1}, {Min: 1, Max: 1}},
		HoldLeases: true, RollbackProb: 0.1,
		CallTime: Latency{Median: 200 * time.Millisecond, P99: 2 * time.Second},
		Writers:  32, Rate: 120, Duration: 20 * time.Second,
		CrashEvery: 5 * time.Second, CrashDowntime: 200 * time.Millisecond,
	}
	s, err := New(Config{Workload: wl, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rep := s.Run()
	requireOK(t, rep)
	onAll, refusedOnAll := 0, 0
	for _, l := range s.caps.leases {
		if s.model.Buckets[l.bucket].Resource == "all-models" && !l.unknown {
			onAll++
		}
	}
	for _, r := range s.caps.refused {
		if s.model.Buckets[r.bucket].Resource == "all-models" {
			refusedOnAll++
		}
	}
	if onAll == 0 || refusedOnAll == 0 || rep.Crashes == 0 {
		t.Fatalf("%d leases and %d refusals on all-models, %d crashes: the run tests nothing", onAll, refusedOnAll, rep.Crashes)
	}
	t.Logf("%d admitted, %d rejected; %d leases and %d cap refusals on all-models; %d crashes", rep.Admitted, rep.Rejected, onAll, refusedOnAll, rep.Crashes)
}

// The cap checker judged as the cap's every refusal on a bucket with a cap
// that named no other enforcing limit as exceeded, the cap's own state
// aside: a refusal after lost races, which names no limit (a false
// rejection the limiter allows), was counted as the cap's and, with the
// cap's slots free, flagged; and a refusal by the cap beside a short
// shadow limit (which refuses nothing) was left out. A refusal is now the
// cap's when it names the cap as exceeded and no other enforcing limit.
func TestStoryCapRefusalNamesTheCap(t *testing.T) {
	m := capModel()
	rpm, inflight := m.Buckets[0].Limits[0], m.Buckets[0].Limits[1]
	shadowRPM := rpm
	shadowRPM.Shadow = true
	state := func(l limiter.Limit, exceeded bool) limiter.LimitState {
		return limiter.LimitState{Resource: "m", Limit: l, Shards: 1, Exceeded: exceeded}
	}
	for _, c := range []struct {
		name   string
		states []limiter.LimitState
		byCap  bool
	}{
		{"lost races, no limit named", []limiter.LimitState{state(rpm, false), state(inflight, false)}, false},
		{"a short shadow limit alone", []limiter.LimitState{state(shadowRPM, true), state(inflight, false)}, false},
		{"the rate", []limiter.LimitState{state(rpm, true), state(inflight, false)}, false},
		{"the rate and the cap", []limiter.LimitState{state(rpm, true), state(inflight, true)}, false},
		{"the cap", []limiter.LimitState{state(rpm, false), state(inflight, true)}, true},
		{"the cap beside a short shadow limit", []limiter.LimitState{state(shadowRPM, true), state(inflight, true)}, true},
	} {
		g := newCapLog(&Workload{Limits: m.Buckets[0].Limits}, m)
		err := &limiter.RateLimitedError{Entity: "k", Resource: "m", RetryAfter: time.Millisecond, Limits: c.states}
		g.refusedBy(&operation{Bucket: 0, Amount: [MaxLimits]int64{1, 1}, Start: 30 * sec, End: 30*sec + 1}, err)
		if got := len(g.refused) == 1; got != c.byCap {
			t.Errorf("%s: counted as the cap's refusal %v, want %v", c.name, got, c.byCap)
		}
		// No lease: the cap's 2 slots were free. The checker flags a
		// refusal it counts as the cap's, and only those.
		chk := newChecker(m, testBase)
		g.check(chk, m)
		if got := chk.perInv[InvCap] > 0; got != c.byCap {
			t.Errorf("%s: flagged %v, want %v (%v)", c.name, got, c.byCap, chk.Violations())
		}
	}
}
