package engine

import (
	"testing"

	"github.com/shardlimit/limiter/store/memsim"
)

// holdStory is a bucket of 1,000 a second on memsim, a client that
// reserves from it and another that charges it the plain way.
type holdStory struct {
	t             *testing.T
	st            *memsim.Store
	pooled, other *Memory
	now           int64
}

func newHoldStory(t *testing.T) *holdStory {
	h := &holdStory{t: t, st: memsim.New(memsim.WithPartitionLimits(0, 0)), pooled: NewMemory(16), other: NewMemory(16), now: t0.UnixMilli()}
	if !h.charge(h.pooled, 1) { // made, full less one
		t.Fatal("the first charge was refused")
	}
	return h
}

func (h *holdStory) plan(tokens int64) *Plan {
	return NewPlan(bucketRef, []Limit{perSecond("rps", 1000)}, map[string]int64{"rps": tokens})
}

// charge charges tokens the plain way; it reports whether it was granted.
func (h *holdStory) charge(m *Memory, tokens int64) bool {
	c := NewCharge(m, h.plan(tokens), newRand(1), Options{})
	step, _ := drive(h.st, func() int64 { return h.now }, c.Start(h.now), c.Feed)
	if step.Err != nil {
		h.t.Fatal(step.Err)
	}
	return step.Done
}

// reserve charges one token and holds k more into a pool.
func (h *holdStory) reserve(k int64) *Reserve {
	r := NewReserve(h.pooled, h.plan(1).WithHold(map[string]int64{"rps": k * 1000}, nil, 0), newRand(1), 0)
	step, _ := drive(h.st, func() int64 { return h.now }, r.Start(h.now), r.Feed)
	if step.Err != nil || !step.Done || r.Declined {
		h.t.Fatalf("the reservation was not made: %+v, declined %v", step, r.Declined)
	}
	return r
}

// drain charges one token at a time, at one instant, until refused.
func (h *holdStory) drain(m *Memory) int {
	n := 0
	for n < 5000 && h.charge(m, 1) {
		n++
	}
	return n
}

func (h *holdStory) attr(name string) int64 { return attr(h.t, h.st, bucketRef, 0, name) }

// A pool held while the bucket refills cannot push admissions above the
// burst: the bucket refills to the burst less the hold, and the pool's
// tokens plus the bucket's make the burst.
func TestHoldKeepsThePoolInsideTheBurst(t *testing.T) {
	h := newHoldStory(t)
	h.reserve(100)
	if got := h.attr("b_rps_hd"); got != 100_000 {
		t.Fatalf("hd = %d, want the 100 tokens held", got)
	}
	h.now += 5000 // long enough to refill anything
	bucket := h.drain(h.other)
	if bucket+100 > 1000 {
		t.Fatalf("the bucket admitted %d at one instant while a pool held 100: %d in all, above the burst of 1000", bucket, bucket+100)
	}
	if bucket < 1000-100-1 {
		t.Fatalf("the bucket admitted %d, want the burst less the pool's 100", bucket)
	}
}

// A pool that is never returned (its process crashed) keeps its hold
// until its generation is over by the skew margin; then a writer's
// write reclaims it (hd 0, the next generation) and the bucket refills
// to its whole burst. Before that, the hold stays.
func TestHoldOfACrashedPoolIsReclaimedAfterItsGeneration(t *testing.T) {
	h := newHoldStory(t)
	r := h.reserve(100)
	gen := r.Gen
	h.now = r.Until + 1000 // the pool is dead, its generation is not
	h.charge(h.other, 1)
	if got := h.attr("b_rps_hd"); got != 100_000 {
		t.Fatalf("hd = %d within the generation, want the crashed pool's 100 tokens still held", got)
	}
	h.now = h.attr(attrGenAt) + GenLifeMs + GenSkewMs
	if !h.charge(h.other, 1) {
		t.Fatal("refused")
	}
	if got, g := h.attr("b_rps_hd"), h.attr(attrGen); got != 0 || g != gen+1 {
		t.Fatalf("hd = %d in generation %d after the generation ended, want 0 in generation %d", got, g, gen+1)
	}
	h.now += 5000
	if got := h.drain(h.other); got < 999 || got > 1000 {
		t.Fatalf("%d admitted after the reclaim, want the whole burst", got)
	}
}

// A return of a generation that was reclaimed writes nothing: its rest is
// dropped, as a crash's, and the hold it would release is gone already.
func TestHoldLateReturnOfAnOldGenerationWritesNothing(t *testing.T) {
	h := newHoldStory(t)
	r := h.reserve(100)
	h.now = h.attr(attrGenAt) + GenLifeMs + GenSkewMs
	h.charge(h.other, 1) // reclaims
	before := h.st.Peek(bucketRef.WithShard(0).Key())
	ret := h.plan(1).WithReturn(map[string]int64{"rps": 60_000}, map[string]int64{"rps": 100_000}, r.Gen)
	a := NewAdjust(h.pooled, ret, 0, 1)
	step, paths := drive(h.st, func() int64 { return h.now }, a.Start(h.now), a.Feed)
	if step.Err != nil || !step.Done || !a.Vanished {
		t.Fatalf("the late return: %+v, vanished %v; want done, nothing written", step, a.Vanished)
	}
	if len(paths) != 1 {
		t.Fatalf("the late return made %v, want its one conditional write (failed)", paths)
	}
	after := h.st.Peek(bucketRef.WithShard(0).Key())
	for _, name := range []string{"b_rps_tk", "b_rps_hd", "b_rps_tc", attrGen} {
		b, _ := before.Int(name)
		a, _ := after.Int(name)
		if a != b {
			t.Errorf("%s went from %d to %d", name, b, a)
		}
	}
}

// A return in its generation gives the rest and the hold back: the cap
// rises by the hold, the tokens by the rest.
func TestHoldReturnGivesBackTheRestAndTheHold(t *testing.T) {
	h := newHoldStory(t)
	r := h.reserve(100)
	h.now += 50 // the bucket is full at its cap again
	tk := h.attr("b_rps_tk")
	ret := h.plan(1).WithReturn(map[string]int64{"rps": 60_000}, map[string]int64{"rps": 100_000}, r.Gen)
	a := NewAdjust(h.pooled, ret, 0, 1)
	step, _ := drive(h.st, func() int64 { return h.now }, a.Start(h.now), a.Feed)
	if step.Err != nil || !step.Done || a.Vanished {
		t.Fatalf("the return: %+v, vanished %v", step, a.Vanished)
	}
	if got := h.attr("b_rps_hd"); got != 0 {
		t.Fatalf("hd = %d after the return, want 0", got)
	}
	if got := h.attr("b_rps_tk"); got < tk+60_000 {
		t.Fatalf("tk = %d after the return, want at least %d", got, tk+60_000)
	}
	// The cap is the whole burst again: full when the tokens reach it, the
	// 40 tokens the pool handed out counted as consumed.
	tk, rf, fl := h.attr("b_rps_tk"), h.attr(attrRefill), h.attr("b_rps_fl")
	if want := rf + (1_000_000-tk)/1000; fl != want || tk != 1_000_000-40_000 {
		t.Fatalf("tk %d, full at %d ms after rf; want %d tokens, full at %d", tk, fl-rf, 1_000_000-40_000, want-rf)
	}
}
