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

// An update that moves an item's key in the table's only index moves the
// item there, for two index writes (the old entry deleted, the new one
// put): a Query by the new key finds it, by the old one not. (With several
// indexes every key attribute is some index's; with one, each of its two
// key attributes must be recognised.)
func TestAnUpdateMovesTheItemInTheOnlyIndex(t *testing.T) {
	ctx := context.Background()
	st := New(WithSchema(schema.Schema{PartitionKey: "PK", SortKey: "SK", Indexes: []schema.Index{
		{Name: "i", PartitionKey: "a", SortKey: "b", Projection: schema.ProjectKeysOnly},
	}}), WithPartitionLimits(0, 0))
	k := store.Key{PK: "p", SK: "s"}
	if _, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("s"), "a": store.Str("x"), "b": store.Str("y")}}); err != nil {
		t.Fatal(err)
	}
	found := func(pk, prefix string) int {
		t.Helper()
		out, err := st.Query(ctx, store.QueryInput{Index: "i", PartitionKey: pk, SortKeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Items)
	}
	for _, step := range []struct {
		attr, value string
		pk, prefix  string // where the item is now
		oldPK, old  string // where it is no longer
	}{
		{"a", "z", "z", "y", "x", "y"},
		{"b", "w", "z", "w", "z", "y"},
	} {
		out, err := st.Update(ctx, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Set(step.attr, store.Str(step.value)), store.Condition{})})
		if err != nil || out.Consumed.IndexWriteUnits != 2 {
			t.Fatalf("SET %s = %s: %v, %v index units; want 2 (the old entry deleted, the new one put)", step.attr, step.value, err, out.Consumed.IndexWriteUnits)
		}
		if found(step.pk, step.prefix) != 1 || found(step.oldPK, step.old) != 0 {
			t.Fatalf("after SET %s = %s: %d under (%s, %s), %d under (%s, %s); want 1 and 0", step.attr, step.value,
				found(step.pk, step.prefix), step.pk, step.prefix, found(step.oldPK, step.old), step.oldPK, step.old)
		}
	}
}

// An update that writes an index key attribute with the value it already
// has, and changes another attribute, rewrites the item's entry in an
// index that projects all attributes: one index write, its keys unmoved.
func TestAnUnmovedKeyRewritesAProjectAllEntry(t *testing.T) {
	ctx := context.Background()
	st := New(WithSchema(schema.Schema{PartitionKey: "PK", SortKey: "SK", Indexes: []schema.Index{
		{Name: "i", PartitionKey: "a", SortKey: "b", Projection: schema.ProjectAll},
	}}), WithPartitionLimits(0, 0))
	if _, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("s"), "a": store.Str("x"), "b": store.Str("y")}}); err != nil {
		t.Fatal(err)
	}
	out, err := st.Update(ctx, store.UpdateInput{Key: store.Key{PK: "p", SK: "s"}, Expr: storetest.Build(t,
		store.Update{}.Set("a", store.Str("x")).Set("c", store.Int(1)), store.Condition{})})
	if err != nil || out.Consumed.IndexWriteUnits != 1 {
		t.Fatalf("%v, %v index units; want 1", err, out.Consumed.IndexWriteUnits)
	}
}

// A transaction with an action that fails when evaluated is cancelled with
// that action's validation error, whatever the size of the items the
// others would make: the size is checked only when every action would
// apply.
func TestAnInvalidActionCancelsBeforeTheSizeCheck(t *testing.T) {
	ctx := context.Background()
	st := New(WithPartitionLimits(0, 0))
	var acts []store.Write
	for i := 0; i < 11; i++ {
		acts = append(acts, store.Write{Update: &store.UpdateInput{Key: store.Key{PK: "q", SK: string(rune('a' + i))},
			Expr: storetest.Build(t, store.Update{}.Set("v", store.Str(strings.Repeat("y", 390*1024))), store.Condition{})}})
	}
	acts = append(acts, store.Write{Update: &store.UpdateInput{Key: store.Key{PK: "q", SK: "z"},
		Expr: store.Expr{Update: "SET #v = #w + :d", Names: map[string]string{"#v": "v", "#w": "w"}, Values: map[string]store.Value{":d": store.Int(1)}}}})
	_, err := st.TransactWrite(ctx, store.TransactWriteInput{Actions: acts})
	var tc *store.TransactionCanceledError
	if !errors.As(err, &tc) || tc.Reasons[11].Code != store.ReasonValidationError || tc.Reasons[0].Code != store.ReasonNone {
		t.Fatalf("4.2 MB of updates and one that fails when evaluated: %v, want the cancellation", err)
	}
}
