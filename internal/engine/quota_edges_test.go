package engine

import (
	"context"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// A cascade charges a key and its project, whose limits are a rate and a
// monthly quota; the key refuses (a charge above its burst), so the
// project's charge is refunded. Between the project's charge and the
// refund, a writer whose clock runs ahead starts the next month on the
// project's item (its midnight came first). The refund's first write,
// pinned to the month the charge went to, fails; the refund is made again
// without the quota: the month it was charged in is over for the item,
// and the next one started at its share whatever that one took. The rate
// gets its token back; the new month's balance is left alone. (The
// property test's checker saw this write change the project's counters by
// [-1000 0] and accepts it only when the clocks' spread puts a boundary
// within the acquire.)
func TestCascadeUndoAfterAClockAheadStartedTheNextMonth(t *testing.T) {
	clock := memsim.NewManualClock(t0.Add(-400 * time.Millisecond)) // just before 1 January, UTC
	st := memsim.New(memsim.WithClock(clock))
	ctx := context.Background()
	now := func() int64 { return clock.Now().UnixMilli() }
	childRef := keys.Bucket{Namespace: "ns", Entity: "key", Resource: "r"}
	parentRef := keys.Bucket{Namespace: "ns", Entity: "project", Resource: "r"}
	child := NewPlan(childRef, []Limit{perSecond("rps", 1)}, map[string]int64{"rps": 2}) // above its burst: refused
	parent := NewPlan(parentRef, []Limit{perSecond("rps", 100), usdMonth}, map[string]int64{"rps": 1, "usd": 5})
	for _, put := range []store.PutInput{child.create(0, 1, now()), parent.create(0, 1, now())} {
		if _, err := st.Put(ctx, put); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := st.Peek(parentRef.Key()).Int("b_rps_tc")
	january := t0.UnixMilli()

	c := NewCascade(speculating(NewMemory(0)), newRand(1), Options{}, child, parent)
	step := c.Start(now())
	moved := false
	for len(step.Calls) > 0 {
		rs := make([]Result, len(step.Calls))
		for i, c := range step.Calls {
			rs[i] = call(ctx, st, c)
		}
		for i, side := range step.Sides {
			if side == 1 && !step.Undo && !moved && rs[i].Err == nil {
				// The project's charge landed in December; another
				// process, its clock ahead, starts January on the item.
				it := st.Peek(parentRef.Key())
				it["q_usd_ws"], it["q_usd_tk"] = store.Int(january), store.Int(97_000)
				if _, err := st.Put(ctx, store.PutInput{Item: it}); err != nil {
					t.Fatal(err)
				}
				moved = true
			}
		}
		step = c.Feed(rs, now())
	}
	if !moved {
		t.Fatal("the project was never charged: the story did not happen")
	}
	if step.Refused == nil || step.Side != 0 || step.UndoErr != nil {
		t.Fatalf("cascade answer %+v: want the key's refusal with the project's charge returned", step)
	}
	it := st.Peek(parentRef.Key())
	if tc, _ := it.Int("b_rps_tc"); tc != before {
		t.Fatalf("project rps tc = %d, want %d: the rate's refund was dropped", tc, before)
	}
	if tk, _ := it.Int("q_usd_tk"); tk != 97_000 {
		t.Fatalf("project usd tk = %d, want 97000: January's balance got December's refund", tk)
	}
}

// A shard other than 0 that an acquire creates starts the window shard 0
// shows, as a shard that existed would start it: shard 0 started January
// at 2 shards, so shard 1 (one of those 2) is made with half the month's
// quota, shard 3 (made by a later doubling) with nothing, in December: a
// transfer starts January there (see quota.go, Transfers). (Made empty,
// shard 1 would hold nothing until February: the bucket would lose its
// share of January.) When shard 0 shows a later window than the writer's
// (its clock behind), the shard is made empty in the writer's window, and
// the next write starts the later one at its share.
func TestAShardMadeInAWindowStartsItAtShardZerosShare(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10, usdMonth}, map[string]int64{"rps": 1, "usd": 5})
	january := t0.UnixMilli()
	zero := func(ws int64) *Image {
		it := shape{rf: T}.item(p)
		it["q_usd_ws"], it["q_usd_sc"] = store.Int(ws), store.Int(2)
		return image(t, it)
	}
	for _, c := range []struct {
		what      string
		shard     int
		ws, now   int64
		tk, start int64
	}{
		{"shard 1, one of January's 2", 1, january, T + 10, 50_000, january},
		{"shard 3, made by a later doubling", 3, january, T + 10, 0, january - 31*24*3600*1000},
		{"shard 1, the writer still in December", 1, january, T - 10, 0, january - 31*24*3600*1000},
	} {
		it := p.forShard(c.shard, zero(c.ws), nil).create(c.shard, 4, c.now).Item
		if tk, _ := it.Int("q_usd_tk"); tk != c.tk {
			t.Errorf("%s: q_usd_tk = %d, want %d", c.what, tk, c.tk)
		}
		if ws, _ := it.Int("q_usd_ws"); ws != c.start {
			t.Errorf("%s: q_usd_ws = %d, want %d", c.what, ws, c.start)
		}
		if tc, _ := it.Int("q_usd_tc"); tc != 0 {
			t.Errorf("%s: q_usd_tc = %d, want 0 (a new shard other than 0 charges nothing)", c.what, tc)
		}
	}
}
