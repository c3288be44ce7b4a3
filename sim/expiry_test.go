package sim

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// Shard 0 of a sharded bucket expires while other shards live on: it is
// recreated at their count (docs/write-paths.md, "Shard 0 after expiry"),
// and nothing breaks. The expiry scenario makes it happen: bursts that
// shard, idle periods past the TTL, deletions in no order.
func TestShardZeroExpiresFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	rep := mustRun(t, Config{Scenario: "expiry", Seed: 1})
	requireOK(t, rep)
	t.Logf("%d items expired, shard 0 recreated at more than one shard %d times, %d doublings, %d cancelled, %d of %d compensations failed",
		rep.Expired, rep.ShardZeroRecreated, rep.ShardDoublings, rep.Cancelled, rep.UndoFaults, rep.UndoWrites)
	if rep.Expired == 0 || rep.ShardZeroRecreated == 0 {
		t.Errorf("%d items expired, shard 0 recreated at more than one shard %d times: the scenario misses its point", rep.Expired, rep.ShardZeroRecreated)
	}
	if rep.Cancelled == 0 || rep.UndoFaults == 0 || rep.Throttled == 0 {
		t.Errorf("cancelled %d, failed compensations %d, throttled %d: a fault kind of the plan did not show", rep.Cancelled, rep.UndoFaults, rep.Throttled)
	}
}

// The faults scenario has every kind of fault: storms, cancelled callers,
// failed compensations, and buckets expiring between its phases.
func TestFaultsScenarioHasEveryFaultKind(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	rep := mustRun(t, Config{Scenario: "faults", Seed: 1})
	requireOK(t, rep)
	if rep.Expired == 0 || rep.Cancelled == 0 || rep.UndoFaults == 0 || rep.Throttled == 0 || rep.Unavailable == 0 {
		t.Errorf("expired %d, cancelled %d, failed compensations %d, throttled %d, unavailable %d: a fault kind did not show",
			rep.Expired, rep.Cancelled, rep.UndoFaults, rep.Throttled, rep.Unavailable)
	}
}

// A caller that cancels its context in the middle of an acquire gets the
// context's error (or a refusal), never a lease, also when it asked to
// fail open; the compensation of a cascade still runs; a write that was in
// flight is ambiguous.
func TestCancelledCallerNeverGetsALease(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	fp := FaultPlan{PCancel: 0.2, P5xxBefore: 0.01, P5xxAfter: 0.01, PLost: 0.01}
	rep := mustRun(t, Config{Workload: withPlan(cascade(Config{}), fp), Seed: 3, Duration: 8 * time.Second})
	requireOK(t, rep)
	t.Logf("%d cancelled acquires, %d fail-open answers (to callers whose cancellation the limiter had not met)", rep.Cancelled, rep.Paths["fail-open"])
	if rep.Cancelled < 100 {
		t.Errorf("only %d cancelled acquires", rep.Cancelled)
	}
}

// A cascade's compensation that fails (throttled, 5xx, its answer lost)
// leaves an outcome the limiter cannot vouch for: the history treats it as
// ambiguous, and every invariant holds.
func TestFailedCompensationIsAmbiguous(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	// Storms throttle one side of a cascade now and then: the other side,
	// charged, is refunded.
	fp := FaultPlan{PUndoFail: 0.5, StormEvery: 4 * time.Second, StormLength: time.Second, StormP: 0.3}
	rep := mustRun(t, Config{Workload: withPlan(faulty(Config{}), fp), Seed: 5, Duration: 10 * time.Second})
	requireOK(t, rep)
	t.Logf("%d of %d compensations failed; %d of %d acquires unavailable", rep.UndoFaults, rep.UndoWrites, rep.Unavailable, rep.Acquires)
	if rep.UndoFaults < 50 {
		t.Errorf("only %d of %d compensations failed", rep.UndoFaults, rep.UndoWrites)
	}
}

func withPlan(wl *Workload, fp FaultPlan) *Workload {
	wl.Faults, wl.FaultPlan = true, &fp
	return wl
}

// recordSpy is an actor that keeps the change stream's REMOVE records.
type recordSpy struct{ removes []memsim.Record }

func (r *recordSpy) Name() string { return "record-spy" }
func (r *recordSpy) Run(*Env)     {}
func (r *recordSpy) Records(recs []memsim.Record) {
	for _, x := range recs {
		if x.Event == memsim.EventRemove {
			r.removes = append(r.removes, x)
		}
	}
}

// The time to live deletes an item only once its ttl has passed (DynamoDB
// could delete it then), at most ExpiryDelay later, and the shards of a
// bucket in no particular order.
func TestExpiryDeletesOnlyExpiredItems(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	spy := &recordSpy{}
	wl := expiry(Config{})
	rep := mustRun(t, Config{Workload: wl, Seed: 1, Actors: []Actor{spy}})
	requireOK(t, rep)
	if len(spy.removes) == 0 || uint64(len(spy.removes)) != rep.Expired {
		t.Fatalf("%d REMOVE records, %d items expired", len(spy.removes), rep.Expired)
	}
	outOfOrder := false
	last := map[string]int{} // bucket PK prefix -> last shard deleted
	for _, r := range spy.removes {
		ttl, ok := r.Old.Int(store.AttrTTL)
		if !ok {
			t.Fatalf("%s deleted without a ttl", r.Keys.PK)
		}
		if at := r.At.Unix(); at <= ttl {
			t.Errorf("%s deleted at %d, its ttl %d had not passed", r.Keys.PK, at, ttl)
		}
		if late := r.At.Sub(time.Unix(ttl+1, 0)); late > wl.FaultPlan.ExpiryDelay {
			t.Errorf("%s deleted %v after it could be, more than %v", r.Keys.PK, late, wl.FaultPlan.ExpiryDelay)
		}
		prefix, shard := splitShard(r.Keys.PK)
		if prev, ok := last[prefix]; ok && shard < prev {
			outOfOrder = true
		}
		last[prefix] = shard
	}
	if !outOfOrder {
		t.Error("every bucket's shards were deleted in shard order")
	}
}

func splitShard(pk string) (string, int) {
	i := len(pk)
	n, mul := 0, 1
	for i > 0 && pk[i-1] >= '0' && pk[i-1] <= '9' {
		i--
		n += int(pk[i]-'0') * mul
		mul *= 10
	}
	return pk[:i], n
}

// The same seed gives the same run with expiry, cancellations and failed
// compensations too.
func TestExpiryIsDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	cfg := Config{Scenario: "expiry", Seed: 4, Duration: 2*time.Hour + 6*time.Second}
	a, b := mustRun(t, cfg), mustRun(t, cfg)
	ja, _ := json.Marshal(a) // WallMs is 0: only the caller fills it in
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("same seed, different reports:\n%s\n%s", ja, jb)
	}
	if a.Expired == 0 {
		t.Error("nothing expired")
	}
}
