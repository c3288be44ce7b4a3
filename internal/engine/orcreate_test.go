package engine

import (
	"context"
	"maps"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// A process's first write to a bucket nobody made yet used to fail on the
// missing item (1 call, 1 WCU billed), ask the index for other shards (1
// call) and Put the bucket (1 call): three calls, where ten servers
// starting on a hundred new keys made creation 0.067 calls per acquire.
// Now that first write, for limits that never double a bucket, creates
// it: one call, and the item is the Put's, attribute for attribute.
func TestOneCallCreateLeavesThePutsItem(t *testing.T) {
	for _, c := range []struct {
		name string
		cold Path // what the process's history calls for
	}{
		{"full", PathFull},
		{"ride-ahead", PathRetry},
		{"speculative", PathNone},
	} {
		p := plan1(bucketRef)
		st := sim(t)
		m := NewMemory(0)
		switch c.cold {
		case PathNone:
			speculating(m)
		case PathRetry: // buckets of the plan found full, no estimate of the others
			full := true
			m.notePrior(p.hash, &full, -1)
		}
		ch := NewCharge(m, p, picks(), Options{})
		s := ch.Start(T)
		if s.Call == nil || s.Call.Update == nil {
			t.Fatalf("%s: first step %q, want an update", c.name, describe(s))
		}
		s = ch.Feed(exec(t, st, s), T+15) // the answer comes 15 ms later
		if !s.Done || s.Path != PathCreate {
			t.Fatalf("%s: %q (err %v), want done create", c.name, describe(s), s.Err)
		}
		got := st.Peek(bucketRef.WithShard(0).Key())
		want := p.create(0, 1, T).Item
		if !maps.Equal(got, want) {
			t.Fatalf("%s: created\n%v\nwant the Put's\n%v", c.name, got, want)
		}
	}
}

// On an item that exists, the write that may create is the usual write:
// the same item after it, or the same failure. A full bucket takes the
// full write, one below its burst fails it; a ride-ahead or speculative
// write lands on one below its burst.
func TestOneCallCreateIsTheUsualWriteOnAnExistingItem(t *testing.T) {
	p := plan1(bucketRef)
	items := map[string]store.Item{
		"full":        shape{rf: T - 5000}.item(p),
		"below burst": shape{rf: T - 5, tk: map[string]int64{"rps": 9000}}.item(p),
		"empty":       shape{rf: T - 5, tk: map[string]int64{"rps": 0}}.item(p),
	}
	for name, it := range items {
		for _, cold := range []Path{PathFull, PathRetry, PathNone} {
			v := &ShardView{}
			usual, _, err := p.blind(v, 1, T, 0.5, cold, false)
			if err != nil {
				t.Fatal(err)
			}
			either, _, err := p.blind(v, 1, T, 0.5, cold, true)
			if err != nil {
				t.Fatal(err)
			}
			a, b := sim(t, it), sim(t, it)
			key := bucketRef.WithShard(0).Key()
			_, errA := a.Update(context.Background(), store.UpdateInput{Key: key, Expr: usual})
			_, errB := b.Update(context.Background(), store.UpdateInput{Key: key, Expr: either})
			if (errA == nil) != (errB == nil) || !maps.Equal(a.Peek(key), b.Peek(key)) {
				t.Errorf("%s, cold write %v: usual write %v leaves\n%v\nthe one that may create %v leaves\n%v", name, cold, errA, a.Peek(key), errB, b.Peek(key))
			}
		}
	}
}

// Limits that may double a bucket keep the Put, after the index query
// for shards that outlived an expired shard 0 (see
// TestStoryShardZeroExpiredBesideItsSibling); so do quotas.
func TestOneCallCreateOnlyForLimitsThatNeverDouble(t *testing.T) {
	if !plan1(bucketRef).createsInOne() {
		t.Error("10/s: want the one-call create")
	}
	if planBusy(bucketRef).createsInOne() {
		t.Error("1,000/s: want the Put after the index query")
	}
}
