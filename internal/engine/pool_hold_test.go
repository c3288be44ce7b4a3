package engine

import (
	"maps"
	"testing"
)

// What a pool handed out of its hold goes back to the bucket with the
// pool's next reservation (Used takes it out of the pool's hold), and
// comes back to the pool when that reservation does not land (Restore, in
// the pool's generation only). A pool that is gone, of other limits or at
// the end of its life hands out nothing.
func TestPoolUsedAndRestore(t *testing.T) {
	two := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, nil)
	live := func() *Pools { // rps: 400 of 1000 handed out; tpm: none of 500
		ps := NewPools()
		if back := ps.Add(two, map[string]int64{"rps": 1000, "tpm": 500}, 2, 4, 7, T, T+PoolLifeMs); back != nil {
			t.Fatalf("a first pool returned %+v", back)
		}
		if _, ok := ps.Take(two.WithAmounts(map[string]int64{"rps": 400}), T); !ok {
			t.Fatal("the pool served nothing")
		}
		return ps
	}
	held := func(ps *Pools) map[string]int64 { return maps.Clone(ps.pools[idOf(bucketRef)].held) }

	ps := live()
	if h := held(ps); h["rps"] != 1000 || h["tpm"] != 500 {
		t.Fatalf("the pool holds %v after Add, want the 1000 and 500 reserved", h)
	}
	used, shard, gen := ps.Used(two, T+1)
	if len(used) != 1 || used["rps"] != 400 || shard != 2 || gen != 7 {
		t.Fatalf("Used = %v on shard %d gen %d, want rps 400 (tpm handed out nothing) on shard 2 gen 7", used, shard, gen)
	}
	if h := held(ps); h["rps"] != 600 || h["tpm"] != 500 {
		t.Fatalf("the pool holds %v after Used, want rps 600, tpm 500", h)
	}
	if again, _, _ := ps.Used(two, T+1); again != nil {
		t.Fatalf("Used again = %v, want nothing more handed out", again)
	}
	ps.Restore(two, used, 8) // another generation's: not this pool's hold
	if h := held(ps); h["rps"] != 600 {
		t.Fatalf("the pool holds %v after a Restore of another generation, want rps 600", h)
	}
	ps.Restore(two, used, 7)
	if h := held(ps); h["rps"] != 1000 || h["tpm"] != 500 {
		t.Fatalf("the pool holds %v after Restore, want rps 1000, tpm 500 again", h)
	}

	for _, c := range []struct {
		name string
		ps   func() *Pools
		plan *Plan
		at   int64
	}{
		{"no pool", NewPools, two, T},
		{"a drained pool", func() *Pools {
			ps := live()
			ps.pools[idOf(bucketRef)].drain(T)
			return ps
		}, two, T},
		{"other limits", live, rpsPlan(0), T},
		{"at the end of its life", live, two, T + PoolLifeMs},
	} {
		ps := c.ps()
		if used, shard, gen := ps.Used(c.plan, c.at); used != nil || shard != -1 || gen != 0 {
			t.Errorf("%s: Used = %v on shard %d gen %d, want nothing, shard -1", c.name, used, shard, gen)
		}
		ps.Restore(c.plan, map[string]int64{"rps": 5}, 7) // must not write into a pool that is not there
		if c.name == "a drained pool" && ps.pools[idOf(bucketRef)].held != nil {
			t.Errorf("%s: Restore wrote into a drained pool", c.name)
		}
	}
}

// A pool that handed out everything it reserved still returns its hold:
// the rest is 0, the release is what it held.
func TestPoolDrainReturnsAHoldWithoutRest(t *testing.T) {
	ps := NewPools()
	ps.Add(rpsPlan(0), map[string]int64{"rps": 1000}, 0, 1, 3, T, T+PoolLifeMs)
	if _, ok := ps.Take(rpsPlan(1), T); !ok {
		t.Fatal("the pool served nothing")
	}
	back := ps.Add(rpsPlan(0), map[string]int64{"rps": 1000}, 1, 1, 3, T, T+PoolLifeMs) // another shard
	if back == nil || back.Shard != 0 || back.Plan.gen != 3 {
		t.Fatalf("the drained pool returned %+v, want its hold back to shard 0 in generation 3", back)
	}
	if s := &back.Plan.specs[0]; s.name != "rps" || s.amount != 0 || s.release != 1000 {
		t.Fatalf("the return: %s amount %d release %d, want rps, no rest, release 1000", s.name, s.amount, s.release)
	}
}
