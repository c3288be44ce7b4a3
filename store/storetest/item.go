package storetest

import (
	"math"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Single-item reads and writes: Get, Put, Delete.

var putGetCases = []testCase{
	{"RoundTrip", testRoundTrip},
	{"EmptyStringAttribute", testEmptyStringAttribute},
	{"GetMissingItem", testGetMissing},
	{"EventuallyConsistentGet", testEventualGet},
	{"PutReplacesWholeItem", testPutReplaces},
	{"KeysAreDistinct", testKeysDistinct},
	{"LargeItemBelowLimit", testLargeItemBelowLimit},
}

var putCases = []testCase{
	{"NotExistsConditionSucceedsOnce", testPutNotExists},
	{"ConditionOnAttribute", testPutConditionOnAttribute},
}

var deleteCases = []testCase{
	{"Existing", testDeleteExisting},
	{"MissingItem", testDeleteMissing},
	{"ReturnAllOld", testDeleteReturnAllOld},
	{"ConditionHolds", testDeleteConditionHolds},
	{"ConditionFails", testDeleteConditionFails},
	{"ConditionOnMissingItem", testDeleteConditionMissing},
}

// testRoundTrip: strings and int64 numbers, the extremes included, come
// back exactly as written (DynamoDB numbers are decimal with 38 digits, so
// every int64 is exact, also beyond 2^53 where float64 would round).
func testRoundTrip(f *fixture) {
	k := key("roundtrip")
	want := item(k,
		"s", "hello",
		"unicode", "grüße ✓ 日本",
		"punct", "a#b:c.d-e_f g",
		"zero", 0,
		"one", 1,
		"minus_one", -1,
		"neg", -123456789,
		"millis", int64(1_700_000_000_123),
		"beyond_2_53", int64(9_007_199_254_740_993),
		"max", int64(math.MaxInt64),
		"min", int64(math.MinInt64),
	)
	out := f.put(want)
	expectWriteUnits(f.t, "Put", out.Consumed)
	expectAttrs(f.t, "Put with ReturnNone", nil, out.Attributes)

	got, err := f.s.Get(f.ctx, store.GetInput{Key: k, ConsistentRead: true})
	if err != nil {
		f.t.Fatalf("Get: %v", err)
	}
	if d := diff(want, got.Item); d != "" {
		f.t.Errorf("consistent Get mismatch (-want +got):\n%s", d)
	}
	expectReadUnits(f.t, "consistent Get", got.Consumed)
}

// testEmptyStringAttribute: DynamoDB accepts empty strings in non-key
// attributes (since 2020; DynamoDB Local too).
func testEmptyStringAttribute(f *fixture) {
	k := key("empty")
	want := item(k, "e", "")
	f.put(want)
	f.expect(k, want)
}

// testGetMissing: reading an item that does not exist is not an error and
// gives a nil Item, for both kinds of read.
func testGetMissing(f *fixture) {
	f.put(item(key("present"), "n", 1))
	for _, consistent := range []bool{true, false} {
		out, err := f.s.Get(f.ctx, store.GetInput{Key: key("absent"), ConsistentRead: consistent})
		if err != nil {
			f.t.Fatalf("Get(ConsistentRead=%v) of a missing item: %v", consistent, err)
		}
		if out.Item != nil {
			f.t.Errorf("Get(ConsistentRead=%v) of a missing item: Item = %v, want nil", consistent, out.Item)
		}
	}
}

// testEventualGet: an eventually consistent read shows a write (after at
// most a short lag) and reports read capacity.
func testEventualGet(f *fixture) {
	k := key("eventual")
	want := item(k, "n", 7, "s", "x")
	f.put(want)
	f.eventually(func() string {
		out, err := f.s.Get(f.ctx, store.GetInput{Key: k})
		if err != nil {
			return "eventually consistent Get: " + err.Error()
		}
		if d := diff(want, out.Item); d != "" {
			return "eventually consistent Get mismatch (-want +got):\n" + d
		}
		expectReadUnits(f.t, "eventually consistent Get", out.Consumed)
		return ""
	})
	want2 := item(k, "n", 8)
	f.put(want2)
	f.eventually(func() string {
		out, err := f.s.Get(f.ctx, store.GetInput{Key: k})
		if err != nil {
			return "eventually consistent Get: " + err.Error()
		}
		if d := diff(want2, out.Item); d != "" {
			return "eventually consistent Get after a second Put mismatch (-want +got):\n" + d
		}
		return ""
	})
}

// testPutReplaces: Put replaces the whole item (attributes it does not name
// are gone); ReturnAllOld gives the replaced item, or nothing when there
// was none.
func testPutReplaces(f *fixture) {
	k := key("replace")
	first := item(k, "a", 1, "b", "x")
	out, err := f.s.Put(f.ctx, store.PutInput{Item: first, Return: store.ReturnAllOld})
	if err != nil {
		f.t.Fatalf("first Put: %v", err)
	}
	expectAttrs(f.t, "Put ReturnAllOld of a new item", nil, out.Attributes)

	second := item(k, "c", 2)
	out, err = f.s.Put(f.ctx, store.PutInput{Item: second, Return: store.ReturnAllOld})
	if err != nil {
		f.t.Fatalf("second Put: %v", err)
	}
	expectAttrs(f.t, "Put ReturnAllOld of a replaced item", first, out.Attributes)
	expectWriteUnits(f.t, "Put replacing an item", out.Consumed)
	f.expect(k, second)

	third := item(k, "d", 3)
	out, err = f.s.Put(f.ctx, store.PutInput{Item: third, Return: store.ReturnNone})
	if err != nil {
		f.t.Fatalf("third Put: %v", err)
	}
	expectAttrs(f.t, "Put ReturnNone", nil, out.Attributes)
	f.expect(k, third)
}

// testKeysDistinct: items that share only the partition key or only the
// sort key are different items.
func testKeysDistinct(f *fixture) {
	items := []store.Item{
		item(store.Key{PK: "p1", SK: "s1"}, "n", 1),
		item(store.Key{PK: "p1", SK: "s2"}, "n", 2),
		item(store.Key{PK: "p2", SK: "s1"}, "n", 3),
		item(store.Key{PK: "p1#", SK: "s1"}, "n", 4),
	}
	for _, it := range items {
		f.put(it)
	}
	for _, it := range items {
		k, _ := it.Key()
		f.expect(k, it)
	}
	f.expect(store.Key{PK: "p2", SK: "s2"}, nil)
}

// testLargeItemBelowLimit: an item just under DynamoDB's 400 KB limit
// (409,600 bytes, attribute names included) is accepted whole.
func testLargeItemBelowLimit(f *fixture) {
	k := key("large")
	want := item(k, "big", strings.Repeat("x", 390_000), "n", 1)
	out := f.put(want)
	expectWriteUnits(f.t, "Put of a 390 KB item", out.Consumed)
	f.expect(k, want)
	f.update(k, store.Update{}.Add("n", store.Int(1)), store.Condition{}, store.ReturnNone)
	f.expect(k, with(want, "n", 2))
}

// testPutNotExists: the create-once pattern attribute_not_exists(PK).
func testPutNotExists(f *fixture) {
	k := key("create-once")
	cond := f.expr(store.Update{}, store.Name(store.AttrPK).NotExists())
	first := item(k, "v", 1)
	out, err := f.s.Put(f.ctx, store.PutInput{Item: first, Expr: cond})
	if err != nil {
		f.t.Fatalf("first conditional Put: %v", err)
	}
	expectWriteUnits(f.t, "conditional Put", out.Consumed)

	// The second fails and, asked to, returns the stored item.
	_, err = f.s.Put(f.ctx, store.PutInput{Item: item(k, "v", 2), Expr: cond, ReturnOldOnConditionFailure: true})
	expectConditionFailed(f.t, err, first)
	// Without ReturnOldOnConditionFailure, no item comes back.
	_, err = f.s.Put(f.ctx, store.PutInput{Item: item(k, "v", 3), Expr: cond})
	expectConditionFailed(f.t, err, nil)
	f.expect(k, first)
}

// testPutConditionOnAttribute: a Put conditioned on an attribute of the
// item it replaces.
func testPutConditionOnAttribute(f *fixture) {
	k := key("put-cond")
	old := item(k, "v", 1, "s", "x")
	f.put(old)

	next := item(k, "v", 2)
	_, err := f.s.Put(f.ctx, store.PutInput{Item: next, Expr: f.expr(store.Update{}, store.Name("v").Equal(store.Int(1)))})
	if err != nil {
		f.t.Fatalf("Put with a true condition: %v", err)
	}
	f.expect(k, next)

	_, err = f.s.Put(f.ctx, store.PutInput{
		Item:                        item(k, "v", 3),
		Expr:                        f.expr(store.Update{}, store.Name("v").Equal(store.Int(1))),
		ReturnOldOnConditionFailure: true,
	})
	expectConditionFailed(f.t, err, next)
	f.expect(k, next)

	// On a missing item every comparison is false.
	_, err = f.s.Put(f.ctx, store.PutInput{
		Item:                        item(key("put-cond-missing"), "v", 1),
		Expr:                        f.expr(store.Update{}, store.Name("v").GreaterThanEqual(store.Int(0))),
		ReturnOldOnConditionFailure: true,
	})
	expectConditionFailed(f.t, err, nil)
	f.expect(key("put-cond-missing"), nil)
}

func testDeleteExisting(f *fixture) {
	k := key("del")
	f.put(item(k, "n", 1))
	out, err := f.s.Delete(f.ctx, store.DeleteInput{Key: k})
	if err != nil {
		f.t.Fatalf("Delete: %v", err)
	}
	expectWriteUnits(f.t, "Delete", out.Consumed)
	expectAttrs(f.t, "Delete with ReturnNone", nil, out.Attributes)
	f.expect(k, nil)
}

// testDeleteMissing: deleting a missing item succeeds.
func testDeleteMissing(f *fixture) {
	if _, err := f.s.Delete(f.ctx, store.DeleteInput{Key: key("never-written")}); err != nil {
		f.t.Fatalf("Delete of a missing item: %v", err)
	}
	f.expect(key("never-written"), nil)
}

func testDeleteReturnAllOld(f *fixture) {
	k := key("del-old")
	old := item(k, "n", 1, "s", "x")
	f.put(old)
	out, err := f.s.Delete(f.ctx, store.DeleteInput{Key: k, Return: store.ReturnAllOld})
	if err != nil {
		f.t.Fatalf("Delete: %v", err)
	}
	expectAttrs(f.t, "Delete ReturnAllOld", old, out.Attributes)
	f.expect(k, nil)

	out, err = f.s.Delete(f.ctx, store.DeleteInput{Key: k, Return: store.ReturnAllOld})
	if err != nil {
		f.t.Fatalf("Delete of a missing item: %v", err)
	}
	expectAttrs(f.t, "Delete ReturnAllOld of a missing item", nil, out.Attributes)
}

func testDeleteConditionHolds(f *fixture) {
	k := key("del-cond")
	f.put(item(k, "n", 1))
	_, err := f.s.Delete(f.ctx, store.DeleteInput{
		Key:  k,
		Expr: f.expr(store.Update{}, store.And(store.Name(store.AttrPK).Exists(), store.Name("n").Equal(store.Int(1)))),
	})
	if err != nil {
		f.t.Fatalf("Delete with a true condition: %v", err)
	}
	f.expect(k, nil)
}

func testDeleteConditionFails(f *fixture) {
	k := key("del-cond-fail")
	old := item(k, "n", 1)
	f.put(old)
	cond := f.expr(store.Update{}, store.Name("n").Equal(store.Int(2)))
	_, err := f.s.Delete(f.ctx, store.DeleteInput{Key: k, Expr: cond, ReturnOldOnConditionFailure: true})
	expectConditionFailed(f.t, err, old)
	_, err = f.s.Delete(f.ctx, store.DeleteInput{Key: k, Expr: cond})
	expectConditionFailed(f.t, err, nil)
	f.expect(k, old)
}

// testDeleteConditionMissing: a condition on a missing item sees no
// attributes; there is no old item to return.
func testDeleteConditionMissing(f *fixture) {
	_, err := f.s.Delete(f.ctx, store.DeleteInput{
		Key:                         key("del-missing"),
		Expr:                        f.expr(store.Update{}, store.Name(store.AttrPK).Exists()),
		ReturnOldOnConditionFailure: true,
	})
	expectConditionFailed(f.t, err, nil)

	// attribute_not_exists holds on a missing item: the delete is a no-op.
	_, err = f.s.Delete(f.ctx, store.DeleteInput{
		Key:  key("del-missing"),
		Expr: f.expr(store.Update{}, store.Name(store.AttrPK).NotExists()),
	})
	if err != nil {
		f.t.Fatalf("Delete of a missing item under attribute_not_exists(PK): %v", err)
	}
}
