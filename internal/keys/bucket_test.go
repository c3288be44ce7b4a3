package keys

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// shardItem is a bucket shard of count shards holding the limits names
// (tokens, guards) under limits hash lh (none when lh is 0), beside the
// hidden wcu limit.
func shardItem(b Bucket, count, lh int64, names ...string) store.Item {
	it := store.Item{store.AttrPK: store.Str(b.PK()), store.AttrSK: store.Str(SKBucket), AttrShardCount: store.Int(count)}
	if lh != 0 {
		it[AttrLimitsHash] = store.Int(lh)
	}
	for _, n := range append(names, HiddenLimit) {
		it["b_"+n+"_tk"], it["b_"+n+"_fl"], it["b_"+n+"_fh"] = store.Int(5000), store.Int(1234), store.Int(1234)
	}
	return it
}

func TestLimitsOfReadsTheItemsLimitsInNameOrder(t *testing.T) {
	b := Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	got := LimitsOf(shardItem(b, 1, 42, "tpm", "gpt_4", "rpm"))
	if want := []string{"gpt_4", "rpm", "tpm"}; !slices.Equal(got.Names, want) || got.Hash != 42 || got.NoHash {
		t.Fatalf("LimitsOf = %+v, want names %v (wcu aside), hash 42", got, want)
	}
	if got := LimitsOf(shardItem(b, 1, 0, "rpm")); !got.NoHash {
		t.Fatalf("LimitsOf an item without a limits hash = %+v, want NoHash", got)
	}
}

// The writes that change a shard count reset the guards of exactly the
// limits the item holds, which their limits hash vouches for: a write
// naming other limits (another hash) changes nothing.
func TestShardCountWritesResetTheGuards(t *testing.T) {
	ctx := context.Background()
	b := Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	guards := func(st *memsim.Store, k store.Key, name string) [2]int64 {
		fl, _ := st.Peek(k).Int("b_" + name + "_fl")
		fh, _ := st.Peek(k).Int("b_" + name + "_fh")
		return [2]int64{fl, fh}
	}
	reset, kept := [2]int64{0, math.MaxInt64}, [2]int64{1234, 1234}
	for _, tc := range []struct {
		name string
		lh   int64 // the item's hash (0: none)
	}{{"with a limits hash", 42}, {"without one", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			st := memsim.New()
			for s := range 2 {
				if _, err := st.Put(ctx, store.PutInput{Item: shardItem(b.WithShard(s), 2, tc.lh, "rpm", "tpm")}); err != nil {
					t.Fatal(err)
				}
			}
			stale := Limits{Names: []string{"rpm"}, Hash: 7}
			var cf *store.ConditionFailedError
			if _, err := st.Update(ctx, DoubleShards(b, 2, stale)); !errors.As(err, &cf) {
				t.Fatalf("doubling with other limits: err %v, want a condition failure", err)
			}
			if n, _ := cf.Item.Int(AttrShardCount); n != 2 {
				t.Fatalf("the failed doubling returned count %d, want the count in force, 2", n)
			}
			if _, err := st.Update(ctx, RaiseShardCount(b.WithShard(1), 4, stale)); !errors.Is(err, store.ErrConditionFailed) {
				t.Fatalf("raising with other limits: err %v, want a condition failure", err)
			}
			held := LimitsOf(cf.Item)
			out, err := st.Update(ctx, DoubleShards(b, 2, held))
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := out.Attributes.Int(AttrShardCount); n != 4 {
				t.Fatalf("doubling returned count %d, want 4 (ALL_NEW)", n)
			}
			if _, err := st.Update(ctx, RaiseShardCount(b.WithShard(1), 4, held)); err != nil {
				t.Fatal(err)
			}
			for s := range 2 {
				k := b.WithShard(s).Key()
				if n, _ := st.Peek(k).Int(AttrShardCount); n != 4 {
					t.Errorf("shard %d: count %d, want 4", s, n)
				}
				for _, name := range []string{"rpm", "tpm"} {
					if g := guards(st, k, name); g != reset {
						t.Errorf("shard %d, %s: guards %v, want %v", s, name, g, reset)
					}
				}
				if g := guards(st, k, HiddenLimit); g != kept {
					t.Errorf("shard %d, wcu: guards %v, want %v (never divided: untouched)", s, g, kept)
				}
			}
			// The count only grows: not twice from 2, never back.
			if _, err := st.Update(ctx, DoubleShards(b, 2, held)); !errors.Is(err, store.ErrConditionFailed) {
				t.Errorf("doubling from 2 again: err %v, want a condition failure", err)
			}
			if _, err := st.Update(ctx, RaiseShardCount(b.WithShard(1), 4, held)); !errors.Is(err, store.ErrConditionFailed) {
				t.Errorf("raising shard 1 to its own count: err %v, want a condition failure", err)
			}
			if _, err := st.Update(ctx, RaiseShardCount(b.WithShard(5), 4, held)); !errors.Is(err, store.ErrConditionFailed) || st.Peek(b.WithShard(5).Key()) != nil {
				t.Errorf("raising a missing shard: err %v, want a condition failure and no item", err)
			}
		})
	}
}

// LimitsOf names an item's limits in name order, whatever the map's
// order: the doubling write's expression is built from them, and map
// order must not reach it (a simulation repeats byte for byte).
func TestLimitsOfInNameOrder(t *testing.T) {
	it := store.Item{AttrLimitsHash: store.Int(7)}
	for i := range 12 {
		it[bucket.AttrName(fmt.Sprintf("l%02d", 11-i), bucket.FieldTokens)] = store.Int(1)
	}
	it[bucket.AttrName(HiddenLimit, bucket.FieldTokens)] = store.Int(1)
	for range 5 {
		l := LimitsOf(it)
		if len(l.Names) != 12 || !slices.IsSorted(l.Names) || l.Hash != 7 || l.NoHash {
			t.Fatalf("LimitsOf = %+v, want the 12 application limits in name order under hash 7", l)
		}
	}
}
