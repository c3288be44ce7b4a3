package expr

import (
	"fmt"

	"github.com/shardlimit/limiter/store"
)

// DynamoDB's message texts come from DynamoDB Local (decompiled,
// github.com/eznix86/dynamodb-local-decompiled: dbenv/DbValidationError.java,
// validate/ErrorFactory.java), each confirmed against real DynamoDB where a
// test run against AWS quotes it (dynalite's and Alternator's tests, moto's
// aws_verified tests, floci's captures).
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
)

func validationf(format string, args ...any) error {
	return &store.ValidationError{Message: fmt.Sprintf(format, args...)}
}

// attrValueString prints a value as DynamoDB's BETWEEN messages do:
// "AttributeValue: {N:1}".
func attrValueString(v store.Value) string {
	s, isStr := v.AsString()
	if !isStr {
		s = v.String()
	}
	return "AttributeValue: {" + v.Kind() + ":" + cleanUTF8(s) + "}"
}
