package linearize

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// faulty is a store that is not linearizable: now and then a read returns
// an item as it was earlier, or a write is applied twice.
type faulty struct {
	store.Store
	mu    sync.Mutex
	r     *rand.Rand
	seen  map[store.Key]store.Item
	stale bool // stale reads; else double writes
}

func (f *faulty) roll(pct int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.r.IntN(100) < pct
}

func (f *faulty) Get(ctx context.Context, in store.GetInput) (store.GetOutput, error) {
	out, err := f.Store.Get(ctx, in)
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.seen[in.Key]; ok && f.stale && f.r.IntN(100) < 30 {
		out.Item = old
	}
	f.seen[in.Key] = out.Item
	return out, err
}

func (f *faulty) Update(ctx context.Context, in store.UpdateInput) (store.WriteOutput, error) {
	// One update in four applied twice: one in ten left 3 of 10 histories
	// under -race on a loaded machine without a visible double write.
	if !f.stale && f.roll(25) {
		_, _ = f.Store.Update(ctx, in)
	}
	return f.Store.Update(ctx, in)
}

// The checker finds the violations of a store that is not linearizable.
func TestCheckerFindsViolations(t *testing.T) {
	for _, stale := range []bool{true, false} {
		found := 0
		for seed := range uint64(10) {
			st := &faulty{Store: memsim.New(memsim.WithPartitionLimits(0, 0)), r: rand.New(rand.NewPCG(seed, 9)),
				seen: map[store.Key]store.Item{}, stale: stale}
			h := Record(st, Config{Clients: 4, Ops: 80, Seed: seed, NS: "f" + strconv.FormatUint(seed, 10), Groups: 2})
			if res := porcupine.CheckOperationsTimeout(Model(), h, time.Minute); res == porcupine.Illegal {
				found++
			}
		}
		t.Logf("stale reads %v: violations found in %d of 10 histories", stale, found)
		if found < 8 {
			t.Errorf("stale reads %v: violations found in %d of 10 histories", stale, found)
		}
	}
}

// A sequential history of memsim itself is linearizable, and so is one
// whose answers were lost.
func TestSequentialHistories(t *testing.T) {
	st := memsim.New(memsim.WithPartitionLimits(0, 0),
		memsim.WithFaults(memsim.Probability(0.2, 1, memsim.FaultLostResponse)))
	h := Record(st, Config{Clients: 1, Ops: 300, Seed: 7, NS: "s", Groups: 1})
	if s := stats(h); s.Unknown == 0 {
		t.Fatalf("no lost answer in %+v", s)
	}
	if res := porcupine.CheckOperationsTimeout(Model(), h, time.Minute); res != porcupine.Ok {
		t.Fatalf("a sequential history: %v", res)
	}
}
