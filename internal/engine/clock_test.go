package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// A client whose clock lags behind the item's rf (another client, with a
// faster clock, refilled it) still moves rf forward with every write that
// refills (the normal write, from an acquire or an adjust): to rf + 1, not
// to its own now. rf is the lock of the refill: a write that left it
// where it was, or moved it back, would let a second writer holding the
// same item refill it again (rf = :seen still holds), crediting the same
// stretch twice and adding the fl and fh corrections twice.
func TestLaggingClientMovesRefillForward(t *testing.T) {
	for _, tc := range []struct {
		name   string
		floors bool // an acquire's normal write; an adjust's has none
	}{{"acquire", true}, {"adjust", false}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := memsim.NewManualClock(t0)
			st := memsim.New(memsim.WithClock(clock))
			ctx := context.Background()
			p := NewPlan(bucketRef, []Limit{perSecond("rps", 100)}, map[string]int64{"rps": 30})
			start := clock.Now().UnixMilli()
			if _, err := st.Put(ctx, p.create(0, 1, start)); err != nil {
				t.Fatal(err)
			}
			key := bucketRef.Key()
			update := func(ex store.Expr) error {
				_, err := st.Update(ctx, store.UpdateInput{Key: key, Expr: ex, ReturnOldOnConditionFailure: true})
				return err
			}
			read := func() *Image {
				im, err := Decode(st.Peek(key))
				if err != nil {
					t.Fatal(err)
				}
				return im
			}
			// A client with a fast clock refills the bucket at start + 1 s.
			fast := start + 1000
			ex, _ := p.normal(read(), 1, fast, true, nil)
			if err := update(ex); err != nil {
				t.Fatal(err)
			}
			seen := read()
			if seen.rf != fast {
				t.Fatalf("rf = %d, want %d", seen.rf, fast)
			}
			// Two clients hold that item: one lags 400 ms behind it.
			lagging := fast - 400
			ex, _ = p.normal(seen, 1, lagging, tc.floors, nil)
			if err := update(ex); err != nil {
				t.Fatalf("the lagging client's normal write: %v", err)
			}
			if rf := read().rf; rf <= seen.rf {
				t.Fatalf("the lagging client's normal write left rf at %d, from %d: it must move forward", rf, seen.rf)
			}
			if err := guardsHold(st.Peek(key)); err != nil {
				t.Fatal(err)
			}
			// The other holder of the same item must lose the rf race.
			ex, _ = p.normal(seen, 1, fast+10, tc.floors, nil)
			if err := update(ex); !errors.Is(err, store.ErrConditionFailed) {
				t.Fatalf("a second normal write from the same item: %v, want a condition failure (the refill would count twice)", err)
			}
		})
	}
}

// The machines of a lagging client never move rf backwards, whichever
// write they end on.
func TestLaggingClientNeverMovesRefillBack(t *testing.T) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	ctx := context.Background()
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100)}, map[string]int64{"rps": 10})
	start := clock.Now().UnixMilli()
	if _, err := st.Put(ctx, p.create(0, 1, start)); err != nil {
		t.Fatal(err)
	}
	clock.Add(5 * time.Second)
	fast := NewMemory(0)
	fastNow := func() int64 { return clock.Now().UnixMilli() }
	lag := NewMemory(0)
	lagNow := func() int64 { return clock.Now().UnixMilli() - 2000 }
	rfOf := func() int64 { rf, _ := st.Peek(bucketRef.Key()).Int(attrRefill); return rf }
	for i := 0; i < 40; i++ {
		mem, now := fast, fastNow
		if i%2 == 1 {
			mem, now = lag, lagNow
		}
		before := rfOf()
		c := NewCharge(mem, p, newRand(uint64(i)), Options{})
		step, _ := drive(st, now, c.Start(now()), c.Feed)
		if step.Err != nil {
			t.Fatal(step.Err)
		}
		if rf := rfOf(); rf < before {
			t.Fatalf("acquire %d moved rf back from %d to %d", i, before, rf)
		}
		if step.Done && i%4 == 1 {
			a := NewAdjust(mem, p.WithAmounts(map[string]int64{"rps": 5_000}), c.Shard, c.N)
			before = rfOf()
			if step, _ := drive(st, now, a.Start(now()), a.Feed); step.Err != nil {
				t.Fatal(step.Err)
			}
			if rf := rfOf(); rf < before {
				t.Fatalf("adjust %d moved rf back from %d to %d", i, before, rf)
			}
		}
		if err := guardsHold(st.Peek(bucketRef.Key())); err != nil {
			t.Fatalf("after acquire %d: %v", i, err)
		}
		clock.Add(150 * time.Millisecond)
	}
}

// The full write sets the balance, where other writes ADD to it; it is
// safe only because it moves rf, so that a normal write computed from the
// item before it fails its lock (rf = :seen). In the millisecond of the
// item's rf it would leave rf where it was: it is conditional on rf < now.
// Here a client with an old image refills 40 ms later from it: had the
// full write landed, the old image's tokens (16) would be the base of a
// delta added to the 30 the full write set.
func TestFullWriteMovesRefillForward(t *testing.T) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	ctx := context.Background()
	key := bucketRef.Key()
	limits := []Limit{perSecond("rps", 32)}
	now := clock.Now().UnixMilli()
	half := NewPlan(bucketRef, limits, map[string]int64{"rps": 16})
	if _, err := st.Put(ctx, half.create(0, 1, now)); err != nil {
		t.Fatal(err)
	}
	old, _ := Decode(st.Peek(key)) // 16 tokens at rf = now
	// A refund of those 16 in the same millisecond: full again, rf unmoved.
	refund := NewAdjust(NewMemory(0), half.WithAmounts(map[string]int64{"rps": -16_000}), 0, 1)
	if step, _ := drive(st, clock.Now().UnixMilli, refund.Start(now), refund.Feed); !step.Done {
		t.Fatalf("refund: %+v", step)
	}
	full, _ := NewPlan(bucketRef, limits, map[string]int64{"rps": 2}).full(nil, 1, now, 0)
	_, err := st.Update(ctx, store.UpdateInput{Key: key, Expr: full})
	if !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("a full write in the millisecond of rf: %v, want a condition failure", err)
	}
	// A full write a millisecond later moves rf; the old image's normal
	// write then loses the race.
	clock.Add(time.Millisecond)
	full, _ = NewPlan(bucketRef, limits, map[string]int64{"rps": 2}).full(nil, 1, now+1, 0)
	if _, err := st.Update(ctx, store.UpdateInput{Key: key, Expr: full}); err != nil {
		t.Fatal(err)
	}
	clock.Add(40 * time.Millisecond)
	normal, _ := NewPlan(bucketRef, limits, map[string]int64{"rps": 17}).normal(old, 1, now+41, true, nil)
	if _, err := st.Update(ctx, store.UpdateInput{Key: key, Expr: normal}); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("a normal write from the item before the full write: %v, want a condition failure", err)
	}
	if err := guardsHold(st.Peek(key)); err != nil {
		t.Fatal(err)
	}
}

// An adjust that refunds by a normal write (its charge of another limit
// met a full bucket) fills the refunded limit up to its burst, no further.
func TestRefundByANormalWriteStopsAtTheBurst(t *testing.T) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	ctx := context.Background()
	now := func() int64 { return clock.Now().UnixMilli() }
	limits := []Limit{perSecond("rpm", 2), perSecond("tpm", 2)}
	p := NewPlan(bucketRef, limits, nil)
	if _, err := st.Put(ctx, p.create(0, 1, now())); err != nil { // both full
		t.Fatal(err)
	}
	// rpm +1 needs the refill materialized (the bucket is full): a normal
	// write, which also refunds tpm 1 into a full bucket.
	a := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rpm": 1000, "tpm": -1000}), 0, 1)
	if step, _ := drive(st, now, a.Start(now()), a.Feed); !step.Done {
		t.Fatalf("adjust: %+v", step)
	}
	it := st.Peek(bucketRef.Key())
	if tk, _ := it.Int("b_tpm_tk"); tk > 2000 {
		t.Fatalf("tpm tk = %d after a refund into a full bucket, want at most its burst 2000", tk)
	}
	// Charging tpm back must keep fl below the instant it is full.
	b := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rpm": -1000, "tpm": 1000}), 0, 1)
	if step, _ := drive(st, now, b.Start(now()), b.Feed); !step.Done {
		t.Fatalf("adjust back: %+v", step)
	}
	if err := guardsHold(st.Peek(bucketRef.Key())); err != nil {
		t.Fatal(err)
	}
}
