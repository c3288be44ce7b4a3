package engine

import (
	"regexp"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// The reservation writes, clause by clause. Each expression is shown with
// its names and values in place (renderExpr), so that a test says what
// the write does: which attributes it ADDs or SETs, by how much, and on
// what condition.

// renderExpr returns ex's update and condition with every placeholder
// replaced by what it stands for.
func renderExpr(ex store.Expr) string {
	vals := ex.Values
	sub := regexp.MustCompile(`[#:][A-Za-z0-9_]+`)
	f := func(s string) string {
		return sub.ReplaceAllStringFunc(s, func(ph string) string {
			if n, ok := ex.Names[ph]; ok {
				return n
			}
			if v, ok := vals[ph]; ok {
				return v.String()
			}
			return ph
		})
	}
	return f(ex.Update) + " IF " + f(ex.Condition)
}

// holdItem is a shard of p (of n shards) refilled to rf, its limits at tk
// (rf as shape takes it), in hold generation gen (begun at genAt) with
// hd held per limit.
func holdItem(p *Plan, s shape, gen, genAt int64, hd map[string]int64) *Image {
	im, err := Decode(holdRaw(p, s, gen, genAt, hd))
	if err != nil {
		panic(err)
	}
	return im
}

// holdRaw is the item of holdItem.
func holdRaw(p *Plan, s shape, gen, genAt int64, hd map[string]int64) store.Item {
	it := s.item(p)
	it[attrGen], it[attrGenAt] = store.Int(gen), store.Int(genAt)
	for name, v := range hd {
		it["b_"+name+"_hd"] = store.Int(v)
	}
	return it
}

// twoLimits is rps10 and 60 tokens a minute (tpm): per shard of 2, a
// burst of 5 tokens refilling at 5 a second, and of 30 refilling at 30 a
// minute.
var twoLimits = []Limit{rps10, perMinute("tpm", 60)}

func wantExpr(t *testing.T, what string, ex store.Expr, err error, want string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got := renderExpr(ex); got != want {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func TestHoldWriteExpressions(t *testing.T) {
	p := NewPlan(bucketRef, twoLimits, map[string]int64{"rps": 1})
	now := T + 10_000

	// A reservation: rps charged 1 token and 2 more held; it releases
	// 0.5 token of rps and 0.3 of tpm the pool handed out, in generation
	// 4. Every cap moves by the release less the hold, fl and fh by the
	// refill of what the cap and the tokens do not share.
	res := p.WithHold(map[string]int64{"rps": 2000}, map[string]int64{"rps": 500, "tpm": 300}, 4)
	ex, err := build(func(k *builder) { res.emitReserve(k, 2, now, 4, nil) })
	wantExpr(t, "reserve", ex, err,
		"ADD b_rps_tk -3000, b_rps_tc 3000, b_rps_hd 1500, b_rps_fl 300, b_rps_fh 300, b_tpm_tk 0, b_tpm_tc 0, b_tpm_hd -300, b_tpm_fl 600, b_tpm_fh 600, b_wcu_tk -1000, b_wcu_tc 1000, b_wcu_fl 1, b_wcu_fh 1 IF "+
			"(hg = 4) AND (lh = 3231279557889561086) AND (shard_count = 2) AND ((b_rps_tk >= 3000) OR ((b_rps_fh <= 1767225610400) AND (rf >= 1767223810000) AND (attribute_not_exists(hg)))) AND (b_rps_fl > 1767225610000) AND ((b_tpm_tk >= 0) OR ((b_tpm_fh <= 1767225670000) AND (rf >= 1767223810000) AND (attribute_not_exists(hg)))) AND (b_tpm_fl > 1767225610000)")

	// A return of generation 4: the rest (0.6 token of rps) back, the hold
	// (1 token of rps, 0.2 of tpm, all of it handed out) released.
	ret := p.WithReturn(map[string]int64{"rps": 600}, map[string]int64{"rps": 1000, "tpm": 200}, 4)
	ex, err = build(func(k *builder) { ret.emitReturn(k, 2, now) })
	wantExpr(t, "return", ex, err,
		"ADD b_rps_tk 600, b_rps_tc -600, b_rps_hd -1000, b_rps_fl 80, b_rps_fh 80, b_tpm_hd -200, b_tpm_fl 400, b_tpm_fh 400 IF "+
			"(shard_count = 2) AND (hg = 4) AND (attribute_exists(b_rps_tk)) AND (b_rps_fl > 1767225610000) AND (attribute_exists(b_tpm_tk)) AND (b_tpm_fl > 1767225610000)")

	// A return of more rest than hold (a pool that was given refunds):
	// the distance to the cap shrinks, fl and fh move earlier.
	back := p.WithReturn(map[string]int64{"rps": 1500}, map[string]int64{"rps": 1000}, 4)
	ex, err = build(func(k *builder) { back.emitReturn(k, 2, now) })
	wantExpr(t, "return of more rest than hold", ex, err,
		"ADD b_rps_tk 1500, b_rps_tc -1500, b_rps_hd -1000, b_rps_fl -100, b_rps_fh -100 IF "+
			"(shard_count = 2) AND (hg = 4) AND (attribute_exists(b_rps_tk)) AND (b_rps_fl > 1767225610000)")

	// The full write of an item with holds, in the open generation, with
	// a cushion: the balance is the cap (burst less hd) less the charge
	// and the cushion; the new cap is the old one less the new hold.
	im := holdItem(p, shape{n: 2, rf: now - 5000}, 4, now-1000, map[string]int64{"rps": 1000, "tpm": 300})
	ex, err = res.fullHeld(im, 2, now, 40)
	wantExpr(t, "full, same generation", ex, err,
		"SET rf = 1767225610040, ttl = 1767229330, b_rps_tk = 800, b_rps_fl = 1767225610380, b_rps_fh = 1767225610380, b_tpm_tk = 29680, b_tpm_fl = 1767225610680, b_tpm_fh = 1767225610680, b_wcu_tk = 999000, b_wcu_fl = 1767225610041, b_wcu_fh = 1767225610041 ADD b_rps_hd 1500, b_tpm_hd -300, b_rps_tc 3000, b_wcu_tc 1000 IF "+
			"(lh = 3231279557889561086) AND (shard_count = 2) AND (rf < 1767225610000) AND (hg = 4) AND (b_rps_fh <= 1767225610000) AND (b_rps_hd = 1000) AND (b_tpm_fh <= 1767225610000) AND (b_tpm_hd = 300)")

	// The same when the generation is over: a new one, every hd set, and
	// tpm, held by none, still held by none (see
	// TestANewGenerationSeesEveryHoldTakenMeanwhile).
	closed := holdItem(p, shape{n: 2, rf: now - 5000}, 4, now-GenLifeMs, map[string]int64{"rps": 0})
	grab := p.WithHold(map[string]int64{"rps": 2000}, nil, 0)
	ex, err = grab.fullHeld(closed, 2, now, 0)
	wantExpr(t, "full, new generation", ex, err,
		"SET rf = 1767225610000, ttl = 1767229330, hg = 5, hs = 1767225610000, b_rps_hd = 2000, b_rps_tk = 2000, b_rps_fl = 1767225610200, b_rps_fh = 1767225610200, b_tpm_tk = 30000, b_tpm_fl = 1767225610000, b_tpm_fh = 1767225610000, b_wcu_tk = 999000, b_wcu_fl = 1767225610001, b_wcu_fh = 1767225610001 ADD b_rps_tc 3000, b_wcu_tc 1000 IF "+
			"(lh = 3231279557889561086) AND (shard_count = 2) AND (rf < 1767225610000) AND (hg = 4) AND (b_rps_hd = 0) AND (attribute_not_exists(b_tpm_hd)) AND (b_rps_fh <= 1767225610000) AND (b_tpm_fh <= 1767225610000)")

	// A plain write on an item whose generation is reclaimable: the hold
	// of the dead pools goes, in a new generation.
	dead := holdItem(p, shape{n: 2, rf: now - 5000}, 4, now-GenLifeMs-GenSkewMs, map[string]int64{"rps": 1000})
	ex, err = p.fullHeld(dead, 2, now, 0)
	wantExpr(t, "full, reclaiming", ex, err,
		"SET rf = 1767225610000, ttl = 1767229330, hg = 5, hs = 1767225610000, b_rps_hd = 0, b_rps_tk = 3000, b_rps_fl = 1767225610400, b_rps_fh = 1767225610400, b_tpm_tk = 30000, b_tpm_fl = 1767225610000, b_tpm_fh = 1767225610000, b_wcu_tk = 999000, b_wcu_fl = 1767225610001, b_wcu_fh = 1767225610001 ADD b_rps_tc 1000, b_wcu_tc 1000 IF "+
			"(lh = 3231279557889561086) AND (shard_count = 2) AND (rf < 1767225610000) AND (hg = 4) AND (b_rps_hd = 1000) AND (attribute_not_exists(b_tpm_hd)) AND (b_rps_fh <= 1767225610000) AND (b_tpm_fh <= 1767225610000)")
}
