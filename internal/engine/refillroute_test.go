package engine

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// refillBound: the latest fh at which the refill surely pays need at now.
func TestRefillBound(t *testing.T) {
	l := rps10.Limit // a token refills in 100 ms
	third := bucket.Limit{Capacity: 3000, Burst: 3000, RefillAmount: 3000, RefillPeriod: 1000}
	for _, c := range []struct {
		name      string
		l         bucket.Limit
		cap, need int64
		want      int64
	}{
		{"a token of a 10-token bucket: 9 tokens' refill", l, 10_000, 1000, T + 900},
		{"nothing: the whole burst's refill", l, 10_000, 0, T + 1000},
		{"the whole burst: fh at now at the latest", l, 10_000, 10_000, T},
		{"more than the cap: never", l, 10_000, 10_001, math.MinInt64},
		{"a lowered cap (a hold) counts down from it", l, 6000, 1000, T + 500},
		{"no refill: never", bucket.Limit{Burst: 10_000}, 10_000, 1000, math.MinInt64},
		{"rounded down: 2 tokens of 3/s in 666 ms", third, 3000, 1000, T + 666},
		{"a millitoken a ms", bucket.Limit{Burst: 10, RefillAmount: 1, RefillPeriod: 1}, 10, 0, T + 10},
		{"a refill time beyond bounds: never", bucket.Limit{Burst: bucket.MaxTokens, RefillAmount: 1, RefillPeriod: bucket.MaxRefillPeriod}, bucket.MaxTokens, 0, math.MinInt64},
	} {
		if got := refillBound(c.l, c.cap, c.need, T); got != c.want {
			t.Errorf("%s: T%+d, want T%+d", c.name, got-T, c.want-T)
		}
	}
}

// The consumption-only write, as the store judges it: tk >= need, or fh
// within the refill route's bound with rf young enough; fl > now for a
// charged limit; a limit charged nothing not in debt.
func TestSpeculativeFromTheRefill(t *testing.T) {
	p := plan1(bucketRef) // one token of rps10
	two := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"rps": 1})
	rps := func(tk int64) map[string]int64 { return map[string]int64{"rps": tk} }
	for _, c := range []struct {
		name  string
		p     *Plan
		item  shape
		admit bool
		tk    int64 // rps's tk after, when admitted
	}{
		{"stored tokens pay", p, shape{rf: T - 100, tk: rps(1000)}, true, 0},
		{"a token of refill pays, nothing stored", p, shape{rf: T - 100, tk: rps(0)}, true, -1000},
		{"a millitoken of refill short", p, shape{rf: T - 99, tk: rps(0)}, false, 0},
		{"deep below zero, the refill since rf pays", p, shape{rf: T - 900, tk: rps(-8000)}, true, -9000},
		{"deep below zero, a ms short", p, shape{rf: T - 899, tk: rps(-8000)}, false, 0},
		{"fh drifted 1 ms: conservative, refused", p, shape{rf: T - 100, tk: rps(0), ahead: map[string]int64{"rps": 1}}, false, 0},
		{"rf at the route's age", p, shape{rf: T - refillRouteAge, tk: rps(-refillRouteAge*10 + 1000)}, true,
			-refillRouteAge * 10},
		{"rf past the route's age", p, shape{rf: T - refillRouteAge - 1, tk: rps(-refillRouteAge*10 + 990)}, false, 0},
		{"rf past the route's age, the stored tokens pay", p, shape{rf: T - refillRouteAge - 1, tk: rps(1000)}, false, 0},
		{"full at now: the fl guard", p, shape{rf: T - 1000, tk: rps(0)}, false, 0},
		{"an item with hold generations: the route is closed", p, shape{rf: T - 100, tk: rps(0)}, false, 0},
		{"a limit charged nothing, below zero stored, not in debt", two,
			shape{rf: T - 100, tk: map[string]int64{"rps": 5000, "tpm": -900}}, true, 4000},
		{"a limit charged nothing, in debt", two,
			shape{rf: T - 100, tk: map[string]int64{"rps": 5000, "tpm": -1001}}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			it := c.item.item(c.p)
			if c.name == "rf past the route's age, the stored tokens pay" {
				// A bucket below full for half an hour on consumption-only
				// writes: its fl is still ahead.
				it["b_rps_fl"], it["b_rps_fh"] = store.Int(T+900), store.Int(T+900)
				c.admit = true
			}
			if c.name == "an item with hold generations: the route is closed" {
				// Its cap is bx - hd, below the burst the route counts
				// from; a hold of 0 closes it as well (hg is what says).
				it[attrGen], it[attrGenAt], it["b_rps_hd"] = store.Int(1), store.Int(T-1000), store.Int(0)
			}
			st := sim(t, it)
			ex, err := c.p.speculative(nil, 1, T, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			_, err = st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex})
			var cf *store.ConditionFailedError
			switch {
			case c.admit && err != nil:
				t.Fatalf("refused: %v", err)
			case !c.admit && !errors.As(err, &cf):
				t.Fatalf("admitted (%v), want a failed condition", err)
			case c.admit:
				if got := attr(t, st, bucketRef, 0, "b_rps_tk"); got != c.tk {
					t.Fatalf("tk %d, want %d", got, c.tk)
				}
			}
			if im, _ := Decode(it); c.admit != c.p.retryable(im, 1, T, nil) && c.name != "full at now: the fl guard" {
				t.Fatalf("the client's judgement (retryable %v) differs from the store's", !c.admit)
			}
		})
	}
}

// Two processes at a bucket's limit, each offering a request every
// millisecond from its own memory, both consuming from the refill with
// the lock-free write: never more than burst + rate × window admitted in
// any window from the start, few writes beside the admissions, hardly any
// under the rf lock, and the stored balance goes below zero (the route at
// work).
func TestStoryTwoProcessesAtTheLimitConsumeFromTheRefill(t *testing.T) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	p := plan1(bucketRef) // 10 tokens, 10 a second
	now := func() int64 { return clock.Now().UnixMilli() }
	mems := []*Memory{NewMemory(0), NewMemory(0)}
	start := now()
	admitted, writes, negative := int64(0), 0, false
	normals := 0 // admissions by the normal write
	seq := uint64(0)
	for ms := int64(0); ms < 5000; ms++ {
		for i, m := range mems {
			seq++
			c := NewCharge(m, p, newRand(seq*2+uint64(i)), Options{})
			step, paths := drive(st, now, c.Start(now()), c.Feed)
			writes += len(paths)
			if step.Done && paths[len(paths)-1] == PathNormal {
				normals++
			}
			if step.Err != nil {
				t.Fatalf("at T%+d: %v", now()-start, step.Err)
			}
			if step.Done {
				admitted++
			}

			elapsed := now() - start
			if bound := 10 + elapsed*10/1000; admitted > bound {
				t.Fatalf("at T%+d: %d admitted, bound %d", elapsed, admitted, bound)
			}
			if tk, _ := st.Peek(bucketRef.Key()).Int("b_rps_tk"); tk < 0 {
				negative = true
			}
		}
		clock.Add(time.Millisecond)
	}
	if admitted < 10+49 {
		t.Fatalf("%d admitted in 5 s, want the burst and every refilled token (59)", admitted)
	}
	if !negative {
		t.Fatal("the stored balance never went below zero: no admission from the refill")
	}
	// 10,000 attempts: nearly all refused locally; the writes are the
	// admissions and a few refused at the store. A process whose refusal's
	// promise comes while its estimate says the other took the refill
	// asks the store from an old item, and that write may be the normal
	// one: a few, never racing.
	if float64(writes) > 1.5*float64(admitted) || normals > int(admitted)/5 {
		t.Fatalf("%d writes (%d normal) for %d admitted, want about one each, hardly any admitted under the lock", writes, normals, admitted)
	}
	t.Logf("%d admitted, %d writes, %d normal", admitted, writes, normals)
}
