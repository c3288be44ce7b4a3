package engine

import (
	"math"
	"testing"
)

// satMul: a shard's balance times the shard count, saturating, as the
// whole bucket's estimate (the count is at least 1).
func TestSatMulSaturates(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{7, 1, 7},
		{7, 0, 7},
		{0, 5, 0},
		{-3, 4, -12},
		{3, 4, 12},
		{math.MaxInt64 / 4, 4, math.MaxInt64 / 4 * 4},
		{math.MaxInt64/4 + 1, 4, math.MaxInt64},
		{math.MinInt64 / 4, 4, math.MinInt64},
		{math.MinInt64/4 - 1, 4, math.MinInt64},
		{math.MinInt64 / 3, 3, math.MinInt64 / 3 * 3}, // -9223372036854775806: no saturation
	} {
		if got := satMul(c.a, c.b); got != c.want {
			t.Errorf("satMul(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// Views: what each limit holds at now as the image shows it, the whole
// bucket's estimate (the shard's balance times the count), the time until
// it is full, and, judged, whether the request fits and when it will.
func TestViewsOfAnImage(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 100)}, map[string]int64{"rps": 3, "tpm": 1})
	im := image(t, shape{n: 2, rf: T, tk: map[string]int64{"rps": 2000, "tpm": 50_000}}.item(p)) // tpm full at 2 shards
	vs := p.Views(im, 2, T, false, true)
	if len(vs) != 2 || vs[0].Name != "rps" || vs[1].Name != "tpm" {
		t.Fatalf("views %+v: want rps and tpm, not wcu", vs)
	}
	rps, tpm := vs[0], vs[1]
	// rps: 2 of 5 tokens at 5 a second; 3 wanted: 200 ms; full in 600 ms.
	if rps.Remaining != 4000 || rps.ResetMs != 600 || !rps.Exceeded || rps.RetryMs != 200 || rps.Shards != 2 || rps.Requested != 3000 {
		t.Errorf("rps: %+v", rps)
	}
	if tpm.Remaining != 100_000 || tpm.ResetMs != 0 || tpm.Exceeded {
		t.Errorf("tpm (full): %+v", tpm)
	}
	// Charged: the image is from before the write.
	if vs := p.Views(im, 2, T, true, false); vs[1].Remaining != 98_000 || vs[1].ResetMs != 20 || vs[0].Exceeded {
		t.Errorf("charged tpm: %+v", vs[1])
	}
	// A request above a shard's burst: no wait suffices on this shard.
	big := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 6})
	if v := big.Views(im, 2, T, false, true)[0]; !v.Exceeded || v.RetryMs != -1 {
		t.Errorf("6 tokens of a 5-token shard: %+v", v)
	}
	if v := p.Views(nil, 2, T, false, true)[0]; v.Remaining != 0 || v.Exceeded || v.Requested != 3000 {
		t.Errorf("no image: %+v", v)
	}
	// Exactly the tokens asked for: not exceeded.
	exact := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 2})
	if v := exact.Views(im, 2, T, false, true)[0]; v.Exceeded {
		t.Errorf("2 tokens asked of 2: %+v", v)
	}
}

// A refusal judged from a view counts what the others (and this process's
// writes in flight) likely took since the image; one after lost races at
// the limit gives the tokens in view to the others; the wait is at the
// refill the others leave.
func TestRefusalViewsCountTheOthers(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 2})
	im := image(t, shape{rf: T, tk: map[string]int64{"rps": 3000}}.item(p))
	busy := &ShardView{At: T, RateAt: T, Drain: map[string]float64{"rps": 5}, Pending: map[string]int64{"rps": 500}}
	crowded := &ShardView{At: T, RateAt: T, Drain: map[string]float64{"rps": 5}, Pending: map[string]int64{"rps": 2500}}
	exact := &ShardView{At: T, RateAt: T, Drain: map[string]float64{"rps": 5}, Pending: map[string]int64{"rps": 1050}}
	for _, c := range []struct {
		name      string
		r         Refusal
		exceeded  bool
		remaining int64
		retry     int64
	}{
		{"judged from the image alone", Refusal{Plan: p, Img: im, N: 1, Now: T + 10}, false, 3100, 0},
		{"local: the others took 50 and 500 is in flight", Refusal{Plan: p, Img: im, N: 1, Now: T + 10, Local: true, View: busy}, false, 2550, 0},
		{"local, short: waits at the refill the others leave", Refusal{Plan: p, Img: im, N: 1, Now: T + 10, Local: true, View: crowded}, true, 550, 290},
		{"outrun at the limit: the tokens go to the others", Refusal{Plan: p, Img: im, N: 1, Now: T + 10, Outrun: true, Raced: true, View: busy}, true, 2550, 400},
		{"outrun, not raced, not at the limit", Refusal{Plan: p, Img: im, N: 1, Now: T + 10, Outrun: true, View: busy}, false, 2550, 0},
		{"local, exactly the tokens left", Refusal{Plan: p, Img: im, N: 1, Now: T + 10, Local: true, View: exact}, false, 2000, 0},
	} {
		v := c.r.Views()[0]
		if v.Exceeded != c.exceeded || v.Remaining != c.remaining || v.RetryMs != c.retry {
			t.Errorf("%s: %+v; want exceeded %v, remaining %d, retry %d", c.name, v, c.exceeded, c.remaining, c.retry)
		}
	}
	// At the limit by the others' drain (90 % of the refill): outrun gives
	// the tokens away without Raced (of the 3,000 in view the others' part
	// is 0.9 x 625, at most a sixteenth of the burst: 2,438 remain); the
	// wait is for 2 tokens at 3/4 of the 1 a ms the others leave: 2,667 ms.
	atLimit := &ShardView{At: T, RateAt: T, Drain: map[string]float64{"rps": 9}}
	if v := (&Refusal{Plan: p, Img: im, N: 1, Now: T, Outrun: true, View: atLimit}).Views()[0]; !v.Exceeded || v.RetryMs != 2667 || v.Remaining != 2438 {
		t.Errorf("outrun at the limit: %+v, want exceeded, 2438 remaining, retry after 2667 ms", v)
	}
}

// Total sums a limit over the shards' images at now: a shard 0 never
// written holds its burst, another shard nothing; an image at a larger
// count than known is judged at its own count; the reset is the longest.
func TestTotalOverShards(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10}, nil)
	s1 := image(t, shape{shard: 1, n: 2, rf: T, tk: map[string]int64{"rps": 1000}}.item(p))    // full in 800 ms
	s2 := image(t, shape{shard: 2, n: 4, rf: T - 100, tk: map[string]int64{"rps": 0}}.item(p)) // 250 at T, full in 900 ms
	sum, reset, ok := p.Total("rps", []*Image{nil, s1}, 2, T)
	if !ok || sum != 5000+1000 || reset != 800 {
		t.Fatalf("total %d, reset %d (%v): want 6000 and 800", sum, reset, ok)
	}
	sum, reset, _ = p.Total("rps", []*Image{nil, s1, s2}, 2, T)
	if sum != 5000+1000+250 || reset != 900 {
		t.Fatalf("with a shard at 4: total %d, reset %d; want 6250 and 900", sum, reset)
	}
	if _, _, ok := p.Total("wcu", []*Image{nil}, 1, T); ok {
		t.Fatal("a total of the hidden limit")
	}
	if _, _, ok := p.Total("tpm", []*Image{nil}, 1, T); ok {
		t.Fatal("a total of a limit the plan lacks")
	}
}

// Only a refusal after lost races gives the tokens in view to the others:
// one refused by the store on another limit names just that limit, at the
// limit or not; one that lost its races gives them away also when they
// are exactly the charge.
func TestOnlyLostRacesGiveTheTokensAway(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"rps": 2, "tpm": 2})
	im := image(t, shape{rf: T, tk: map[string]int64{"rps": 3000, "tpm": 0}}.item(p))
	atLimit := &ShardView{At: T, RateAt: T, Drain: map[string]float64{"rps": 9.5, "tpm": 9.5}}
	vs := (&Refusal{Plan: p, Img: im, N: 1, Now: T, View: atLimit}).Views()
	if vs[0].Exceeded || !vs[1].Exceeded {
		t.Fatalf("refused on tpm: %+v; want rps (3 of 2 tokens) not exceeded", vs)
	}
	exact := image(t, shape{rf: T, tk: map[string]int64{"rps": 2000, "tpm": 2000}}.item(p))
	vs = (&Refusal{Plan: p, Img: exact, N: 1, Now: T, Outrun: true, Raced: true, View: &ShardView{At: T}}).Views()
	if !vs[0].Exceeded || !vs[1].Exceeded {
		t.Fatalf("lost every race with exactly the charge in view: %+v; want both exceeded", vs)
	}
}
