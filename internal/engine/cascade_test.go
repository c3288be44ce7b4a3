package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// The Cascade machine: an entity's bucket (the child) and its parent's,
// each side a Charge, their calls made together, a charged side refunded
// when the other is refused or fails. Each test tells one story; the
// results are made by hand unless the story is about what a write does.

var parentRef = keys.Bucket{Namespace: "ns", Entity: "parent", Resource: "r"}

// describeCascade writes a cascade step as its calls ("child update 0
// speculative + parent update 0 speculative") or its answer ("done",
// "refused parent", "err").
func describeCascade(s CascadeStep) string {
	switch {
	case len(s.Calls) > 0:
		var cs []string
		for i, c := range s.Calls {
			cs = append(cs, [2]string{"child", "parent"}[s.Sides[i]]+" "+describeCall(c)+" "+s.Paths[i].String())
		}
		return strings.Join(cs, " + ")
	case s.Done:
		return "done"
	case s.Refused != nil && s.Side == 1:
		return "refused parent"
	case s.Refused != nil:
		return "refused child"
	case s.Err != nil:
		return "err"
	}
	return "nothing"
}

// cturn is one turn of a cascade: the step wanted, and the results of its
// calls, in order.
type cturn struct {
	want string
	feed []Result
}

func converseCascade(t *testing.T, c *Cascade, now int64, turns ...cturn) CascadeStep {
	t.Helper()
	s := c.Start(now)
	for i, x := range turns {
		if got := describeCascade(s); got != x.want {
			t.Fatalf("step %d: %q (err %v), want %q", i+1, got, s.Err, x.want)
		}
		if i < len(turns)-1 {
			s = c.Feed(x.feed, now)
		}
	}
	return s
}

// newCascade returns a cascade charging a token of each bucket, both
// unknown to the client unless m says otherwise.
func newCascade(m *Memory) *Cascade {
	return NewCascade(m, picks(), Options{}, plan1(bucketRef), plan1(parentRef))
}

var (
	child1  = plan1(bucketRef)
	parent1 = plan1(parentRef)
	both    = "child update 0 speculative + parent update 0 speculative"
	tokens  = func(tk int64) map[string]int64 { return map[string]int64{"rps": tk} }
)

// Both sides have the tokens: their writes go out together and both
// apply. One round trip, no undo.
func TestCascadeBothChargedInOneRoundTrip(t *testing.T) {
	c := newCascade(speculating(NewMemory(0)))
	converseCascade(t, c, T,
		cturn{both, []Result{wrote(shape{rf: T, tk: tokens(9000)}.item(child1)), wrote(shape{rf: T, tk: tokens(4000)}.item(parent1))}},
		cturn{"done", nil})
	if c.Sides[0].Img == nil || c.Sides[1].Img == nil {
		t.Fatal("each side should hold the image its write returned")
	}
}

// The child's write lost a race (its item shows 3 stored tokens); the
// parent's applied. The child retries alone, consume-only; the parent
// stays charged, once.
func TestCascadeLosingSideRetriesAlone(t *testing.T) {
	c := newCascade(speculating(NewMemory(0)))
	converseCascade(t, c, T,
		cturn{both, []Result{failed(shape{rf: T, tk: tokens(3000)}.item(child1)), wrote(shape{rf: T, tk: tokens(4000)}.item(parent1))}},
		cturn{"child update 0 retry", []Result{wrote(shape{rf: T, tk: tokens(2000)}.item(child1))}},
		cturn{"done", nil})
}

// The child's write applied, the parent's found no token: the next step is
// the child's undo, run even if the caller gave up (Undo). Made on the
// child's item, it returns exactly the token (tk and tc back), not the
// write unit (the write happened). The answer is the parent's refusal.
func TestCascadeParentRefusedUndoesTheChild(t *testing.T) {
	charged := shape{rf: T - 10, tk: tokens(8000), tc: map[string]int64{"rps": 1000, "wcu": 1000}}
	st := sim(t, charged.item(child1))
	c := newCascade(speculating(NewMemory(0)))
	s := converseCascade(t, c, T,
		cturn{both, []Result{wrote(charged.item(child1)), failed(shape{rf: T, tk: tokens(0)}.item(parent1))}},
		cturn{"child update 0 undo", nil})
	if !s.Undo {
		t.Fatal("the compensation must be marked Undo")
	}
	r := call(t.Context(), st, s.Calls[0])
	if tk, tc, w := attr(t, st, bucketRef, 0, "b_rps_tk"), attr(t, st, bucketRef, 0, "b_rps_tc"), attr(t, st, bucketRef, 0, "b_wcu_tc"); r.Err != nil || tk != 9000 || tc != 0 || w != 1000 {
		t.Fatalf("undo: %v; tk %d tc %d wcu_tc %d, want 9000, 0, 1000", r.Err, tk, tc, w)
	}
	if s = c.Feed([]Result{r}, T); describeCascade(s) != "refused parent" || s.UndoErr != nil {
		t.Fatalf("%q (undo err %v), want the parent's refusal, the undo made", describeCascade(s), s.UndoErr)
	}
}

// As above, but the undo times out: it may or may not have applied. The
// refusal stays a refusal (never failed open), and UndoErr says the
// child's charge may stand.
func TestCascadeUndoWithUnknownOutcome(t *testing.T) {
	c := newCascade(speculating(NewMemory(0)))
	s := converseCascade(t, c, T,
		cturn{both, []Result{wrote(shape{rf: T, tk: tokens(9000)}.item(child1)), failed(shape{rf: T, tk: tokens(0)}.item(parent1))}},
		cturn{"child update 0 undo", []Result{unknown}},
		cturn{"refused parent", nil})
	if !errors.Is(s.UndoErr, ErrUndoFailed) || !store.OutcomeUnknown(s.UndoErr) {
		t.Fatalf("undo err %v, want ErrUndoFailed with an unknown outcome", s.UndoErr)
	}
}

// An undo refused by a throttle certainly did not apply: it is made
// again, up to three times in all.
func TestCascadeThrottledUndoIsMadeAgain(t *testing.T) {
	refusedParent := []Result{wrote(shape{rf: T, tk: tokens(9000)}.item(child1)), failed(shape{rf: T, tk: tokens(0)}.item(parent1))}
	undo := "child update 0 undo"
	s := converseCascade(t, newCascade(speculating(NewMemory(0))), T,
		cturn{both, refusedParent},
		cturn{undo, []Result{throttle}}, cturn{undo, []Result{throttle}}, cturn{undo, []Result{wrote(nil)}},
		cturn{"refused parent", nil})
	if s.UndoErr != nil {
		t.Fatalf("undo err %v after the third attempt applied", s.UndoErr)
	}
	s = converseCascade(t, newCascade(speculating(NewMemory(0))), T,
		cturn{both, refusedParent},
		cturn{undo, []Result{throttle}}, cturn{undo, []Result{throttle}}, cturn{undo, []Result{throttle}},
		cturn{"refused parent", nil})
	if !errors.Is(s.UndoErr, ErrUndoFailed) {
		t.Fatalf("undo err %v after three throttles, want ErrUndoFailed", s.UndoErr)
	}
}

// The undo finds the child's shard gone (it expired, so it was full):
// there is nothing to return the token to, and nothing is owed.
func TestCascadeUndoFindsTheShardGone(t *testing.T) {
	s := converseCascade(t, newCascade(speculating(NewMemory(0))), T,
		cturn{both, []Result{wrote(shape{rf: T, tk: tokens(9000)}.item(child1)), failed(shape{rf: T, tk: tokens(0)}.item(parent1))}},
		cturn{"child update 0 undo", []Result{gone}},
		cturn{"refused parent", nil})
	if s.UndoErr != nil {
		t.Fatalf("undo err %v, want none", s.UndoErr)
	}
}

// The child's write timed out (it may have applied) and the parent is
// refused. A charge that may never have landed cannot be refunded (that
// would hand out a token), so no undo is made: the refusal comes with the
// unknown outcome beside it.
func TestCascadeUnknownSideIsNotUndone(t *testing.T) {
	s := converseCascade(t, newCascade(speculating(NewMemory(0))), T,
		cturn{both, []Result{unknown, failed(shape{rf: T, tk: tokens(0)}.item(parent1))}},
		cturn{"refused parent", nil})
	if !store.OutcomeUnknown(s.UndoErr) || s.Err != nil {
		t.Fatalf("undo err %v, err %v; want the child's unknown outcome beside the refusal", s.UndoErr, s.Err)
	}
}

// The child applied and the parent's write timed out: the parent may be
// charged. The child is refunded, and the answer is the parent's unknown
// outcome, for the caller to treat as possibly charged.
func TestCascadeChildUndoneWhenTheParentIsUnknown(t *testing.T) {
	s := converseCascade(t, newCascade(speculating(NewMemory(0))), T,
		cturn{both, []Result{wrote(shape{rf: T, tk: tokens(9000)}.item(child1)), unknown}},
		cturn{"child update 0 undo", []Result{wrote(shape{rf: T, tk: tokens(10000)}.item(child1))}},
		cturn{"err", nil})
	if !store.OutcomeUnknown(s.Err) {
		t.Fatalf("err %v, want the parent's unknown outcome", s.Err)
	}
}

// The child is refused and the parent's write is throttled: a refusal
// wins over a failure (a fail-open policy must never admit what a limit
// refused), and nothing was charged.
func TestCascadeRefusalWinsOverAFailure(t *testing.T) {
	s := converseCascade(t, newCascade(speculating(NewMemory(0))), T,
		cturn{both, []Result{failed(shape{rf: T, tk: tokens(0)}.item(child1)), throttle}},
		cturn{"refused child", nil})
	if s.Err != nil || s.UndoErr != nil {
		t.Fatalf("err %v, undo err %v; want a plain refusal", s.Err, s.UndoErr)
	}
}

// The child is refused locally (its image, 50 ms old, refills to half a
// token: 50 ms to wait) while the parent's write is about to go out. The
// parent's last image, two seconds old (too old to refuse from), shows a
// debt that leaves it 200 ms short. The answer covers both sides: the
// parent's wait, which both sides promise.
func TestCascadeRefusalCoversBothSides(t *testing.T) {
	m := NewMemory(0)
	knows(t, m, bucketRef, shape{rf: T - 50, tk: tokens(0)}.item(child1), 1, T-50)
	knows(t, m, parentRef, shape{rf: T - 2000, tk: tokens(-21000)}.item(parent1), 1, T-2000)
	s := converseCascade(t, newCascade(m), T, cturn{"refused parent", nil})
	if w := retryMs(t, s.Refused); w != 200 {
		t.Fatalf("retry after %d ms, want the parent's 200", w)
	}
	if a, b := m.View(bucketRef, 0).Promise, m.View(parentRef, 0).Promise; a != T+200 || b != T+200 {
		t.Fatalf("promises T%+d and T%+d, want T+200 on both sides", a-T, b-T)
	}
}

// The child is refused locally at the start while the parent's write was
// ready to go out (the parent's image shows 1.5 tokens); the cascade drops
// that write. The parent's Charge had recorded it as in flight
// (Memory.reserve), and nothing takes it back: the memory keeps a phantom
// token in flight on the parent's shard, one more per such refusal, and
// counts it against every later acquire of the parent. Here the next
// acquire of the parent alone, with 1.5 tokens in the bucket and nothing
// in flight, is refused locally. A side's retry dropped after a round
// trip leaves its reservation the same way.
func TestCascadeDroppedWriteLeavesNoReservation(t *testing.T) {
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, shape{rf: T - 50, tk: tokens(0)}.item(child1), 1, T-50)
	knows(t, m, parentRef, shape{rf: T, tk: tokens(1500)}.item(parent1), 1, T)
	converseCascade(t, newCascade(m), T, cturn{"refused child", nil})
	if pend := m.View(parentRef, 0).Pending; len(pend) != 0 {
		t.Errorf("the parent's shard has %v in flight, want nothing: its write was never made", pend)
	}
	c := NewCharge(m, parent1, picks(), Options{})
	if s := c.Start(T); describe(s) != "update 0 speculative" {
		t.Errorf("the parent alone: %q, want its write (the bucket holds 1.5 tokens)", describe(s))
	}

	// The same after a round trip: the child lost a race and would retry,
	// the parent is refused; the child's retry is dropped.
	m = speculating(NewMemory(0))
	converseCascade(t, newCascade(m), T,
		cturn{both, []Result{failed(shape{rf: T, tk: tokens(3000)}.item(child1)), failed(shape{rf: T, tk: tokens(0)}.item(parent1))}},
		cturn{"refused parent", nil})
	if pend := m.View(bucketRef, 0).Pending; len(pend) != 0 {
		t.Errorf("the child's shard has %v in flight, want nothing: its retry was never made", pend)
	}
}

// Three buckets (a key's model, "all-models", and a third resource): the
// model and the third are charged, "all-models" refuses. Both charged
// sides are refunded by one step of two concurrent undos; a throttled
// undo is made again alone, and the answer names the refusing side.
func TestCascadeOfThreeUndoesEveryChargedSide(t *testing.T) {
	allRef := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "all-models"}
	thirdRef := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "third"}
	all1, third1 := plan1(allRef), plan1(thirdRef)
	c := NewCascade(NewMemory(0), picks(), Options{}, child1, all1, third1)
	s := c.Start(T)
	if len(s.Calls) != 3 || s.Undo {
		t.Fatalf("first step: %d calls (undo %v), want the three writes together", len(s.Calls), s.Undo)
	}
	s = c.Feed([]Result{wrote(shape{rf: T, tk: tokens(9000)}.item(child1)), failed(shape{rf: T, tk: tokens(0)}.item(all1)),
		wrote(shape{rf: T, tk: tokens(9000)}.item(third1))}, T)
	if !s.Undo || len(s.Calls) != 2 || s.Sides[0] != 0 || s.Sides[1] != 2 || s.Paths[0] != PathUndo {
		t.Fatalf("want the undos of sides 0 and 2 together: undo %v, sides %v, paths %v", s.Undo, s.Sides, s.Paths)
	}
	s = c.Feed([]Result{wrote(shape{rf: T, tk: tokens(10000)}.item(child1)), throttle}, T)
	if !s.Undo || len(s.Sides) != 1 || s.Sides[0] != 2 {
		t.Fatalf("want the throttled undo of side 2 again, alone: sides %v", s.Sides)
	}
	s = c.Feed([]Result{wrote(shape{rf: T, tk: tokens(10000)}.item(third1))}, T)
	if s.Refused == nil || s.Side != 1 || s.UndoErr != nil || len(s.Calls) != 0 {
		t.Fatalf("want all-models' refusal (side 1), every undo made: refused %v side %d undo err %v", s.Refused != nil, s.Side, s.UndoErr)
	}
}

// A key's bucket with a cap of 2 leases and its parent's: the process's
// last image of the key's bucket, from its own acquire a second ago, shows
// both slots taken (leases since released by their holders, which no image
// of this process shows); the parent's image, 50 ms old, refuses locally
// (50 ms to wait). The answer is the parent's refusal: a cap refuses only
// in the store, so the key's side, whose write was ready to go out, is not
// refused on the slots its old image shows taken (it named the cap, with
// the time until those slots leave the ring, about a minute, as the wait).
func TestRegressionCascadeRefusalNeverBlamesACapFromAnOldImage(t *testing.T) {
	key := capPlan(inflight2)
	it := shape{rf: T - 1000}.item(key)
	c := newConc(inflight2)
	e := c.epoch(T - 1000)
	it[c.cnt[slot(e)]], it[c.lv] = store.Int(2), store.Int(2)
	m := NewMemory(0)
	knows(t, m, bucketRef, it, 1, T-1000)
	knows(t, m, parentRef, shape{rf: T - 50, tk: tokens(0)}.item(parent1), 1, T-50)
	s := converseCascade(t, NewCascade(m, picks(), Options{}, key, parent1), T, cturn{"refused parent", nil})
	if w := retryMs(t, s.Refused); w != 50 {
		t.Fatalf("retry after %d ms, want the parent's 50", w)
	}
}

// The same, with the key's image also short of rps (100 ms to wait,
// longer than the parent's 50): the answer is the key's refusal, by rps,
// with rps's wait, whether the image is young enough to refuse locally
// (half a second) or not (two seconds: judged from it all the same, to
// cover the key's side). The cap's slots the image shows taken are not
// judged: the refusal named the cap too, and waited until those slots
// left the ring, a minute.
func TestRegressionCascadeRefusalFromAnOldImageWaitsForTheRateNotTheCap(t *testing.T) {
	for _, age := range []int64{500, 2000} {
		key := capPlan(inflight2)
		it := shape{rf: T - age, tk: tokens(-10 * age)}.item(key)
		c := newConc(inflight2)
		e := c.epoch(T - age)
		it[c.cnt[slot(e)]], it[c.lv] = store.Int(2), store.Int(2)
		m := NewMemory(0)
		knows(t, m, bucketRef, it, 1, T-age)
		knows(t, m, parentRef, shape{rf: T - 50, tk: tokens(0)}.item(parent1), 1, T-50)
		s := converseCascade(t, NewCascade(m, picks(), Options{}, key, parent1), T, cturn{"refused child", nil})
		for _, v := range s.Refused.Views() {
			if v.Exceeded != (v.Name == "rps") || v.Exceeded && v.RetryMs != 100 {
				t.Errorf("image %d ms old: %s exceeded %v, retry after %d ms; want only rps exceeded, 100 ms", age, v.Name, v.Exceeded, v.RetryMs)
			}
		}
	}
}
