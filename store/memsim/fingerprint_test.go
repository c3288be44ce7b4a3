package memsim

import (
	"testing"

	"github.com/shardlimit/limiter/store"
)

// A client token makes a transaction idempotent: a repeat with the same
// token and the same actions is answered as the first, the same token
// with other actions is refused. So the fingerprint must tell apart any
// two transactions that differ in anything that matters (the kind of an
// action, a key, an attribute's name, kind or value, an expression, its
// names and values, whether the old item is returned), and give the same
// value for the same actions whatever order its maps are walked in.
func TestFingerprintTellsTransactionsApart(t *testing.T) {
	key := store.Key{PK: "p", SK: "s"}
	expr := store.Expr{Update: "SET #a = :v", Condition: "attribute_exists(#a)",
		Names: map[string]string{"#a": "a", "#b": "b", "#c": "c"}, Values: map[string]store.Value{":v": store.Int(1), ":w": store.Str("x"), ":z": store.Int(3)}}
	item := store.Item{"PK": store.Str("p"), "SK": store.Str("s"), "a": store.Int(1), "b": store.Str("x"), "c": store.Int(7), "d": store.Int(8)}
	with := func(f func(e *store.Expr)) store.Expr {
		e := store.Expr{Update: expr.Update, Condition: expr.Condition, Names: map[string]string{}, Values: map[string]store.Value{}}
		for k, v := range expr.Names {
			e.Names[k] = v
		}
		for k, v := range expr.Values {
			e.Values[k] = v
		}
		f(&e)
		return e
	}
	withItem := func(f func(it store.Item)) store.Item {
		c := item.Clone()
		f(c)
		return c
	}
	base := []store.Write{{Update: &store.UpdateInput{Key: key, Expr: expr}}, {Put: &store.PutInput{Item: item, Expr: expr}}}
	variants := map[string][]store.Write{
		"another kind":      {{Delete: &store.DeleteInput{Key: key, Expr: expr}}, base[1]},
		"a check":           {{Check: &store.CheckInput{Key: key, Expr: expr}}, base[1]},
		"another PK":        {{Update: &store.UpdateInput{Key: store.Key{PK: "q", SK: "s"}, Expr: expr}}, base[1]},
		"another SK":        {{Update: &store.UpdateInput{Key: store.Key{PK: "p", SK: "t"}, Expr: expr}}, base[1]},
		"another update":    {{Update: &store.UpdateInput{Key: key, Expr: with(func(e *store.Expr) { e.Update = "SET #a = :w" })}}, base[1]},
		"another condition": {{Update: &store.UpdateInput{Key: key, Expr: with(func(e *store.Expr) { e.Condition = "" })}}, base[1]},
		"another name":      {{Update: &store.UpdateInput{Key: key, Expr: with(func(e *store.Expr) { e.Names["#a"] = "z" })}}, base[1]},
		"another value":     {{Update: &store.UpdateInput{Key: key, Expr: with(func(e *store.Expr) { e.Values[":v"] = store.Int(2) })}}, base[1]},
		"a string value":    {{Update: &store.UpdateInput{Key: key, Expr: with(func(e *store.Expr) { e.Values[":w"] = store.Str("y") })}}, base[1]},
		"the old item":      {{Update: &store.UpdateInput{Key: key, Expr: expr, ReturnOldOnConditionFailure: true}}, base[1]},
		"an item's value":   {base[0], {Put: &store.PutInput{Item: withItem(func(it store.Item) { it["a"] = store.Int(2) }), Expr: expr}}},
		"an item's string":  {base[0], {Put: &store.PutInput{Item: withItem(func(it store.Item) { it["b"] = store.Str("y") }), Expr: expr}}},
		"an item's kind":    {base[0], {Put: &store.PutInput{Item: withItem(func(it store.Item) { it["a"] = store.Str("1") }), Expr: expr}}},
		"an item's names":   {base[0], {Put: &store.PutInput{Item: withItem(func(it store.Item) { it["z"] = it["a"]; delete(it, "a") }), Expr: expr}}},
		"a put's condition": {base[0], {Put: &store.PutInput{Item: item, Expr: with(func(e *store.Expr) { e.Condition = "" })}}},
		"a put's old item":  {base[0], {Put: &store.PutInput{Item: item, Expr: expr, ReturnOldOnConditionFailure: true}}},
		"one action":        base[:1],
	}
	// Deletes and checks, by key and expression.
	del := []store.Write{{Delete: &store.DeleteInput{Key: key, Expr: expr}}}
	chk := []store.Write{{Check: &store.CheckInput{Key: key, Expr: expr}}}
	other := store.Key{PK: "q", SK: "s"}
	bare := with(func(e *store.Expr) { e.Condition = "" })
	zeros := string(make([]byte, 8)) // a length prefix of 0, spelled out
	pairs := map[string][2][]store.Write{
		"deletes of two keys":       {del, {{Delete: &store.DeleteInput{Key: other, Expr: expr}}}},
		"deletes of two conditions": {del, {{Delete: &store.DeleteInput{Key: key, Expr: bare}}}},
		"deletes returning or not":  {del, {{Delete: &store.DeleteInput{Key: key, Expr: expr, ReturnOldOnConditionFailure: true}}}},
		"checks of two keys":        {chk, {{Check: &store.CheckInput{Key: other, Expr: expr}}}},
		"checks of two conditions":  {chk, {{Check: &store.CheckInput{Key: key, Expr: bare}}}},
		"strings split another way": {{{Update: &store.UpdateInput{Key: key, Expr: store.Expr{Update: "ab", Condition: "c"}}}}, {{Update: &store.UpdateInput{Key: key, Expr: store.Expr{Update: "a", Condition: "bc"}}}}},
		"strings of zero bytes split another way": {{{Update: &store.UpdateInput{Key: key, Expr: store.Expr{Update: "a", Condition: "b" + zeros}}}},
			{{Update: &store.UpdateInput{Key: key, Expr: store.Expr{Update: "a" + zeros + "b"}}}}},
		"an item's attribute named otherwise": {{{Put: &store.PutInput{Item: store.Item{"a": store.Int(1)}}}}, {{Put: &store.PutInput{Item: store.Item{"b": store.Int(1)}}}}},
		"a name placeholder named otherwise": {{{Update: &store.UpdateInput{Key: key, Expr: store.Expr{Update: "u", Names: map[string]string{"#a": "x"}}}}},
			{{Update: &store.UpdateInput{Key: key, Expr: store.Expr{Update: "u", Names: map[string]string{"#b": "x"}}}}}},
		"a value placeholder named otherwise": {{{Update: &store.UpdateInput{Key: key, Expr: store.Expr{Update: "u", Values: map[string]store.Value{":a": store.Int(1)}}}}},
			{{Update: &store.UpdateInput{Key: key, Expr: store.Expr{Update: "u", Values: map[string]store.Value{":b": store.Int(1)}}}}}},
		"attributes split another way": {{{Put: &store.PutInput{Item: store.Item{"ab": store.Str("c")}}}}, {{Put: &store.PutInput{Item: store.Item{"a": store.Str("bc")}}}}},
		// Each kind's tag tells apart actions whose other strings would
		// line up: a check of (p, s) and a delete of ("check", p) whose
		// expression carries the rest.
		"a check and a delete that line up": {
			{{Check: &store.CheckInput{Key: store.Key{PK: "p", SK: "s"}, Expr: store.Expr{Update: "u", Condition: "a",
				Names: map[string]string{"#n": "b"}, Values: map[string]store.Value{"c": store.Str("values")}}}}},
			{{Delete: &store.DeleteInput{Key: store.Key{PK: "check", SK: "p"}, Expr: store.Expr{Update: "s", Condition: "u",
				Names: map[string]string{"a": "#n", "b": "values", "c": "S"}}}}},
		},
		"a delete and a check that line up": {
			{{Delete: &store.DeleteInput{Key: store.Key{PK: "p", SK: "s"}, Expr: store.Expr{Update: "u", Condition: "a",
				Names: map[string]string{"#n": "b"}, Values: map[string]store.Value{"c": store.Str("values")}}}}},
			{{Check: &store.CheckInput{Key: store.Key{PK: "delete", SK: "p"}, Expr: store.Expr{Update: "s", Condition: "u",
				Names: map[string]string{"a": "#n", "b": "values", "c": "S"}}}}},
		},
		"an update and a delete that line up": {
			{{Update: &store.UpdateInput{Key: store.Key{PK: "delete", SK: "p"}, Expr: store.Expr{Update: "s", Condition: "u",
				Names: map[string]string{"a": "#n", "b": "values", "c": "S"}}}}},
			{{Delete: &store.DeleteInput{Key: store.Key{PK: "p", SK: "s"}, Expr: store.Expr{Update: "u", Condition: "a",
				Names: map[string]string{"#n": "b"}, Values: map[string]store.Value{"c": store.Str("values")}}}}},
		},
	}
	for name, pr := range pairs {
		if fingerprint(pr[0]) == fingerprint(pr[1]) {
			t.Errorf("%s: the same fingerprint", name)
		}
	}

	fp := fingerprint(base)
	for i := 0; i < 20; i++ {
		if fingerprint(base) != fp {
			t.Fatal("the same actions fingerprint differently: map order reached the hash")
		}
	}
	seen := map[[32]byte]string{}
	for name, v := range variants {
		f := fingerprint(v)
		if f == fp {
			t.Errorf("%s: the same fingerprint as the original", name)
		}
		if other, dup := seen[f]; dup {
			t.Errorf("%s and %s fingerprint alike", name, other)
		}
		seen[f] = name
	}
}
