package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// The ride-ahead guard: a speculative write that burns b of a limit is
// guarded by fl > now - K, K the floor of b's refill time (ms), and by the
// absence of hold generations; without burn, or not riding, by fl > now.
func TestRideAheadGuardArithmetic(t *testing.T) {
	p := plan1(bucketRef) // rps:10/s, a token refills in 100 ms
	now := T
	for _, c := range []struct {
		name string
		burn int64 // millitokens of rps
		ride bool
		want string
	}{
		{"no burn", 0, true, "(b_rps_fl > 1767225600000)"},
		{"a burn of 0.3 token: 30 ms", 300, true, "(b_rps_fl > 1767225599970)"},
		{"a burn of 0.305 token: the floor, 30 ms", 305, true, "(b_rps_fl > 1767225599970)"},
		{"a burn under a ms of refill: none", 9, true, "(b_rps_fl > 1767225600000)"},
		{"the same burn, not riding", 300, false, "(b_rps_fl > 1767225600000)"},
	} {
		var burn []int64
		if c.burn > 0 {
			burn = []int64{c.burn, 0}
		}
		ex, err := p.speculative(nil, 1, now, burn, c.ride)
		if err != nil {
			t.Fatal(err)
		}
		got := renderExpr(ex)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %s\nwant the guard %s", c.name, got, c.want)
		}
		if hg := strings.Contains(got, "(attribute_not_exists(hg)) AND"); hg != (c.ride && burn != nil) {
			t.Errorf("%s: hold generations excluded %v, want %v: %s", c.name, hg, c.ride && burn != nil, got)
		}
	}
	if k := rideSlack(rps10.Limit, 1000, true); k != 100 {
		t.Errorf("slack of a token of rps:10/s: %d ms, want 100", k)
	}
}

// The store judges the guard: a ride-ahead write lands on a bucket full
// for less than its slack, and fails on one full for longer; either way
// the stored balance never holds more than the ideal bucket.
func TestRideAheadLandsOnlyOnABucketFullForLessThanItsBurn(t *testing.T) {
	p := plan1(bucketRef)   // burst 10 tokens
	burn := []int64{300, 0} // 0.3 token: K = 30 ms
	for _, c := range []struct {
		name   string
		fullMs int64 // how long the bucket has been full at T
		lands  bool
	}{{"full for 29 ms", 29, true}, {"full for 30 ms", 30, false}, {"full for a second", 1000, false}} {
		rf := T - c.fullMs - 100 // 9 tokens at rf: full 100 ms later
		st := sim(t, shape{rf: rf, tk: map[string]int64{"rps": 9000}}.item(p))
		ex, err := p.speculative(nil, 1, T, burn, true)
		if err != nil {
			t.Fatal(err)
		}
		out, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex, Return: store.ReturnAllNew})
		if lands := err == nil; lands != c.lands {
			t.Fatalf("%s: landed %v (%v), want %v", c.name, lands, err, c.lands)
		}
		if err != nil {
			if !errors.Is(err, store.ErrConditionFailed) {
				t.Fatalf("%s: %v", c.name, err)
			}
			continue
		}
		// The truth after admitting one token is the burst less it; the
		// stored representation, refilled to T and uncapped, holds at most
		// that: the refill lost while full is paid by the burn.
		im := image(t, out.Attributes)
		s := &p.specs[0]
		got, _, _, _ := im.state(s)
		uncapped := got.Tokens + (T-im.rf)*s.perShard(1).RefillAmount/s.perShard(1).RefillPeriod
		if uncapped > 10_000-1000 {
			t.Fatalf("%s: %d millitokens at T after the write, more than the ideal bucket's 9000", c.name, uncapped)
		}
	}
}

// The first write on an image full by now, chosen by collision
// probability: paced traffic at a tenth of rps:100/s (others 9 writes a
// second, a token refills in 10 ms) takes the full write; random per-key
// traffic on rpm:600/min (others 1.8 writes a second, a token in 100 ms)
// the ride-ahead write, whose slack of 3 % of the burst (1.8 s) it
// outlasts far more often than the full write's 100 ms.
func TestTheFirstWriteIsChosenByCollisionProbability(t *testing.T) {
	for _, c := range []struct {
		name   string
		l      Limit
		others float64 // writes per ms
		want   Path
	}{
		{"paced, a tenth of rps:100/s, 10 processes", perSecond("rps", 100), 0.009, PathFull},
		{"random, rpm:600/min at a third, 10 processes", perMinute("rpm", 600), 0.0018, PathRetry},
		{"alone", perMinute("rpm", 600), 0, PathFull},
	} {
		p := NewPlan(bucketRef, []Limit{c.l}, map[string]int64{c.l.Name: 1})
		im := image(t, shape{rf: T - 60_000}.item(p))
		v := &ShardView{Img: im, At: T - 1000, Others: c.others, Rate: c.others, RateAt: T - 500}
		if got := p.first(v, 1, T); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// At the limit (the others consume nearly the whole refill) an item
	// full by now is likely stale: no burn; the full write only on an item
	// no other write likely followed.
	p0 := NewPlan(bucketRef, []Limit{perMinute("rpm", 600)}, map[string]int64{"rpm": 1})
	im := image(t, shape{rf: T - 60_000}.item(p0))
	drain := map[string]float64{"rpm": 9.5} // of 10 millitokens a ms
	for _, c := range []struct {
		at   int64
		want Path
	}{{T - 1000, PathNone}, {T - 1, PathFull}} {
		v := &ShardView{Img: im, At: c.at, Others: 0.0018, Rate: 0.0018, RateAt: T - 500, Drain: drain}
		if got := p0.first(v, 1, T); got != c.want {
			t.Errorf("at the limit, an item %d ms old: %v, want %v", T-c.at, got, c.want)
		}
	}
	// The ride-ahead burn is capped at 3 % of the shard's burst.
	p := NewPlan(bucketRef, []Limit{perMinute("rpm", 600)}, map[string]int64{"rpm": 1})
	if b := p.rideBurn(1, rideMax); b[0] != 18_000 {
		t.Errorf("the largest ride-ahead burn of rpm:600/min: %d millitokens, want 18,000 (3 %% of 600 tokens)", b[0])
	}
}

// The wcu gauge is counted, never a condition: the speculative write
// ADDs to it but lands on a shard whose gauge is spent.
func TestTheGaugeIsNoConditionOfTheHotWrite(t *testing.T) {
	p := plan1(bucketRef)
	ex, err := p.speculative(nil, 1, T, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	got := renderExpr(ex)
	if !strings.Contains(got, "b_wcu_tk -1000") || strings.Contains(got, "b_wcu_tk >=") {
		t.Fatalf("%s: want the gauge counted, not a condition", got)
	}
	st := sim(t, shape{rf: T - 10, tk: map[string]int64{"rps": 5000, "wcu": -50_000}}.item(p))
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err != nil {
		t.Fatalf("a write on a spent gauge: %v, want it to land", err)
	}
}

// A process's first write to a bucket it has no image of follows what its
// first writes to buckets of the same plan found: with no history the full
// write (a bucket is most often used below its limit, and full); after
// full buckets, the full write while the others write seldom, the
// ride-ahead write when they write often; after buckets at their limit,
// the speculative charge.
func TestTheColdWriteFollowsThePlansHistory(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perMinute("rpm", 600)}, map[string]int64{"rpm": 1})
	m := NewMemory(0)
	if got := m.coldWrite(p, 1, false); got != PathFull {
		t.Fatalf("no history: %v, want the full write", got)
	}
	full, notFull := true, false
	m.notePrior(p.hash, &full, -1)
	if got := m.coldWrite(p, 1, false); got != PathRetry {
		t.Fatalf("a full bucket, no rate: %v, want the ride-ahead write", got)
	}
	if got := m.coldWrite(p, 1, true); got != PathFull {
		t.Fatalf("a full bucket, no rate, an item of it: %v, want full", got)
	}
	m.notePrior(p.hash, nil, 0)
	if got := m.coldWrite(p, 1, false); got != PathFull {
		t.Fatalf("full buckets, no one else writes: %v, want full", got)
	}
	for range 16 {
		m.notePrior(p.hash, nil, 0.0018)
	}
	if got := m.coldWrite(p, 1, false); got != PathRetry {
		t.Fatalf("full buckets, others at 1.8 a second: %v, want the ride-ahead write", got)
	}
	m.notePrior(p.hash, nil, 0)
	if got := m.coldWrite(p, 1, false); got != PathRetry {
		t.Fatalf("others at 1.8 a second on most buckets, none on the last: %v, want the ride-ahead write still", got)
	}
	for range 8 {
		m.notePrior(p.hash, &notFull, -1)
	}
	if got := m.coldWrite(p, 1, false); got != PathNone {
		t.Fatalf("buckets at their limit since: %v, want none", got)
	}
	other := NewPlan(bucketRef, []Limit{perMinute("rpm", 60)}, map[string]int64{"rpm": 1})
	if got := m.coldWrite(other, 1, false); got != PathNone {
		t.Fatalf("a plan with no history, in a process whose buckets were at their limit: %v, want none", got)
	}
	ex, path, err := p.blind(&ShardView{}, 1, T, 0.5, PathRetry, false)
	if err != nil || path != PathSpeculative || !strings.Contains(renderExpr(ex), "(b_rpm_fl > 1767225598200)") {
		t.Fatalf("the cold ride-ahead write: %v %v %s, want fl > now - 1.8 s", path, err, renderExpr(ex))
	}
}

// A new shard starts empty, and its emptiness is no refusal: an acquire
// that spread from a hot shard 0 to shard 1, which it then had to create,
// goes back to shard 0 (it has the tokens) instead of being refused with
// every shard tried.
func TestAYoungShardDoesNotRefuseWhileAnOlderHasTokens(t *testing.T) {
	p := planBusy(bucketRef)
	m := speculating(NewMemory(0))
	m.learn(bucketRef, 0, nil, 1, T-100, 0, nil)
	m.learn(bucketRef, 0, nil, 2, T-50, 0, nil) // grew 50 ms ago: no doubling again
	hot := shape{n: 2, rf: T, tk: map[string]int64{"rps": 4000, "wcu": 0}}.item(p)
	measured(m, bucketRef, 0, 1, 0.9, T, nil)
	c := NewCharge(m, p, picks(0, 0, 0), Options{})
	last := converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 speculative", failed(hot)},
		{"update 1 speculative", gone},
		{"get [0] discover", found(hot)},
		{"put 1 create", Result{}},
		{"update 0 speculative", Result{}},
	})
	if last.Refused != nil || last.Err != nil {
		t.Fatalf("refused %v, err %v: want the write on shard 0", last.Refused, last.Err)
	}
}

// An estimate that no one else wrote says so only while it is fresh: a
// process that measured a bucket alone 2 s ago, and sees it full by now,
// chooses its first write as for a bucket it has no estimate of (what its
// plan's first writes found), since others may have started writing; an
// estimate that others write keeps saying so.
func TestAnOldEstimateOfNoOthersSaysNothing(t *testing.T) {
	v := ShardView{RateAt: T - 2000, Rate: 0.001}
	if v.knowsOthers(T) {
		t.Fatal("an estimate of no others 2 s old: want it to say nothing")
	}
	if !v.knowsOthers(T - 1700) {
		t.Fatal("an estimate of no others 300 ms old: want it believed")
	}
	v.Others = 0.0009
	if !v.knowsOthers(T) {
		t.Fatal("an estimate of others writing, 2 s old: want it believed")
	}
}

// A process with no history of first writes makes the full write on a
// bucket it knows nothing of, but not on a shard other than 0 of a
// bucket it knows doubled: such a shard starts empty (a doubling adds no
// tokens) and is likely still filling. (With the full write there, the
// processes that spread to the new shards after a doubling failed their
// first write on each, and the busy bucket doubled once more than its
// load needed.)
func TestTheColdWriteOnANewShardIsTheSpeculativeOne(t *testing.T) {
	p := planBusy(bucketRef)
	m := NewMemory(0)
	c := NewCharge(m, p, picks(0), Options{})
	if s := c.Start(T); describe(s) != "update 0 full" {
		t.Fatalf("shard 0, no history: %q, want the full write", describe(s))
	}
	m = NewMemory(0)
	m.learn(bucketRef, 0, nil, 2, T-100, 0, nil)
	vouch(m, bucketRef, T-100)
	c = NewCharge(m, p, picks(1), Options{})
	if s := c.Start(T); describe(s) != "update 1 speculative" {
		t.Fatalf("shard 1 of 2, no history: %q, want the speculative write", describe(s))
	}
}
