package engine

import (
	"testing"

	"github.com/shardlimit/limiter/store"
)

// A charge that landed and is dropped afterwards (a cascade drops both
// sides) forgets nothing twice: nothing stays in flight, and another
// write's count is not taken.
func TestDropAfterTheChargeLanded(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	knows(t, m, bucketRef, shape{rf: T - 200, tk: map[string]int64{"rps": 5000}}.item(p), 1, T)
	c := NewCharge(m, p, picks(), Options{})
	step := converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", wrote(shape{rf: T - 200, tk: map[string]int64{"rps": 4000}, tc: map[string]int64{"rps": 1000}}.item(p))},
		{"done speculative", Result{}},
	})
	if !step.Done {
		t.Fatal("not charged")
	}
	c.Drop(T)
	if _, si := m.viewOf(bucketRef, 0); si.inflight != 0 || len(si.pending) != 0 {
		t.Fatalf("after the charge and a Drop: %d writes in flight, %v pending; want none", si.inflight, si.pending)
	}
}

// A write that landed but returned an item the plan cannot read is an
// error, and the write is no longer in flight.
func TestALandedWriteThatCannotBeReadEndsInFlight(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	c := NewCharge(m, p, picks(), Options{})
	c.Start(T)
	bad := shape{rf: T}.item(p)
	bad["b_rps_tk"] = store.Str("not a number")
	if step := c.Feed(wrote(bad), T); step.Err == nil {
		t.Fatalf("an unreadable item: %q, want an error", describe(step))
	}
	if _, si := m.viewOf(bucketRef, 0); si.inflight != 0 || len(si.pending) != 0 {
		t.Fatalf("after an unreadable answer: %d writes in flight, %v pending; want none", si.inflight, si.pending)
	}
}

// A promise (a refusal's retry time) is kept against a later one only
// when asked to keep it and while it is still ahead; otherwise the new one
// replaces it.
func TestPromisesKeptOrReplaced(t *testing.T) {
	p := plan1(bucketRef)
	for _, c := range []struct {
		name     string
		promise  int64
		at, now  int64
		keep     bool
		want     int64
		unknowns bool // the bucket is unknown to the memory
	}{
		{"kept: ahead and sooner", T + 100, T + 200, T, true, T + 100, false},
		{"replaced when not kept", T + 100, T + 200, T, false, T + 200, false},
		{"replaced when due now", T, T + 200, T, true, T + 200, false},
		{"replaced by a sooner one", T + 300, T + 200, T, true, T + 200, false},
		{"an unknown bucket", 0, T + 200, T, false, 0, true},
		{"a binding one is replaced", T + 100, T + 200, T, true, T + 200, false},
	} {
		m := NewMemory(0)
		if !c.unknowns {
			knows(t, m, bucketRef, shape{rf: T}.item(p), 1, T)
			m.promised(bucketRef, 0, c.promise, T-1, false)
			if c.name == "a binding one is replaced" {
				m.promisedBinding(bucketRef, 0, c.promise)
			}
		}
		m.promised(bucketRef, 0, c.at, c.now, c.keep)
		if got := m.View(bucketRef, 0).Promise; got != c.want {
			t.Errorf("%s: promise T%+d, want T%+d", c.name, got-T, c.want-T)
		}
	}
	// A shard of a known bucket the memory has no entry for: nothing kept.
	m := NewMemory(0)
	knows(t, m, bucketRef, shape{rf: T}.item(p), 1, T)
	m.promised(bucketRef, 1, T+100, T, true)
	if _, si := m.viewOf(bucketRef, 1); si.promise != 0 {
		t.Fatalf("a promise for a shard never seen: T%+d", si.promise-T)
	}
}

// The write rates come from the growth of the shard's write units over a
// window: the first ones, provisional, from any stretch of it; the
// estimate from a whole window.
func TestWriteRatesFromTheGrowthOfWriteUnits(t *testing.T) {
	p := plan1(bucketRef)
	at := func(w int64) store.Item { return shape{rf: T, tc: map[string]int64{"wcu": w}}.item(p) }
	m := NewMemory(0)
	m.learn(bucketRef, 0, image(t, at(50_000)), 1, T, 0, nil)
	m.learn(bucketRef, 0, image(t, at(60_000)), 1, T+10, 0, nil) // 10 writes in 10 ms, before the first window
	if v := m.View(bucketRef, 0); v.Rate != 1 || v.Others != 1 {
		t.Fatalf("provisional rates %v and %v, want a write a ms", v.Rate, v.Others)
	}
	m.learn(bucketRef, 0, image(t, at(50_000+2*rateWindowMs*1000)), 1, T+rateWindowMs, 0, nil)
	if v := m.View(bucketRef, 0); v.Rate != 2 || v.RateAt != T+rateWindowMs {
		t.Fatalf("estimated rate %v at T%+d, want 2 writes a ms at T%+d", v.Rate, v.RateAt-T, rateWindowMs)
	}
	// The first estimate comes after firstWindowMs.
	m = NewMemory(0)
	m.learn(bucketRef, 0, image(t, at(50_000)), 1, T, 0, nil)
	m.learn(bucketRef, 0, image(t, at(50_000+3*firstWindowMs*1000)), 1, T+firstWindowMs, 0, nil)
	if v := m.View(bucketRef, 0); v.Rate != 3 || v.RateAt != T+firstWindowMs {
		t.Fatalf("first estimated rate %v at T%+d, want 3 writes a ms at T%+d", v.Rate, v.RateAt-T, firstWindowMs)
	}
}
