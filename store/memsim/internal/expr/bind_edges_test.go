package expr

import (
	"strings"
	"testing"
)

// TestFirstOperandDistinct: DynamoDB refuses a comparison or function whose
// first operand is repeated among the others ("a < a" is a typo, not a
// condition), for every operator of two or more operands but the
// arithmetic ones and list_append, where "a + a" and list_append(l, l) are
// ordinary updates.
func TestFirstOperandDistinct(t *testing.T) {
	const msg = "Invalid ConditionExpression: The first operand must be distinct from the remaining operands for this operator or function; operator: "
	v := values{":v": N(1), ":s": S("s")}
	for _, c := range []struct{ cond, op string }{
		{"a < a", "<"},
		{"a <= a", "<="},
		{"a > a", ">"},
		{"a >= a", ">="},
		{"a BETWEEN a AND :v", "BETWEEN"},
		{"a BETWEEN :v AND a", "BETWEEN"},
		{"a IN (:v, a)", "IN"},
		{"begins_with(a, a)", "begins_with"},
	} {
		_, err := bindUsed(t, "", c.cond, v)
		wantMessage(t, err, msg+c.op+", first operand: [a]")
	}
	// The same attribute on both sides of an arithmetic operator or
	// list_append is fine.
	bind(t, "SET a = b + b", "", nil, nil)
	bind(t, "SET a = b - b", "", nil, nil)
	bind(t, "SET a = list_append(b, b)", "", nil, nil)
}

// TestBindChecksEveryEntry: DynamoDB checks every entry of the maps, used
// by the expression or not, before it looks at the expression: a map with
// as many entries as the expression has placeholders, but other ones, is
// refused for its malformed or invalid entry, not for the placeholder it
// lacks.
func TestBindChecksEveryEntry(t *testing.T) {
	p := mustParse(t, "SET #a = :a", "")
	long := strings.Repeat("x", 65536)
	for _, c := range []struct {
		n    names
		v    values
		want string
	}{
		{names{"#a": "x"}, values{"b": N(1)}, `ExpressionAttributeValues contains invalid key: Syntax error; key: "b"`},
		{names{"a": "x"}, values{":a": N(1)}, `ExpressionAttributeNames contains invalid key: Syntax error; key: "a"`},
		{names{"#a": "x"}, values{":b": {}}, "ExpressionAttributeValues contains invalid value: Supplied AttributeValue is empty, must contain exactly one of the supported datatypes for key :b"},
		{names{"#b": ""}, values{":a": N(1)}, "ExpressionAttributeNames contains invalid value: Empty attribute name for key #b"},
		{names{"#b": long}, values{":a": N(1)}, "ExpressionAttributeNames contains invalid value: Attribute name is too large, must be less than 65536 bytes for key #b"},
	} {
		_, err := p.Bind(c.n, c.v, isKey)
		wantMessage(t, err, c.want)
	}
}

// TestBindLongPlaceholderInUse: a placeholder longer than 255 characters is
// refused as a key of its map even when the expression uses it, as every
// key is checked before the expression is.
func TestBindLongPlaceholderInUse(t *testing.T) {
	name, value := "#"+strings.Repeat("n", 255), ":"+strings.Repeat("v", 255)
	p := mustParse(t, "SET "+name+" = :a", "")
	_, err := p.Bind(names{name: "x"}, values{":a": N(1)}, isKey)
	wantMessage(t, err, "ExpressionAttributeNames contains invalid key: The expression attribute map contains a key that is too long; size of key: 256")
	p = mustParse(t, "SET #a = "+value, "")
	_, err = p.Bind(names{"#a": "x"}, values{value: N(1)}, isKey)
	wantMessage(t, err, "ExpressionAttributeValues contains invalid key: The expression attribute map contains a key that is too long;")
	// At 255 both are fine.
	bind(t, "SET "+name[:255]+" = "+value[:255], "", names{name[:255]: "x"}, values{value[:255]: N(1)})
}

// TestNestedKeyAnywhere: a key attribute reached through a map or list
// ("PK.x") is refused wherever it stands in the expressions, not only as
// the first operand of the first comparison; a key attribute at the top
// level is an ordinary operand.
func TestNestedKeyAnywhere(t *testing.T) {
	const msg = "Key attributes must be scalars; list random access '[]' and map lookup '.' are not allowed: Key: PK"
	v := values{":v": N(1)}
	for _, c := range []struct{ update, cond string }{
		{"", ":v = PK.x"},
		{"", "a = :v AND :v = PK.x"},
		{"", "a = :v OR begins_with(b, PK.x)"},
		{"", "NOT (a = :v AND PK.x IN (:v))"},
		{"SET a = PK.x", ""},
		{"SET a = :v + PK.x", ""},
		{"SET a = :v, b = if_not_exists(c, PK.x)", ""},
	} {
		_, err := bindUsed(t, c.update, c.cond, v)
		wantMessage(t, err, msg)
	}
	// PK itself beside a nested path elsewhere.
	bind(t, "", "PK = :v AND a.b = :v", nil, v)
	bind(t, "SET a.b = PK", "", nil, nil)
	bind(t, "SET a.b = :v + PK", "", nil, v)
}

// TestConditionErrorsInEveryBranch: a condition is checked whole, so an
// error in the right side of AND or OR, or under NOT, is found after a
// valid left side, and every operator of every branch counts toward the
// limit of 300.
func TestConditionErrorsInEveryBranch(t *testing.T) {
	const pre = "Invalid ConditionExpression: The first operand must be distinct from the remaining operands for this operator or function; operator: <, first operand: [b]"
	v := values{":v": N(1)}
	for _, cond := range []string{
		"a = :v AND b < b",
		"a = :v OR b < b",
		"a = :v AND NOT (b < b)",
		"(a = :v OR a = :v) AND (a = :v OR b < b)",
	} {
		_, err := mustParse(t, "", cond).Bind(nil, v, isKey)
		wantMessage(t, err, pre)
	}
	// 301 operators, the last ones on the right of an OR.
	cond := "a = :v OR (" + strings.Repeat("a = :v AND ", 149) + "a = :v)"
	_, err := mustParse(t, "", cond).Bind(nil, v, isKey)
	wantMessage(t, err, "Invalid ConditionExpression: The expression contains too many operators; operator count: 301")
	cond = "NOT (NOT (" + strings.Repeat("a = :v AND ", 149) + "a = :v))"
	_, err = mustParse(t, "", cond).Bind(nil, v, isKey)
	wantMessage(t, err, "Invalid ConditionExpression: The expression contains too many operators; operator count: 301")
}

// TestBindAtTheLimits: a document path of 32 levels and a placeholder key
// of 255 characters are allowed (33 and 256 are not: TestBindConditionErrors,
// TestBindMapErrors).
func TestBindAtTheLimits(t *testing.T) {
	path := strings.Repeat("a.", 31) + "a"
	bind(t, "SET "+path+" = :v", "", nil, values{":v": N(1)})
	bind(t, "", "attribute_exists("+path+")", nil, nil)
	long := "#" + strings.Repeat("n", 254)
	_, err := mustParse(t, "SET #a = :v", "").Bind(names{"#a": "x", long: "y"}, values{":v": N(1)}, isKey)
	wantMessage(t, err, "Value provided in ExpressionAttributeNames unused in expressions: keys: {"+long+"}")
}

// TestBetweenBoundsFromPaths: the bounds of BETWEEN are compared when both
// are values; a bound read from an attribute is compared with the item.
func TestBetweenBoundsFromPaths(t *testing.T) {
	v := values{":a": N(1), ":b": S("x")}
	bind(t, "", "c = :a AND d BETWEEN :b AND e", nil, v)
	bind(t, "", "c = :a AND d BETWEEN e AND :b", nil, v)
}

// TestApplySetAddRemove: Apply sets, adds to and removes an existing item's
// top-level attributes in one new item, and names what it touched.
func TestApplySetAddRemove(t *testing.T) {
	b := bind(t, "SET a = :v ADD n :d REMOVE r", "", nil, values{":v": S("new"), ":d": N(2)})
	old := item("PK", S("p"), "SK", S("s"), "a", S("old"), "n", N(1), "r", S("gone"))
	got, touched, err := b.Apply(old, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if want := item("PK", S("p"), "SK", S("s"), "a", S("new"), "n", N(3)); !sameItem(got, want) {
		t.Errorf("new item %v, want %v", got, want)
	}
	if strings.Join(touched, ",") != "a,n,r" || old["r"] != S("gone") || old["n"] != N(1) {
		t.Errorf("touched %v, old item %v", touched, old)
	}
}

// TestTranslationChecksReachEveryOperand: the checks DynamoDB makes while
// translating the parse tree (reserved words, functions in their place)
// reach the operand under NOT, the left side of AND and the right side of
// an arithmetic operator, and the depth of one action's arithmetic does not carry over
// to the next action.
func TestTranslationChecksReachEveryOperand(t *testing.T) {
	_, err := Parse("", "NOT (status = :v)")
	wantMessage(t, err, "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: status")
	_, err = Parse("", "abort = :v AND a = :v")
	wantMessage(t, err, "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: abort")
	_, err = Parse("SET a = b + status", "")
	wantMessage(t, err, "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: status")
	mustParse(t, "SET a = b + c, d = list_append(e, f)", "")
}

// TestSamePathIsExact: the first operand must differ from the others, and
// a path differs from another of other length, of an index where the other
// has a name, or of another index.
func TestSamePathIsExact(t *testing.T) {
	for _, cond := range []string{"a.b = a", "a = a.b", "a[0] = a.b", "a.b < a[0]", "a[0] = a[1]"} {
		bind(t, "", cond, nil, nil)
	}
	_, err := mustParse(t, "", "a[1] = a[1]").Bind(nil, nil, isKey)
	wantMessage(t, err, "Invalid ConditionExpression: The first operand must be distinct from the remaining operands for this operator or function; operator: =, first operand: [a, [1]]")
}

// TestBindAgainWithOtherTypes: a Parsed bound again with values of other
// types is checked again: the memo of an earlier success holds for the
// types it saw only.
func TestBindAgainWithOtherTypes(t *testing.T) {
	p := mustParse(t, "SET a = b + :v", "")
	if _, err := p.Bind(nil, values{":v": N(1)}, isKey); err != nil {
		t.Fatal(err)
	}
	_, err := p.Bind(nil, values{":v": S("1")}, isKey)
	wantMessage(t, err, "Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: +, operand type: S")
	p = mustParse(t, "", "attribute_type(a, :t)")
	if _, err := p.Bind(nil, values{":t": S("N")}, isKey); err != nil {
		t.Fatal(err)
	}
	_, err = p.Bind(nil, values{":t": S("DOG")}, isKey)
	wantMessage(t, err, "Invalid ConditionExpression: Invalid attribute type name found; type: DOG, valid types: {N,BS,L,B,NULL,M,S,SS,NS,BOOL}")
}

// bindUsed parses update and cond and binds them with the entries of v
// they use (nil when they use none), and no names.
func bindUsed(t *testing.T, update, cond string, v values) (*Bound, error) {
	t.Helper()
	p := mustParse(t, update, cond)
	var used values
	for _, ph := range p.values {
		if used == nil {
			used = values{}
		}
		used[ph] = v[ph]
	}
	return p.Bind(nil, used, isKey)
}

// TestRedundantParenthesesBeforeASyntaxError: DynamoDB reports redundant
// parentheses when ANTLR has run the grammar's action before it meets the
// first syntax error: the action runs when the closing parenthesis is
// consumed once prediction has settled (here on the comparator inside, or
// on the IN after), and before that the error wins.
func TestRedundantParenthesesBeforeASyntaxError(t *testing.T) {
	for _, c := range []struct{ update, cond, want string }{
		{"", "((a = :v)) b", "Invalid ConditionExpression: The expression has redundant parentheses;"},
		{"", "((a)) IN", "Invalid ConditionExpression: The expression has redundant parentheses;"},
		{"SET a = ((b + c)) d", "", "Invalid UpdateExpression: The expression has redundant parentheses;"},
		{"", "()", `Invalid ConditionExpression: Syntax error; token: ")", near: "()"`},
	} {
		_, err := Parse(c.update, c.cond)
		wantMessage(t, err, c.want)
	}
}
