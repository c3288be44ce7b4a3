package engine

import (
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
)

// A shard whose limits admit at most fewWritesPerSecond requests a second
// is never doubled: exactly 500 a second is few, 501 is not.
func TestFewWritesAtTheBound(t *testing.T) {
	for _, c := range []struct {
		perSecond int64
		want      bool
	}{{500, true}, {501, false}} {
		p := NewPlan(bucketRef, []Limit{perSecond("rps", c.perSecond)}, map[string]int64{"rps": 1})
		if got := p.fewWrites(1); got != c.want {
			t.Errorf("%d a second: few %v, want %v", c.perSecond, got, c.want)
		}
	}
}

// Only the limits a request charges tell whether the bucket is being
// drained, or take the others' refill in the view a throttle leaves: not
// the hidden write-unit limit, nor a limit the request charges nothing of.
func TestThrottleViewsJudgeTheChargedLimits(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 10), perSecond("tpm", 10)}, map[string]int64{"rps": 1})
	img := image(t, shape{rf: T - 100, tk: map[string]int64{"rps": 9000, "tpm": 0, "wcu": 0}}.item(p))
	view := ShardView{Img: img, At: T - 100}
	if p.draining(view, 1, T) {
		t.Fatal("draining, with the charged limit at 90 % (only wcu and the uncharged tpm are low)")
	}
	low := image(t, shape{rf: T - 100, tk: map[string]int64{"rps": 3000}}.item(p))
	if !p.draining(ShardView{Img: low, At: T - 100}, 1, T) {
		t.Fatal("not draining with the charged limit at 30 % (40 % by now)")
	}
	v := view.saturated(p, 1, T)
	if _, ok := v.Drain["tpm"]; ok || len(v.Drain) != 1 {
		t.Fatalf("saturated view drains %v, want rps only", v.Drain)
	}
	rl := &Refusal{Plan: p, Img: img, N: 1, Now: T, View: &v, Outrun: true, Raced: true}
	seen := false
	for _, lv := range rl.Views() {
		if lv.Name == "tpm" {
			seen = true
			if lv.Remaining != 1000 { // 0 at T-100, refilled 10 a ms
				t.Fatalf("tpm remaining %d, want its own refill: the others take nothing of a limit this request does not charge", lv.Remaining)
			}
		}
	}
	if !seen {
		t.Fatal("no view of tpm")
	}
}

// The wait a throttle's view gives is at most maxSaturatedWait, however
// slow the limit: a throttle is a passing signal.
func TestTheSaturatedWaitIsBounded(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perMinute("rpm", 60)}, map[string]int64{"rpm": 1})
	img := image(t, shape{rf: T, tk: map[string]int64{"rpm": 0}}.item(p))
	v := ShardView{Img: img, At: T}.saturated(p, 1, T)
	rl := &Refusal{Plan: p, Img: img, N: 1, Now: T, View: &v, Outrun: true, Raced: true}
	if w := retryOf(rl); w > maxSaturatedWait {
		t.Fatalf("wait %d ms after a throttle, want at most %d", w, maxSaturatedWait)
	}
}

// A hot bucket doubles only to a count at which every shard's burst still
// holds the request: with a limit of a small burst and a fast refill (not
// few writes), a request of 300 tokens, which fits half but not a quarter
// of the burst of 1,000, keeps the bucket at two shards; one of 200 doubles
// it.
func TestNoDoublingPastTheBurst(t *testing.T) {
	l := Limit{Name: "tpm", Limit: bucket.Limit{Capacity: 1_000_000, Burst: 1_000_000, RefillAmount: 1_000_000_000, RefillPeriod: 1000}}
	for _, c := range []struct {
		amount int64
		want   string
	}{{300, "update 1 speculative"}, {200, "update 0 double"}} {
		p := NewPlan(bucketRef, []Limit{l}, map[string]int64{"tpm": c.amount})
		m := speculating(NewMemory(0))
		knows(t, m, bucketRef, shape{n: 2, rf: T - 10}.item(p), 2, T-10)
		measured(m, bucketRef, 0, 1, 0.9, T, nil)
		spent := failed(shape{n: 2, rf: T, tk: map[string]int64{"wcu": 0}}.item(p))
		ch := NewCharge(m, p, picks(), Options{})
		converse(t, ch.Start(T), ch.Feed, T, []exchange{{"update 0 full", spent}, {c.want, Result{}}})
	}
}

// The one-call create makes shard 0 at one shard without looking for
// shards an earlier life of the bucket left behind: safe only because no
// client doubles a bucket for a request whose plan may create in one call
// (docs/write-paths.md, "Shard 0 after expiry"). A plan that may, at any
// shard count a bucket can reach, is one a client never doubles: for
// rates on both sides of the line, every consumption a request may ask
// (at least one token of some limit), one or two limits.
func TestNoClientDoublesABucketTheOneCallCreateMakes(t *testing.T) {
	rates := []int64{1, 10, 100, 499, 500, 501, 1000, 100_000}
	creates := 0
	for _, a := range rates {
		for _, b := range append([]int64{0}, rates...) {
			limits := []Limit{perSecond("a", a)}
			if b > 0 {
				limits = append(limits, perSecond("b", b))
			}
			for _, consume := range []map[string]int64{{"a": 1}, {"a": a}, {"b": 1}, {"a": 1, "b": 1}} {
				if consume["b"] > 0 && b == 0 {
					continue
				}
				p := NewPlan(bucketRef, limits, consume)
				if !p.createsInOne() {
					continue
				}
				creates++
				for n := int64(1); n <= keys.MaxShards; n *= 2 {
					if !p.fewWrites(n) {
						t.Errorf("limits %d/s and %d/s, consume %v: created in one call, yet a client may double it at %d shards", a, b, consume, n)
					}
				}
			}
		}
	}
	if creates == 0 {
		t.Fatal("no plan creates in one call")
	}
}
