package dynamo

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardlimit/limiter/store"
)

func TestNumbersRoundTripExactly(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 1 << 53, 1<<53 + 1, -(1<<53 + 1), 1_700_000_000_000_000, math.MaxInt64, math.MinInt64} {
		av, err := encodeValue("n", store.Int(n))
		if err != nil {
			t.Fatal(err)
		}
		if got := av.(*types.AttributeValueMemberN).Value; got != strconv.FormatInt(n, 10) {
			t.Errorf("encode %d = %q", n, got)
		}
		v, err := decodeValue("n", av)
		if err != nil {
			t.Fatalf("decode %d: %v", n, err)
		}
		if got, _ := v.AsInt(); got != n {
			t.Errorf("round trip %d = %d", n, got)
		}
	}
}

func TestParseIntAcceptsAnyIntegerNotation(t *testing.T) {
	// DynamoDB Local stores numbers as sent ("1e3" stays "1e3"); real
	// DynamoDB normalizes them. Both must read back as the same int64.
	for s, want := range map[string]int64{
		"1e3": 1000, "1E+3": 1000, "100.00": 100, "-0": 0, "0.0": 0, "-5.000": -5,
		"12345678901234567e2": 1234567890123456700, "9223372036854775807": math.MaxInt64,
		"-9223372036854775808": math.MinInt64, "92233720368547758.07e2": math.MaxInt64,
	} {
		got, err := parseInt(s)
		if err != nil || got != want {
			t.Errorf("parseInt(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for s, reason := range map[string]string{
		"1.5":                    "not an integer",
		"0.001":                  "not an integer",
		"9223372036854775808":    "int64 range",
		"-9223372036854775809":   "int64 range",
		"1E+19":                  "int64 range",
		"1E+125":                 "int64 range",
		"1e999999999":            "not a DynamoDB number",
		"abc":                    "not a number",
		"":                       "not a number",
		strings.Repeat("9", 300): "not a DynamoDB number",
	} {
		if _, err := parseInt(s); err == nil || !strings.Contains(err.Error(), reason) {
			t.Errorf("parseInt(%q) error = %v, want one saying %q", s, err, reason)
		}
	}
}

func TestDecodeRejectsOtherTypesNamingTheAttribute(t *testing.T) {
	for typ, av := range map[string]types.AttributeValue{
		"BOOL": &types.AttributeValueMemberBOOL{Value: true},
		"NULL": &types.AttributeValueMemberNULL{Value: true},
		"B":    &types.AttributeValueMemberB{Value: []byte("x")},
		"L":    &types.AttributeValueMemberL{},
		"M":    &types.AttributeValueMemberM{},
		"SS":   &types.AttributeValueMemberSS{Value: []string{"a"}},
		"NS":   &types.AttributeValueMemberNS{Value: []string{"1"}},
		"BS":   &types.AttributeValueMemberBS{},
	} {
		_, err := decodeItem(map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: "a"}, "b_gpt-3.5_tk": av,
		})
		var de *DecodeError
		if !errors.As(err, &de) || de.Attribute != "b_gpt-3.5_tk" || de.Type != typ {
			t.Errorf("%s: error %v (%#v), want a DecodeError naming b_gpt-3.5_tk", typ, err, de)
		}
		if err != nil && !strings.Contains(err.Error(), `"b_gpt-3.5_tk"`) {
			t.Errorf("%s: message %q does not name the attribute", typ, err)
		}
	}
	_, err := decodeItem(map[string]types.AttributeValue{"f": &types.AttributeValueMemberN{Value: "0.5"}})
	var de *DecodeError
	if !errors.As(err, &de) || de.Attribute != "f" || de.Value != "0.5" {
		t.Errorf("fraction: %v", err)
	}
}

func TestEncodeRejectsTheZeroValue(t *testing.T) {
	_, err := encodeItem(store.Item{"PK": store.Str("a"), "x": {}})
	if !errors.Is(err, store.ErrValidation) || !strings.Contains(err.Error(), "x") {
		t.Errorf("zero value in an item: %v", err)
	}
	_, _, err = encodeExpr(store.Expr{Update: "SET #a = :v", Values: map[string]store.Value{":v": {}}})
	if !errors.Is(err, store.ErrValidation) {
		t.Errorf("zero value in an expression: %v", err)
	}
}

func TestEncodeExprKeepsEmptyMapsForDynamoDBToJudge(t *testing.T) {
	names, values, err := encodeExpr(store.Expr{Names: map[string]string{}, Values: map[string]store.Value{}})
	if err != nil || names == nil || values == nil {
		t.Errorf("empty maps: %v %v %v", names, values, err)
	}
	names, values, _ = encodeExpr(store.Expr{})
	if names != nil || values != nil {
		t.Errorf("nil maps became %v %v", names, values)
	}
}

func TestWriteUnitsEstimate(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	for _, c := range []struct {
		name string
		item map[string]types.AttributeValue
		size int
		wcu  float64
	}{
		{"no item", nil, 0, 1},
		{"small", map[string]types.AttributeValue{"PK": s("abc"), "SK": s("#STATE")}, 2 + 3 + 2 + 6, 1},
		// 12345: 5 significant digits -> 3 bytes + 1; -100: 1 digit -> 1 + 1 + 1 (sign).
		{"numbers", map[string]types.AttributeValue{"n": n("12345"), "m": n("-100")}, 1 + 4 + 1 + 3, 1},
		{"exactly 1 KB", map[string]types.AttributeValue{"PK": s(strings.Repeat("a", 1022))}, 1024, 1},
		{"just over 1 KB", map[string]types.AttributeValue{"PK": s(strings.Repeat("a", 1023))}, 1025, 2},
		{"3.5 KB", map[string]types.AttributeValue{"big": s(strings.Repeat("a", 3581))}, 3584, 4},
	} {
		if got := itemSize(c.item); got != c.size {
			t.Errorf("%s: size %d, want %d", c.name, got, c.size)
		}
		if got := writeUnitsFor(c.item); got != c.wcu {
			t.Errorf("%s: %v WCU, want %v", c.name, got, c.wcu)
		}
	}
}

func TestCapacityOf(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	// What DynamoDB (Local) answers for an UpdateItem that created the
	// item's entry in one index, with ReturnConsumedCapacity=INDEXES.
	cc := &types.ConsumedCapacity{
		CapacityUnits:          f(2),
		Table:                  &types.Capacity{CapacityUnits: f(1)},
		GlobalSecondaryIndexes: map[string]types.Capacity{"GSI2": {CapacityUnits: f(1)}},
	}
	if got, want := capacityOf(cc, true), (store.Capacity{WriteUnits: 2, IndexWriteUnits: 1}); got != want {
		t.Errorf("write: %+v, want %+v", got, want)
	}
	// A query of an index bills reads on the index; none of it is an
	// index write.
	if got, want := capacityOf(cc, false), (store.Capacity{ReadUnits: 2}); got != want {
		t.Errorf("read: %+v, want %+v", got, want)
	}
	split := &types.ConsumedCapacity{CapacityUnits: f(3), ReadCapacityUnits: f(1), WriteCapacityUnits: f(2)}
	if got, want := capacityOf(split, true), (store.Capacity{ReadUnits: 1, WriteUnits: 2}); got != want {
		t.Errorf("split: %+v, want %+v", got, want)
	}
	if got := capacities([]types.ConsumedCapacity{*cc, *cc}, true); got.WriteUnits != 4 || got.IndexWriteUnits != 2 {
		t.Errorf("sum: %+v", got)
	}
	if got := capacityOf(nil, true); got != (store.Capacity{}) {
		t.Errorf("nil: %+v", got)
	}
}
