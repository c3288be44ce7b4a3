package storetest

import (
	"math"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Update expressions: ADD, SET, SET if_not_exists, REMOVE, and ReturnValues.

var updateCases = []testCase{
	{"UpsertCreatesItemWithKey", testUpsert},
	{"AddStartsAtZero", testAddStartsAtZero},
	{"AddIsExactDecimal", testAddExact},
	{"Set", testSet},
	{"SetFromAttribute", testSetFromAttribute},
	{"SetIfNotExists", testSetIfNotExists},
	{"SetIfNotExistsPlus", testSetIfNotExistsPlus},
	{"Remove", testRemove},
	{"SetAddRemoveCombined", testCombined},
	{"ReturnValues", testReturnValues},
}

// testUpsert: Update of a missing item creates it with its key attributes
// and the written ones.
func testUpsert(f *fixture) {
	k := key("upsert")
	out := f.update(k, store.Update{}.Add("n", store.Int(5)).Set("s", store.Str("x")), store.Condition{}, store.ReturnNone)
	expectWriteUnits(f.t, "upsert", out.Consumed)
	expectAttrs(f.t, "Update with ReturnNone", nil, out.Attributes)
	f.expect(k, item(k, "n", 5, "s", "x"))
}

// testAddStartsAtZero: ADD on a missing attribute (of an existing or a
// missing item) starts from 0; a negative ADD subtracts.
func testAddStartsAtZero(f *fixture) {
	k := key("add")
	f.put(item(k, "other", 1))
	f.update(k, store.Update{}.Add("n", store.Int(7)).Add("m", store.Int(-7)), store.Condition{}, store.ReturnNone)
	f.expect(k, item(k, "other", 1, "n", 7, "m", -7))
	f.update(k, store.Update{}.Add("n", store.Int(-10)), store.Condition{}, store.ReturnNone)
	f.expect(k, item(k, "other", 1, "n", -3, "m", -7))

	k2 := key("add-missing-item")
	f.update(k2, store.Update{}.Add("n", store.Int(-4)), store.Condition{}, store.ReturnNone)
	f.expect(k2, item(k2, "n", -4))
}

// testAddExact: DynamoDB adds decimals exactly, so int64 arithmetic up to
// the extremes is exact (float64 would round beyond 2^53).
func testAddExact(f *fixture) {
	k := key("add-exact")
	f.put(item(k,
		"big", int64(9_007_199_254_740_993),
		"max", int64(math.MaxInt64-5),
		"min", int64(math.MinInt64+5),
		"millis", int64(1_700_000_000_000_000),
	))
	f.update(k, store.Update{}.
		Add("big", store.Int(1)).
		Add("max", store.Int(5)).
		Add("min", store.Int(-5)).
		Add("millis", store.Int(-1)), store.Condition{}, store.ReturnNone)
	f.expect(k, item(k,
		"big", int64(9_007_199_254_740_994),
		"max", int64(math.MaxInt64),
		"min", int64(math.MinInt64),
		"millis", int64(1_699_999_999_999_999),
	))
}

// testSet: SET overwrites or creates an attribute, and may change its type.
func testSet(f *fixture) {
	k := key("set")
	f.put(item(k, "s", "old", "n", 1, "t", "string"))
	f.update(k, store.Update{}.
		Set("s", store.Str("new")).
		Set("n", store.Int(-9)).
		Set("t", store.Int(3)).
		Set("added", store.Str("a")), store.Condition{}, store.ReturnNone)
	f.expect(k, item(k, "s", "new", "n", -9, "t", 3, "added", "a"))
}

// testSetFromAttribute: SET a = b copies b's value.
func testSetFromAttribute(f *fixture) {
	k := key("set-copy")
	f.put(item(k, "n", 42, "s", "x"))
	f.update(k, store.Update{}.Set("n_copy", store.Name("n")).Set("s_copy", store.Name("s")), store.Condition{}, store.ReturnNone)
	f.expect(k, item(k, "n", 42, "s", "x", "n_copy", 42, "s_copy", "x"))
}

// testSetIfNotExists: SET a = if_not_exists(a, v) writes v only when a is
// absent.
func testSetIfNotExists(f *fixture) {
	k := key("if-not-exists")
	f.put(item(k, "present", 1))
	f.update(k, store.Update{}.
		SetIfNotExists("present", store.Int(100)).
		SetIfNotExists("absent", store.Int(200)).
		SetIfNotExists("absent_s", store.Str("init")), store.Condition{}, store.ReturnNone)
	f.expect(k, item(k, "present", 1, "absent", 200, "absent_s", "init"))

	k2 := key("if-not-exists-missing-item")
	f.update(k2, store.Update{}.SetIfNotExists("n", store.Int(3)), store.Condition{}, store.ReturnNone)
	f.expect(k2, item(k2, "n", 3))
}

// testSetIfNotExistsPlus: SET a = if_not_exists(a, start) + delta, the safe
// increment.
func testSetIfNotExistsPlus(f *fixture) {
	k := key("if-not-exists-plus")
	f.put(item(k, "present", 10))
	f.update(k, store.Update{}.
		SetIfNotExistsPlus("present", store.Int(0), store.Int(5)).
		SetIfNotExistsPlus("absent", store.Int(100), store.Int(-1)).
		SetIfNotExistsPlus("absent0", store.Int(0), store.Int(1)), store.Condition{}, store.ReturnNone)
	f.expect(k, item(k, "present", 15, "absent", 99, "absent0", 1))

	k2 := key("if-not-exists-plus-missing-item")
	f.update(k2, store.Update{}.SetIfNotExistsPlus("n", store.Int(1000), store.Int(-250)), store.Condition{}, store.ReturnNone)
	f.expect(k2, item(k2, "n", 750))
}

// testRemove: REMOVE deletes an attribute; removing an absent one is a
// no-op.
func testRemove(f *fixture) {
	k := key("remove")
	f.put(item(k, "a", 1, "b", "x", "c", 3))
	f.update(k, store.Update{}.Remove("a").Remove("b").Remove("absent"), store.Condition{}, store.ReturnNone)
	f.expect(k, item(k, "c", 3))
}

// testCombined: SET, REMOVE and ADD in one expression.
func testCombined(f *fixture) {
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
}

// testReturnValues: the five ReturnValues on an existing item and on an
// upsert. UPDATED_OLD holds the updated attributes that existed (a removed
// one included), UPDATED_NEW those that exist afterwards (never the key);
// on an upsert ALL_OLD and UPDATED_OLD return nothing.
func testReturnValues(f *fixture) {
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
}
