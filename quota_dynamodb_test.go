package limiter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
	"github.com/shardlimit/limiter/store/memsim"
)

// A billing cycle from the 28th in Paris, on DynamoDB Local, across 28
// March 2027: the cycle ends at midnight (23:00 UTC) and two hours later
// the clocks go forward. Eight processes spend the budget at once: one
// write per admitted acquire (1 WCU), never above the budget, and the
// refused requests take nothing from the rate beside it. The next cycle
// starts at the whole budget at midnight in Paris, and ends at midnight
// on 28 April, on summer time: an hour shorter than 31 days.
func TestQuotaAcrossABillingCycleOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	ctx := context.Background()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip(err)
	}
	cycle := time.Date(2027, 3, 28, 0, 0, 0, 0, paris)
	clock := memsim.NewManualClock(cycle.Add(-time.Minute)) // in the future: DynamoDB Local's TTL sweeper leaves the items alone
	usd := limiter.Limit{Name: "usd", Capacity: 1000, Window: "month", MonthDay: 28, TimeZone: "Europe/Paris"}
	limits := []limiter.Limit{limiter.PerMinute("rpm", 10_000), usd}
	r := limiter.Request{Entity: "team-1", Resource: "gpt-4", Limits: limits, Consume: map[string]int64{"rpm": 1, "usd": 10}}
	item := func() store.Item {
		out, err := st.Get(ctx, store.GetInput{ConsistentRead: true, Key: keys.Bucket{Namespace: "it", Entity: "team-1", Resource: "gpt-4"}.Key()})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}

	// spend runs eight processes, 30 acquires each, and returns how many
	// were admitted, and the admitted acquires' write units and paths.
	spend := func() (admitted int, hotWCU float64, hot int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for p := 0; p < 8; p++ {
			lim, err := limiter.New(st, limiter.WithNamespace("it"), limiter.WithClock(clock),
				limiter.WithObserver(limiter.ObserverFunc(func(e limiter.Event) {
					if e.Op == "acquire" && e.Outcome == limiter.Admitted && e.Path == limiter.PathSpeculative {
						mu.Lock()
						hot++
						hotWCU += e.WriteUnits
						mu.Unlock()
					}
				})))
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 30; i++ {
					_, err := lim.Acquire(ctx, r)
					var rl *limiter.RateLimitedError
					switch {
					case err == nil:
						mu.Lock()
						admitted++
						mu.Unlock()
					case !errors.As(err, &rl):
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		return admitted, hotWCU, hot
	}

	march, _, _ := spend()
	if march > 100 {
		t.Fatalf("the last minute of February's cycle admitted %d acquires of 10 usd, above the budget of 1000", march)
	}
	it := item()
	leftMarch, _ := it.Int("q_usd_tk")
	rpmBefore, _ := it.Int("b_rpm_tc")
	if int64(march)*10_000 != 1_000_000-leftMarch || rpmBefore != int64(march)*1000 {
		t.Fatalf("%d admitted, but the budget holds %d millitokens and rpm counted %d: the refused requests were charged", march, leftMarch, rpmBefore)
	}

	clock.Set(cycle)
	april, hotWCU, hot := spend()
	if april != 100 {
		t.Fatalf("the new cycle admitted %d acquires of 10 usd, want the whole budget of 1000: 100", april)
	}
	if hot == 0 || hotWCU != float64(hot) {
		t.Fatalf("%d acquires admitted by the speculative write cost %.1f WCU, want 1 each", hot, hotWCU)
	}
	left, _ := item().Int("q_usd_tk")
	ws, _ := item().Int("q_usd_ws")
	if left != 0 || ws != cycle.UnixMilli() {
		t.Fatalf("the cycle from %v holds %d, want 0 from %v", time.UnixMilli(ws).In(paris), left, cycle)
	}

	lim, err := limiter.New(st, limiter.WithNamespace("it"), limiter.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	_, err = lim.Acquire(ctx, r)
	var rl *limiter.RateLimitedError
	if next := time.Date(2027, 4, 28, 0, 0, 0, 0, paris); !errors.As(err, &rl) || rl.RetryAfter != next.Sub(cycle) {
		t.Fatalf("refusal %v, want a retry after %v (31 days less the hour the clocks went forward)", err, next.Sub(cycle))
	}
	if rl.RetryAfter != 31*24*time.Hour-time.Hour {
		t.Fatalf("retry after %v, want 743h", rl.RetryAfter)
	}
}

// A team's monthly quota of 400 on DynamoDB Local, its month started on
// one shard: 100 spent, then the bucket doubles twice, to 4 shards. Four
// processes spend the rest at once: the shards the doublings made start
// the month by transfers (a TransactWrite with the shard they split from,
// or shard 0), so the acquires spread over the 4 shards. The month admits
// at most its 400, nearly all of them, and the shards hold, with what
// they charged, exactly the quota: a transfer moves tokens, it makes
// none.
func TestQuotaTransfersToTheShardsADoublingMadeOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	ctx := context.Background()
	clock := memsim.NewManualClock(time.Date(2031, 1, 10, 0, 0, 0, 0, time.UTC)) // in the future: the TTL sweeper leaves the items alone
	limits := []limiter.Limit{limiter.PerSecond("rps", 100_000), {Name: "usd", Capacity: 400, Window: "month"}}
	r := limiter.Request{Entity: "team-1", Resource: "gpt-4", Limits: limits, Consume: map[string]int64{"rps": 1, "usd": 1}}
	ref := keys.Bucket{Namespace: "it", Entity: "team-1", Resource: "gpt-4"}
	item := func(shard int) store.Item {
		out, err := st.Get(ctx, store.GetInput{ConsistentRead: true, Key: ref.WithShard(shard).Key()})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	spend := func(procs, each int) (admitted int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for p := 0; p < procs; p++ {
			lim, err := limiter.New(st, limiter.WithNamespace("it"), limiter.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					clock.Add(time.Millisecond) // the new shards' rates refill
					_, err := lim.Acquire(ctx, r)
					var rl *limiter.RateLimitedError
					switch {
					case err == nil:
						mu.Lock()
						admitted++
						mu.Unlock()
					case !errors.As(err, &rl):
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		return admitted
	}
	if got := spend(1, 100); got != 100 {
		t.Fatalf("%d of the month's first 100 admitted", got)
	}
	for _, from := range []int64{1, 2} {
		if _, err := st.Update(ctx, keys.DoubleShards(ref, from, keys.LimitsOf(item(0)))); err != nil {
			t.Fatal(err)
		}
	}
	got := spend(4, 100)
	if got < 290 || 100+got > 400 {
		t.Fatalf("after the doublings %d of 400 acquires admitted, want nearly the 300 the month has left, no more", got)
	}
	t.Logf("%d admitted after the doublings", got)
	month := int64(0)
	sum := int64(0)
	for s := 0; s < 4; s++ {
		it := item(s)
		ws, _ := it.Int("q_usd_ws")
		if s == 0 {
			month = ws
		}
		if ws != month {
			t.Fatalf("shard %d in the window from %d, want the month from %d: it never started the month", s, ws, month)
		}
		tk, _ := it.Int("q_usd_tk")
		tc, _ := it.Int("q_usd_tc")
		sum += tk + tc
	}
	if sum != 400_000 {
		t.Fatalf("the shards hold and charged %d millitokens of the month, want its 400000", sum)
	}
}
