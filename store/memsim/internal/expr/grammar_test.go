package expr

import (
	"strconv"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// Sources of the expected texts: [aws] quoted from a test that runs against
// DynamoDB (dynalite test/, Alternator test/alternator, moto aws_verified,
// floci captures); [ddbl] derived from DynamoDB Local's code.

func TestParseUpdateErrors(t *testing.T) {
	const pre = "Invalid UpdateExpression: "
	for _, c := range []struct{ expr, want string }{
		// Syntax errors: the first token no valid expression can contain, with
		// the previous and next tokens and the whitespace between them.
		{"SET _123 = :val1", `Syntax error; token: "_", near: "SET _123"`},                                // [aws] Alternator
		{"SET MyStr = myNum + 1", `Syntax error; token: "1", near: "+ 1"`},                                // [aws] moto
		{"SET MyStr = myNum Mystr2 myNum2", `Syntax error; token: "Mystr2", near: "myNum Mystr2 myNum2"`}, // [aws] moto
		{"SET MyStr = my Num", `Syntax error; token: "Num", near: "my Num"`},                              // [aws] moto
		{"SET #attr1 = :val1, #attr2 = :val2,", `Syntax error; token: "<EOF>", near: ","`},                // [aws] moto
		{"ADD str_set bad_value", `Syntax error; token: "bad_value", near: "str_set bad_value"`},          // [aws] moto
		{"whatever", `Syntax error; token: "whatever", near: "whatever"`},
		{"HELLO b = :val1", `Syntax error; token: "HELLO", near: "HELLO b"`},
		{"set a", `Syntax error; token: "<EOF>", near: "a"`},
		{"set a=set", `Syntax error; token: "set", near: "=set"`},
		{"remove a = b", `Syntax error; token: "=", near: "a = b"`},
		{"SET a = :v1 + :v2 + :v3", `Syntax error; token: "+", near: ":v2 + :v3"`},
		{"SET c = if_not_exists(c, :val1+:val2)", `Syntax error; token: "+", near: ":val1+:val2"`},
		{"SET a[:xyz] = :v", `Syntax error; token: ":xyz", near: "[:xyz]"`},
		{"SET a[#xyz] = :v", `Syntax error; token: "#xyz", near: "[#xyz]"`},
		{"SET a = :", `Syntax error; token: ":", near: "= :"`},
		{"SET # = :v", `Syntax error; token: "#", near: "SET # ="`},
		{"SET :a = :b", `Syntax error; token: ":a", near: "SET :a ="`},
		{"SET a = _f(b,c,d)", `Syntax error; token: "_", near: "= _f"`},
		{"SET a[01] = :v", `Syntax error; token: "1", near: "01]"`},
		{"SET a[-1] = :v", `Syntax error; token: "-", near: "[-1"`},
		{"SET a = (b + c) + d", `Syntax error; token: "+", near: ") + d"`},
		{"SET a = (b.c).d + e", `Syntax error; token: ".", near: ").d"`},
		{"set (a = (b + c))", `Syntax error; token: "(", near: "set (a"`},
		{"SET if_not_exist(a, b) = a", `Syntax error; token: "(", near: "if_not_exist(a"`},
		{"add abort b", `Syntax error; token: "b", near: "abort b"`}, // syntax before reserved words
		{`SET a = "eight"`, `Syntax error; token: """, near: "= "eight"`},
		{"REMOVE", `Syntax error; token: "<EOF>", near: "REMOVE"`},
		{"SET a = :v, REMOVE b", `Syntax error; token: "REMOVE", near: ", REMOVE b"`},
		{"  ", `Syntax error; token: "<EOF>", near: "  "`},
		{"SET a = b\t\n c", `Syntax error; token: "c", near: "b` + "\t\n " + `c"`},
		{"SET a = \xff", "Syntax error; token: \"\uFFFD\", near: \"= \uFFFD\""},
		{"SET a = ü", `Syntax error; token: "ü", near: "= ü"`},
		// Redundant parentheses, an action of the grammar.
		{"SET a = ((b))", "The expression has redundant parentheses;"},
		{"SET a = ((b + c))", "The expression has redundant parentheses;"},
		{"SET a = if_not_exists(((b)), :v)", "The expression has redundant parentheses;"},
		{"SET a = ((b)) c", `Syntax error; token: "c", near: ") c"`}, // prediction failed before the action ran
		{"SET a = b + ((c)) d", "The expression has redundant parentheses;"},
		// Checks made while translating the tree, in tree order.
		{"set ttl = :v", "Attribute name is a reserved keyword; reserved keyword: ttl"},
		{" set #c = :c set abOrt = :v ", "Attribute name is a reserved keyword; reserved keyword: abOrt"}, // [aws] dynalite
		{" remove Absolute ", "Attribute name is a reserved keyword; reserved keyword: Absolute"},         // [aws] dynalite
		{"SET a.name = :v", "Attribute name is a reserved keyword; reserved keyword: name"},
		{"SET a = LIST_APPEND(:v1, :v2)", "Invalid function name; function: LIST_APPEND"}, // [aws] Alternator
		{"SET a = f123_hi(b,c,d)", "Invalid function name; function: f123_hi"},
		{"set #c = if_not_exist(:c) set c = d", "Invalid function name; function: if_not_exist"}, // [aws] dynalite
		{"SET a = convert(b, :t)", "Invalid function name; function: convert"},
		{"SET x = size(:val)", "The function is not allowed in an update expression; function: size"},
		{"SET a = attribute_exists(b)", "The function is not allowed in an update expression; function: attribute_exists"},
		{"SET a = list_append(list_append(:v1, :v2), :v3)", "The function is not allowed to be used this way in an expression; function: list_append"}, // [aws] Alternator
		{"SET a = list_append(a, :b) + :c", "The function is not allowed to be used this way in an expression; function: list_append"},
		{"SET a = if_not_exists(b, list_append(a, :b))", "The function is not allowed to be used this way in an expression; function: list_append"},
		{"SET a[2147483648] = :v", "List index is not within the allowable range; index: [2147483648]"},
		{"SET a = :v SET b = :v", `The "SET" section can only be used once in an update expression;`},
		{strings.Repeat("SET a = :v ", 373) + "REMOVE b", "Expression size has exceeded the maximum allowed size;"},
	} {
		_, err := Parse(c.expr, "")
		wantMessage(t, err, pre+c.want)
	}
}

func TestParseConditionErrors(t *testing.T) {
	const pre = "Invalid ConditionExpression: "
	for _, c := range []struct{ expr, want string }{
		{"a", `Syntax error; token: "<EOF>", near: "a"`}, // [aws] Alternator: a lone value is a syntax error
		{":val", `Syntax error; token: "<EOF>", near: ":val"`},
		{"NOT a", `Syntax error; token: "<EOF>", near: "a"`},
		{"a AND :val", `Syntax error; token: "AND", near: "a AND :val"`},
		{"a OR NOT :val", `Syntax error; token: "OR", near: "a OR NOT"`},
		{"a IN ()", `Syntax error; token: ")", near: "()"`}, // [aws] Alternator
		{"a in (b,c,)", `Syntax error; token: ")", near: ",)"`},
		{"a in b, c", `Syntax error; token: "b", near: "in b,"`},
		{"a > between", `Syntax error; token: "between", near: "> between"`},
		{"things are not gonna be ok", `Syntax error; token: "are", near: "things are not"`},
		{"a > 4", `Syntax error; token: "4", near: "> 4"`},
		{"attribute_exists(Pictures-RearView)", `Syntax error; token: "-", near: "Pictures-RearView"`},
		{`attribute_exists("Pictures.RearView")`, `Syntax error; token: """, near: "("Pictures"`},
		{"attribute_exists(Pictures..RearView)", `Syntax error; token: ".", near: "..RearView"`},
		{"size(a).b > a", `Syntax error; token: ".", near: ").b"`},
		{"(size(a))[0] > a", `Syntax error; token: "[", near: ")[0"`},
		{"ü > a", `Syntax error; token: "ü", near: "ü >"`},
		{"a = :v b", `Syntax error; token: "b", near: ":v b"`},
		{"(a = :v", `Syntax error; token: "<EOF>", near: ":v"`},
		{"(a) AND b = :v", `Syntax error; token: "AND", near: ") AND b"`},
		{"((a))", `Syntax error; token: "<EOF>", near: ")"`},
		{"a = :v)", `Syntax error; token: ")", near: ":v)"`},
		// Redundant parentheses [aws] dynalite, Alternator.
		{"((p <> :p))", "The expression has redundant parentheses;"},
		{"a=a and a > ((views))", "The expression has redundant parentheses;"},
		{"(a)between(((b.c)).d)and(c)", "The expression has redundant parentheses;"},
		{"a > whatever((:things), ((a)))", "The expression has redundant parentheses;"},
		{"a=a AND ((a=a AND a=a)) AND a=a", "The expression has redundant parentheses;"},
		{"a=a OR ((a=a OR a=a)) OR a=a", "The expression has redundant parentheses;"},
		{"a=a AND ((a=a AND (a=a AND a=a)))", "The expression has redundant parentheses;"},
		{"((a = :v)) AND b", "The expression has redundant parentheses;"},
		{"((f(x)))", "The expression has redundant parentheses;"},
		// ANTLR runs the action only once prediction has settled on it.
		{"((a)) = :v", "The expression has redundant parentheses;"},
		{"((a)) b", `Syntax error; token: "b", near: ") b"`},
		{"begins_with(((a)), :v) AND", "The expression has redundant parentheses;"},
		{"begins_with(((a)), :v) x", `Syntax error; token: "x", near: ") x"`},
		{"a = ((b)) c", "The expression has redundant parentheses;"},
		// Translation checks [aws] dynalite, Alternator.
		{"a=a and whatever((:things)) > a", "Invalid function name; function: whatever"},
		{"attRIbute_exIsts((views), #a)", "Invalid function name; function: attRIbute_exIsts"},
		{"dog(a)=:arg", "Invalid function name; function: dog"},
		{"a=a and attribute_exists((views), (#a)) > b", "The function is not allowed to be used this way in an expression; function: attribute_exists"},
		{"attribute_not_exists(things) > b", "The function is not allowed to be used this way in an expression; function: attribute_not_exists"},
		{"contains(:things, c) > b", "The function is not allowed to be used this way in an expression; function: contains"},
		{"size(contains(a, b)) > a", "The function is not allowed to be used this way in an expression; function: contains"},
		{"size(things)", "The function is not allowed to be used this way in an expression; function: size"},
		{"NOT (size(things))", "The function is not allowed to be used this way in an expression; function: size"},
		{"a between b and attribute_exists(things)", "The function is not allowed to be used this way in an expression; function: attribute_exists"},
		{"a in (b, attribute_exists(things))", "The function is not allowed to be used this way in an expression; function: attribute_exists"},
		{"if_not_exists(a, a)=:arg", "The function is not allowed in a condition expression; function: if_not_exists"},
		{"list_append(a, a)=:arg", "The function is not allowed in a condition expression; function: list_append"},
		{"attribute_exists(views, #a)", "Attribute name is a reserved keyword; reserved keyword: views"},
		{":a < abOrT", "Attribute name is a reserved keyword; reserved keyword: abOrT"},
		{strings.Repeat("a", 4097) + " = :v", "Expression size has exceeded the maximum allowed size; expression size: 4102"},
	} {
		_, err := Parse("", c.expr)
		wantMessage(t, err, pre+c.want)
	}
}

func TestParseAccepts(t *testing.T) {
	for _, c := range []struct{ u, c string }{
		{"SET a = :v", ""},
		{"  set   b=:val1  ", ""},
		{"sEt b = :val1", ""},
		{"SET Alpha_Numeric_123 = :v, A123_ = :v, #123a = :v, #_ = :v, a = :_, b = :123", ""},
		{"SET b = if_not_exists(b, :val1)+:val2", ""},
		{"SET a = (b)", ""},
		{"SET a = (b + c)", ""},
		{"SET a = ((b) + (c))", ""},
		{"SET a = if_not_exists(b, if_not_exists(c, :val1))", ""},
		{"SET a = list_append(if_not_exists(a, :v), :w)", ""},
		{"SET a.c[1].#name.y[1] = :val1", ""},
		{"SET a[2147483647] = :v", ""},
		{"REMOVE a SET b = :v ADD c :w DELETE d :x", ""},
		{"SET setx = :v, inx = :w", ""},
		{"", "(a = :v)"},
		{"", "((a = :v) and a <> :v)"}, // [aws] Alternator: one pair is not redundant
		{"", "(a) = :v"},
		{"", "(size(a)) = :v"},
		{"", "NOT NOT NOT NOT a < b"},
		{"", "a between :x and :y and b in (:z) or not contains(a, :w)"},
		{"", "attribute_exists (a)"},
		{"", "a in(:v)"},
		{"", "(attribute_exists(a))"},
		{"", "begins_with(:str, a)"},
		{"", "#name1.#name2 = :two"},
	} {
		if _, err := Parse(c.u, c.c); err != nil {
			t.Errorf("Parse(%q, %q): %v", c.u, c.c, err)
		}
	}
}

func TestBindMapErrors(t *testing.T) {
	p := mustParse(t, "SET #a = :a", "")
	for _, c := range []struct {
		n    names
		v    values
		want string
	}{
		{names{}, values{}, "ExpressionAttributeNames must not be empty"},
		{names{"#a": "x"}, values{}, "ExpressionAttributeValues must not be empty"},
		{names{"a": "a"}, values{}, `ExpressionAttributeNames contains invalid key: Syntax error; key: "a"`}, // [aws] dynalite
		{names{"#a": "x"}, values{":a": N(1), "b": S("a")}, `ExpressionAttributeValues contains invalid key: Syntax error; key: "b"`},
		{names{"#a": "x", "#a b": "y"}, values{":a": N(1)}, `ExpressionAttributeNames contains invalid key: Syntax error; key: "#a b"`},
		{names{"#a": "x", "": "y"}, values{":a": N(1)}, "ExpressionAttributeNames contains invalid key: The expression attribute map contains an empty key;"},
		{names{"#a": "x", "#" + strings.Repeat("b", 255): "y"}, values{":a": N(1)}, "ExpressionAttributeNames contains invalid key: The expression attribute map contains a key that is too long; size of key: 256"},
		{names{"#a": "x"}, values{":a": N(1), ":" + strings.Repeat("b", 255): N(1)}, "ExpressionAttributeValues contains invalid key: The expression attribute map contains a key that is too long;"},
		{names{"#a": "x"}, values{":a": {}}, "ExpressionAttributeValues contains invalid value: Supplied AttributeValue is empty, must contain exactly one of the supported datatypes for key :a"}, // [aws] dynalite
		{names{"#a": "x"}, values{":a": N(1), ":b": {}}, "ExpressionAttributeValues contains invalid value: Supplied AttributeValue is empty, must contain exactly one of the supported datatypes for key :b"},
		{names{"#a": ""}, values{":a": N(1)}, "ExpressionAttributeNames contains invalid value: Empty attribute name for key #a"},
		{names{"#a": strings.Repeat("x", 65536)}, values{":a": N(1)}, "ExpressionAttributeNames contains invalid value: Attribute name is too large, must be less than 65536 bytes for key #a"},
		// Unused names are checked too.
		{names{"#a": "x", "#b": ""}, values{":a": N(1)}, "ExpressionAttributeNames contains invalid value: Empty attribute name for key #b"},
		{names{"#a": "x", "#b": strings.Repeat("x", 65536)}, values{":a": N(1)}, "ExpressionAttributeNames contains invalid value: Attribute name is too large, must be less than 65536 bytes for key #b"},
		// A name of 65,535 bytes is fine; the expression goes on to its
		// unused value.
		{names{"#a": strings.Repeat("x", 65535)}, values{":a": N(1), ":b": N(2)}, "Value provided in ExpressionAttributeValues unused in expressions: keys: {:b}"},
		{names{"#a": strings.Repeat("x", 65535), "#b": ""}, values{":a": N(1)}, "ExpressionAttributeNames contains invalid value: Empty attribute name for key #b"},
		// Order: values before names, maps before the expression.
		{names{"#a": ""}, values{":a": {}}, "ExpressionAttributeValues contains invalid value: Supplied AttributeValue is empty, must contain exactly one of the supported datatypes for key :a"},
		{names{"#b": "x"}, values{":a": N(1)}, "Invalid UpdateExpression: An expression attribute name used in the document path is not defined; attribute name: #a"},
		{nil, values{":a": N(1)}, "Invalid UpdateExpression: An expression attribute name used in the document path is not defined; attribute name: #a"},
		{names{"#a": "x"}, nil, "Invalid UpdateExpression: An expression attribute value used in expression is not defined; attribute value: :a"},
		{names{"#a": "x"}, values{":b": N(1)}, "Invalid UpdateExpression: An expression attribute value used in expression is not defined; attribute value: :a"},
	} {
		_, err := p.Bind(c.n, c.v, isKey)
		wantMessage(t, err, c.want)
	}
}

func TestBindWithoutExpressions(t *testing.T) {
	p := mustParse(t, "", "")
	if len(p.actions) > 0 || p.cond != nil {
		t.Fatal("empty expressions")
	}
	_, err := p.Bind(names{}, nil, isKey)
	wantMessage(t, err, "ExpressionAttributeNames can only be specified when using expressions")
	_, err = p.Bind(nil, values{":v": N(1)}, isKey)
	wantMessage(t, err, "ExpressionAttributeValues can only be specified when using expressions: UpdateExpression and ConditionExpression are null")
	b, err := p.Bind(nil, nil, isKey)
	if err != nil {
		t.Fatal(err)
	}
	if ok := b.Check(nil); !ok {
		t.Fatal("no condition must hold")
	}
	old := item("PK", S("p"), "SK", S("s"), "a", N(1))
	got, touched, err := b.Apply(old, testKey)
	if err != nil || touched != nil || !sameItem(got, old) {
		t.Fatalf("%v %v %v", got, touched, err)
	}
	got["a"] = N(2)
	if old["a"] != N(1) {
		t.Fatal("Apply returned the old map")
	}
}

func TestBindUpdateErrors(t *testing.T) {
	const pre = "Invalid UpdateExpression: "
	all := values{":a": S("a"), ":b": N(1), ":c": N(2), ":v": N(1), ":s": S("s"), ":v1": N(1), ":val2": N(2)}
	for _, c := range []struct {
		expr string
		n    names
		want string
	}{
		{"set a = a + :a", nil, "Incorrect operand type for operator or function; operator or function: +, operand type: S"}, // [aws] dynalite
		{"set a = :a - :c", nil, "Incorrect operand type for operator or function; operator or function: -, operand type: S"},
		{"set a = list_append(:a, a)", nil, "Incorrect operand type for operator or function; operator or function: list_append, operand type: S"},
		{"set a = list_append(a, :b)", nil, "Incorrect operand type for operator or function; operator or function: list_append, operand type: N"},
		{"set a = if_not_exists(c)", nil, "Incorrect number of operands for operator or function; operator or function: if_not_exists, number of operands: 1"},
		{"set a = list_append(c)", nil, "Incorrect number of operands for operator or function; operator or function: list_append, number of operands: 1"},
		{"set a = list_append(:v1, :val2, :b)", nil, "Incorrect number of operands for operator or function; operator or function: list_append, number of operands: 3"},
		{"set a = if_not_exists(:a, c)", nil, "Operator or function requires a document path; operator or function: if_not_exists"},
		{"set a = if_not_exists(if_not_exists(a, b), c)", nil, "Operator or function requires a document path; operator or function: if_not_exists"},
		{"SET a = if_not_exists(a, a)", nil, "The first operand must be distinct from the remaining operands for this operator or function; operator: if_not_exists, first operand: [a]"},
		{"SET a = if_not_exists(#a, a)", names{"#a": "a"}, "The first operand must be distinct from the remaining operands for this operator or function; operator: if_not_exists, first operand: [a]"},
		{"ADD a :a", nil, "Incorrect operand type for operator or function; operator: ADD, operand type: STRING, typeSet: ALLOWED_FOR_ADD_OPERAND"},
		{"DELETE a :b", nil, "Incorrect operand type for operator or function; operator: DELETE, operand type: NUMBER, typeSet: ALLOWED_FOR_ADD_OPERAND"}, // [aws] floci
		// Actions are validated last first [aws] dynalite: the ADD is reported.
		{"set b = list_append(:a, a), c = if_not_exists(a) add a.b :a", nil, "Incorrect operand type for operator or function; operator: ADD, operand type: STRING, typeSet: ALLOWED_FOR_ADD_OPERAND"},
		{"SET #c = if_not_exists(:c)", names{"#a": "a", "#b": "b"}, "An expression attribute name used in the document path is not defined; attribute name: #c"}, // [aws] dynalite
		{"SET #a = if_not_exists(:x)", names{"#a": "a"}, "An expression attribute value used in expression is not defined; attribute value: :x"},                 // [aws] dynalite
		{"SET a = :x, b = :y", nil, "An expression attribute value used in expression is not defined; attribute value: :y"},                                      // [ddbl]
		{"SET a.:v = :b", nil, "The document path cannot contain attribute value parameters; attribute value: :v"},
		{"SET " + strings.Repeat("a.", 32) + "a = :v", nil, "The document path has too many nesting levels; nesting levels: 33"},
		// "path two" is the first key of DynamoDB's HashMap: y (bucket 5)
		// before x (bucket 6), as in dynalite's "[[3]]" captures.
		{"SET x = :v, #y = :v, x = :v", names{"#y": "y"}, "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [x], path two: [y]"},
	} {
		p := mustParse(t, c.expr, "")
		var v values
		for _, ph := range p.values {
			if x, ok := all[ph]; ok {
				if v == nil {
					v = values{}
				}
				v[ph] = x
			}
		}
		_, err := p.Bind(c.n, v, isKey)
		wantMessage(t, err, pre+c.want)
	}
}

func TestBindConditionErrors(t *testing.T) {
	const pre = "Invalid ConditionExpression: "
	for _, c := range []struct {
		expr string
		n    names
		v    values
		want string
	}{
		{"attribute_exists(#Pictures.RearView, :a) and a=:a", nil, values{":a": S("a")}, "An expression attribute name used in the document path is not defined; attribute name: #Pictures"}, // [aws] dynalite
		{"(#P between :lo and :hi) and (#PC in (:cat1, :cat2))", nil, nil, "An expression attribute name used in the document path is not defined; attribute name: #P"},
		{"begins_with(:hello, #a, #b)", names{"#a": "a", "#b": "b"}, nil, "An expression attribute value used in expression is not defined; attribute value: :hello"},
		{":a < :b", nil, nil, "An expression attribute value used in expression is not defined; attribute value: :a"},
		{"attribute_exists(things, a) and a=:a", nil, values{":a": S("a")}, "Incorrect number of operands for operator or function; operator or function: attribute_exists, number of operands: 2"},
		{"attribute_type(things)", nil, nil, "Incorrect number of operands for operator or function; operator or function: attribute_type, number of operands: 1"},
		{"begins_with(things, size(a), b)", nil, nil, "Incorrect number of operands for operator or function; operator or function: begins_with, number of operands: 3"},
		{"size(things, a) > b", nil, nil, "Incorrect number of operands for operator or function; operator or function: size, number of operands: 2"},
		{"attribute_type(a, size(a)) and a=:a", nil, values{":a": N(1)}, "Incorrect operand type for operator or function; operator or function: attribute_type, operand type: N"},
		{"attribute_type(a, :a)", nil, values{":a": N(1)}, "Incorrect operand type for operator or function; operator or function: attribute_type, operand type: N"},
		{"attribute_type(a, b)", nil, nil, "Incorrect operand type for operator or function; operator or function: attribute_type, operand type: {NS,SS,L,BS,N,M,B,BOOL,NULL,S}"},
		{"attribute_type(a, :a)", nil, values{":a": S("DOG")}, "Invalid attribute type name found; type: DOG, valid types: {N,BS,L,B,NULL,M,S,SS,NS,BOOL}"},
		{"begins_with(a, size(a)) and a=:a", nil, values{":a": N(1)}, "Incorrect operand type for operator or function; operator or function: begins_with, operand type: N"},
		{"begins_with(:a, a)", nil, values{":a": N(1)}, "Incorrect operand type for operator or function; operator or function: begins_with, operand type: N"},
		{"size(size(a)) > :a", nil, values{":a": N(1)}, "Incorrect operand type for operator or function; operator or function: size, operand type: N"},
		{"attribute_not_exists(size(:a))", nil, values{":a": N(1)}, "Incorrect operand type for operator or function; operator or function: size, operand type: N"},
		{"attribute_not_exists(size(:a))", nil, values{":a": S("1")}, "Operator or function requires a document path; operator or function: attribute_not_exists"},
		{"attribute_exists(:a) and a=:a", nil, values{":a": S("1")}, "Operator or function requires a document path; operator or function: attribute_exists"},
		{"a = a AND #a = b AND :views > a", names{"#a": "a"}, values{":views": N(1)}, "The first operand must be distinct from the remaining operands for this operator or function; operator: =, first operand: [a]"},
		{"#a <> a", names{"#a": "a"}, nil, "The first operand must be distinct from the remaining operands for this operator or function; operator: <>, first operand: [a]"},
		{"((a=a) OR (a=a))", nil, nil, "The first operand must be distinct from the remaining operands for this operator or function; operator: =, first operand: [a]"},
		{"contains(ab.bc[1].a, ab.bc[1].#a)", names{"#a": "a"}, nil, "The first operand must be distinct from the remaining operands for this operator or function; operator: contains, first operand: [ab, bc, [1], a]"},
		{"attribute_type(ab.bc[1].#a, ab.bc[1].a)", names{"#a": "a"}, nil, "The first operand must be distinct from the remaining operands for this operator or function; operator: attribute_type, first operand: [ab, bc, [1], a]"},
		{"a between :b and :a", nil, values{":a": S("a"), ":b": N(1)}, "The BETWEEN operator requires same data type for lower and upper bounds; lower bound operand: AttributeValue: {N:1}, upper bound operand: AttributeValue: {S:a}"},
		{"a between :b and :a", nil, values{":a": S("a"), ":b": S("b")}, "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {S:b}, upper bound operand: AttributeValue: {S:a}"},
		{"a between :b and :a", nil, values{":a": N(-5), ":b": N(2)}, "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {N:2}, upper bound operand: AttributeValue: {N:-5}"},
		{"a IN (" + placeholders(101) + ")", nil, numbered(101), "The IN operator is provided with too many operands; number of operands: 101"},
		{strings.Repeat("a = :v AND ", 150) + "a = :v", nil, values{":v": N(1)}, "The expression contains too many operators; operator count: 301"},
		{"attribute_exists(" + strings.Repeat("a.", 32) + "a)", nil, nil, "The document path has too many nesting levels; nesting levels: 33"},
	} {
		_, err := mustParse(t, "", c.expr).Bind(c.n, c.v, isKey)
		wantMessage(t, err, pre+c.want)
	}
	// Limits that are not exceeded.
	bind(t, "", "a IN ("+placeholders(100)+")", nil, numbered(100))
	bind(t, "", strings.Repeat("a = :v AND ", 149)+"a = :v", nil, values{":v": N(1)})
}

func placeholders(n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(":v" + strconv.Itoa(i))
	}
	return sb.String()
}

func numbered(n int) values {
	v := values{}
	for i := 0; i < n; i++ {
		v[":v"+strconv.Itoa(i)] = N(int64(i))
	}
	return v
}

// After 12 keys Java's HashMap doubles its table; the first key changes
// accordingly (expected value computed by an independent model of
// java.util.HashMap).
func TestOverlapAfterHashMapResize(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("SET ")
	for i := 0; i < 14; i++ {
		sb.WriteString("tok" + strconv.Itoa(i) + " = :v, ")
	}
	sb.WriteString("tok0 = :v")
	_, err := mustParse(t, sb.String(), "").Bind(nil, values{":v": N(1)}, isKey)
	wantMessage(t, err, "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [tok0], path two: [tok5]")
}

func TestCheckFunctions(t *testing.T) {
	it := item("s", S("hello"), "n", N(5), "e", S(""), "u", S("é😀"), "z", S("z"), "neg", N(-3))
	all := values{":hell": S("hell"), ":dog": S("dog"), ":ell": S("ell"), ":S": S("S"), ":N": S("N"), ":five": N(5),
		":empty": S(""), ":three": N(3), ":e": S("é"), ":four": N(-4), ":zero": N(0), ":hello": S("hello"), ":hellohi": S("hellohi")}
	for _, c := range []struct {
		cond string
		want bool
	}{
		{"begins_with(s, :hell)", true}, {"begins_with(s, :dog)", false}, {"begins_with(s, :empty)", true},
		{"begins_with(:hellohi, s)", true}, {"begins_with(q, :hell)", false}, {"begins_with(s, q)", false},
		{"contains(s, :ell)", true}, {"contains(s, :dog)", false}, {"contains(s, :empty)", true}, {"contains(n, :five)", false},
		{"attribute_type(s, :S)", true}, {"attribute_type(s, :N)", false}, {"attribute_type(n, :N)", true}, {"attribute_type(q, :S)", false},
		{"attribute_type(:five, :N)", true},
		{"size(s) = :five", true}, {"size(e) = :zero", true}, {"size(u) = :three", true}, // size counts UTF-16 code units
		{"size(:hello) = :five", true}, {"size(s) > :three", true},
		{"s BETWEEN :hell AND :hello", true}, {"n BETWEEN :three AND :five", true}, {"neg BETWEEN :four AND :zero", true},
		{"n BETWEEN :zero AND :three", false},
		{"z < :e", true}, // byte order: "z" (0x7a) < "é" (0xc3 0xa9)
		{"s IN (:dog, :five, :hello)", true}, {"n IN (:dog, :five)", true}, {"n IN (:three)", false},
		{"attribute_exists(s.x)", false}, {"attribute_not_exists(s[0])", true}, {"s.x = :hello", false},
		{"attribute_exists(s) AND NOT attribute_exists(q)", true},
	} {
		b := bindCond(t, c.cond, all)
		if got := b.Check(it); got != c.want {
			t.Errorf("%s: got %v, want %v", c.cond, got, c.want)
		}
	}
	if ok := bind(t, "SET a = :v", "", nil, values{":v": N(1)}).Check(nil); !ok {
		t.Fatal("no condition must be true")
	}
}

func TestApplySemantics(t *testing.T) {
	const maxInt, minInt = int64(^uint64(0) >> 1), -int64(^uint64(0)>>1) - 1
	old := item("PK", S("p"), "SK", S("s"), "n", N(5), "s", S("str"), "big", N(maxInt), "small", N(minInt))
	all := values{":one": N(1), ":two": N(2), ":s": S("x"), ":l": S("l")}
	for _, c := range []struct {
		expr string
		want store.Item // changed attributes; nil value means removed
		err  string
	}{
		{"SET a = n", item("a", N(5)), ""},
		{"SET a = s", item("a", S("str")), ""},
		{"SET a = :s", item("a", S("x")), ""},
		{"SET n = n + :two", item("n", N(7)), ""},
		{"SET n = :one - n", item("n", N(-4)), ""},
		{"SET a = if_not_exists(n, :one)", item("a", N(5)), ""},
		{"SET a = if_not_exists(q, :one)", item("a", N(1)), ""},
		{"SET a = if_not_exists(n, q)", nil, msgAttrNotFound},
		{"SET a = q", nil, msgAttrNotFound},
		{"SET a = s + :one", nil, msgIncorrectType},
		{"SET a = :one + s", nil, msgIncorrectType},
		{"SET a = q + s", nil, msgAttrNotFound},
		{"SET a = s + q", nil, msgIncorrectType},
		{"SET a = if_not_exists(q, :s) + :one", nil, msgIncorrectType},
		{"SET a = list_append(q, r)", nil, msgAttrNotFound},
		{"SET a = list_append(s, q)", nil, msgIncorrectType},
		{"ADD s :one", nil, msgIncorrectType},
		{"ADD big :one", nil, msgOverflow},
		{"SET a = big + :one", nil, msgOverflow},
		{"SET a = small - :one", nil, msgOverflow},
		{"SET a = :one - small", nil, msgOverflow},
		{"ADD small :one", item("small", N(minInt+1)), ""},
		{"REMOVE s, q", item("s", store.Value{}), ""},
		{"REMOVE s.x", nil, msgDocPath},
		{"ADD s.x :one", nil, msgDocPath},
		{"SET q.x = :one", nil, msgDocPath},
		{"SET a = s.x", nil, msgAttrNotFound},
		// Several faults: DynamoDB stops at the first key of its HashMap,
		// "x" before "s" whatever the text order.
		{"SET x = y + :one, s = s + :one", nil, msgAttrNotFound},
		{"SET s = s + :one, x = y + :one", nil, msgAttrNotFound},
	} {
		p := mustParse(t, c.expr, "")
		v := values{}
		for _, ph := range p.values {
			v[ph] = all[ph]
		}
		if len(v) == 0 {
			v = nil
		}
		b, err := p.Bind(nil, v, isKey)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		got, _, err := b.Apply(old, testKey)
		if c.err != "" {
			wantMessage(t, err, c.err)
			if got != nil {
				t.Errorf("%s: item returned with an error", c.expr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		want := old.Clone()
		for k, x := range c.want {
			if x.IsValid() {
				want[k] = x
			} else {
				delete(want, k)
			}
		}
		if !sameItem(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", c.expr, got, want)
		}
	}
	if len(old) != 6 || old["n"] != N(5) {
		t.Fatal("old item modified")
	}
	// REMOVE of a nested path on a missing item is ignored (Alternator
	// test_nested_attribute_remove_from_missing_item, verified against AWS).
	got, touched, err := bind(t, "REMOVE x.y", "", nil, nil).Apply(nil, testKey)
	if got != nil || touched != nil || err != nil {
		t.Fatalf("REMOVE x.y on a missing item: %v %v %v", got, touched, err)
	}
	_, _, err = bind(t, "SET c.c = :one", "", nil, values{":one": N(1)}).Apply(nil, testKey)
	wantMessage(t, err, msgDocPath)
}

func TestTouchedSortedAndStable(t *testing.T) {
	b := bind(t, "SET z = :v, a = :v REMOVE m ADD b :v", "", nil, values{":v": N(1)})
	_, touched, err := b.Apply(item("m", N(1)), testKey)
	if err != nil || strings.Join(touched, ",") != "a,b,m,z" {
		t.Fatalf("touched %v %v", touched, err)
	}
}

// Bind remembers the last resolution that passed; a request that differs in
// names, value types or checked value contents is validated afresh.
func TestBindMemoDoesNotHideFaults(t *testing.T) {
	p := mustParse(t, "ADD #n :d", "attribute_type(#n, :t) AND #n BETWEEN :lo AND :hi")
	ok := values{":d": N(1), ":t": S("N"), ":lo": N(1), ":hi": N(2)}
	for i := 0; i < 2; i++ {
		if _, err := p.Bind(names{"#n": "a"}, ok, isKey); err != nil {
			t.Fatal(err)
		}
	}
	with := func(k string, v store.Value) values {
		c := values{}
		for kk, vv := range ok {
			c[kk] = vv
		}
		c[k] = v
		return c
	}
	_, err := p.Bind(names{"#n": "a"}, with(":d", S("x")), isKey)
	wantMessage(t, err, "Invalid UpdateExpression: Incorrect operand type for operator or function; operator: ADD, operand type: STRING, typeSet: ALLOWED_FOR_ADD_OPERAND")
	_, err = p.Bind(names{"#n": "a"}, with(":t", S("DOG")), isKey)
	wantMessage(t, err, "Invalid ConditionExpression: Invalid attribute type name found; type: DOG, valid types: {N,BS,L,B,NULL,M,S,SS,NS,BOOL}")
	_, err = p.Bind(names{"#n": "a"}, with(":lo", N(3)), isKey)
	wantMessage(t, err, "Invalid ConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {N:3}, upper bound operand: AttributeValue: {N:2}")
	_, err = p.Bind(names{"#n": "PK"}, ok, isKey)
	wantMessage(t, err, "One or more parameter values were invalid: Cannot update attribute PK. This attribute is part of the key")
	p2 := mustParse(t, "SET #a = :v, #b = :v", "")
	if _, err := p2.Bind(names{"#a": "x", "#b": "y"}, values{":v": N(1)}, isKey); err != nil {
		t.Fatal(err)
	}
	_, err = p2.Bind(names{"#a": "x", "#b": "x"}, values{":v": N(1)}, isKey)
	wantMessage(t, err, "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [x], path two: [x]")
	b, err := p2.Bind(names{"#a": "y", "#b": "x"}, values{":v": N(1)}, isKey)
	if err != nil || strings.Join(b.touched, ",") != "x,y" {
		t.Fatalf("%v %v", b, err)
	}
}
