package dynamo

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/shardlimit/limiter/store"
)

// validationf returns a *store.ValidationError with a formatted message.
func validationf(format string, args ...any) error {
	return &store.ValidationError{Message: fmt.Sprintf(format, args...)}
}

// callKind says whether a failed call could have changed the table.
type callKind bool

const (
	readCall  callKind = false
	writeCall callKind = true
)

// Error codes DynamoDB sends that the SDK has no distinct Go type for, or
// that are matched by code.
const (
	codeValidation       = "ValidationException"
	codeSerialization    = "SerializationException"
	codeIdempotency      = "IdempotentParameterMismatchException"
	codeConflict         = "TransactionConflictException"
	codeInProgress       = "TransactionInProgressException"
	codeInternal         = "InternalServerError"
	codeUnavailable      = "ServiceUnavailable"
	codeRequestTimeout   = "RequestTimeout"
	codeRequestTimeoutEx = "RequestTimeoutException"
)

// notSent is the error of a call that was not made because ctx had ended.
func notSent(op string, err error) error {
	return &store.UnavailableError{Op: op, Err: err}
}

// mapError turns an SDK error into the store's typed errors. Condition
// failures and cancelled transactions are handled by the callers, which
// also account for their capacity.
func (s *Store) mapError(op string, kind callKind, key store.Key, err error) error {
	if te, ok := asThrottle(err, key); ok {
		return &store.UnavailableError{Op: op, Err: te}
	}
	var inv *smithy.InvalidParamsError
	if errors.As(err, &inv) {
		return &store.ValidationError{Message: inv.Error()}
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case codeValidation:
			verr := &store.ValidationError{Message: api.ErrorMessage()}
			if op != opTransactWrite && !(op == opPut && key == (store.Key{})) && keySchemaRefused(verr.Message) {
				// The store built the keys from its schema: the table's differ.
				return s.tableSchemaError(op, verr)
			}
			return verr
		case codeSerialization, codeIdempotency:
			return &store.ValidationError{Message: api.ErrorMessage()}
		case codeConflict:
			return fmt.Errorf("%w on %s", store.ErrTransactionConflict, key)
		case codeInternal, codeUnavailable, codeRequestTimeout, codeRequestTimeoutEx, codeInProgress:
			return &store.UnavailableError{Op: op, OutcomeUnknown: bool(kind), Err: err}
		}
		if api.ErrorFault() == smithy.FaultServer || statusCode(err) >= 500 {
			return &store.UnavailableError{Op: op, OutcomeUnknown: bool(kind), Err: err}
		}
		// A client fault the store has no type for: a missing table,
		// missing permissions, bad credentials. A configuration fault,
		// not an outage; see the package documentation.
		return fmt.Errorf("dynamo: %s on table %s: %w", op, *s.table, err)
	}
	if statusCode(err) >= 500 {
		return &store.UnavailableError{Op: op, OutcomeUnknown: bool(kind), Err: err}
	}
	// Transport failures, timeouts, cancelled contexts, unreadable answers.
	return &store.UnavailableError{Op: op, OutcomeUnknown: bool(kind) && !neverSent(err), Err: err}
}

// keySchemaMessages are DynamoDB's answers (on AWS and in DynamoDB Local)
// to a request whose keys or key condition do not fit the table's key
// schema, or that names an index the table lacks.
var keySchemaMessages = []string{
	"The provided key element does not match the schema",
	"The number of conditions on the keys is invalid",
	"One of the required keys was not given a value",
	"Missing the key ",
	"Type mismatch for key",
	"Query condition missed key schema element",
	"Condition parameter type does not match schema type",
	"The table does not have the specified index",
}

func keySchemaRefused(msg string) bool {
	return slices.ContainsFunc(keySchemaMessages, func(m string) bool { return strings.Contains(msg, m) })
}

// tableSchemaError is the error of a request the table refused because its
// keys or indexes are not the schema's.
func (s *Store) tableSchemaError(op string, verr *store.ValidationError) error {
	var want strings.Builder
	fmt.Fprintf(&want, "string keys %s and %s", s.schema.PartitionKey, s.schema.SortKey)
	for i, ix := range s.schema.Indexes {
		sep := ", "
		if i == 0 {
			sep = "; indexes "
		}
		fmt.Fprintf(&want, "%s%s (%s, %s)", sep, ix.Name, ix.PartitionKey, ix.SortKey)
	}
	return &schemaError{verr: verr, msg: fmt.Sprintf("dynamo: %s on table %q: the table's keys or indexes are not this store's "+
		"(%s); create the table with dynamo.CreateTable, which also reports how an existing table differs. DynamoDB said: %s",
		op, *s.table, want.String(), verr.Message)}
}

// schemaError names the table and the way out; it matches
// [ErrSchemaMismatch] and store.ErrValidation, and errors.As finds the
// *store.ValidationError with DynamoDB's own message.
type schemaError struct {
	msg  string
	verr *store.ValidationError
}

func (e *schemaError) Error() string   { return e.msg }
func (e *schemaError) Unwrap() []error { return []error{ErrSchemaMismatch, e.verr} }

func statusCode(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// asThrottle recognizes DynamoDB's throttling exceptions.
func asThrottle(err error, key store.Key) (*store.ThrottledError, bool) {
	var (
		pte *types.ProvisionedThroughputExceededException
		te  *types.ThrottlingException
		rle *types.RequestLimitExceeded
	)
	var reasons []types.ThrottlingReason
	var code string
	switch {
	case errors.As(err, &pte):
		code, reasons = store.ThrottleProvisionedThroughputExceeded, pte.ThrottlingReasons
	case errors.As(err, &te):
		code, reasons = store.ThrottleThrottling, te.ThrottlingReasons
	case errors.As(err, &rle):
		code, reasons = store.ThrottleRequestLimitExceeded, rle.ThrottlingReasons
	default:
		var api smithy.APIError
		if !errors.As(err, &api) {
			return nil, false
		}
		switch c := api.ErrorCode(); c {
		case store.ThrottleProvisionedThroughputExceeded, store.ThrottleThrottling, store.ThrottleRequestLimitExceeded:
			code = c
		default:
			return nil, false
		}
	}
	t := &store.ThrottledError{Code: code, Key: key}
	for _, r := range reasons {
		if r.Reason != nil {
			t.Reason = *r.Reason
			break
		}
	}
	return t, true
}

// neverSent reports whether err proves the request never left this
// process: the connection could not be made, or the name not resolved.
func neverSent(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// notApplied reports whether a failed attempt certainly changed nothing:
// DynamoDB answered with a throttle (or said an earlier attempt with the
// same token is still running), or the request was never sent.
func notApplied(err error) bool {
	if _, ok := asThrottle(err, store.Key{}); ok {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == codeInProgress {
		return true
	}
	return neverSent(err)
}

// conditionFailed builds the error of a failed condition; old is the item
// as DynamoDB returned it (always asked for), given to the caller if it
// asked.
func conditionFailed(old map[string]types.AttributeValue, wantOld bool) error {
	if !wantOld {
		return &store.ConditionFailedError{}
	}
	it, err := decodeItem(old)
	if err != nil {
		return fmt.Errorf("%w (the item as it stood is unreadable: %w)", &store.ConditionFailedError{}, err)
	}
	return &store.ConditionFailedError{Item: it}
}

// transactionCanceled maps the reasons; want[i] says whether action i
// asked for the item as it stood.
func transactionCanceled(tc *types.TransactionCanceledException, want []bool) (error, error) {
	e := &store.TransactionCanceledError{Reasons: make([]store.CancellationReason, len(tc.CancellationReasons))}
	for i, r := range tc.CancellationReasons {
		cr := store.CancellationReason{Code: aws.ToString(r.Code), Message: aws.ToString(r.Message)}
		if cr.Code == "" {
			cr.Code = store.ReasonNone
		}
		if i < len(want) && want[i] && cr.Code == store.ReasonConditionalCheckFailed {
			it, err := decodeItem(r.Item)
			if err != nil {
				return nil, fmt.Errorf("%w (the item of action %d is unreadable: %w)", e, i, err)
			}
			cr.Item = it
		}
		e.Reasons[i] = cr
	}
	return e, nil
}

// capacityOf converts DynamoDB's consumed capacity. DynamoDB reports the
// total in CapacityUnits (and, for some operations, a read/write split);
// write reports whether the call was a write. Index units count toward
// IndexWriteUnits for writes.
func capacityOf(cc *types.ConsumedCapacity, write bool) store.Capacity {
	var c store.Capacity
	if cc == nil {
		return c
	}
	total := aws.ToFloat64(cc.CapacityUnits)
	r, w := aws.ToFloat64(cc.ReadCapacityUnits), aws.ToFloat64(cc.WriteCapacityUnits)
	switch {
	case r != 0 || w != 0:
		c.ReadUnits, c.WriteUnits = r, w
	case write:
		c.WriteUnits = total
	default:
		c.ReadUnits = total
	}
	if write {
		for _, ix := range cc.GlobalSecondaryIndexes {
			c.IndexWriteUnits += indexWrite(ix)
		}
		for _, ix := range cc.LocalSecondaryIndexes {
			c.IndexWriteUnits += indexWrite(ix)
		}
	}
	return c
}

func indexWrite(ix types.Capacity) float64 {
	if w := aws.ToFloat64(ix.WriteCapacityUnits); w != 0 {
		return w
	}
	return aws.ToFloat64(ix.CapacityUnits)
}

func capacities(ccs []types.ConsumedCapacity, write bool) store.Capacity {
	var c store.Capacity
	for i := range ccs {
		c = c.Add(capacityOf(&ccs[i], write))
	}
	return c
}
