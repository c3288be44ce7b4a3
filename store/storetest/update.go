package storetest

import (
	"fmt"
	"math"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Update expressions: ADD, SET, SET if_not_exists, REMOVE, and ReturnValues.

var updateCases = []testCase{
	// Update of a missing item creates it with its key attributes and the
	// written ones.
	{"UpsertCreatesItemWithKey", updates(upd{nil, store.Update{}.Add("n", num(5)).Set("s", str("x")), []any{"n", 5, "s", "x"}})},
	// ADD on a missing attribute (of an existing or a missing item) starts
	// from 0; a negative ADD subtracts.
	{"AddStartsAtZero", updates(
		upd{[]any{"other", 1}, store.Update{}.Add("n", num(7)).Add("m", num(-7)), []any{"other", 1, "n", 7, "m", -7}},
		upd{[]any{"other", 1, "n", 7, "m", -7}, store.Update{}.Add("n", num(-10)), []any{"other", 1, "n", -3, "m", -7}},
		upd{nil, store.Update{}.Add("n", num(-4)), []any{"n", -4}},
	)},
	// DynamoDB adds decimals exactly, so int64 arithmetic up to the
	// extremes is exact (float64 would round beyond 2^53).
	{"AddIsExactDecimal", updates(upd{
		[]any{"big", int64(9_007_199_254_740_993), "max", int64(math.MaxInt64 - 5), "min", int64(math.MinInt64 + 5), "millis", int64(1_700_000_000_000_000)},
		store.Update{}.Add("big", num(1)).Add("max", num(5)).Add("min", num(-5)).Add("millis", num(-1)),
		[]any{"big", int64(9_007_199_254_740_994), "max", int64(math.MaxInt64), "min", int64(math.MinInt64), "millis", int64(1_699_999_999_999_999)},
	})},
	// SET overwrites or creates an attribute, and may change its type.
	{"Set", updates(upd{
		[]any{"s", "old", "n", 1, "t", "string"},
		store.Update{}.Set("s", str("new")).Set("n", num(-9)).Set("t", num(3)).Set("added", str("a")),
		[]any{"s", "new", "n", -9, "t", 3, "added", "a"},
	})},
	// SET a = b copies b's value.
	{"SetFromAttribute", updates(upd{
		[]any{"n", 42, "s", "x"},
		store.Update{}.Set("n_copy", nm("n")).Set("s_copy", nm("s")),
		[]any{"n", 42, "s", "x", "n_copy", 42, "s_copy", "x"},
	})},
	// SET a = if_not_exists(a, v) writes v only when a is absent.
	{"SetIfNotExists", updates(
		upd{[]any{"present", 1},
			store.Update{}.SetIfNotExists("present", num(100)).SetIfNotExists("absent", num(200)).SetIfNotExists("absent_s", str("init")),
			[]any{"present", 1, "absent", 200, "absent_s", "init"}},
		upd{nil, store.Update{}.SetIfNotExists("n", num(3)), []any{"n", 3}},
	)},
	// SET a = if_not_exists(a, start) + delta, the safe increment.
	{"SetIfNotExistsPlus", updates(
		upd{[]any{"present", 10},
			store.Update{}.SetIfNotExistsPlus("present", num(0), num(5)).SetIfNotExistsPlus("absent", num(100), num(-1)).SetIfNotExistsPlus("absent0", num(0), num(1)),
			[]any{"present", 15, "absent", 99, "absent0", 1}},
		upd{nil, store.Update{}.SetIfNotExistsPlus("n", num(1000), num(-250)), []any{"n", 750}},
	)},
	// REMOVE deletes an attribute; removing an absent one is a no-op.
	{"Remove", updates(upd{[]any{"a", 1, "b", "x", "c", 3}, store.Update{}.Remove("a").Remove("b").Remove("absent"), []any{"c", 3}})},
	// SET, REMOVE and ADD in one expression.
	{"SetAddRemoveCombined", func(f *fixture) {
		k := key("combined")
		f.put(item(k, "s", "x", "n", 1, "gone", "bye", "keep", "k"))
		u := store.Update{}.
			Set("s", store.Str("y")).
			SetIfNotExists("init", store.Int(1)).
			Remove("gone").
			Add("n", store.Int(2)).
			Add("fresh", store.Int(3))
		e := f.expr(u, store.Condition{})
		for _, clause := range []string{"SET ", "REMOVE ", "ADD "} {
			if !strings.Contains(e.Update, clause) {
				f.t.Fatalf("built update %q lacks a %s clause", e.Update, clause)
			}
		}
		out, err := f.s.Update(f.ctx, store.UpdateInput{Key: k, Expr: e, Return: store.ReturnAllNew})
		if err != nil {
			f.t.Fatalf("Update: %v", err)
		}
		want := item(k, "s", "y", "init", 1, "n", 3, "fresh", 3, "keep", "k")
		expectAttrs(f.t, "ALL_NEW", want, out.Attributes)
		f.expect(k, want)
	}},
	// The five ReturnValues on an existing item and on an upsert. UPDATED_OLD
	// holds the updated attributes that existed (a removed one included),
	// UPDATED_NEW those that exist afterwards (never the key); on an upsert
	// ALL_OLD and UPDATED_OLD return nothing.
	{"ReturnValues", func(f *fixture) {
		existing := func(k store.Key) store.Item { return item(k, "a", 1, "b", "x", "c", 5, "keep", "k") }
		upd := store.Update{}.Set("b", store.Str("y")).Add("a", store.Int(2)).Add("d", store.Int(3)).Remove("c")
		for _, c := range []struct {
			ret  store.ReturnValue
			want func(k store.Key) store.Item
		}{
			{store.ReturnNone, func(store.Key) store.Item { return nil }},
			{store.ReturnAllOld, existing},
			{store.ReturnUpdatedOld, func(store.Key) store.Item { return attrs("a", 1, "b", "x", "c", 5) }},
			{store.ReturnAllNew, func(k store.Key) store.Item { return item(k, "a", 3, "b", "y", "d", 3, "keep", "k") }},
			{store.ReturnUpdatedNew, func(store.Key) store.Item { return attrs("a", 3, "b", "y", "d", 3) }},
		} {
			f.run("Existing/"+c.ret.String(), func(f *fixture) {
				k := key("rv-existing-" + c.ret.String())
				f.put(existing(k))
				out := f.update(k, upd, store.Condition{}, c.ret)
				expectAttrs(f.t, c.ret.String(), c.want(k), out.Attributes)
				f.expect(k, item(k, "a", 3, "b", "y", "d", 3, "keep", "k"))
			})
		}

		upsert := store.Update{}.Set("b", store.Str("y")).Add("a", store.Int(2))
		for _, c := range []struct {
			ret  store.ReturnValue
			want func(k store.Key) store.Item
		}{
			{store.ReturnNone, func(store.Key) store.Item { return nil }},
			{store.ReturnAllOld, func(store.Key) store.Item { return nil }},
			{store.ReturnUpdatedOld, func(store.Key) store.Item { return nil }},
			{store.ReturnAllNew, func(k store.Key) store.Item { return item(k, "a", 2, "b", "y") }},
			{store.ReturnUpdatedNew, func(store.Key) store.Item { return attrs("a", 2, "b", "y") }},
		} {
			f.run("Upsert/"+c.ret.String(), func(f *fixture) {
				k := key("rv-upsert-" + c.ret.String())
				out := f.update(k, upsert, store.Condition{}, c.ret)
				expectAttrs(f.t, c.ret.String()+" on an upsert", c.want(k), out.Attributes)
				f.expect(k, item(k, "a", 2, "b", "y"))
			})
		}
	}},
}

// upd is one step of an update case: the attributes of the item stored
// before (nil: no item), the update, the attributes after.
type upd struct {
	given []any
	u     store.Update
	want  []any
}

// updates returns a case that runs each step on its own key: the update
// succeeds, reports write capacity and no attributes, and leaves want.
func updates(steps ...upd) func(f *fixture) {
	return func(f *fixture) {
		for i, st := range steps {
			k := key(fmt.Sprintf("upd-%d", i))
			if st.given != nil {
				f.put(item(k, st.given...))
			}
			out := f.update(k, st.u, store.Condition{}, store.ReturnNone)
			expectWriteUnits(f.t, "Update", out.Consumed)
			expectAttrs(f.t, "Update with ReturnNone", nil, out.Attributes)
			f.expect(k, item(k, st.want...))
		}
	}
}
