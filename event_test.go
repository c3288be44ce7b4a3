package limiter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// Event.Duration is the call's time by the limiter's clock: here every
// store call takes 5 ms.
func TestEventDuration(t *testing.T) {
	var e *env
	e = newEnv(t, memsim.WithHook(func(context.Context, memsim.Op) { e.clock.Add(5 * time.Millisecond) }))
	l := e.limiter()
	le := e.mustAcquire(l, req("k", rpm(10), one))
	if ev := e.last(); ev.Duration != time.Duration(ev.RoundTrips)*5*time.Millisecond || ev.Duration == 0 {
		t.Fatalf("acquire: %v for %d round trips", ev.Duration, ev.RoundTrips)
	}
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if ev := e.last(); ev.Op != "rollback" || ev.Duration != 5*time.Millisecond {
		t.Fatalf("rollback: %+v", ev)
	}
}

// A partition at its ceiling: the client's image shows the shard's write
// units spent on a shard it measured at its ceiling, so its next acquire
// makes the doubling write first, without a failed write. A throttled
// doubling is not the acquire's answer: the acquire goes on with its own
// write and is admitted. The doubling stays pending, and the acquire after
// makes it first; it lands, and the new shard, empty, refuses nothing.
func TestEventPathOfAThrottledDoubling(t *testing.T) {
	sc := newScript()
	e := newEnv(t, memsim.WithFaults(sc.injector()))
	l := e.limiter()
	r := Request{Entity: "k", Resource: "r", Limits: []Limit{PerSecond("rps", 100_000)}, Consume: map[string]int64{"rps": 1}}
	ref := keys.Bucket{Namespace: "ns", Entity: "k", Resource: "r"}
	// Others write the shard at 960 units a second, and its write units
	// are spent: the partition is at its ceiling.
	spend := func(units int64) {
		t.Helper()
		hot, err := store.Build(store.Update{}.Add("b_wcu_tc", store.Int(units*1000)).Set("b_wcu_tk", store.Int(0)).
			Set("rf", store.Int(e.clock.Now().UnixMilli())), store.Condition{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.Update(e.ctx, store.UpdateInput{Key: ref.Key(), Expr: hot}); err != nil {
			t.Fatal(err)
		}
	}
	e.mustAcquire(l, r) // made, at one shard
	e.clock.Add(500 * time.Millisecond)
	spend(480)
	e.mustAcquire(l, r) // measures the partition at its ceiling
	spend(0)
	sc.on(ref.PK(), memsim.FaultThrottle)
	sc.arm()
	if _, err := l.Acquire(e.ctx, r); err != nil {
		t.Fatalf("acquire after a throttled doubling: %v, want admitted", err)
	}
	if ev := e.last(); ev.Outcome != Admitted || ev.Throttled != 1 || ev.RoundTrips != 2 || ev.ShardDoublings != 0 {
		t.Fatalf("acquire: outcome %v, %d throttled of %d round trips, %d doublings; want admitted, 1 of 2, none",
			ev.Outcome, ev.Throttled, ev.RoundTrips, ev.ShardDoublings)
	}
	for i := range 4 {
		if _, err := l.Acquire(e.ctx, r); err != nil {
			t.Fatalf("acquire %d after the doubling: %v, want admitted (a new shard refuses nothing) %+v", i, err, e.last())
		}
	}
	if n, _ := e.bucketItem("k", "r", 0).Int(keys.AttrShardCount); n != 2 {
		t.Fatalf("shard count %d, want 2: the pending doubling landed", n)
	}
}

// Every call the observer is promised reaches it, with a truthful
// outcome: an admitted acquire is Admitted; an adjust, a rollback and a
// status read that worked are Succeeded (they admit nothing); a status
// read counts its reads; bad input is Invalid.
func TestEventOutcomesOfEveryCall(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	le := e.mustAcquire(l, req("k", rpm(10), one))
	want := func(op string, outcome Outcome) Event {
		t.Helper()
		ev := e.last()
		if ev.Op != op || ev.Outcome != outcome {
			t.Fatalf("last event %s %v, want %s %v", ev.Op, ev.Outcome, op, outcome)
		}
		return ev
	}
	want("acquire", Admitted)
	if err := le.Adjust(e.ctx, map[string]int64{"rpm": 1}); err != nil {
		t.Fatal(err)
	}
	want("adjust", Succeeded)
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	want("rollback", Succeeded)
	n := len(e.events)
	if _, err := l.Status(e.ctx, "k", "gpt-4", rpm(10)); err != nil {
		t.Fatal(err)
	}
	if len(e.events) != n+1 {
		t.Fatalf("Status told the observer %d times, want once", len(e.events)-n)
	}
	if ev := want("status", Succeeded); ev.Entity != "k" || ev.Resource != "gpt-4" || ev.RoundTrips < 1 || ev.ReadUnits <= 0 || ev.Path != PathNone {
		t.Fatalf("status event %+v, want its entity, resource, reads and no write path", ev)
	}
	if _, err := l.Status(e.ctx, "k", "", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("status without limits: %v", err)
	}
	if ev := want("status", Invalid); ev.Resource != DefaultResource {
		t.Fatalf("status event for resource \"\": %q, want %q", ev.Resource, DefaultResource)
	}
	for o, s := range map[Outcome]string{Admitted: "admitted", Rejected: "rejected", Unavailable: "unavailable", Invalid: "invalid", Succeeded: "succeeded"} {
		if o.String() != s {
			t.Errorf("Outcome(%d).String() = %q, want %q", o, o.String(), s)
		}
	}
}
