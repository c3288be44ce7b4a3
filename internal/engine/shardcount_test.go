package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// guardsHold checks fl <= fullAt <= fh for every limit of a stored item,
// fullAt computed at the shard count the item stores: the bounds every
// write keeps so that a consumption-only write never lands on a full
// bucket and a full write never resets one that is not full. A refund to
// a full bucket lowers fh by its refill time while fullAt stays at rf (a
// full bucket is full from rf on), so fh may fall below rf: the full
// write's rf < now covers that, and the check is fullAt <= max(fh, rf).
func guardsHold(it store.Item) error {
	im, err := Decode(it)
	if err != nil || im == nil {
		return fmt.Errorf("item does not decode: %v", err)
	}
	for _, nl := range im.comp.Limits {
		s := newSpec(Limit{Name: nl.Name, Limit: nl.Limit})
		st, fl, fh, _ := im.state(&s)
		fa := st.FullAt(im.rf)
		if fl > fa || fa > max(fh, im.rf) {
			return fmt.Errorf("limit %s at %d shards: fl %d, fullAt %d, fh %d: want fl <= fullAt <= fh", nl.Name, im.shardCount, fl, fa, fh)
		}
	}
	return nil
}

// An adjust computes its refill times (the fl and fh it adds) at the shard
// count the lease charged at. When the shard has since been rewritten at a
// larger count (the bucket doubled, and a writer that knew it rescaled the
// shard), those times are wrong for the item: a refund would leave fl
// above the instant the bucket is full, and consumption-only writes could
// then take from a full bucket. So an adjust is conditional on the shard
// count it was computed at, and goes on at the item's count.
func TestAdjustAfterADoublingKeepsTheGuards(t *testing.T) {
	for _, tc := range []struct {
		name   string
		amount int64
	}{{"refund", -5_000}, {"charge", 5_000}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := memsim.NewManualClock(t0)
			st := memsim.New(memsim.WithClock(clock))
			ctx := context.Background()
			now := func() int64 { return clock.Now().UnixMilli() }
			limits := []Limit{perSecond("rps", 100)}
			p := NewPlan(bucketRef, limits, map[string]int64{"rps": 10})

			// Shard 1 as a writer that knew of 4 shards made it: empty, at
			// a quarter of the rate, not full for a while.
			if _, err := st.Put(ctx, p.create(1, 4, now())); err != nil {
				t.Fatal(err)
			}
			clock.Add(10 * time.Millisecond)
			// An adjust of a lease charged when the bucket had 2 shards.
			a := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rps": tc.amount}), 1, 2)
			if step, _ := drive(st, now, a.Start(now()), a.Feed); step.Err != nil || !step.Done {
				t.Fatalf("adjust: %+v", step)
			}
			it := st.Peek(bucketRef.WithShard(1).Key())
			if err := guardsHold(it); err != nil {
				t.Fatal(err)
			}
			if tk, _ := it.Int("b_rps_tk"); tk <= -tc.amount-1000 || tk > -tc.amount+1000 {
				t.Fatalf("tk = %d after the adjust of %d: the adjust did not land once", tk, tc.amount)
			}
		})
	}
}

// A cascade refunds the side it charged when the other side refuses. When
// the charged side's bucket doubled in between, the refund's first write
// (computed at the old count) fails its shard-count condition; the undo is
// made again at the count the item shows, so the caller is charged
// nothing.
func TestCascadeUndoAfterADoublingRefundsTheCharge(t *testing.T) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	ctx := context.Background()
	now := func() int64 { return clock.Now().UnixMilli() }
	childRef := keys.Bucket{Namespace: "ns", Entity: "key", Resource: "r"}
	parentRef := keys.Bucket{Namespace: "ns", Entity: "project", Resource: "r"}
	child := NewPlan(childRef, []Limit{perSecond("rps", 1)}, map[string]int64{"rps": 2}) // more than its burst: refused
	parent := NewPlan(parentRef, []Limit{perSecond("rps", 100)}, map[string]int64{"rps": 2})
	// Both buckets exist; the parent is mid-way, the child nearly empty.
	for _, put := range []store.PutInput{child.create(0, 1, now()), parent.create(0, 1, now())} {
		if _, err := st.Put(ctx, put); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := st.Peek(parentRef.Key()).Int("b_rps_tc")

	c := NewCascade(NewMemory(0), child, parent, newRand(1), Options{})
	step := c.Start(now())
	doubled := false
	for len(step.Calls) > 0 {
		rs := make([]Result, len(step.Calls))
		for i, c := range step.Calls {
			rs[i] = call(ctx, st, c)
		}
		for i, side := range step.Sides {
			if side == 1 && !step.Undo && !doubled && rs[i].Err == nil {
				// The parent's charge landed; another client doubles the
				// parent before the undo.
				if _, err := st.Update(ctx, keys.DoubleShards(parentRef, 1)); err != nil {
					t.Fatal(err)
				}
				doubled = true
			}
		}
		step = c.Feed(rs, now())
	}
	if step.Refused == nil || step.UndoErr != nil {
		t.Fatalf("cascade answer %+v: want a refusal with the parent's charge returned", step)
	}
	if !doubled {
		t.Fatal("the parent was never charged: the story did not happen")
	}
	it := st.Peek(parentRef.Key())
	if tc, _ := it.Int("b_rps_tc"); tc != before {
		t.Fatalf("parent tc = %d, want %d: the refund was dropped", tc, before)
	}
	if n, _ := it.Int(keys.AttrShardCount); n != 2 {
		t.Fatalf("parent shard_count = %d, want 2", n)
	}
}

// The doubling write sets shard 0's shard_count to 2n and nothing else:
// every limit of shard 0 then enforces half its burst at half its rate,
// but fl and fh still bound the instant it was full at n shards. With
// tokens above zero the bucket is full sooner at 2n (its burst halved),
// so fl can lie after the instant it is full: a consumption-only write
// (fl > now) then takes from a full bucket without moving rf, and the next
// refill credits the time it sat full a second time. (In debt, fh can lie
// before it: a full write could reset a bucket that is not full.)
func TestDoublingKeepsShardZerosGuards(t *testing.T) {
	t.Skip("known bug: the doubling write (keys.DoubleShards) changes shard 0's per-shard limits " +
		"without resetting its fl and fh; fix: SET every limit's fl to 0 and fh to the largest " +
		"int64 with the doubling (the next normal write recomputes both), or have it rescale shard 0 like a normal write")
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	ctx := context.Background()
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100)}, map[string]int64{"rps": 10})
	if _, err := st.Put(ctx, p.create(0, 1, clock.Now().UnixMilli())); err != nil { // 90 of 100: full in 100 ms
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, keys.DoubleShards(bucketRef, 1)); err != nil {
		t.Fatal(err)
	}
	// At 2 shards the burst is 50: 90 tokens is full already.
	if err := guardsHold(st.Peek(bucketRef.Key())); err != nil {
		t.Fatal(err)
	}
}
