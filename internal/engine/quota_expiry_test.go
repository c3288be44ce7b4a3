package engine

import (
	"context"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// With clocks ±1 s apart around midnight, a process whose clock is ahead
// starts the new day on a shard with a write that leaves rf before
// midnight (a speculative write: the window's start pushes the expiry to
// an hour after the day's end). A process whose clock is behind then
// makes the next write that sets the expiry, still dated yesterday: the
// expiry it set was an hour after yesterday's end, an hour into the day
// the item holds. DynamoDB deleted the shard then, and the next acquire
// created it again with a whole share of the day: the simulator found
// acquires over the quota of a weekly window (clocks 1 s apart, the time
// to live on, a bucket splitting at the boundary). Now a write's expiry
// covers the windows the item is in, and on a shard other than 0 the one
// shard 0 shows, whatever the writer's clock says.
func TestRegressionAClockBehindKeepsTheExpiryOfTheDayAClockAheadStarted(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100_000), reqDay}, map[string]int64{"rps": 1, "req": 1})
	behind := T - 300                                  // the writer's clock: yesterday
	want := (T+day)/1000 + 3600                        // an hour after today's end
	early := (T)/1000 + 3600                           // an hour after yesterday's end
	today := func(shard int, n, sc int64) store.Item { // started today, rf yesterday
		it := shape{shard: shard, n: n, rf: T - 2000}.item(p)
		it["q_req_ws"], it["q_req_tk"] = store.Int(T), store.Int(700_000)
		if shard == 0 {
			it["q_req_sc"] = store.Int(sc)
		}
		it[store.AttrTTL] = store.Int(want)
		return it
	}
	yesterday := func(shard int, n int64) store.Item {
		it := dayItem(p, shard, n, T-day, 50_000, 0)
		it[attrRefill] = store.Int(T - 2000)
		it[store.AttrTTL] = store.Int(early)
		return it
	}
	// expiry makes the write on shard's item it and returns the expiry it
	// leaves.
	expiry := func(t *testing.T, it store.Item, shard int, write func(*Image) (store.Expr, error)) int64 {
		t.Helper()
		ex, err := write(image(t, it))
		if err != nil {
			t.Fatal(err)
		}
		st := sim(t, it)
		key := bucketRef.WithShard(shard).Key()
		in := store.UpdateInput{Key: key, Expr: ex, Return: store.ReturnAllNew}
		if r := call(context.Background(), st, &Call{Update: &in}); r.Err != nil {
			t.Fatalf("the write fails: %v", r.Err)
		}
		got, _ := st.Peek(key).Int(store.AttrTTL)
		return got
	}
	t.Run("normal write", func(t *testing.T) {
		it := today(0, 1, 1)
		if got := expiry(t, it, 0, func(im *Image) (store.Expr, error) { return p.normal(im, 1, behind, true, nil) }); got < want {
			t.Errorf("expiry %d, want %d or later (an hour after the day's end), not %d s before it", got, want, want-got)
		}
	})
	t.Run("full write", func(t *testing.T) {
		it := today(0, 1, 1)
		if got := expiry(t, it, 0, func(im *Image) (store.Expr, error) { return p.full(im, 1, behind, 0) }); got < want {
			t.Errorf("expiry %d, want %d or later (an hour after the day's end), not %d s before it", got, want, want-got)
		}
	})
	t.Run("full write on an item pools reserved from", func(t *testing.T) {
		it := holdRaw(p, shape{rf: T - 2000}, 1, T-2000, map[string]int64{"rps": 1000})
		it["q_req_ws"], it["q_req_tk"], it["q_req_sc"] = store.Int(T), store.Int(700_000), store.Int(1)
		it[store.AttrTTL] = store.Int(want)
		if got := expiry(t, it, 0, func(im *Image) (store.Expr, error) { return p.fullHeld(im, 1, behind, 0) }); got < want {
			t.Errorf("expiry %d, want %d or later (an hour after the day's end), not %d s before it", got, want, want-got)
		}
	})
	t.Run("full write starting the day on shard 1", func(t *testing.T) {
		// The writer's image of shard 0 shows today, started at 2 shards:
		// its write starts today on shard 1, dated yesterday.
		q := p.forShard(1, image(t, today(0, 2, 2)), nil)
		it := yesterday(1, 2)
		if got := expiry(t, it, 1, func(im *Image) (store.Expr, error) { return q.full(im, 2, behind, 0) }); got < want {
			t.Errorf("expiry %d, want %d or later (an hour after the day's end), not %d s before it", got, want, want-got)
		}
	})
}
