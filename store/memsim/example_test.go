package memsim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// A fault plan is a value that prints itself: log it with a simulation's
// seed and the run can be replayed exactly.
func Example_faultPlan() {
	start := memsim.Epoch()
	plan := memsim.Chain(
		// 5% of requests between 10 s and 20 s fail with a 5xx after
		// they were applied.
		memsim.During(start.Add(10*time.Second), start.Add(20*time.Second),
			memsim.Probability(0.05, 7, memsim.Fault5xxAfterApply)),
		// The second Put's answer is lost.
		memsim.OnOps([]memsim.OpKind{memsim.OpPut}, memsim.Nth(2, memsim.FaultLostResponse)),
	)
	fmt.Println(plan)

	clk := memsim.NewManualClock(start)
	st := memsim.New(memsim.WithClock(clk), memsim.WithFaults(plan))
	ctx := context.Background()
	for _, sk := range []string{"a", "b", "c"} {
		_, err := st.Put(ctx, store.PutInput{Item: store.Item{
			store.AttrPK: store.Str("tenant"), store.AttrSK: store.Str(sk),
		}})
		fmt.Printf("put %s: err=%v outcomeUnknown=%v\n", sk, err != nil, store.OutcomeUnknown(err))
	}
	fmt.Println("items stored:", len(st.Items()), "faults:", st.Totals().Faults)
	// Output:
	// chain(during[10s,20s](p=0.05 seed=7 -> 5xx-after-apply), on[Put](nth(2 -> lost-response)))
	// put a: err=false outcomeUnknown=false
	// put b: err=true outcomeUnknown=true
	// put c: err=false outcomeUnknown=false
	// items stored: 3 faults: 1
}

// Capacity is reported on every answer, failed conditions included, and
// summed per partition.
func ExampleStore_Partition() {
	st := memsim.New(memsim.WithClock(memsim.NewManualClock(memsim.Epoch()))) // no refill unless the clock moves
	ctx := context.Background()
	it := store.Item{store.AttrPK: store.Str("p"), store.AttrSK: store.Str("s")}
	out, _ := st.Put(ctx, store.PutInput{Item: it})
	fmt.Println("put:", out.Consumed.WriteUnits, "WCU")
	notExists, _ := store.Build(store.Update{}, store.Name(store.AttrPK).NotExists())
	out, err := st.Put(ctx, store.PutInput{Item: it, Expr: notExists})
	fmt.Println("conditional put:", err, "-", out.Consumed.WriteUnits, "WCU")
	ps := st.Partition("p")
	fmt.Println("partition p:", ps.Consumed.WriteUnits, "WCU consumed,", ps.WriteAvailable, "left this second")
	// Output:
	// put: 1 WCU
	// conditional put: The conditional request failed - 1 WCU
	// partition p: 2 WCU consumed, 998 left this second
}
