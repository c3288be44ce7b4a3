package storetest

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/schema"
)

// Reads of many items: BatchGet and Query (table and keys-only indexes).

var batchGetCases = []testCase{
	{"FoundAndMissingAligned", func(f *fixture) {
		a, c := item(key("a"), "n", 1), item(key("c"), "s", "x")
		f.put(a)
		f.put(c)
		keys := []store.Key{key("c"), key("b"), key("a"), key("d"), {PK: "other", SK: "a"}}
		out, err := f.batchGet(keys, true)
		if err != nil {
			f.t.Fatalf("BatchGet: %v", err)
		}
		if msg := expectBatch(out, []store.Item{c, nil, a, nil, nil}); msg != "" {
			f.t.Error(msg)
		}
		expectReadUnits(f.t, "BatchGet", out.Consumed)
	}},
	{"EventuallyConsistent", func(f *fixture) {
		a := item(key("a"), "n", 1)
		f.put(a)
		keys := []store.Key{key("missing"), key("a")}
		f.eventually(func() string {
			out, err := f.batchGet(keys, false)
			if err != nil {
				return "eventually consistent BatchGet: " + err.Error()
			}
			return expectBatch(out, []store.Item{nil, a})
		})
	}},
	// 100 keys are allowed.
	{"MaxKeys", func(f *fixture) {
		keys := make([]store.Key, 100)
		want := make([]store.Item, 100)
		for i := range keys {
			keys[i] = key(fmt.Sprintf("k%03d", i))
			if i%10 == 3 {
				want[i] = item(keys[i], "i", i)
				f.put(want[i])
			}
		}
		out, err := f.batchGet(keys, true)
		if err != nil {
			f.t.Fatalf("BatchGet of 100 keys: %v", err)
		}
		if msg := expectBatch(out, want); msg != "" {
			f.t.Error(msg)
		}
	}},
	// "Too many items requested for the BatchGetItem call".
	{"TooManyKeys", func(f *fixture) {
		keys := make([]store.Key, 101)
		for i := range keys {
			keys[i] = key(fmt.Sprintf("k%03d", i))
		}
		_, err := f.batchGet(keys, true)
		expectValidation(f.t, err, "Too many items requested")
	}},
	// "Provided list of item keys contains duplicates".
	{"DuplicateKeys", func(f *fixture) {
		f.put(item(key("a"), "n", 1))
		_, err := f.batchGet([]store.Key{key("a"), key("b"), key("a")}, true)
		expectValidation(f.t, err, "duplicates")
	}},
	// DynamoDB rejects a request without keys (DynamoDB Local: "The list of
	// keys in RequestItems for BatchGetItem is required: <table> has empty
	// list"; the AWS SDK for Go rejects a nil list before sending it, and a
	// backend must report that as a validation error too).
	{"NoKeys", func(f *fixture) {
		_, err := f.batchGet(nil, true)
		expectValidation(f.t, err, "")
	}},
}

var queryCases = []testCase{
	{"TablePartitionInSortKeyOrder", func(f *fixture) {
		want := f.putQueryItems()
		out := f.query(store.QueryInput{PartitionKey: queryPK, ConsistentRead: true})
		if d := diffItems(want, out.Items); d != "" {
			f.t.Errorf("Query of the partition mismatch (-want +got):\n%s", d)
		}
		expectReadUnits(f.t, "Query", out.Consumed)
		f.expectEventualQuery(store.QueryInput{PartitionKey: queryPK}, want)
	}},
	{"TableSortKeyPrefix", func(f *fixture) {
		all := f.putQueryItems()
		for _, c := range []struct {
			prefix string
			want   []store.Item
		}{
			{"b#", all[3:6]},
			{"b#1", all[3:5]},
			{"b#10", all[4:5]},
			{"#", all[0:1]},
			{"B", all[1:2]},
			{"b", all[3:6]},
			{"zzz", nil},
			{"b#100", nil},
		} {
			f.expectQuery(store.QueryInput{PartitionKey: queryPK, SortKeyPrefix: c.prefix, ConsistentRead: true}, c.want)
		}
	}},
	{"TableLimit", func(f *fixture) {
		all := f.putQueryItems()
		f.expectQuery(store.QueryInput{PartitionKey: queryPK, ConsistentRead: true, Limit: 2}, all[0:2])
		f.expectQuery(store.QueryInput{PartitionKey: queryPK, ConsistentRead: true, Limit: 1}, all[0:1])
		f.expectQuery(store.QueryInput{PartitionKey: queryPK, ConsistentRead: true, Limit: 6}, all)
		f.expectQuery(store.QueryInput{PartitionKey: queryPK, ConsistentRead: true, Limit: 50}, all)
		f.expectQuery(store.QueryInput{PartitionKey: queryPK, SortKeyPrefix: "b#", ConsistentRead: true, Limit: 2}, all[3:5])
	}},
	{"EmptyPartition", func(f *fixture) {
		f.putQueryItems()
		f.expectQuery(store.QueryInput{PartitionKey: "Q#2", ConsistentRead: true}, nil)
		f.expectQuery(store.QueryInput{PartitionKey: "nothing", SortKeyPrefix: "a"}, nil)
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "nothing"}, nil)
	}},
	{"GSI2KeysOnly", func(f *fixture) {
		f.putIndexItems()
		want := projected(store.IndexGSI2, ixE0, ixE1, ixE2)
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#gpt"}, want)
		out := f.query(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#gpt"})
		expectReadUnits(f.t, "index Query", out.Consumed)
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#other"}, projected(store.IndexGSI2, ixE3))
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#z"}, projected(store.IndexGSI2, ixE7))
	}},
	{"GSI3KeysOnly", func(f *fixture) {
		f.putIndexItems()
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI3, PartitionKey: "SHARD#1"}, projected(store.IndexGSI3, ixE7, ixE2))
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI3, PartitionKey: "SHARD#10"}, projected(store.IndexGSI3, ixE8))
		// The table partition of an index key value is not an index partition.
		f.expectQuery(store.QueryInput{PartitionKey: "SHARD#1", ConsistentRead: true}, nil)
	}},
	{"IndexPrefixAndLimit", func(f *fixture) {
		f.putIndexItems()
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#gpt", SortKeyPrefix: "E#1"}, projected(store.IndexGSI2, ixE1))
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#gpt", SortKeyPrefix: "E#"}, projected(store.IndexGSI2, ixE0, ixE1, ixE2))
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#gpt", Limit: 2}, projected(store.IndexGSI2, ixE0, ixE1))
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#gpt", SortKeyPrefix: "E#", Limit: 1}, projected(store.IndexGSI2, ixE0))
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#gpt", SortKeyPrefix: "X"}, nil)
	}},
	// Updates that add, change or remove index keys, and deletes, move items
	// into, within and out of an index.
	{"IndexFollowsWrites", func(f *fixture) {
		f.putIndexItems()
		k := func(it store.Item) store.Key { k, _ := it.Key(); return k }

		// E#5 gains GSI3 keys; E#2 loses its GSI3 partition key.
		f.update(k(ixE5), store.Update{}.Set("GSI3PK", str("SHARD#1")).Set("GSI3SK", str("E#5")), store.Condition{}, store.ReturnNone)
		f.update(k(ixE2), store.Update{}.Remove("GSI3PK"), store.Condition{}, store.ReturnNone)
		e5 := with(ixE5, "GSI3PK", "SHARD#1", "GSI3SK", "E#5")
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI3, PartitionKey: "SHARD#1"}, projected(store.IndexGSI3, ixE7, e5))

		// E#0 moves within GSI2 (new sort key); E#1 is deleted; E#4 gets its
		// missing GSI2SK; a token update of E#2 leaves GSI2 as it was.
		f.update(k(ixE0), store.Update{}.Set("GSI2SK", str("E#9#tpm")), store.Condition{}, store.ReturnNone)
		if _, err := f.s.Delete(f.ctx, store.DeleteInput{Key: k(ixE1)}); err != nil {
			f.t.Fatalf("Delete: %v", err)
		}
		f.update(k(ixE4), store.Update{}.Set("GSI2SK", str("E#4#rpm")), store.Condition{}, store.ReturnNone)
		f.update(k(ixE2), store.Update{}.Add("b_rpm_tk", num(-1)), store.Condition{}, store.ReturnNone)
		e0 := with(ixE0, "GSI2SK", "E#9#tpm")
		e4 := with(ixE4, "GSI2SK", "E#4#rpm")
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#gpt"}, projected(store.IndexGSI2, ixE2, e4, e0))

		// A Put that drops the index keys takes the item out of the index.
		f.put(item(k(ixE3), "n", 1))
		f.expectEventualQuery(store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#other"}, nil)
	}},
	// "Consistent reads are not supported on global secondary indexes".
	{"ConsistentReadOnIndex", func(f *fixture) {
		f.putIndexItems()
		_, err := f.s.Query(f.ctx, store.QueryInput{Index: store.IndexGSI2, PartitionKey: "R#gpt", ConsistentRead: true})
		expectValidation(f.t, err, "Consistent reads are not supported")
	}},
	// "The table does not have the specified index: GSI9".
	{"UnknownIndex", func(f *fixture) {
		_, err := f.s.Query(f.ctx, store.QueryInput{Index: "GSI9", PartitionKey: "R#gpt"})
		expectValidation(f.t, err, "does not have the specified index")
	}},
}

// diffItems compares lists of items; a nil and an empty list are equal.
func diffItems(want, got []store.Item) string {
	return cmp.Diff(want, got, valueCmp, cmpopts.EquateEmpty())
}

func (f *fixture) batchGet(keys []store.Key, consistent bool) (store.BatchGetOutput, error) {
	return f.s.BatchGet(f.ctx, store.BatchGetInput{Keys: keys, ConsistentRead: consistent})
}

// expectBatch checks that out has exactly want, aligned with the keys (nil
// for a missing item).
func expectBatch(out store.BatchGetOutput, want []store.Item) string {
	if d := cmp.Diff(want, out.Items, valueCmp); d != "" {
		return "BatchGet items mismatch (-want +got):\n" + d
	}
	return ""
}

// Query fixtures: one table partition whose sort keys sort by bytes.
const queryPK = "Q#1"

func queryItems() (inOrder []store.Item, insertOrder []store.Item) {
	sks := []string{"#x", "B", "a", "b#1", "b#10", "b#2"} // byte order
	for i, sk := range sks {
		inOrder = append(inOrder, item(store.Key{PK: queryPK, SK: sk}, "i", i))
	}
	for _, i := range []int{5, 0, 2, 4, 1, 3} {
		insertOrder = append(insertOrder, inOrder[i])
	}
	// Neighbouring partitions whose names share a prefix with queryPK.
	insertOrder = append(insertOrder,
		item(store.Key{PK: "Q#10", SK: "a"}, "i", 100),
		item(store.Key{PK: "Q#", SK: "a"}, "i", 101),
		item(store.Key{PK: "Q", SK: "b#1"}, "i", 102),
	)
	return inOrder, insertOrder
}

func (f *fixture) putQueryItems() []store.Item {
	f.t.Helper()
	inOrder, insertOrder := queryItems()
	for _, it := range insertOrder {
		f.put(it)
	}
	return inOrder
}

func (f *fixture) query(in store.QueryInput) store.QueryOutput {
	f.t.Helper()
	out, err := f.s.Query(f.ctx, in)
	if err != nil {
		f.t.Fatalf("Query(%+v): %v", in, err)
	}
	return out
}

func (f *fixture) expectQuery(in store.QueryInput, want []store.Item) {
	f.t.Helper()
	out := f.query(in)
	if d := diffItems(want, out.Items); d != "" {
		f.t.Errorf("Query(%+v) mismatch (-want +got):\n%s", in, d)
	}
}

// expectEventualQuery waits for an eventually consistent query (every
// index query is one) to return want.
func (f *fixture) expectEventualQuery(in store.QueryInput, want []store.Item) {
	f.t.Helper()
	f.eventually(func() string {
		out, err := f.s.Query(f.ctx, in)
		if err != nil {
			return fmt.Sprintf("Query(%+v): %v", in, err)
		}
		if d := diffItems(want, out.Items); d != "" {
			return fmt.Sprintf("Query(%+v) mismatch (-want +got):\n%s", in, d)
		}
		return ""
	})
}

// Index fixtures: items of several table partitions, some in GSI2, some in
// GSI3, some in both, some in neither.
var (
	ixE0 = item(store.Key{PK: "E#0", SK: "#B#tpm"}, "GSI2PK", "R#gpt", "GSI2SK", "E#0#tpm", "b_tpm_tk", 1)
	ixE1 = item(store.Key{PK: "E#1", SK: "#B#rpm"}, "GSI2PK", "R#gpt", "GSI2SK", "E#1#rpm", "b_rpm_tk", 5, "ttl", 9)
	ixE2 = item(store.Key{PK: "E#2", SK: "#B#rpm"}, "GSI2PK", "R#gpt", "GSI2SK", "E#2#rpm",
		"GSI3PK", "SHARD#1", "GSI3SK", "E#2", "x", "y")
	ixE3 = item(store.Key{PK: "E#3", SK: "#B#rpm"}, "GSI2PK", "R#other", "GSI2SK", "E#3")
	ixE4 = item(store.Key{PK: "E#4", SK: "#B#rpm"}, "GSI2PK", "R#gpt") // no GSI2SK: in no index
	ixE5 = item(store.Key{PK: "E#5", SK: "#B#rpm"}, "b_rpm_tk", 1)     // no index keys
	ixE6 = item(store.Key{PK: "E#6", SK: "x"}, "GSI2SK", "E#6#rpm")    // no GSI2PK: in no index
	ixE7 = item(store.Key{PK: "E#7", SK: "#B#x"}, "GSI3PK", "SHARD#1", "GSI3SK", "E#1",
		"GSI2PK", "R#z", "GSI2SK", "q")
	ixE8 = item(store.Key{PK: "E#8", SK: "#B#x"}, "GSI3PK", "SHARD#10", "GSI3SK", "E#0")
)

func (f *fixture) putIndexItems() {
	f.t.Helper()
	for _, it := range []store.Item{ixE7, ixE2, ixE5, ixE0, ixE4, ixE8, ixE1, ixE6, ixE3} {
		f.put(it)
	}
}

// projected is items as the keys-only index name returns them: the table
// keys and the index keys, nothing else.
func projected(name string, items ...store.Item) []store.Item {
	ix, _ := schema.Default().Index(name)
	out := make([]store.Item, len(items))
	for i, it := range items {
		out[i] = store.Item{}
		for _, n := range []string{store.AttrPK, store.AttrSK, ix.PartitionKey, ix.SortKey} {
			out[i][n] = it[n]
		}
	}
	return out
}
