package expr

import (
	"fmt"
	"strconv"

	"github.com/shardlimit/limiter/store"
)

// DynamoDB's message texts. Where they come from:
//
//   - DynamoDB Local (decompiled, github.com/eznix86/dynamodb-local-decompiled):
//     dbenv/DbValidationError.java holds the expression messages, formatted
//     by LocalDBEnv as `<message>;` followed by ` key: value` pairs joined by
//     ","; validate/ErrorFactory.java holds the request-level ones, formatted
//     as `<message>: <detail>`.
//   - Each is confirmed against real DynamoDB where a test run against AWS
//     quotes it: dynalite's test suite (github.com/mhart/dynalite test/),
//     ScyllaDB's Alternator tests (test/alternator), moto's aws_verified
//     tests, floci's captures (github.com/floci-io/floci).

const (
	prefixUpdate    = "Invalid UpdateExpression: "
	prefixCondition = "Invalid ConditionExpression: "

	msgAttrNotFound  = "The provided expression refers to an attribute that does not exist in the item"
	msgIncorrectType = "An operand in the update expression has an incorrect data type"
	msgDocPath       = "The document path provided in the update expression is invalid for update"
	msgOverflow      = "Number overflow. Attempting to store a number with magnitude larger than supported range"
	msgSizeExceeded  = "Expression size has exceeded the maximum allowed size;"
	msgRedundant     = "The expression has redundant parentheses;"
)

// Limits of DynamoDB Local's DbConfig, which match the documented quotas.
const (
	maxExpressionSize = 4096 // UTF-16 code units of an expression string
	maxPathDepth      = 32
	maxOperators      = 300
	maxInOperands     = 100
	maxPlaceholderKey = 255   // UTF-16 code units of a placeholder
	maxAttrNameBytes  = 65535 // UTF-8 bytes of an attribute name
	typeNamesValid    = "{N,BS,L,B,NULL,M,S,SS,NS,BOOL}"
	typeNamesAll      = "{NS,SS,L,BS,N,M,B,BOOL,NULL,S}"
	addTypeSet        = ", typeSet: ALLOWED_FOR_ADD_OPERAND"
)

func validationf(format string, args ...any) error {
	return &store.ValidationError{Message: fmt.Sprintf(format, args...)}
}

// typeWord is the DocumentNodeType name DynamoDB prints for ADD and DELETE
// operands.
func typeWord(v store.Value) string {
	if v.Kind() == store.KindNumber {
		return "NUMBER"
	}
	return "STRING"
}

// attrValueString prints a value as DynamoDB's BETWEEN messages do:
// "AttributeValue: {N:1}".
func attrValueString(v store.Value) string {
	if n, ok := v.AsInt(); ok {
		return "AttributeValue: {N:" + strconv.FormatInt(n, 10) + "}"
	}
	s, _ := v.AsString()
	return "AttributeValue: {S:" + cleanUTF8(s) + "}"
}
