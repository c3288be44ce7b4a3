package engine

import (
	"context"
	"strings"

	"github.com/shardlimit/limiter/store/memsim"
	"maps"
	"slices"
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
)

// usdMonth is a quota of 100 tokens a calendar month (UTC).
var usdMonth = Limit{Name: "usd", Limit: bucket.Limit{Capacity: 100_000, Burst: 100_000}, Calendar: bucket.Calendar{Window: bucket.Month}}

// Every write an acquire can make carries the quota's part: a path that
// left it out would admit a request the quota cannot pay, or charge the
// rates and not the quota. A new path must be added here.
func TestEveryAcquireWriteCarriesTheQuota(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10, usdMonth}, map[string]int64{"rps": 1, "usd": 5})
	full := image(t, shape{rf: T - 10_000}.item(p))
	held := holdItem(p, shape{rf: T - 10_000}, 1, T-100, map[string]int64{"rps": 1000})
	other := image(t, shape{rf: T - 10_000}.item(NewPlan(bucketRef, []Limit{rps10}, nil)))
	names := func(ex store.Expr, err error) []string {
		if err != nil {
			t.Fatal(err)
		}
		return slices.Collect(maps.Values(ex.Names))
	}
	for what, got := range map[string][]string{
		"speculative":           names(p.speculative(full, 1, T, nil, false)),
		"speculative, no image": names(p.speculative(nil, 1, T, nil, false)),
		"full":                  names(p.full(full, 1, T, 0)),
		"full on held":          names(p.fullHeld(held, 1, T, 0)),
		"normal":                names(p.normal(full, 1, T, true, nil)),
		"normal, new limits":    names(p.normal(other, 1, T, true, nil)),
	} {
		if !slices.Contains(got, "q_usd_tk") || !slices.Contains(got, "q_usd_ws") {
			t.Errorf("%s: the write names %v, not the quota's q_usd_tk and q_usd_ws", what, got)
		}
	}
	if it := p.create(0, 1, T).Item; it["q_usd_tk"] != store.Int(95_000) {
		t.Errorf("create: q_usd_tk = %v, want 95000 (the quota less the charge)", it["q_usd_tk"])
	}
	if it := p.create(1, 2, T).Item; it["q_usd_tk"] != store.Int(0) {
		t.Errorf("create of shard 1: q_usd_tk = %v, want 0 (a doubling's shard starts its window empty)", it["q_usd_tk"])
	}
}

// A quota removed from the configuration is removed from the item by the
// normal write, and the same way on every run (the expression does not
// depend on map order).
func TestNormalWriteRemovesAQuotaTheSameWayEveryTime(t *testing.T) {
	withQuotas := NewPlan(bucketRef, []Limit{rps10, usdMonth, {Name: "eur", Limit: usdMonth.Limit, Calendar: usdMonth.Calendar}}, nil)
	im := image(t, shape{rf: T - 10_000}.item(withQuotas))
	p := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 1})
	first, err := p.normal(im, 1, T, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if again, _ := p.normal(im, 1, T, true, nil); !again.Equal(first) {
			t.Fatalf("the same normal write differs between two builds:\n%s\n%s", first.Update, again.Update)
		}
	}
	if names := slices.Collect(maps.Values(first.Names)); !slices.Contains(names, "q_eur_tk") || !slices.Contains(names, "q_usd_ws") {
		t.Fatalf("the write removes %v, not the quotas", names)
	}
}

// reqDay is a quota of 800 requests a day (UTC); T is a midnight.
var reqDay = Limit{Name: "req", Limit: bucket.Limit{Capacity: 800_000, Burst: 800_000}, Calendar: bucket.Calendar{Window: bucket.Day}}

const day = 24 * 60 * 60 * 1000

// dayItem is shard of a bucket of n shards (its stored count) whose quota
// req is in the day from ws with left millitokens left; sc, on shard 0, is
// the count it started that day at.
func dayItem(p *Plan, shard int, n, ws, left, sc int64) store.Item {
	it := shape{shard: shard, n: n, rf: ws}.item(p)
	it["q_req_ws"], it["q_req_tk"] = store.Int(ws), store.Int(left)
	if shard == 0 {
		it["q_req_sc"] = store.Int(sc)
	}
	return it
}

// run makes the machine's calls on st at now until it answers.
func run(t *testing.T, st *memsim.Store, c *Charge, s Step, now int64) Step {
	t.Helper()
	for i := 0; s.Call != nil; i++ {
		if i > 50 {
			t.Fatal("the acquire does not end")
		}
		s = c.Feed(exec(t, st, s), now)
	}
	return s
}

// startedAt returns what shard holds of req in the day from T, and false
// when it is still in an earlier day.
func startedAt(t *testing.T, st *memsim.Store, p *Plan, shard int) (int64, bool) {
	t.Helper()
	if attr(t, st, p.Ref, shard, "q_req_ws") < T {
		return 0, false
	}
	return attr(t, st, p.Ref, shard, "q_req_tk"), true
}

// A bucket of 8 shards at midnight under heavy load (the simulator found
// it: 237 writers, 2,500 acquires a second, a daily quota in Paris, 0.4 %
// over). A process that last saw shard 0 at 4 shards chose shard 1 a few
// ms before midnight; its write failed (shard 1 still said 2 shards: other
// shards learn the count lazily) and its next write, after midnight,
// started the new day on shard 1 at a quarter of the quota, while shard 0
// started it at 8 shards, an eighth on each: the day held more than the
// quota. Now the window is started on another shard only by a writer whose
// image of shard 0 shows it, at the count shard 0 started it at: the
// acquire goes to shard 0 first, and shard 1 starts the day at an eighth.
func TestAWindowThatEndsMidAcquireStartsOnAnotherShardAtShardZerosCount(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100_000), reqDay}, map[string]int64{"rps": 1, "req": 1})
	yesterday := T - day
	st := sim(t, dayItem(p, 0, 8, yesterday, 0, 4), dayItem(p, 1, 2, yesterday, 0, 0))
	for s := 2; s < 8; s++ {
		st.Put(context.Background(), store.PutInput{Item: dayItem(p, s, 8, yesterday, 0, 0)})
	}
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, dayItem(p, 0, 4, yesterday, 0, 4), 4, T-20) // before the doubling
	c := NewCharge(m, p, picks(1, 0), Options{})
	s := c.Start(T - 5)
	if got := describe(s); got != "update 1 speculative" {
		t.Fatalf("before midnight: %q, want the write to shard 1", got)
	}
	s = c.Feed(exec(t, st, s), T+5) // fails: shard 1 says 2 shards
	if got := describe(s); !strings.HasPrefix(got, "update 0 ") {
		t.Fatalf("after midnight, with shard 0 last seen yesterday: %q, want a write to shard 0", got)
	}
	if s = run(t, st, c, s, T+5); !s.Done {
		t.Fatalf("the acquire ends %q, want admitted", describe(s))
	}
	if left, ok := startedAt(t, st, p, 0); !ok || left != 100_000-1000 {
		t.Fatalf("shard 0: %d left of the new day (started %v), want an eighth less the charge", left, ok)
	}
	// The next acquire on shard 1 starts the day there at shard 0's count.
	c = NewCharge(m, p, picks(1), Options{})
	if s = run(t, st, c, c.Start(T+10), T+10); !s.Done {
		t.Fatalf("on shard 1: %q, want admitted", describe(s))
	}
	if left, ok := startedAt(t, st, p, 1); !ok || left != 100_000-1000 {
		t.Fatalf("shard 1: %d left of the new day (started %v), want an eighth less the charge (100000-1000)", left, ok)
	}
}

// With clocks ±1 s apart around a boundary, a doubling made just after
// midnight by a process whose clock was behind dated its new shards in
// the window before; the new window then started on them with their share,
// beside the shards that started it at the count before the doubling (the
// simulator found 0.66 % over a monthly quota). Now a shard starts a
// window only at the count shard 0 started it at: here 4, so shard 1
// starts it at a quarter, and shard 5 with nothing of its own however it
// was dated: only by a transfer, half of what its donor holds (shard 1,
// the shard it split from: half of its 199). The day's shares stay within
// the quota.
func TestAShardMadeAfterShardZeroStartedTheWindowHoldsNothingOfIt(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100_000), reqDay}, map[string]int64{"rps": 1, "req": 1})
	yesterday := T - day
	shard0 := dayItem(p, 0, 8, T, 150_000, 4)                                                  // started today at 4 shards, then doubled
	st := sim(t, shard0, dayItem(p, 1, 8, yesterday, 0, 0), dayItem(p, 5, 8, yesterday, 0, 0)) // 5: made by a clock behind
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, shard0, 8, T+100)
	c := NewCharge(m, p, picks(1), Options{})
	if s := run(t, st, c, c.Start(T+100), T+100); !s.Done || c.Shard != 1 {
		t.Fatalf("the acquire ends %q on shard %d, want admitted on shard 1", describe(s), c.Shard)
	}
	if left, ok := startedAt(t, st, p, 1); !ok || left != 200_000-1000 {
		t.Errorf("shard 1: %d left of the day (started %v), want a quarter less the charge (200000-1000)", left, ok)
	}
	c = NewCharge(m, p, picks(5), Options{})
	if s := run(t, st, c, c.Start(T+100), T+100); !s.Done || c.Shard != 5 {
		t.Fatalf("the acquire ends %q on shard %d, want admitted on shard 5", describe(s), c.Shard)
	}
	if left, ok := startedAt(t, st, p, 5); !ok || left != 99_500-1000 {
		t.Errorf("shard 5: %d left of the day (started %v), want half of shard 1's 199000 less the charge", left, ok)
	}
	if left, _ := startedAt(t, st, p, 1); left != 99_500 {
		t.Errorf("shard 1: %d left of the day, want 99500 (it gave half)", left)
	}
}

// A process that saw the day's quota spent refuses the next acquires
// without a write until midnight, however old its image: nothing but the
// day's end or a refund gives the quota back. (They went to the store once
// the image was older than LocalRefusalAge: 1 WCU each, 7,049 of the 8,849
// refusals of quota-month's seed 1.) Its own refund, whose write returns
// the item, lifts it at once; at midnight it writes again.
func TestASpentQuotaIsRefusedWithoutAWriteUntilTheWindowEnds(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay}, map[string]int64{"rps": 1, "req": 1})
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, dayItem(p, 0, 1, T, 500, 1), 1, T+1000) // half a request left
	for _, at := range []int64{T + 1000, T + 10*60*1000, T + day - 1} {
		if got := describe(NewCharge(m, p, picks(0), Options{}).Start(at)); got != "refused local" {
			t.Fatalf("%d ms into the day: %q, want refused without a write", at-T, got)
		}
	}
	if got := describe(NewCharge(m, p, picks(0), Options{}).Start(T + day)); !strings.HasPrefix(got, "update 0 ") {
		t.Fatalf("at midnight: %q, want a write (the new day)", got)
	}
	knows(t, m, bucketRef, dayItem(p, 0, 1, T, 5000, 1), 1, T+60_000) // a refund of this process
	if got := describe(NewCharge(m, p, picks(0), Options{}).Start(T + 120_000)); !strings.HasPrefix(got, "update 0 ") {
		t.Fatalf("after its refund: %q, want a write", got)
	}
}
