package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// The cascade's answer covers both sides (TestCascadeRefusalCoversBothSides):
// when one side is refused by the store while the other lost a race and
// would write again, the other side's last image is judged too, and the
// longer wait wins; a tie keeps the refusal the store gave. A side already
// charged is not judged: its image after the charge says nothing about
// this acquire, which it served.
func TestCascadeRefusalJudgesOnlyASideStillToWrite(t *testing.T) {
	refusedChild := failed(shape{rf: T, tk: tokens(0)}.item(child1)) // 1 token in 100 ms
	for _, c := range []struct {
		name         string
		parent       int64 // the parent's stored tokens in the client's image (at T)
		parentResult Result
		want         string
		wait         int64
	}{
		{"the parent, in a race, would wait as long", 0, failed(shape{rf: T, tk: tokens(5000)}.item(parent1)), "refused child", 100},
		{"the parent was charged", -1000, wrote(shape{rf: T, tk: tokens(-2000)}.item(parent1)), "refused child", 100},
	} {
		m := speculating(NewMemory(0))
		knows(t, m, parentRef, shape{rf: T, tk: tokens(c.parent)}.item(parent1), 1, T)
		ch := newCascade(m)
		ch.Sides[1].o.NoLocalRefusals = true // the parent's write goes out
		s := ch.Start(T)
		if describeCascade(s) != both {
			t.Fatalf("%s: %q", c.name, describeCascade(s))
		}
		s = ch.Feed([]Result{refusedChild, c.parentResult}, T)
		if s.Undo { // the charged parent is refunded first
			s = ch.Feed([]Result{wrote(shape{rf: T, tk: tokens(0)}.item(parent1))}, T)
		}
		if got := describeCascade(s); got != c.want || retryOf(s.Refused) != c.wait {
			t.Errorf("%s: %q after %d ms, want %q after %d", c.name, got, retryOf(s.Refused), c.want, c.wait)
		}
	}
}

// After an undo that lands, the client remembers the refunded shard as
// the undo left it.
func TestCascadeUndoIsRemembered(t *testing.T) {
	m := speculating(NewMemory(0))
	c := newCascade(m)
	after := shape{rf: T, tk: tokens(9000)}.item(child1)
	converseCascade(t, c, T,
		cturn{both, []Result{wrote(shape{rf: T, tk: tokens(8000)}.item(child1)), failed(shape{rf: T, tk: tokens(0)}.item(parent1))}},
		cturn{"child update 0 undo", []Result{wrote(after)}},
		cturn{"refused parent", nil})
	if st, _ := m.View(bucketRef, 0).Img.comp.Get("rps"); st.Tokens != 9000 {
		t.Fatalf("remembered %d tokens, want the undo's 9000", st.Tokens)
	}
}

// An undo whose condition fails at the same shard count (the limit was
// removed from the item) has nothing to return the charge to: the answer
// comes at once, no undo made again.
func TestCascadeUndoOnAnItemWithoutTheLimit(t *testing.T) {
	other := NewPlan(bucketRef, []Limit{perSecond("tpm", 10)}, nil)
	c := newCascade(speculating(NewMemory(0)))
	converseCascade(t, c, T,
		cturn{both, []Result{wrote(shape{rf: T, tk: tokens(8000)}.item(child1)), failed(shape{rf: T, tk: tokens(0)}.item(parent1))}},
		cturn{"child update 0 undo", []Result{failed(shape{rf: T}.item(other))}},
		cturn{"refused parent", nil})
}

// Only throttles and conflicts, which certainly did not apply, are tried
// again; an undo that failed otherwise is reported, naming the side whose
// charge may stand.
func TestCascadeUndoFailuresNameTheSide(t *testing.T) {
	notApplied := erred(&store.UnavailableError{Op: "Update", Err: errors.New("503")})
	// The parent charged, the child refused: the parent's undo.
	c := newCascade(speculating(NewMemory(0)))
	s := converseCascade(t, c, T,
		cturn{both, []Result{failed(shape{rf: T, tk: tokens(0)}.item(child1)), wrote(shape{rf: T, tk: tokens(8000)}.item(parent1))}},
		cturn{"parent update 0 undo", []Result{notApplied}},
		cturn{"refused child", nil})
	if s.UndoErr == nil || !strings.Contains(s.UndoErr.Error(), `the charge of "parent" on "r" may stand`) {
		t.Fatalf("undo err %v, want it to name the parent", s.UndoErr)
	}
	c = newCascade(speculating(NewMemory(0)))
	s = converseCascade(t, c, T,
		cturn{both, []Result{wrote(shape{rf: T, tk: tokens(8000)}.item(child1)), failed(shape{rf: T, tk: tokens(0)}.item(parent1))}},
		cturn{"child update 0 undo", []Result{notApplied}},
		cturn{"refused parent", nil})
	if s.UndoErr == nil || !strings.Contains(s.UndoErr.Error(), `the charge of "e" on "r" may stand`) {
		t.Fatalf("undo err %v, want it to name the entity", s.UndoErr)
	}
}

// Both sides refused by the store: the longer wait is the answer, the
// child's on a tie. A side whose write failed (not refused) is not judged
// from its last image: it says nothing about the tokens.
func TestCascadeBothRefused(t *testing.T) {
	for _, c := range []struct {
		name          string
		child, parent int64 // stored tokens at T; 1 token wanted, 10 a second
		want          string
		wait          int64
	}{
		{"the parent waits longer", 0, -1000, "refused parent", 200},
		{"the child waits longer", -1000, 0, "refused child", 200},
		{"as long", 0, 0, "refused child", 100},
	} {
		ch := newCascade(NewMemory(0))
		ch.Start(T)
		s := ch.Feed([]Result{failed(shape{rf: T, tk: tokens(c.child)}.item(child1)), failed(shape{rf: T, tk: tokens(c.parent)}.item(parent1))}, T)
		if got := describeCascade(s); got != c.want || retryOf(s.Refused) != c.wait {
			t.Errorf("%s: %q after %d ms, want %q after %d", c.name, got, retryOf(s.Refused), c.want, c.wait)
		}
	}
	m := NewMemory(0)
	knows(t, m, parentRef, shape{rf: T, tk: tokens(-5000)}.item(parent1), 1, T)
	ch := newCascade(m)
	ch.Sides[1].o.NoLocalRefusals = true
	ch.Start(T)
	s := ch.Feed([]Result{failed(shape{rf: T, tk: tokens(0)}.item(child1)), throttle}, T)
	if got := describeCascade(s); got != "refused child" || retryOf(s.Refused) != 100 {
		t.Fatalf("%q after %d ms, want the child's refusal (the throttled parent is not judged)", got, retryOf(s.Refused))
	}
}

// A side judged from its last view while the other was refused counts,
// as a local refusal does, what the others drained since that view.
func TestCascadeJudgesTheOtherSideLocally(t *testing.T) {
	m := NewMemory(0)
	knows(t, m, parentRef, shape{rf: T, tk: tokens(0)}.item(parent1), 1, T)
	measured(m, parentRef, 0, 0.2, 0.1, T, map[string]float64{"rps": 5})
	ch := newCascade(m)
	ch.Sides[1].o.NoLocalRefusals = true // the parent's write goes out
	ch.Start(T + 50)
	ch.Sides[1].o.NoLocalRefusals = false
	s := ch.Feed([]Result{failed(shape{rf: T + 50, tk: tokens(0)}.item(child1)), failed(shape{rf: T + 50, tk: tokens(5000)}.item(parent1))}, T+50)
	// The parent's view: 500 refilled in 50 ms, 250 of them drained by the
	// others: 250; it waits (1000 - 250) / (10 - 5) = 150 ms, the child 100.
	if got := describeCascade(s); got != "refused parent" || retryOf(s.Refused) != 150 {
		t.Fatalf("%q after %d ms, want the parent's 150", got, retryOf(s.Refused))
	}
}
