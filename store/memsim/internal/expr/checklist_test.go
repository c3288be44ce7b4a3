package expr

import (
	"testing"

	"github.com/shardlimit/limiter/store"
)

// One test per item of memsim's checklist of DynamoDB behaviours
// (docs/memsim.md) that concerns the expression engine. Items that
// need the table are tested on the engine's part of them.

// 1. UpdateItem on a missing key creates the item (upsert) containing the
// key plus the written attributes.
func TestChecklist01_UpsertCreatesKeyPlusAttributes(t *testing.T) {
	b := bind(t, "SET #a = :a ADD #n :d", "", names{"#a": "rf", "#n": "tk"}, values{":a": N(7), ":d": N(3)})
	got, touched, err := b.Apply(nil, testKey)
	if err != nil {
		t.Fatal(err)
	}
	want := item("PK", S("p"), "SK", S("s"), "rf", N(7), "tk", N(3))
	if !sameItem(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if len(touched) != 2 || touched[0] != "rf" || touched[1] != "tk" {
		t.Fatalf("touched %v", touched)
	}
	// An update that only removes attributes does not create the item
	// (Alternator test_update_item_non_existent, verified against AWS).
	b = bind(t, "REMOVE a", "", nil, nil)
	got, touched, err = b.Apply(nil, testKey)
	if err != nil || got != nil || touched != nil {
		t.Fatalf("REMOVE on a missing item: %v %v %v", got, touched, err)
	}
	// No update expression at all (UpdateItem with only a key) creates the
	// key-only item.
	b = bind(t, "", "attribute_not_exists(PK)", nil, nil)
	got, _, err = b.Apply(nil, testKey)
	if err != nil || !sameItem(got, item("PK", S("p"), "SK", S("s"))) {
		t.Fatalf("no update on a missing item: %v %v", got, err)
	}
}

// 2. ADD n :d on a missing attribute (or missing item) yields n = d;
// negative d decrements.
func TestChecklist02_AddMissingStartsAtZero(t *testing.T) {
	b := bind(t, "ADD tokens :d", "", nil, values{":d": N(-1)})
	got, _, err := b.Apply(nil, testKey)
	if err != nil || got["tokens"] != N(-1) {
		t.Fatalf("missing item: %v %v", got, err)
	}
	got, _, err = b.Apply(item("PK", S("p"), "SK", S("s"), "other", N(1)), testKey)
	if err != nil || got["tokens"] != N(-1) || got["other"] != N(1) {
		t.Fatalf("missing attribute: %v %v", got, err)
	}
	got, _, err = b.Apply(item("PK", S("p"), "SK", S("s"), "tokens", N(3)), testKey)
	if err != nil || got["tokens"] != N(2) {
		t.Fatalf("decrement: %v %v", got, err)
	}
}

// 3. ADD on an existing non-number attribute: "An operand in the update
// expression has an incorrect data type", item unchanged.
func TestChecklist03_AddOnStringAttribute(t *testing.T) {
	old := item("PK", S("p"), "SK", S("s"), "b", S("hi"))
	b := bind(t, "ADD b :one", "", nil, values{":one": N(1)})
	got, _, err := b.Apply(old, testKey)
	wantMessage(t, err, "An operand in the update expression has an incorrect data type")
	if got != nil || !sameItem(old, item("PK", S("p"), "SK", S("s"), "b", S("hi"))) {
		t.Fatal("item changed")
	}
	// A string operand is rejected before any item is read
	// (floci capture of real DynamoDB, 2026).
	wantMessage(t, firstError("ADD n :v", "", nil, values{":v": S("x")}),
		"Invalid UpdateExpression: Incorrect operand type for operator or function; operator: ADD, operand type: STRING, typeSet: ALLOWED_FOR_ADD_OPERAND")
}

// 4. SET n = n + :d with n missing: "The provided expression refers to an
// attribute that does not exist in the item".
func TestChecklist04_ArithmeticOnMissingAttribute(t *testing.T) {
	b := bind(t, "SET n = n + :d", "", nil, values{":d": N(1)})
	for _, old := range []store.Item{nil, item("PK", S("p"), "SK", S("s"))} {
		_, _, err := b.Apply(old, testKey)
		wantMessage(t, err, "The provided expression refers to an attribute that does not exist in the item")
	}
	got, _, err := b.Apply(item("n", N(41)), testKey)
	if err != nil || got["n"] != N(42) {
		t.Fatalf("%v %v", got, err)
	}
}

// 5. SET n = if_not_exists(n, :z) + :d works on missing n and a missing item.
func TestChecklist05_IfNotExistsPlus(t *testing.T) {
	b := bind(t, "SET n = if_not_exists(n, :z) + :d", "", nil, values{":z": N(10), ":d": N(-1)})
	for _, c := range []struct {
		old  store.Item
		want int64
	}{
		{nil, 9},
		{item("PK", S("p"), "SK", S("s")), 9},
		{item("PK", S("p"), "SK", S("s"), "n", N(3)), 2},
	} {
		got, _, err := b.Apply(c.old, testKey)
		if err != nil || got["n"] != N(c.want) {
			t.Fatalf("old %v: got %v %v, want n=%d", c.old, got, err, c.want)
		}
	}
}

// 6. All right-hand sides read the pre-update item.
func TestChecklist06_RightHandSidesReadOldItem(t *testing.T) {
	b := bind(t, "SET x = :v, y = x", "", nil, values{":v": N(4)})
	_, _, err := b.Apply(item("PK", S("p"), "SK", S("s")), testKey)
	wantMessage(t, err, "The provided expression refers to an attribute that does not exist in the item")

	old := item("PK", S("p"), "SK", S("s"), "a", S("hello"))
	for _, u := range []string{"REMOVE a SET b = a", "SET b = a REMOVE a"} {
		got, _, err := bind(t, u, "", nil, nil).Apply(old, testKey)
		if err != nil || !sameItem(got, item("PK", S("p"), "SK", S("s"), "b", S("hello"))) {
			t.Fatalf("%s: %v %v", u, got, err)
		}
	}
	// SET a = b, b = a swaps.
	got, _, err := bind(t, "SET a = b, b = a", "", nil, nil).Apply(item("a", N(1), "b", N(2)), testKey)
	if err != nil || got["a"] != N(2) || got["b"] != N(1) {
		t.Fatalf("swap: %v %v", got, err)
	}
	if old["a"] != S("hello") || len(old) != 3 {
		t.Fatal("old item modified")
	}
}

// 7. A repeated clause keyword is rejected.
func TestChecklist07_RepeatedClause(t *testing.T) {
	for _, c := range []struct{ expr, word string }{
		{"SET a = :v SET b = :v", "SET"},
		{"SET a = :v REMOVE b SET c = :v", "SET"},
		{"ADD x :one SET a = :a ADD y :one", "ADD"},       // moto aws_verified
		{"REMOVE #d set a = b remove e", "REMOVE"},        // dynalite
		{"delete #d :e set a = b delete #e :f", "DELETE"}, // dynalite
		{"set a = :v Set b = :v", "SET"},
		{"REMOVE #ulist[0] SET current_user = :current_user REMOVE some_param", "REMOVE"}, // moto aws_verified
		{"SET current_user = :current_user SET some_param = :current_user", "SET"},        // moto aws_verified
	} {
		_, err := Parse(c.expr, "")
		wantMessage(t, err, `Invalid UpdateExpression: The "`+c.word+`" section can only be used once in an update expression;`)
	}
}

// 8. Same path twice, or ancestor and descendant, is rejected at Bind,
// before any item is read.
func TestChecklist08_OverlappingPaths(t *testing.T) {
	const pre = "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; "
	for _, c := range []struct {
		expr string
		n    names
		want string
	}{
		{"SET #a1 = :v, #a2 = :v", names{"#a1": "a", "#a2": "a"}, "path one: [a], path two: [a]"},
		{"SET a = :v REMOVE a", nil, "path one: [a], path two: [a]"},
		{"ADD tokens :v SET tokens = :v", nil, "path one: [tokens], path two: [tokens]"},
		{"SET #s = :v, #s = :v", names{"#s": "string_set"}, "path one: [string_set], path two: [string_set]"}, // moto aws_verified
		{"SET string_set.nested = :v, string_set.nested = :v", nil, "path one: [string_set, nested], path two: [string_set, nested]"},
		{"SET a = :v, a.b = :v", nil, "path one: [a], path two: [a, b]"},
		{"SET a.b = :v, a = :v", nil, "path one: [a, b], path two: [a]"},
		{"SET a[1][1] = :v, a[1] = :v", nil, "path one: [a, [1], [1]], path two: [a, [1]]"},
		// dynalite's tests, captured from DynamoDB: "path two" is the first
		// key of a Java HashMap, not necessarily the overlapping one.
		{"set d[1] = :v, d.b = :v, c[1].a = :v, #c = if_not_exists(a, :v)", names{"#c": "c"}, "path one: [c, [1], a], path two: [c]"},
		{"set #c[3].#d = :v, #c[3] = :v", names{"#c": "c", "#d": "[3]"}, "path one: [c, [3], [3]], path two: [c, [3]]"},
		{"set c.b.#c = :v, c = :v, #d = :v", names{"#c": "c", "#d": "[3]"}, "path one: [c, b, c], path two: [[3]]"},
		{"set a = :v remove a, #c, #d", names{"#c": "c", "#d": "[3]"}, "path one: [a], path two: [[3]]"},
		{"remove c, #c.a, #d", names{"#c": "c", "#d": "[3]"}, "path one: [c], path two: [[3]]"},
	} {
		// Overlaps are found before unused values, so :v may go unused.
		p, err := Parse(c.expr, "")
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		_, err = p.Bind(c.n, values{":v": N(1)}, isKey)
		wantMessage(t, err, pre+c.want)
	}
	// Paths are compared after #names resolve; a name holding a dot is one
	// attribute (moto aws_verified).
	bind(t, "SET string_set = :h, #nested = :h", "", names{"#nested": "string_set.nested"}, values{":h": S("H")})
}

// 9. Map and list access on the same prefix conflict.
func TestChecklist09_ConflictingPaths(t *testing.T) {
	const pre = "Invalid UpdateExpression: Two document paths conflict with each other; must remove or rewrite one of these paths; "
	for _, c := range []struct {
		expr string
		n    names
		want string
	}{
		{"SET a.b = :v, a[1] = :v", nil, "path one: [a, b], path two: [a, [1]]"},
		{"SET a.b.c = :v, a.b[2] = :v", nil, "path one: [a, b, c], path two: [a, b, [2]]"},
		{"set #c[3].#d = :v, #c.#d[3] = if_not_exists(a, :v)", names{"#c": "c", "#d": "[3]"}, "path one: [c, [3], [3]], path two: [c, [3], [3]]"}, // dynalite
		{"remove a.#c set a[1] = :v", names{"#c": "c"}, "path one: [a, c], path two: [a, [1]]"},                                                   // dynalite
	} {
		p, err := Parse(c.expr, "")
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		_, err = p.Bind(c.n, values{":v": N(1)}, isKey)
		wantMessage(t, err, pre+c.want)
	}
	// Applying any nested path is invalid here: no attribute is a map or list.
	b := bind(t, "SET a.b = :v", "", nil, values{":v": N(1)})
	for _, old := range []store.Item{nil, item("a", S("x"))} {
		_, _, err := b.Apply(old, testKey)
		wantMessage(t, err, "The document path provided in the update expression is invalid for update")
	}
}

// 10. Updating a key attribute in any clause is rejected.
func TestChecklist10_KeyAttributeUpdate(t *testing.T) {
	for _, u := range []string{"SET #k = :v", "REMOVE #k", "ADD #k :n", "SET a = :v REMOVE #k"} {
		v := values{":v": S("x"), ":n": N(1)}
		p, err := Parse(u, "")
		if err != nil {
			t.Fatal(err)
		}
		used := values{}
		for _, ph := range p.values {
			used[ph] = v[ph]
		}
		if len(used) == 0 {
			used = nil
		}
		_, err = p.Bind(names{"#k": "SK"}, used, isKey)
		wantMessage(t, err, "One or more parameter values were invalid: Cannot update attribute SK. This attribute is part of the key")
	}
	_, err := mustParse(t, "DELETE PK :s", "").Bind(nil, values{":s": S("x")}, isKey)
	// DELETE's operand type is checked first; a set operand cannot exist here.
	wantMessage(t, err, "Invalid UpdateExpression: Incorrect operand type for operator or function; operator: DELETE, operand type: STRING, typeSet: ALLOWED_FOR_ADD_OPERAND")
	// A nested path through a key attribute is rejected too.
	_, err = mustParse(t, "", "attribute_exists(PK.x)").Bind(nil, nil, isKey)
	wantMessage(t, err, "Key attributes must be scalars; list random access '[]' and map lookup '.' are not allowed: Key: PK")
}

func mustParse(t *testing.T, u, c string) *Parsed {
	t.Helper()
	p, err := Parse(u, c)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", u, c, err)
	}
	return p
}

// 11. Unused names and values, and empty maps, are rejected.
func TestChecklist11_UnusedAndEmptyMaps(t *testing.T) {
	p := mustParse(t, "SET #a = :a", "")
	_, err := p.Bind(names{"#a": "x", "#b": "y"}, values{":a": N(1)}, isKey)
	wantMessage(t, err, "Value provided in ExpressionAttributeNames unused in expressions: keys: {#b}")
	_, err = p.Bind(names{"#a": "x"}, values{":a": N(1), ":z": N(2), ":b": N(3)}, isKey)
	wantMessage(t, err, "Value provided in ExpressionAttributeValues unused in expressions: keys: {:b, :z}")
	_, err = p.Bind(names{"#a": "x", "#c": "y", "#b": "z"}, values{":a": N(1), ":b": N(3)}, isKey)
	wantMessage(t, err, "Value provided in ExpressionAttributeNames unused in expressions: keys: {#b, #c}")
	_, err = mustParse(t, "REMOVE a", "").Bind(nil, values{}, isKey)
	wantMessage(t, err, "ExpressionAttributeValues must not be empty")
	_, err = mustParse(t, "REMOVE a", "").Bind(names{}, nil, isKey)
	wantMessage(t, err, "ExpressionAttributeNames must not be empty")
	// Usage counts across both expressions, and short-circuit evaluation
	// does not matter (Alternator test_update_condition_unused_entries_short_circuit).
	b := bind(t, "SET #name1 = :val3", "#name1 = :val1 OR #name2 = :val2",
		names{"#name1": "a", "#name2": "b"}, values{":val1": N(1), ":val2": N(2), ":val3": N(3)})
	if ok := b.Check(item("a", N(1))); !ok {
		t.Fatal("condition false")
	}
}

// 15. The condition is evaluated on the pre-update item, and a false
// condition leaves it unchanged.
func TestChecklist15_ConditionOnOldItemNoMutation(t *testing.T) {
	b := bind(t, "SET tokens = tokens - :one", "tokens >= :one", nil, values{":one": N(1)})
	old := item("PK", S("p"), "SK", S("s"), "tokens", N(1))
	if !b.Check(old) {
		t.Fatal("check on tokens=1: false")
	}
	got, _, err := b.Apply(old, testKey)
	if err != nil || got["tokens"] != N(0) || old["tokens"] != N(1) {
		t.Fatalf("apply: %v %v (old %v)", got, err, old)
	}
	// On the new item the condition fails; the caller does not apply.
	if ok := b.Check(got); ok {
		t.Fatal("condition true on tokens=0")
	}
	if ok := b.Check(nil); ok {
		t.Fatal("condition true on a missing item")
	}
}

// 16. Comparisons with a missing attribute are false, <> is true, and two
// missing attributes are not equal.
func TestChecklist16_MissingAttributeComparisons(t *testing.T) {
	it := item("a", N(1))
	for _, c := range []struct {
		cond string
		want bool
	}{
		{"q = :v", false}, {"q < :v", false}, {"q <= :v", false}, {"q > :v", false}, {"q >= :v", false},
		{":v < q", false}, {"q <> :v", true}, {"q BETWEEN :v AND :w", false}, {"q IN (:v, :w)", false},
		{"q = z", false}, {"q <> z", true}, {"q < z", false}, {"q between z and x", false},
		{"a = :v", true}, {"a <> :v", false}, {"size(q) = :v", false}, {"size(q) <> :v", true},
	} {
		b := bindCond(t, c.cond, values{":v": N(1), ":w": N(2)})
		if got := b.Check(it); got != c.want {
			t.Errorf("%s on %v: got %v, want %v", c.cond, it, got, c.want)
		}
	}
}

// bindCond binds a condition with only the values it uses.
func bindCond(t *testing.T, cond string, all values) *Bound {
	t.Helper()
	p := mustParse(t, "", cond)
	v := values{}
	for _, ph := range p.values {
		v[ph] = all[ph]
	}
	if len(v) == 0 {
		v = nil
	}
	b, err := p.Bind(nil, v, isKey)
	if err != nil {
		t.Fatalf("%s: %v", cond, err)
	}
	return b
}

// 17. Cross-type = is false and <> true; ordering across types is false;
// operand types DynamoDB rejects in the request are ValidationExceptions.
func TestChecklist17_CrossTypeComparisons(t *testing.T) {
	it := item("n", N(1), "s", S("1"))
	for _, c := range []struct {
		cond string
		want bool
	}{
		{"n = :s", false}, {"n <> :s", true}, {"n < :s", false}, {"n >= :s", false},
		{"s = :n", false}, {"s > :n", false}, {"n = s", false}, {"n <> s", true}, {"n < s", false},
		{"n BETWEEN :s AND :s", false}, {"n IN (:s, :n)", true}, {"n = :n", true},
		{"begins_with(n, :s)", false}, {"contains(n, :s)", false}, {"size(n) >= :n", false},
	} {
		b := bindCond(t, c.cond, values{":s": S("1"), ":n": N(1)})
		if got := b.Check(it); got != c.want {
			t.Errorf("%s: got %v, want %v", c.cond, got, c.want)
		}
	}
	// A request operand of a type the operator cannot take is rejected
	// (strings and numbers are always ordered, so < and BETWEEN accept both).
	for _, c := range []struct{ cond, want string }{
		{"begins_with(a, :n)", "Incorrect operand type for operator or function; operator or function: begins_with, operand type: N"},
		{"size(:n) > a", "Incorrect operand type for operator or function; operator or function: size, operand type: N"},
		{"a BETWEEN :n AND :s", "The BETWEEN operator requires same data type for lower and upper bounds; lower bound operand: AttributeValue: {N:1}, upper bound operand: AttributeValue: {S:1}"},
	} {
		p := mustParse(t, "", c.cond)
		v := values{}
		for _, ph := range p.values {
			v[ph] = values{":s": S("1"), ":n": N(1)}[ph]
		}
		_, err := p.Bind(nil, v, isKey)
		wantMessage(t, err, "Invalid ConditionExpression: "+c.want)
	}
}

// 18. Precedence: comparators > IN > BETWEEN > functions > parentheses >
// NOT > AND > OR.
func TestChecklist18_Precedence(t *testing.T) {
	it := item("a", N(1), "b", N(2), "c", N(3))
	for _, c := range []struct {
		cond string
		want bool
	}{
		// a, b true and c false: a OR b AND c is true, (a OR b) AND c false.
		{"a < b OR b < a AND c < b", true},
		{"(a < b OR b < a) AND c < b", false},
		{"a < b OR c < b AND b < c", true}, // Alternator test_update_condition_and_before_or
		{"NOT a < b AND c < b", false},     // NOT binds tighter than AND
		{"NOT (a < b AND c < b)", true},
		{"NOT NOT NOT NOT a < b", true},
		{"b BETWEEN a AND c AND a < b", true}, // BETWEEN takes its AND first
		{"b BETWEEN a AND c AND c < a", false},
		{"attribute_exists(a) AND a IN (:one, :two) OR c = :one", true},
		{"c = :one OR attribute_not_exists(a) AND b = :two", false},
		{"(a < b OR b < a) AND (b < c AND (a < b OR b < c))", true},
	} {
		b := bindCond(t, c.cond, values{":one": N(1), ":two": N(2)})
		if got := b.Check(it); got != c.want {
			t.Errorf("%s: got %v, want %v", c.cond, got, c.want)
		}
	}
}
