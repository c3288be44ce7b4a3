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

	c := NewCascade(speculating(NewMemory(0)), newRand(1), Options{}, child, parent)
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
				if _, err := st.Update(ctx, keys.DoubleShards(parentRef, 1, keys.LimitsOf(st.Peek(parentRef.Key())))); err != nil {
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

// The doubling write sets shard 0's shard_count to 2n: every limit of
// shard 0 then enforces half its burst at half its rate, while its tokens
// and its guards stay. fl and fh bound the instant it was full at n
// shards; with tokens above zero the bucket is full sooner at 2n (its
// burst halved), so fl could lie after the instant it is full: a
// consumption-only write (fl > now) would then take from a full bucket
// without moving rf, and the next refill would credit the time it sat full
// a second time. (In debt, fh could lie before it: a full write could
// reset a bucket that is not full.) So the doubling resets the guards to
// 0 and the largest int64, and the next charge of shard 0 is a normal
// write under the rf lock, which caps the tokens at the new burst and
// computes the guards afresh.
func TestDoublingKeepsShardZerosGuards(t *testing.T) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	ctx := context.Background()
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100)}, map[string]int64{"rps": 10})
	if _, err := st.Put(ctx, p.create(0, 1, clock.Now().UnixMilli())); err != nil { // 90 of 100: full in 100 ms
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, keys.DoubleShards(bucketRef, 1, keys.LimitsOf(st.Peek(bucketRef.Key())))); err != nil {
		t.Fatal(err)
	}
	// At 2 shards the burst is 50: 90 tokens is full already.
	if err := guardsHold(st.Peek(bucketRef.Key())); err != nil {
		t.Fatal(err)
	}

	// A client that knows of the doubling charges shard 0: the
	// consumption-only write fails on the reset guard, and the normal
	// write takes the charge from the new burst.
	clock.Add(time.Millisecond)
	now := clock.Now().UnixMilli()
	m := speculating(NewMemory(0))
	m.learn(bucketRef, 0, nil, 2, now, 0, nil)
	c := NewCharge(m, p, picks(0), Options{})
	play(t, st, c.Start(now), c.Feed, now, "update 0 speculative", "update 0 normal", "done normal")
	if tk := attr(t, st, bucketRef, 0, "b_rps_tk"); tk != 40_000 {
		t.Fatalf("shard 0 holds %d millitokens after the charge, want 40000 (the burst of 50 at 2 shards, less 10)", tk)
	}
	if err := guardsHold(st.Peek(bucketRef.Key())); err != nil {
		t.Fatal(err)
	}
}

// Shard 0 may hold other limits than the plan of the client that doubles
// it: its configuration changed, and no write brought shard 0 to the new
// one yet. The doubling resets the guards of the limits the item holds,
// so it is conditional on their hash: the client's first doubling fails,
// and it doubles again with the limits the failed write showed, which
// lands.
func TestDoublingAShardZeroOfAnotherConfiguration(t *testing.T) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	ctx := context.Background()
	now := clock.Now().UnixMilli()
	// Shard 0 was written under 100 a second plus a token-per-minute
	// limit, and its write units are spent.
	old := NewPlan(bucketRef, []Limit{perSecond("rps", 100), perMinute("tpm", 6000)}, map[string]int64{"rps": 10, "tpm": 10})
	put := old.create(0, 1, now)
	put.Item["b_wcu_tk"] = store.Int(0)
	put.Item["b_wcu_fl"], put.Item["b_wcu_fh"] = store.Int(now+1000), store.Int(now+1000) // full again in a second
	if _, err := st.Put(ctx, put); err != nil {
		t.Fatal(err)
	}
	// The client's configuration has only rps, at 4,000 a second (enough
	// admitted writes to heat a partition); it has measured shard 0 at its
	// ceiling.
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 4000)}, map[string]int64{"rps": 1})
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, put.Item, 1, now)
	measured(m, bucketRef, 0, 1, 0.9, now, nil)
	c := NewCharge(m, p, picks(0, 1), Options{})
	play(t, st, c.Start(now), c.Feed, now, "update 0 speculative", "update 0 double", "update 0 double", "update 1 speculative")
	it := st.Peek(bucketRef.Key())
	if n, _ := it.Int(keys.AttrShardCount); n != 2 {
		t.Fatalf("shard_count = %d, want 2", n)
	}
	for _, name := range []string{"rps", "tpm"} {
		if fl, _ := it.Int("b_" + name + "_fl"); fl != 0 {
			t.Errorf("%s: fl = %d after the doubling, want 0 (reset)", name, fl)
		}
	}
	if err := guardsHold(it); err != nil {
		t.Fatal(err)
	}
}
