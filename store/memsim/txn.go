package memsim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/shardlimit/limiter/store"
)

// ClientTokenTTL is how long a transaction's client token makes repeats
// idempotent, counted by the store's clock from the first success.
const ClientTokenTTL = 10 * time.Minute

type tokenEntry struct {
	fp      [sha256.Size]byte
	expires int64 // Unix ns
}

// Cancellation messages.
const (
	msgReasonCondition = "The conditional request failed"
	msgReasonConflict  = "Transaction is ongoing for the item"
	msgReasonPTEE      = "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API"
	msgReasonThrottle  = "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly."
)

// TransactWrite implements [store.Store.TransactWrite].
//
// Capacity: a transaction that applies consumes two write units per started
// KB of each item (prepare and commit), ConditionCheck actions included,
// plus its index writes (once: an index is updated after the commit). A
// transaction cancelled by failed conditions consumes the prepare phase
// only: one unit per started KB of each item as it stood (1 for a missing
// item). One cancelled for a validation error, a throttle or an injected
// fault consumes nothing. A repeat of a completed transaction with its
// client token applies nothing and consumes one strongly consistent read
// per item.
func (s *Store) TransactWrite(ctx context.Context, in store.TransactWriteInput) (store.WriteOutput, error) {
	if err := s.enter(ctx, OpTransactWrite); err != nil {
		return store.WriteOutput{}, err
	}
	reqs, err := s.prepareTxn(in.Actions)
	if err != nil {
		s.countLocked(OpTransactWrite, outValidation, store.Capacity{})
		return store.WriteOutput{}, err
	}
	var fp [sha256.Size]byte
	if in.ClientToken != "" {
		fp = fingerprint(in.Actions)
	}
	var d Decision
	if s.intercept {
		d, err = s.begin(ctx, OpTransactWrite, "", func() []store.Key {
			keys := make([]store.Key, len(reqs))
			for i := range reqs {
				keys[i] = reqs[i].key
			}
			return keys
		})
		if err != nil {
			return store.WriteOutput{}, err
		}
		switch d.Fault {
		case FaultThrottle, FaultConflict:
			out := outThrottle
			code, msg := s.throttleReason()
			if d.Fault == FaultConflict {
				out, code, msg = outFault, store.ReasonTransactionConflict, msgReasonConflict
			}
			s.countLocked(OpTransactWrite, out, store.Capacity{})
			return store.WriteOutput{}, cancelled(len(reqs), code, msg, func(int) bool { return true })
		case Fault5xxBeforeApply:
			if err := s.early(OpTransactWrite, d, reqs[0].key); err != nil {
				return store.WriteOutput{}, err
			}
		}
	}
	now := s.clock.Now().UnixNano()
	s.mu.Lock()
	out, err := s.transactLocked(in.ClientToken, fp, reqs, now)
	s.mu.Unlock()
	if lerr := s.late(OpTransactWrite, d); lerr != nil {
		return store.WriteOutput{}, lerr
	}
	return out, err
}

func (s *Store) throttleReason() (code, msg string) {
	if s.throttleCode == store.ThrottleProvisionedThroughputExceeded {
		return store.ReasonProvisionedThroughputExceeded, msgReasonPTEE
	}
	return store.ReasonThrottlingError, msgReasonThrottle
}

// prepareTxn validates a transaction before any item is looked at.
func (s *Store) prepareTxn(actions []store.Write) ([]writeReq, error) {
	switch {
	case len(actions) == 0:
		return nil, verr(msgNoActions)
	case len(actions) > 100:
		return nil, verr(msgTooManyActions)
	}
	reqs := make([]writeReq, len(actions))
	for i, a := range actions {
		n := 0
		for _, set := range [...]bool{a.Put != nil, a.Update != nil, a.Delete != nil, a.Check != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, verr(msgOneMember)
		}
		var err error
		switch {
		case a.Put != nil:
			reqs[i], err = s.preparePut(a.Put, true)
		case a.Update != nil:
			reqs[i], err = s.prepareUpdate(a.Update, true)
		case a.Delete != nil:
			reqs[i], err = s.prepareDelete(a.Delete, true)
		default:
			reqs[i], err = s.prepareCheck(a.Check)
		}
		if err != nil {
			return nil, err
		}
	}
	keys := make([]store.Key, len(reqs))
	size := 0
	for i := range reqs {
		keys[i] = reqs[i].key
		size += reqs[i].size
	}
	if hasDuplicate(keys) {
		return nil, verr(msgSameItem)
	}
	if size > MaxTransactionSize {
		return nil, verr(msgTxnTooLarge)
	}
	return reqs, nil
}

// transactLocked evaluates and, when every action passes, applies a
// transaction. Call with s.mu held.
func (s *Store) transactLocked(token string, fp [sha256.Size]byte, reqs []writeReq, now int64) (store.WriteOutput, error) {
	if te, ok := s.tokens[token]; token != "" && ok && now < te.expires {
		if te.fp != fp {
			s.count(OpTransactWrite, outValidation, store.Capacity{})
			return store.WriteOutput{}, verr(msgIdempotentMismatch)
		}
		return s.replayLocked(reqs, now)
	}
	evs := make([]evaluation, len(reqs))
	failed, invalid := false, false
	size := 0
	for i := range reqs {
		s.evaluate(&reqs[i], &evs[i])
		switch {
		case evs[i].err != nil:
			invalid = true
		case evs[i].failed:
			failed = true
		}
		size += max(evs[i].oldSize, evs[i].newSize)
	}
	if !invalid && !failed && size > MaxTransactionSize {
		s.count(OpTransactWrite, outValidation, store.Capacity{})
		return store.WriteOutput{}, verr(msgTxnTooLarge)
	}
	if invalid || failed {
		reasons := make([]store.CancellationReason, len(reqs))
		var cl chargeList
		var consumed store.Capacity
		for i := range reqs {
			ev := &evs[i]
			switch {
			case ev.err != nil:
				reasons[i] = store.CancellationReason{Code: store.ReasonValidationError, Message: ev.err.Error()}
			case ev.failed:
				reasons[i] = store.CancellationReason{Code: store.ReasonConditionalCheckFailed, Message: msgReasonCondition}
				if reqs[i].retOld && ev.exists {
					reasons[i].Item = s.result(ev.old)
				}
			default:
				reasons[i] = store.CancellationReason{Code: store.ReasonNone}
			}
			if !invalid {
				u := WriteUnits(ev.oldSize)
				cl = cl.add(charge{part: partKey{pk: reqs[i].key.PK}, write: true, milli: milli(u)})
				consumed.WriteUnits += u
			}
		}
		if invalid {
			s.count(OpTransactWrite, outValidation, store.Capacity{})
			return store.WriteOutput{}, &store.TransactionCanceledError{Reasons: reasons}
		}
		if p, ok := s.admit(now, cl); !ok {
			s.count(OpTransactWrite, outThrottle, store.Capacity{})
			return store.WriteOutput{}, s.throttledTxn(reqs, evs, p)
		}
		s.count(OpTransactWrite, outCondition, consumed)
		return store.WriteOutput{Consumed: consumed}, &store.TransactionCanceledError{Reasons: reasons}
	}
	var cl chargeList
	var consumed store.Capacity
	for i := range reqs {
		cl = s.charges(cl, &reqs[i], &evs[i])
		consumed = consumed.Add(capacityOf(&reqs[i], &evs[i]))
	}
	if p, ok := s.admit(now, cl); !ok {
		s.count(OpTransactWrite, outThrottle, store.Capacity{})
		return store.WriteOutput{}, s.throttledTxn(reqs, evs, p)
	}
	for i := range reqs {
		s.commit(&reqs[i], &evs[i], now)
	}
	s.count(OpTransactWrite, outOK, consumed)
	if token != "" {
		s.rememberToken(token, fp, now)
	}
	return store.WriteOutput{Consumed: consumed}, nil
}

// cancelled is the cancellation of a transaction of n actions: those hit
// reports carry code and msg, the others None.
func cancelled(n int, code, msg string, hit func(i int) bool) error {
	reasons := make([]store.CancellationReason, n)
	for i := range reasons {
		reasons[i].Code = store.ReasonNone
		if hit(i) {
			reasons[i] = store.CancellationReason{Code: code, Message: msg}
		}
	}
	return &store.TransactionCanceledError{Reasons: reasons}
}

// throttledTxn is the cancellation of a transaction one of whose partitions
// was over its ceiling: the actions charging that partition carry the
// throttle reason, the others None.
func (s *Store) throttledTxn(reqs []writeReq, evs []evaluation, p partKey) error {
	code, msg := s.throttleReason()
	return cancelled(len(reqs), code, msg, func(i int) bool {
		hit := p.index == "" && reqs[i].key.PK == p.pk
		for _, x := range evs[i].index {
			hit = hit || (s.indexes[x.ix].ix.Name == p.index && x.pk == p.pk)
		}
		return hit
	})
}

// replayLocked answers a repeat of a completed transaction.
func (s *Store) replayLocked(reqs []writeReq, now int64) (store.WriteOutput, error) {
	var cl chargeList
	var consumed store.Capacity
	for i := range reqs {
		u := ReadUnits(s.items[reqs[i].key].size, true)
		cl = cl.add(charge{part: partKey{pk: reqs[i].key.PK}, milli: milli(u)})
		consumed.ReadUnits += u
	}
	if p, ok := s.admit(now, cl); !ok {
		s.count(OpTransactWrite, outThrottle, store.Capacity{})
		return store.WriteOutput{}, s.throttledTxn(reqs, make([]evaluation, len(reqs)), p)
	}
	s.count(OpTransactWrite, outOK, consumed)
	return store.WriteOutput{Consumed: consumed}, nil
}

func (s *Store) rememberToken(token string, fp [sha256.Size]byte, now int64) {
	s.tokens[token] = tokenEntry{fp: fp, expires: now + int64(ClientTokenTTL)}
	// Drop expired tokens now and then; which ones are dropped when is not
	// observable (an expired token is ignored either way).
	s.tokenGC++
	if s.tokenGC >= 1024 {
		s.tokenGC = 0
		for k, te := range s.tokens {
			if now >= te.expires {
				delete(s.tokens, k)
			}
		}
	}
}

// fingerprint hashes a transaction's actions canonically (map entries in
// sorted order), for client-token idempotency. The Return fields, which a
// transaction ignores, are left out.
func fingerprint(actions []store.Write) [sha256.Size]byte {
	h := sha256.New()
	keyed := func(tag string, k store.Key, e store.Expr, retOld bool) {
		writeStr(h, tag)
		writeStr(h, k.PK)
		writeStr(h, k.SK)
		writeExpr(h, e, retOld)
	}
	for _, a := range actions {
		switch {
		case a.Put != nil:
			writeStr(h, "put")
			writeItem(h, a.Put.Item)
			writeExpr(h, a.Put.Expr, a.Put.ReturnOldOnConditionFailure)
		case a.Update != nil:
			keyed("update", a.Update.Key, a.Update.Expr, a.Update.ReturnOldOnConditionFailure)
		case a.Delete != nil:
			keyed("delete", a.Delete.Key, a.Delete.Expr, a.Delete.ReturnOldOnConditionFailure)
		case a.Check != nil:
			keyed("check", a.Check.Key, a.Check.Expr, a.Check.ReturnOldOnConditionFailure)
		}
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

func writeStr(h hash.Hash, s string) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

func writeValue(h hash.Hash, v store.Value) {
	if str, ok := v.AsString(); ok {
		writeStr(h, "S")
		writeStr(h, str)
		return
	}
	n, _ := v.AsInt()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	writeStr(h, "N")
	h.Write(b[:])
}

func writeItem(h hash.Hash, it store.Item) {
	writeStr(h, "item")
	for _, n := range slices.Sorted(maps.Keys(it)) {
		writeStr(h, n)
		writeValue(h, it[n])
	}
	writeStr(h, "end")
}

func writeExpr(h hash.Hash, e store.Expr, retOld bool) {
	writeStr(h, e.Update)
	writeStr(h, e.Condition)
	for _, n := range slices.Sorted(maps.Keys(e.Names)) {
		writeStr(h, n)
		writeStr(h, e.Names[n])
	}
	writeStr(h, "values")
	for _, n := range slices.Sorted(maps.Keys(e.Values)) {
		writeStr(h, n)
		writeValue(h, e.Values[n])
	}
	writeStr(h, strconv.FormatBool(retOld))
}
