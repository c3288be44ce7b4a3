package storetest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// TransactWrite: all or nothing, per-action cancellation reasons,
// idempotency tokens.

var transactCases = []testCase{
	{"TwoUpdatesSucceed", func(f *fixture) {
		a, b := key("tx-a"), key("tx-b")
		f.put(item(a, "n", 1))
		out, err := f.transact(
			f.txUpdate(a, store.Update{}.Add("n", num(1)), nm(store.AttrPK).Exists(), true),
			f.txUpdate(b, store.Update{}.Set("s", str("new")).Add("n", num(5)), store.Condition{}, false),
		)
		if err != nil {
			f.t.Fatalf("TransactWrite: %v", err)
		}
		expectWriteUnits(f.t, "TransactWrite", out.Consumed)
		f.expect(a, item(a, "n", 2))
		f.expect(b, item(b, "s", "new", "n", 5))
	}},
	{"PutDeleteUpdate", func(f *fixture) {
		a, c, d := key("tx-a"), key("tx-c"), key("tx-d")
		f.put(item(a, "n", 1))
		f.put(item(d, "n", 4))
		_, err := f.transact(
			store.Write{Put: &store.PutInput{Item: item(c, "n", 3), Expr: f.expr(store.Update{}, nm(store.AttrPK).NotExists())}},
			store.Write{Delete: &store.DeleteInput{Key: d, Expr: f.expr(store.Update{}, nm("n").Equal(num(4)))}},
			f.txUpdate(a, store.Update{}.Add("n", num(1)), store.Condition{}, false),
		)
		if err != nil {
			f.t.Fatalf("TransactWrite: %v", err)
		}
		f.expect(a, item(a, "n", 2))
		f.expect(c, item(c, "n", 3))
		f.expect(d, nil)
	}},
	// One false condition cancels every action; the reasons say which, with
	// the old item where asked for.
	{"ConditionFailureCancelsAll", func(f *fixture) {
		a, b, c, d := key("tx-a"), key("tx-b"), key("tx-c"), key("tx-d")
		itemA, itemB, itemD := item(a, "n", 1), item(b, "n", 5, "s", "x"), item(d, "n", 4)
		f.put(itemA)
		f.put(itemB)
		f.put(itemD)
		_, err := f.transact(
			f.txUpdate(a, store.Update{}.Add("n", num(1)), nm(store.AttrPK).Exists(), true),
			f.txUpdate(b, store.Update{}.Add("n", num(-10)), nm("n").GreaterThanEqual(num(10)), true),
			store.Write{Put: &store.PutInput{Item: item(c, "n", 3), ReturnOldOnConditionFailure: true}},
			store.Write{Delete: &store.DeleteInput{Key: d, ReturnOldOnConditionFailure: true}},
		)
		expectCanceled(f.t, err, []wantReason{
			{code: store.ReasonNone},
			{code: store.ReasonConditionalCheckFailed, item: itemB},
			{code: store.ReasonNone},
			{code: store.ReasonNone},
		})
		f.expect(a, itemA)
		f.expect(b, itemB)
		f.expect(c, nil)
		f.expect(d, itemD)
	}},
	{"ConditionFailureWithoutOldItem", func(f *fixture) {
		a, b := key("tx-a"), key("tx-b")
		itemA, itemB := item(a, "n", 1), item(b, "n", 5)
		f.put(itemA)
		f.put(itemB)
		_, err := f.transact(
			f.txUpdate(a, store.Update{}.Add("n", num(-1)), nm("n").GreaterThanEqual(num(2)), false),
			f.txUpdate(b, store.Update{}.Add("n", num(1)), store.Condition{}, false),
		)
		expectCanceled(f.t, err, []wantReason{
			{code: store.ReasonConditionalCheckFailed},
			{code: store.ReasonNone},
		})
		f.expect(a, itemA)
		f.expect(b, itemB)
	}},
	// A condition on a missing item fails with no item, and the upsert it
	// guarded is not applied.
	{"ConditionFailureOnMissingItem", func(f *fixture) {
		a, b := key("tx-a"), key("tx-missing")
		itemA := item(a, "n", 1)
		f.put(itemA)
		_, err := f.transact(
			f.txUpdate(a, store.Update{}.Add("n", num(1)), store.Condition{}, true),
			f.txUpdate(b, store.Update{}.Add("n", num(1)), nm(store.AttrPK).Exists(), true),
		)
		expectCanceled(f.t, err, []wantReason{
			{code: store.ReasonNone},
			{code: store.ReasonConditionalCheckFailed},
		})
		f.expect(a, itemA)
		f.expect(b, nil)
	}},
	{"CheckPasses", func(f *fixture) {
		a, b := key("tx-check"), key("tx-b")
		itemA := item(a, "n", 3)
		f.put(itemA)
		_, err := f.transact(
			f.txCheck(a, store.And(nm(store.AttrPK).Exists(), nm("n").GreaterThanEqual(num(1))), true),
			f.txUpdate(b, store.Update{}.Add("n", num(1)), store.Condition{}, false),
		)
		if err != nil {
			f.t.Fatalf("TransactWrite: %v", err)
		}
		f.expect(a, itemA)
		f.expect(b, item(b, "n", 1))
	}},
	{"CheckFails", func(f *fixture) {
		a, b := key("tx-check"), key("tx-b")
		itemA := item(a, "n", 3)
		f.put(itemA)
		_, err := f.transact(
			f.txUpdate(b, store.Update{}.Add("n", num(1)), store.Condition{}, true),
			f.txCheck(a, nm("n").GreaterThanEqual(num(100)), true),
		)
		expectCanceled(f.t, err, []wantReason{
			{code: store.ReasonNone},
			{code: store.ReasonConditionalCheckFailed, item: itemA},
		})
		f.expect(a, itemA)
		f.expect(b, nil)
	}},
	// Two actions on one item are a validation error ("Transaction request
	// cannot include multiple operations on one item"), not a cancellation.
	{"SameItemTwice", func(f *fixture) {
		a, b := key("tx-a"), key("tx-b")
		itemA := item(a, "n", 1)
		f.put(itemA)
		f.run("TwoUpdates", func(f *fixture) {
			_, err := f.transact(
				f.txUpdate(b, store.Update{}.Add("n", num(1)), store.Condition{}, false),
				f.txUpdate(a, store.Update{}.Add("n", num(1)), store.Condition{}, false),
				f.txUpdate(a, store.Update{}.Add("m", num(1)), store.Condition{}, false),
			)
			expectValidation(f.t, err, "multiple operations on one item")
			f.expect(a, itemA)
			f.expect(b, nil)
		})
		f.run("CheckAndUpdate", func(f *fixture) {
			_, err := f.transact(
				f.txCheck(a, nm(store.AttrPK).Exists(), false),
				f.txUpdate(a, store.Update{}.Add("n", num(1)), store.Condition{}, false),
			)
			expectValidation(f.t, err, "multiple operations on one item")
			f.expect(a, itemA)
		})
	}},
	// 100 actions are allowed.
	{"MaxActions", func(f *fixture) {
		pk := "tx-max"
		if _, err := f.transact(puts(pk, 100)...); err != nil {
			f.t.Fatalf("TransactWrite of 100 actions: %v", err)
		}
		out, err := f.s.Query(f.ctx, store.QueryInput{PartitionKey: pk, ConsistentRead: true})
		if err != nil {
			f.t.Fatalf("Query: %v", err)
		}
		if len(out.Items) != 100 {
			f.t.Errorf("after a transaction of 100 Puts the partition holds %d items, want 100", len(out.Items))
		}
	}},
	// 101 actions are a validation error ("1 validation error detected at
	// 'transactItems' failed to satisfy constraint: Member must have length
	// less than or equal to 100"); nothing is applied.
	{"TooManyActions", func(f *fixture) {
		pk := "tx-too-many"
		_, err := f.transact(puts(pk, 101)...)
		expectValidation(f.t, err, "less than or equal to 100")
		f.expect(store.Key{PK: pk, SK: "000"}, nil)
		f.expect(store.Key{PK: pk, SK: "100"}, nil)
	}},
	// DynamoDB requires at least one action ("1 validation error detected:
	// Value [] at 'transactItems' failed to satisfy constraint: Member must
	// have length greater than or equal to 1"; the AWS SDK for Go rejects a
	// nil list before sending it, and a backend must report that as a
	// validation error too).
	{"NoActions", func(f *fixture) {
		_, err := f.transact()
		expectValidation(f.t, err, "")
	}},
	// A malformed expression in one action fails the whole request as a
	// validation error (`Invalid UpdateExpression: The "SET" section can only
	// be used once in an update expression;`), and the other actions are not
	// applied.
	{"InvalidExpression", func(f *fixture) {
		a, b := key("tx-a"), key("tx-b")
		itemA := item(a, "n", 1)
		f.put(itemA)
		_, err := f.transact(
			f.txUpdate(a, store.Update{}.Add("n", num(1)), store.Condition{}, false),
			store.Write{Update: &store.UpdateInput{Key: b, Expr: raw("SET #a = :a SET #b = :b", "",
				map[string]string{"#a": "x", "#b": "y"},
				map[string]store.Value{":a": num(1), ":b": num(2)})}},
		)
		expectValidation(f.t, err, "can only be used once")
		f.expect(a, itemA)
		f.expect(b, nil)
	}},
	// A repeat with the same ClientToken and the same actions succeeds without
	// applying again.
	{"ClientTokenRepeatAppliesOnce", func(f *fixture) {
		a := key("tx-token")
		f.put(item(a, "n", 0))
		in := store.TransactWriteInput{
			Actions:     []store.Write{f.txUpdate(a, store.Update{}.Add("n", num(1)), store.Condition{}, false)},
			ClientToken: rand.Text(),
		}
		for i := range 2 {
			if _, err := f.s.TransactWrite(f.ctx, in); err != nil {
				f.t.Fatalf("TransactWrite #%d with the same ClientToken: %v", i+1, err)
			}
		}
		f.expect(a, item(a, "n", 1))

		// Another token is another request.
		in.ClientToken = rand.Text()
		if _, err := f.s.TransactWrite(f.ctx, in); err != nil {
			f.t.Fatalf("TransactWrite with a new ClientToken: %v", err)
		}
		f.expect(a, item(a, "n", 2))
	}},
	// The same ClientToken with other actions is a validation error
	// (DynamoDB's IdempotentParameterMismatchException, whose message DynamoDB
	// Local leaves empty) and applies nothing.
	{"ClientTokenOtherActions", func(f *fixture) {
		a := key("tx-token")
		f.put(item(a, "n", 0))
		token := rand.Text()
		_, err := f.s.TransactWrite(f.ctx, store.TransactWriteInput{
			Actions:     []store.Write{f.txUpdate(a, store.Update{}.Add("n", num(1)), store.Condition{}, false)},
			ClientToken: token,
		})
		if err != nil {
			f.t.Fatalf("TransactWrite: %v", err)
		}
		_, err = f.s.TransactWrite(f.ctx, store.TransactWriteInput{
			Actions:     []store.Write{f.txUpdate(a, store.Update{}.Add("n", num(2)), store.Condition{}, false)},
			ClientToken: token,
		})
		expectValidation(f.t, err, "")
		f.expect(a, item(a, "n", 1))
	}},
	// The Return fields of the inputs play no part in a transaction
	// (TransactWriteItems has no ReturnValues), even values a single Put or
	// Delete would reject.
	{"ReturnFieldsIgnored", func(f *fixture) {
		a, b, c := key("tx-a"), key("tx-b"), key("tx-c")
		f.put(item(c, "n", 1))
		_, err := f.transact(
			store.Write{Put: &store.PutInput{Item: item(a, "n", 1), Return: store.ReturnAllNew}},
			store.Write{Update: &store.UpdateInput{Key: b, Expr: f.expr(store.Update{}.Add("n", num(1)), store.Condition{}), Return: store.ReturnUpdatedNew}},
			store.Write{Delete: &store.DeleteInput{Key: c, Return: store.ReturnUpdatedOld}},
		)
		if err != nil {
			f.t.Fatalf("TransactWrite: %v", err)
		}
		f.expect(a, item(a, "n", 1))
		f.expect(b, item(b, "n", 1))
		f.expect(c, nil)
	}},
}

func (f *fixture) transact(actions ...store.Write) (store.WriteOutput, error) {
	f.t.Helper()
	return f.s.TransactWrite(f.ctx, store.TransactWriteInput{Actions: actions})
}

func (f *fixture) txUpdate(k store.Key, u store.Update, c store.Condition, returnOld bool) store.Write {
	f.t.Helper()
	return store.Write{Update: &store.UpdateInput{Key: k, Expr: f.expr(u, c), ReturnOldOnConditionFailure: returnOld}}
}

func (f *fixture) txCheck(k store.Key, c store.Condition, returnOld bool) store.Write {
	f.t.Helper()
	return store.Write{Check: &store.CheckInput{Key: k, Expr: f.expr(store.Update{}, c), ReturnOldOnConditionFailure: returnOld}}
}

// wantReason is the expected cancellation reason of one action.
type wantReason struct {
	code string
	item store.Item // nil: no item
}

// expectCanceled checks that err is a cancelled transaction with the given
// reasons, one per action, in order.
func expectCanceled(t *testing.T, err error, want []wantReason) {
	t.Helper()
	if err == nil {
		t.Fatalf("transaction succeeded, want store.ErrTransactionCanceled")
	}
	if !errors.Is(err, store.ErrTransactionCanceled) {
		t.Fatalf("got error %v (%T), want store.ErrTransactionCanceled", err, err)
	}
	if errors.Is(err, store.ErrConditionFailed) {
		t.Errorf("a cancelled transaction's error %v also matches store.ErrConditionFailed", err)
	}
	var tc *store.TransactionCanceledError
	if !errors.As(err, &tc) {
		t.Fatalf("error %v (%T) matches store.ErrTransactionCanceled but is not a *store.TransactionCanceledError", err, err)
	}
	if len(tc.Reasons) != len(want) {
		t.Fatalf("%d cancellation reasons %+v, want %d (one per action)", len(tc.Reasons), tc.Reasons, len(want))
	}
	for i, w := range want {
		r := tc.Reasons[i]
		if r.Code != w.code {
			t.Errorf("reason %d: Code = %q, want %q", i, r.Code, w.code)
		}
		if d := diff(w.item, r.Item); d != "" {
			t.Errorf("reason %d: Item mismatch (-want +got):\n%s", i, d)
		}
	}
}

// puts returns n Puts of items in partition pk, sort keys 000, 001, ...
func puts(pk string, n int) []store.Write {
	actions := make([]store.Write, n)
	for i := range actions {
		actions[i] = store.Write{Put: &store.PutInput{Item: item(store.Key{PK: pk, SK: fmt.Sprintf("%03d", i)}, "i", i)}}
	}
	return actions
}
