package sim

import (
	"os"
	"testing"
	"time"
)

// TestAggregatorScenario runs the aggregator scenario with its actor: no
// invariant may break, and the usage snapshots must add up exactly to the
// stream's tc deltas.
func TestAggregatorScenario(t *testing.T) {
	t.Parallel()
	a := NewAggregatorActor()
	rep, err := Run(Config{Scenario: "aggregator", Seed: 11, Actors: []Actor{a}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("%s: %s", v.Invariant, v.Detail)
	}
	st := a.Stats()
	t.Logf("actor: %+v", st)
	t.Logf("admitted %d, throttled %d, final shards %d, doublings %d", rep.Admitted, rep.Throttled, rep.ShardCountFinal, rep.ShardDoublings)
	if st.Deliveries == 0 || st.Records == 0 {
		t.Fatalf("the actor delivered nothing: %+v", st)
	}
	if st.Duplicates == 0 || st.AlreadyApplied == 0 {
		t.Errorf("no duplicate was delivered or caught: %+v", st)
	}
	if st.Cells == 0 || st.Mismatches != 0 {
		t.Errorf("usage totals: %d cells checked, %d differ", st.Cells, st.Mismatches)
	}
	// Every admitted acquire charged 1 token (1000 millitokens) of rps;
	// the stream's tc deltas may include acquires whose answer was lost or
	// cut, so the checked total is at least what the clients saw admitted.
	if st.Consumed < int64(rep.Admitted)*1000 {
		t.Errorf("usage checked %d millitokens, clients saw %d admitted acquires", st.Consumed, rep.Admitted)
	}
}

// TestAggregatorThrottlesHotEntity compares the throttled requests of the
// first 30 s of hot-entity with and without the aggregator actor. Opt-in
// (SIM_AGGREGATOR_COMPARE=1), as it takes longer than the suite's budget:
//
//	SIM_AGGREGATOR_COMPARE=1 go test -run AggregatorThrottles -v ./sim/
func TestAggregatorThrottlesHotEntity(t *testing.T) {
	if os.Getenv("SIM_AGGREGATOR_COMPARE") == "" {
		t.Skip("two 30 s hot-entity runs (about 35 s of wall time): set SIM_AGGREGATOR_COMPARE=1")
	}
	t.Parallel()
	throttled := func(actors ...Actor) (uint64, *Report) {
		rep, err := Run(Config{Scenario: "hot-entity", Seed: 1, Duration: 30 * time.Second, Tail: -1, Actors: actors})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range rep.Violations {
			t.Errorf("%s: %s", v.Invariant, v.Detail)
		}
		var n uint64
		for _, s := range rep.Timeline {
			if s.TMs < 30_000 {
				n += s.Throttled
			}
		}
		return n, rep
	}
	type res struct {
		n   uint64
		rep *Report
	}
	ch := make(chan res, 1)
	go func() {
		n, rep := throttled()
		ch <- res{n, rep}
	}()
	a := NewAggregatorActor()
	with, wrep := throttled(a)
	r := <-ch
	without, worep := r.n, r.rep
	t.Logf("hot-entity seed 1, first 30 s: throttled %d without the aggregator, %d with it (admitted %d vs %d; doublings %d vs %d, %d by the aggregator; final shards %d vs %d)",
		without, with, worep.Admitted, wrep.Admitted, worep.ShardDoublings, wrep.ShardDoublings, a.Stats().Doublings, worep.ShardCountFinal, wrep.ShardCountFinal)
	if with >= without {
		t.Errorf("the aggregator did not reduce throttling: %d with it, %d without", with, without)
	}
}
