package store_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shardlimit/limiter/store"
)

func TestBuildAssignsDeterministicPlaceholders(t *testing.T) {
	u := store.Update{}.
		Add("b_gpt-3.5_tk", store.Int(-1000)).
		Set("rf", store.Int(1700)).
		SetIfNotExists("ttl", store.Int(9)).
		SetIfNotExistsPlus("n", store.Int(0), store.Int(1)).
		Remove("b_old_tk")
	c := store.And(
		store.Name("PK").Exists(),
		store.Or(store.Name("rf").Equal(store.Int(1600)), store.Not(store.Name("b_gpt-3.5_tk").LessThan(store.Int(1000)))),
		store.Name("SK").BeginsWith("#"),
	)
	got, err := store.Build(u, c)
	if err != nil {
		t.Fatal(err)
	}
	want := store.Expr{
		Update:    "SET #a0 = :v0, #a1 = if_not_exists(#a1, :v1), #a2 = if_not_exists(#a2, :v2) + :v3 REMOVE #a3 ADD #a4 :v4",
		Condition: "(attribute_exists(#a5)) AND ((#a0 = :v5) OR (NOT (#a4 < :v6))) AND (begins_with(#a6, :v7))",
		Names: map[string]string{"#a0": "rf", "#a1": "ttl", "#a2": "n", "#a3": "b_old_tk",
			"#a4": "b_gpt-3.5_tk", "#a5": "PK", "#a6": "SK"},
		Values: map[string]store.Value{":v0": store.Int(1700), ":v1": store.Int(9), ":v2": store.Int(0),
			":v3": store.Int(1), ":v4": store.Int(-1000), ":v5": store.Int(1600), ":v6": store.Int(1000), ":v7": store.Str("#")},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(store.Value.Equal)); diff != "" {
		t.Fatalf("Build mismatch (-want +got):\n%s", diff)
	}
	again, _ := store.Build(u, c)
	if !cmp.Equal(got, again, cmp.Comparer(store.Value.Equal)) {
		t.Fatal("Build is not deterministic")
	}
}

// Build counts the values before it writes them (the Values map is made
// once, for exactly that many): every kind of action and operand counts
// right, names as operands count none, and an expression without values
// has a nil Values map.
func TestBuildCountsValues(t *testing.T) {
	u := store.Update{}.
		Set("a", store.Name("b")).
		Set("c", store.Int(1)).
		SetIfNotExistsPlus("d", store.Int(0), store.Int(2)).
		Remove("e").
		Add("f", store.Int(3))
	c := store.And(
		store.Name("g").Between(store.Name("h"), store.Int(4)),
		store.Not(store.Or(store.Name("i").NotExists(), store.Name("j").GreaterThan(store.Name("k")))),
		store.Name("l").BeginsWith("x"),
	)
	e, err := store.Build(u, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Values) != 6 || e.Values[":v5"] != store.Str("x") || e.Values[":v3"] != store.Int(3) {
		t.Errorf("Values = %v, want :v0 to :v5 with :v3 = 3 and :v5 = \"x\"", e.Values)
	}
	e, err = store.Build(store.Update{}.Remove("a").Set("b", store.Name("c")), store.Name("d").Equal(store.Name("e")))
	if err != nil || e.Values != nil || len(e.Names) != 5 {
		t.Errorf("no values: got %+v, %v; want nil Values and 5 names", e, err)
	}
	// An invalid value counts none and gets no placeholder: an error, not
	// a write into a map never made.
	if _, err := store.Build(store.Update{}, store.Name("a").Equal(store.Value{})); err == nil {
		t.Error("a zero Value as the only value: no error")
	}
}

func TestUpdateIsImmutable(t *testing.T) {
	base := store.Update{}.Add("a", store.Int(1))
	x := base.Add("b", store.Int(2))
	y := base.Add("c", store.Int(3))
	ex, _ := store.Build(x, store.Condition{})
	ey, _ := store.Build(y, store.Condition{})
	if ex.Update != "ADD #a0 :v0, #a1 :v1" || ey.Names["#a1"] != "c" || base.Len() != 1 {
		t.Fatalf("derived updates share state: %q %v", ex.Update, ey.Names)
	}
}

func TestBuildRejectsBadInput(t *testing.T) {
	if _, err := store.Build(store.Update{}.Add("", store.Int(1)), store.Condition{}); !errors.Is(err, store.ErrValidation) {
		t.Fatalf("empty name: got %v", err)
	}
	if _, err := store.Build(store.Update{}.Add("a", store.Value{}), store.Condition{}); !errors.Is(err, store.ErrValidation) {
		t.Fatalf("zero Value: got %v", err)
	}
	if _, err := store.Build(store.Update{}, store.Name("").Exists()); !errors.Is(err, store.ErrValidation) {
		t.Fatalf("empty name in a condition: got %v", err)
	}
	if e, err := store.Build(store.Update{}, store.And()); err != nil || !e.IsZero() || e.Names != nil {
		t.Fatalf("empty build: %+v %v", e, err)
	}
}

func TestErrorsMatchSentinels(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error
	}{
		{&store.ConditionFailedError{}, store.ErrConditionFailed},
		{&store.ThrottledError{}, store.ErrThrottled},
		{&store.TransactionCanceledError{}, store.ErrTransactionCanceled},
		{&store.ValidationError{Message: "x"}, store.ErrValidation},
		{&store.UnavailableError{Op: "Update"}, store.ErrUnavailable},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%T does not match %v", c.err, c.want)
		}
	}
	tc := &store.TransactionCanceledError{Reasons: []store.CancellationReason{{Code: "ConditionalCheckFailed"}, {Code: "None"}}}
	if tc.Error() != "Transaction cancelled, please refer cancellation reasons for specific reasons [ConditionalCheckFailed, None]" {
		t.Errorf("message: %q", tc.Error())
	}
	if !store.OutcomeUnknown(&store.UnavailableError{OutcomeUnknown: true}) || store.OutcomeUnknown(errors.New("x")) {
		t.Error("OutcomeUnknown")
	}
}

// Build allocates a fixed handful of objects whatever the expression's
// size: the text (one string for both expressions), the two maps and the
// builder's lists, with no string per placeholder and no boxed operand.
func TestBuildAllocations(t *testing.T) {
	u := store.Update{}
	var cs []store.Condition
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		u = u.Add("b_"+n+"_tk", store.Int(-1000)).Set("b_"+n+"_fl", store.Int(1700))
		cs = append(cs, store.Or(store.Name("b_"+n+"_tk").GreaterThanEqual(store.Int(1000)),
			store.And(store.Name("b_"+n+"_fh").LessThanEqual(store.Int(5)), store.Name("gen").NotExists())))
	}
	c := store.And(cs...)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := store.Build(u, c); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 16 { // 11 today; a string per placeholder or a boxed operand would add dozens
		t.Fatalf("Build allocates %v objects for 12 actions and 18 comparisons, want at most 16", allocs)
	}
}
