package memsim_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/google/go-cmp/cmp"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/schema"
	"github.com/shardlimit/limiter/store/memsim"
	"github.com/shardlimit/limiter/store/storetest"
)

var (
	_ memsim.Clock = clock.NewMock()
	_ memsim.Clock = clock.New()
	_ store.Store  = memsim.New()
)

func TestManualClock(t *testing.T) {
	c := memsim.NewManualClock(memsim.Epoch())
	if !c.Now().Equal(memsim.Epoch()) {
		t.Fatal(c.Now())
	}
	if got := c.Add(1500 * time.Millisecond); !got.Equal(memsim.Epoch().Add(1500*time.Millisecond)) || !c.Now().Equal(got) {
		t.Fatal(got)
	}
	at := time.Date(2030, 5, 6, 7, 8, 9, 10, time.UTC)
	c.Set(at)
	if !c.Now().Equal(at) {
		t.Fatal(c.Now())
	}
	// Sleep moves the clock and returns at once; a done context moves nothing.
	if err := c.Sleep(context.Background(), time.Second); err != nil || !c.Now().Equal(at.Add(time.Second)) {
		t.Fatal(err, c.Now())
	}
	if err := c.Sleep(context.Background(), -time.Second); err != nil || !c.Now().Equal(at.Add(time.Second)) {
		t.Fatal(err, c.Now())
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(done, time.Second); !errors.Is(err, context.Canceled) || !c.Now().Equal(at.Add(time.Second)) {
		t.Fatal(err, c.Now())
	}
}

// A store made without a clock reads the wall clock, as a limiter made
// without one does: its partitions refill as the limiter's buckets do.
func TestDefaultClockIsTheWallClock(t *testing.T) {
	before := time.Now()
	got := memsim.New().Clock().Now()
	after := time.Now()
	if got.Before(before) || got.After(after) {
		t.Fatalf("default clock read %v, want a time in [%v, %v]", got, before, after)
	}
}

func TestPutValidation(t *testing.T) {
	s := memsim.New()
	k := key("a")
	for _, tc := range []struct {
		name string
		it   store.Item
		msg  string
	}{
		{"missing PK", store.Item{store.AttrSK: store.Str("x")}, "One or more parameter values were invalid: Missing the key PK in the item"},
		{"missing SK", store.Item{store.AttrPK: store.Str("x")}, "One or more parameter values were invalid: Missing the key SK in the item"},
		{"nil item", nil, "Missing the key PK in the item"},
		{"number PK", store.Item{store.AttrPK: store.Int(1), store.AttrSK: store.Str("x")}, "One or more parameter values were invalid: Type mismatch for key PK expected: S actual: N"},
		{"empty SK", store.Item{store.AttrPK: store.Str("x"), store.AttrSK: store.Str("")}, "The AttributeValue for a key attribute cannot contain an empty string value. Key: SK"},
		{"zero value", item(k, "v", store.Value{}), "Supplied AttributeValue is empty"},
		{"zero key value", store.Item{store.AttrPK: store.Value{}, store.AttrSK: store.Str("x")}, "Supplied AttributeValue is empty"},
		{"number index key", item(k, store.AttrGSI2PK, 1), "Type mismatch for Index Key GSI2PK Expected: S Actual: N IndexName: GSI2"},
		{"empty index key", item(k, store.AttrGSI3SK, ""), "IndexName: GSI3, IndexKey: GSI3SK"},
		{"huge PK", item(store.Key{PK: string(make([]byte, 2049)), SK: "x"}), "Size of hashkey has exceeded the maximum size limit of 2048 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := s.Put(ctx, store.PutInput{Item: tc.it})
			wantValidation(t, err, tc.msg)
			if out.Consumed != (store.Capacity{}) {
				t.Fatal("validation error consumed capacity")
			}
		})
	}
	_, err := s.Update(ctx, store.UpdateInput{Key: store.Key{SK: "x"}})
	wantValidation(t, err, "Key: PK")
	_, err = s.Get(ctx, store.GetInput{Key: store.Key{PK: "x"}})
	wantValidation(t, err, "Key: SK")
	_, err = s.Delete(ctx, store.DeleteInput{Key: k, Expr: store.Expr{Update: "SET #a = :v"}})
	wantValidation(t, err, "update expression is not allowed")
	tot := s.Totals()
	if s.Len() != 0 || tot.Consumed != (store.Capacity{}) || tot.ValidationErrors != tot.Requests {
		t.Fatalf("validation errors changed something: %+v", tot)
	}
	// A Put item is copied: changing the caller's map changes nothing.
	it := item(k, "n", 1)
	mustPut(t, s, it)
	it["n"] = store.Int(2)
	wantItem(t, s.Peek(k), item(k, "n", 1))
}

func TestUpdateWithoutActions(t *testing.T) {
	s := memsim.New()
	k := key("a")
	// No update expression at all: the item is created with its key only.
	out := mustUpdate(t, s, store.UpdateInput{Key: k, Return: store.ReturnAllNew})
	wantItem(t, out.Attributes, item(k))
	wantItem(t, s.Peek(k), item(k))
	// Only REMOVE on a missing item: nothing is created, 1 WCU is billed.
	k2 := key("b")
	out = mustUpdate(t, s, store.UpdateInput{Key: k2, Return: store.ReturnAllNew,
		Expr: storetest.Build(t, store.Update{}.Remove("x"), store.Condition{})})
	if out.Attributes != nil || s.Peek(k2) != nil || out.Consumed.WriteUnits != 1 || s.StreamLen() != 1 {
		t.Fatalf("REMOVE on a missing item: %+v, item %v, stream %d", out, s.Peek(k2), s.StreamLen())
	}
}

func bucketItem(entity, resource string, shard int, kv ...any) store.Item {
	k := store.Key{PK: "ns/BUCKET#" + entity + "#" + resource + "#" + fmt.Sprint(shard), SK: "#STATE"}
	base := []any{
		store.AttrGSI2PK, "ns/RESOURCE#" + resource, store.AttrGSI2SK, "BUCKET#" + entity + "#" + fmt.Sprint(shard),
		store.AttrGSI3PK, "ns/ENTITY#" + entity, store.AttrGSI3SK, "BUCKET#" + resource + "#" + fmt.Sprint(shard),
	}
	return item(k, append(base, kv...)...)
}

func TestQuery(t *testing.T) {
	s := memsim.New()
	for _, sk := range []string{"b#2", "a#1", "b#1", "c"} {
		mustPut(t, s, item(store.Key{PK: "p", SK: sk}, "v", sk))
	}
	mustPut(t, s, item(store.Key{PK: "q", SK: "b#0"}))
	out, err := s.Query(ctx, store.QueryInput{PartitionKey: "p", SortKeyPrefix: "b#", ConsistentRead: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 2 {
		t.Fatalf("items %v", out.Items)
	}
	wantItem(t, out.Items[0], item(store.Key{PK: "p", SK: "b#1"}, "v", "b#1"))
	wantItem(t, out.Items[1], item(store.Key{PK: "p", SK: "b#2"}, "v", "b#2"))
	if out.Consumed.ReadUnits != 1 {
		t.Fatalf("consumed %+v", out.Consumed)
	}
	out, _ = s.Query(ctx, store.QueryInput{PartitionKey: "p", Limit: 3})
	if len(out.Items) != 3 || out.Items[0][store.AttrSK] != store.Str("a#1") || out.Items[2][store.AttrSK] != store.Str("b#2") || out.Consumed.ReadUnits != 0.5 {
		t.Fatalf("limit 3: %v %+v", out.Items, out.Consumed)
	}
	out, _ = s.Query(ctx, store.QueryInput{PartitionKey: "none"})
	if len(out.Items) != 0 || out.Consumed.ReadUnits != 0.5 {
		t.Fatalf("empty partition: %v %+v", out.Items, out.Consumed)
	}

	// Index: keys-only items, index sort-key order.
	mustPut(t, s, bucketItem("e2", "gpt", 0, "tk", 5))
	mustPut(t, s, bucketItem("e1", "gpt", 1, "tk", 6))
	mustPut(t, s, bucketItem("e1", "gpt", 0, "tk", 7))
	mustPut(t, s, bucketItem("e1", "other", 0, "tk", 8))
	out, err = s.Query(ctx, store.QueryInput{Index: store.IndexGSI2, PartitionKey: "ns/RESOURCE#gpt", SortKeyPrefix: "BUCKET#e1#"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 2 {
		t.Fatalf("index items %v", out.Items)
	}
	want := bucketItem("e1", "gpt", 0)
	delete(want, store.AttrGSI3PK)
	delete(want, store.AttrGSI3SK)
	wantItem(t, out.Items[0], want)
	if out.Items[1][store.AttrGSI2SK] != store.Str("BUCKET#e1#1") {
		t.Fatalf("order: %v", out.Items)
	}
	out, _ = s.Query(ctx, store.QueryInput{Index: store.IndexGSI3, PartitionKey: "ns/ENTITY#e1"})
	if len(out.Items) != 3 {
		t.Fatalf("GSI3: %v", out.Items)
	}
	if ps := s.IndexPartition(store.IndexGSI3, "ns/ENTITY#e1"); ps.Consumed.ReadUnits != 0.5 || ps.Requests != 1+3 {
		t.Fatalf("GSI3 partition %+v", ps)
	}

	_, err = s.Query(ctx, store.QueryInput{Index: "GSI9", PartitionKey: "x"})
	wantValidation(t, err, "The table does not have the specified index: GSI9")
	_, err = s.Query(ctx, store.QueryInput{Index: store.IndexGSI2, PartitionKey: "x", ConsistentRead: true})
	wantValidation(t, err, "Consistent reads are not supported on global secondary indexes")
	_, err = s.Query(ctx, store.QueryInput{PartitionKey: ""})
	wantValidation(t, err, "Key: PK")
}

func TestIndexWrites(t *testing.T) {
	s := memsim.New()
	it := bucketItem("e1", "gpt", 0, "tk", 5)
	k, _ := it.Key()
	out := mustPut(t, s, it)
	// 1 table write and one entry in each of GSI2 and GSI3.
	if out.Consumed != (store.Capacity{WriteUnits: 3, IndexWriteUnits: 2}) {
		t.Fatalf("create: %+v", out.Consumed)
	}
	// The hot path changes no index key: keys-only indexes are not written.
	out = mustUpdate(t, s, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("tk", store.Int(-1)).Set("rf", store.Int(1)), store.Condition{})})
	if out.Consumed != (store.Capacity{WriteUnits: 1}) {
		t.Fatalf("token write: %+v", out.Consumed)
	}
	// Changing an index key moves the entry: a delete and a put.
	out = mustUpdate(t, s, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Set(store.AttrGSI2SK, store.Str("BUCKET#e1#9")), store.Condition{})})
	if out.Consumed != (store.Capacity{WriteUnits: 3, IndexWriteUnits: 2}) {
		t.Fatalf("index key change: %+v", out.Consumed)
	}
	// Losing an index key removes the entry.
	out = mustUpdate(t, s, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Remove(store.AttrGSI3PK), store.Condition{})})
	if out.Consumed != (store.Capacity{WriteUnits: 2, IndexWriteUnits: 1}) {
		t.Fatalf("index key removed: %+v", out.Consumed)
	}
	if q, _ := s.Query(ctx, store.QueryInput{Index: store.IndexGSI3, PartitionKey: "ns/ENTITY#e1"}); len(q.Items) != 0 {
		t.Fatalf("item still in GSI3: %v", q.Items)
	}
	// Deleting the item removes its remaining entry (GSI2).
	d, err := s.Delete(ctx, store.DeleteInput{Key: k})
	if err != nil || d.Consumed != (store.Capacity{WriteUnits: 2, IndexWriteUnits: 1}) {
		t.Fatalf("delete: %+v %v", d.Consumed, err)
	}
	tot := s.Totals()
	if tot.Consumed.IndexWriteUnits != 2+0+2+1+1 {
		t.Fatalf("totals %+v", tot.Consumed)
	}
	if ps := s.IndexPartition(store.IndexGSI2, "ns/RESOURCE#gpt"); ps.Consumed.IndexWriteUnits != 4 || ps.Consumed.WriteUnits != 4 {
		t.Fatalf("GSI2 partition %+v", ps)
	}

	// ProjectAll: any change of the item rewrites the entry.
	all := memsim.New(memsim.WithSchema(schema.Schema{PartitionKey: store.AttrPK, SortKey: store.AttrSK, Indexes: []schema.Index{
		{Name: "ALL", PartitionKey: store.AttrGSI2PK, SortKey: store.AttrGSI2SK, Projection: schema.ProjectAll},
	}}))
	mustPut(t, all, it)
	out = mustUpdate(t, all, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("tk", store.Int(-1)), store.Condition{})})
	if out.Consumed != (store.Capacity{WriteUnits: 2, IndexWriteUnits: 1}) {
		t.Fatalf("ProjectAll token write: %+v", out.Consumed)
	}
	out = mustUpdate(t, all, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("tk", store.Int(0)), store.Condition{})})
	if out.Consumed != (store.Capacity{WriteUnits: 1}) {
		t.Fatalf("ProjectAll no-op write: %+v", out.Consumed)
	}
	q, _ := all.Query(ctx, store.QueryInput{Index: "ALL", PartitionKey: "ns/RESOURCE#gpt"})
	if len(q.Items) != 1 || q.Items[0]["tk"] != store.Int(4) {
		t.Fatalf("ProjectAll query %v", q.Items)
	}
}

func TestIndexPartitionThrottles(t *testing.T) {
	// Every bucket of one resource lands on one GSI2 partition: creating
	// buckets fast throttles on the index, and the table write fails too.
	s := memsim.New(memsim.WithPartitionLimits(10, 0), memsim.WithClock(memsim.NewManualClock(memsim.Epoch())))
	for i := range 10 {
		mustPut(t, s, bucketItem(fmt.Sprintf("e%d", i), "gpt", 0))
	}
	_, err := s.Put(ctx, store.PutInput{Item: bucketItem("e10", "gpt", 0)})
	var te *store.ThrottledError
	if !errors.As(err, &te) || te.Reason != "IndexWriteKeyRangeThroughputExceeded" {
		t.Fatalf("err = %v", err)
	}
	if s.Len() != 10 {
		t.Fatal("throttled write applied")
	}
	ps := s.Partitions()
	// The table partition of e10 was looked at (and had room); GSI2 refused.
	if len(ps) != 11+1+10 || ps[0].Index != "" || ps[11].Index != store.IndexGSI2 || ps[12].Index != store.IndexGSI3 {
		t.Fatalf("partitions %+v", ps)
	}
	for i := 1; i < len(ps); i++ {
		if ps[i-1].Index == ps[i].Index && ps[i-1].PK >= ps[i].PK {
			t.Fatal("partitions not sorted")
		}
	}
	if ps[11].Throttles != 1 || ps[11].Requests != 10 || ps[2].PK != "ns/BUCKET#e10#gpt#0" || ps[2].Requests != 0 {
		t.Fatalf("GSI2 partition %+v", ps[11])
	}
}

func TestWriteConcurrently(t *testing.T) {
	s := memsim.New()
	a, b := key("a"), key("b")
	mustPut(t, s, item(b, "n", 1))
	res := s.WriteConcurrently(ctx, []store.Write{
		{Put: &store.PutInput{Item: item(a)}},
		{Delete: &store.DeleteInput{Key: b, Expr: storetest.Build(t, store.Update{}, store.Name("n").Equal(store.Int(2)))}},
		{},
		{Delete: &store.DeleteInput{Key: b}, Put: &store.PutInput{Item: item(b)}},
		{Delete: &store.DeleteInput{Key: b, Return: store.ReturnAllOld}},
	})
	if len(res) != 5 || res[0].Err != nil || res[0].Output.Consumed.WriteUnits != 1 {
		t.Fatalf("res[0] %+v", res[0])
	}
	wantCondFailed(t, res[1].Err)
	wantValidation(t, res[2].Err, "exactly one")
	wantValidation(t, res[3].Err, "exactly one")
	if res[4].Err != nil {
		t.Fatal(res[4].Err)
	}
	wantItem(t, res[4].Output.Attributes, item(b, "n", 1))
	recs := s.Stream(0)
	if len(recs) != 3 || recs[1].Keys != a || recs[2].Event != memsim.EventRemove {
		t.Fatalf("writes not applied in order: %+v", recs)
	}
}

func TestHookForcesLostRace(t *testing.T) {
	// Optimistic locking on rf: the hook lets a competing writer move rf
	// just before this client's write is evaluated.
	var s *memsim.Store
	k := key("bucket")
	raced := false
	s = memsim.New(memsim.WithHook(func(hctx context.Context, op memsim.Op) {
		if op.Kind == memsim.OpUpdate && !raced {
			raced = true
			// Calls made with the hook's context do not re-enter the hook.
			if _, err := s.Update(hctx, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Set("rf", store.Int(200)), store.Condition{})}); err != nil {
				t.Errorf("competing write: %v", err)
			}
		}
	}))
	mustPut(t, s, item(k, "rf", 100))
	_, err := s.Update(ctx, store.UpdateInput{Key: k, ReturnOldOnConditionFailure: true,
		Expr: storetest.Build(t, store.Update{}.Set("rf", store.Int(150)), store.Name("rf").Equal(store.Int(100)))})
	cf := wantCondFailed(t, err)
	wantItem(t, cf.Item, item(k, "rf", 200))
	if s.Totals().Ops[memsim.OpUpdate].Requests != 2 {
		t.Fatal("hook request not counted")
	}
}

func TestConcurrentWriters(t *testing.T) {
	s := memsim.New(memsim.WithPartitionLimits(0, 0))
	k := key("counter")
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := storetest.Build(t, store.Update{}.Add("n", store.Int(1)).Add(fmt.Sprintf("w%d", w), store.Int(1)), store.Condition{})
				if _, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: e, Return: store.ReturnAllNew}); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					s.Get(ctx, store.GetInput{Key: k})
					s.Stream(s.StreamLen() - 1)
					s.Totals()
					s.Partitions()
				}
			}
		}()
	}
	wg.Wait()
	got := s.Peek(k)
	if n, _ := got.Int("n"); n != writers*each {
		t.Fatalf("n = %d, want %d", n, writers*each)
	}
	if s.StreamLen() != writers*each {
		t.Fatalf("%d records", s.StreamLen())
	}
}

func TestConcurrentPutsAndReads(t *testing.T) {
	// Like TestConcurrentWriters, without expressions.
	s := memsim.New(memsim.WithPartitionLimits(0, 0))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				k := key(fmt.Sprintf("p%d", i%7))
				mustPut(t, s, item(k, "w", w, "i", i))
				if _, err := s.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{k, key("x")}}); err != nil {
					t.Error(err)
				}
				s.Query(ctx, store.QueryInput{PartitionKey: k.PK})
				s.Items()
			}
		}()
	}
	wg.Wait()
	if s.StreamLen() == 0 || s.Len() != 7 {
		t.Fatal(s.StreamLen(), s.Len())
	}
}

func TestSharedResults(t *testing.T) {
	s := memsim.New(memsim.WithSharedResults(true))
	k := key("a")
	out := mustUpdate(t, s, store.UpdateInput{Key: k, Return: store.ReturnAllNew,
		Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
	wantItem(t, out.Attributes, item(k, "n", 1))
	wantItem(t, s.Stream(0)[0].New, item(k, "n", 1))
	// Reads still hand out copies.
	g, _ := s.Get(ctx, store.GetInput{Key: k})
	g.Item["n"] = store.Int(5)
	wantItem(t, s.Peek(k), item(k, "n", 1))
}

func TestOpsSeenByHookAndInjector(t *testing.T) {
	clk := memsim.NewManualClock(memsim.Epoch())
	var hooked, injected []memsim.Op
	s := memsim.New(memsim.WithClock(clk),
		memsim.WithHook(func(_ context.Context, op memsim.Op) { hooked = append(hooked, op) }),
		memsim.WithFaults(memsim.Func("record", func(op memsim.Op) memsim.Decision {
			injected = append(injected, op)
			return memsim.Decision{}
		})))
	clk.Add(time.Second)
	a, b := key("a"), key("b")
	s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{putAction(item(b)), {Delete: &store.DeleteInput{Key: a}}}})
	s.Query(ctx, store.QueryInput{Index: store.IndexGSI3, PartitionKey: "e"})
	s.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{a, b}})
	s.Put(ctx, store.PutInput{Item: store.Item{}}) // invalid: neither hook nor injector sees it
	want := []memsim.Op{
		{Kind: memsim.OpTransactWrite, Keys: []store.Key{b, a}, Time: memsim.Epoch().Add(time.Second)},
		{Kind: memsim.OpQuery, Keys: []store.Key{{PK: "e"}}, Index: store.IndexGSI3, Time: memsim.Epoch().Add(time.Second)},
		{Kind: memsim.OpBatchGet, Keys: []store.Key{a, b}, Time: memsim.Epoch().Add(time.Second)},
	}
	if diff := cmp.Diff(want, hooked); diff != "" {
		t.Fatalf("hook saw (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, injected); diff != "" {
		t.Fatalf("injector saw (-want +got):\n%s", diff)
	}
}
