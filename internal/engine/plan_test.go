package engine

import (
	"testing"

	"github.com/shardlimit/limiter/bucket"
)

// The limits hash is stored in every bucket item, and every blind write is
// conditional on it: a hash that changed between versions would make
// every bucket fail its next blind write and be rewritten. It is the hash
// of the limits in name order (the hidden one last), whatever order they
// come in, and positive.
func TestLimitsHashIsStable(t *testing.T) {
	tpm := perMinute("tpm", 6000)
	a := NewPlan(bucketRef, []Limit{rps10, tpm}, nil)
	b := NewPlan(bucketRef, []Limit{tpm, rps10}, nil)
	if a.hash != b.hash || a.hash <= 0 {
		t.Fatalf("hash %d and %d for the same limits in another order", a.hash, b.hash)
	}
	if got := a.hash; got != 7712582784337441700 {
		t.Fatalf("the limits hash of rps10 and tpm is %d, was 7712582784337441700: stored hashes would no longer match", got)
	}
	names := []string{}
	for _, s := range b.specs {
		names = append(names, s.name)
	}
	if names[0] != "rps" || names[1] != "tpm" || names[2] != "wcu" {
		t.Fatalf("specs in order %v, want rps, tpm, wcu (name order, the hidden limit last)", names)
	}
	// Every field of every limit counts.
	for _, other := range [][]Limit{
		{perSecond("rps", 11), tpm},
		{perSecond("rpt", 10), tpm},
		{{Name: "rps", Limit: bucket.Limit{Capacity: 10_000, Burst: 20_000, RefillAmount: 10_000, RefillPeriod: 1000}}, tpm},
		{rps10},
	} {
		if NewPlan(bucketRef, other, nil).hash == a.hash {
			t.Errorf("limits %+v hash like rps10 and tpm", other)
		}
	}
}

// Divisible: every limit still serves the plan's charge (and at least a
// token) from one shard's share of its burst.
func TestDivisible(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 5})
	if !p.Divisible(2) || p.Divisible(4) {
		t.Fatalf("5 of 10 tokens: divisible by 2 %v (want true), by 4 %v (want false)", p.Divisible(2), p.Divisible(4))
	}
	small := NewPlan(bucketRef, []Limit{rps10}, nil)
	if !small.Divisible(10) || small.Divisible(16) {
		t.Fatalf("a charge of nothing: a shard still needs a whole token (10 shards yes, 16 no)")
	}
}

// Same tells the plans of the same charge (built apart) from those of
// another bucket, other limits, other amounts, a reservation's or a
// return's; nil is the same as nothing.
func TestPlanSame(t *testing.T) {
	tpm := perMinute("tpm", 6000)
	two := []Limit{rps10, tpm}
	consume := map[string]int64{"rps": 1, "tpm": 5}
	p := NewPlan(bucketRef, two, consume)
	if q := NewPlan(bucketRef, []Limit{rps10, tpm}, map[string]int64{"rps": 1, "tpm": 5}); !p.Same(q) || !q.Same(p) {
		t.Fatal("two plans of the same charge are not the same")
	}
	other := bucketRef
	other.Entity = "f"
	for name, q := range map[string]*Plan{
		"another bucket":     NewPlan(other, two, consume),
		"other limits":       NewPlan(bucketRef, []Limit{perSecond("rps", 11), tpm}, consume),
		"fewer limits":       NewPlan(bucketRef, []Limit{rps10}, consume),
		"other amounts":      NewPlan(bucketRef, two, map[string]int64{"rps": 1, "tpm": 6}),
		"an amount left out": NewPlan(bucketRef, two, map[string]int64{"rps": 1}),
		"with billed writes": p.withBilled(1),
		"a reservation":      p.WithHold(map[string]int64{"rps": 1000}, nil, 0),
		"a release":          p.WithReturn(nil, map[string]int64{"rps": 1000}, 3),
		"another generation": func() *Plan { q := withSpecs(p.Ref, p.hash, p.specs); q.gen = 1; return q }(),
		"nil":                nil,
	} {
		if p.Same(q) || q.Same(p) {
			t.Errorf("%s: the same as the plan", name)
		}
	}
	var none *Plan
	if none.Same(nil) {
		t.Error("nil is the same as nil")
	}
}
