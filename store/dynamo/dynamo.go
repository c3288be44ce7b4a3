package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/schema"
)

// API is the part of the DynamoDB client that [Store] calls: each method is
// the DynamoDB operation of its name. A *dynamodb.Client implements it;
// tests may pass a fake.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Option configures [New] and [CreateTable].
type Option func(*options)

type options struct {
	schema   schema.Schema
	noStream bool
}

// WithTTL sets whether [CreateTable] turns time to live on for the "ttl"
// attribute of a table it creates or finds: on by default; off, it leaves
// time to live as it is. Turn it off for tests on DynamoDB Local that write
// ttl values of a fake clock: DynamoDB Local expires items by the wall
// clock. [New] and [CheckTable] ignore it.
func WithTTL(on bool) Option {
	return func(o *options) {
		o.schema.TTLAttribute = ""
		if on {
			o.schema.TTLAttribute = store.AttrTTL
		}
	}
}

// WithStream sets whether [CreateTable] gives a table it creates a stream
// (NEW_AND_OLD_IMAGES), which the usage aggregator reads: on by default.
// Turn it off for a table that only limits (no usage snapshots, no
// proactive sharding) or for load tests on DynamoDB Local, which writes
// several times slower with a stream. It changes nothing on a table that
// exists, and [New] ignores it.
func WithStream(on bool) Option {
	return func(o *options) { o.noStream = !on }
}

func buildOptions(opts []Option) options {
	o := options{schema: schema.Default()}
	for _, fn := range opts {
		if fn != nil {
			fn(&o)
		}
	}
	return o
}

// Store is a [store.Store] on one DynamoDB table. It is safe for concurrent
// use; create it with [New]. The requests of a nil or zero Store, or of one
// made with a nil client or an empty table name, answer a
// store.ValidationError without a call.
type Store struct {
	api    API
	table  *string
	schema schema.Schema

	// Backoff between BatchGetItem rounds that left keys unprocessed:
	// equal jitter over min(batchMax, batchBase<<round).
	batchBase, batchMax time.Duration
	// batchRounds bounds the rounds in a row that make no progress.
	batchRounds int
	sleep       func(context.Context, time.Duration) error
}

var _ store.Store = (*Store)(nil)

// New returns a Store that keeps its items in table through client (usually
// a *dynamodb.Client). See the package documentation for how the client's
// retryer is used. New does no I/O and checks neither argument: a nil
// client panics on the first call, and a table that does not exist fails
// every call (ResourceNotFoundException, see Errors).
func New(client API, table string, opts ...Option) *Store {
	o := buildOptions(opts)
	return &Store{
		api:         client,
		table:       &table,
		schema:      o.schema,
		batchBase:   25 * time.Millisecond,
		batchMax:    time.Second,
		batchRounds: 10,
		sleep:       sleepContext,
	}
}

// Table returns the name of the table ("" for a nil or zero Store).
func (s *Store) Table() string {
	if s == nil || s.table == nil {
		return ""
	}
	return *s.table
}

// usable returns a ValidationError for a nil or zero Store, one made with
// a nil client or an empty table name, or a nil ctx: what every request
// checks first, before anything is sent.
func (s *Store) usable(ctx context.Context) error {
	switch {
	case s == nil || s.api == nil || s.table == nil:
		return validationf("dynamo: the Store is nil or zero, or its client is nil: create one with New")
	case *s.table == "":
		return validationf("dynamo: the table name is empty")
	case ctx == nil:
		return validationf("dynamo: ctx is nil: pass a context (context.Background() when there is none)")
	}
	return nil
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

const (
	opGet           = "Get"
	opBatchGet      = "BatchGet"
	opPut           = "Put"
	opUpdate        = "Update"
	opDelete        = "Delete"
	opTransactWrite = "TransactWrite"
	opQuery         = "Query"
	opScan          = "Scan"
)

// Get implements [store.Store].
func (s *Store) Get(ctx context.Context, in store.GetInput) (store.GetOutput, error) {
	var out store.GetOutput
	if err := s.usable(ctx); err != nil {
		return out, err
	}
	if err := ctx.Err(); err != nil {
		return out, notSent(opGet, err)
	}
	resp, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:              s.table,
		Key:                    s.encodeKey(in.Key),
		ConsistentRead:         boolPtr(in.ConsistentRead),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
	})
	if err != nil {
		return out, s.mapError(opGet, readCall, in.Key, err)
	}
	out.Consumed = capacityOf(resp.ConsumedCapacity, false)
	out.Item, err = decodeItem(resp.Item)
	return out, err
}

// BatchGet implements [store.Store]. Every request goes to DynamoDB, which
// judges it (no keys, more than 100, duplicates). It retries the keys DynamoDB leaves
// unprocessed with capped, jittered exponential backoff (25 ms doubling up to
// 1 s) until all are read or ctx ends; after 10 rounds in a row that make no
// progress it gives up with a throttling error.
func (s *Store) BatchGet(ctx context.Context, in store.BatchGetInput) (store.BatchGetOutput, error) {
	out := store.BatchGetOutput{Items: make([]store.Item, len(in.Keys))}
	if err := s.usable(ctx); err != nil {
		return out, err
	}
	if err := ctx.Err(); err != nil {
		return out, notSent(opBatchGet, err)
	}
	keys := make([]map[string]types.AttributeValue, len(in.Keys))
	where := make(map[store.Key][]int, len(in.Keys))
	for i, k := range in.Keys {
		keys[i] = s.encodeKey(k)
		where[k] = append(where[k], i)
	}
	pending := types.KeysAndAttributes{Keys: keys, ConsistentRead: boolPtr(in.ConsistentRead)}
	idle := 0
	for round := 0; ; round++ {
		resp, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems:           map[string]types.KeysAndAttributes{*s.table: pending},
			ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
		})
		if err != nil {
			return out, s.mapError(opBatchGet, readCall, store.Key{}, err)
		}
		out.Consumed = out.Consumed.Add(capacities(resp.ConsumedCapacity, false))
		for _, raw := range resp.Responses[*s.table] {
			it, err := decodeItem(raw)
			if err != nil {
				return out, err
			}
			k, ok := it.Key()
			if !ok {
				return out, &DecodeError{Attribute: s.schema.PartitionKey, Reason: "a BatchGetItem result lacks the table key"}
			}
			for _, i := range where[k] {
				out.Items[i] = it
			}
		}
		left := resp.UnprocessedKeys[*s.table]
		if len(left.Keys) == 0 {
			return out, nil
		}
		if len(left.Keys) < len(pending.Keys) {
			idle = 0
		} else if idle++; idle >= s.batchRounds {
			return out, &store.UnavailableError{Op: opBatchGet, Err: &store.ThrottledError{
				Code:   store.ThrottleProvisionedThroughputExceeded,
				Reason: "UnprocessedKeys",
			}}
		}
		if err := s.sleep(ctx, s.backoff(round)); err != nil {
			return out, notSent(opBatchGet, err)
		}
		if left.ConsistentRead == nil {
			left.ConsistentRead = pending.ConsistentRead
		}
		pending = left
	}
}

// backoff returns the pause before BatchGetItem round n+1: equal jitter
// over min(batchMax, batchBase*2^n).
func (s *Store) backoff(n int) time.Duration {
	d := s.batchMax
	if n < 30 && s.batchBase<<n < d {
		d = s.batchBase << n
	}
	half := d / 2
	return half + rand.N(half+1)
}

// Put implements [store.Store].
func (s *Store) Put(ctx context.Context, in store.PutInput) (store.WriteOutput, error) {
	if err := s.usable(ctx); err != nil {
		return store.WriteOutput{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.WriteOutput{}, notSent(opPut, err)
	}
	key, ok := in.Item.Key()
	if !ok {
		key = store.Key{} // the caller's item lacks its keys: a refusal is about the item, not the table
	}
	req, err := s.putInput(in)
	if err != nil {
		return store.WriteOutput{}, err
	}
	resp, err := s.api.PutItem(ctx, req, singleWriteRetries)
	if err != nil {
		return s.writeFailure(opPut, key, in.ReturnOldOnConditionFailure, err)
	}
	return returned(opPut, resp.Attributes, resp.ConsumedCapacity)
}

// Update implements [store.Store].
func (s *Store) Update(ctx context.Context, in store.UpdateInput) (store.WriteOutput, error) {
	if err := s.usable(ctx); err != nil {
		return store.WriteOutput{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.WriteOutput{}, notSent(opUpdate, err)
	}
	req, err := s.updateInput(in)
	if err != nil {
		return store.WriteOutput{}, err
	}
	resp, err := s.api.UpdateItem(ctx, req, singleWriteRetries)
	if err != nil {
		return s.writeFailure(opUpdate, in.Key, in.ReturnOldOnConditionFailure, err)
	}
	return returned(opUpdate, resp.Attributes, resp.ConsumedCapacity)
}

// Delete implements [store.Store].
func (s *Store) Delete(ctx context.Context, in store.DeleteInput) (store.WriteOutput, error) {
	if err := s.usable(ctx); err != nil {
		return store.WriteOutput{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.WriteOutput{}, notSent(opDelete, err)
	}
	req, err := s.deleteInput(in)
	if err != nil {
		return store.WriteOutput{}, err
	}
	resp, err := s.api.DeleteItem(ctx, req, singleWriteRetries)
	if err != nil {
		return s.writeFailure(opDelete, in.Key, in.ReturnOldOnConditionFailure, err)
	}
	return returned(opDelete, resp.Attributes, resp.ConsumedCapacity)
}

// returned decodes the attributes a successful write returned. The write
// has applied, so an undecodable result must not read as "nothing changed":
// it is an UnavailableError with OutcomeUnknown set around the DecodeError.
func returned(op string, attrs map[string]types.AttributeValue, cc *types.ConsumedCapacity) (store.WriteOutput, error) {
	out := store.WriteOutput{Consumed: capacityOf(cc, true)}
	it, err := decodeItem(attrs)
	if err != nil {
		return out, &store.UnavailableError{Op: op, OutcomeUnknown: true, Err: err}
	}
	out.Attributes = it
	return out, nil
}

// writeFailure maps the error of a single-item write; a failed condition
// gets its estimated capacity.
func (s *Store) writeFailure(op string, key store.Key, wantOld bool, err error) (store.WriteOutput, error) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return store.WriteOutput{Consumed: store.Capacity{WriteUnits: writeUnitsFor(ccf.Item)}}, conditionFailed(ccf.Item, wantOld)
	}
	return store.WriteOutput{}, s.mapError(op, writeCall, key, err)
}

func (s *Store) putInput(in store.PutInput) (*dynamodb.PutItemInput, error) {
	if in.Expr.Update != "" {
		return nil, validationf("Put takes no update expression")
	}
	item, err := encodeItem(in.Item)
	if err != nil {
		return nil, err
	}
	names, values, err := encodeExpr(in.Expr)
	if err != nil {
		return nil, err
	}
	return &dynamodb.PutItemInput{
		TableName:                           s.table,
		Item:                                item,
		ConditionExpression:                 strPtr(in.Expr.Condition),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValue(in.Return.String()),
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityIndexes,
		ReturnValuesOnConditionCheckFailure: oldOnFailure(in.Expr.Condition != ""),
	}, nil
}

func (s *Store) updateInput(in store.UpdateInput) (*dynamodb.UpdateItemInput, error) {
	names, values, err := encodeExpr(in.Expr)
	if err != nil {
		return nil, err
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 s.encodeKey(in.Key),
		UpdateExpression:                    strPtr(in.Expr.Update),
		ConditionExpression:                 strPtr(in.Expr.Condition),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValue(in.Return.String()),
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityIndexes,
		ReturnValuesOnConditionCheckFailure: oldOnFailure(in.Expr.Condition != ""),
	}, nil
}

func (s *Store) deleteInput(in store.DeleteInput) (*dynamodb.DeleteItemInput, error) {
	if in.Expr.Update != "" {
		return nil, validationf("Delete takes no update expression")
	}
	names, values, err := encodeExpr(in.Expr)
	if err != nil {
		return nil, err
	}
	return &dynamodb.DeleteItemInput{
		TableName:                           s.table,
		Key:                                 s.encodeKey(in.Key),
		ConditionExpression:                 strPtr(in.Expr.Condition),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValue(in.Return.String()),
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityIndexes,
		ReturnValuesOnConditionCheckFailure: oldOnFailure(in.Expr.Condition != ""),
	}, nil
}

// TransactWrite implements [store.Store]. The SDK's retries stay on: every
// attempt carries the same ClientRequestToken (in.ClientToken, or one the
// SDK generates), so DynamoDB applies the transaction at most once.
func (s *Store) TransactWrite(ctx context.Context, in store.TransactWriteInput) (store.WriteOutput, error) {
	var out store.WriteOutput
	if err := s.usable(ctx); err != nil {
		return out, err
	}
	if err := ctx.Err(); err != nil {
		return out, notSent(opTransactWrite, err)
	}
	items := make([]types.TransactWriteItem, len(in.Actions))
	wantOld := make([]bool, len(in.Actions))
	for i, a := range in.Actions {
		var err error
		if items[i], wantOld[i], err = s.transactItem(a); err != nil {
			return out, err
		}
	}
	req := &dynamodb.TransactWriteItemsInput{
		TransactItems:          items,
		ClientRequestToken:     strPtr(in.ClientToken),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
	}
	rec := &recordingRetryer{}
	resp, err := s.api.TransactWriteItems(ctx, req, rec.install)
	if err != nil {
		return s.transactFailure(in, wantOld, rec.ambiguous.Load(), err)
	}
	out.Consumed = capacities(resp.ConsumedCapacity, true)
	return out, nil
}

// transactItem converts one action; wantOld says whether its caller asked
// for the item as it stood on a failed condition.
func (s *Store) transactItem(a store.Write) (ti types.TransactWriteItem, wantOld bool, _ error) {
	if actions(a) != 1 {
		// DynamoDB's message for the same mistake on the wire.
		return ti, false, validationf("TransactItems can only contain one of Check, Put, Update or Delete")
	}
	switch {
	case a.Put != nil:
		req, err := s.putInput(*a.Put)
		if err != nil {
			return ti, false, err
		}
		wantOld = a.Put.ReturnOldOnConditionFailure
		ti.Put = &types.Put{
			TableName:                           req.TableName,
			Item:                                req.Item,
			ConditionExpression:                 req.ConditionExpression,
			ExpressionAttributeNames:            req.ExpressionAttributeNames,
			ExpressionAttributeValues:           req.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: req.ReturnValuesOnConditionCheckFailure,
		}
	case a.Update != nil:
		req, err := s.updateInput(*a.Update)
		if err != nil {
			return ti, false, err
		}
		wantOld = a.Update.ReturnOldOnConditionFailure
		ti.Update = &types.Update{
			TableName:                           req.TableName,
			Key:                                 req.Key,
			UpdateExpression:                    req.UpdateExpression,
			ConditionExpression:                 req.ConditionExpression,
			ExpressionAttributeNames:            req.ExpressionAttributeNames,
			ExpressionAttributeValues:           req.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: req.ReturnValuesOnConditionCheckFailure,
		}
	case a.Delete != nil:
		req, err := s.deleteInput(*a.Delete)
		if err != nil {
			return ti, false, err
		}
		wantOld = a.Delete.ReturnOldOnConditionFailure
		ti.Delete = &types.Delete{
			TableName:                           req.TableName,
			Key:                                 req.Key,
			ConditionExpression:                 req.ConditionExpression,
			ExpressionAttributeNames:            req.ExpressionAttributeNames,
			ExpressionAttributeValues:           req.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: req.ReturnValuesOnConditionCheckFailure,
		}
	default:
		if a.Check.Expr.Update != "" {
			return ti, false, validationf("a condition check takes no update expression")
		}
		names, values, err := encodeExpr(a.Check.Expr)
		if err != nil {
			return ti, false, err
		}
		wantOld = a.Check.ReturnOldOnConditionFailure
		ti.ConditionCheck = &types.ConditionCheck{
			TableName:                           s.table,
			Key:                                 s.encodeKey(a.Check.Key),
			ConditionExpression:                 strPtr(a.Check.Expr.Condition),
			ExpressionAttributeNames:            names,
			ExpressionAttributeValues:           values,
			ReturnValuesOnConditionCheckFailure: oldOnFailure(a.Check.Expr.Condition != ""),
		}
	}
	return ti, wantOld, nil
}

// actions counts the actions w sets, a Check included.
func actions(w store.Write) int {
	n := 0
	for _, set := range []bool{w.Put != nil, w.Update != nil, w.Delete != nil, w.Check != nil} {
		if set {
			n++
		}
	}
	return n
}

// oldOnFailure asks for the item on a failed condition whenever there is a
// condition: it is free, and it sizes the capacity estimate.
func oldOnFailure(cond bool) types.ReturnValuesOnConditionCheckFailure {
	if cond {
		return types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return ""
}

func (s *Store) transactFailure(in store.TransactWriteInput, wantOld []bool, ambiguous bool, err error) (store.WriteOutput, error) {
	var out store.WriteOutput
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		mapped, decErr := transactionCanceled(tc, wantOld)
		// Estimate: the transactional price of each action, sized by the
		// item as it stood when DynamoDB returned it.
		for i := range in.Actions {
			var old map[string]types.AttributeValue
			if i < len(tc.CancellationReasons) {
				old = tc.CancellationReasons[i].Item
			}
			out.Consumed.WriteUnits += 2 * writeUnitsFor(old)
		}
		if decErr != nil {
			return out, decErr
		}
		return out, mapped
	}
	mapped := s.mapError(opTransactWrite, writeCall, store.Key{}, err)
	if ambiguous {
		// An earlier attempt may have applied; the last error does not
		// say otherwise unless DynamoDB answered definitively.
		var u *store.UnavailableError
		switch {
		case errors.As(mapped, &u):
			u.OutcomeUnknown = true
		case errors.Is(mapped, store.ErrThrottled):
			mapped = &store.UnavailableError{Op: opTransactWrite, OutcomeUnknown: true, Err: mapped}
		}
	}
	return out, mapped
}

// Query implements [store.Store]. It follows LastEvaluatedKey until the
// partition (or prefix) is exhausted or Limit items were read.
func (s *Store) Query(ctx context.Context, in store.QueryInput) (store.QueryOutput, error) {
	var out store.QueryOutput
	if err := s.usable(ctx); err != nil {
		return out, err
	}
	if err := ctx.Err(); err != nil {
		return out, notSent(opQuery, err)
	}
	pkName, skName := s.schema.PartitionKey, s.schema.SortKey
	var index *string
	if in.Index != "" {
		ix, ok := s.schema.Index(in.Index)
		if !ok {
			// DynamoDB's message for an unknown index.
			return out, validationf("The table does not have the specified index: %s", in.Index)
		}
		pkName, skName, index = ix.PartitionKey, ix.SortKey, &in.Index
	}
	if in.Limit < 0 {
		return out, validationf("Query limit must be positive or zero, got %d", in.Limit)
	}
	cond := "#pk = :pk"
	names := map[string]string{"#pk": pkName}
	values := map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: in.PartitionKey}}
	if in.SortKeyPrefix != "" {
		cond += " AND begins_with(#sk, :sk)"
		names["#sk"] = skName
		values[":sk"] = &types.AttributeValueMemberS{Value: in.SortKeyPrefix}
	}
	req := &dynamodb.QueryInput{
		TableName:                 s.table,
		IndexName:                 index,
		KeyConditionExpression:    &cond,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ConsistentRead:            boolPtr(in.ConsistentRead),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityIndexes,
	}
	for {
		if in.Limit > 0 {
			n := int32(min(in.Limit-len(out.Items), 1<<30))
			req.Limit = &n
		}
		resp, err := s.api.Query(ctx, req)
		if err != nil {
			return out, s.mapError(opQuery, readCall, store.Key{}, err)
		}
		out.Consumed = out.Consumed.Add(capacityOf(resp.ConsumedCapacity, false))
		for _, raw := range resp.Items {
			it, err := decodeItem(raw)
			if err != nil {
				return out, err
			}
			out.Items = append(out.Items, it)
		}
		if len(resp.LastEvaluatedKey) == 0 || (in.Limit > 0 && len(out.Items) >= in.Limit) {
			return out, nil
		}
		req.ExclusiveStartKey = resp.LastEvaluatedKey
	}
}

// Scan implements [store.Store]: one Scan request, with a begins_with
// filter on the partition key when a prefix is given (DynamoDB bills the
// items read, before the filter).
func (s *Store) Scan(ctx context.Context, in store.ScanInput) (store.ScanOutput, error) {
	var out store.ScanOutput
	if err := s.usable(ctx); err != nil {
		return out, err
	}
	if err := ctx.Err(); err != nil {
		return out, notSent(opScan, err)
	}
	if in.Limit < 0 {
		return out, validationf("Scan limit must be positive or zero, got %d", in.Limit)
	}
	pkName, skName := s.schema.PartitionKey, s.schema.SortKey
	req := &dynamodb.ScanInput{
		TableName:              s.table,
		ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
	}
	if in.PartitionKeyPrefix != "" {
		filter := "begins_with(#pk, :p)"
		req.FilterExpression = &filter
		req.ExpressionAttributeNames = map[string]string{"#pk": pkName}
		req.ExpressionAttributeValues = map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: in.PartitionKeyPrefix}}
	}
	if in.Start != nil {
		req.ExclusiveStartKey = map[string]types.AttributeValue{
			pkName: &types.AttributeValueMemberS{Value: in.Start.PK},
			skName: &types.AttributeValueMemberS{Value: in.Start.SK},
		}
	}
	if in.Limit > 0 {
		n := int32(min(in.Limit, 1<<30))
		req.Limit = &n
	}
	resp, err := s.api.Scan(ctx, req)
	if err != nil {
		return out, s.mapError(opScan, readCall, store.Key{}, err)
	}
	out.Consumed = capacityOf(resp.ConsumedCapacity, false)
	for _, raw := range resp.Items {
		it, err := decodeItem(raw)
		if err != nil {
			return out, err
		}
		out.Items = append(out.Items, it)
	}
	if len(resp.LastEvaluatedKey) > 0 {
		pk, okPK := resp.LastEvaluatedKey[pkName].(*types.AttributeValueMemberS)
		sk, okSK := resp.LastEvaluatedKey[skName].(*types.AttributeValueMemberS)
		if !okPK || !okSK {
			return out, fmt.Errorf("dynamo: Scan: LastEvaluatedKey without string %s and %s", pkName, skName)
		}
		out.Next = &store.Key{PK: pk.Value, SK: sk.Value}
	}
	return out, nil
}

// WriteConcurrently implements [store.Store]: each write runs on its own
// goroutine; results come back in the order of writes.
func (s *Store) WriteConcurrently(ctx context.Context, writes []store.Write) []store.WriteResult {
	res := make([]store.WriteResult, len(writes))
	if len(writes) == 1 {
		res[0] = s.write(ctx, writes[0])
		return res
	}
	var wg sync.WaitGroup
	for i := range writes {
		wg.Go(func() { res[i] = s.write(ctx, writes[i]) })
	}
	wg.Wait()
	return res
}

func (s *Store) write(ctx context.Context, w store.Write) store.WriteResult {
	var r store.WriteResult
	switch {
	case w.Check != nil:
		r.Err = validationf("A Write with a Check is accepted only in TransactWrite")
	case actions(w) != 1:
		r.Err = validationf("a Write must set exactly one of Put, Update or Delete")
	case w.Put != nil:
		r.Output, r.Err = s.Put(ctx, *w.Put)
	case w.Update != nil:
		r.Output, r.Err = s.Update(ctx, *w.Update)
	default:
		r.Output, r.Err = s.Delete(ctx, *w.Delete)
	}
	return r
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func boolPtr(b bool) *bool {
	if !b {
		return nil
	}
	return &b
}
