package aggregator

import (
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
)

// A calendar quota's consumption (q_{limit}_tc) is usage like a rate's:
// a monthly budget shows in the usage snapshots, also across the write
// that starts a new window (tk is set afresh, tc only grows).
func TestQuotaConsumptionIsUsage(t *testing.T) {
	at := time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC)
	old := store.Item{store.AttrPK: store.Str("ns/BUCKET#team-1#gpt-4#0"), store.AttrSK: store.Str("#STATE"),
		"rf": store.Int(1), "b_rpm_tc": store.Int(5000), "q_usd_tc": store.Int(900_000), "q_usd_tk": store.Int(100_000), "q_usd_ws": store.Int(1)}
	nw := store.Item{}
	for k, v := range old {
		nw[k] = v
	}
	nw["b_rpm_tc"], nw["q_usd_tc"], nw["q_usd_tk"], nw["q_usd_ws"] = store.Int(6000), store.Int(950_000), store.Int(950_000), store.Int(2)
	ds, err := ExtractDeltas(Record{EventName: EventModify, Keys: store.Key{PK: "ns/BUCKET#team-1#gpt-4#0", SK: "#STATE"}, Old: old, New: nw, At: at, SequenceNumber: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Limit != "rpm" || ds[0].Amount != 1000 || ds[1].Limit != "usd" || ds[1].Amount != 50_000 {
		t.Fatalf("deltas %+v, want rpm 1000 and usd 50000", ds)
	}
}
