package engine

import (
	"testing"

	"github.com/shardlimit/limiter/store"
)

// A key ramping to 2,600 acquires a second at 10 ms of latency, 32
// processes: the first doubling (1 to 2 shards) left each shard about
// 1,300 write units a second, over the partition's 1,000, and the second
// came a second or more later, after throttles and answers unavailable
// (later one-second peaks of 1,155 to 1,511 WCU on a shard, 49 acquires
// unavailable). Now the client that doubles, having measured the shard at
// 2.4 units a ms, doubles again at once: two writes, each conditional on
// the count it changes (1, 2, 4: no level skipped), and the acquire goes
// on at 4 shards. At 1.2 units a ms, two shards carry it: one doubling.
func TestDoublingGoesOnWhileTheMeasuredRateStillHeatsEachShard(t *testing.T) {
	for _, c := range []struct {
		rate  float64 // write units per ms the client measured on shard 0
		wants []string
		n     int64
	}{
		{2.4, []string{"update 0 double", "update 0 double", "update 0 speculative"}, 4},
		{1.2, []string{"update 0 double", "update 0 speculative"}, 2},
	} {
		p := NewPlan(bucketRef, []Limit{perSecond("rps", 100_000)}, map[string]int64{"rps": 1})
		put := p.create(0, 1, T)
		put.Item["b_wcu_tk"] = store.Int(0) // the partition's gauge is spent
		st := sim(t, put.Item)
		m := NewMemory(0)
		m.learn(bucketRef, 0, nil, 1, T, 0, nil)
		si := m.get(idOf(bucketRef)).makeShard(0)
		si.img, si.at, si.rate, si.others, si.rateAt = image(t, put.Item), T, c.rate, c.rate-0.1, T
		ch := NewCharge(m, p, picks(0, 0), Options{})
		play(t, st, ch.Start(T), ch.Feed, T, c.wants...)
		if n := attr(t, st, bucketRef, 0, "shard_count"); n != c.n {
			t.Errorf("measured %.1f units/ms: %d shards, want %d", c.rate, n, c.n)
		}
	}
}
