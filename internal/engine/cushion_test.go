package engine

import (
	"context"
	"testing"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// The cushion dates a full write h ms ahead and takes h ms of refill from
// every limit. A limit that cannot pay for the charge and the cushion out
// of its burst gets no cushion, and neither do the others: the full write
// would leave that balance below zero, an acquire in debt.
func TestCushionOnlyWhenEveryLimitCanPay(t *testing.T) {
	// 100 a second: 1 % of the burst refills in 10 ms, the most a cushion
	// may take; its 10 ms cost 1 token.
	rps := perSecond("rps", 100)
	big := perSecond("big", 1_000_000)
	for _, tc := range []struct {
		name    string
		limits  []Limit
		consume map[string]int64
		want    int64
	}{
		{"pays", []Limit{rps}, map[string]int64{"rps": 99}, maxCushion},
		{"the whole burst", []Limit{rps}, map[string]int64{"rps": 100}, 0},
		{"one of two cannot pay", []Limit{rps, big}, map[string]int64{"rps": 100, "big": 1}, 0},
		{"both pay", []Limit{rps, big}, map[string]int64{"rps": 50, "big": 1}, maxCushion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPlan(bucketRef, tc.limits, tc.consume)
			if h := p.cushion(1, 0); h != tc.want {
				t.Fatalf("cushion = %d ms, want %d", h, tc.want)
			}
			// The full write a contended acquire makes leaves no balance
			// below zero.
			clock := memsim.NewManualClock(t0)
			st := memsim.New(memsim.WithClock(clock))
			ctx := context.Background()
			now := clock.Now().UnixMilli()
			if _, err := st.Put(ctx, NewPlan(bucketRef, tc.limits, nil).create(0, 1, now-60_000)); err != nil {
				t.Fatal(err)
			}
			im, _ := Decode(st.Peek(bucketRef.Key()))
			ex, path, err := p.informed(im, ShardView{}, 1, now, 0, true)
			if err != nil || path != PathFull {
				t.Fatalf("informed write: %v %v, want the full write", path, err)
			}
			if _, err := st.Update(ctx, store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err != nil {
				t.Fatal(err)
			}
			it := st.Peek(bucketRef.Key())
			for _, l := range tc.limits {
				if tk, _ := it.Int("b_" + l.Name + "_tk"); tk < 0 {
					t.Fatalf("%s: tk = %d after a full write with a cushion: below zero", l.Name, tk)
				}
			}
			if err := guardsHold(it); err != nil {
				t.Fatal(err)
			}
		})
	}
}
