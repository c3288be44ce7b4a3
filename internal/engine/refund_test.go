package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// A refund (a rollback, a negative adjust, a cascade's undo) ADDs tokens
// without moving rf, so it can land between a client's read of the item
// and its normal write, whose rf lock still holds. The normal write ADDs
// the refill it computed from the item it read, capped at the burst; on
// top of the refunded tokens that cap would not hold, and the bucket
// would end above its burst with the write's charge inside the excess:
// admitted, and never taken. So the normal write is conditional on tk not
// having risen past what the refill left below the burst.
func TestRefundBeforeANormalWriteKeepsTheCap(t *testing.T) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	ctx := context.Background()
	key := bucketRef.Key()
	limits := []Limit{perSecond("rps", 6)}
	p := NewPlan(bucketRef, limits, map[string]int64{"rps": 1})
	drain := NewPlan(bucketRef, limits, map[string]int64{"rps": 6})
	if _, err := st.Put(ctx, drain.create(0, 1, clock.Now().UnixMilli())); err != nil { // empty at t0
		t.Fatal(err)
	}
	clock.Add(300 * time.Millisecond) // 1.8 tokens refilled
	seen, _ := Decode(st.Peek(key))
	// Another process rolls back a lease of 6 tokens: 6 stored, rf as it was.
	refund := drain.WithAmounts(map[string]int64{"rps": -6_000})
	a := NewAdjust(NewMemory(0), refund, 0, 1)
	now := func() int64 { return clock.Now().UnixMilli() }
	if step, _ := drive(st, now, a.Start(now()), a.Feed); !step.Done {
		t.Fatalf("refund: %+v", step)
	}
	// The normal write computed from the item before the refund must fail.
	ex, err := p.normal(seen, 1, now(), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Update(ctx, store.UpdateInput{Key: key, Expr: ex, ReturnOldOnConditionFailure: true})
	if !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("a normal write computed before a refund: %v, want a condition failure", err)
	}
	// The acquire goes on from the item the failure returned: the bucket
	// holds its burst (1.8 + 6, capped at 6), less the charge.
	c := NewCharge(NewMemory(0), p, newRand(1), Options{})
	if step, _ := drive(st, now, c.Start(now()), c.Feed); !step.Done {
		t.Fatalf("acquire: %+v", step)
	}
	im, _ := Decode(st.Peek(key))
	s := p.specs[0]
	got, _, _, _ := im.state(&s)
	if eff := got.Effective(im.rf, now()); eff != 5*bucket.MilliPerToken {
		t.Fatalf("the bucket holds %d millitokens after the acquire, want 5000 (its burst of 6, less 1)", eff)
	}
	if err := guardsHold(st.Peek(key)); err != nil {
		t.Fatal(err)
	}
}
