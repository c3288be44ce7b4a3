package engine

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store/memsim"
)

// trueBucket is one limit as the design defines it: tokens at a true
// instant, refilled continuously up to the burst. Charges may take it into
// debt (an adjust); refunds fill it up to the burst at most.
type trueBucket struct {
	l      bucket.Limit
	tokens float64 // millitokens
	at     int64   // ms
}

func (b *trueBucket) advance(now int64) {
	if now > b.at {
		b.tokens = min(float64(b.l.Burst), b.tokens+float64(now-b.at)*float64(b.l.RefillAmount)/float64(b.l.RefillPeriod))
		b.at = now
	}
}

// at returns what the bucket will hold at now (no later than its last
// change), without changing it.
func (b *trueBucket) tokensAt(now int64) float64 {
	c := *b
	c.advance(now)
	return c.tokens
}

func (b *trueBucket) move(now, milli int64) {
	b.advance(now)
	b.tokens -= float64(milli)
	if milli < 0 {
		b.tokens = min(b.tokens, float64(b.l.Burst))
	}
}

// The write paths as a whole, against the definition of a token bucket: a
// few clients (their clocks in step, or lagging) acquire, adjust and refund
// in random order and at random times, each write made by the machines
// on memsim. After every operation the stored item must describe a bucket
// that holds no more than the true one (plus the refill a lagging clock
// may date differently), keep fl <= fullAt <= fh, count in tc exactly what
// was charged, and never move rf back. Every admission must fit the true
// bucket when it was made.
func TestWritesNeverOverstateTheBucket(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clock := memsim.NewManualClock(t0)
		st := memsim.New(memsim.WithClock(clock), memsim.WithPartitionLimits(0, 0))
		trueNow := func() int64 { return clock.Now().UnixMilli() }

		nl := rapid.IntRange(1, 2).Draw(rt, "limits")
		var limits []Limit
		models := map[string]*trueBucket{}
		for i := 0; i < nl; i++ {
			perSec := rapid.Int64Range(2, 200).Draw(rt, "per_second")
			period := rapid.SampledFrom([]int64{1000, 60_000}).Draw(rt, "period_ms")
			burst := perSec * period / 1000 * int64(rapid.IntRange(2, 4).Draw(rt, "burst_halves")) / 2
			l := Limit{Name: []string{"rpm", "tpm"}[i], Limit: bucket.Limit{
				Capacity: perSec * period, Burst: burst * 1000, RefillAmount: perSec * period, RefillPeriod: period}}
			limits = append(limits, l)
			models[l.Name] = &trueBucket{l: l.Limit, tokens: float64(l.Burst), at: trueNow()}
		}
		clients := rapid.IntRange(1, 3).Draw(rt, "clients")
		mems := make([]*Memory, clients)
		lags := make([]int64, clients)
		maxLag := int64(0)
		for c := range mems {
			mems[c] = NewMemory(0)
			lags[c] = rapid.SampledFrom([]int64{0, 0, 5, 120}).Draw(rt, "lag_ms")
			maxLag = max(maxLag, lags[c])
		}
		type lease struct {
			plan  *Plan
			shard int
			n     int64
			net   map[string]int64
		}
		var leases []*lease
		charged := map[string]int64{} // what tc must hold
		lastRF := int64(0)

		check := func(what string) {
			it := st.Peek(bucketRef.Key())
			if it == nil {
				return
			}
			if err := guardsHold(it); err != nil {
				rt.Fatalf("after %s: %v", what, err)
			}
			im, err := Decode(it)
			if err != nil {
				rt.Fatal(err)
			}
			if im.rf < lastRF {
				rt.Fatalf("after %s: rf moved back from %d to %d", what, lastRF, im.rf)
			}
			lastRF = im.rf
			for _, l := range limits {
				s := newSpec(l)
				got, _, _, ok := im.state(&s)
				if !ok {
					rt.Fatalf("after %s: limit %s missing", what, l.Name)
				}
				if got.TotalConsumed != charged[l.Name] {
					rt.Fatalf("after %s: %s tc = %d, want %d (what was charged)", what, l.Name, got.TotalConsumed, charged[l.Name])
				}
				// A normal write moves rf at least 1 ms, also ahead of the
				// clock, and credits that millisecond early (once): the
				// stored state describes the bucket at rf.
				at := max(trueNow(), im.rf)
				want := models[l.Name].tokensAt(at)
				slack := float64(maxLag*l.RefillAmount)/float64(l.RefillPeriod) + 2
				if eff := got.Effective(im.rf, at); float64(eff) > want+slack {
					rt.Fatalf("after %s: %s stored state holds %d millitokens at %d, the bucket %.0f (+%.0f for a lagging clock)", what, l.Name, eff, at, want, slack)
				}
			}
		}

		steps := rapid.IntRange(10, 60).Draw(rt, "steps")
		for step := 0; step < steps; step++ {
			clock.Add(time.Duration(rapid.SampledFrom([]int64{0, 1, 7, 40, 300, 2000}).Draw(rt, "advance_ms")) * time.Millisecond)
			c := rapid.IntRange(0, clients-1).Draw(rt, "client")
			now := func() int64 { return trueNow() - lags[c] }
			switch action := rapid.IntRange(0, 5).Draw(rt, "action"); {
			case action <= 2 || len(leases) == 0: // acquire
				consume := map[string]int64{}
				for _, l := range limits {
					consume[l.Name] = rapid.Int64Range(0, l.Burst/1000/2+1).Draw(rt, "tokens")
				}
				p := NewPlan(bucketRef, limits, consume)
				m := NewCharge(mems[c], p, newRand(uint64(step)), Options{})
				res, _ := drive(st, now, m.Start(now()), m.Feed)
				if res.Err != nil {
					rt.Fatalf("acquire %v: %v", consume, res.Err)
				}
				if res.Done {
					for _, l := range limits {
						a := consume[l.Name] * 1000
						models[l.Name].advance(trueNow())
						slack := float64(maxLag*l.RefillAmount)/float64(l.RefillPeriod) + 2
						if float64(a) > models[l.Name].tokens+slack {
							rt.Fatalf("acquire of %v admitted with %.0f millitokens of %s in the bucket", consume, models[l.Name].tokens, l.Name)
						}
						models[l.Name].move(trueNow(), a)
						charged[l.Name] += a
					}
					leases = append(leases, &lease{plan: p, shard: m.Shard, n: m.N, net: map[string]int64{}})
				}
				check(fmt.Sprintf("acquire %v", consume))
			default: // adjust or roll back a lease
				le := leases[rapid.IntRange(0, len(leases)-1).Draw(rt, "lease")]
				milli := map[string]int64{}
				rollback := action == 5
				for _, l := range limits {
					if rollback {
						milli[l.Name] = -(le.plan.Amounts()[l.Name] + le.net[l.Name])
					} else {
						milli[l.Name] = 1000 * rapid.Int64Range(-3, 3).Draw(rt, "delta")
					}
				}
				a := NewAdjust(mems[c], le.plan.WithAmounts(milli), le.shard, le.n)
				res, _ := drive(st, now, a.Start(now()), a.Feed)
				if res.Err != nil {
					rt.Fatalf("adjust %v: %v", milli, res.Err)
				}
				for name, d := range milli {
					models[name].move(trueNow(), d)
					charged[name] += d
					le.net[name] += d
				}
				check(fmt.Sprintf("adjust %v", milli))
			}
		}
	})
}
