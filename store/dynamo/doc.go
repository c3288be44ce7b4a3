// Package dynamo is the production [store.Store]: Amazon DynamoDB through
// aws-sdk-go-v2.
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	client := dynamo.NewClient(cfg) // the limiter's retries and timeouts
//	st := dynamo.New(client, "rate-limits")
//
// [NewClient] is the SDK's client with [ClientOptions]: 3 attempts, short
// backoffs and a timeout on each attempt. A client built with the SDK's
// defaults (dynamodb.NewFromConfig alone) pauses seconds between retries
// and never times an attempt out, so an acquire against an unreachable
// endpoint takes seconds to fail (see [ClientOptions]).
//
// [CreateTable] provisions a table with the layout the limiter expects
// (idempotently); docs/dynamodb.md has the same table as CloudFormation and
// Terraform, and the IAM policy.
//
// # Values
//
// Store values are strings (DynamoDB type S) and int64 numbers (type N).
// Numbers travel as decimal strings converted with strconv (and math/big
// when DynamoDB sends an integer in another notation, such as "1E+3"); no
// float64 is involved anywhere, so every int64 round-trips exactly. Reading an item that
// holds a number that is not an integer or does not fit in an int64, or an
// attribute of any other DynamoDB type (BOOL, NULL, B, L, M, SS, NS, BS), is
// an error of type [*DecodeError] naming the attribute: such an item was not
// written through this package, and silently dropping the attribute could
// hide a limit from the limiter. See [DecodeError] for how the error is
// surfaced when it concerns the result of a write that did apply.
//
// # Errors
//
// Errors are mapped to the typed errors of package store by the error code
// DynamoDB sends:
//
//	ConditionalCheckFailedException   *store.ConditionFailedError (Item from ReturnValuesOnConditionCheckFailure=ALL_OLD)
//	TransactionCanceledException      *store.TransactionCanceledError (Code, Message, Item per action)
//	TransactionConflictException      store.ErrTransactionConflict, wrapped with the key
//	ValidationException, SerializationException,
//	IdempotentParameterMismatchException,
//	client-side parameter validation  *store.ValidationError (the server's message)
//	ValidationException because the table's
//	keys or indexes are not the schema's
//	(for keys the store built)         an error naming the table and pointing to
//	                                  [CreateTable], matching [ErrSchemaMismatch]
//	                                  and store.ErrValidation
//	ProvisionedThroughputExceededException, ThrottlingException,
//	RequestLimitExceeded              *store.UnavailableError wrapping a *store.ThrottledError
//	5xx, InternalServerError, timeouts, connection errors, a cancelled
//	or expired context, exhausted retries
//	                                  *store.UnavailableError
//
// A throttle reaches the caller only after the SDK's retryer gave up on it,
// so it is "throttling that outlasted the retries" in the words of
// [store.UnavailableError]: the error matches both store.ErrThrottled and
// store.ErrUnavailable, and errors.As finds both the *store.ThrottledError
// (Code, the first ThrottlingReason, the item's Key for single-item calls)
// and the *store.UnavailableError (OutcomeUnknown false: a throttled request
// changed nothing).
//
// OutcomeUnknown is set for every write that may have reached the server:
// 5xx answers, timeouts, connection failures after the request was sent,
// a context that ended during the call, and undecodable results of applied
// writes. It is false for reads, for a context that had already ended before
// the call (nothing is sent), and for failures to connect at all (dial or
// DNS errors: nothing was sent).
//
// Other service errors (ResourceNotFoundException for a missing table,
// AccessDeniedException, UnrecognizedClientException, ...) are configuration
// faults, not outages: they are returned wrapped, unmapped (use errors.As
// with smithy.APIError), so that a limiter configured to fail open does not
// silently admit everything because of a wrong table name or IAM policy.
//
// # Retries
//
// The SDK retries 5xx answers, timeouts and connection errors inside one
// call. For an UpdateItem that ADDs to a counter, a retry after an attempt
// that was applied but whose answer was lost applies the ADD twice, and the
// caller sees one success. This package therefore replaces the client's
// retryer, per call, for PutItem, UpdateItem and DeleteItem by one that
// retries only errors proving that nothing was applied: the throttling
// codes (ProvisionedThroughputExceededException, ThrottlingException,
// RequestLimitExceeded) and failures to connect. Backoff delays, the
// maximum number of attempts and the retry quota are still those of the
// client's retryer. Every other failure is returned at once as an
// *store.UnavailableError with OutcomeUnknown set, and the caller (the
// limiter) decides: it knows which of its writes are idempotent.
//
// Reads (GetItem, BatchGetItem, Query) keep the client's retryer unchanged.
// TransactWriteItems keeps it too: the SDK fills ClientRequestToken (when
// TransactWriteInput.ClientToken is empty) before its retry loop, so every
// attempt of one call carries the same token and DynamoDB applies the
// transaction at most once. A transaction that failed after an attempt with
// an ambiguous outcome is reported with OutcomeUnknown set, whatever the
// last attempt's error.
//
// [NewClient] applies the client settings; docs/dynamodb.md explains them.
//
// # Capacity
//
// Every call asks for ReturnConsumedCapacity=INDEXES and reports DynamoDB's
// figures in [store.Capacity], index writes included. DynamoDB does not
// report capacity with errors. For a failed condition this package
// therefore estimates what DynamoDB bills: 1 WCU when there was no item,
// else the item's size rounded up to 1 KB units (single-item writes always
// ask for ReturnValuesOnConditionCheckFailure=ALL_OLD, which is free, to
// learn that size; the item is handed to the caller only if it asked). For
// a cancelled transaction the estimate is 2 WCU per action per 1 KB of the
// item as it stood (1 KB when unknown), the price of a transactional write.
// Both are estimates; the figures on the AWS bill are authoritative.
package dynamo
