package dynamo

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/storetest"
)

// bucketAnswer is DynamoDB's answer to the limiter's speculative write
// with ReturnValues ALL_NEW: a bucket item of two limits (one named, and
// the hidden wcu), 29 attributes with the index keys.
const bucketAnswer = `{"Attributes":{"GSI2PK":{"S":"ns/RESOURCE#default#0"},"GSI2SK":{"S":"BUCKET#e0#0"},` +
	`"GSI3PK":{"S":"ns/ENTITY#e0"},"GSI3SK":{"S":"BUCKET#default#0"},"PK":{"S":"ns/BUCKET#e0#default#0"},"SK":{"S":"#STATE"},` +
	`"b_rps_bx":{"N":"100000000"},"b_rps_cp":{"N":"100000000"},"b_rps_fh":{"N":"1795572856931"},"b_rps_fl":{"N":"1795572856931"},` +
	`"b_rps_ra":{"N":"100000000"},"b_rps_rp":{"N":"1000"},"b_rps_tc":{"N":"5000"},"b_rps_tk":{"N":"99999000"},` +
	`"b_wcu_bx":{"N":"1000000"},"b_wcu_cp":{"N":"1000000"},"b_wcu_fh":{"N":"1795572856931"},"b_wcu_fl":{"N":"1795572856931"},` +
	`"b_wcu_ra":{"N":"1000000"},"b_wcu_rp":{"N":"1000"},"b_wcu_tc":{"N":"5000"},"b_wcu_tk":{"N":"999000"},` +
	`"entity_id":{"S":"e0"},"lh":{"N":"5852862709464147555"},"resource":{"S":"default"},"rf":{"N":"1795572856930"},` +
	`"shard":{"N":"0"},"shard_count":{"N":"1"},"ttl":{"N":"1795576458"}},` +
	`"ConsumedCapacity":{"TableName":"t","CapacityUnits":1.0,"Table":{"CapacityUnits":1.0}}}`

// bucketWrite is the shape of the limiter's speculative write on such an
// item (eight SETs, two ADDs, a five-part condition; 13 names, 14 values),
// with one set of its values.
func bucketWrite(t testing.TB) store.Expr {
	s := store.Int
	u := store.Update{}.Set("rf", s(1795572856930)).Set("ttl", s(1795576458)).
		Set("b_rps_tk", s(99999000)).Set("b_rps_fl", s(1795572856931)).Set("b_rps_fh", s(1795572856931)).
		Set("b_wcu_tk", s(999000)).Set("b_wcu_fl", s(1795572856931)).Set("b_wcu_fh", s(1795572856931)).
		Add("b_rps_tc", s(1000)).Add("b_wcu_tc", s(1000))
	c := store.And(store.Name("lh").Equal(s(5852862709464147555)), store.Name("shard_count").Equal(s(1)),
		store.Name("rf").LessThan(s(1795572856930)), store.Name("hg").NotExists(), store.Name("b_rps_fh").LessThanEqual(s(1795572856930)))
	return storetest.Build(t, u, c)
}

// BenchmarkClientOverhead is the client-side cost of the limiter's
// speculative write, raw SDK against store/dynamo, with a server that
// answers at once (a canned answer of 29 attributes): the work the store
// adds to every call, without the noise of a real server. Compare the
// sub-benchmarks' allocs/op and B/op (ns/op includes the test server's
// own work); "convert" is the store's conversions alone (the request
// from a store.UpdateInput, the answer into a store.Item).
func BenchmarkClientOverhead(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		io.WriteString(w, bucketAnswer)
	}))
	defer srv.Close()
	client := wireClient(srv.URL)
	ex := bucketWrite(b)
	input := func() store.UpdateInput {
		return store.UpdateInput{Key: counterKey, Expr: ex, Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}
	}
	st := New(client, "t")
	raw, err := st.updateInput(input())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	answer, err := client.UpdateItem(ctx, raw)
	if err != nil || len(answer.Attributes) != 29 {
		b.Fatalf("canned answer: %d attributes, %v", len(answer.Attributes), err)
	}
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := client.UpdateItem(ctx, raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("store", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.Update(ctx, input()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("convert", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.updateInput(input()); err != nil {
				b.Fatal(err)
			}
			if _, err := returned(opUpdate, answer.Attributes, answer.ConsumedCapacity); err != nil {
				b.Fatal(err)
			}
		}
	})
}
