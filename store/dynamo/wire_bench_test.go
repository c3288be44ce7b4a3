package dynamo

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// BenchmarkClientOverhead is the client-side cost of one speculative
// consume, raw SDK against store/dynamo, with a server that answers at once
// (a canned UpdateItem answer): the work the store adds to every call,
// without the noise of a real server. Compare the two sub-benchmarks' ns/op
// and allocs/op.
func BenchmarkClientOverhead(b *testing.B) {
	answer := `{"Attributes":{"PK":{"S":"E#1"},"SK":{"S":"#STATE"},"b_rpm_tk":{"N":"99000"},"b_rpm_tc":{"N":"1000"},` +
		`"b_wcu_tk":{"N":"4000"},"b_wcu_tc":{"N":"1000"},"rf":{"N":"1700000000000"}},` +
		`"ConsumedCapacity":{"TableName":"t","CapacityUnits":1.0,"Table":{"CapacityUnits":1.0}}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		io.WriteString(w, answer)
	}))
	defer srv.Close()
	client := wireClient(srv.URL)
	e := store.MustBuild(
		store.Update{}.Add("b_rpm_tk", store.Int(-1000)).Add("b_rpm_tc", store.Int(1000)).
			Add("b_wcu_tk", store.Int(-1000)).Add("b_wcu_tc", store.Int(1000)),
		store.And(store.Name("PK").Exists(), store.Name("b_rpm_tk").GreaterThanEqual(store.Int(1000)),
			store.Name("b_wcu_tk").GreaterThanEqual(store.Int(1000))))
	in := store.UpdateInput{Key: counterKey, Expr: e, Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}
	st := New(client, "t")
	raw, err := st.updateInput(in)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := client.UpdateItem(ctx, raw)
			if err != nil || len(out.Attributes) == 0 {
				b.Fatal(err)
			}
		}
	})
	b.Run("store", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := st.Update(ctx, in)
			if err != nil || len(out.Attributes) == 0 {
				b.Fatal(err)
			}
		}
	})
}
