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

// At most 5 requests in flight per key, on DynamoDB Local. Eight processes
// acquire at once, 10 times each, holding what they get: exactly 5 leases
// are admitted, and the refused acquires take nothing from the rate
// beside the cap. The holders commit 3 of their leases (one write each),
// and 3 more are admitted. Then the process holding the other leases
// "dies": nobody commits them. Within the TTL they still count; after the
// TTL and a quarter, their slots are back without a write of theirs, and
// the acquire that finds them retires them in its own single write.
func TestConcurrencyCapWithADeadHolderOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	ctx := context.Background()
	clock := memsim.NewManualClock(time.Now().Add(24 * time.Hour)) // in the future: DynamoDB Local's TTL sweeper leaves the items alone
	inflight := limiter.Limit{Name: "inflight", Capacity: 5, Window: "concurrent", TTL: time.Minute}
	r := limiter.Request{Entity: "key-1", Resource: "gpt-4", Limits: []limiter.Limit{limiter.PerMinute("rpm", 10_000), inflight},
		Consume: map[string]int64{"rpm": 1, "inflight": 1}}
	item := func() store.Item {
		out, err := st.Get(ctx, store.GetInput{ConsistentRead: true, Key: keys.Bucket{Namespace: "it", Entity: "key-1", Resource: "gpt-4"}.Key()})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	var mu sync.Mutex
	var wcu float64
	newLimiter := func() *limiter.Limiter {
		lim, err := limiter.New(st, limiter.WithNamespace("it"), limiter.WithClock(clock),
			limiter.WithObserver(limiter.ObserverFunc(func(e limiter.Event) {
				mu.Lock()
				wcu += e.WriteUnits
				mu.Unlock()
			})))
		if err != nil {
			t.Fatal(err)
		}
		return lim
	}
	// acquire runs eight processes, n acquires each, and returns the
	// leases admitted.
	acquire := func(n int) []*limiter.Lease {
		var leases []*limiter.Lease
		var wg sync.WaitGroup
		for p := 0; p < 8; p++ {
			lim := newLimiter()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n; i++ {
					le, err := lim.Acquire(ctx, r)
					var rl *limiter.RateLimitedError
					switch {
					case err == nil:
						mu.Lock()
						leases = append(leases, le)
						mu.Unlock()
					case !errors.As(err, &rl):
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		return leases
	}

	held := acquire(10)
	if len(held) != 5 {
		t.Fatalf("80 acquires admitted %d leases at once, want the cap: 5", len(held))
	}
	if tc, _ := item().Int("b_rpm_tc"); tc != 5_000 {
		t.Fatalf("rpm counted %d millitokens for 5 admitted: the refused acquires were charged", tc)
	}
	mu.Lock()
	wcu = 0
	mu.Unlock()
	for _, le := range held[:3] {
		if err := le.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if wcu != 3 {
		t.Fatalf("3 commits cost %.1f WCU, want 1 each", wcu)
	}
	if lv, _ := item().Int("c_inflight_lv"); lv != 2 {
		t.Fatalf("live count %d after 3 of 5 commits, want 2", lv)
	}
	if more := acquire(2); len(more) != 3 {
		t.Fatalf("%d more leases admitted, want the 3 slots given back", len(more))
	}

	// The holders of all 5 leases die.
	clock.Add(inflight.TTL - time.Second)
	if again := acquire(1); len(again) != 0 {
		t.Fatalf("%d leases admitted within the TTL of 5 live ones", len(again))
	}
	clock.Add(inflight.TTL/4 + 2*time.Second)
	if back := acquire(1); len(back) != 5 {
		t.Fatalf("%d leases admitted after the dead holders' TTL and a quarter, want 5", len(back))
	}
	if lv, _ := item().Int("c_inflight_lv"); lv != 5 {
		t.Fatalf("live count %d, want the 5 new leases", lv)
	}
}
