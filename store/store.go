package store

import "context"

// Store is a table with DynamoDB's single-item and transactional
// semantics. Implementations are safe for concurrent use.
//
// Every method reports the capacity it consumed in its output, and does so
// on failure too: a write whose condition fails is billed like one that
// succeeds, and its output carries that capacity beside the error.
//
// Writes never apply partially. A method that returns an error other than an
// [*UnavailableError] with OutcomeUnknown set changed nothing.
type Store interface {
	// Get reads one item. A missing item is not an error: the output's Item
	// is nil.
	Get(ctx context.Context, in GetInput) (GetOutput, error)
	// BatchGet reads up to 100 distinct items. Implementations retry any
	// part the database left unprocessed; the output has one entry per key.
	BatchGet(ctx context.Context, in BatchGetInput) (BatchGetOutput, error)
	// Put writes a whole item, replacing any item with the same key, if the
	// condition (when given) holds.
	Put(ctx context.Context, in PutInput) (WriteOutput, error)
	// Update applies an update expression to one item, creating it when
	// absent (an upsert), if the condition (when given) holds.
	Update(ctx context.Context, in UpdateInput) (WriteOutput, error)
	// Delete removes one item if the condition (when given) holds. Deleting
	// a missing item succeeds.
	Delete(ctx context.Context, in DeleteInput) (WriteOutput, error)
	// TransactWrite applies up to 100 writes on distinct items, all or
	// none. Its output's Attributes is nil.
	TransactWrite(ctx context.Context, in TransactWriteInput) (WriteOutput, error)
	// Query returns the items of one partition of the table or of an
	// index, in sort-key order, optionally only those whose sort key begins
	// with a prefix. Implementations follow pagination to the end (or to
	// Limit).
	Query(ctx context.Context, in QueryInput) (QueryOutput, error)
	// Scan returns one page of the table's items whose partition key
	// begins with a prefix. It reads the whole table, a page at a time,
	// and is billed for every item it reads, matching or not: it is for
	// operator commands (listing and deleting namespaces), never for the
	// data plane.
	Scan(ctx context.Context, in ScanInput) (ScanOutput, error)
	// WriteConcurrently issues independent single-item writes at the same
	// time and returns their results in order. The writes are not a
	// transaction: each may succeed or fail alone. A Write with a Check
	// fails alone with a [*ValidationError]. It exists so that a
	// caller that needs several writes in one round trip (a cascade to a
	// parent entity) says so, and a scheduler can see every write.
	WriteConcurrently(ctx context.Context, writes []Write) []WriteResult
}

// ReturnValue selects what a successful write returns in
// [WriteOutput.Attributes].
type ReturnValue uint8

// Return values, as DynamoDB defines them. Put and Delete accept only
// ReturnNone and ReturnAllOld.
const (
	ReturnNone       ReturnValue = iota // nothing
	ReturnAllOld                        // the whole item before the write (nothing if there was none)
	ReturnUpdatedOld                    // the updated attributes, before the write
	ReturnAllNew                        // the whole item after the write
	ReturnUpdatedNew                    // the updated attributes, after the write
)

var returnValueNames = [...]string{"NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"}

// String returns DynamoDB's name of r.
func (r ReturnValue) String() string {
	if int(r) < len(returnValueNames) {
		return returnValueNames[r]
	}
	return "INVALID"
}

// GetInput reads the item at Key.
type GetInput struct {
	// Key is the item's key; both parts must be non-empty.
	Key Key
	// ConsistentRead asks for a strongly consistent read (1 RCU per 4 KB
	// instead of 0.5).
	ConsistentRead bool
}

// GetOutput is the result of [Store.Get].
type GetOutput struct {
	Item     Item     // nil when there is no item
	Consumed Capacity // also when there is no item
}

// BatchGetInput reads up to 100 distinct keys.
type BatchGetInput struct {
	// Keys are the items to read: 1 to 100, none twice (an empty or longer
	// list, or a repeated key, is a ValidationError).
	Keys []Key
	// ConsistentRead asks for strongly consistent reads, as in GetInput.
	ConsistentRead bool
}

// BatchGetOutput is the result of [Store.BatchGet].
type BatchGetOutput struct {
	// Items[i] is the item at Keys[i], or nil when there is none.
	Items []Item
	// Consumed is the capacity of every read, retries of unprocessed
	// keys included.
	Consumed Capacity
}

// PutInput writes Item (which must hold the key attributes) if
// Expr.Condition holds. Expr.Update must be empty.
type PutInput struct {
	// Item is the whole item to write, key attributes included.
	Item Item
	// Expr holds the condition, if any; its Update must be empty. The zero
	// Expr writes unconditionally.
	Expr Expr
	// Return is ReturnNone or ReturnAllOld.
	Return ReturnValue
	// ReturnOldOnConditionFailure puts the item as it stood into the
	// [*ConditionFailedError] when the condition fails (DynamoDB's
	// ReturnValuesOnConditionCheckFailure=ALL_OLD; free of charge).
	ReturnOldOnConditionFailure bool
}

// UpdateInput applies Expr.Update to the item at Key if Expr.Condition
// holds.
type UpdateInput struct {
	// Key is the item to update or create.
	Key Key
	// Expr holds the update actions and the condition, if any. With no
	// update, the write creates a missing item with its key attributes
	// alone and leaves an existing one as it is, as DynamoDB does.
	Expr Expr
	// Return is any ReturnValue.
	Return ReturnValue
	// ReturnOldOnConditionFailure is as in PutInput.
	ReturnOldOnConditionFailure bool
}

// DeleteInput deletes the item at Key if Expr.Condition holds. Expr.Update
// must be empty.
type DeleteInput struct {
	// Key is the item to delete.
	Key Key
	// Expr holds the condition, if any; its Update must be empty. The zero
	// Expr deletes unconditionally.
	Expr Expr
	// Return is ReturnNone or ReturnAllOld.
	Return ReturnValue
	// ReturnOldOnConditionFailure is as in PutInput.
	ReturnOldOnConditionFailure bool
}

// CheckInput is a transaction's write that writes nothing: the transaction
// proceeds only if Expr.Condition holds for the item at Key. Expr.Update
// must be empty.
type CheckInput struct {
	// Key is the item checked; it need not exist.
	Key Key
	// Expr holds the condition, which is required.
	Expr Expr
	// ReturnOldOnConditionFailure puts the item as it stood into the
	// action's CancellationReason when the condition fails.
	ReturnOldOnConditionFailure bool
}

// WriteOutput is the result of a write: of Put, Update, Delete, one Write
// of WriteConcurrently, or TransactWrite.
type WriteOutput struct {
	// Attributes holds what the input's Return asked for; nil for
	// ReturnNone and for a transaction.
	Attributes Item
	// Consumed is the capacity the write consumed, also when it failed.
	Consumed Capacity
}

// TransactWriteInput is an all-or-nothing group of up to 100 writes on
// distinct items.
type TransactWriteInput struct {
	// Actions are the writes, in the order a cancellation's reasons follow.
	Actions []Write
	// ClientToken, when set, makes the call idempotent for 10 minutes: a
	// repeat with the same token and the same actions succeeds without
	// applying again; with other actions it fails with a ValidationError
	// (DynamoDB's IdempotentParameterMismatch).
	ClientToken string
}

// QueryInput selects the items of one partition.
type QueryInput struct {
	// Index is the name of a secondary index, or "" for the table.
	Index string
	// PartitionKey is the value of the (table or index) partition key;
	// "" is a ValidationError.
	PartitionKey string
	// SortKeyPrefix, when not empty, keeps only items whose sort key begins
	// with it.
	SortKeyPrefix string
	// ConsistentRead is allowed on the table only, as in DynamoDB.
	ConsistentRead bool
	// Limit caps the number of items returned; 0 means no cap. A negative
	// Limit is a ValidationError.
	Limit int
}

// QueryOutput is the result of [Store.Query].
type QueryOutput struct {
	// Items in ascending sort-key order. Items of a keys-only index carry
	// only the table and index key attributes.
	Items []Item
	// Consumed is the capacity of every page read.
	Consumed Capacity
}

// ScanInput selects one page of a Scan.
type ScanInput struct {
	// PartitionKeyPrefix keeps only items whose table partition key begins
	// with it; "" keeps every item.
	PartitionKeyPrefix string
	// Start continues a scan after the key a previous page returned as
	// Next; nil starts at the beginning of the table.
	Start *Key
	// Limit caps the number of items the page reads (before the prefix
	// filter, as DynamoDB's Limit); 0 means the backend's page size (1 MB
	// of items on DynamoDB). It must not be negative.
	Limit int
}

// ScanOutput is one page of [Store.Scan].
type ScanOutput struct {
	// Items of the page whose partition key matched, in no particular
	// order. A page may hold no item and still have a Next.
	Items []Item
	// Next is the Start of the next page; nil when the scan has read the
	// whole table. Items written or deleted while a scan runs may or may
	// not be seen, as in DynamoDB (the read is eventually consistent).
	Next *Key
	// Consumed is the capacity of the page, billed for every item read,
	// matching or not.
	Consumed Capacity
}

// Write is one single-item write of [Store.WriteConcurrently] or one
// action of [Store.TransactWrite]: exactly one field is set. Check is
// accepted only in a transaction, and in a transaction the inputs' Return
// fields are ignored.
type Write struct {
	Put    *PutInput    // a Store.Put
	Update *UpdateInput // a Store.Update
	Delete *DeleteInput // a Store.Delete
	Check  *CheckInput  // a condition check; in a transaction only
}

// WriteResult is the outcome of one [Write].
type WriteResult struct {
	// Output is what the write returned; its Consumed is set also when
	// Err is not nil.
	Output WriteOutput
	// Err is the write's error, nil when it applied.
	Err error
}

// Capacity is the capacity a call consumed, in DynamoDB's units: read
// capacity units (4 KB strongly consistent reads; half for eventually
// consistent, double for transactional) and write capacity units (1 KB
// writes; double for transactional).
type Capacity struct {
	// ReadUnits is the read capacity units consumed; 0 for a write.
	ReadUnits float64
	// WriteUnits includes IndexWriteUnits.
	WriteUnits float64
	// IndexWriteUnits is the part of WriteUnits spent writing secondary
	// index entries.
	IndexWriteUnits float64
}

// Add returns the sum of c and o.
func (c Capacity) Add(o Capacity) Capacity {
	return Capacity{
		ReadUnits:       c.ReadUnits + o.ReadUnits,
		WriteUnits:      c.WriteUnits + o.WriteUnits,
		IndexWriteUnits: c.IndexWriteUnits + o.IndexWriteUnits,
	}
}
