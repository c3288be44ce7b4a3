package engine

import (
	"testing"
)

// A process at a limit shared with other processes counts on its share:
// of the tokens in view (at most a sixteenth of the burst of them), and,
// paced, of the refill the others leave. Amounts are millitokens of rps10
// (10 a ms, burst 10,000); the others drain 9.375 a ms, so the share is
// 1/16.

var (
	atShare      = ShardView{At: T, RateAt: T, Drain: map[string]float64{"rps": 9.375}}
	halfway      = ShardView{At: T, RateAt: T, Drain: map[string]float64{"rps": 5}}
	atShareFloor = ShardView{At: T, RateAt: T, Drain: map[string]float64{"rps": 12}}
	drainedStore = ShardView{At: T, RateAt: T, Rate: 1.6, Others: 1.5, Drain: map[string]float64{"rps": 12}}
)

// stale is v with its estimates older than drainAge.
func stale(v ShardView) ShardView {
	v.RateAt = v.At - drainAge - 1
	return v
}

func TestWithheld(t *testing.T) {
	p := plan1(bucketRef)
	rps := &p.specs[0]
	img := func(tk int64) *Image { return image(t, shape{rf: T, tk: map[string]int64{"rps": tk}}.item(p)) }
	for _, c := range []struct {
		name string
		v    ShardView
		im   *Image
		now  int64
		want int64
	}{
		{"not at the limit", halfway, img(900), T + 100, 0},
		{"no estimate", ShardView{At: T}, img(900), T + 100, 0},
		{"no image", atShare, nil, T + 100, 0},
		{"a shard that never refills", atShare, img(900), T + 100, -1},
		{"the tokens in view, at once: 15/16 of 600", atShare, img(600), T, 562},
		{"and 1/4 of the share of 100 ms of refill", atShare, img(600), T + 100, 578},
		{"at most a sixteenth of the burst in view", atShare, img(8000), T, 585},
		{"an empty bucket: the refill only", atShare, img(0), T + 100, 15},
		{"the others drained the store: 1/4 of its 1/16 of 100 ms of refill", drainedStore, img(0), T + 100, 15},
		{"the others drained the store, no write rates: 1/4 of 1/64", atShareFloor, img(0), T + 100, 3},
		{"a debt: the refill only", atShare, img(-5000), T + 100, 15},
	} {
		n := int64(1)
		if c.want < 0 {
			n, c.want = 20_000, 0 // 10,000 millitokens a second over 20,000 shards: none
		}
		if got := c.v.withheld(rps, n, c.im, T, c.now); got != c.want {
			t.Errorf("%s: withheld %d, want %d", c.name, got, c.want)
		}
	}
}

func TestAccrualAtTheLimitIsPaced(t *testing.T) {
	rps := &plan1(bucketRef).specs[0]
	for _, c := range []struct {
		name string
		v    ShardView
		want float64
	}{
		{"alone", ShardView{At: T}, 10},
		{"not at the limit: what the others leave", halfway, 5},
		{"at the limit: pace of what they leave", atShare, 0.625 * pace},
		// After a start: the others took 12 a ms, more than the refill, from
		// what the bucket stored; 15 of every 16 writes were theirs. Their
		// drain says they leave 1/64; the writes say this process's part is
		// 1/16 of the refill once only the refill is left.
		{"the others drained the store: its part of the writes", drainedStore, 10.0 / 16 * pace},
		{"the same, an estimate too old", stale(drainedStore), 10},
	} {
		if got := c.v.accrual(rps, 1); got != c.want {
			t.Errorf("%s: accrual %v, want %v", c.name, got, c.want)
		}
	}
}

// The bucket is at its limit: 0.9 token stored at T, and it refills a
// token a ms (busy10). Process A measured the others taking 15/16 of the
// refill; process B is alone. Each writes for the token and is refused by
// the store. B, alone, is told the truth of the bucket: 1 ms. A is told
// its share: of the 0.9 token in view, the others' part is 15/16 of at
// most a sixteenth of the burst (585), and the rest of its token comes at
// 3/4 of its 1/16 of the refill: (1,000 - 315) / 46.875 = 15 ms. Until
// then A refuses locally, without a write, and a later estimate does not
// postpone its promise. At T+15 it asks the store, which no one else
// wrote since: admitted.
func TestStoryAtALimitEachProcessWaitsForItsShare(t *testing.T) {
	p := planBusy(bucketRef)
	st := sim(t, shape{rf: T, tk: map[string]int64{"rps": 900}}.item(p))
	ma := speculating(NewMemory(0))
	measured(ma, bucketRef, 0, 0, 0, T, map[string]float64{"rps": 937.5})
	acquire := func(m *Memory, now int64, wants ...string) Step {
		t.Helper()
		c := NewCharge(m, p, picks(), Options{})
		return play(t, st, c.Start(now), c.Feed, now, wants...)
	}

	if s := acquire(ma, T, "update 0 speculative", "refused reject"); retryMs(t, s.Refused) != 15 {
		t.Fatalf("A: retry after %d ms, want 15: its share", retryMs(t, s.Refused))
	}
	if s := acquire(speculating(NewMemory(0)), T, "update 0 speculative", "refused reject"); retryMs(t, s.Refused) != 1 {
		t.Fatalf("B: retry after %d ms, want 1: alone, the bucket's own wait", retryMs(t, s.Refused))
	}
	acquire(ma, T+10, "refused local")
	acquire(ma, T+14, "refused local")
	if pr := ma.View(bucketRef, 0).Promise; pr != T+15 {
		t.Fatalf("promise T%+d, want T+15: a local refusal does not postpone it", pr-T)
	}
	acquire(ma, T+15, "update 0 full", "done full")
	if tc := attr(t, st, bucketRef, 0, "b_rps_tc"); tc != 1000 {
		t.Fatalf("tc %d, want 1000: one admission", tc)
	}
}

// A process at the limit that sees the refill route pay still refuses
// locally until its share does: of 1.5 tokens in view it counts on 0.9
// (15/16 of a sixteenth of the burst, 0.585, go to the others); alone, or
// below the limit, it writes.
func TestAtALimitTheTokensInViewAreShared(t *testing.T) {
	p := plan1(bucketRef)
	im := image(t, shape{rf: T, tk: map[string]int64{"rps": 1500}}.item(p))
	for _, c := range []struct {
		name string
		v    ShardView
		want bool
	}{
		{"alone", ShardView{}, false},
		{"not at the limit", halfway, false},
		{"at the limit", atShare, true},
	} {
		c.v.Img, c.v.At = im, T
		if got := p.refusesLocally(&c.v, 1, T, Options{}); got != c.want {
			t.Errorf("%s: refuses %v, want %v", c.name, got, c.want)
		}
	}
	// Beyond what it leaves aside, the tokens in view are taken at once.
	many := atShare
	many.Img = image(t, shape{rf: T, tk: map[string]int64{"rps": 10_000}}.item(p))
	if p.refusesLocally(&many, 1, T, Options{}) {
		t.Error("refused with a full bucket in view")
	}
}

// After a failed write, the item it returned shows 1.5 tokens. When the
// others wrote since the process's last item (more write units), it lost
// a race at a shared limit and counts on its share: refused (outrun).
// When no one else wrote, the write failed on a guard, not for the
// tokens: it goes on, so that a caller who waited a refusal's wait gets
// the store's answer.
func TestOutrunCountsTheShareOnlyAfterALostRace(t *testing.T) {
	p := plan1(bucketRef)
	item := func(units int64) *Image {
		return image(t, shape{rf: T, tk: map[string]int64{"rps": 1500}, tc: map[string]int64{"wcu": units}}.item(p))
	}
	for _, c := range []struct {
		name   string
		before int64 // write units in the process's last item
		want   bool
	}{
		{"others wrote since", 5000, true},
		{"no one else wrote", 6000, false},
	} {
		ch := NewCharge(NewMemory(0), p, picks(), Options{})
		ch.n, ch.view = 1, atShare
		ch.view.Img = item(c.before)
		if got := ch.outrun(item(6000), T) != nil; got != c.want {
			t.Errorf("%s: refused %v, want %v", c.name, got, c.want)
		}
	}
}

// A caller waited a refusal's wait and retried; no one else wrote the
// bucket meanwhile, and its write failed on a guard. The item it returned
// has the rate's tokens, and a shadow limit's too, but not once the
// others' likely consumption over half a round trip is taken from the
// shadow limit. The acquire was refused on that guess, and the refusal
// judged the rate by the process's share of a limit at its limit: the
// rate "refused" again, with a wait of seconds, although no one had
// written the bucket (the simulator's invariant 7, found by TestProperty:
// 115 writers on a 35/s limit beside a 9/s shadow limit). Now, when no one
// else wrote, only this process's writes in flight count: the acquire
// writes again and finds the store's answer.
func TestOutrunWithNoOtherWriterGuessesNothing(t *testing.T) {
	img := perSecond("img", 1)
	img.Shadow = true
	p := NewPlan(bucketRef, []Limit{rps10, img}, map[string]int64{"rps": 1, "img": 1})
	item := image(t, shape{rf: T, tk: map[string]int64{"rps": 1500, "img": 1010}, tc: map[string]int64{"wcu": 6000}}.item(p))
	ch := NewCharge(NewMemory(0), p, picks(), Options{})
	ch.n, ch.view, ch.lat = 1, atShare, 20
	ch.view.Drain = map[string]float64{"rps": 9.375, "img": 0.9}
	ch.view.Img = item
	if rl := ch.outrun(item, T); rl != nil {
		var exceeded []string
		for _, v := range rl.Views() {
			if v.Exceeded {
				exceeded = append(exceeded, v.Name)
			}
		}
		t.Fatalf("refused (exceeded: %v) with no other writer since the process's last item; want the write made again", exceeded)
	}
}
