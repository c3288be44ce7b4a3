package engine

import (
	"context"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// Seed 001's concurrency trace: capacity 100 a minute, 90 tokens at T0; at
// T1 = T0+1s two writers read the same item and consume 3 and 7. A wins the
// rf lock with refill + consumption; B loses it and retries with its
// consumption only. The refill of that second is counted once:
// 90 + floor(1000*100000/60000)/1000 - 3 - 7 = 81.666 tokens.
func TestSeedConcurrencyTraceCountsRefillOnce(t *testing.T) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	ctx := context.Background()
	limits := []Limit{perMinute("rpm", 100)}
	p := NewPlan(bucketRef, limits, map[string]int64{"rpm": 10})
	if _, err := st.Put(ctx, p.create(0, 1, clock.Now().UnixMilli())); err != nil { // tk 90 at T0
		t.Fatal(err)
	}
	clock.Add(time.Second)
	key := bucketRef.Key()
	out, err := st.Get(ctx, store.GetInput{Key: key, ConsistentRead: true})
	if err != nil {
		t.Fatal(err)
	}
	seen, _ := Decode(out.Item) // both writers read this
	now := clock.Now().UnixMilli()
	update := func(ex store.Expr) error {
		_, err := st.Update(ctx, store.UpdateInput{Key: key, Expr: ex, ReturnOldOnConditionFailure: true})
		return err
	}

	a := p.WithAmounts(map[string]int64{"rpm": 3000})
	exA, _ := a.normal(seen, 1, now, true, nil)
	if err := update(exA); err != nil {
		t.Fatalf("A's normal write: %v", err)
	}

	b := p.WithAmounts(map[string]int64{"rpm": 7000})
	exB, _ := b.normal(seen, 1, now, true, nil)
	fresh, err := conditionImage(update(exB))
	if err != nil || fresh == nil || fresh.rf != now {
		t.Fatalf("B's normal write should lose the rf race and return the item: %v", err)
	}
	if !b.retryable(fresh, 1, now, nil) {
		t.Fatal("after A's write nothing is left to refill: B must take the retry path")
	}
	exR, _ := b.speculative(nil, 1, now, nil, false) // the retry path: consumption only
	if err := update(exR); err != nil {
		t.Fatalf("B's retry: %v", err)
	}
	it := st.Peek(key)
	if got, _ := it.Int("b_rpm_tk"); got != 81_666 {
		t.Fatalf("final tk = %d, want 81666", got)
	}
	if got, _ := it.Int("b_rpm_tc"); got != 20_000 {
		t.Fatalf("tc = %d, want 20000 (10 + 3 + 7 tokens)", got)
	}
}
