package engine

import (
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
