package sim

import (
	"testing"
	"time"

	"github.com/shardlimit/limiter"
)

// capModel is one bucket with a cap of 2 leases, TTL 20 s.
func capModel() *Model {
	ls := []limiter.Limit{limiter.PerMinute("rpm", 600), {Name: "inflight", Capacity: 2, Window: "concurrent", TTL: 20 * time.Second}}
	return &Model{Namespace: "ns", LimitNames: []string{"rpm", "inflight"},
		Buckets: []BucketModel{{Entity: "k", Resource: "m", Limits: ls, Parent: -1}}}
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
		chk := NewChecker(m, testBase)
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
		chk := NewChecker(m, testBase)
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
