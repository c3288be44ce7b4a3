package memsim_test

// Tests named after the items of memsim's checklist of DynamoDB behaviours
// (docs/memsim.md). Items 1-11 exercise the expression engine through the
// store API.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/schema"
	"github.com/shardlimit/limiter/store/memsim"
	"github.com/shardlimit/limiter/store/storetest"
)

// holds reports whether cond holds for the item at k, through a one-action
// transaction with a ConditionCheck (which changes nothing).
func holds(t *testing.T, s *memsim.Store, k store.Key, cond store.Expr) bool {
	t.Helper()
	_, err := s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
		{Check: &store.CheckInput{Key: k, Expr: cond}},
	}})
	if err == nil {
		return true
	}
	var tc *store.TransactionCanceledError
	if errors.As(err, &tc) && tc.Reasons[0].Code == store.ReasonConditionalCheckFailed {
		return false
	}
	t.Fatalf("condition %q: %v", cond.Condition, err)
	return false
}

func TestChecklist01_UpdateUpsertCreatesItem(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	out := mustUpdate(t, s, store.UpdateInput{Key: k,
		Expr:   storetest.Build(t, store.Update{}.Add("n", store.Int(5)).Set("s", store.Str("x")), store.Condition{}),
		Return: store.ReturnAllNew})
	want := item(k, "n", 5, "s", "x")
	wantItem(t, out.Attributes, want)
	wantItem(t, s.Peek(k), want)
}

func TestChecklist02_AddStartsFromZero(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	add := func(d int64) {
		mustUpdate(t, s, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(d)), store.Condition{})})
	}
	add(7) // missing item
	wantItem(t, s.Peek(k), item(k, "n", 7))
	add(-10) // negative decrements
	wantItem(t, s.Peek(k), item(k, "n", -3))
	mustUpdate(t, s, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("m", store.Int(-2)), store.Condition{})}) // missing attribute
	wantItem(t, s.Peek(k), item(k, "n", -3, "m", -2))
}

func TestChecklist03_AddOnNonNumberIsTypeError(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	mustPut(t, s, item(k, "s", "text"))
	before := s.Items()
	out, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("s", store.Int(1)), store.Condition{})})
	wantValidation(t, err, "An operand in the update expression has an incorrect data type")
	if out.Consumed != (store.Capacity{}) {
		t.Fatalf("validation error consumed %+v", out.Consumed)
	}
	unchanged(t, s, before)
}

func TestChecklist04_SetArithmeticOnMissingAttribute(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	e := store.Expr{Update: "SET #n = #n + :d", Names: map[string]string{"#n": "n"}, Values: map[string]store.Value{":d": store.Int(1)}}
	_, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: e}) // missing item
	wantValidation(t, err, "The provided expression refers to an attribute that does not exist in the item")
	mustPut(t, s, item(k, "m", 1))
	_, err = s.Update(ctx, store.UpdateInput{Key: k, Expr: e}) // missing attribute
	wantValidation(t, err, "The provided expression refers to an attribute that does not exist in the item")
	wantItem(t, s.Peek(k), item(k, "m", 1))
}

func TestChecklist05_IfNotExistsPlus(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	e := storetest.Build(t, store.Update{}.SetIfNotExistsPlus("n", store.Int(100), store.Int(5)), store.Condition{})
	mustUpdate(t, s, store.UpdateInput{Key: k, Expr: e}) // missing item
	wantItem(t, s.Peek(k), item(k, "n", 105))
	mustUpdate(t, s, store.UpdateInput{Key: k, Expr: e})
	wantItem(t, s.Peek(k), item(k, "n", 110))
	k2 := key("e2")
	mustPut(t, s, item(k2, "other", 1))
	mustUpdate(t, s, store.UpdateInput{Key: k2, Expr: e}) // missing attribute
	wantItem(t, s.Peek(k2), item(k2, "other", 1, "n", 105))
}

func TestChecklist06_SetReadsPreUpdateImage(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	mustPut(t, s, item(k, "a", 7))
	_, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: store.Expr{
		Update: "SET #x = :v, #y = #x",
		Names:  map[string]string{"#x": "x", "#y": "y"},
		Values: map[string]store.Value{":v": store.Int(1)},
	}})
	wantValidation(t, err, "The provided expression refers to an attribute that does not exist in the item")
	wantItem(t, s.Peek(k), item(k, "a", 7))
	mustUpdate(t, s, store.UpdateInput{Key: k, Expr: store.Expr{
		Update: "REMOVE #a SET #b = #a",
		Names:  map[string]string{"#a": "a", "#b": "b"},
	}})
	wantItem(t, s.Peek(k), item(k, "b", 7))
}

func TestChecklist07_RepeatedClause(t *testing.T) {
	s := memsim.New()
	_, err := s.Update(ctx, store.UpdateInput{Key: key("e1"), Expr: store.Expr{
		Update: "SET #a = :v SET #b = :w",
		Names:  map[string]string{"#a": "a", "#b": "b"},
		Values: map[string]store.Value{":v": store.Int(1), ":w": store.Int(2)},
	}})
	wantValidation(t, err, `The "SET" section can only be used once in an update expression;`)
	if s.Len() != 0 {
		t.Fatal("a rejected update created an item")
	}
}

func TestChecklist08_OverlappingPaths(t *testing.T) {
	const msg = "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a]"
	s := memsim.New()
	// Checked before the item is looked up: the item does not exist.
	out, err := s.Update(ctx, store.UpdateInput{Key: key("e1"),
		Expr: storetest.Build(t, store.Update{}.Set("a", store.Int(1)).Add("a", store.Int(2)), store.Condition{})})
	wantValidation(t, err, msg)
	if out.Consumed != (store.Capacity{}) || s.Len() != 0 {
		t.Fatal("a rejected update consumed capacity or created an item")
	}
	// Two placeholders naming one attribute.
	_, err = s.Update(ctx, store.UpdateInput{Key: key("e1"), Expr: store.Expr{
		Update: "SET #a1 = :v, #a2 = :w",
		Names:  map[string]string{"#a1": "a", "#a2": "a"},
		Values: map[string]store.Value{":v": store.Int(1), ":w": store.Int(2)},
	}})
	wantValidation(t, err, msg)
	// Ancestor and descendant.
	_, err = s.Update(ctx, store.UpdateInput{Key: key("e1"), Expr: store.Expr{
		Update: "SET #a = :v, #a.#b = :w",
		Names:  map[string]string{"#a": "a", "#b": "b"},
		Values: map[string]store.Value{":v": store.Int(1), ":w": store.Int(2)},
	}})
	wantValidation(t, err, "Two document paths overlap with each other", "path one: [a], path two: [a, b]")
}

func TestChecklist09_ConflictingPaths(t *testing.T) {
	s := memsim.New()
	_, err := s.Update(ctx, store.UpdateInput{Key: key("e1"), Expr: store.Expr{
		Update: "SET #a.#b = :v, #a[1] = :w",
		Names:  map[string]string{"#a": "a", "#b": "b"},
		Values: map[string]store.Value{":v": store.Int(1), ":w": store.Int(2)},
	}})
	wantValidation(t, err, "Two document paths conflict with each other; must remove or rewrite one of these paths")
	if s.Len() != 0 {
		t.Fatal("a rejected update created an item")
	}
}

func TestChecklist10_KeyAttributeUpdate(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	mustPut(t, s, item(k, "n", 1))
	for _, u := range []store.Update{
		store.Update{}.Set(store.AttrPK, store.Str("other")),
		store.Update{}.Remove(store.AttrSK),
		store.Update{}.Add(store.AttrSK, store.Int(1)),
		store.Update{}.SetIfNotExists(store.AttrPK, store.Str("x")),
	} {
		_, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: storetest.Build(t, u, store.Condition{})})
		wantValidation(t, err, "part of the key")
	}
	wantItem(t, s.Peek(k), item(k, "n", 1))
}

func TestChecklist11_UnusedNamesAndValues(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	_, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: store.Expr{
		Update: "SET #a = :v",
		Names:  map[string]string{"#a": "a"},
		Values: map[string]store.Value{":v": store.Int(1), ":w": store.Int(2)},
	}})
	wantValidation(t, err, "Value provided in ExpressionAttributeValues unused in expressions: keys: {:w}")
	_, err = s.Update(ctx, store.UpdateInput{Key: k, Expr: store.Expr{
		Update: "SET #a = :v",
		Names:  map[string]string{"#a": "a", "#b": "b"},
		Values: map[string]store.Value{":v": store.Int(1)},
	}})
	wantValidation(t, err, "Value provided in ExpressionAttributeNames unused in expressions: keys: {#b}")
	_, err = s.Update(ctx, store.UpdateInput{Key: k, Expr: store.Expr{
		Update: "REMOVE #a",
		Names:  map[string]string{"#a": "a"},
		Values: map[string]store.Value{},
	}})
	wantValidation(t, err, "ExpressionAttributeValues must not be empty")
	// Names or values without any expression.
	_, err = s.Update(ctx, store.UpdateInput{Key: k, Expr: store.Expr{Names: map[string]string{"#a": "a"}}})
	wantValidation(t, err, "ExpressionAttributeNames can only be specified when using expressions")
	_, err = s.Put(ctx, store.PutInput{Item: item(k), Expr: store.Expr{Values: map[string]store.Value{":v": store.Int(1)}}})
	wantValidation(t, err, "ExpressionAttributeValues can only be specified when using expressions")
	if s.Len() != 0 {
		t.Fatal("a rejected request created an item")
	}
}

func TestChecklist15_ConditionOnPreUpdateItem(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	mustPut(t, s, item(k, "n", 5))
	e := storetest.Build(t, store.Update{}.Add("n", store.Int(10)), store.Name("n").Equal(store.Int(5)))
	mustUpdate(t, s, store.UpdateInput{Key: k, Expr: e})
	wantItem(t, s.Peek(k), item(k, "n", 15))
	before := s.Items()
	out, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: e})
	cf := wantCondFailed(t, err)
	if cf.Error() != "The conditional request failed" {
		t.Fatalf("message %q", cf.Error())
	}
	if out.Consumed.WriteUnits != 1 {
		t.Fatalf("a failed condition consumed %v WCU, want 1", out.Consumed.WriteUnits)
	}
	unchanged(t, s, before)
	if n := s.StreamLen(); n != 2 {
		t.Fatalf("stream has %d records, want 2 (a failed condition emits none)", n)
	}
}

func TestChecklist16_MissingAttributeComparisons(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	mustPut(t, s, item(k, "n", 1))
	x, y := store.Name("x"), store.Name("y")
	one := store.Int(1)
	for _, tc := range []struct {
		name string
		c    store.Condition
		want bool
	}{
		{"x = 1", x.Equal(one), false},
		{"x < 1", x.LessThan(one), false},
		{"x <= 1", x.LessThanEqual(one), false},
		{"x > 1", x.GreaterThan(one), false},
		{"x >= 1", x.GreaterThanEqual(one), false},
		{"x BETWEEN 0 AND 2", x.Between(store.Int(0), store.Int(2)), false},
		{"x <> 1", x.NotEqual(one), true},
		{"x = y (both missing)", x.Equal(y), false},
		{"x <> y (both missing)", x.NotEqual(y), true},
		{"x < y (both missing)", x.LessThan(y), false},
		{"n = 1", store.Name("n").Equal(one), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holds(t, s, k, storetest.Build(t, store.Update{}, tc.c)); got != tc.want {
				t.Fatalf("%s = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

func TestChecklist17_CrossTypeComparisons(t *testing.T) {
	// An unorderable :value (a list) cannot be expressed: store values are
	// strings and int64 numbers, both orderable.
	s := memsim.New()
	k := key("e1")
	mustPut(t, s, item(k, "s", "1", "n", 1))
	sn := store.Name("s")
	for _, tc := range []struct {
		name string
		c    store.Condition
		want bool
	}{
		{`s = 1`, sn.Equal(store.Int(1)), false},
		{`s <> 1`, sn.NotEqual(store.Int(1)), true},
		{`s < 2`, sn.LessThan(store.Int(2)), false},
		{`s >= 0`, sn.GreaterThanEqual(store.Int(0)), false},
		{`s BETWEEN 0 AND 9`, sn.Between(store.Int(0), store.Int(9)), false},
		{`n = "1"`, store.Name("n").Equal(store.Str("1")), false},
		{`n < s`, store.Name("n").LessThan(sn), false},
		{`s = "1"`, sn.Equal(store.Str("1")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holds(t, s, k, storetest.Build(t, store.Update{}, tc.c)); got != tc.want {
				t.Fatalf("%s = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

func TestChecklist18_OperatorPrecedence(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	mustPut(t, s, item(k, "a", 1, "b", 1, "c", 0))
	names := map[string]string{"#a": "a", "#b": "b", "#c": "c"}
	values := map[string]store.Value{":t": store.Int(1)}
	for _, tc := range []struct {
		cond string
		want bool
	}{
		{"#a = :t OR #b = :t AND #c = :t", true},    // a OR (b AND c)
		{"(#a = :t OR #b = :t) AND #c = :t", false}, // parentheses
		{"NOT #a = :t AND #c = :t", false},          // (NOT a) AND c
		{"NOT (#a = :t AND #c = :t)", true},
		{"#c = :t OR NOT #c = :t AND #a = :t", true}, // c OR ((NOT c) AND a)
	} {
		t.Run(tc.cond, func(t *testing.T) {
			used := map[string]string{}
			for ph, n := range names {
				if strings.Contains(tc.cond, ph) {
					used[ph] = n
				}
			}
			if got := holds(t, s, k, store.Expr{Condition: tc.cond, Names: used, Values: values}); got != tc.want {
				t.Fatalf("%s = %v, want %v", tc.cond, got, tc.want)
			}
		})
	}
}

func TestChecklist19_PutAttributeNotExists(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	in := store.PutInput{Item: item(k, "v", 1), Expr: storetest.Build(t, store.Update{}, store.Name(store.AttrPK).NotExists())}
	if _, err := s.Put(ctx, in); err != nil {
		t.Fatalf("first put: %v", err)
	}
	in.Item = item(k, "v", 2)
	out, err := s.Put(ctx, in)
	wantCondFailed(t, err)
	if out.Consumed.WriteUnits != 1 {
		t.Fatalf("failed put consumed %v", out.Consumed)
	}
	wantItem(t, s.Peek(k), item(k, "v", 1))
}

func TestChecklist20_ReturnValues(t *testing.T) {
	u := store.Update{}.Add("a", store.Int(1)).Set("c", store.Int(3))
	k := key("e1")
	old := item(k, "a", 1, "b", 2)
	nw := item(k, "a", 2, "b", 2, "c", 3)
	for _, tc := range []struct {
		ret            store.ReturnValue
		exists, absent store.Item
	}{
		{store.ReturnNone, nil, nil},
		{store.ReturnAllOld, old, nil},
		{store.ReturnUpdatedOld, store.Item{"a": store.Int(1)}, nil},
		{store.ReturnAllNew, nw, item(k, "a", 1, "c", 3)},
		{store.ReturnUpdatedNew, store.Item{"a": store.Int(2), "c": store.Int(3)}, store.Item{"a": store.Int(1), "c": store.Int(3)}},
	} {
		t.Run(tc.ret.String(), func(t *testing.T) {
			s := memsim.New()
			mustPut(t, s, old)
			out := mustUpdate(t, s, store.UpdateInput{Key: k, Expr: storetest.Build(t, u, store.Condition{}), Return: tc.ret})
			wantItem(t, out.Attributes, tc.exists)
			// Upsert: nothing old to return.
			out = mustUpdate(t, s, store.UpdateInput{Key: key("new"), Expr: storetest.Build(t, u, store.Condition{}), Return: tc.ret})
			if tc.absent != nil && tc.ret == store.ReturnAllNew {
				tc.absent = item(key("new"), "a", 1, "c", 3)
			}
			wantItem(t, out.Attributes, tc.absent)
		})
	}
	t.Run("put and delete", func(t *testing.T) {
		s := memsim.New()
		mustPut(t, s, old)
		out, err := s.Put(ctx, store.PutInput{Item: nw, Return: store.ReturnAllOld})
		if err != nil {
			t.Fatal(err)
		}
		wantItem(t, out.Attributes, old)
		for _, r := range []store.ReturnValue{store.ReturnUpdatedOld, store.ReturnAllNew, store.ReturnUpdatedNew} {
			_, err := s.Put(ctx, store.PutInput{Item: nw, Return: r})
			wantValidation(t, err, "Return values set to invalid value")
			_, err = s.Delete(ctx, store.DeleteInput{Key: k, Return: r})
			wantValidation(t, err, "Return values set to invalid value")
		}
		_, err = s.Update(ctx, store.UpdateInput{Key: k, Expr: storetest.Build(t, u, store.Condition{}), Return: 9})
		wantValidation(t, err, "at 'returnValues' failed to satisfy constraint")
		out, err = s.Delete(ctx, store.DeleteInput{Key: k, Return: store.ReturnAllOld})
		if err != nil {
			t.Fatal(err)
		}
		wantItem(t, out.Attributes, nw)
		out, err = s.Delete(ctx, store.DeleteInput{Key: k, Return: store.ReturnAllOld})
		if err != nil || out.Attributes != nil {
			t.Fatalf("delete of a missing item: %v, %v", out.Attributes, err)
		}
	})
	t.Run("returned items are copies", func(t *testing.T) {
		s := memsim.New()
		out := mustUpdate(t, s, store.UpdateInput{Key: k, Expr: storetest.Build(t, u, store.Condition{}), Return: store.ReturnAllNew})
		out.Attributes["a"] = store.Int(99)
		g, _ := s.Get(ctx, store.GetInput{Key: k})
		g.Item["c"] = store.Int(99)
		wantItem(t, s.Peek(k), item(k, "a", 1, "c", 3))
	})
}

func TestChecklist21_ReturnOldOnConditionFailure(t *testing.T) {
	s := memsim.New()
	k := key("e1")
	cond := storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Name("n").GreaterThan(store.Int(100)))
	// Absent item: nothing old.
	_, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: cond, ReturnOldOnConditionFailure: true})
	if cf := wantCondFailed(t, err); cf.Item != nil {
		t.Fatalf("Item = %v for a missing item, want nil", cf.Item)
	}
	mustPut(t, s, item(k, "n", 5))
	_, err = s.Update(ctx, store.UpdateInput{Key: k, Expr: cond, ReturnOldOnConditionFailure: true})
	cf := wantCondFailed(t, err)
	wantItem(t, cf.Item, item(k, "n", 5))
	cf.Item["n"] = store.Int(0) // the caller's copy
	wantItem(t, s.Peek(k), item(k, "n", 5))
	// Not asked: no item.
	_, err = s.Update(ctx, store.UpdateInput{Key: k, Expr: cond})
	if cf := wantCondFailed(t, err); cf.Item != nil {
		t.Fatal("Item returned although not asked for")
	}
	// Put and Delete too.
	notExists := storetest.Build(t, store.Update{}, store.Name(store.AttrPK).NotExists())
	_, err = s.Put(ctx, store.PutInput{Item: item(k), Expr: notExists, ReturnOldOnConditionFailure: true})
	wantItem(t, wantCondFailed(t, err).Item, item(k, "n", 5))
	_, err = s.Delete(ctx, store.DeleteInput{Key: k, Expr: notExists, ReturnOldOnConditionFailure: true})
	wantItem(t, wantCondFailed(t, err).Item, item(k, "n", 5))
}

// pad returns an item of exactly size bytes (size >= 64).
func pad(k store.Key, size int) store.Item {
	it := item(k)
	base := memsim.ItemSize(it) + len("pad")
	it["pad"] = store.Str(strings.Repeat("x", size-base))
	return it
}

func TestChecklist22_WriteCapacity(t *testing.T) {
	s := memsim.New(memsim.WithSchema(schema.Schema{PartitionKey: store.AttrPK, SortKey: store.AttrSK}))
	k := key("e1")
	wcu := func(out store.WriteOutput, err error, want float64) {
		t.Helper()
		if err != nil && !errors.Is(err, store.ErrConditionFailed) {
			t.Fatal(err)
		}
		if out.Consumed.WriteUnits != want || out.Consumed.ReadUnits != 0 {
			t.Fatalf("consumed %+v, want %v WCU", out.Consumed, want)
		}
	}
	// Absent item, failed condition: 1.
	notExists := storetest.Build(t, store.Update{}, store.Name(store.AttrPK).Exists())
	out, err := s.Put(ctx, store.PutInput{Item: pad(k, 1500), Expr: notExists})
	wcu(out, err, 1)
	out, err = s.Put(ctx, store.PutInput{Item: pad(k, 1024)})
	wcu(out, err, 1)
	out, err = s.Put(ctx, store.PutInput{Item: pad(k, 1025)}) // max(1024, 1025)
	wcu(out, err, 2)
	out, err = s.Put(ctx, store.PutInput{Item: pad(k, 500), Return: store.ReturnAllOld}) // before 1025: ReturnValues are free
	wcu(out, err, 2)
	out, err = s.Put(ctx, store.PutInput{Item: pad(k, 3000)})
	wcu(out, err, 3)
	// Existing item, failed condition: its size.
	out, err = s.Put(ctx, store.PutInput{Item: pad(k, 100), Expr: storetest.Build(t, store.Update{}, store.Name(store.AttrPK).NotExists())})
	wcu(out, err, 3)
	// Update: the larger of before and after.
	out, err = s.Update(ctx, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Remove("pad"), store.Condition{}), Return: store.ReturnAllNew})
	wcu(out, err, 3)
	out, err = s.Update(ctx, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
	wcu(out, err, 1)
	// Delete: the deleted item; a missing item 1.
	mustPut(t, s, pad(k, 2100))
	out, err = s.Delete(ctx, store.DeleteInput{Key: k})
	wcu(out, err, 3)
	out, err = s.Delete(ctx, store.DeleteInput{Key: k})
	wcu(out, err, 1)
	tot := s.Totals()
	if tot.Consumed.WriteUnits != 1+1+2+2+3+3+3+1+3+3+1 {
		t.Fatalf("totals %+v", tot.Consumed)
	}
}

func TestChecklist23_ItemSize(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want int
	}{
		{0, 1}, {1, 2}, {9, 2}, {10, 2}, {99, 2}, {100, 2}, {120, 3}, {1000, 2}, {1001, 3},
		{12345, 4}, {123456, 4}, {1234567, 5}, {-1, 3}, {-100, 3}, {-12345, 5},
		{9223372036854775807, 11}, {-9223372036854775808, 12}, {1_700_000_000_000, 3},
	} {
		if got := memsim.NumberSize(tc.n); got != tc.want {
			t.Errorf("NumberSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	it := store.Item{"PK": store.Str("héllo"), "n": store.Int(12345)}
	if got, want := memsim.ItemSize(it), 2+6+1+4; got != want {
		t.Fatalf("ItemSize = %d, want %d", got, want)
	}

	s := memsim.New()
	k := key("e1")
	_, err := s.Put(ctx, store.PutInput{Item: pad(k, memsim.MaxItemSize+1)})
	wantValidation(t, err, "Item size has exceeded the maximum allowed size")
	mustPut(t, s, pad(k, memsim.MaxItemSize)) // exactly 400 KB is allowed
	before := s.Items()
	out, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
	wantValidation(t, err, "Item size to update has exceeded the maximum allowed size")
	if out.Consumed != (store.Capacity{}) {
		t.Fatalf("consumed %+v", out.Consumed)
	}
	unchanged(t, s, before)
}

func TestChecklist24_ReadCapacity(t *testing.T) {
	s := memsim.New()
	small, big := key("small"), key("big")
	mustPut(t, s, pad(small, 1500))
	mustPut(t, s, pad(big, 6500))
	for _, tc := range []struct {
		k          store.Key
		consistent bool
		want       float64
	}{
		{key("missing"), true, 1}, {key("missing"), false, 0.5},
		{small, true, 1}, {small, false, 0.5},
		{big, true, 2}, {big, false, 1},
	} {
		out, err := s.Get(ctx, store.GetInput{Key: tc.k, ConsistentRead: tc.consistent})
		if err != nil || out.Consumed != (store.Capacity{ReadUnits: tc.want}) {
			t.Fatalf("Get %v consistent=%v: %+v, %v; want %v RCU", tc.k, tc.consistent, out.Consumed, err, tc.want)
		}
	}
	// BatchGet rounds each item separately: 1.5 KB + 6.5 KB = 4 KB + 8 KB.
	out, err := s.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{small, big, key("missing")}, ConsistentRead: true})
	if err != nil || out.Consumed.ReadUnits != 1+2+1 {
		t.Fatalf("BatchGet: %+v, %v", out.Consumed, err)
	}
	out, _ = s.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{small, big}})
	if out.Consumed.ReadUnits != 1.5 {
		t.Fatalf("eventually consistent BatchGet consumed %v, want 1.5", out.Consumed.ReadUnits)
	}
}

func putAction(it store.Item) store.Write {
	return store.Write{Put: &store.PutInput{Item: it}}
}

func TestChecklist25_TransactionAllOrNothing(t *testing.T) {
	s := memsim.New()
	a, b := key("a"), key("b")
	mustPut(t, s, item(b, "n", 1))
	before := s.Items()
	_, err := s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
		putAction(item(a, "n", 1)),
		{Update: &store.UpdateInput{Key: b, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Name("n").Equal(store.Int(2)))}},
	}})
	if !errors.Is(err, store.ErrTransactionCanceled) {
		t.Fatalf("err = %v", err)
	}
	unchanged(t, s, before)

	actions := make([]store.Write, 101)
	for i := range actions {
		actions[i] = putAction(item(key("k" + strings.Repeat("x", i))))
	}
	_, err = s.TransactWrite(ctx, store.TransactWriteInput{Actions: actions})
	wantValidation(t, err, "1 validation error detected at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100")
	if _, err := s.TransactWrite(ctx, store.TransactWriteInput{Actions: actions[:100]}); err != nil {
		t.Fatalf("100 actions: %v", err)
	}
	_, err = s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
		{Put: &store.PutInput{Item: item(a)}, Delete: &store.DeleteInput{Key: a}},
	}})
	wantValidation(t, err, "TransactItems can only contain one of Check, Put, Update or Delete")
	_, err = s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{{}}})
	wantValidation(t, err, "TransactItems can only contain one of Check, Put, Update or Delete")
	// More than 4 MB in all.
	big := make([]store.Write, 11)
	for i := range big {
		big[i] = putAction(pad(key("big"+strings.Repeat("x", i)), 390*1024))
	}
	_, err = s.TransactWrite(ctx, store.TransactWriteInput{Actions: big})
	wantValidation(t, err, "4 MB")
}

func TestChecklist26_TransactionSameItemTwice(t *testing.T) {
	s := memsim.New()
	a := key("a")
	_, err := s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
		putAction(item(a, "n", 1)),
		putAction(item(key("b"))),
		{Delete: &store.DeleteInput{Key: a}},
	}})
	wantValidation(t, err, "Transaction request cannot include multiple operations on one item")
	var tc *store.TransactionCanceledError
	if errors.As(err, &tc) {
		t.Fatal("same item twice must be a ValidationError, not a cancellation")
	}
	if s.Len() != 0 {
		t.Fatal("rejected transaction wrote")
	}
}

func TestChecklist27_TransactionCancellationReasons(t *testing.T) {
	s := memsim.New()
	a, b, c := key("a"), key("b"), key("c")
	mustPut(t, s, item(b, "n", 5))
	mustPut(t, s, item(c, "n", 5))
	gt := func(v int64) store.Expr {
		return storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Name("n").GreaterThan(store.Int(v)))
	}
	out, err := s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
		putAction(item(a)),
		{Update: &store.UpdateInput{Key: b, Expr: gt(10), ReturnOldOnConditionFailure: true}},
		{Update: &store.UpdateInput{Key: c, Expr: gt(1)}},
		{Check: &store.CheckInput{Key: key("missing"), Expr: storetest.Build(t, store.Update{}, store.Name(store.AttrPK).Exists()), ReturnOldOnConditionFailure: true}},
	}})
	var tc *store.TransactionCanceledError
	if !errors.As(err, &tc) {
		t.Fatalf("err = %v", err)
	}
	codes := []string{store.ReasonNone, store.ReasonConditionalCheckFailed, store.ReasonNone, store.ReasonConditionalCheckFailed}
	if len(tc.Reasons) != len(codes) {
		t.Fatalf("%d reasons", len(tc.Reasons))
	}
	for i, r := range tc.Reasons {
		if r.Code != codes[i] {
			t.Fatalf("reason %d = %q, want %q", i, r.Code, codes[i])
		}
	}
	wantItem(t, tc.Reasons[1].Item, item(b, "n", 5))
	if tc.Reasons[3].Item != nil || tc.Reasons[2].Item != nil {
		t.Fatal("unexpected reason items")
	}
	// Cancelled by conditions: the prepare phase is billed, 1 WCU per item.
	if out.Consumed.WriteUnits != 4 {
		t.Fatalf("cancelled transaction consumed %+v", out.Consumed)
	}
}

func TestChecklist28_TransactionMessage(t *testing.T) {
	s := memsim.New()
	_, err := s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
		{Check: &store.CheckInput{Key: key("a"), Expr: storetest.Build(t, store.Update{}, store.Name(store.AttrPK).Exists())}},
		putAction(item(key("b"))),
	}})
	const want = "Transaction cancelled, please refer cancellation reasons for specific reasons [ConditionalCheckFailed, None]"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestChecklist29_TransactionCapacity(t *testing.T) {
	s := memsim.New(memsim.WithSchema(schema.Schema{PartitionKey: store.AttrPK, SortKey: store.AttrSK}))
	out, err := s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
		putAction(pad(key("a"), 500)), putAction(pad(key("b"), 500)), putAction(pad(key("c"), 1500)),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Consumed != (store.Capacity{WriteUnits: 2 + 2 + 4}) {
		t.Fatalf("consumed %+v, want 8 WCU", out.Consumed)
	}
	out, err = s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
		{Check: &store.CheckInput{Key: key("c"), Expr: storetest.Build(t, store.Update{}, store.Name(store.AttrPK).Exists())}},
		{Update: &store.UpdateInput{Key: key("a"), Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})}},
	}})
	if err != nil || out.Consumed.WriteUnits != 4+2 {
		t.Fatalf("check+update: %+v, %v", out.Consumed, err)
	}
}

func TestChecklist30_ClientTokenIdempotency(t *testing.T) {
	clk := memsim.NewManualClock(memsim.Epoch())
	s := memsim.New(memsim.WithClock(clk))
	k := key("a")
	in := store.TransactWriteInput{ClientToken: "tok-1", Actions: []store.Write{
		{Update: &store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})}},
	}}
	if _, err := s.TransactWrite(ctx, in); err != nil {
		t.Fatal(err)
	}
	clk.Add(9 * time.Minute)
	out, err := s.TransactWrite(ctx, in)
	if err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if out.Consumed.WriteUnits != 0 || out.Consumed.ReadUnits == 0 {
		t.Fatalf("repeat consumed %+v, want reads only", out.Consumed)
	}
	wantItem(t, s.Peek(k), item(k, "n", 1))
	other := in
	other.Actions = []store.Write{
		{Update: &store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(2)), store.Condition{})}},
	}
	_, err = s.TransactWrite(ctx, other)
	wantValidation(t, err, "IdempotentParameterMismatch")
	clk.Add(time.Minute) // 10 minutes after the first success: a new request
	if _, err := s.TransactWrite(ctx, in); err != nil {
		t.Fatal(err)
	}
	wantItem(t, s.Peek(k), item(k, "n", 2))
	if got := s.StreamLen(); got != 2 {
		t.Fatalf("stream has %d records, want 2", got)
	}
}

func TestChecklist31_TransactionConflict(t *testing.T) {
	s := memsim.New(memsim.WithFaults(memsim.Always(memsim.FaultConflict)))
	k := key("a")
	_, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
	if !errors.Is(err, store.ErrTransactionConflict) || !strings.Contains(err.Error(), k.String()) {
		t.Fatalf("err = %v", err)
	}
	_, err = s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{putAction(item(k)), putAction(item(key("b")))}})
	var tc *store.TransactionCanceledError
	if !errors.As(err, &tc) || tc.Reasons[0].Code != store.ReasonTransactionConflict || len(tc.Reasons) != 2 {
		t.Fatalf("err = %v", err)
	}
	if _, err := s.Get(ctx, store.GetInput{Key: k}); err != nil {
		t.Fatalf("reads do not conflict: %v", err)
	}
	if s.Len() != 0 {
		t.Fatal("conflicting writes applied")
	}
}

func TestChecklist32_BatchGetLimits(t *testing.T) {
	s := memsim.New()
	keys := make([]store.Key, 101)
	for i := range keys {
		keys[i] = key("k" + strings.Repeat("x", i))
	}
	_, err := s.BatchGet(ctx, store.BatchGetInput{Keys: keys})
	wantValidation(t, err, "Too many items requested for the BatchGetItem call.")
	_, err = s.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{key("a"), key("b"), key("a")}})
	wantValidation(t, err, "Provided list of item keys contains duplicates")
	dup := append(keys[:50:50], keys[10])
	_, err = s.BatchGet(ctx, store.BatchGetInput{Keys: dup})
	wantValidation(t, err, "Provided list of item keys contains duplicates")
	if tot := s.Totals(); tot.Consumed != (store.Capacity{}) {
		t.Fatalf("validation errors consumed %+v", tot.Consumed)
	}
	mustPut(t, s, item(key("b"), "n", 2))
	mustPut(t, s, item(key("d"), "n", 4))
	out, err := s.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{key("d"), key("a"), key("b")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 3 || out.Items[1] != nil {
		t.Fatalf("items %v", out.Items)
	}
	wantItem(t, out.Items[0], item(key("d"), "n", 4))
	wantItem(t, out.Items[2], item(key("b"), "n", 2))
	if _, err := s.BatchGet(ctx, store.BatchGetInput{Keys: keys[:100]}); err != nil {
		t.Fatalf("100 keys: %v", err)
	}
}

func TestChecklist33_PartitionCeiling(t *testing.T) {
	clk := memsim.NewManualClock(memsim.Epoch())
	s := memsim.New(memsim.WithClock(clk))
	hot := "hot"
	put := func(pk, sk string) error {
		_, err := s.Put(ctx, store.PutInput{Item: item(store.Key{PK: pk, SK: sk})})
		return err
	}
	for i := range 1000 {
		if err := put(hot, "s"+strings.Repeat("x", i%7)+string(rune('a'+i%26))); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	before := s.Items()
	err := put(hot, "last")
	var te *store.ThrottledError
	if !errors.As(err, &te) || !errors.Is(err, store.ErrThrottled) {
		t.Fatalf("write 1001: %v, want throttled", err)
	}
	if te.Code != store.ThrottleProvisionedThroughputExceeded || te.Reason != "TableWriteKeyRangeThroughputExceeded" || te.Key.PK != hot {
		t.Fatalf("throttle %+v", te)
	}
	unchanged(t, s, before)
	if err := put("cold", "x"); err != nil {
		t.Fatalf("other partition: %v", err)
	}
	clk.Add(time.Millisecond) // refills exactly 1 WCU
	if err := put(hot, "refilled"); err != nil {
		t.Fatalf("after 1 ms: %v", err)
	}
	if err := put(hot, "again"); !errors.Is(err, store.ErrThrottled) {
		t.Fatalf("second write after 1 ms: %v", err)
	}
	clk.Add(10 * time.Second) // capacity is one second's worth, no more
	for i := range 1000 {
		if err := put(hot, "b"+string(rune('a'+i%26))+strings.Repeat("y", i%40)); err != nil {
			t.Fatalf("refilled write %d: %v", i, err)
		}
	}
	if err := put(hot, "over"); !errors.Is(err, store.ErrThrottled) {
		t.Fatalf("burst beyond one second: %v", err)
	}
	ps := s.Partition(hot)
	if ps.Throttles != 3 || ps.Consumed.WriteUnits != 2001 || ps.WriteAvailable != 0 {
		t.Fatalf("partition stats %+v", ps)
	}
	tot := s.Totals()
	if tot.Throttles != 3 || tot.Ops[memsim.OpPut].Throttles != 3 {
		t.Fatalf("totals %+v", tot)
	}
	// Reads: 3000 RCU per second; an eventually consistent read of a small
	// item costs 0.5.
	for i := range 6000 {
		if _, err := s.Get(ctx, store.GetInput{Key: store.Key{PK: "r", SK: "x"}}); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	_, err = s.Get(ctx, store.GetInput{Key: store.Key{PK: "r", SK: "x"}})
	if !errors.As(err, &te) || te.Reason != "TableReadKeyRangeThroughputExceeded" {
		t.Fatalf("read 6001: %v", err)
	}
}

func TestChecklist36_ThrottleCodeAndReason(t *testing.T) {
	for _, code := range []string{store.ThrottleProvisionedThroughputExceeded, store.ThrottleThrottling, store.ThrottleRequestLimitExceeded} {
		s := memsim.New(memsim.WithThrottleCode(code), memsim.WithPartitionLimits(1, 1), memsim.WithClock(memsim.NewManualClock(memsim.Epoch())))
		mustPut(t, s, item(key("a")))
		_, err := s.Put(ctx, store.PutInput{Item: item(key("a"))})
		var te *store.ThrottledError
		if !errors.As(err, &te) || te.Code != code || te.Reason != "TableWriteKeyRangeThroughputExceeded" {
			t.Fatalf("%s: %v", code, err)
		}
		_, err = s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{putAction(item(key("a"))), putAction(item(key("b")))}})
		var tc *store.TransactionCanceledError
		wantCode := store.ReasonThrottlingError
		if code == store.ThrottleProvisionedThroughputExceeded {
			wantCode = store.ReasonProvisionedThroughputExceeded
		}
		if !errors.As(err, &tc) || tc.Reasons[0].Code != wantCode || tc.Reasons[1].Code != store.ReasonNone {
			t.Fatalf("%s: transaction: %v", code, err)
		}
	}
}

func TestChecklist46_StreamRecords(t *testing.T) {
	clk := memsim.NewManualClock(memsim.Epoch())
	s := memsim.New(memsim.WithClock(clk))
	a, b, c := key("a"), key("b"), key("c")
	mustPut(t, s, item(a, "n", 1))
	clk.Add(time.Second)
	mustUpdate(t, s, store.UpdateInput{Key: a, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
	if _, err := s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{
		putAction(item(b)),
		{Check: &store.CheckInput{Key: c, Expr: storetest.Build(t, store.Update{}, store.Name(store.AttrPK).NotExists())}},
		{Delete: &store.DeleteInput{Key: a, Expr: storetest.Build(t, store.Update{}, store.Name("n").Equal(store.Int(2)))}},
	}}); err != nil {
		t.Fatal(err)
	}
	recs := s.Stream(0)
	t1 := memsim.Epoch().Add(time.Second)
	want := []memsim.Record{
		{Seq: 1, Event: memsim.EventInsert, Keys: a, New: item(a, "n", 1), At: memsim.Epoch()},
		{Seq: 2, Event: memsim.EventModify, Keys: a, Old: item(a, "n", 1), New: item(a, "n", 2), At: t1},
		{Seq: 3, Event: memsim.EventInsert, Keys: b, New: item(b), At: t1},
		{Seq: 4, Event: memsim.EventRemove, Keys: a, Old: item(a, "n", 2), At: t1},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records: %+v", len(recs), recs)
	}
	for i := range want {
		g, w := recs[i], want[i]
		if g.Seq != w.Seq || g.Event != w.Event || g.Keys != w.Keys || !g.At.Equal(w.At) {
			t.Fatalf("record %d = %+v, want %+v", i, g, w)
		}
		wantItem(t, g.Old, w.Old)
		wantItem(t, g.New, w.New)
	}
	if got := s.Stream(2); len(got) != 2 || got[0].Seq != 3 {
		t.Fatalf("Stream(2) = %+v", got)
	}
	recs[0].New["n"] = store.Int(42) // the caller's copy
	if s.Stream(0)[0].New["n"] != store.Int(1) {
		t.Fatal("Stream returned shared images")
	}
	s.TrimStream(3)
	if got := s.Stream(0); len(got) != 1 || got[0].Seq != 4 || s.StreamLen() != 4 {
		t.Fatalf("after trim: %+v, len %d", got, s.StreamLen())
	}
	off := memsim.New(memsim.WithStream(false))
	mustPut(t, off, item(a))
	if off.StreamLen() != 0 {
		t.Fatal("stream off emitted")
	}
}

func TestChecklist47_StreamNoOpWrites(t *testing.T) {
	s := memsim.New()
	a := key("a")
	mustPut(t, s, item(a, "n", 1, "s", "x"))
	mustPut(t, s, item(a, "n", 1, "s", "x")) // identical put
	mustUpdate(t, s, store.UpdateInput{Key: a, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(0)), store.Condition{})})
	mustUpdate(t, s, store.UpdateInput{Key: a, Expr: storetest.Build(t, store.Update{}.Set("s", store.Str("x")), store.Condition{})})
	mustUpdate(t, s, store.UpdateInput{Key: a, Expr: storetest.Build(t, store.Update{}.Remove("missing"), store.Condition{})})
	if _, err := s.Delete(ctx, store.DeleteInput{Key: key("missing")}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Update(ctx, store.UpdateInput{Key: a, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Name("n").Equal(store.Int(9)))})
	wantCondFailed(t, err)
	if n := s.StreamLen(); n != 1 {
		t.Fatalf("stream has %d records, want 1: %+v", n, s.Stream(0))
	}
	// No-op writes are still billed.
	if tot := s.Totals(); tot.Consumed.WriteUnits != 7 {
		t.Fatalf("consumed %+v, want 7 WCU", tot.Consumed)
	}
}
