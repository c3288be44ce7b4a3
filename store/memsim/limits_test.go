package memsim

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/schema"
	"github.com/shardlimit/limiter/store/storetest"
)

// panics reports whether f panicked.
func panics(f func()) (did bool) {
	defer func() { did = recover() != nil }()
	f()
	return false
}

// Options memsim refuses: a ceiling out of [0, maxRate] or NaN, a schema
// without two distinct keys, an index without a name or keys. The largest
// ceiling is accepted.
func TestBadOptionsPanic(t *testing.T) {
	bad := map[string]func(){
		"negative ceiling":   func() { New(WithPartitionLimits(-1, 0)) },
		"NaN ceiling":        func() { New(WithPartitionLimits(0, math.NaN())) },
		"ceiling too high":   func() { New(WithPartitionLimits(maxRate+1, 0)) },
		"no partition key":   func() { New(WithSchema(schema.Schema{SortKey: "SK"})) },
		"no sort key":        func() { New(WithSchema(schema.Schema{PartitionKey: "PK"})) },
		"the same key twice": func() { New(WithSchema(schema.Schema{PartitionKey: "K", SortKey: "K"})) },
		"index without a name": func() {
			New(WithSchema(schema.Schema{PartitionKey: "PK", SortKey: "SK", Indexes: []schema.Index{{PartitionKey: "a", SortKey: "b"}}}))
		},
		"index without a partition key": func() {
			New(WithSchema(schema.Schema{PartitionKey: "PK", SortKey: "SK", Indexes: []schema.Index{{Name: "i", SortKey: "b"}}}))
		},
		"index without a sort key": func() {
			New(WithSchema(schema.Schema{PartitionKey: "PK", SortKey: "SK", Indexes: []schema.Index{{Name: "i", PartitionKey: "a"}}}))
		},
	}
	for name, f := range bad {
		if !panics(f) {
			t.Errorf("%s: no panic", name)
		}
	}
	if panics(func() { New(WithPartitionLimits(maxRate, maxRate)) }) {
		t.Error("the largest ceiling refused")
	}
}

// A transaction carries at most MaxTransactionSize of items: exactly that
// much passes, a byte more is refused, whether the size is the items put
// or the items an update makes.
func TestTransactionSizeLimit(t *testing.T) {
	ctx := context.Background()
	st := New(WithPartitionLimits(0, 0))
	item := func(i int, size int) store.Item {
		it := store.Item{"PK": store.Str("p"), "SK": store.Str(string(rune('a' + i)))}
		it["v"] = store.Str(strings.Repeat("x", size-ItemSize(it)-1))
		return it
	}
	puts := func(last int) []store.Write {
		var as []store.Write
		for i := 0; i < 10; i++ {
			as = append(as, store.Write{Put: &store.PutInput{Item: item(i, MaxItemSize)}})
		}
		return append(as, store.Write{Put: &store.PutInput{Item: item(10, last)}})
	}
	exact := MaxTransactionSize - 10*MaxItemSize
	if _, err := st.TransactWrite(ctx, store.TransactWriteInput{Actions: puts(exact)}); err != nil {
		t.Fatalf("a transaction of exactly %d bytes: %v", MaxTransactionSize, err)
	}
	if _, err := st.TransactWrite(ctx, store.TransactWriteInput{Actions: puts(exact + 1)}); !errors.Is(err, store.ErrValidation) {
		t.Fatalf("a transaction a byte over: %v, want a validation error", err)
	}
	// The size of the items put is checked before anything else: a fault
	// the plan would inject comes after.
	faulty := New(WithPartitionLimits(0, 0), WithFaults(Func("throttle", func(Op) Decision { return Decision{Fault: FaultThrottle} })))
	if _, err := faulty.TransactWrite(ctx, store.TransactWriteInput{Actions: puts(exact + 1)}); !errors.Is(err, store.ErrValidation) {
		t.Fatalf("a transaction a byte over, with a throttle injected: %v, want the validation error first", err)
	}
	// Updates that make the items: small requests, large results.
	var ups []store.Write
	for i := 0; i < 11; i++ {
		ups = append(ups, store.Write{Update: &store.UpdateInput{Key: store.Key{PK: "q", SK: string(rune('a' + i))},
			Expr: storetest.Build(t, store.Update{}.Set("v", store.Str(strings.Repeat("y", 390*1024))), store.Condition{})}})
	}
	// With a condition that fails among them, the cancellation comes
	// first: the size is checked only when every action would apply.
	failing := append([]store.Write{}, ups...)
	failing[0] = store.Write{Update: &store.UpdateInput{Key: ups[0].Update.Key, Expr: storetest.Build(t,
		store.Update{}.Set("v", store.Str(strings.Repeat("y", 390*1024))), store.Name("PK").Exists())}}
	var tc *store.TransactionCanceledError
	if _, err := st.TransactWrite(ctx, store.TransactWriteInput{Actions: failing}); !errors.As(err, &tc) || tc.Reasons[0].Code != store.ReasonConditionalCheckFailed {
		t.Fatalf("4.2 MB of updates, one failing its condition: %v, want the cancellation", err)
	}
	before := st.Totals().Ops[OpTransactWrite].ValidationErrors
	if _, err := st.TransactWrite(ctx, store.TransactWriteInput{Actions: ups}); !errors.Is(err, store.ErrValidation) {
		t.Fatalf("updates making 4.2 MB of items: %v, want a validation error", err)
	}
	if st.Totals().Ops[OpTransactWrite].ValidationErrors != before+1 {
		t.Fatal("the refused transaction is not counted as a validation error")
	}
	if st.Peek(store.Key{PK: "q", SK: "a"}) != nil {
		t.Fatal("the refused transaction wrote")
	}
}

// A transaction cancelled by a failed condition still writes: it is
// charged write units against the partitions' write ceilings, and
// throttled by them.
func TestACancelledTransactionPaysWriteUnits(t *testing.T) {
	clock := NewManualClock(time.Unix(1e9, 0))
	st := New(WithClock(clock), WithPartitionLimits(1, 1000))
	ctx := context.Background()
	k := store.Key{PK: "p", SK: "s"}
	if _, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("s")}}); err != nil {
		t.Fatal(err)
	}
	failing := store.TransactWriteInput{Actions: []store.Write{{Check: &store.CheckInput{Key: k,
		Expr: storetest.Build(t, store.Update{}, store.Name("PK").NotExists())}}}}
	_, err := st.TransactWrite(ctx, failing)
	var tc *store.TransactionCanceledError
	if !errors.As(err, &tc) || tc.Reasons[0].Code == store.ReasonConditionalCheckFailed {
		t.Fatalf("a cancelled transaction on a partition without write units: %v, want throttled", err)
	}
	if got := st.Totals().Ops[OpTransactWrite]; got.Throttles != 1 || got.ConditionFailures != 0 {
		t.Fatalf("counted %+v, want one throttle", got)
	}
}

// A transaction repeated with its client token is answered again without
// writing: it reads its items (strongly consistent read units) and counts
// as a request; the token with other actions is a validation error.
func TestATransactionRepeatedByToken(t *testing.T) {
	st := New(WithClock(NewManualClock(Epoch())))
	ctx := context.Background()
	in := store.TransactWriteInput{ClientToken: "tok", Actions: []store.Write{
		{Put: &store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("a")}}},
		{Put: &store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("b")}}},
	}}
	if _, err := st.TransactWrite(ctx, in); err != nil {
		t.Fatal(err)
	}
	before := st.Totals()
	out, err := st.TransactWrite(ctx, in)
	if err != nil || out.Consumed != (store.Capacity{ReadUnits: 2}) {
		t.Fatalf("the repeat: %v, consumed %+v; want 2 read units", err, out.Consumed)
	}
	after := st.Totals()
	if after.Ops[OpTransactWrite].Requests != before.Ops[OpTransactWrite].Requests+1 || after.Consumed.ReadUnits != before.Consumed.ReadUnits+2 {
		t.Fatalf("the repeat is not counted: %+v -> %+v", before.Ops[OpTransactWrite], after.Ops[OpTransactWrite])
	}
	in.Actions = in.Actions[:1]
	if _, err := st.TransactWrite(ctx, in); !errors.Is(err, store.ErrValidation) {
		t.Fatalf("the token with other actions: %v, want a validation error", err)
	}
	if got := st.Totals().Ops[OpTransactWrite].ValidationErrors; got != after.Ops[OpTransactWrite].ValidationErrors+1 {
		t.Fatal("the mismatch is not counted as a validation error")
	}
}

// Queries: their read units cover every item returned (a started 4 KB,
// halved: queries read eventually consistent unless asked), a throttled
// query names a table or an index ceiling, and a query of an index
// without a partition key names the index's key.
func TestQueryUnitsAndErrors(t *testing.T) {
	ctx := context.Background()
	sc := schema.Default()
	sc.Indexes[0].Projection = schema.ProjectAll
	st := New(WithSchema(sc), WithPartitionLimits(0, 0), WithClock(NewManualClock(Epoch())))
	for _, sk := range []string{"a", "b", "c"} {
		it := store.Item{"PK": store.Str("p"), "SK": store.Str(sk), store.AttrGSI2PK: store.Str("g"), store.AttrGSI2SK: store.Str(sk),
			"v": store.Str(strings.Repeat("x", 3000))}
		if _, err := st.Put(ctx, store.PutInput{Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range []store.QueryInput{{PartitionKey: "p"}, {Index: store.IndexGSI2, PartitionKey: "g"}} {
		out, err := st.Query(ctx, in)
		if err != nil || len(out.Items) != 3 || out.Consumed.ReadUnits != 1.5 {
			t.Fatalf("query %+v: %v, %d items, %v units; want 3 items, 1.5 units (9 KB)", in, err, len(out.Items), out.Consumed.ReadUnits)
		}
	}
	if _, err := st.Query(ctx, store.QueryInput{Index: store.IndexGSI2}); err == nil || !strings.Contains(err.Error(), store.AttrGSI2PK) {
		t.Fatalf("an index query without a partition key: %v, want an error naming %s", err, store.AttrGSI2PK)
	}
	for _, c := range []struct {
		in     store.QueryInput
		reason string
	}{{store.QueryInput{PartitionKey: "p"}, "TableReadKeyRangeThroughputExceeded"}, {store.QueryInput{Index: store.IndexGSI2, PartitionKey: "g"}, "IndexReadKeyRangeThroughputExceeded"}} {
		hot := New(WithSchema(sc), WithPartitionLimits(0, 0.5), WithClock(NewManualClock(Epoch())))
		_, _ = hot.Query(ctx, c.in) // an empty partition: half a unit, all of it
		_, err := hot.Query(ctx, c.in)
		var te *store.ThrottledError
		if !errors.As(err, &te) || te.Reason != c.reason {
			t.Errorf("query %+v: %v, want %s", c.in, err, c.reason)
		}
	}
}

// Injected delays go to the sleeper; no delay, no sleep (a simulator's
// sleeper is a scheduling point).
func TestOnlyDelaysSleep(t *testing.T) {
	sleeps := 0
	st := New(WithFaults(Func("none", func(Op) Decision { return Decision{} })),
		WithSleeper(func(context.Context, time.Duration) error { sleeps++; return nil }))
	_, _ = st.Get(context.Background(), store.GetInput{Key: store.Key{PK: "p", SK: "s"}})
	if sleeps != 0 {
		t.Fatalf("%d sleeps without a delay", sleeps)
	}
}

// Every record of the change stream is counted.
func TestStreamRecordsAreCounted(t *testing.T) {
	st := New()
	ctx := context.Background()
	for _, sk := range []string{"a", "b"} {
		if _, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str(sk)}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.Totals().StreamRecords; got != 2 || uint64(st.StreamLen()) != got {
		t.Fatalf("%d stream records counted, %d emitted", got, st.StreamLen())
	}
}

// IsNone: no fault and no delay.
func TestDecisionIsNone(t *testing.T) {
	if !(Decision{}).IsNone() || (Decision{Fault: FaultThrottle}).IsNone() || (Decision{Delay: time.Millisecond}).IsNone() {
		t.Fatal("IsNone")
	}
}

// A transaction cancelled on a throttle names the actions of the hot
// partition, an index partition included; a repeat of a transaction by
// its token is throttled like a read of its items; an action that cannot
// be applied (an ADD to a string) cancels the transaction as a validation
// error; a check carries no update expression.
func TestTransactionCancellationReasons(t *testing.T) {
	ctx := context.Background()
	clock := NewManualClock(time.Unix(1e9, 0))
	st := New(WithClock(clock), WithPartitionLimits(0, 0))
	put := func(pk, sk, g string) *store.PutInput {
		return &store.PutInput{Item: store.Item{"PK": store.Str(pk), "SK": store.Str(sk), store.AttrGSI2PK: store.Str(g), store.AttrGSI2SK: store.Str(sk), "s": store.Str("x")}}
	}
	if _, err := st.Put(ctx, *put("a", "1", "g")); err != nil {
		t.Fatal(err)
	}
	var tc *store.TransactionCanceledError
	_, err := st.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
		{Update: &store.UpdateInput{Key: store.Key{PK: "a", SK: "1"}, Expr: storetest.Build(t, store.Update{}.Add("s", store.Int(1)), store.Condition{})}},
		{Put: put("b", "2", "g")},
	}})
	if !errors.As(err, &tc) || tc.Reasons[0].Code != store.ReasonValidationError || tc.Reasons[1].Code != store.ReasonNone {
		t.Fatalf("an ADD to a string in a transaction: %v", err)
	}
	if st.Totals().Ops[OpTransactWrite].ValidationErrors != 1 {
		t.Fatal("the invalid transaction is not counted as a validation error")
	}
	if _, err := st.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{{Check: &store.CheckInput{Key: store.Key{PK: "a", SK: "1"},
		Expr: store.Expr{Update: "SET #a = :v", Condition: "attribute_exists(#a)", Names: map[string]string{"#a": "a"}, Values: map[string]store.Value{":v": store.Int(1)}}}}}}); !errors.Is(err, store.ErrValidation) {
		t.Fatalf("a check with an update expression: %v", err)
	}
	for _, c := range []struct {
		expr store.Expr
		msg  string
	}{
		{store.Expr{Update: "SET #a = :v", Names: map[string]string{"#a": "a"}, Values: map[string]store.Value{":v": store.Int(1)}}, "An update expression is not allowed"},
		{store.Expr{}, "conditionExpression"},
	} {
		_, err := st.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{{Check: &store.CheckInput{Key: store.Key{PK: "a", SK: "1"}, Expr: c.expr}}}})
		if !errors.Is(err, store.ErrValidation) || !strings.Contains(err.Error(), c.msg) {
			t.Fatalf("a check without a condition (update %q): %v, want %q", c.expr.Update, err, c.msg)
		}
	}

	// The index partition g is hot (a ceiling of 2 units for every
	// partition, spent on g's partition by writes to other table ones).
	hot := New(WithClock(clock), WithPartitionLimits(2, 1))
	for _, pk := range []string{"c", "c2"} {
		if _, err := hot.Put(ctx, *put(pk, "3", "g")); err != nil {
			t.Fatal(err)
		}
	}
	_, err = hot.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{{Put: put("d", "4", "h")}, {Put: put("e", "5", "g")}}})
	if !errors.As(err, &tc) || tc.Reasons[0].Code != store.ReasonNone || tc.Reasons[1].Code == store.ReasonNone {
		t.Fatalf("a transaction writing the hot index partition g: %v; want the second action throttled, the first None", err)
	}
	// A repeat by token reads its items: throttled on a hot partition.
	clock.Add(time.Hour)
	in := store.TransactWriteInput{ClientToken: "t", Actions: []store.Write{{Put: put("f", "6", "i")}, {Put: put("k", "7", "j")}}}
	if _, err := hot.TransactWrite(ctx, in); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Second)
	_, _ = hot.Get(ctx, store.GetInput{Key: store.Key{PK: "k", SK: "7"}, ConsistentRead: true}) // k's read unit spent
	throttles := hot.Totals().Ops[OpTransactWrite].Throttles
	_, err = hot.TransactWrite(ctx, in)
	if !errors.As(err, &tc) || tc.Reasons[0].Code != store.ReasonNone || tc.Reasons[1].Code == store.ReasonNone {
		t.Fatalf("a repeat on a partition without read units: %v; want the second action throttled", err)
	}
	if hot.Totals().Ops[OpTransactWrite].Throttles != throttles+1 {
		t.Fatal("the throttled repeat is not counted as a throttle")
	}
}

// A client token is remembered for its life, also past the store's
// housekeeping of expired tokens: a repeat within it is answered, not
// applied again.
func TestTokensOutliveHousekeeping(t *testing.T) {
	ctx := context.Background()
	st := New(WithPartitionLimits(0, 0), WithClock(NewManualClock(Epoch())))
	k := store.Key{PK: "p", SK: "s"}
	add := store.TransactWriteInput{ClientToken: "first", Actions: []store.Write{{Update: &store.UpdateInput{Key: k,
		Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})}}}}
	if _, err := st.TransactWrite(ctx, add); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1100; i++ {
		other := store.TransactWriteInput{ClientToken: "t" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)),
			Actions: []store.Write{{Put: &store.PutInput{Item: store.Item{"PK": store.Str("q"), "SK": store.Str("s")}}}}}
		_, _ = st.TransactWrite(ctx, other)
	}
	if _, err := st.TransactWrite(ctx, add); err != nil {
		t.Fatal(err)
	}
	if n, _ := st.Peek(k).Int("n"); n != 1 {
		t.Fatalf("n = %d after the repeat, want 1 (answered, not applied)", n)
	}
}
