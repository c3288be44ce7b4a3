package memsim_test

import (
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// A partition's write bucket, at 3 WCU a second, through the edges of its
// refill: it starts full even when the store's clock reads the Unix epoch,
// holds at most a second's worth however long it waits (a day's wait at
// DynamoDB's 1000 WCU would overflow a plain rate × time), and neither
// refills nor drains when the clock steps back.
func TestPartitionRefillEdges(t *testing.T) {
	put := func(st *memsim.Store) error {
		_, err := st.Put(ctx, store.PutInput{Item: item(key("p"))})
		return err
	}
	epoch := memsim.NewManualClock(time.Unix(0, 0))
	st := memsim.New(memsim.WithClock(epoch), memsim.WithPartitionLimits(3, 5))
	if err := put(st); err != nil {
		t.Fatalf("the first write at the epoch: %v", err)
	}
	if got := st.Partition("p").WriteAvailable; got != 2 {
		t.Fatalf("at the epoch, after one write: %v available, want 2", got)
	}

	clock := memsim.NewManualClock(time.Unix(1e9, 0))
	st = memsim.New(memsim.WithClock(clock), memsim.WithPartitionLimits(3, 5))
	if err := put(st); err != nil {
		t.Fatal(err)
	}
	clock.Add(600 * time.Millisecond) // 2 + 1.8, capped
	if got := st.Partition("p").WriteAvailable; got != 3 {
		t.Fatalf("0.6 s after a write: %v available, want 3 (a second's worth)", got)
	}
	for i := range 4 {
		if err := put(st); (err != nil) != (i == 3) {
			t.Fatalf("write %d of 4 at once into 3 units: %v", i+1, err)
		}
	}
	now := clock.Now()
	clock.Set(now.Add(-500 * time.Millisecond))
	if got := st.Partition("p").WriteAvailable; got != 0 {
		t.Fatalf("the clock half a second back: %v available, want the 0 left", got)
	}
	clock.Set(now.Add(500 * time.Millisecond))
	if got := st.Partition("p").WriteAvailable; got != 1.5 {
		t.Fatalf("half a second after the last write: %v available, want 1.5", got)
	}

	day := memsim.NewManualClock(time.Unix(1e9, 0))
	st = memsim.New(memsim.WithClock(day))
	if err := put(st); err != nil {
		t.Fatal(err)
	}
	day.Add(24 * time.Hour)
	if got := st.Partition("p").WriteAvailable; got != 1000 {
		t.Fatalf("a day after a write at 1000 WCU: %v available, want 1000", got)
	}
}
