package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
	"github.com/shardlimit/limiter/store/storetest"
)

// The writes' expressions at their edges, each made on memsim: what they
// require of the item, and what they leave in it (the expiry included).

// apply makes ex on st's item of bucketRef's shard 0, returning the error.
func apply(st interface {
	Update(context.Context, store.UpdateInput) (store.WriteOutput, error)
}, ex store.Expr) error {
	_, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex, ReturnOldOnConditionFailure: true})
	return err
}

// Every blind write requires the limits hash it was computed for: a full
// write of the old configuration must not reset an item rewritten for a
// new one (its burst, and the fl/fh it sets, would be the old one's).
func TestTheFullWriteRequiresTheLimitsHash(t *testing.T) {
	old := plan1(bucketRef)
	now := NewPlan(bucketRef, []Limit{perSecond("rps", 20)}, map[string]int64{"rps": 1})
	st := sim(t, shape{rf: T - 5000}.item(now))
	ex, err := old.full(nil, 1, T, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := apply(st, ex); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("the old configuration's full write: %v, want a condition failure", err)
	}
}

// The full write sets the expiry from the balances it leaves; the normal
// write moves it by its change (ADD: an adjust may have pushed it
// meanwhile) and requires that the item has one.
func TestWritesKeepTheExpiry(t *testing.T) {
	p := plan1(bucketRef)
	stale := shape{rf: T - 5000}.item(p)
	stale[store.AttrTTL] = store.Int(1) // long past
	st := sim(t, stale)
	ex, _ := p.full(nil, 1, T, 0)
	if err := apply(st, ex); err != nil {
		t.Fatal(err)
	}
	if got, want := attr(t, st, bucketRef, 0, store.AttrTTL), p.ttl(nil, 1, T); got != want {
		t.Fatalf("ttl %d after the full write, want %d", got, want)
	}

	// A normal write: its change to the expiry lands on top of what an
	// adjust pushed meanwhile.
	im := image(t, shape{rf: T - 200, tk: map[string]int64{"rps": 500}}.item(p))
	st = sim(t, im.raw)
	seen, _ := im.raw.Int(store.AttrTTL)
	push := map[string]int64{store.AttrTTL: seen + 60}
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(),
		Expr: storetest.Build(t, store.Update{}.Set(store.AttrTTL, store.Int(push[store.AttrTTL])), store.Condition{})}); err != nil {
		t.Fatal(err)
	}
	ex, _ = p.normal(im, 1, T, true, nil)
	if err := apply(st, ex); err != nil {
		t.Fatal(err)
	}
	want := p.ttl([]int64{500 + 2000 - 1000, 1_000_000 - 1000}, 1, T) + 60
	if got := attr(t, st, bucketRef, 0, store.AttrTTL); got != want {
		t.Fatalf("ttl %d after the normal write, want %d (its change on top of the push)", got, want)
	}
	noTTL := im.raw.Clone()
	delete(noTTL, store.AttrTTL)
	st = sim(t, noTTL)
	if err := apply(st, ex); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("the normal write on an item without an expiry: %v, want a condition failure", err)
	}
}

// The normal write takes the lock of the image it was computed from: rf,
// the limits hash and the shard count. A write computed from an image of
// other limits fails when the item's hash moved on.
func TestTheNormalWriteRequiresTheImagesHash(t *testing.T) {
	p := plan1(bucketRef)
	im := image(t, shape{rf: T - 200, tk: map[string]int64{"rps": 500}}.item(p))
	moved := im.raw.Clone()
	moved[attrLimitsHash] = store.Int(p.hash + 1) // rewritten for another configuration, same rf
	st := sim(t, moved)
	ex, _ := p.normal(im, 1, T, true, nil)
	if err := apply(st, ex); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("a normal write over an item of another configuration: %v, want a condition failure", err)
	}
	// And it sets the hash of the limits it writes for.
	other := NewPlan(bucketRef, []Limit{perSecond("rps", 20)}, map[string]int64{"rps": 1})
	st = sim(t, im.raw)
	ex, _ = other.normal(im, 1, T, true, nil)
	if err := apply(st, ex); err != nil || attr(t, st, bucketRef, 0, attrLimitsHash) != other.hash {
		t.Fatalf("%v: hash %d, want the new configuration's", err, attr(t, st, bucketRef, 0, attrLimitsHash))
	}
	st = sim(t, im.raw)
	ex, _ = p.normal(im, 1, T, true, nil)
	if err := apply(st, ex); err != nil || attr(t, st, bucketRef, 0, attrLimitsHash) != p.hash {
		t.Fatalf("%v: hash %d, want the plan's", err, attr(t, st, bucketRef, 0, attrLimitsHash))
	}
}

// A normal write that changes the per-shard rate (a new shard count, or
// new limits) carries fl and fh over by ADDs: a consumption-only write
// that landed between the read and this write moved them by refill times
// at the old rate. It therefore requires the tokens exactly as seen, and
// fails over such a write.
func TestARescalingNormalWriteRequiresTheTokensAsSeen(t *testing.T) {
	p := plan1(bucketRef)
	item := shape{rf: T - 200, tk: map[string]int64{"rps": 5000}}.item(p)
	im := image(t, item)
	for _, c := range []struct {
		name string
		plan *Plan
		n    int64
	}{
		{"at a new shard count", p, 2},
		{"for new limits", NewPlan(bucketRef, []Limit{perSecond("rps", 20)}, map[string]int64{"rps": 1}), 1},
	} {
		st := sim(t, item)
		spec, _ := p.speculative(nil, 1, T-100, nil, false) // another writer, at the old count
		if err := apply(st, spec); err != nil {
			t.Fatal(err)
		}
		ex, err := c.plan.normal(im, c.n, T, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := apply(st, ex); !errors.Is(err, store.ErrConditionFailed) {
			t.Errorf("%s: the normal write over a consumption it did not see: %v, want a condition failure", c.name, err)
		}
	}
}

// The expiry covers a debt: an hour after twice the time the deepest
// balance needs to be full again (a balance of zero or more counts as
// empty). Also for a plan of the most limits a request may have (16,
// and with the hidden one 17).
func TestTheExpiryCoversDebt(t *testing.T) {
	p := plan1(bucketRef) // rps10: 10 a ms
	if got, want := p.ttl([]int64{-20_000, 0}, 1, T), (T+2*3000)/1000+3600; got != want {
		t.Fatalf("ttl with a debt of 2 bursts: %d, want %d", got, want)
	}
	if got, want := p.ttl([]int64{5000, 1_000_000}, 1, T), (T+2*1000)/1000+3600; got != want {
		t.Fatalf("ttl with no debt: %d, want %d (from empty)", got, want)
	}
	if got, want := p.ttl([]int64{0, 0}, 2, T), (T+2*1000)/1000+3600; got != want {
		t.Fatalf("ttl at 2 shards: %d, want %d", got, want)
	}

	// The normal write of an adjust (no floors) leaving a debt sets an
	// expiry that covers it, for a plan of 16 specs and of 17.
	for _, n := range []int{15, 16} {
		var limits []Limit
		amounts := map[string]int64{}
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("l%02d", i)
			limits = append(limits, perSecond(name, 10))
			amounts[name] = 0
		}
		amounts["l00"] = 30 // 3 bursts: 2 bursts of debt
		q := NewPlan(bucketRef, limits, amounts)
		st := normalOn(t, q, image(t, shape{rf: T}.item(q)))
		got := attr(t, st, bucketRef, 0, store.AttrTTL)
		covers := (T+2*3000)/1000 + 3600
		if got != covers {
			t.Errorf("%d specs: ttl %d, want %d (the debt's refill twice, and an hour)", len(q.specs), got, covers)
		}
	}
}

// An adjust that charges pushes the expiry by twice its refill time (it
// may deepen a debt the expiry must cover), rounded up to a second; a
// refund pushes nothing. It never makes a limit the item lacks: a removed
// limit stays removed.
func TestTheAdjustPushesTheExpiryAndMakesNoLimit(t *testing.T) {
	p := plan1(bucketRef)
	for _, c := range []struct {
		amount int64
		push   int64
	}{{1000, 1}, {5000, 1}, {5001, 2}, {-5000, 0}} {
		item := shape{rf: T, tk: map[string]int64{"rps": 5000}}.item(p)
		before, _ := item.Int(store.AttrTTL)
		st := sim(t, item)
		ex, err := p.WithAmounts(map[string]int64{"rps": c.amount}).adjust(1, T)
		if err != nil {
			t.Fatal(err)
		}
		if err := apply(st, ex); err != nil {
			t.Fatal(err)
		}
		if got := attr(t, st, bucketRef, 0, store.AttrTTL) - before; got != c.push {
			t.Errorf("adjust of %d: expiry pushed %d s, want %d", c.amount, got, c.push)
		}
	}
	without := NewPlan(bucketRef, []Limit{perSecond("tpm", 10)}, nil)
	st := sim(t, shape{rf: T}.item(without))
	ex, _ := p.WithAmounts(map[string]int64{"rps": -1000}).adjust(1, T)
	if err := apply(st, ex); !errors.Is(err, store.ErrConditionFailed) || st.Peek(bucketRef.Key())["b_rps_tk"] != (store.Value{}) {
		t.Fatalf("a refund of a limit the item lacks: %v, want a condition failure and no limit made", err)
	}
}

// A create that lost to another creator goes on from the item the winner
// made: the Put asks for it.
func TestTheCreateAsksForTheItemItLostTo(t *testing.T) {
	for _, debit := range []bool{false, true} {
		if put := plan1(bucketRef).createWith(0, 1, T, debit); !put.ReturnOldOnConditionFailure {
			t.Fatalf("debit %v: the create's Put does not return the item it lost to", debit)
		}
	}
	_ = bucket.MilliPerToken
}

// An adjust that lost a race remembers the item its failed write
// returned, as a charge does: the next acquire starts from it.
func TestAFailedAdjustIsRemembered(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	a := NewAdjust(m, p.WithAmounts(map[string]int64{"rps": 2000}), 0, 1)
	a.Start(T)
	full := shape{rf: T - 5000, tk: map[string]int64{"rps": 3000}}.item(p)
	if s := a.Feed(failed(full), T); s.Call == nil {
		t.Fatalf("after the failed adjust: %q, want another write", describe(s))
	}
	if v := m.View(bucketRef, 0); v.Img == nil || v.Img.rf != T-5000 {
		t.Fatalf("remembered %+v, want the item the failed write returned", v.Img)
	}
}

// normalOn makes q's normal write at T, computed from im, on a store that
// holds im's item, and returns the store.
func normalOn(t *testing.T, q *Plan, im *Image) *memsim.Store {
	t.Helper()
	st := sim(t, im.raw)
	ex, err := q.normal(im, 1, T, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := apply(st, ex); err != nil {
		t.Fatal(err)
	}
	return st
}

// The normal write that brings an item to new limits (no template: it
// adds, rewrites and rescales) sets the expiry from the balances it
// leaves, debt included, by its change from the one the item had.
func TestARewritingNormalWriteKeepsTheExpiry(t *testing.T) {
	old := plan1(bucketRef)
	im := image(t, shape{rf: T - 5000}.item(old))                                              // full
	q := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"rps": 30}) // 3 bursts: 2 of debt
	st := normalOn(t, q, im)
	if got, want := attr(t, st, bucketRef, 0, store.AttrTTL), (T+2*3000)/1000+3600; got != want {
		t.Fatalf("ttl %d, want %d (the debt's refill twice, and an hour)", got, want)
	}
}

// A limit new to an item starts full, as in a new bucket, with its total
// consumed: also a limit the request charges nothing of. Without its
// total the item could not be decoded, and every acquire of the bucket
// failed from then on.
func TestANormalWriteAddsALimitChargedNothing(t *testing.T) {
	old := plan1(bucketRef)
	im := image(t, shape{rf: T - 5000}.item(old))
	q := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"rps": 1})
	st := normalOn(t, q, im)
	if _, err := Decode(st.Peek(bucketRef.Key())); err != nil {
		t.Fatalf("the item the write left: %v", err)
	}
	if tc, tk := attr(t, st, bucketRef, 0, "b_tpm_tc"), attr(t, st, bucketRef, 0, "b_tpm_tk"); tc != 0 || tk != 10_000 {
		t.Fatalf("tpm: tc %d, tk %d; want 0 and its burst, 10000", tc, tk)
	}
	if tc := attr(t, st, bucketRef, 0, "b_rps_tc"); tc != 1000 {
		t.Fatalf("rps: tc %d, want 1000", tc)
	}
}
