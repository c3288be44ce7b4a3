package store

import (
	"errors"
	"strings"
)

// Sentinel errors, one per kind of failure. Test with errors.Is; the typed
// errors below carry the details and match their sentinel.
var (
	// ErrConditionFailed: a condition expression was false; nothing changed.
	ErrConditionFailed = errors.New("store: the conditional request failed")
	// ErrThrottled: the request exceeded a capacity ceiling; nothing changed.
	ErrThrottled = errors.New("store: throttled")
	// ErrTransactionCanceled: a transaction was cancelled; nothing changed.
	ErrTransactionCanceled = errors.New("store: transaction cancelled")
	// ErrTransactionConflict: a single-item write met an in-flight
	// transaction on its item; nothing changed. Backends wrap it with the
	// item's key: fmt.Errorf("%w on %s", ErrTransactionConflict, key).
	ErrTransactionConflict = errors.New("store: transaction conflict")
	// ErrValidation: the request is malformed; nothing changed.
	ErrValidation = errors.New("store: validation error")
	// ErrUnavailable: the backend failed; see UnavailableError.OutcomeUnknown.
	ErrUnavailable = errors.New("store: unavailable")
)

// ConditionFailedError is returned when a write's condition is false.
type ConditionFailedError struct {
	// Item is the item as it stood when the condition was evaluated, when
	// the write asked for it with ReturnOldOnConditionFailure and the item
	// existed; nil otherwise.
	Item Item
}

// Error returns the error's message.
func (e *ConditionFailedError) Error() string { return "The conditional request failed" }

// Is makes errors.Is(err, ErrConditionFailed) true.
func (e *ConditionFailedError) Is(target error) bool { return target == ErrConditionFailed }

// Throttling exception names, as DynamoDB sends them.
const (
	ThrottleProvisionedThroughputExceeded = "ProvisionedThroughputExceededException" // a table, index or partition over its capacity
	ThrottleThrottling                    = "ThrottlingException"                    // requests too fast (on-demand tables, control-plane calls)
	ThrottleRequestLimitExceeded          = "RequestLimitExceeded"                   // over the account's throughput quota
)

// ThrottledError is returned when a request exceeded a capacity ceiling.
// A backend that retries throttles itself (store/dynamo, through the SDK)
// returns, once it gives up, an *UnavailableError wrapping the
// *ThrottledError: match with errors.Is(err, ErrThrottled), which holds
// either way.
type ThrottledError struct {
	// Code is DynamoDB's exception name, one of the Throttle* constants;
	// "" reads as ThrottleProvisionedThroughputExceeded.
	Code string
	// Reason is DynamoDB's throttling reason, such as
	// "TableWriteKeyRangeThroughputExceeded" (a hot partition), or "".
	Reason string
	// Key is the item whose partition was over its ceiling, when known.
	Key Key
}

// Error returns the error's message.
func (e *ThrottledError) Error() string {
	if e == nil {
		return ErrThrottled.Error()
	}
	s := e.Code
	if s == "" {
		s = ThrottleProvisionedThroughputExceeded
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Key != (Key{}) {
		s += " on " + e.Key.String()
	}
	return s
}

// Is makes errors.Is(err, ErrThrottled) true.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// Cancellation reason codes of a [TransactionCanceledError], as DynamoDB
// sends them.
const (
	ReasonNone                          = "None"                            // this action was fine
	ReasonConditionalCheckFailed        = "ConditionalCheckFailed"          // its condition was false
	ReasonTransactionConflict           = "TransactionConflict"             // its item was in another transaction
	ReasonThrottlingError               = "ThrottlingError"                 // the table or index was throttled
	ReasonProvisionedThroughputExceeded = "ProvisionedThroughputExceeded"   // its partition was over its capacity
	ReasonValidationError               = "ValidationError"                 // the action was malformed
	ReasonItemCollectionSizeLimit       = "ItemCollectionSizeLimitExceeded" // an item collection exceeded 10 GB
)

// CancellationReason says why one action of a cancelled transaction failed,
// or Code "None" when that action was fine.
type CancellationReason struct {
	// Code is DynamoDB's reason code: one of the Reason* constants.
	Code string
	// Message is DynamoDB's text for the failure, when it sent one;
	// usually "" for ReasonNone.
	Message string
	// Item is the item as it stood, for a ConditionalCheckFailed action that
	// asked for it with ReturnOldOnConditionFailure.
	Item Item
}

// TransactionCanceledError is returned when a transaction is cancelled.
type TransactionCanceledError struct {
	// Reasons has one entry per action, in the order of the actions.
	Reasons []CancellationReason
}

// Error returns DynamoDB's message: "Transaction cancelled, please refer
// cancellation reasons for specific reasons [ConditionalCheckFailed, None]".
func (e *TransactionCanceledError) Error() string {
	if e == nil {
		return ErrTransactionCanceled.Error()
	}
	codes := make([]string, len(e.Reasons))
	for i, r := range e.Reasons {
		codes[i] = r.Code
	}
	return "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"
}

// Is makes errors.Is(err, ErrTransactionCanceled) true.
func (e *TransactionCanceledError) Is(target error) bool { return target == ErrTransactionCanceled }

// ValidationError is returned for a malformed request. Message is
// DynamoDB's own text where DynamoDB has one, so that tests can compare
// backends.
type ValidationError struct {
	// Message says what is malformed.
	Message string
}

// Error returns the error's message.
func (e *ValidationError) Error() string {
	if e == nil {
		return ErrValidation.Error()
	}
	return e.Message
}

// Is makes errors.Is(err, ErrValidation) true.
func (e *ValidationError) Is(target error) bool { return target == ErrValidation }

// UnavailableError is returned when the backend failed: a server error, a
// timeout, a lost connection, throttling that outlasted the retries, or a
// cancelled context.
type UnavailableError struct {
	// Op is the operation that failed, such as "Update".
	Op string
	// OutcomeUnknown is true when the write may have been applied: the
	// request reached the server and no answer came back, or the server
	// answered 5xx. A caller must treat the write as possibly done (for a
	// non-idempotent ADD, possibly done once).
	OutcomeUnknown bool
	// Err is the underlying cause.
	Err error
}

// Error returns the error's message.
func (e *UnavailableError) Error() string {
	if e == nil {
		return ErrUnavailable.Error()
	}
	s := "store: " + e.Op + " unavailable"
	if e.OutcomeUnknown {
		s += " (outcome unknown: the write may have applied)"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// OutcomeUnknown reports whether err says a write may have been applied
// although it returned an error.
func OutcomeUnknown(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u) && u != nil && u.OutcomeUnknown
}
