package dynamo

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardlimit/limiter/store"
)

// DecodeError reports a stored attribute that is not a store value: a
// number that is not an integer or does not fit in an int64, or an attribute
// of a DynamoDB type other than S and N.
//
// A read returns it as is (nothing changed). A write that applied but whose
// returned attributes cannot be decoded returns it inside a
// *store.UnavailableError with OutcomeUnknown set, because the write did
// happen. A write whose condition failed returns an error matching both
// store.ErrConditionFailed and *DecodeError, with no old item.
type DecodeError struct {
	// Attribute is the attribute's name.
	Attribute string
	// Type is its DynamoDB type descriptor ("N", "BOOL", "L", ...), or ""
	// when unknown.
	Type string
	// Value is the number as DynamoDB sent it, for a number.
	Value string
	// Reason says what is wrong.
	Reason string
}

// Error says which attribute holds what, and why it is not a store value.
func (e *DecodeError) Error() string {
	if e == nil {
		return "dynamo: cannot decode an attribute"
	}
	s := fmt.Sprintf("dynamo: attribute %q", e.Attribute)
	if e.Type != "" {
		s += " (" + e.Type
		if e.Value != "" {
			s += " " + e.Value
		}
		s += ")"
	}
	return s + ": " + e.Reason
}

// encodeValue converts a store value. The zero Value is rejected.
func encodeValue(name string, v store.Value) (types.AttributeValue, error) {
	if s, ok := v.AsString(); ok {
		return &types.AttributeValueMemberS{Value: s}, nil
	}
	if n, ok := v.AsInt(); ok {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}, nil
	}
	return nil, validationf("attribute %s has an invalid (zero) value", name)
}

func encodeItem(it store.Item) (map[string]types.AttributeValue, error) {
	m := make(map[string]types.AttributeValue, len(it))
	for k, v := range it {
		av, err := encodeValue(k, v)
		if err != nil {
			return nil, err
		}
		m[k] = av
	}
	return m, nil
}

func (s *Store) encodeKey(k store.Key) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{s.schema.PartitionKey: &types.AttributeValueMemberS{Value: k.PK}}
	if s.schema.SortKey != "" {
		m[s.schema.SortKey] = &types.AttributeValueMemberS{Value: k.SK}
	}
	return m
}

// encodeExpr passes the placeholder maps through unchanged, as DynamoDB
// must judge them: a nil map stays absent, an empty one is sent empty.
func encodeExpr(e store.Expr) (map[string]string, map[string]types.AttributeValue, error) {
	if e.Values == nil {
		return e.Names, nil, nil
	}
	values, err := encodeItem(e.Values)
	if err != nil {
		return nil, nil, err
	}
	return e.Names, values, nil
}

// decodeItem converts a DynamoDB item; an empty or nil map is no item.
func decodeItem(m map[string]types.AttributeValue) (store.Item, error) {
	if len(m) == 0 {
		return nil, nil
	}
	it := make(store.Item, len(m))
	for k, av := range m {
		v, err := decodeValue(k, av)
		if err != nil {
			return nil, err
		}
		it[k] = v
	}
	return it, nil
}

func decodeValue(name string, av types.AttributeValue) (store.Value, error) {
	switch av := av.(type) {
	case *types.AttributeValueMemberS:
		return store.Str(av.Value), nil
	case *types.AttributeValueMemberN:
		n, err := parseInt(av.Value)
		if err != nil {
			return store.Value{}, &DecodeError{Attribute: name, Type: "N", Value: av.Value, Reason: err.Error()}
		}
		return store.Int(n), nil
	}
	return store.Value{}, &DecodeError{Attribute: name, Type: typeName(av),
		Reason: "unsupported type: the store holds only strings (S) and int64 numbers (N)"}
}

// parseInt converts a DynamoDB number to an int64, exactly. DynamoDB sends
// integers in plain decimal; the slow path accepts any decimal notation
// ("1E+3", "100.0") as long as the value is an integer in range.
func parseInt(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	// Bound the work: DynamoDB numbers have at most 38 significant digits
	// and exponents within ±130; a longer string is not from DynamoDB.
	if len(s) > 200 {
		return 0, fmt.Errorf("not a DynamoDB number")
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		if e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+")); err != nil || e > 200 || e < -200 {
			return 0, fmt.Errorf("not a DynamoDB number")
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, fmt.Errorf("not a number")
	}
	if !r.IsInt() {
		return 0, fmt.Errorf("not an integer; the store holds only int64 numbers")
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("out of the int64 range")
	}
	return r.Num().Int64(), nil
}

// typeName is DynamoDB's type descriptor of av ("BOOL", "L", ...), from the
// name of the SDK's member type.
func typeName(av types.AttributeValue) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", av), "*types.AttributeValueMember")
}

// itemSize is DynamoDB's item size in bytes: per attribute, the length of
// its name plus the size of its value (AWS developer guide, "Item sizes and
// formats").
func itemSize(m map[string]types.AttributeValue) int {
	n := 0
	for k, v := range m {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(av types.AttributeValue) int {
	switch av := av.(type) {
	case *types.AttributeValueMemberS:
		return len(av.Value)
	case *types.AttributeValueMemberN:
		return numberSize(av.Value)
	case *types.AttributeValueMemberB:
		return len(av.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range av.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range av.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range av.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, v := range av.Value {
			n += 1 + valueSize(v)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, v := range av.Value {
			n += 1 + len(k) + valueSize(v)
		}
		return n
	}
	return 0
}

// numberSize is the stored size of a number: one byte per two significant
// digits, plus one, plus one more for a negative number.
func numberSize(s string) int {
	neg := strings.HasPrefix(s, "-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	digits := strings.TrimLeft(strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s), "0")
	digits = strings.TrimRight(digits, "0")
	n := utf8.RuneCountInString(digits)
	size := (n+1)/2 + 1
	if neg {
		size++
	}
	return size
}

// writeUnitsFor is what DynamoDB bills for a write that failed its
// condition: 1 WCU when there was no item, else the item's size in 1 KB
// units, rounded up.
func writeUnitsFor(old map[string]types.AttributeValue) float64 {
	if len(old) == 0 {
		return 1
	}
	return float64((itemSize(old) + 1023) / 1024)
}
