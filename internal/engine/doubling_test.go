package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
	"pgregory.net/rapid"
)

// Racing doublings: 100 to 200 writers (real goroutines, each its own
// client, each having measured the shards at their ceiling) hit a bucket
// whose hidden wcu limit is exhausted, all at once.
// Shard 0's shard_count, read from the change stream, must run through
// consecutive powers of two from where it started: exactly one doubling
// per level, never a skip, never a decrease.
func TestRacingDoublingsDoubleOncePerLevel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		writers := rapid.IntRange(100, 200).Draw(rt, "writers")
		start := int64(1) << rapid.IntRange(0, 3).Draw(rt, "log2 start")
		clock := memsim.NewManualClock(t0)
		st := memsim.New(memsim.WithClock(clock), memsim.WithPartitionLimits(0, 0))
		ctx := context.Background()
		limits := []Limit{perSecond("rps", 1_000_000)}
		ref := keys.Bucket{Namespace: "ns", Entity: "hot", Resource: "r"}

		// The bucket exists with shard_count start and every existing
		// shard's write units spent, at the current instant (no refill).
		p := NewPlan(ref, limits, map[string]int64{"rps": 1})
		now := clock.Now().UnixMilli()
		var images []*Image
		for s := 0; s < int(start); s++ {
			put := p.create(s, start, now)
			put.Item["b_wcu_tk"] = store.Int(0)
			if _, err := st.Put(ctx, put); err != nil {
				rt.Fatal(err)
			}
			im, err := Decode(put.Item)
			if err != nil {
				rt.Fatal(err)
			}
			images = append(images, im)
		}
		before := st.StreamLen()

		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			// Every client knows the current count and has measured every
			// shard at its ceiling (a write a ms).
			m := NewMemory(0)
			m.learn(ref, 0, nil, start, now, 0, nil)
			b := m.get(idOf(ref))
			for s, im := range images {
				si := b.makeShard(s)
				si.img, si.at, si.rate, si.others, si.rateAt = im, now, 1, 1, now
			}
			c := NewCharge(m, p, newRand(uint64(w)), Options{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				clockNow := func() int64 { return clock.Now().UnixMilli() }
				drive(st, clockNow, c.Start(clockNow()), c.Feed)
			}()
		}
		wg.Wait()

		counts := []int64{start}
		for _, rec := range st.Stream(before) {
			if rec.Keys != ref.WithShard(0).Key() || rec.Old == nil || rec.New == nil {
				continue
			}
			o, _ := rec.Old.Int(keys.AttrShardCount)
			n, _ := rec.New.Int(keys.AttrShardCount)
			if n != o {
				if o != counts[len(counts)-1] || n != 2*o {
					rt.Fatalf("shard_count went %d -> %d after %v: not one doubling of the last level", o, n, counts)
				}
				counts = append(counts, n)
			}
		}
		if len(counts) < 2 {
			rt.Fatalf("no doubling although every shard's write units were spent (counts %v)", counts)
		}
		rt.Log(fmt.Sprint(writers, " writers: ", counts))
	})
}
