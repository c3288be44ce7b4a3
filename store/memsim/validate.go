package memsim

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim/internal/expr"
)

// DynamoDB's validation messages that memsim produces itself (the
// expression engine produces the expression ones).
const (
	msgEmptyValue          = "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
	msgItemTooLarge        = "Item size has exceeded the maximum allowed size"
	msgUpdateTooLarge      = "Item size to update has exceeded the maximum allowed size"
	msgTooManyActions      = "1 validation error detected at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100"
	msgNoActions           = "1 validation error detected at 'transactItems' failed to satisfy constraint: Member must have length greater than or equal to 1"
	msgOneMember           = "TransactItems can only contain one of Check, Put, Update or Delete"
	msgSameItem            = "Transaction request cannot include multiple operations on one item"
	msgTxnTooLarge         = "Transaction request cannot exceed the maximum allowed size of 4 MB"
	msgIdempotentMismatch  = "IdempotentParameterMismatchException: DynamoDB rejected the request because you retried a request with a different payload but with an idempotent token that was already used."
	msgTooManyKeys         = "Too many items requested for the BatchGetItem call."
	msgNoKeys              = "1 validation error detected: Value at 'requestItems.1.member.keys' failed to satisfy constraint: Member must have length greater than or equal to 1"
	msgDuplicateKeys       = "Provided list of item keys contains duplicates"
	msgConsistentOnIndex   = "Consistent reads are not supported on global secondary indexes"
	msgNamesWithoutExpr    = "ExpressionAttributeNames can only be specified when using expressions"
	msgValuesWithoutExpr   = "ExpressionAttributeValues can only be specified when using expressions"
	msgPutReturnValues     = "Return values set to invalid value"
	msgUpdateInPut         = "An update expression is not allowed in this operation: only a condition expression is"
	msgCheckNeedsCondition = "1 validation error detected: Value null at 'conditionExpression' failed to satisfy constraint: Member must not be null"
	msgOneWrite            = "A Write must set exactly one of Put, Update or Delete"
	msgCheckAlone          = "A Write with a Check is accepted only in TransactWrite"
	msgEmptyAttrName       = "One or more parameter values were invalid: An attribute name cannot be empty"
	msgPKTooLarge          = "One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of 2048 bytes"
	msgSKTooLarge          = "One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of 1024 bytes"
)

func verr(msg string) error { return &store.ValidationError{Message: msg} }

func msgEmptyKey(name string) string {
	return "One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: " + name
}

func msgBadReturn(r store.ReturnValue) string {
	return "1 validation error detected: Value '" + r.String() + "' at 'returnValues' failed to satisfy constraint: Member must satisfy enum value set: [ALL_NEW, UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]"
}

func msgBadLimit(n int) string {
	return "1 validation error detected: Value '" + strconv.Itoa(n) + "' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1"
}

// checkKey validates a request key.
func (s *Store) checkKey(k store.Key) error {
	switch {
	case k.PK == "":
		return verr(msgEmptyKey(s.schema.PartitionKey))
	case k.SK == "":
		return verr(msgEmptyKey(s.schema.SortKey))
	case len(k.PK) > MaxPartitionKeySize:
		return verr(msgPKTooLarge)
	case len(k.SK) > MaxSortKeySize:
		return verr(msgSKTooLarge)
	}
	return nil
}

// checkPutItem validates a whole item for Put and returns its key.
func (s *Store) checkPutItem(it store.Item) (store.Key, error) {
	// Invalid values and names first, as DynamoDB parses the request before
	// it looks at the schema. Neither message names the attribute, so map
	// order cannot show.
	for name, v := range it {
		if !v.IsValid() {
			return store.Key{}, verr(msgEmptyValue)
		}
		if name == "" {
			return store.Key{}, verr(msgEmptyAttrName)
		}
	}
	var key [2]string
	for i, name := range [2]string{s.schema.PartitionKey, s.schema.SortKey} {
		v, ok := it[name]
		if !ok {
			return store.Key{}, verr("One or more parameter values were invalid: Missing the key " + name + " in the item")
		}
		str, ok := v.AsString()
		if !ok {
			return store.Key{}, verr("One or more parameter values were invalid: Type mismatch for key " + name + " expected: S actual: " + v.Kind())
		}
		if str == "" {
			return store.Key{}, verr(msgEmptyKey(name))
		}
		key[i] = str
	}
	k := store.Key{PK: key[0], SK: key[1]}
	if err := s.checkKey(k); err != nil {
		return k, err
	}
	return k, s.checkIndexKeys(it)
}

// checkIndexKeys validates the index key attributes an item carries: they
// must be non-empty strings.
func (s *Store) checkIndexKeys(it store.Item) error {
	for _, ix := range s.schema.Indexes {
		for _, name := range [2]string{ix.PartitionKey, ix.SortKey} {
			v, ok := it[name]
			if !ok {
				continue
			}
			str, ok := v.AsString()
			if !ok {
				return verr("One or more parameter values were invalid: Type mismatch for Index Key " + name + " Expected: S Actual: " + v.Kind() + " IndexName: " + ix.Name)
			}
			if str == "" {
				return verr("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: " + ix.Name + ", IndexKey: " + name)
			}
		}
	}
	return nil
}

// Parsed expressions, shared by all stores: parsing is pure, and the
// limiter sends a small set of expression texts.
var (
	exprCache  sync.Map // exprKey -> *exprResult
	exprCached atomic.Int64
)

const maxExprCache = 1 << 14

type exprKey struct{ update, condition string }

type exprResult struct {
	p   *expr.Parsed
	err error
}

func parse(update, condition string) (*expr.Parsed, error) {
	k := exprKey{update, condition}
	if v, ok := exprCache.Load(k); ok {
		r := v.(*exprResult)
		return r.p, r.err
	}
	p, err := expr.Parse(update, condition)
	if exprCached.Load() < maxExprCache {
		if _, loaded := exprCache.LoadOrStore(k, &exprResult{p, err}); !loaded {
			exprCached.Add(1)
		}
	}
	return p, err
}

// bind parses and binds e. It returns nil, nil when e has neither an
// update nor a condition (and then no names or values either). allowUpdate
// is false for Put, Delete and Check.
func (s *Store) bind(e store.Expr, allowUpdate bool) (*expr.Bound, error) {
	if e.Update != "" && !allowUpdate {
		return nil, verr(msgUpdateInPut)
	}
	if e.Update == "" && e.Condition == "" {
		if len(e.Names) > 0 {
			return nil, verr(msgNamesWithoutExpr)
		}
		if len(e.Values) > 0 {
			return nil, verr(msgValuesWithoutExpr)
		}
		return nil, nil
	}
	p, err := parse(e.Update, e.Condition)
	if err != nil {
		return nil, err
	}
	return p.Bind(e.Names, e.Values, s.isKey)
}
