package storetest

import (
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Malformed requests: each fails with a *store.ValidationError and changes
// nothing.
//
// Messages are compared by a stable substring only where DynamoDB and
// DynamoDB Local 3.3.1 use the same words; the comment of each case quotes
// the message DynamoDB Local 3.3.1 returned for exactly this request (and
// AWS's text where it differs, from DynamoDB's documentation and from
// DynamoDB-compatibility test suites verified against AWS). Backends should
// return these texts; the suite holds them to the substring only.

var validationCases = []testCase{
	{"Update", func(f *fixture) {
		overlapSetRemove := raw("SET #a = :v REMOVE #a", "", nameN, value1)
		runValidationCases(f, "Update", []validationCase{
			// "Invalid UpdateExpression: Two document paths overlap with each
			// other; must remove or rewrite one of these paths; path one: [n],
			// path two: [n]"
			{name: "OverlappingPathsSetRemove", expr: overlapSetRemove, substr: "overlap"},
			{name: "OverlappingPathsAddSet", upd: store.Update{}.Add("n", store.Int(-1)).Set("n", store.Int(5)), substr: "overlap"},
			{name: "OverlappingPathsTwoPlaceholders", expr: raw("SET #a = :v, #b = :w", "",
				map[string]string{"#a": "n", "#b": "n"},
				map[string]store.Value{":v": store.Int(1), ":w": store.Int(2)}), substr: "overlap"},
			// Checked before the item is read: fails on a missing item too.
			{name: "OverlappingPathsOnMissingItem", missing: true, expr: overlapSetRemove, substr: "overlap"},

			// "Value provided in ExpressionAttributeValues unused in
			// expressions: keys: {:w}"
			{name: "UnusedValue", expr: raw("SET #a = :v", "", nameN,
				map[string]store.Value{":v": store.Int(1), ":w": store.Int(2)}), substr: "unused"},
			// "Value provided in ExpressionAttributeNames unused in
			// expressions: keys: {#b}"
			{name: "UnusedName", expr: raw("SET #a = :v", "", map[string]string{"#a": "n", "#b": "s"}, value1), substr: "unused"},
			// "Invalid UpdateExpression: An expression attribute value used in
			// expression is not defined; attribute value: :nope"
			{name: "UndefinedValue", expr: raw("SET #a = :nope", "", nameN, nil), substr: "not defined"},
			// "Invalid UpdateExpression: An expression attribute name used in
			// the document path is not defined; attribute name: #nope"
			{name: "UndefinedName", expr: raw("SET #nope = :v", "", nil, value1), substr: "not defined"},
			// "Invalid ConditionExpression: An expression attribute name used in
			// the document path is not defined; attribute name: #b"
			{name: "UndefinedNameInCondition", expr: raw("SET #a = :v", "#b = :v", nameN, value1), substr: "not defined"},

			// "One or more parameter values were invalid: Cannot update
			// attribute PK. This attribute is part of the key"
			{name: "UpdateKeyAttributeSet", upd: store.Update{}.Set(store.AttrPK, store.Str("other")), substr: "part of the key"},
			{name: "UpdateKeyAttributeRemove", upd: store.Update{}.Remove(store.AttrSK), substr: "part of the key"},
			{name: "UpdateKeyAttributeOnMissingItem", missing: true, upd: store.Update{}.Set(store.AttrSK, store.Str("other")).Add("n", store.Int(1)), substr: "part of the key"},

			// `Invalid UpdateExpression: The "SET" section can only be used
			// once in an update expression;`
			{name: "RepeatedSetClause", expr: raw("SET #a = :a SET #b = :b", "",
				map[string]string{"#a": "n", "#b": "s"},
				map[string]store.Value{":a": store.Int(2), ":b": store.Str("y")}), substr: "can only be used once"},
			// `Invalid UpdateExpression: Syntax error; token: "=", near: "= = :v"`
			{name: "SyntaxErrorInUpdate", expr: raw("SET #a = = :v", "", nameN, value1), substr: "Syntax error"},
			// `Invalid ConditionExpression: Syntax error; token: ">=", near: ">>= :v"`
			{name: "SyntaxErrorInCondition", expr: raw("SET #a = :v", "#a >>= :v", nameN, value1), substr: "Syntax error"},
			// "Invalid UpdateExpression: Invalid function name; function:
			// if_not_exist"
			{name: "UnknownFunction", expr: raw("SET #a = if_not_exist(#a, :v)", "", nameN, value1), substr: "Invalid function name"},
			// "Invalid UpdateExpression: Attribute name is a reserved keyword;
			// reserved keyword: ttl" (DynamoDB Local and dynoxide checked).
			{name: "RawReservedWord", expr: raw("SET ttl = :v", "", nil, value1), substr: "reserved keyword"},

			// "The provided expression refers to an attribute that does not
			// exist in the item"
			{name: "ArithmeticOnMissingAttribute", expr: raw("SET #a = #b + :v", "",
				map[string]string{"#a": "n", "#b": "absent"}, value1), substr: "does not exist in the item"},
			// "An operand in the update expression has an incorrect data type"
			{name: "AddToStringAttribute", upd: store.Update{}.Add("s", store.Int(1)), substr: "incorrect data type"},
			// "Invalid UpdateExpression: Incorrect operand type for operator or
			// function; operator: ADD, operand type: STRING, typeSet:
			// ALLOWED_FOR_ADD_OPERAND" (AWS omits the typeSet part)
			{name: "AddStringValue", upd: store.Update{}.Add("n", store.Str("x")), substr: "Incorrect operand type"},
			// "An operand in the update expression has an incorrect data type"
			{name: "PlusOnStringAttribute", upd: store.Update{}.SetIfNotExistsPlus("s", store.Int(0), store.Int(1)), substr: "incorrect data type"},

			// "Item size to update has exceeded the maximum allowed size"
			{
				name:   "ItemTooLarge",
				base:   func(k store.Key) store.Item { return item(k, "big", strings.Repeat("a", 300_000)) },
				upd:    store.Update{}.Set("big2", store.Str(strings.Repeat("b", 150_000))),
				substr: "maximum allowed size",
			},

			// "One or more parameter values were invalid: Type mismatch for
			// Index Key" (AWS appends "GSI2SK Expected: S Actual: N IndexName:
			// GSI2")
			{name: "IndexKeyWrongType", upd: store.Update{}.Set(store.AttrGSI2SK, store.Int(5)), substr: "Type mismatch"},
			// "One or more parameter values are not valid. The AttributeValue
			// for a key attribute cannot contain an empty string value. Key: PK"
			{name: "EmptyKeyString", op: func(f *fixture, k store.Key) error {
				_, err := f.s.Update(f.ctx, store.UpdateInput{
					Key:  store.Key{PK: "", SK: k.SK},
					Expr: f.expr(store.Update{}.Add("n", store.Int(1)), store.Condition{}),
				})
				return err
			}, substr: "empty string"},
		})
	}},
	{"Put", func(f *fixture) {
		put := func(f *fixture, in store.PutInput) error {
			_, err := f.s.Put(f.ctx, in)
			return err
		}
		big := []any{"big", strings.Repeat("x", 410*1024)}
		runValidationCases(f, "Put", []validationCase{
			// "Item size has exceeded the maximum allowed size" (400 KB =
			// 409,600 bytes, attribute names included)
			{name: "ItemTooLarge", put: big, substr: "maximum allowed size"},
			{name: "ItemTooLargeNewItem", missing: true, put: big, substr: "maximum allowed size"},

			// "Return values set to invalid value" (AWS's wording differs)
			{name: "ReturnUpdatedNew", put: []any{"n", 2}, ret: store.ReturnUpdatedNew},
			{name: "ReturnAllNew", put: []any{"n", 2}, ret: store.ReturnAllNew},
			{name: "ReturnUpdatedOld", put: []any{"n", 2}, ret: store.ReturnUpdatedOld},

			// "Value provided in ExpressionAttributeValues unused in
			// expressions: keys: {:x}"
			{name: "UnusedValueInCondition", put: []any{"n", 2}, expr: unusedInCondition, substr: "unused"},
			// "Invalid ConditionExpression: An expression attribute value used
			// in expression is not defined; attribute value: :x"
			{name: "UndefinedValueInCondition", put: []any{"n", 2}, expr: raw("", "#k = :x", map[string]string{"#k": "n"}, nil), substr: "not defined"},

			// "One of the required keys was not given a value" (AWS: "One or
			// more parameter values were invalid: Missing the key SK in the
			// item")
			{name: "MissingSortKey", op: func(f *fixture, k store.Key) error {
				return put(f, store.PutInput{Item: store.Item{store.AttrPK: store.Str(k.PK), "n": store.Int(2)}})
			}},
			// "One or more parameter values were invalid: Type mismatch for
			// key" (AWS appends "SK expected: S actual: N")
			{name: "KeyWrongType", op: func(f *fixture, k store.Key) error {
				return put(f, store.PutInput{Item: store.Item{
					store.AttrPK: store.Str(k.PK), store.AttrSK: store.Int(1), "n": store.Int(2),
				}})
			}, substr: "Type mismatch"},
			// "One or more parameter values are not valid. The AttributeValue
			// for a key attribute cannot contain an empty string value. Key: SK"
			{name: "EmptyKeyString", op: func(f *fixture, k store.Key) error {
				return put(f, store.PutInput{Item: item(store.Key{PK: k.PK, SK: ""}, "n", 2)})
			}, substr: "empty string"},
			// "One or more parameter values were invalid: Type mismatch for
			// Index Key" (AWS appends "GSI2PK Expected: S Actual: N IndexName:
			// GSI2")
			{name: "IndexKeyWrongType", put: []any{"GSI2PK", 1, "GSI2SK", "S#1"}, substr: "Type mismatch"},
			// "One or more parameter values are not valid. A value specified
			// for a secondary index key is not supported. The AttributeValue
			// for a key attribute cannot contain an empty string value.
			// IndexName: GSI3, IndexKey: GSI3PK"
			{name: "IndexKeyEmptyString", put: []any{"GSI3PK", "", "GSI3SK", "x"}, substr: "empty string"},
		})
	}},
	{"Delete", func(f *fixture) {
		runValidationCases(f, "Delete", []validationCase{
			// "Return values set to invalid value" (AWS's wording differs)
			{name: "ReturnAllNew", ret: store.ReturnAllNew},
			{name: "ReturnUpdatedOld", ret: store.ReturnUpdatedOld},
			// "Value provided in ExpressionAttributeValues unused in
			// expressions: keys: {:x}"
			{name: "UnusedValueInCondition", expr: unusedInCondition, substr: "unused"},
		})
	}},
	{"Get", func(f *fixture) {
		runValidationCases(f, "Get", []validationCase{
			// "One or more parameter values are not valid. The AttributeValue
			// for a key attribute cannot contain an empty string value. Key: SK"
			{name: "EmptyKeyString", op: func(f *fixture, k store.Key) error {
				_, err := f.s.Get(f.ctx, store.GetInput{Key: store.Key{PK: k.PK, SK: ""}, ConsistentRead: true})
				return err
			}, substr: "empty string"},
		})
	}},
}

type validationCase struct {
	name string
	// base returns the item stored at k before op runs; nil: validationBase.
	base func(k store.Key) store.Item
	// missing: no item is stored at k.
	missing bool
	// The invalid request about the item at k: op, or else the request of
	// the runner's kind: an Update of k with upd built (when it has
	// actions) or with expr; a Put of item(k, put...) or a Delete of k, with
	// expr and ret.
	op   func(f *fixture, k store.Key) error
	upd  store.Update
	expr store.Expr
	put  []any
	ret  store.ReturnValue
	// substr is a part of DynamoDB's message that the error must contain
	// ("" to check only the error's kind).
	substr string
}

func validationBase(k store.Key) store.Item {
	return item(k, "n", 1, "s", "x", "GSI2PK", "R#1", "GSI2SK", "S#1")
}

// raw is a hand-written expression.
func raw(update, cond string, names map[string]string, values map[string]store.Value) store.Expr {
	return store.Expr{Update: update, Condition: cond, Names: names, Values: values}
}

func (f *fixture) rawUpdate(k store.Key, e store.Expr) error {
	_, err := f.s.Update(f.ctx, store.UpdateInput{Key: k, Expr: e, Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true})
	return err
}

func runValidationCases(f *fixture, kind string, cases []validationCase) {
	for _, c := range cases {
		f.run(c.name, func(f *fixture) {
			k := key("invalid-" + c.name)
			var base store.Item
			if !c.missing {
				if c.base != nil {
					base = c.base(k)
				} else {
					base = validationBase(k)
				}
				f.put(base)
			}
			var err error
			switch {
			case c.op != nil:
				err = c.op(f, k)
			case kind == "Put":
				_, err = f.s.Put(f.ctx, store.PutInput{Item: item(k, c.put...), Expr: c.expr, Return: c.ret})
			case kind == "Delete":
				_, err = f.s.Delete(f.ctx, store.DeleteInput{Key: k, Expr: c.expr, Return: c.ret})
			case c.upd.Len() > 0:
				err = f.rawUpdate(k, f.expr(c.upd, store.Condition{}))
			default:
				err = f.rawUpdate(k, c.expr)
			}
			expectValidation(f.t, err, c.substr)
			f.expect(k, base)
		})
	}
}

var (
	nameN  = map[string]string{"#a": "n"}
	value1 = map[string]store.Value{":v": store.Int(1)}
	// unusedInCondition defines :x and uses only #k.
	unusedInCondition = raw("", "attribute_exists(#k)", map[string]string{"#k": store.AttrPK}, map[string]store.Value{":x": store.Int(1)})
)
