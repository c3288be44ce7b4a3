package engine

import (
	"errors"
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// The Charge machine at its bounds: how many shards and choices an acquire
// tries, what it reads consistently, what it leaves to the next write, and
// what it remembers. Amounts are millitokens of rps10, as in
// charge_test.go.

var rpsShort = map[string]int64{"rps": 0}

// A missing shard other than 0 is made only after a consistent read of
// shard 0 (an eventually consistent one could show shard 0 from before a
// doubling); a missing shard 0's siblings, found through the index, are
// read consistently too, at most 100 of them (one batch), shard 0 left
// out.
func TestDiscoveryReadsAreConsistentAndBounded(t *testing.T) {
	p := plan1(bucketRef)
	m := speculating(NewMemory(0))
	m.learn(bucketRef, 0, nil, 2, T, 0, nil)
	vouch(m, bucketRef, T)
	c := NewCharge(m, p, picks(1), Options{})
	step := converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 1 speculative", gone},
		{"get [0] discover", Result{}},
	})
	if !step.Call.BatchGet.ConsistentRead {
		t.Fatal("shard 0 is read eventually consistent before making shard 1")
	}
	// An answer without the item is shard 0 missing: start again at one
	// shard, at shard 0.
	if s := c.Feed(Result{}, T); describe(s) != "update 0 speculative" || m.Count(bucketRef) != 1 {
		t.Fatalf("after an empty read of shard 0: %q, count %d", describe(s), m.Count(bucketRef))
	}

	var shards []int
	for s := 0; s < 150; s++ {
		shards = append(shards, s)
	}
	c = NewCharge(speculating(NewMemory(0)), p, picks(), Options{})
	step = converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", gone},
		{"query discover", listed(bucketRef, shards...)},
		{"get [" + shardList(1, 100) + "] discover", Result{}},
	})
	if !step.Call.BatchGet.ConsistentRead {
		t.Fatal("the siblings are read eventually consistent")
	}
}

func shardList(from, to int) string {
	s := ""
	for i := from; i <= to; i++ {
		if i > from {
			s += " "
		}
		s += itoa(i)
	}
	return s
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// Shard 0 made again beside siblings takes the largest count they were
// written at; a shard made beside shard 0 takes shard 0's count. The
// create's Put charges the shard's write unit once: the failed write
// before it found no item, which DynamoDB bills, but to no item.
func TestShardsAreMadeAtTheCountTheirSiblingsShow(t *testing.T) {
	p := plan1(bucketRef)
	c := NewCharge(speculating(NewMemory(0)), p, picks(), Options{})
	step := converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", gone},
		{"query discover", listed(bucketRef, 1, 3)},
		{"get [1 3] discover", found(shape{shard: 1, n: 4, rf: T}.item(p), shape{shard: 3, n: 2, rf: T}.item(p))},
		{"put 0 create", Result{}},
	})
	put := step.Call.Put.Item
	if n, _ := put.Int(keys.AttrShardCount); n != 4 {
		t.Fatalf("shard 0 made at %d shards, want 4 (the largest its siblings show)", n)
	}
	if w, _ := put.Int("b_wcu_tc"); w != unit {
		t.Fatalf("the Put charges %d write units, want one", w)
	}
	if tk, _ := put.Int("b_rps_tk"); tk != 10_000/4-1000 {
		t.Fatalf("shard 0 made holding %d, want its share of the burst less the charge", tk)
	}
	step = c.Feed(Result{}, T)
	if !step.Done || c.N != 4 || c.m.Count(bucketRef) != 4 {
		t.Fatalf("after the Put: %s at %d shards (memory %d), want done at 4", describe(step), c.N, c.m.Count(bucketRef))
	}

	// Shard 0 shows a count that includes shard 1: shard 1 is made empty,
	// charging nothing, and the request goes on at shard 0.
	m := speculating(NewMemory(0))
	m.learn(bucketRef, 0, nil, 2, T, 0, nil)
	vouch(m, bucketRef, T)
	c = NewCharge(m, p, picks(1), Options{})
	step = converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 1 speculative", gone},
		{"get [0] discover", found(shape{n: 4, rf: T}.item(p))},
		{"put 1 create", Result{}},
		{"update 0 speculative", Result{}},
	})
	if c.n != 4 || m.Count(bucketRef) != 4 {
		t.Fatalf("count %d (memory %d) after shard 0 showed 4", c.n, m.Count(bucketRef))
	}
	if v := m.View(bucketRef, 1); v.Pending != nil {
		t.Fatalf("the new shard 1 is charged %v in flight: it charges nothing", v.Pending)
	}
}

// A transaction that holds the item refuses the write without applying
// it: the same write goes again, counted in flight again, up to
// maxSlowAttempts times; then the conflict is the answer.
func TestTransactionConflictsAreRetriedBoundedly(t *testing.T) {
	p := plan1(bucketRef)
	m := speculating(NewMemory(0))
	c := NewCharge(m, p, picks(), Options{})
	conflict := erred(store.ErrTransactionConflict)
	step := c.Start(T)
	for i := 0; i < maxSlowAttempts; i++ {
		step = c.Feed(conflict, T)
		if describe(step) != "update 0 speculative" {
			t.Fatalf("conflict %d: %q, want the same write again", i+1, describe(step))
		}
		if v := m.View(bucketRef, 0); v.Pending["rps"] != 1000 {
			t.Fatalf("conflict %d: in flight %v, want the charge once", i+1, v.Pending)
		}
	}
	step = c.Feed(conflict, T)
	if !errors.Is(step.Err, store.ErrTransactionConflict) {
		t.Fatalf("after %d conflicts: %q (%v), want the conflict", maxSlowAttempts+1, describe(step), step.Err)
	}
	if v := m.View(bucketRef, 0); v.Pending != nil {
		t.Fatalf("in flight after the answer: %v", v.Pending)
	}
}

// A machine dropped with its write unsent (a cascade answered without
// it) forgets the write in flight, once, and leaves its failed writes to
// the next write to the shard.
func TestDropForgetsTheWriteAndLeavesTheBill(t *testing.T) {
	p := plan1(bucketRef)
	m := speculating(NewMemory(0))
	measured(m, bucketRef, 0, 0.5, 0.1, T, nil)
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", failed(shape{rf: T - 200, tk: map[string]int64{"rps": 500}, ahead: drifted}.item(p))},
		{"update 0 normal", Result{}},
	})
	c.Drop(T)
	c.Drop(T)
	if v := m.View(bucketRef, 0); v.Pending != nil || v.Others != 0.1 {
		t.Fatalf("after Drop: in flight %v, others %v; want nothing, 0.1", v.Pending, v.Others)
	}
	// Another write in flight counts every writer as another: Drop did
	// not take this one's count with it.
	_, si := m.viewOf(bucketRef, 0)
	m.reserve(si, p, 1)
	if v := m.View(bucketRef, 0); v.Others != v.Rate {
		t.Fatalf("a write in flight after two Drops: others %v, rate %v", v.Others, v.Rate)
	}
	if got := m.carry(bucketRef, 0, 0, true, T); got != 1 {
		t.Fatalf("the next write to the shard bills %d failed writes, want the dropped acquire's one", got)
	}
	var none *Charge
	none.Drop(T) // a nil machine: nothing to drop
}

// An acquire that moves to another shard leaves the failed writes of the
// one it leaves to that shard's next write.
func TestMovingOnLeavesTheBillToTheShard(t *testing.T) {
	p := plan1(bucketRef)
	m := speculating(NewMemory(0))
	m.learn(bucketRef, 0, nil, 2, T, 0, nil)
	vouch(m, bucketRef, T)
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", failed(shape{n: 2, rf: T, tk: rpsShort}.item(p))},
		{"update 1 speculative", Result{}},
	})
	if got := m.carry(bucketRef, 0, 0, true, T); got != 1 {
		t.Fatalf("shard 0's next write bills %d failed writes, want 1", got)
	}
}

// Each shard count learned restarts the shard choice, but an acquire
// makes at most maxShardChoices of them: a bucket doubling under it again
// and again refuses it rather than chasing the count.
func TestShardChoicesAreBounded(t *testing.T) {
	p := plan1(bucketRef)
	c := NewCharge(NewMemory(0), p, picks(), Options{})
	step := c.Start(T)
	calls := 0
	for ; step.Call != nil && calls < 2*maxShardChoices; calls++ {
		b, _ := keys.ParseBucketPK(step.Call.Update.Key.PK)
		step = c.Feed(failed(shape{shard: b.Shard, n: int64(2) << calls, rf: T}.item(p)), T)
	}
	if calls != maxShardChoices || describe(step) != "refused reject" {
		t.Fatalf("%d writes, then %q; want %d, then a refusal", calls, describe(step), maxShardChoices)
	}
}

// Refused locally on every shard it knows to be short, an acquire stops
// after exhaustedShards of them, or all of them when there are fewer: no
// store call.
func TestLocalRefusalsStopAfterExhaustedShards(t *testing.T) {
	p := plan1(bucketRef)
	for _, c := range []struct {
		n    int64
		want string
	}{{2, "refused local"}, {4, "refused local"}} {
		m := NewMemory(0)
		for s := 0; s < 3; s++ {
			knows(t, m, bucketRef, shape{shard: s, n: c.n, rf: T, tk: rpsShort}.item(p), c.n, T)
		}
		ch := NewCharge(m, p, picks(), Options{})
		if got := describe(ch.Start(T)); got != c.want || len(ch.tried) != int(min(c.n, exhaustedShards)) {
			t.Errorf("%d shards: %q after %d shards, want %q after %d", c.n, got, len(ch.tried), c.want, min(c.n, exhaustedShards))
		}
	}
}

// After a throttle an acquire tries another shard (another partition)
// while fewer than exhaustedShards and fewer than all were tried; after a
// refusal, likewise; then the refusal is the answer, and after throttles
// on recountThrottles shards or more, shard 0's count is read (then the
// throttle is the answer, see TestStoryThrottledEverywhereReadsTheCount).
func TestSpreadAndExhaustedStopAtTheirBounds(t *testing.T) {
	p := plan1(bucketRef)
	for _, c := range []struct {
		n     int64
		feed  Result
		tries int
		want  string
	}{
		{2, throttle, 2, "get [0] discover"},
		{4, throttle, 3, "get [0] discover"},
		{2, failed(shape{n: 2, rf: T, tk: rpsShort}.item(p)), 2, "refused reject"},
		{4, failed(shape{n: 4, rf: T, tk: rpsShort}.item(p)), 3, "refused reject"},
	} {
		m := NewMemory(0)
		m.learn(bucketRef, 0, nil, c.n, T, 0, nil)
		vouch(m, bucketRef, T)
		ch := NewCharge(m, p, picks(), Options{})
		step := ch.Start(T)
		for i := 0; i < c.tries; i++ {
			if step.Call == nil {
				t.Fatalf("%d shards: %q after %d tries, want %d", c.n, describe(step), i, c.tries)
			}
			step = ch.Feed(c.feed, T)
		}
		if got := describe(step); got != c.want {
			t.Errorf("%d shards, after %d tries: %q, want %q", c.n, c.tries, got, c.want)
		}
	}
}

// A refusal whose item shows a larger count than the acquire used sends
// it to the new shards, which may have tokens.
func TestARefusalThatShowsADoublingChoosesAgain(t *testing.T) {
	p := plan1(bucketRef)
	m := speculating(NewMemory(0))
	m.learn(bucketRef, 0, nil, 2, T, 0, nil)
	vouch(m, bucketRef, T)
	ch := NewCharge(m, p, picks(1), Options{})
	converse(t, ch.Start(T), ch.Feed, T, []exchange{
		{"update 1 speculative", failed(shape{shard: 1, n: 2, rf: T, tk: rpsShort}.item(p))},
		{"update 0 speculative", failed(shape{n: 4, rf: T, tk: rpsShort}.item(p))},
		{"update 2 speculative", Result{}},
	})
	if ch.n != 4 {
		t.Fatalf("count %d, want 4", ch.n)
	}
}

// What a successful write teaches: shard 0's image the count in force; an
// image of another shard only a larger count than the acquire used.
func TestChargedLearnsTheCount(t *testing.T) {
	p := plan1(bucketRef)
	for _, c := range []struct {
		name   string
		shard  int
		counts int64 // the image's count
		want   int64
	}{
		{"shard 0 at fewer shards", 0, 1, 1},
		{"shard 1 at more shards", 1, 4, 4},
		{"shard 1 at fewer shards", 1, 1, 2},
	} {
		m := NewMemory(0)
		m.learn(bucketRef, 0, nil, 2, T, 0, nil)
		vouch(m, bucketRef, T)
		ch := NewCharge(m, p, picks(c.shard), Options{})
		step := ch.Start(T)
		step = ch.Feed(wrote(shape{shard: c.shard, n: c.counts, rf: T}.item(p)), T)
		if !step.Done || ch.N != c.want || m.Count(bucketRef) != c.want {
			t.Errorf("%s: %q, count %d (memory %d), want done at %d", c.name, describe(step), ch.N, m.Count(bucketRef), c.want)
		}
	}
}

// rfOfFull makes the full write step on item and returns the rf it sets:
// now, or later by the cushion.
func rfOfFull(t *testing.T, item store.Item, s Step) int64 {
	t.Helper()
	st := sim(t, item)
	if r := exec(t, st, s); r.Err != nil {
		t.Fatalf("the full write failed: %v", r.Err)
	}
	return attr(t, st, bucketRef, 0, "rf")
}

// A full write after a lost race takes the cushion: the writers that lost
// with it then charge consume-only. A race is lost by a failed blind full
// or normal write, by any write after the first, by a create another
// creator won, or by a speculative write on a shard others wrote since
// the image (half a write or more), or, for a process without estimates,
// whose item shows another writer's refill within recentRefill ms; a
// speculative write that merely found the bucket full lost nothing.
func TestTheCushionFollowsALostRace(t *testing.T) {
	p := plan1(bucketRef)
	fullItem := shape{rf: T - 5000, tk: map[string]int64{"rps": 5000}}.item(p)
	refilledAt := func(rf int64) store.Item { return shape{rf: rf}.item(p) } // full since rf
	for _, c := range []struct {
		name    string
		knows   func(m *Memory)
		turns   []exchange
		cushion bool
	}{
		{"a blind full write lost", func(m *Memory) { knows(t, m, bucketRef, fullItem, 1, T-5000) },
			[]exchange{{"update 0 full", failed(fullItem)}, {"update 0 full", Result{}}}, true},
		{"a blind normal write lost", func(m *Memory) {
			knows(t, m, bucketRef, shape{rf: T - 200, tk: map[string]int64{"rps": 500}, ahead: drifted}.item(p), 1, T-200)
		}, []exchange{{"update 0 normal", failed(fullItem)}, {"update 0 full", Result{}}}, true},
		{"a create lost", nil,
			[]exchange{{"update 0 speculative", gone}, {"query discover", Result{}}, {"put 0 create", failed(fullItem)}, {"update 0 full", Result{}}}, true},
		{"half a write by others since the image", func(m *Memory) {
			knows(t, m, bucketRef, shape{rf: T - 10, tk: map[string]int64{"rps": 9000}}.item(p), 1, T-10)
			measured(m, bucketRef, 0, 0.05, 0.05, T-10, nil)
		}, []exchange{{"update 0 speculative", failed(fullItem)}, {"update 0 full", Result{}}}, true},
		{"under half a write since", func(m *Memory) {
			knows(t, m, bucketRef, shape{rf: T - 10, tk: map[string]int64{"rps": 9000}}.item(p), 1, T-10)
			measured(m, bucketRef, 0, 0.049, 0.049, T-10, nil)
		}, []exchange{{"update 0 speculative", failed(fullItem)}, {"update 0 full", Result{}}}, false},
		{"no image, a refill moments ago", nil,
			[]exchange{{"update 0 speculative", failed(refilledAt(T - recentRefill + 1))}, {"update 0 full", Result{}}}, true},
		{"no image, a refill a while ago", nil,
			[]exchange{{"update 0 speculative", failed(refilledAt(T - recentRefill))}, {"update 0 full", Result{}}}, false},
	} {
		m := speculating(NewMemory(0))
		if c.knows != nil {
			c.knows(m)
		}
		ch := NewCharge(m, p, picks(), Options{})
		last := converse(t, ch.Start(T), ch.Feed, T, c.turns)
		if rf := rfOfFull(t, fullItem, last); (rf > T) != c.cushion {
			t.Errorf("%s: the full write dates rf T%+d; want a cushion %v", c.name, rf-T, c.cushion)
		}
	}
}

// A race lost whose item still has the tokens: when this process's other
// writes in flight (and the others' drain while the answer travelled)
// take them before a write could land, the acquire is refused there, as
// a local refusal would be, and the refusal names the limit. At the
// limit (the others take nearly all of the refill), it is refused after
// outrunRaces lost races, not before.
func TestOutrunRefusals(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 1})
	// The item a lost race returns: 2.4 tokens at T, below its burst.
	item := shape{rf: T - 40, tk: map[string]int64{"rps": 2000}}.item(p)
	lost := failed(item)
	lost.Sent = T - 40 // an answer 40 ms in the making
	m := speculating(NewMemory(0))
	measured(m, bucketRef, 0, 0.2, 0.1, T-40, map[string]float64{"rps": 1})
	_, si := m.viewOf(bucketRef, 0)
	m.reserve(si, NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 2}), 1) // 2 tokens in flight
	c := NewCharge(m, p, picks(), Options{})
	last := converse(t, c.Start(T), c.Feed, T, []exchange{{"update 0 speculative", lost}, {"refused reject", Result{}}})
	if !last.Refused.Outrun {
		t.Fatal("the refusal is not marked as outrun")
	}
	if v := last.Refused.Views()[0]; !v.Exceeded {
		t.Fatalf("the outrun refusal names no exceeded limit: %+v", v)
	}

	// No writes in flight, the others draining 95 % of the refill: two
	// lost races, then the refusal.
	m = speculating(NewMemory(0))
	measured(m, bucketRef, 0, 0.2, 0.1, T, map[string]float64{"rps": 9.5})
	c = NewCharge(m, p, picks(), Options{})
	plenty := failed(shape{rf: T, tk: map[string]int64{"rps": 5000}}.item(p))
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", plenty},
		{"update 0 retry", plenty},
		{"refused reject", Result{}},
	})
}

// The doubling's bounds: a bucket at 128 shards doubles to 256
// (keys.MaxShards), one at 256 does not; a doubling that cannot happen
// drops one pending.
func TestDoublingStopsAtMaxShards(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 1_000_000)}, map[string]int64{"rps": 1})
	hot := func(n int64) (*Memory, store.Item) {
		m := speculating(NewMemory(0))
		it := shape{n: n, rf: T, tk: map[string]int64{"wcu": 0}}.item(p)
		knows(t, m, bucketRef, it, n, T-10)
		measured(m, bucketRef, 0, 1, 0.9, T, nil)
		return m, it
	}
	m, it := hot(128)
	c := NewCharge(m, p, picks(), Options{})
	// Its image shows the gauge spent on a shard measured at its ceiling:
	// the doubling comes first, no write fails for it.
	last := converse(t, c.Start(T), c.Feed, T, []exchange{{"update 0 double", Result{}}})
	if got := last.Call.Update.Key; got != bucketRef.Key() {
		t.Fatalf("the doubling writes %v, want shard 0", got)
	}
	m, it = hot(keys.MaxShards)
	m.setPendingDoubling(bucketRef, keys.MaxShards, T)
	c = NewCharge(m, p, picks(), Options{})
	// It cannot double: the heat spreads the acquire to another shard.
	converse(t, c.Start(T), c.Feed, T, []exchange{{"update 0 speculative", failed(it)}, {"update 1 speculative", Result{}}})
	if m.pendingDoubling(bucketRef, T) != 0 {
		t.Fatal("a doubling past MaxShards stays pending")
	}
}

// A doubling that lands sets the count to twice the one it doubled from,
// in the machine and in the memory, and the acquire chooses among the new
// shards. One that lost to another client's learns the count in force; one
// that found shard 0 missing, or without a count, is no longer pressed
// (the acquire goes on at the count it has; its write to shard 0 makes
// it again).
func TestDoublingOutcomes(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 4000)}, map[string]int64{"rps": 1}) // 1,000 a second a shard at 4: may heat one
	hot := func() *Memory {
		m := speculating(NewMemory(0))
		knows(t, m, bucketRef, shape{n: 2, rf: T - 10}.item(p), 2, T-10)
		measured(m, bucketRef, 0, 1, 0.9, T, nil)
		return m
	}
	spent := failed(shape{n: 2, rf: T, tk: map[string]int64{"wcu": 0}}.item(p))

	m := hot()
	c := NewCharge(m, p, picks(0, 3), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", spent},
		{"update 0 double", wrote(shape{n: 4, rf: T, tk: map[string]int64{"wcu": 0}}.item(p))},
		{"update 3 speculative", Result{}},
	})
	if c.n != 4 || m.Count(bucketRef) != 4 {
		t.Fatalf("after doubling from 2: count %d, memory %d; want 4", c.n, m.Count(bucketRef))
	}

	m = hot()
	c = NewCharge(m, p, picks(0, 7), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", spent},
		{"update 0 double", failed(shape{n: 8, rf: T}.item(p))},
		{"update 7 speculative", Result{}},
	})
	if m.Count(bucketRef) != 8 {
		t.Fatalf("after losing the doubling to a count of 8: memory %d", m.Count(bucketRef))
	}

	noCount := shape{n: 2, rf: T}.item(p)
	delete(noCount, keys.AttrShardCount)
	for name, r := range map[string]Result{"shard 0 missing": gone, "shard 0 without a count": failed(noCount)} {
		m = hot()
		m.setPendingDoubling(bucketRef, 2, T)
		c = NewCharge(m, p, picks(), Options{})
		converse(t, c.Start(T), c.Feed, T, []exchange{{"update 0 double", r}, {"update 0 speculative", Result{}}})
		if m.pendingDoubling(bucketRef, T) != 0 {
			t.Errorf("%s: the doubling is still pressed", name)
		}
	}

	// A doubling pending from a count the memory no longer holds is not
	// pressed.
	m = speculating(NewMemory(0))
	m.setPendingDoubling(bucketRef, 2, T)
	c = NewCharge(m, p, picks(), Options{})
	if s := c.Start(T); describe(s) != "update 0 speculative" {
		t.Fatalf("at 1 shard with a doubling pending from 2: %q", describe(s))
	}
}

// The throttles that mark a partition hot are judged against all of this
// client's recent writes to it, the ones that went through or failed a
// condition included: a client whose writes mostly land does not double.
func TestSuccessfulWritesCountAgainstThrottles(t *testing.T) {
	p := plan1(bucketRef)
	ok := shape{rf: T, tk: map[string]int64{"rps": 5000}}.item(p)
	for _, c := range []struct {
		name     string
		acquires int // of two writes each, or one for "landed"
		turns    []exchange
	}{
		{"landed", 6, []exchange{{"update 0 speculative", wrote(ok)}, {"done speculative", Result{}}}},
		{"lost a race, then landed", 3, []exchange{{"update 0 speculative", failed(ok)}, {"update 0 retry", wrote(ok)}, {"done retry", Result{}}}},
		{"made the bucket", 3, []exchange{{"update 0 speculative", gone}, {"query discover", Result{}}, {"put 0 create", Result{}}, {"done create", Result{}}}},
	} {
		m := speculating(NewMemory(0))
		measured(m, bucketRef, 0, nearRate, 0.5, T, nil)
		throttled := func() string {
			ch := NewCharge(m, p, picks(), Options{})
			ch.Start(T)
			s := ch.Feed(throttle, T)
			if describe(s) == "get [0] discover" { // shard 0's count, on a shard measured busy: still one
				s = ch.Feed(found(ok), T)
			}
			return describe(s)
		}
		throttled() // opens the window
		for i := 0; i < c.acquires; i++ {
			ch := NewCharge(m, p, picks(), Options{})
			converse(t, ch.Start(T), ch.Feed, T, c.turns)
		}
		// 7 writes in the window by now: 4 more throttles make 5 of 11,
		// under half.
		for i := 0; i < 4; i++ {
			if got := throttled(); got != "err" {
				t.Errorf("%s: throttle %d of 5 answered %q, want the throttle (not hot)", c.name, i+2, got)
			}
		}
	}
}

// A write sent again after a conflict is in flight again: dropped then
// (a cascade answered without it), it leaves nothing in flight.
func TestADroppedResendLeavesNothingInFlight(t *testing.T) {
	m := NewMemory(0)
	c := NewCharge(m, plan1(bucketRef), picks(), Options{})
	c.Start(T)
	if s := c.Feed(erred(store.ErrTransactionConflict), T); s.Call == nil {
		t.Fatal("no resend after the conflict")
	}
	c.Drop(T)
	if v := m.View(bucketRef, 0); v.Pending != nil {
		t.Fatalf("in flight after the resend was dropped: %v", v.Pending)
	}
}

// An acquire that lost every race is refused with the tokens the others
// have likely taken since the last item's answer was sent (it is as of
// then, not of now).
func TestLostEveryRaceCountsTheDrainSinceTheAnswer(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	measured(m, bucketRef, 0, 0.5, 0.4, T, map[string]float64{"rps": 5})
	c := NewCharge(m, p, picks(), Options{})
	s := c.Start(T)
	lost := failed(shape{rf: T, tk: tokens(5000)}.item(p))
	lost.Sent = T - 20
	for s.Call != nil {
		s = c.Feed(lost, T)
	}
	if s.Refused == nil || !s.Refused.Raced {
		t.Fatalf("%q, want a refusal after lost races", describe(s))
	}
	if v := s.Refused.Views()[0]; v.Remaining != 5000-5*20 {
		t.Fatalf("remaining %d, want 5000 less the others' 5 a ms over the answer's 20 ms", v.Remaining)
	}
}

// A hot bucket whose limit could not serve a request from a quarter of
// its burst does not double past two shards: the acquire spreads to the
// other shard.
func TestNoDoublingPastWhatTheChargeNeeds(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 3)}, map[string]int64{"rps": 1}) // 1.5 tokens a shard at 2, 0.75 at 4
	m := speculating(NewMemory(0))
	it := shape{n: 2, rf: T, tk: map[string]int64{"rps": 1500, "wcu": 0}}.item(p)
	knows(t, m, bucketRef, it, 2, T-10)
	measured(m, bucketRef, 0, 1, 0.9, T, nil)
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{{"update 0 speculative", failed(it)}, {"update 1 speculative", Result{}}})
}

// A doubling that fails on the limits hash is made again once with the
// limits shard 0 shows; if that fails on the hash too (shard 0 rewritten
// meanwhile), the acquire goes on without doubling.
func TestTheDoublingIsMadeAgainOnlyOnce(t *testing.T) {
	p := planBusy(bucketRef)
	other := NewPlan(bucketRef, []Limit{perSecond("rps", 2000)}, map[string]int64{"rps": 1})
	m := NewMemory(0)
	hot := shape{rf: T, tk: map[string]int64{"wcu": 0}}
	knows(t, m, bucketRef, hot.item(p), 1, T-10)
	measured(m, bucketRef, 0, 1, 0.9, T, nil)
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 double", failed(hot.item(other))},
		{"update 0 double", failed(hot.item(p))},
		{"update 0 speculative", Result{}},
	})
}

// A missing shard whose number is not below the count shard 0 shows is
// not part of the bucket: it is not made; the acquire chooses again.
func TestAShardBeyondShardZerosCountIsNotMade(t *testing.T) {
	p := plan1(bucketRef)
	m := speculating(NewMemory(0))
	m.learn(bucketRef, 0, nil, 4, T, 0, nil)
	vouch(m, bucketRef, T)
	c := NewCharge(m, p, picks(2), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 2 speculative", gone},
		{"get [0] discover", found(shape{n: 2, rf: T}.item(p))},
		{"update 0 speculative", Result{}},
	})
}

// A hot shard right after a doubling this client learned of: the new
// shards need a moment to take the load, so the acquire spreads to
// another shard instead of doubling again; after exhaustedShards, or all
// of them, it goes on with its write on the last one (the gauge is no
// condition, and heat alone is no answer).
func TestAHotShardRightAfterADoublingSpreads(t *testing.T) {
	p := plan1(bucketRef)
	for _, c := range []struct {
		n     int64
		tries int
	}{{2, 2}, {4, 3}} {
		m := speculating(NewMemory(0))
		m.learn(bucketRef, 0, nil, 1, T-100, 0, nil)
		m.learn(bucketRef, 0, nil, c.n, T-50, 0, nil) // grew 50 ms ago
		for s := 0; s < int(c.n); s++ {
			measured(m, bucketRef, s, 1, 0.9, T, nil)
		}
		ch := NewCharge(m, p, picks(), Options{})
		step := ch.Start(T)
		for i := 0; i < c.tries; i++ {
			if step.Call == nil || step.Path != PathSpeculative {
				t.Fatalf("%d shards, try %d: %q, want a write to another shard", c.n, i+1, describe(step))
			}
			shard, _ := keys.ParseBucketPK(step.Call.Update.Key.PK)
			step = ch.Feed(failed(shape{shard: shard.Shard, n: c.n, rf: T, tk: map[string]int64{"wcu": 0}}.item(p)), T)
		}
		if step.Err != nil || step.Call == nil || step.Call.Update == nil {
			t.Fatalf("%d shards after %d hot shards: %q (%v), want a write on the last one", c.n, c.tries, describe(step), step.Err)
		}
	}
}

// The normal write of an item without an expiry (the path that builds
// the expression afresh) keeps the floors: a consumption that landed
// between the read and the write and took the tokens it counted on makes
// it fail.
func TestTheNormalWriteWithoutATemplateKeepsItsFloor(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 3})
	it := shape{rf: T - 100, tk: map[string]int64{"rps": 2000}}.item(p) // 2 stored, 1 refilled: 3
	delete(it, store.AttrTTL)
	im := image(t, it)
	st := sim(t, it)
	other, _ := plan1(bucketRef).WithAmounts(map[string]int64{"rps": 1500}).adjust(1, T) // another's charge lands first
	if err := apply(st, other); err != nil {
		t.Fatal(err)
	}
	ex, err := p.normal(im, 1, T, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := apply(st, ex); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("the normal write over a charge it did not see: %v, want a condition failure (it would end below 0)", err)
	}
}
