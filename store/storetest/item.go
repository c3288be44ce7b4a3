package storetest

import (
	"fmt"
	"math"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Single-item reads and writes: Get, Put, Delete.

var putGetCases = []testCase{
	// Strings and int64 numbers, the extremes included, come back exactly as
	// written (DynamoDB numbers are decimal with 38 digits, so every int64 is
	// exact, also beyond 2^53 where float64 would round).
	{"RoundTrip", func(f *fixture) {
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
	}},
	// DynamoDB accepts empty strings in non-key attributes (since 2020;
	// DynamoDB Local too).
	{"EmptyStringAttribute", func(f *fixture) {
		k := key("empty")
		want := item(k, "e", "")
		f.put(want)
		f.expect(k, want)
	}},
	// Reading an item that does not exist is not an error and gives a nil
	// Item, for both kinds of read.
	{"GetMissingItem", func(f *fixture) {
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
	}},
	// An eventually consistent read shows a write (after at most a short lag)
	// and reports read capacity.
	{"EventuallyConsistentGet", func(f *fixture) {
		k := key("eventual")
		for i, want := range []store.Item{item(k, "n", 7, "s", "x"), item(k, "n", 8)} {
			f.put(want)
			f.eventually(func() string {
				out, err := f.s.Get(f.ctx, store.GetInput{Key: k})
				if err != nil {
					return "eventually consistent Get: " + err.Error()
				}
				if d := diff(want, out.Item); d != "" {
					return fmt.Sprintf("eventually consistent Get after Put %d mismatch (-want +got):\n%s", i+1, d)
				}
				expectReadUnits(f.t, "eventually consistent Get", out.Consumed)
				return ""
			})
		}
	}},
	// Put replaces the whole item (attributes it does not name are gone);
	// ReturnAllOld gives the replaced item, or nothing when there was none.
	{"PutReplacesWholeItem", steps(nil,
		step{call: putCall(none, store.ReturnAllOld, false, "a", 1, "b", "x"), after: []any{"a", 1, "b", "x"}},
		step{call: putCall(none, store.ReturnAllOld, false, "c", 2), got: []any{"a", 1, "b", "x"}, after: []any{"c", 2}},
		step{call: putCall(none, store.ReturnNone, false, "d", 3), after: []any{"d", 3}},
	)},
	// Items that share only the partition key or only the sort key are
	// different items.
	{"KeysAreDistinct", func(f *fixture) {
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
	}},
	// An item just under DynamoDB's 400 KB limit (409,600 bytes, attribute
	// names included) is accepted whole.
	{"LargeItemBelowLimit", func(f *fixture) {
		k := key("large")
		want := item(k, "big", strings.Repeat("x", 390_000), "n", 1)
		out := f.put(want)
		expectWriteUnits(f.t, "Put of a 390 KB item", out.Consumed)
		f.expect(k, want)
		f.update(k, store.Update{}.Add("n", store.Int(1)), store.Condition{}, store.ReturnNone)
		f.expect(k, with(want, "n", 2))
	}},
}

var putCases = []testCase{
	// The create-once pattern attribute_not_exists(PK): the second Put
	// fails and, asked to, returns the stored item.
	{"NotExistsConditionSucceedsOnce", steps(nil,
		step{call: putCall(notExists, store.ReturnNone, true, "v", 1), after: []any{"v", 1}},
		step{call: putCall(notExists, store.ReturnNone, true, "v", 2), failed: true, got: []any{"v", 1}, after: []any{"v", 1}},
		step{call: putCall(notExists, store.ReturnNone, false, "v", 3), failed: true, after: []any{"v", 1}},
	)},
	// A Put conditioned on an attribute of the item it replaces; on a
	// missing item every comparison is false.
	{"ConditionOnAttribute", steps([]any{"v", 1, "s", "x"},
		step{call: putCall(nm("v").Equal(num(1)), store.ReturnNone, true, "v", 2), after: []any{"v", 2}},
		step{call: putCall(nm("v").Equal(num(1)), store.ReturnNone, true, "v", 3), failed: true, got: []any{"v", 2}, after: []any{"v", 2}},
		step{sk: "missing", call: putCall(nm("v").GreaterThanEqual(num(0)), store.ReturnNone, true, "v", 1), failed: true},
	)},
}

var deleteCases = []testCase{
	{"Existing", steps([]any{"n", 1}, step{call: deleteCall(none, store.ReturnNone, false)})},
	// Deleting a missing item succeeds.
	{"MissingItem", steps(nil, step{call: deleteCall(none, store.ReturnNone, false)})},
	{"ReturnAllOld", steps([]any{"n", 1, "s", "x"},
		step{call: deleteCall(none, store.ReturnAllOld, false), got: []any{"n", 1, "s", "x"}},
		step{call: deleteCall(none, store.ReturnAllOld, false)},
	)},
	{"ConditionHolds", steps([]any{"n", 1},
		step{call: deleteCall(store.And(nm(store.AttrPK).Exists(), nm("n").Equal(num(1))), store.ReturnNone, false)})},
	{"ConditionFails", steps([]any{"n", 1},
		step{call: deleteCall(nm("n").Equal(num(2)), store.ReturnNone, true), failed: true, got: []any{"n", 1}, after: []any{"n", 1}},
		step{call: deleteCall(nm("n").Equal(num(2)), store.ReturnNone, false), failed: true, after: []any{"n", 1}},
	)},
	// A condition on a missing item sees no attributes; there is no old
	// item to return. attribute_not_exists holds: the delete is a no-op.
	{"ConditionOnMissingItem", steps(nil,
		step{call: deleteCall(nm(store.AttrPK).Exists(), store.ReturnNone, true), failed: true},
		step{call: deleteCall(notExists, store.ReturnNone, false)},
	)},
}

var (
	none      store.Condition
	notExists = nm(store.AttrPK).NotExists()
)

// step is one write of a steps case, on the case's key (or on sk).
type step struct {
	sk   string
	call func(f *fixture, k store.Key) (store.WriteOutput, error)
	// failed: the write must fail its condition.
	failed bool
	// got: the attributes of the item (with its key) that the write
	// returns, or that the failure returns; nil: none.
	got []any
	// after: the attributes of the item at the key afterwards; nil: none.
	after []any
}

// steps returns a case that stores item(k, given...) (unless given is
// nil) and runs the steps in order. A write that succeeds reports write
// capacity.
func steps(given []any, steps ...step) func(f *fixture) {
	whole := func(k store.Key, kv []any) store.Item {
		if kv == nil {
			return nil
		}
		return item(k, kv...)
	}
	return func(f *fixture) {
		if given != nil {
			f.put(item(key("steps"), given...))
		}
		for i, st := range steps {
			k := key("steps" + st.sk)
			out, err := st.call(f, k)
			switch {
			case st.failed:
				expectConditionFailed(f.t, err, whole(k, st.got))
			case err != nil:
				f.t.Fatalf("write %d: %v", i, err)
			default:
				expectWriteUnits(f.t, fmt.Sprintf("write %d", i), out.Consumed)
				expectAttrs(f.t, fmt.Sprintf("write %d", i), whole(k, st.got), out.Attributes)
			}
			f.expect(k, whole(k, st.after))
		}
	}
}

// putCall is a step's Put of item(k, kv...).
func putCall(c store.Condition, ret store.ReturnValue, returnOld bool, kv ...any) func(*fixture, store.Key) (store.WriteOutput, error) {
	return func(f *fixture, k store.Key) (store.WriteOutput, error) {
		return f.s.Put(f.ctx, store.PutInput{Item: item(k, kv...), Expr: f.expr(store.Update{}, c), Return: ret, ReturnOldOnConditionFailure: returnOld})
	}
}

// deleteCall is a step's Delete of k.
func deleteCall(c store.Condition, ret store.ReturnValue, returnOld bool) func(*fixture, store.Key) (store.WriteOutput, error) {
	return func(f *fixture, k store.Key) (store.WriteOutput, error) {
		return f.s.Delete(f.ctx, store.DeleteInput{Key: k, Expr: f.expr(store.Update{}, c), Return: ret, ReturnOldOnConditionFailure: returnOld})
	}
}
