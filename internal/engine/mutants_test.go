package engine

// Tests written for mutants that lived (tools/mutate and gremlins over
// internal/engine, docs/testing.md's "Mutation testing"): each tells the
// story of the bug its mutant is.

import (
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// An adjust found its shard expired and tried to make it again, but another
// writer made it first: the Put failed, and the normal write on the other
// writer's item applied. The machine and the memory keep the item that
// write returned, not the one the lost Put would have made.
func TestAdjustAfterALostCreateKeepsTheWrittenItem(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	a := NewAdjust(m, p.WithAmounts(map[string]int64{"rps": 500}), 0, 1)
	converse(t, a.Start(T), a.Feed, T, []exchange{
		{"update 0 adjust", gone},
		{"put 0 create", failed(shape{rf: T, tk: map[string]int64{"rps": 9000}}.item(p))},
		{"update 0 normal", wrote(shape{rf: T, tk: map[string]int64{"rps": 8500}, tc: map[string]int64{"rps": 1500}}.item(p))},
		{"done none", Result{}},
	})
	if a.Img == nil {
		t.Fatal("no image after the normal write applied")
	}
	if st, _ := a.Img.comp.Get("rps"); st.Tokens != 8500 || a.Img != m.View(bucketRef, 0).Img {
		t.Fatalf("the machine keeps tk %d (the memory the same image: %v); want the normal write's 8500, not the lost Put's",
			st.Tokens, a.Img == m.View(bucketRef, 0).Img)
	}
}

// The acquire charged shard 1 when the bucket had 2 shards; it doubled to
// 4 since, and shard 1 was written at 4. The adjust's guarded ADD fails on
// the count, and its normal write goes on at 4: a correction must not undo
// a doubling (shard 1 back at 2 would refill at twice its share).
func TestAdjustOnAShardThatDoubledSinceKeepsTheNewCount(t *testing.T) {
	p := plan1(bucketRef)
	st := sim(t, shape{shard: 1, n: 4, rf: T - 5000}.item(p))
	a := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rps": 500}), 1, 2)
	play(t, st, a.Start(T), a.Feed, T, "update 1 adjust", "update 1 normal", "done none")
	if n := attr(t, st, bucketRef, 1, "shard_count"); n != 4 || a.N != 4 {
		t.Fatalf("shard 1 at %d shards, the machine says %d; want 4, the doubling kept", n, a.N)
	}
}

// The acquire charged shard 1 of a bucket of 4 shards; shard 1 itself was
// last written at 2 (a shard other than 0 learns of a doubling at its next
// write). The adjust's normal write moves shard 1 to the 4 the lease knows,
// not leave it at 2 refilling at twice its share.
func TestAdjustOnAShardBehindTheLeaseMovesItToTheLeaseCount(t *testing.T) {
	p := plan1(bucketRef)
	st := sim(t, shape{shard: 1, n: 2, rf: T - 5000}.item(p))
	a := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rps": 500}), 1, 4)
	play(t, st, a.Start(T), a.Feed, T, "update 1 adjust", "update 1 normal", "done none")
	if n := attr(t, st, bucketRef, 1, "shard_count"); n != 4 || a.N != 4 {
		t.Fatalf("shard 1 at %d shards, the machine says %d; want the lease's 4", n, a.N)
	}
}

// A write's conditions are collected in room the builder holds for eight:
// rendering a write of eight conditions costs what rendering them from a
// list made to measure costs, and the builder: nothing for growing the
// list one condition at a time.
func TestBuildOfEightConditionsDoesNotGrowTheList(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	terms := make([]term, 8)
	for i := range terms {
		terms[i] = term{condGe, "a", int64(i)}
	}
	measured := testing.AllocsPerRun(100, func() {
		conds := make([]store.Condition, 0, len(terms))
		for _, c := range terms {
			conds = append(conds, compare(c))
		}
		_, _ = store.Build(store.Update{}, store.And(conds...))
	})
	got := testing.AllocsPerRun(100, func() {
		_, _ = build(func(k *builder) {
			for _, c := range terms {
				k.cond(c.k, c.name, c.v)
			}
		})
	})
	if got > measured {
		t.Fatalf("build of eight conditions: %v allocations, want at most %v (the list made to measure)", got, measured)
	}
}

// A cascade refused with a wait of 0 ms (the image the refusal was judged
// from shows the tokens: the store refused on what others took since)
// still has both sides promise a millisecond ahead. A promise at now is
// kept at once: every writer that met the refusal would go to the store
// in the same millisecond, none judged from its estimates.
func TestCascadeRefusalOfNoWaitPromisesAMillisecondAhead(t *testing.T) {
	m := NewMemory(0)
	c := newCascade(m)
	c.Start(T)
	full := image(t, shape{rf: T}.item(child1))
	c.steps[0] = Step{Refused: &Refusal{Plan: child1, Img: full, N: 1, Now: T}}
	s := c.next(T)
	if s.Refused == nil {
		t.Fatalf("answer %q, want a refusal", describeCascade(s))
	}
	if w := retryOf(s.Refused); w != 0 {
		t.Fatalf("retry after %d ms, want a refusal of no wait", w)
	}
	if a, b := m.View(bucketRef, 0).Promise, m.View(parentRef, 0).Promise; a != T+1 || b != T+1 {
		t.Fatalf("promises T%+d and T%+d, want T+1 on both sides", a-T, b-T)
	}
}

// With local refusals off, a race lost whose item still has the tokens is
// raced again, also after outrunRaces lost races at the limit (the others
// draining 95 % of the refill; TestOutrunRefusals: refused there with
// local refusals on): the store decides.
func TestNoLocalRefusalsRacesOnAtTheLimit(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 1})
	m := speculating(NewMemory(0))
	measured(m, bucketRef, 0, 0.2, 0.1, T, map[string]float64{"rps": 9.5})
	c := NewCharge(m, p, picks(), Options{NoLocalRefusals: true})
	plenty := failed(shape{rf: T, tk: map[string]int64{"rps": 5000}}.item(p))
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", plenty},
		{"update 0 retry", plenty},
		{"update 0 retry", Result{}},
	})
}

// A process's first write to a bucket it has no image of (a cold write,
// speculative: its first writes to other buckets found them below their
// burst) failed on a full bucket: the plan's history
// records that it found the bucket full, so the next cold write to a
// bucket of the same plan is the full or the ride-ahead write, not another
// speculative charge bound to fail.
func TestAColdWriteThatFailedOnAFullBucketTeachesThePlan(t *testing.T) {
	p := plan1(bucketRef)
	m := speculating(NewMemory(0))
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", failed(shape{rf: T - 5000}.item(p))},
		{"update 0 full", Result{}},
	})
	if got := m.coldWrite(p, 1, false); got == PathNone {
		t.Fatalf("the next cold write of the plan: %v; want the full or the ride-ahead write", got)
	}
}

// A cold write failed on a full bucket and the write made after it landed
// taking most of the burst: the plan's history counts the first write
// once, as finding the bucket full (the landed write was no first write).
func TestAColdWriteMadeAgainCountsOnce(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 5})
	m := speculating(NewMemory(0))
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", failed(shape{rf: T - 5000}.item(p))},
		{"update 0 full", wrote(shape{rf: T, tk: map[string]int64{"rps": 5000}, tc: map[string]int64{"rps": 5000}}.item(p))},
		{"done full", Result{}},
	})
	if pr := m.plans[p.hash]; pr == nil || pr.full != 1 {
		t.Fatalf("the plan's history: %+v; want one first write, full", pr)
	}
}

// A client holds an image of the bucket, two seconds old and full when
// seen, and no estimate of the others' writes; the plan's history says
// its buckets are found full. The first write is the full write (a bucket
// seen full has likely sat full since), not the speculative charge, which
// a full bucket refuses.
func TestAWarmWriteWithoutARateFollowsThePlansHistory(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	full := true
	m.notePrior(p.hash, &full, -1)
	heard(t, m, bucketRef, shape{rf: T - 2000}.item(p), 1, T-2000)
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{{"update 0 full", Result{}}})
}

// A process's first write to a bucket it has no image of (speculative: its
// first writes to other buckets found them below their burst) lands and
// finds the bucket nearly full: the plan's history records it, so the next
// cold write of the plan is the full or the ride-ahead write.
func TestAColdWriteThatLandedOnAFullBucketTeachesThePlan(t *testing.T) {
	p := plan1(bucketRef)
	m := speculating(NewMemory(0))
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", wrote(shape{rf: T - 5000, tk: map[string]int64{"rps": 9500}, tc: map[string]int64{"rps": 500}}.item(p))},
		{"done speculative", Result{}},
	})
	if got := m.coldWrite(p, 1, false); got == PathNone {
		t.Fatalf("the next cold write of the plan: %v; want the full or the ride-ahead write", got)
	}
}

// A refusal with two limits exceeded waits for the slower: the cascade's
// answer (and the promise both sides keep) is the longest wait, whichever
// limit comes first in name order.
func TestARefusalWaitsForItsSlowestLimit(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("a", 10), perSecond("b", 100)}, map[string]int64{"a": 1, "b": 1})
	img := image(t, shape{rf: T, tk: map[string]int64{"a": 0, "b": 0}}.item(p))
	r := &Refusal{Plan: p, Img: img, N: 1, Now: T}
	longest := int64(0)
	for _, v := range r.Views() {
		longest = max(longest, v.RetryMs)
	}
	if w := retryOf(r); w != longest || w < 100 {
		t.Fatalf("retry after %d ms; want the slower limit's %d (a token at 10 a second)", w, longest)
	}
}

// An acquire charging a monthly quota on a bucket of 4 shards, made in the
// last milliseconds of December: the client has no item of shard 0 from
// this month, so it writes shard 0 first, which is out of tokens; then
// another shard, whose answer (out of tokens too) comes back in January.
// A January window may start on a shard other than 0 only from shard 0's
// January count, and shard 0 was tried: the acquire is refused. The
// refusal is that shard's, with its item and the wait of its rate, not an
// empty refusal that names no limit and no wait.
func TestAQuotaAcquireRefusedAcrossTheMonthKeepsTheStoresRefusal(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10, usdMonth}, map[string]int64{"rps": 1, "usd": 1})
	m := speculating(NewMemory(0))
	heard(t, m, bucketRef, shape{shard: 1, n: 4, rf: T - 5000}.item(p), 4, T-5000)
	c := NewCharge(m, p, picks(0), Options{})
	empty := map[string]int64{"rps": 0}
	if s := c.Start(T - 10); describe(s) != "update 0 speculative" {
		t.Fatalf("first step %q, want shard 0's write", describe(s))
	}
	s := c.Feed(failed(shape{n: 4, rf: T - 10, tk: empty}.item(p)), T-10)
	if s.Call == nil || s.Call.Update == nil {
		t.Fatalf("after shard 0's refusal: %q, want another shard's write", describe(s))
	}
	other, ok := keys.ParseBucketPK(s.Call.Update.Key.PK)
	if !ok || other.Shard == 0 {
		t.Fatalf("after shard 0's refusal: %q, want another shard's write", describe(s))
	}
	s = c.Feed(failed(shape{shard: other.Shard, n: 4, rf: T + 5, tk: empty}.item(p)), T+5)
	if s.Refused == nil {
		t.Fatalf("answer %q, want a refusal", describe(s))
	}
	if s.Refused.Img == nil || retryOf(s.Refused) <= 0 {
		t.Fatalf("refused with no item (%v) or no wait (%d ms); want shard %d's refusal", s.Refused.Img == nil, retryOf(s.Refused), other.Shard)
	}
}

// A refusal on the shard said a token would fit by T-5: since then the
// process refuses locally only for its own writes in flight. A request of
// 20 tokens on a bucket of a 10-token burst is refused by the store: no
// wait cures it, so it promises nothing, and the promise kept stands. The
// next one-token acquire, 60 ms later, goes to the store; a promise at the
// end of time would have it refused locally, on guesses of what the others
// take, for good.
func TestARefusalNoWaitCuresLeavesTheKeptPromise(t *testing.T) {
	big := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 20})
	m := NewMemory(0)
	knows(t, m, bucketRef, shape{rf: T - 100, tk: map[string]int64{"rps": 2000}}.item(big), 1, T-100)
	measured(m, bucketRef, 0, 0.2, 0.1, T-100, map[string]float64{"rps": 30})
	m.promised(bucketRef, 0, T-5, T-100, false)
	c := NewCharge(m, big, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", failed(shape{rf: T, tk: map[string]int64{"rps": 500}}.item(big))},
		{"refused reject", Result{}},
	})
	if got := describe(NewCharge(m, plan1(bucketRef), picks(), Options{}).Start(T + 60)); got != "update 0 speculative" {
		t.Fatalf("the next acquire: %q; want it written (the promise kept stands)", got)
	}
}

// A client remembers a bucket of 4 shards and writes shard 3, which is
// gone: the bucket expired and was made again, and shard 0 now says 2
// shards. Shard 3 is not the bucket's (it is not made); the acquire
// chooses again among the 2 shards shard 0 teaches: not among the 4 it
// remembered (shard 3 again), nor as if the bucket had one shard (every
// such client would crowd shard 0).
func TestAMissingShardBeyondShardZerosCountChoosesAtThatCount(t *testing.T) {
	p := plan1(bucketRef)
	m := speculating(NewMemory(0))
	heard(t, m, bucketRef, shape{n: 4, rf: T - 5000}.item(p), 4, T-5000)
	c := NewCharge(m, p, picks(3, 3), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 3 speculative", gone},
		{"get [0] discover", found(shape{n: 2, rf: T - 100}.item(p))},
		{"update 1 speculative", Result{}},
	})
	if n := m.Count(bucketRef); n != 2 {
		t.Fatalf("the memory's count: %d, want shard 0's 2", n)
	}
}

// The other writers of a shard handed back more than they took lately
// (their refunds and rollbacks outweigh their charges: the estimate of
// what they consume is negative). A refusal of a token on the empty shard
// still waits for the bucket's own refill of that token, 100 ms at 10 a
// second: a wait counted at the refill plus the others' refunds would
// promise the token before the bucket can hold it.
func TestARefusalNeverWaitsLessThanTheRefill(t *testing.T) {
	p := plan1(bucketRef)
	img := image(t, shape{rf: T, tk: map[string]int64{"rps": 0}}.item(p))
	v := ShardView{Img: img, At: T, RateAt: T, Rate: 0.2, Others: 0.1, Drain: map[string]float64{"rps": -5}}
	for _, local := range []bool{false, true} {
		r := &Refusal{Plan: p, Img: img, N: 1, Now: T, View: &v, Local: local}
		if w := retryMs(t, r); w < 100 {
			t.Fatalf("local %v: retry after %d ms; want at least the refill's 100", local, w)
		}
	}
}

// A status read of a bucket that doubled to 4 shards: shard 0 says 4,
// shard 1 was last written at 2 (a shard learns of a doubling at its next
// write) and holds the half burst it had then. Its balance counts at the
// bucket's count, capped at a quarter of the burst: counted at its stale
// 2, the status would show the bucket holding more than its shards can.
func TestStatusOfADoubledBucketCountsEveryShardAtItsCount(t *testing.T) {
	p := plan1(bucketRef)
	zero := image(t, shape{n: 4, rf: T - 10_000}.item(p))
	one := image(t, shape{shard: 1, n: 2, rf: T - 10_000}.item(p))
	sum, _, ok := p.Total("rps", []*Image{zero, one, nil, nil}, 4, T)
	if !ok || sum != 5000 {
		t.Fatalf("remaining %d millitokens; want 5000, two shards of a quarter of the 10-token burst each", sum)
	}
	// The time until the bucket is full is the longest of its shards':
	// shard 0, empty, a second; shard 1, nearly full, 200 ms.
	zero = image(t, shape{n: 4, rf: T, tk: map[string]int64{"rps": 0}}.item(p))
	one = image(t, shape{shard: 1, n: 4, rf: T, tk: map[string]int64{"rps": 2000}}.item(p))
	if _, reset, _ := p.Total("rps", []*Image{zero, one, nil, nil}, 4, T); reset != 1000 {
		t.Fatalf("full in %d ms; want shard 0's 1000", reset)
	}
}

// A process's first writes to the plan's buckets found them full, and it
// has measured no other writer on them yet: its cold write is the
// ride-ahead write, which lands whether or not others wrote moments ago.
// Then a write lands on a bucket where it measured the others' rate, and
// no one else writes there: the plan's history learns that rate, and its
// next cold write is the full write, not headroom burnt on writers that
// are not there.
func TestALandedWriteTeachesThePlanTheOthersRate(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	full := true
	m.notePrior(p.hash, &full, -1)
	if got := m.coldWrite(p, 1, false); got != PathRetry {
		t.Fatalf("the cold write before: %v, want the ride-ahead write", got)
	}
	knows(t, m, bucketRef, shape{rf: T - 100}.item(p), 1, T-100)
	measured(m, bucketRef, 0, 0.2, 0, T-1000, nil)
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 full", wrote(shape{rf: T, tk: map[string]int64{"rps": 9000}, tc: map[string]int64{"rps": 1000}}.item(p))},
		{"done full", Result{}},
	})
	if got := m.coldWrite(p, 1, false); got != PathFull {
		t.Fatalf("the cold write after: %v, want the full write (no one else writes)", got)
	}
}

// An acquire lost a race once (a failed conditional write: DynamoDB bills
// it a write unit) and its next write landed, charging that failure to the
// bucket's wcu gauge. Nothing is left over for the next write to the
// shard: charged again, the gauge would count a write that happened once
// twice, and the bucket would look hotter than it is.
func TestALandedWriteSettlesTheFailuresBeforeIt(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	knows(t, m, bucketRef, shape{rf: T - 100}.item(p), 1, T-100)
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 full", failed(shape{rf: T, tk: map[string]int64{"rps": 5000}}.item(p))},
		{"update 0 retry", wrote(shape{rf: T, tk: map[string]int64{"rps": 4000}, tc: map[string]int64{"rps": 1000}}.item(p))},
		{"done retry", Result{}},
	})
	if left, _, _ := m.enter(bucketRef, 0, T); left != 0 {
		t.Fatalf("%d failed writes left for the next write to charge; want none", left)
	}
}

// A client remembers a bucket of 4 shards and writes shard 3, which is
// gone, and so is shard 0: the whole bucket expired. The acquire starts
// the bucket again at shard 0 (whose write looks for siblings), not at the
// 4 shards it remembered (shard 3 again, a shard no count includes).
func TestAMissingShardOfAnExpiredBucketStartsAtShardZero(t *testing.T) {
	p := plan1(bucketRef)
	m := speculating(NewMemory(0))
	heard(t, m, bucketRef, shape{n: 4, rf: T - 5000}.item(p), 4, T-5000)
	c := NewCharge(m, p, picks(3, 3), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 3 speculative", gone},
		{"get [0] discover", found()},
		{"update 0 speculative", Result{}},
	})
}

// A client writes shard 0 of a bucket that is gone, and its query for the
// shard's siblings is throttled: the partition refuses requests. The
// throttle is the acquire's answer, and the memory counts it against the
// shard like a throttled write (throttles in a row make the partition hot,
// and the next acquires double or spread), not forgets it.
func TestAThrottledDiscoveryCountsAsAThrottle(t *testing.T) {
	p := plan1(bucketRef)
	m := speculating(NewMemory(0))
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", gone},
		{"query discover", throttle},
		{"err", Result{}},
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	if si := m.get(idOf(bucketRef)).shard(0); si == nil || si.throttle.count != 1 {
		t.Fatalf("the shard's throttle window: %+v; want the throttled read counted", si)
	}
}

// A status read of a monthly quota in January, on a bucket of 4 shards
// with a second quota beside it. Shard 0 holds a February window (its
// writer's clock is ahead): its share of it, a quarter, and the month until
// that window ends. Shard 1 was last written in December at 2 shards: a
// fresh January share at the bucket's 4, not at its stale 2. The bucket is
// full of quota when its slowest shard's window ends: 1 March. And with
// shard 0 not written yet, it counts shard 0's whole fresh share at the
// count asked (2), a half.
func TestStatusOfAQuotaSumsEveryShardsWindow(t *testing.T) {
	eur := Limit{Name: "eur", Limit: usdMonth.Limit, Calendar: usdMonth.Calendar}
	eur.Capacity, eur.Burst = 40_000, 40_000
	p := NewPlan(bucketRef, []Limit{rps10, usdMonth, eur}, map[string]int64{"rps": 1, "usd": 1, "eur": 1})
	now := T + 1000
	feb, mar := T+31*86_400_000, T+59*86_400_000
	zero := image(t, shape{n: 4, rf: feb + 500}.item(p))
	one := image(t, shape{shard: 1, n: 2, rf: T - 86_400_000}.item(p))
	if sum, reset, ok := p.Total("usd", []*Image{zero, one, nil, nil}, 4, now); !ok || sum != 50_000 || reset != mar-now {
		t.Fatalf("usd: %d left, full in %d ms; want 50000 (two quarters of 100 tokens), full on 1 March (%d ms)", sum, reset, mar-now)
	}
	two := image(t, shape{shard: 1, n: 4, rf: T - 86_400_000}.item(p))
	if sum, reset, ok := p.Total("usd", []*Image{nil, two}, 2, now); !ok || sum < 50_000 || reset != feb-now {
		t.Fatalf("usd, shard 0 not written: %d left, full in %d ms; want shard 0's 50000 at least, full on 1 February (%d ms)", sum, reset, feb-now)
	}
}

// The pools of the processes hold 12 tokens of a limit whose burst is
// now 10 (the limit was lowered since they reserved): the shard's balance
// reads 0, not a debt of 2 tokens that its callers would report as a
// negative remaining.
func TestAShardsHoldNeverTakesItPastItsBurst(t *testing.T) {
	p := plan1(bucketRef)
	img := holdItem(p, shape{rf: T - 10_000}, 1, T-100, map[string]int64{"rps": 12_000})
	if v := p.Views(img, 1, T, false, true)[0]; v.Remaining != 0 {
		t.Fatalf("remaining %d millitokens, want 0", v.Remaining)
	}
	// Releases that overshot (a hold given back twice) leave the stored
	// hold below 0: the shard still fills only to its burst.
	img = holdItem(p, shape{rf: T - 10_000}, 1, T-100, map[string]int64{"rps": -2000})
	if v := p.Views(img, 1, T, false, true)[0]; v.Remaining != 10_000 {
		t.Fatalf("a negative hold: remaining %d millitokens, want the burst's 10000", v.Remaining)
	}
}

// Mutants of internal/engine no test kills, and why:
//   - charge.go, charged's `c.cold = false` removed: equivalent. charged
//     ends the machine (Done); cold is read only while a write of the
//     machine is in flight (afterWrite, charged), and no write follows.
//   - charge.go, throttled's `max(w, 1)` dropping the 1: equivalent. The
//     refusal is Outrun and Raced on a saturated view: a limit whose tokens
//     suffice counts as none (views.go), so every exceeded limit waits the
//     ceiling of a positive shortfall over its accrual, at least 1 ms.
//   - charge.go, promise's `max(w, 1)` dropping the 1: equivalent. A
//     refusal promise sees (local, or a store's shortfall) exceeds a limit
//     by the measure that refused it in its views, and its wait is then
//     the ceiling of a positive shortfall, or a quota's window end: at
//     least 1 ms. (The cascade's refusal of no wait is the case that needs
//     the 1: TestCascadeRefusalOfNoWaitPromisesAMillisecondAhead.)
//   - charge.go, afterDouble's `c.m.setPendingDoubling(c.p.Ref, 0, now)`
//     after a doubling landed, removed: equivalent. The learn of the
//     doubled count just before clears any pending doubling (memory.go:
//     it is from a count the memory knew, at most c.n, below 2*c.n).
//   - cascade.go, undoStep's `c.undos = pending` removed: equivalent while
//     every undo's write builds (pending then holds the same undos, in
//     the same array); an undo's adjust of a plan that built the charge
//     does not fail to build (that branch is not covered).
//   - views.go, Refusal.Views' `v.RetryMs = -1` for a request above a
//     shard's burst, removed: equivalent. Plan.Views, whose views it
//     refines, already judged that request exceeded with RetryMs -1 (the
//     bucket's RetryAfter has no wait for it), on the same image and count.
//   - charge.go, createAt's `c.mine = q` removed: equivalent. The create
//     follows a write of this shard made with withBilled(b) whose failure
//     made billed b+1: the Put's withBilled(billed-1) charges the same
//     amounts, all that the memory reads of c.mine.
//   - charge.go, createAt's `if c.shard != 0` (no plan for a new shard
//     other than 0) deleted: equivalent. afterCreate of such a shard
//     learns it with no plan and chooses again; c.mine is read only by
//     charged and landed, after a later write set it.
//   - charge.go, afterDiscover's `c.n = 1` and afterSiblings' `c.n = n`
//     before createAt removed: equivalent. The Put is made at createAt's
//     argument, and charged sets c.n from shard 0's new item; between them
//     only afterCreate's noteWrite reads c.n, and a write window noted at
//     another count is started over by the next write at the new one.
//   - views.go, Plan.Total's quota part, `max(resetMs, end-now)` for a
//     shard 0 not written dropping resetMs: equivalent. Shard 0 is the
//     first image counted: resetMs is still 0 there.
//   - views.go, Plan.Total's quota part, `max(n, im.shardCount)`
//     dropping im.shardCount: equivalent. The count sizes only shard 0's
//     new window (quota.opening; other shards follow shard 0's sc), and
//     the status read, Total's one caller, asks at shard 0's own count.
//   - image.go, hold's `if !im.holds || s.hidden` return deleted:
//     equivalent. An item without a hold generation carries no hold
//     attributes, nor does the hidden limit: the read finds 0.
//   - image.go, state's `st.Limit.Burst = im.capOf(...)` removed:
//     equivalent. Its readers cap again at the cap of a count at least
//     the image's (projected, normalStep: min(x, cap at n) is the same
//     whether x was capped at the larger cap or the burst), and every path
//     reads an image at max(its count, the image's).
