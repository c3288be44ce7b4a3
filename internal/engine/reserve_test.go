package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// Reserve's choices, from the client's last image of the shard: decline
// (the caller charges the plain way), the full write, the consumption-only
// write in the open generation, or the normal write. rps10 on one shard;
// the reservation charges 1 token and holds 2 more.

var resNow = T + 100_000

func resPlan() *Plan { return plan1(bucketRef) }

func reservation() *Plan { return resPlan().WithHold(map[string]int64{"rps": 2000}, nil, 0) }

// resItem is the shard in hold generation 4 begun at genAt, holding hd of
// rps, refilled to rf with tk millitokens of rps (tk < 0: the burst).
func resItem(rf, tk, genAt, hd int64, more func(store.Item)) store.Item {
	s := shape{rf: rf}
	if tk >= 0 {
		s.tk = map[string]int64{"rps": tk}
	}
	it := holdRaw(resPlan(), s, 4, genAt, map[string]int64{"rps": hd})
	if more != nil {
		more(it)
	}
	return it
}

func TestReserveChooses(t *testing.T) {
	open := resNow - 1000 // a generation begun a second ago
	for _, c := range []struct {
		name   string
		item   store.Item // the client's last image (nil: none)
		plan   *Plan
		others float64 // others' writes a ms, measured 8 ms before now
		want   string  // "declined" or the call
	}{
		{"no image", nil, nil, 0, "declined"},
		{"a generation ended, its pools not back", resItem(resNow-5000, -1, resNow-GenLifeMs, 1000, nil), nil, 0, "declined"},
		{"a generation ended with nothing held", resItem(resNow-5000, -1, resNow-GenLifeMs, 0, nil), nil, 0, "update 0 full"},
		{"a generation reclaimable", resItem(resNow-5000, -1, resNow-GenLifeMs-GenSkewMs, 1000, nil), nil, 0, "update 0 full"},
		{"a release of another generation", resItem(resNow-5000, -1, open, 1000, nil),
			resPlan().WithHold(map[string]int64{"rps": 2000}, map[string]int64{"rps": 500}, 3), 0, "declined"},
		{"a release of this generation", resItem(resNow-5000, -1, open, 1000, nil),
			resPlan().WithHold(map[string]int64{"rps": 2000}, map[string]int64{"rps": 500}, 4), 0, "update 0 full"},
		{"a hot partition (wcu spent) is no shortfall", resItem(resNow, 5000, open, 0, func(it store.Item) { it["b_wcu_tk"] = store.Int(0) }), nil, 0, "update 0 normal"},
		{"too few tokens", resItem(resNow, 2000, open, 0, nil), nil, 0, "declined"},
		{"full, alone", resItem(resNow-5000, -1, open, 0, nil), nil, 0, "update 0 full"},
		{"full, half a write of others since", resItem(resNow-5000, -1, open, 0, nil), nil, 0.0625, "update 0 speculative"},
		{"at its cap, refilled now: the stored tokens pay", resItem(resNow, -1, open, 0, nil), nil, 0, "update 0 speculative"},
		{"exactly the tokens, at a cap lowered by holds", resItem(resNow, 3000, open, 7000, func(it store.Item) {
			it["b_rps_fl"], it["b_rps_fh"] = store.Int(resNow), store.Int(resNow) // full at its cap
		}), nil, 0, "update 0 speculative"},
		{"the refill pays, not the stored tokens", resItem(resNow-500, 0, open, 0, func(it store.Item) {
			fh, _ := it.Int("b_rps_fh")
			it["b_rps_fh"] = store.Int(fh + 1000)
		}), nil, 0, "update 0 normal"},
		{"the last instant of an open generation", resItem(resNow, -1, resNow+minPoolMs-GenLifeMs, 0, nil), nil, 0, "update 0 speculative"},
		{"a generation too short to reserve in", resItem(resNow, -1, resNow+minPoolMs-GenLifeMs-1, 0, nil), nil, 0, "update 0 normal"},
	} {
		m := NewMemory(16)
		if c.item != nil {
			knows(t, m, bucketRef, c.item, 1, resNow-8)
		}
		if c.others != 0 {
			measured(m, bucketRef, 0, c.others, c.others, resNow-8, nil)
		}
		p := c.plan
		if p == nil {
			p = reservation()
		}
		r := NewReserve(m, p, picks(), 0)
		step := r.Start(resNow)
		got := describe(step)
		if r.Declined {
			got = "declined"
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
			continue
		}
		if step.Call != nil && !step.Call.Update.ReturnOldOnConditionFailure {
			t.Errorf("%s: the write does not ask for the item when its condition fails", c.name)
		}
		if step.Path == PathNormal { // with floors: an acquire's normal write
			want, err := p.normal(image(t, c.item), 1, resNow, true, nil)
			if err != nil || !want.Equal(step.Call.Update.Expr) {
				t.Errorf("%s: the normal write is not the acquire's (%v):\n got %s\nwant %s", c.name, err, renderExpr(step.Call.Update.Expr), renderExpr(want))
			}
		}
	}
}

// NewReserve keeps the shard it is given when the bucket has it, else
// draws one.
func TestReserveShard(t *testing.T) {
	m := NewMemory(16)
	it := shape{shard: 3, n: 4, rf: resNow - 5000}.item(resPlan())
	knows(t, m, bucketRef, it, 4, resNow)
	for _, c := range []struct{ asked, draw, want int }{{0, 2, 0}, {3, 1, 3}, {4, 1, 1}, {-1, 2, 2}} {
		if r := NewReserve(m, reservation(), picks(c.draw), c.asked); r.shard != c.want || r.n != 4 {
			t.Errorf("shard %d asked: %d of %d, want %d of 4", c.asked, r.shard, r.n, c.want)
		}
	}
}

// capped is the shard at its cap (the normal write), in generation 4.
var capped = resItem(resNow, -1, resNow-1000, 0, nil)

// reserveAtCap returns a memory that knows the shard capped and the
// reservation p of it.
func reserveAtCap(t *testing.T, p *Plan) (*Memory, *Reserve) {
	t.Helper()
	m := NewMemory(16)
	knows(t, m, bucketRef, capped, 1, resNow)
	return m, NewReserve(m, p, picks(), 0)
}

// After a failed write the reservation goes on from the item the store
// returned, which it learns: the full write with a cushion when that item
// is full (it lost a race), at most maxReserveWrites writes in all.
func TestReserveAfterAFailedWrite(t *testing.T) {
	m, r := reserveAtCap(t, reservation())
	step := r.Start(resNow)
	full := resItem(resNow-5000, -1, resNow-1000, 250, nil)
	lost := failed(full)
	lost.Sent = resNow - 30
	step = r.Feed(lost, resNow)
	if describe(step) != "update 0 full" {
		t.Fatalf("after losing to a full item: %s, want the full write", describe(step))
	}
	if v := m.View(bucketRef, 0); v.Img == nil || v.Img.hold(&r.p.specs[0]) != 250 {
		t.Fatalf("the item the store returned was not learned: %+v", v.Img)
	}
	h := r.p.cushion(image(t, full), 1, 30)
	want, err := r.p.withBilled(1).fullHeld(image(t, full), 1, resNow, h) // the failed write billed
	if h <= 0 || err != nil || !want.Equal(step.Call.Update.Expr) {
		t.Fatalf("the full write after a lost race (cushion %d, %v):\n got %s\nwant %s", h, err, renderExpr(step.Call.Update.Expr), renderExpr(want))
	}
	writes := 2
	for ; writes < 10; writes++ {
		if step = r.Feed(failed(capped), resNow); step.Call == nil {
			break
		}
	}
	if !r.Declined || writes != maxReserveWrites {
		t.Fatalf("%d writes, declined %v; want %d writes, then declined", writes, r.Declined, maxReserveWrites)
	}
}

// What the reservation's write returns ends it: its generation and the
// pool's life when it landed, an error when the item has no generation or
// the outcome is unknown or the partition throttled it, a decline when
// another error says it was not applied.
func TestReserveFeed(t *testing.T) {
	landed := resItem(resNow, 7000, resNow-GenLifeMs+500, 2000, nil)
	for _, c := range []struct {
		name string
		res  Result
		want string // "done", "declined", "err"
	}{
		{"landed", wrote(landed), "done"},
		{"landed without a generation", wrote(shape{rf: resNow}.item(resPlan())), "err"},
		{"nothing returned", wrote(nil), "err"},
		{"unknown", unknown, "err"},
		{"throttled", throttle, "err"},
		{"not applied", erred(errors.New("transaction conflict")), "declined"},
		{"the item is gone", gone, "declined"},
	} {
		m := NewMemory(16)
		knows(t, m, bucketRef, resItem(resNow-5000, -1, resNow-1000, 0, nil), 1, resNow)
		r := NewReserve(m, reservation(), picks(), 0)
		if step := r.Start(resNow); step.Call == nil {
			t.Fatalf("%s: no write", c.name)
		}
		step := r.Feed(c.res, resNow)
		got := "err"
		switch {
		case step.Err != nil:
		case step.Done && r.Declined:
			got = "declined"
		case step.Done:
			got = "done"
		default:
			got = describe(step)
		}
		if got != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, got, step.Err, c.want)
			continue
		}
		if got == "done" {
			if r.Gen != 4 || r.Shard != 0 || r.N != 1 || r.Until != resNow+500 {
				t.Errorf("%s: generation %d on shard %d of %d until %d, want 4 on 0 of 1 until %d (the generation's end)", c.name, r.Gen, r.Shard, r.N, r.Until, resNow+500)
			}
			if v := m.View(bucketRef, 0); v.Img == nil || v.Img.hold(&r.p.specs[0]) != 2000 {
				t.Errorf("%s: the item written was not learned", c.name)
			}
		}
	}
}

// A reservation that starts a new generation (the last one ended by its
// clock) while another process, whose clock lags, still reserves in the
// old one: the first sets every limit's balance from the holds it saw, so
// its write must fail if the other's hold landed meanwhile, also on a
// limit the first holds nothing of. Else the balance is set to the whole
// burst beside the other's hold, and the bucket and the pool together
// hold more than the burst.
func TestANewGenerationSeesEveryHoldTakenMeanwhile(t *testing.T) {
	limits := []Limit{rps10, perSecond("tpm", 100)} // tpm: 100 millitokens a ms
	p := NewPlan(bucketRef, limits, nil)
	nowB := T + 50_000
	nowA := nowB + 100
	genAt := nowB + minPoolMs - GenLifeMs // open at nowB, closed at nowA
	it := shape{rf: nowB - 10, tk: map[string]int64{"tpm": 100_000 - 1500}}.item(p)
	it[attrGen], it[attrGenAt] = store.Int(4), store.Int(genAt)
	st := sim(t, it)

	// A knows the item as it was: full by its clock, in a generation over.
	mA := NewMemory(16)
	knows(t, mA, bucketRef, it, 1, nowA-1)
	// B reserves tpm in generation 4 (open by its clock): tpm is below
	// its cap at nowB.
	b := NewPlan(bucketRef, limits, map[string]int64{"tpm": 1}).WithHold(map[string]int64{"tpm": 1000}, nil, 0)
	ex, err := build(func(k *builder) { b.emitReserve(k, 1, nowB, 4, nil) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.WithShard(0).Key(), Expr: ex}); err != nil {
		t.Fatalf("B's reservation: %v", err)
	}
	// A reserves rps: a new generation, by the full write.
	a := NewReserve(mA, NewPlan(bucketRef, limits, map[string]int64{"rps": 1}).WithHold(map[string]int64{"rps": 1000}, nil, 0), picks(), 0)
	step := a.Start(nowA)
	if describe(step) != "update 0 full" {
		t.Fatalf("A: %q, want the full write of a new generation", describe(step))
	}
	if res := exec(t, st, step); res.Err == nil {
		tk, hd := attr(t, st, bucketRef, 0, "b_tpm_tk"), attr(t, st, bucketRef, 0, "b_tpm_hd")
		t.Fatalf("A's full write landed over B's hold: tpm holds %d and the pools %d, above the burst of 100,000", tk, hd)
	}
}

// A reservation that releases what the pool handed out of a limit it does
// not charge moves that limit's cap: the consumption-only write needs it
// below its cap (fl > now) as much as a charged one. After a failed write
// that shows it at its cap, the reservation takes the normal write, not
// the consumption-only write again.
func TestAReleaseAtItsCapTakesTheNormalWrite(t *testing.T) {
	p := NewPlan(bucketRef, twoLimits, map[string]int64{"rps": 1})
	res := p.WithHold(map[string]int64{"rps": 2000}, map[string]int64{"tpm": 300}, 4)
	m := NewMemory(16)
	below := holdRaw(p, shape{rf: resNow - 100, tk: map[string]int64{"rps": 5000, "tpm": 20_000}}, 4, resNow-1000, map[string]int64{"tpm": 300})
	knows(t, m, bucketRef, below, 1, resNow)
	r := NewReserve(m, res, picks(), 0)
	if got := describe(r.Start(resNow)); got != "update 0 speculative" {
		t.Fatalf("from below the caps: %q, want the consumption-only write", got)
	}
	capped := holdRaw(p, shape{rf: resNow - 100, tk: map[string]int64{"rps": 5000}}, 4, resNow-1000, map[string]int64{"tpm": 300})
	if got := describe(r.Feed(failed(capped), resNow)); got != "update 0 normal" {
		t.Fatalf("tpm at its cap: %q, want the normal write", got)
	}
}

// DynamoDB bills a failed conditional write like one that lands, and the
// shard's wcu_tc counts what its partition billed (the rate a doubling
// is judged by). A reservation's failed writes are billed as the charge
// path's are: its next write charges the hidden limit for them, and when
// it declines after them, they are left for the next write to the shard
// (the plain charge that follows takes them).
func TestReserveBillsItsFailedWrites(t *testing.T) {
	m, r := reserveAtCap(t, reservation())
	step := r.Start(resNow)
	if got := renderExpr(step.Call.Update.Expr); !strings.Contains(got, "b_wcu_tc 1000") {
		t.Fatalf("the first write charges wcu_tc other than one unit: %s", got)
	}
	full := resItem(resNow-5000, -1, resNow-1000, 250, nil)
	step = r.Feed(failed(full), resNow)
	if got := renderExpr(step.Call.Update.Expr); describe(step) != "update 0 full" || !strings.Contains(got, "b_wcu_tc 2000") {
		t.Fatalf("after one failed write: %s, want the full write charging wcu_tc two units: %s", describe(step), got)
	}
	for step.Call != nil {
		step = r.Feed(failed(capped), resNow)
	}
	if !r.Declined {
		t.Fatal("the reservation did not decline after its last failed write")
	}
	if taken, _, _ := m.enter(bucketRef, 0, resNow); taken != maxReserveWrites {
		t.Fatalf("the next write to the shard charges %d failed writes, want the reservation's %d", taken, maxReserveWrites)
	}

	// A reservation that releases part of its pool's hold does so in the
	// generation it names, also in the write that charges a failed one.
	m, r = reserveAtCap(t, resPlan().WithHold(map[string]int64{"rps": 2000}, map[string]int64{"rps": 500}, 4))
	r.Start(resNow)
	step = r.Feed(failed(full), resNow)
	if got := renderExpr(step.Call.Update.Expr); !strings.Contains(got, "b_wcu_tc 2000") || !strings.Contains(got, "(hg = 4)") {
		t.Fatalf("the write after a failed one does not charge it or does not name the pool's generation 4: %s", got)
	}

	// A reservation that declines without writing leaves the failed writes
	// it found carried for the charge that follows.
	m.carry(bucketRef, 0, 2, false, resNow)
	r = NewReserve(m, reservation(), picks(), 0)
	if step = r.Start(resNow); step.Call == nil {
		t.Fatal("no write")
	}
	if got := renderExpr(step.Call.Update.Expr); !strings.Contains(got, "b_wcu_tc 3000") {
		t.Fatalf("the write does not charge the two failed writes carried on the shard: %s", got)
	}
	step = r.Feed(erred(&store.ThrottledError{}), resNow)
	if taken, _, _ := m.enter(bucketRef, 0, resNow); step.Err == nil || taken != 2 {
		t.Fatalf("a throttled reservation (err %v) leaves %d failed writes to the shard's next write, want the 2 it took (a throttled write is not billed)", step.Err, taken)
	}
}
