package engine

import (
	"context"
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// The cushion dates a full write h ms ahead and takes h ms of refill from
// every limit. A limit that cannot pay for the charge and the cushion out
// of its burst gets no cushion, and neither do the others: the full write
// would leave that balance below zero, an acquire in debt.
func TestCushionOnlyWhenEveryLimitCanPay(t *testing.T) {
	// 100 a second: 1 % of the burst refills in 10 ms, the most a cushion
	// may take; its 10 ms cost 1 token.
	rps := perSecond("rps", 100)
	big := perSecond("big", 1_000_000)
	for _, tc := range []struct {
		name    string
		limits  []Limit
		consume map[string]int64
		want    int64
	}{
		{"pays", []Limit{rps}, map[string]int64{"rps": 99}, maxCushion},
		{"the whole burst", []Limit{rps}, map[string]int64{"rps": 100}, 0},
		{"one of two cannot pay", []Limit{rps, big}, map[string]int64{"rps": 100, "big": 1}, 0},
		{"both pay", []Limit{rps, big}, map[string]int64{"rps": 50, "big": 1}, maxCushion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPlan(bucketRef, tc.limits, tc.consume)
			if h := p.cushion(nil, 1, 0); h != tc.want {
				t.Fatalf("cushion = %d ms, want %d", h, tc.want)
			}
			// The full write a contended acquire makes leaves no balance
			// below zero.
			clock := memsim.NewManualClock(t0)
			st := memsim.New(memsim.WithClock(clock))
			ctx := context.Background()
			now := clock.Now().UnixMilli()
			if _, err := st.Put(ctx, NewPlan(bucketRef, tc.limits, nil).create(0, 1, now-60_000)); err != nil {
				t.Fatal(err)
			}
			im, _ := Decode(st.Peek(bucketRef.Key()))
			it := contendedFull(t, st, p, im, now)
			for _, l := range tc.limits {
				if tk, _ := it.Int("b_" + l.Name + "_tk"); tk < 0 {
					t.Fatalf("%s: tk = %d after a full write with a cushion: below zero", l.Name, tk)
				}
			}
			if err := guardsHold(it); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// How long the cushion is: maxCushion, at most what refills 1 % of each
// limit's burst; after a round trip longer than that, up to the round trip
// (at most maxLatencyCushion), at most what refills 5 % of each burst, as
// the shard's share of the limit refills it.
func TestCushionLength(t *testing.T) {
	rps := perSecond("rps", 100)                                                                                              // 1 % in 10 ms, 5 % in 50 ms
	tight := Limit{Name: "tight", Limit: bucket.Limit{Capacity: 1000, Burst: 1000, RefillAmount: 10_000, RefillPeriod: 1000}} // 1 % in 1 ms, 5 % in 5 ms
	for _, tc := range []struct {
		name   string
		limit  Limit
		n, lat int64
		want   int64
	}{
		{"no round trip known", rps, 1, 0, maxCushion},
		{"a round trip as long as the cushion", rps, 1, maxCushion, maxCushion},
		{"a longer round trip", rps, 1, 30, 30},
		{"a round trip past the 5 % bound", rps, 1, 80, 50},
		{"at 4 shards: a quarter of the refill", rps, 4, 80, 50},
		{"a burst that refills 1 % in 1 ms", tight, 1, 0, 1},
		{"and 5 % in 5 ms", tight, 1, 30, 5},
		{"a round trip past maxLatencyCushion", perMinute("slow", 60), 1, 500, maxLatencyCushion},
	} {
		p := NewPlan(bucketRef, []Limit{tc.limit}, map[string]int64{tc.limit.Name: 0})
		if h := p.cushion(nil, tc.n, tc.lat); h != tc.want {
			t.Errorf("%s: cushion %d ms, want %d", tc.name, h, tc.want)
		}
	}
}

// With holds, what a limit pays the charge and the cushion out of is its
// cap, the burst less what pools hold: a bucket whose pools hold nearly
// all of its burst gets no cushion, or the full write a contended acquire
// makes there would leave the balance below zero.
func TestCushionOnlyWhenEveryCapCanPay(t *testing.T) {
	rps := perSecond("rps", 100) // a cushion of 10 ms costs 1 token
	for _, tc := range []struct {
		name string
		hold int64 // tokens
		want int64
	}{
		{"cap 90 pays", 10, maxCushion},
		{"cap 2 pays the charge and the cushion", 98, maxCushion},
		{"cap 1 pays the charge only", 99, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := memsim.NewManualClock(t0)
			st := memsim.New(memsim.WithClock(clock))
			now := clock.Now().UnixMilli()
			im := heldItem(t, st, rps, now, tc.hold)
			it := contendedFull(t, st, NewPlan(bucketRef, []Limit{rps}, map[string]int64{"rps": 1}), im, now)
			if tk, _ := it.Int("b_rps_tk"); tk < 0 {
				t.Fatalf("tk = %d after a full write with a cushion under a hold of %d tokens: below zero", tk, tc.hold)
			}
			rf, _ := it.Int(attrRefill)
			if h := rf - now; h != tc.want {
				t.Fatalf("the full write dated rf %d ms ahead, want %d", h, tc.want)
			}
		})
	}
}

// contendedFull makes the write of a contended acquire of p from im (the
// full write, with a cushion) and returns the item it leaves.
func contendedFull(t *testing.T, st *memsim.Store, p *Plan, im *Image, now int64) store.Item {
	t.Helper()
	ex, path, err := p.informed(im, ShardView{}, 1, now, 0, true)
	if err != nil || path != PathFull {
		t.Fatalf("informed write: %v %v, want the full write", path, err)
	}
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err != nil {
		t.Fatal(err)
	}
	return st.Peek(bucketRef.Key())
}

// heldItem stores a bucket of rps made a minute before now, full, with
// pools holding hold tokens of its burst in an open generation, and
// returns its image.
func heldItem(t *testing.T, st *memsim.Store, rps Limit, now, hold int64) *Image {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Put(ctx, NewPlan(bucketRef, []Limit{rps}, nil).create(0, 1, now-60_000)); err != nil {
		t.Fatal(err)
	}
	held, err := store.Build(store.Update{}.Set("b_"+rps.Name+"_hd", store.Int(hold*bucket.MilliPerToken)).
		Set(attrGen, store.Int(1)).Set(attrGenAt, store.Int(now-1000)), store.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, store.UpdateInput{Key: bucketRef.Key(), Expr: held}); err != nil {
		t.Fatal(err)
	}
	im, err := Decode(st.Peek(bucketRef.Key()))
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// A bucket full at a cap below the charge (pools hold nearly all of its
// burst, or more than a shard's share of it after a doubling halved it)
// is not full for that charge: the full write would set the balance to
// the cap less the charge, below zero, and admit what the bucket does not
// have. The blind write is the consumption-only one, which the store
// refuses.
func TestFullWriteOnlyWhenTheCapPaysTheCharge(t *testing.T) {
	rps := perSecond("rps", 100)
	for _, tc := range []struct {
		name     string
		hold     int64
		wantFull bool
	}{
		{"cap 5 pays 5", 95, true},
		{"cap 4 does not", 96, false},
		{"cap 0", 100, false},
		{"a hold above the burst", 150, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := memsim.NewManualClock(t0)
			st := memsim.New(memsim.WithClock(clock))
			now := clock.Now().UnixMilli()
			im := heldItem(t, st, rps, now, tc.hold)
			p := NewPlan(bucketRef, []Limit{rps}, map[string]int64{"rps": 5})
			ex, path, err := p.blind(&ShardView{Img: im, At: now, OwnRefill: true}, 1, now, 0.999, PathNone, false)
			if err != nil {
				t.Fatal(err)
			}
			if full := path == PathFull; full != tc.wantFull {
				t.Fatalf("blind write %v, want the full write %v", path, tc.wantFull)
			}
			_, err = st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex})
			if tk, _ := st.Peek(bucketRef.Key()).Int("b_rps_tk"); tk < 0 {
				t.Fatalf("tk = %d after the %v write (err %v): below zero", tk, path, err)
			}
		})
	}
}
