package storetest

import (
	"github.com/shardlimit/limiter/store"
)

// Condition expressions: comparisons, functions, boolean operators, on an
// existing and on a missing item.

var conditionCases = []testCase{
	// Each condition in an Update of an item that exists: a true condition
	// lets the update (ADD hits 1) through; a false one fails with the item
	// as it stood and changes nothing.
	{"OnExistingItem", func(f *fixture) { runConditions(f, "cond-", existingItemConditions) }},
	// Conditions on an item that does not exist: only conditions true on an
	// empty item let the upsert through, and a failure has no old item to
	// return.
	{"OnMissingItem", func(f *fixture) {
		runConditions(f, "missing-", []conditionCase{
			{"AttributeExistsPK", nm(store.AttrPK).Exists(), false},
			{"AttributeNotExistsPK", nm(store.AttrPK).NotExists(), true},
			{"NotAttributeExistsPK", store.Not(nm(store.AttrPK).Exists()), true},
			{"Equal", nm("n").Equal(num(1)), false},
			{"GreaterEqualZero", nm("n").GreaterThanEqual(num(0)), false},
			{"NotEqual", nm("n").NotEqual(num(1)), true},
			{"BeginsWithSortKey", nm(store.AttrSK).BeginsWith("missing-"), false},
			{"NotExistsOrEnough", store.Or(nm(store.AttrPK).NotExists(), nm("n").GreaterThanEqual(num(1))), true},
		})
	}},
}

// conditionBase is the item the conditions of OnExistingItem are evaluated
// on.
func conditionBase(k store.Key) store.Item {
	return item(k,
		"n", 50000,
		"neg", -10,
		"z", 0,
		"s", "banana",
		"p", "rate-limit#gpt-3.5",
	)
}

type conditionCase struct {
	name string
	cond store.Condition
	want bool
}

func nm(name string) store.Name { return store.Name(name) }

func num(v int64) store.Value { return store.Int(v) }

func str(s string) store.Value { return store.Str(s) }

var (
	condTrue  = nm("n").Equal(num(50000))
	condFalse = nm("n").Equal(num(1))
)

// existingItemConditions are evaluated on conditionBase. Comparisons with a
// missing attribute are false, except <> which is true; comparisons across
// types are false (= and ordering) or true (<>).
var existingItemConditions = []conditionCase{
	// Numbers compare numerically: lexically "50000" < "9999".
	{"NumberComparisonIsNumeric", nm("n").GreaterThanEqual(num(9999)), true},
	{"NumberLessThanIsNumeric", nm("n").LessThan(num(9999)), false},
	{"NumberEqual", nm("n").Equal(num(50000)), true},
	{"NumberNotEqual", nm("n").NotEqual(num(50000)), false},
	{"NumberGreaterThanAtEqual", nm("n").GreaterThan(num(50000)), false},
	{"NumberGreaterEqualAtEqual", nm("n").GreaterThanEqual(num(50000)), true},
	{"NumberLessEqualAtEqual", nm("n").LessThanEqual(num(50000)), true},
	{"NegativeGreaterEqual", nm("neg").GreaterThanEqual(num(-9)), false},
	{"NegativeLessThan", nm("neg").LessThan(num(-9)), true},
	{"ZeroGreaterThanNegative", nm("z").GreaterThan(num(-1)), true},
	{"BetweenInclusive", nm("n").Between(num(49999), num(50000)), true},
	{"BetweenOutside", nm("n").Between(num(1), num(49999)), false},
	{"CompareTwoAttributes", nm("n").GreaterThan(nm("neg")), true},
	{"CompareTwoAttributesFalse", nm("neg").GreaterThanEqual(nm("z")), false},

	// Strings compare by bytes: upper case sorts before lower case.
	{"StringEqual", nm("s").Equal(str("banana")), true},
	{"StringNotEqual", nm("s").NotEqual(str("Banana")), true},
	{"StringLessThan", nm("s").LessThan(str("cherry")), true},
	{"StringUpperCaseSortsFirst", nm("s").LessThan(str("Banana")), false},
	{"StringPrefixSortsFirst", nm("s").GreaterThan(str("ban")), true},

	// Across types: = is false, <> is true, ordering is false.
	{"NumberEqualsStringIsFalse", nm("n").Equal(str("50000")), false},
	{"NumberNotEqualStringIsTrue", nm("n").NotEqual(str("50000")), true},
	{"StringLessThanNumberIsFalse", nm("s").LessThan(num(1)), false},

	// A missing attribute.
	{"MissingEqual", nm("missing").Equal(num(1)), false},
	{"MissingLessThan", nm("missing").LessThan(num(1)), false},
	{"MissingGreaterEqual", nm("missing").GreaterThanEqual(num(0)), false},
	{"MissingBetween", nm("missing").Between(num(-1), num(1)), false},
	{"MissingNotEqual", nm("missing").NotEqual(num(1)), true},
	{"TwoMissingEqual", nm("missing").Equal(nm("missing2")), false},
	{"TwoMissingNotEqual", nm("missing").NotEqual(nm("missing2")), true},
	{"MissingVsPresent", nm("missing").LessThan(nm("n")), false},

	// Functions.
	{"AttributeExists", nm("n").Exists(), true},
	{"AttributeExistsPK", nm(store.AttrPK).Exists(), true},
	{"AttributeExistsMissing", nm("missing").Exists(), false},
	{"AttributeNotExistsMissing", nm("missing").NotExists(), true},
	{"AttributeNotExistsPresent", nm("n").NotExists(), false},
	{"BeginsWith", nm("p").BeginsWith("rate-limit#"), true},
	{"BeginsWithWholeValue", nm("p").BeginsWith("rate-limit#gpt-3.5"), true},
	{"BeginsWithOtherPrefix", nm("p").BeginsWith("gpt"), false},
	{"BeginsWithLongerThanValue", nm("s").BeginsWith("bananas"), false},
	{"BeginsWithMissing", nm("missing").BeginsWith("x"), false},
	{"BeginsWithSortKey", nm(store.AttrSK).BeginsWith("cond-"), true},

	// Boolean operators.
	{"AndTrue", store.And(condTrue, nm("s").Exists()), true},
	{"AndFalse", store.And(condTrue, condFalse), false},
	{"OrTrue", store.Or(condFalse, condTrue), true},
	{"OrFalse", store.Or(condFalse, nm("missing").Exists()), false},
	{"NotFalse", store.Not(condFalse), true},
	{"NotTrue", store.Not(condTrue), false},
	{"NotMissing", store.Not(nm("missing").Exists()), true},
	{"Nested", store.Or(store.And(condTrue, condFalse), store.Not(condFalse)), true},
	{"NestedFalse", store.And(store.Or(condFalse, condTrue), store.Not(condTrue)), false},
	{"ThreeWayAnd", store.And(condTrue, nm("z").Equal(num(0)), nm("s").BeginsWith("ban")), true},
}

// runConditions runs each case on its own key (prefix + name), holding
// conditionBase unless prefix is "missing-".
func runConditions(f *fixture, prefix string, cases []conditionCase) {
	for _, c := range cases {
		f.run(c.name, func(f *fixture) {
			k := key(prefix + c.name)
			var base store.Item
			after := item(k)
			if prefix != "missing-" {
				base, after = conditionBase(k), conditionBase(k)
				f.put(base)
			}
			err := f.updateErr(k, store.Update{}.Add("hits", num(1)), c.cond)
			if c.want {
				if err != nil {
					f.t.Fatalf("condition %s on %v: Update failed with %v, want success", f.expr(store.Update{}, c.cond).Condition, base, err)
				}
				f.expect(k, with(after, "hits", 1))
				return
			}
			if err == nil {
				f.t.Errorf("condition %s on %v: Update succeeded, want store.ErrConditionFailed", f.expr(store.Update{}, c.cond).Condition, base)
			} else {
				expectConditionFailed(f.t, err, base)
			}
			f.expect(k, base)
		})
	}
}
