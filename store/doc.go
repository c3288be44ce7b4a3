// Package store is the contract between the rate limiter and the databases
// that hold its state.
//
// It models DynamoDB's conditional single-item writes, not a generic
// key-value store, on one table of fixed layout (the Attr* and Index*
// constants): values are strings or int64 numbers; items are maps of
// attribute name to value; every write may carry a condition; updates are
// DynamoDB update expressions (ADD, SET, SET if_not_exists, REMOVE);
// conditions are DynamoDB condition expressions (comparisons,
// attribute_exists, attribute_not_exists, begins_with, AND, OR, NOT).
//
// Expressions travel in the form DynamoDB itself accepts: an expression
// string whose attribute names and values are placeholders, plus the maps
// that bind them (see [Expr]). Callers build them with [Update] and
// [Condition], immutable builders that assign deterministic placeholders
// (#a0, #a1, ... and :v0, :v1, ...), so a limit named "gpt-3.5" or an
// attribute named "ttl" (a DynamoDB reserved word) never appears raw in an
// expression. Backends may also receive hand-written expressions; they must
// then reject malformed ones exactly as DynamoDB does, with a
// [ValidationError] carrying DynamoDB's message.
//
// Every call reports the capacity it consumed ([Capacity]), including on
// failure, because DynamoDB bills failed conditional writes too.
//
// Errors are typed and work with errors.Is and errors.As:
//
//	ErrConditionFailed      a condition was false; *ConditionFailedError holds the old item
//	ErrThrottled            the request exceeded a capacity ceiling; nothing changed
//	ErrTransactionCanceled  a transaction was cancelled; *TransactionCanceledError holds per-action reasons
//	ErrTransactionConflict  a single-item write collided with an in-flight transaction (wrapped with the key)
//	ErrValidation           the request is malformed; *ValidationError holds DynamoDB's message
//	ErrUnavailable          the backend failed; *UnavailableError says whether the write may have applied
//
// A backend implements [Store]: the methods and their inputs and outputs
// are in store.go, the expressions it must evaluate in expr.go, the errors
// it returns in errors.go. A [Write] is one write of WriteConcurrently or
// one action of TransactWrite (only there may it be a Check). The
// conformance suite in store/storetest says what a backend must do, case by
// case; a backend's test runs it with storetest.Run.
//
// Backends: store/memsim (in memory, for tests and simulation) and
// store/dynamo (Amazon DynamoDB). Both pass store/storetest.
package store
