package engine

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"pgregory.net/rapid"
)

// A machine's speculative writes, from its memory of the last one or not,
// are what a fresh build of emitSpeculative gives, whatever the sequence
// of plans, shard counts and clocks (the edges of the remembered range
// included), and whatever other writes fill the buffer between them.
func TestRememberedSpeculativeMatchesFreshBuilds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		plans := drawPlans(t, 4)
		nows := rapid.SampledFrom([]int64{0, 1, 1 << 45, maxCachedNow - 1, maxCachedNow, maxCachedNow + 1, -1, 1 << 62})
		var b valueBuf
		for i := range rapid.IntRange(1, 12).Draw(t, "writes") {
			p := rapid.SampledFrom(plans).Draw(t, "plan")
			n := int64(1) << rapid.IntRange(0, 2).Draw(t, "shards")
			now := nows.Draw(t, "now")
			if rapid.Bool().Draw(t, "near") {
				now = rapid.Int64Range(0, 1<<45).Draw(t, "clock")
			}
			if rapid.Bool().Draw(t, "other") {
				// Another write of the machine fills the buffer in between.
				if _, err := p.full(&b, n, now, 0); err != nil {
					t.Fatal(err)
				}
			}
			got, err := p.speculative(&b, n, now, nil)
			if err != nil {
				t.Fatal(err)
			}
			var d directSink
			p.emitSpeculative(&d, n, now, nil)
			want, err := store.Build(d.u, store.And(d.conds...))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmp.Comparer(store.Value.Equal)); diff != "" {
				t.Fatalf("write %d (now %d, %d shards, memory %v): differs from a fresh build:\n%s", i, now, n, b.spec.state, diff)
			}
		}
	})
}

// drawPlans draws two plans of the same limits (1 to most of them, of
// random parameters) charging random amounts of random ones.
func drawPlans(t *rapid.T, most int) []*Plan {
	names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"rpm", "tpm", "a_b", "x"}), 1, most, rapid.ID).Draw(t, "names")
	var limits []Limit
	for _, n := range names {
		c := rapid.Int64Range(1, 1e6).Draw(t, "cap")
		limits = append(limits, Limit{Name: n, Limit: bucket.Limit{Capacity: c * 1000, Burst: c * 1000,
			RefillAmount: rapid.Int64Range(1, 1e6).Draw(t, "refill"),
			RefillPeriod: rapid.Int64Range(1, bucket.MaxRefillPeriod).Draw(t, "period")}})
	}
	var plans []*Plan
	for range 2 {
		consume := map[string]int64{}
		for _, n := range names {
			if rapid.Bool().Draw(t, "charged") {
				consume[n] = rapid.Int64Range(1, 3).Draw(t, "amount")
			}
		}
		plans = append(plans, NewPlan(keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}, limits, consume))
	}
	return plans
}

// Writes from memory in a row set only the values that hold now in the
// buffer; a write of another path in between fills the buffer with its
// own values, and the next write from memory puts every value back.
func TestSpeculativeFromMemoryAfterOtherWrites(t *testing.T) {
	p := plan1(bucketRef)
	var b valueBuf
	for i, full := range []bool{false, false, false, false, true, false, false, true, true, false} {
		now := T + int64(i)
		if full {
			if _, err := p.full(&b, 1, now, 0); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := p.speculative(&b, 1, now, nil)
		if err != nil {
			t.Fatal(err)
		}
		var d directSink
		p.emitSpeculative(&d, 1, now, nil)
		want, err := store.Build(d.u, store.And(d.conds...))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(store.Value.Equal)); diff != "" {
			t.Fatalf("write %d (memory %v, held %v): differs from a fresh build:\n%s", i, b.spec.state, b.spec.held, diff)
		}
		if built := i >= 2; b.spec.held != built {
			t.Fatalf("write %d: held %v, want %v", i, b.spec.held, built)
		}
	}
}

// The second write of a key in a row builds the memory; the third is made
// from it; another key starts over.
func TestSpeculativeMemoryStates(t *testing.T) {
	p, q := plan1(bucketRef), NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 2})
	var b valueBuf
	for i, c := range []struct {
		p    *Plan
		want specState
	}{{p, specSeen}, {p, specBuilt}, {p, specBuilt}, {q, specSeen}, {p, specSeen}} {
		if _, err := c.p.speculative(&b, 1, T+int64(i), nil); err != nil {
			t.Fatal(err)
		}
		if b.spec.state != c.want {
			t.Errorf("write %d: memory %v, want %v", i, b.spec.state, c.want)
		}
	}
}

// What a machine remembers, and what it does not: a plan of four specs
// (three limits and the hidden one) is remembered, one of five is not; a
// write that reserves or releases (its hold and generation are not in the
// key) is not; nor are clocks outside [0, maxCachedNow]. A write that is
// not remembered leaves the memory of the last one as it was.
func TestSpeculativeMemoryKeys(t *testing.T) {
	three := []Limit{perSecond("a", 10), perSecond("b", 10), perSecond("c", 10)}
	four := append(slices.Clone(three), perSecond("d", 10))
	p3 := NewPlan(bucketRef, three, map[string]int64{"a": 1})
	p4 := NewPlan(bucketRef, four, map[string]int64{"a": 1})
	if len(p3.specs) != maxCachedSpecs || len(p4.specs) != maxCachedSpecs+1 {
		t.Fatalf("plans of %d and %d specs, want %d and %d", len(p3.specs), len(p4.specs), maxCachedSpecs, maxCachedSpecs+1)
	}
	p := plan1(bucketRef)
	held := p.WithHold(map[string]int64{"rps": 2000}, nil, 7)
	released := p.WithHold(nil, map[string]int64{"rps": 1000}, 7)
	write := func(t *testing.T, b *valueBuf, q *Plan, now int64) {
		t.Helper()
		if _, err := q.speculative(b, 1, now, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		plan  *Plan
		now   int64
		built bool // twice in a row builds its memory
	}{
		{"four specs", p3, T, true},
		{"five specs", p4, T, false},
		{"a hold", held, T, false},
		{"a release", released, T, false},
		{"the clock at 0", p, 0, true},
		{"the clock at maxCachedNow", p, maxCachedNow, true},
		{"the clock before 0", p, -1, false},
		{"the clock past maxCachedNow", p, maxCachedNow + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b valueBuf
			other := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 2})
			write(t, &b, other, T)
			write(t, &b, other, T+1) // the memory holds other's write
			remembered := b.spec.key
			write(t, &b, tc.plan, tc.now)
			write(t, &b, tc.plan, tc.now)
			if built := b.spec.state == specBuilt && b.spec.key != remembered; built != tc.built {
				t.Fatalf("memory %v after two writes, want built %v", b.spec.state, tc.built)
			}
			if !tc.built && (b.spec.state != specBuilt || b.spec.key != remembered) {
				t.Fatalf("a write not remembered changed the memory (%v)", b.spec.state)
			}
		})
	}
}

// A machine's speculative writes allocate nothing once its buffer has
// grown, whether made from memory, building it, or afresh.
func TestSpeculativeWritesAllocateNothing(t *testing.T) {
	p, q := plan1(bucketRef), NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 100)}, map[string]int64{"rps": 1, "tpm": 3})
	var b valueBuf
	now := T
	round := func() {
		for _, x := range []*Plan{q, q, p, p, p} { // q's memory built, then p's, then p's used
			if _, err := x.speculative(&b, 1, now, nil); err != nil {
				t.Fatal(err)
			}
			now++
		}
	}
	round()
	if n := testing.AllocsPerRun(20, round); n != 0 {
		t.Fatalf("%v allocations a round of five writes, want 0", n)
	}
}

// A machine's blind full writes, from its memory of the last one or not,
// are what a fresh build of emitFull gives, whatever the sequence of
// plans, shard counts and clocks, its speculative writes in between (the
// two memories share the buffer), and clocks that move by a few
// milliseconds at a time, so that the expiry (in seconds) moves now and
// then and stays put in between: it is computed for each write, neither a
// constant nor now plus one.
func TestRememberedFullMatchesFreshBuilds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		plans := drawPlans(t, 3)
		var b valueBuf
		now := rapid.SampledFrom([]int64{0, 999, 1 << 45, maxCachedNow - 2000}).Draw(t, "start")
		for i := range rapid.IntRange(1, 16).Draw(t, "writes") {
			p := rapid.SampledFrom(plans).Draw(t, "plan")
			n := int64(1) << rapid.IntRange(0, 1).Draw(t, "shards")
			now += rapid.SampledFrom([]int64{0, 1, 2, 999, 1000, 1001}).Draw(t, "step")
			if rapid.Bool().Draw(t, "other") {
				// A speculative write of the machine fills the buffer in between.
				if _, err := p.speculative(&b, n, now, nil); err != nil {
					t.Fatal(err)
				}
			}
			got, err := p.full(&b, n, now, 0)
			if err != nil {
				t.Fatal(err)
			}
			var d directSink
			p.emitFull(&d, n, now, 0)
			want, err := store.Build(d.u, store.And(d.conds...))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmp.Comparer(store.Value.Equal)); diff != "" {
				t.Fatalf("write %d (now %d, %d shards, memory %v): differs from a fresh build:\n%s", i, now, n, b.full.state, diff)
			}
		}
	})
}

// The blind full write is remembered from its second write in a row, its
// expiry's placeholder found; a full write with a cushion is never made
// from memory and leaves it as it was.
func TestFullMemory(t *testing.T) {
	p := plan1(bucketRef)
	var b valueBuf
	for i := range 3 {
		if _, err := p.full(&b, 1, T+int64(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if b.full.state != specBuilt || b.full.ttlAt != 1 { // SET rf = :v0, ttl = :v1
		t.Fatalf("memory %v, expiry at %d: want built, with its expiry at 1", b.full.state, b.full.ttlAt)
	}
	key := b.full.key
	got, err := p.full(&b, 1, T+5, 30)
	if err != nil {
		t.Fatal(err)
	}
	var d directSink
	p.emitFull(&d, 1, T+5, 30)
	want, _ := store.Build(d.u, store.And(d.conds...))
	if diff := cmp.Diff(want, got, cmp.Comparer(store.Value.Equal)); diff != "" || b.full.key != key || b.full.state != specBuilt {
		t.Fatalf("a cushioned full write: memory %v; differs from a fresh build:\n%s", b.full.state, diff)
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = p.full(&b, 1, T+6, 0) }); n != 0 {
		t.Fatalf("a full write from memory allocates %v times, want 0", n)
	}
}

// valueOf counts every value a write emits, whatever kind, so that the
// one set for its name is found by its place: an either counts its terms
// but the absent one, exists and notExists count none.
func TestValueOfCountsEveryValue(t *testing.T) {
	f := valueOf{name: store.AttrTTL, found: -1}
	f.add("a", 1)
	f.cond(condGe, "b", 2)
	f.exists("c")
	f.notExists("d")
	f.either(term{condGe, "e", 3}, term{condLe, "f", 4}, term{condGe, "g", 5}, term{k: condAbsent, name: "h"})
	f.set("i", 6)
	f.set(store.AttrTTL, 7)
	f.set(store.AttrTTL, 8) // the first one counts
	if f.found != 6 || f.k != 8 {
		t.Fatalf("found %d of %d values, want the 7th of 8 (index 6)", f.found, f.k)
	}
	first := valueOf{name: "x", found: -1}
	first.set("x", 1)
	first.set("x", 2)
	if first.found != 0 {
		t.Fatalf("found %d, want the first value (index 0)", first.found)
	}
}
