package limiter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store/memsim"
)

// A monthly quota of 400 on a bucket of one shard: shard 0 starts the
// month at one shard (sc = 1), holding all of it. Mid-month the bucket
// doubles twice, to 4 shards; the shards the doublings add hold nothing of
// this month of their own, and each starts it by a transfer from the
// shard it split from (half of what that one holds), so the acquires
// spread over the 4 shards: nearly all of the 300 the quota still has
// room for are admitted (a few tokens may be left on one shard when the
// three an acquire tries are spent, as on any sharded quota: the next
// acquires find them), and none past it. The next month shard 0 starts at 4 shards, and the shards the
// limiter then makes start the month at their quarter: the month admits
// its 400, nearly.
func TestQuotaBucketDoubledMidMonthAdmitsFromTheOldShards(t *testing.T) {
	ref := keys.Bucket{Namespace: "ns", Entity: "team", Resource: "gpt-4"}
	calls := map[int]int{} // store calls per shard of the bucket
	hook := func(_ context.Context, op memsim.Op) {
		for _, k := range op.Keys {
			for s := range 8 {
				if k == ref.WithShard(s).Key() {
					calls[s]++
				}
			}
		}
	}
	e := newEnv(t, memsim.WithHook(hook), memsim.WithPartitionLimits(0, 0))
	e.clock.Set(time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC))
	l := e.limiter()
	limits := []Limit{PerSecond("rps", 100_000), {Name: "usd", Capacity: 400, Window: "month"}}
	ask := req("team", limits, map[string]int64{"rps": 1, "usd": 1})
	spend := func(n int) (admitted int) {
		for range n {
			e.clock.Add(time.Millisecond) // the new shards' rates refill
			_, err := l.Acquire(e.ctx, ask)
			var rl *RateLimitedError
			switch {
			case err == nil:
				admitted++
			case !errors.As(err, &rl):
				t.Fatal(err)
			}
		}
		return admitted
	}
	if got := spend(100); got != 100 {
		t.Fatalf("%d of the month's first 100 admitted", got)
	}
	for _, from := range []int64{1, 2} {
		if _, err := e.st.Update(e.ctx, keys.DoubleShards(ref, from, keys.LimitsOf(e.st.Peek(ref.Key())))); err != nil {
			t.Fatal(err)
		}
	}
	clear(calls)
	got := spend(300)
	if got < 290 {
		t.Fatalf("after the doublings %d of 300 admitted, with 300 of the quota left on shard 0", got)
	}
	if calls[1] == 0 || calls[2] == 0 || calls[3] == 0 {
		t.Fatalf("store calls per shard %v: want the shards the doublings added to serve too", calls)
	}
	if more := spend(50); 100+got+more != 400 {
		t.Fatalf("%d admitted in the month, want its 400 (no more)", 100+got+more)
	}

	e.clock.Set(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	if got := spend(500); got < 390 || got > 400 {
		t.Fatalf("February admitted %d, want at most its 400 and nearly all of it", got)
	}
}
