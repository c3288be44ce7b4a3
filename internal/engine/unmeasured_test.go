package engine

import (
	"context"
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// A client that has not measured a shard burns, beside each charge that
// refills in under a millisecond, the rest of a whole millisecond of
// refill; none for a charge of a millisecond or more, once the shard is
// measured (provisionally too: headroom decides then), when its answers
// are too slow to measure from, or beyond half the stored balance's room.
func TestUnmeasuredBurn(t *testing.T) {
	fast := perSecond("rps", 100_000) // 100,000 millitokens a ms
	p := NewPlan(bucketRef, []Limit{fast, perMinute("tpm", 6000)}, map[string]int64{"rps": 1})
	full := image(t, shape{rf: T}.item(p))
	low := image(t, shape{rf: T, tk: map[string]int64{"rps": 41_000}}.item(p))
	burn := func(p *Plan, v ShardView) int64 {
		b := p.headroom(&v, 1, T)
		if b == nil {
			return 0
		}
		if b[1] != 0 || b[len(b)-1] != 0 {
			t.Fatalf("burn %v: tpm (charged nothing) and wcu burn nothing", b)
		}
		return b[0]
	}
	for _, c := range []struct {
		name string
		p    *Plan
		v    ShardView
		want int64
	}{
		{"no item: the rest of a ms", p, ShardView{}, 99_000},
		{"an item, not measured", p, ShardView{Img: full, At: T}, 99_000},
		{"half the room the stored balance leaves", p, ShardView{Img: low, At: T}, 20_000},
		{"answers too slow to measure from", p, ShardView{Img: full, At: T, Slow: true}, 0},
		{"measured provisionally, alone", p, ShardView{Img: full, At: T, Rate: 0.5}, 0},
		{"measured once, no writes since", p, ShardView{Img: full, At: T, RateAt: T - 500}, 0},
		{"a charge that refills in a whole ms", NewPlan(bucketRef, []Limit{perSecond("rps", 1000), perMinute("tpm", 6000)}, map[string]int64{"rps": 1}), ShardView{}, 0},
		{"a charge that refills in more", NewPlan(bucketRef, []Limit{perSecond("rps", 1500), perMinute("tpm", 6000)}, map[string]int64{"rps": 2}), ShardView{}, 0},
	} {
		if got := burn(c.p, c.v); got != c.want {
			t.Errorf("%s: burn %d, want %d", c.name, got, c.want)
		}
	}
}

// Two processes start on a bucket far above its load, in the millisecond
// it was created. The second has no item of it: its first write, the
// consumption-only one, takes a whole millisecond of refill, so fl moves
// from the create's T+1 to T+2 (without the burn, by the floor of 10
// microseconds: not at all, and from T+1 on every consumption-only write
// would fail). A client that measured the shard (alone on it) charges
// exactly the token.
func TestFirstWritesMoveFlByAMillisecond(t *testing.T) {
	fast := perSecond("rps", 100_000)
	for _, c := range []struct {
		name       string
		v          ShardView
		wantFl     int64
		wantTokens int64
	}{
		{"not measured", ShardView{}, T + 2, fast.Burst - 1000 - 100_000},
		{"measured", ShardView{Rate: 0.5, RateAt: T - 400}, T + 1, fast.Burst - 2000},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := memsim.NewManualClock(t0)
			st := memsim.New(memsim.WithClock(clock))
			ctx := context.Background()
			p := NewPlan(bucketRef, []Limit{fast}, map[string]int64{"rps": 1})
			if _, err := st.Put(ctx, p.create(0, 1, T)); err != nil {
				t.Fatal(err)
			}
			ex, path, err := p.blind(&c.v, 1, T, 0.5, PathNone, false)
			if err != nil || path != PathSpeculative {
				t.Fatalf("blind write %v, %v: want the speculative write", path, err)
			}
			if _, err := st.Update(ctx, store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err != nil {
				t.Fatalf("speculative write: %v", err)
			}
			it := st.Peek(bucketRef.Key())
			fl, _ := it.Int("b_rps_fl")
			fh, _ := it.Int("b_rps_fh")
			tk, _ := it.Int("b_rps_tk")
			tc, _ := it.Int("b_rps_tc")
			if fl != c.wantFl || tk != c.wantTokens || tc != 2000 {
				t.Errorf("fl %d tk %d tc %d, want fl T+%d tk %d tc 2000 (the burn is not consumption)", fl, tk, tc, c.wantFl-T, c.wantTokens)
			}
			// fl <= the true full-at instant <= fh.
			exact := bucket.State{Limit: fast.Limit, Tokens: tk}.FullAt(T)
			if fl > exact || fh < exact {
				t.Errorf("fl %d, fh %d: the full-at instant %d is not between them", fl, fh, exact)
			}
		})
	}
}

// A view says Slow after an answer slower than maxRateLatency, from which
// no rate is taken (so a client that has not measured the shard burns no
// whole milliseconds on it), and no longer after a fast one.
func TestViewSlowAfterASlowAnswer(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100_000)}, map[string]int64{"rps": 1})
	m := NewMemory(0)
	if v := m.View(bucketRef, 0); v.Slow || !v.unmeasured() {
		t.Fatalf("a shard never answered about: %+v, want not slow, unmeasured", v)
	}
	m.learn(bucketRef, 0, image(t, shape{rf: T}.item(p)), 1, T, maxRateLatency+1, nil)
	if v := m.View(bucketRef, 0); !v.Slow || v.unmeasured() {
		t.Fatalf("after a slow answer: Slow %v, unmeasured %v; want slow, not unmeasured", v.Slow, v.unmeasured())
	}
	m.learn(bucketRef, 0, image(t, shape{rf: T + 10}.item(p)), 1, T+10, maxRateLatency, nil)
	if v := m.View(bucketRef, 0); v.Slow || !v.unmeasured() {
		t.Fatalf("after a fast answer: Slow %v, unmeasured %v; want neither slow nor measured yet", v.Slow, v.unmeasured())
	}
}
