package memsim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/schema"
	"github.com/shardlimit/limiter/store/storetest"
)

// bucketLike is an item in both default indexes (keys-only).
func bucketLike(sk string) store.Item {
	return store.Item{"PK": store.Str("p"), "SK": store.Str(sk), store.AttrGSI2PK: store.Str("g"), store.AttrGSI2SK: store.Str(sk),
		store.AttrGSI3PK: store.Str("e"), store.AttrGSI3SK: store.Str(sk), "n": store.Int(1)}
}

// indexHas reports whether a query of index ix at pk returns the item of
// table sort key sk.
func indexHas(t *testing.T, st *Store, ix, pk, sk string) bool {
	t.Helper()
	out, err := st.Query(context.Background(), store.QueryInput{Index: ix, PartitionKey: pk})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		if s, _ := it.Str("SK"); s == sk {
			return true
		}
	}
	return false
}

// Writes keep the indexes: an update that changes no index key writes no
// index entry (keys-only indexes) and leaves the item where it is; one
// that moves an index key deletes the old entry and writes the new one,
// by the string path and by the structured (template) path alike.
func TestUpdatesKeepTheIndexes(t *testing.T) {
	ctx := context.Background()
	st := New(WithPartitionLimits(0, 0))
	if _, err := st.Put(ctx, store.PutInput{Item: bucketLike("a")}); err != nil {
		t.Fatal(err)
	}
	k := store.Key{PK: "p", SK: "a"}
	out, err := st.Update(ctx, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
	if err != nil || out.Consumed.IndexWriteUnits != 0 {
		t.Fatalf("an update of no index key: %v, %v index units; want none", err, out.Consumed.IndexWriteUnits)
	}
	out, err = st.Update(ctx, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Set(store.AttrGSI2PK, store.Str("h")), store.Condition{})})
	if err != nil || out.Consumed.IndexWriteUnits != 2 {
		t.Fatalf("moving GSI2PK: %v, %v index units; want 2 (the old entry and the new)", err, out.Consumed.IndexWriteUnits)
	}
	if indexHas(t, st, store.IndexGSI2, "g", "a") || !indexHas(t, st, store.IndexGSI2, "h", "a") {
		t.Fatal("GSI2 does not follow the moved key")
	}
	if indexHas(t, st, store.IndexGSI2, "g", "a") {
		t.Fatal("an old GSI2 entry stayed")
	}
}

// An item in three indexes whose keys all move writes six index entries
// (more than the four the common case keeps without allocating).
func TestManyIndexWrites(t *testing.T) {
	sc := schema.Schema{PartitionKey: "PK", SortKey: "SK", Indexes: []schema.Index{
		{Name: "i1", PartitionKey: "a1", SortKey: "b1", Projection: schema.ProjectKeysOnly},
		{Name: "i2", PartitionKey: "a2", SortKey: "b2", Projection: schema.ProjectKeysOnly},
		{Name: "i3", PartitionKey: "a3", SortKey: "b3", Projection: schema.ProjectKeysOnly},
	}}
	st := New(WithSchema(sc), WithPartitionLimits(0, 0))
	ctx := context.Background()
	it := store.Item{"PK": store.Str("p"), "SK": store.Str("s")}
	for _, n := range []string{"1", "2", "3"} {
		it["a"+n], it["b"+n] = store.Str("x"), store.Str("y")
	}
	if _, err := st.Put(ctx, store.PutInput{Item: it}); err != nil {
		t.Fatal(err)
	}
	u := store.Update{}.Set("a1", store.Str("z")).Set("a2", store.Str("z")).Set("a3", store.Str("z"))
	out, err := st.Update(ctx, store.UpdateInput{Key: store.Key{PK: "p", SK: "s"}, Expr: storetest.Build(t, u, store.Condition{})})
	if err != nil || out.Consumed.IndexWriteUnits != 6 {
		t.Fatalf("%v, %v index units; want 6", err, out.Consumed.IndexWriteUnits)
	}
}

// Keys of the largest size DynamoDB allows are accepted; a byte more is
// not. A put carries no update expression. An update that fails when it is
// evaluated (an ADD to a string) is counted as a validation error.
func TestKeyAndExpressionLimits(t *testing.T) {
	ctx := context.Background()
	st := New(WithPartitionLimits(0, 0))
	pk, sk := strings.Repeat("p", MaxPartitionKeySize), strings.Repeat("s", MaxSortKeySize)
	if _, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str(pk), "SK": store.Str(sk)}}); err != nil {
		t.Fatalf("keys of the largest sizes: %v", err)
	}
	if _, err := st.Get(ctx, store.GetInput{Key: store.Key{PK: pk, SK: sk + "s"}}); !errors.Is(err, store.ErrValidation) {
		t.Fatalf("a sort key a byte too long: %v", err)
	}
	if _, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("s")},
		Expr: store.Expr{Update: "SET #a = :v", Names: map[string]string{"#a": "a"}, Values: map[string]store.Value{":v": store.Int(1)}}}); !errors.Is(err, store.ErrValidation) {
		t.Fatalf("a put with an update expression: %v", err)
	}
	if _, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("t"), "s": store.Str("x")}}); err != nil {
		t.Fatal(err)
	}
	// An update may make an item of exactly MaxItemSize, not a byte more.
	grow := func(n int) error {
		k := store.Key{PK: "p", SK: "big"}
		base := store.Item{"PK": store.Str(k.PK), "SK": store.Str(k.SK)}
		if _, err := st.Put(ctx, store.PutInput{Item: base}); err != nil {
			return err
		}
		_, err := st.Update(ctx, store.UpdateInput{Key: k, Expr: storetest.Build(t,
			store.Update{}.Set("v", store.Str(strings.Repeat("x", n-ItemSize(base)-1))), store.Condition{})})
		return err
	}
	if err := grow(MaxItemSize); err != nil {
		t.Fatalf("an update to exactly %d bytes: %v", MaxItemSize, err)
	}
	if err := grow(MaxItemSize + 1); !errors.Is(err, store.ErrValidation) {
		t.Fatalf("an update to a byte more: %v", err)
	}
	before := st.Totals().Ops[OpUpdate].ValidationErrors
	_, err := st.Update(ctx, store.UpdateInput{Key: store.Key{PK: "p", SK: "t"}, Expr: storetest.Build(t, store.Update{}.Add("s", store.Int(1)), store.Condition{})})
	if !errors.Is(err, store.ErrValidation) || st.Totals().Ops[OpUpdate].ValidationErrors != before+1 {
		t.Fatalf("an ADD to a string: %v, counted %d", err, st.Totals().Ops[OpUpdate].ValidationErrors-before)
	}
}
