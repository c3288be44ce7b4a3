package memsim

import (
	"context"
	"maps"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/schema"
	"github.com/shardlimit/limiter/store/memsim/internal/expr"
)

// writeKind is what a single-item write (or transaction action) does.
type writeKind uint8

const (
	wPut writeKind = iota
	wUpdate
	wDelete
	wCheck
)

// writeReq is a validated single-item write.
type writeReq struct {
	kind   writeKind
	key    store.Key
	item   store.Item // wPut: the item to store, already copied
	size   int        // wPut: its size
	bound  *expr.Bound
	ret    store.ReturnValue
	retOld bool // ReturnOldOnConditionFailure
	txn    bool // an action of a transaction: units double
	hasUpd bool // wUpdate: there is an update expression
}

// evaluation is what a write would do to the table, computed under s.mu
// without changing anything.
type evaluation struct {
	old     store.Item
	oldSize int
	exists  bool
	new     store.Item // none when the write deletes or only checks
	newSize int
	touched []string
	// failed is set when the condition was false; err when the write is
	// invalid for this item (a *store.ValidationError).
	failed  bool
	err     error
	changed bool // the item changes (a stream record, index maintenance)
	// keysMoved is false when the write provably left every index key
	// attribute as it was (an update that touched none of them).
	keysMoved bool
	remove    bool // the item is deleted
	// units are the table write units (not doubled for transactions yet)
	// and index the index writes, both only for an applied write.
	units float64
	index []indexWrite
}

type indexWrite struct {
	ix    int // position in s.indexes
	pk    string
	units float64
}

// prepare validates a single-item write (or transaction action) before any
// item is looked at.
func (s *Store) preparePut(in *store.PutInput, txn bool) (writeReq, error) {
	if !txn && in.Return != store.ReturnNone && in.Return != store.ReturnAllOld {
		if in.Return > store.ReturnUpdatedNew {
			return writeReq{}, verr(msgBadReturn(in.Return))
		}
		return writeReq{}, verr(msgPutReturnValues)
	}
	key, err := s.checkPutItem(in.Item)
	if err != nil {
		return writeReq{}, err
	}
	size := ItemSize(in.Item)
	if size > MaxItemSize {
		return writeReq{}, verr(msgItemTooLarge)
	}
	b, err := s.bind(in.Expr, false)
	if err != nil {
		return writeReq{}, err
	}
	return writeReq{kind: wPut, key: key, item: maps.Clone(in.Item), size: size, bound: b, ret: in.Return,
		retOld: in.ReturnOldOnConditionFailure, txn: txn}, nil
}

func (s *Store) prepareUpdate(in *store.UpdateInput, txn bool) (writeReq, error) {
	if !txn && in.Return > store.ReturnUpdatedNew {
		return writeReq{}, verr(msgBadReturn(in.Return))
	}
	if err := s.checkKey(in.Key); err != nil {
		return writeReq{}, err
	}
	b, err := s.bind(in.Expr, true)
	if err != nil {
		return writeReq{}, err
	}
	return writeReq{kind: wUpdate, key: in.Key, bound: b, ret: in.Return,
		retOld: in.ReturnOldOnConditionFailure, txn: txn, hasUpd: in.Expr.Update != ""}, nil
}

func (s *Store) prepareDelete(in *store.DeleteInput, txn bool) (writeReq, error) {
	if !txn && in.Return != store.ReturnNone && in.Return != store.ReturnAllOld {
		if in.Return > store.ReturnUpdatedNew {
			return writeReq{}, verr(msgBadReturn(in.Return))
		}
		return writeReq{}, verr(msgPutReturnValues)
	}
	if err := s.checkKey(in.Key); err != nil {
		return writeReq{}, err
	}
	b, err := s.bind(in.Expr, false)
	if err != nil {
		return writeReq{}, err
	}
	return writeReq{kind: wDelete, key: in.Key, bound: b, ret: in.Return,
		retOld: in.ReturnOldOnConditionFailure, txn: txn}, nil
}

func (s *Store) prepareCheck(in *store.CheckInput) (writeReq, error) {
	if err := s.checkKey(in.Key); err != nil {
		return writeReq{}, err
	}
	if in.Expr.Condition == "" {
		if in.Expr.Update != "" {
			return writeReq{}, verr(msgUpdateInPut)
		}
		return writeReq{}, verr(msgCheckNeedsCondition)
	}
	b, err := s.bind(in.Expr, false)
	if err != nil {
		return writeReq{}, err
	}
	return writeReq{kind: wCheck, key: in.Key, bound: b, retOld: in.ReturnOldOnConditionFailure, txn: true}, nil
}

// evaluate computes into ev what w would do. Call with s.mu held.
func (s *Store) evaluate(w *writeReq, ev *evaluation) {
	*ev = evaluation{keysMoved: true}
	if e, ok := s.items[w.key]; ok {
		ev.old, ev.oldSize, ev.exists = e.item, e.size, true
	}
	if w.bound != nil && !w.bound.Check(ev.old) {
		ev.failed = true
		ev.units = WriteUnits(ev.oldSize) // 1 when absent
		return
	}
	switch w.kind {
	case wCheck:
		ev.units = WriteUnits(ev.oldSize)
		return
	case wDelete:
		ev.units = WriteUnits(ev.oldSize)
		ev.remove = true
		ev.changed = ev.exists
	case wPut:
		ev.new, ev.newSize = (w.item), w.size
		ev.changed = !ev.exists || !maps.Equal(ev.old, w.item)
		ev.units = WriteUnits(max(ev.oldSize, ev.newSize))
	case wUpdate:
		var err error
		switch {
		case w.hasUpd && ev.exists:
			ev.new, ev.touched, err = w.bound.Apply(ev.old, nil)
		case w.hasUpd:
			ev.new, ev.touched, err = w.bound.Apply(nil, s.keyItem(w.key))
		case ev.exists:
			ev.new = ev.old
		default:
			ev.new = s.keyItem(w.key)
		}
		if err != nil {
			ev.err = err
			return
		}
		if ev.new == nil { // a REMOVE-only update of a missing item creates nothing
			ev.units = WriteUnits(0)
			return
		}
		s.account(ev, w.hasUpd)
		if ev.keysMoved {
			if err := s.checkIndexKeys(ev.new); err != nil {
				ev.err = err
				return
			}
		}
		if ev.newSize > MaxItemSize {
			ev.err = verr(msgUpdateTooLarge)
			return
		}
		ev.units = WriteUnits(max(ev.oldSize, ev.newSize))
	}
	s.indexCost(ev)
}

// keyItem returns an item of only key k's attributes.
func (s *Store) keyItem(k store.Key) store.Item {
	return store.Item{s.schema.PartitionKey: store.Str(k.PK), s.schema.SortKey: store.Str(k.SK)}
}

// account computes an update's new item size, whether the item changed and
// whether its index keys may have moved. Only the touched attributes of an
// existing item can differ from the old item.
func (s *Store) account(ev *evaluation, hasUpd bool) {
	if !ev.exists || !hasUpd {
		ev.newSize, ev.changed = ItemSize(ev.new), !ev.exists
		return
	}
	ev.newSize, ev.changed, ev.keysMoved = ev.oldSize, false, false
	for _, name := range ev.touched {
		ov, had := ev.old[name]
		nv, has := ev.new[name]
		ev.keysMoved = ev.keysMoved || s.isIndexKey(name)
		if had {
			ev.newSize -= len(name) + ValueSize(ov)
		}
		if has {
			ev.newSize += len(name) + ValueSize(nv)
		}
		ev.changed = ev.changed || had != has || ov != nv
	}
}

// indexCost fills ev.index: an index entry is written when the item gains
// or loses the index's key attributes (one write), changes them (a delete
// and a put: two writes), or, for a ProjectAll index, changes any other
// attribute (one write). Each write costs the entry's size in 1 KB units.
func (s *Store) indexCost(ev *evaluation) {
	if !ev.changed {
		return
	}
	for i := range s.indexes {
		ix := s.indexes[i].ix
		opk, osk, oin := indexKey(ev.old, ix)
		npk, nsk, nin := indexKey(ev.new, ix) // ev.new is nil when the item is deleted
		same := oin && nin && opk == npk && osk == nsk
		if oin && !same {
			ev.index = append(ev.index, indexWrite{i, opk, WriteUnits(s.indexEntrySize(ev.old, ev.oldSize, ix))})
		}
		if nin && (!same || ix.Projection == schema.ProjectAll) {
			ev.index = append(ev.index, indexWrite{i, npk, WriteUnits(s.indexEntrySize(ev.new, ev.newSize, ix))})
		}
	}
}

// isIndexKey reports whether name is a key attribute of some index.
func (s *Store) isIndexKey(name string) bool {
	for _, ix := range s.schema.Indexes {
		if name == ix.PartitionKey || name == ix.SortKey {
			return true
		}
	}
	return false
}

// indexKey returns the index key of it in ix, and whether it is in the
// index (it has both key attributes, as strings).
func indexKey(it store.Item, ix schema.Index) (pk, sk string, ok bool) {
	pk, ok1 := it.Str(ix.PartitionKey)
	sk, ok2 := it.Str(ix.SortKey)
	return pk, sk, ok1 && ok2
}

// charges adds what an applied (or condition-failed) evaluation consumes.
func (s *Store) charges(cl chargeList, w *writeReq, ev *evaluation) chargeList {
	units := ev.units
	if w.txn {
		units *= 2
	}
	cl = cl.add(charge{part: partKey{pk: w.key.PK}, write: true, milli: milli(units)})
	for _, x := range ev.index {
		cl = cl.add(charge{part: partKey{index: s.indexes[x.ix].ix.Name, pk: x.pk}, write: true, milli: milli(x.units)})
	}
	return cl
}

// capacityOf returns the capacity an evaluation consumes.
func capacityOf(w *writeReq, ev *evaluation) store.Capacity {
	units := ev.units
	if w.txn {
		units *= 2
	}
	iu := 0.0
	for _, x := range ev.index {
		iu += x.units
	}
	return store.Capacity{WriteUnits: units + iu, IndexWriteUnits: iu}
}

// commit applies an evaluation. Call with s.mu held.
func (s *Store) commit(w *writeReq, ev *evaluation, now int64) {
	if !ev.changed {
		return
	}
	key := w.key
	if ev.remove {
		delete(s.items, key)
		if sks := s.byPK[key.PK]; sks != nil {
			delete(sks, key.SK)
			if len(sks) == 0 {
				delete(s.byPK, key.PK)
			}
		}
	} else {
		s.items[key] = entry{item: ev.new, size: ev.newSize}
		if !ev.exists {
			sks := s.byPK[key.PK]
			if sks == nil {
				sks = make(map[string]struct{})
				s.byPK[key.PK] = sks
			}
			sks[key.SK] = struct{}{}
		}
	}
	for i := 0; ev.keysMoved && i < len(s.indexes); i++ {
		st := &s.indexes[i]
		opk, osk, oin := indexKey(ev.old, st.ix)
		npk, nsk, nin := indexKey(ev.new, st.ix)
		if oin && nin && opk == npk && osk == nsk {
			continue
		}
		if oin {
			if m := st.members[opk]; m != nil {
				delete(m, key)
				if len(m) == 0 {
					delete(st.members, opk)
				}
			}
		}
		if nin {
			m := st.members[npk]
			if m == nil {
				m = make(map[store.Key]struct{})
				st.members[npk] = m
			}
			m[key] = struct{}{}
		}
	}
	if s.stream {
		s.emit(key, ev, now)
	}
}

// result hands a stored item to a caller: a copy, unless the store shares
// its immutable items ([WithSharedResults]).
func (s *Store) result(it store.Item) store.Item {
	if s.shared {
		return it
	}
	return maps.Clone(it)
}

// returned sets a successful write's Attributes.
func (s *Store) returned(out *store.WriteOutput, r store.ReturnValue, ev *evaluation) {
	var it store.Item
	switch r {
	case store.ReturnAllOld:
		if ev.exists {
			it = ev.old
		}
	case store.ReturnAllNew:
		it = ev.new
	case store.ReturnUpdatedOld:
		out.Attributes = pick(ev.old, ev.touched)
	case store.ReturnUpdatedNew:
		out.Attributes = pick(ev.new, ev.touched)
	}
	if it != nil {
		out.Attributes = s.result(it)
	}
}

func pick(it store.Item, names []string) store.Item {
	var out store.Item
	for _, n := range names {
		if v, ok := it[n]; ok {
			if out == nil {
				out = make(store.Item, len(names))
			}
			out[n] = v
		}
	}
	return out
}

// write serves Put, Update and Delete.
func (s *Store) write(ctx context.Context, kind OpKind, w writeReq, prepErr error) (store.WriteOutput, error) {
	if prepErr != nil {
		s.countLocked(kind, outValidation, store.Capacity{})
		return store.WriteOutput{}, prepErr
	}
	d, err := s.start(ctx, kind, "", w.key, func() []store.Key { return []store.Key{w.key} })
	if err != nil {
		return store.WriteOutput{}, err
	}
	now := s.clock.Now().UnixNano()
	var out store.WriteOutput
	s.mu.Lock()
	var ev evaluation
	s.evaluate(&w, &ev)
	switch {
	case ev.err != nil:
		s.count(kind, outValidation, store.Capacity{})
		err = ev.err
	default:
		if p, ok := s.admit(now, s.charges(nil, &w, &ev)); !ok {
			s.count(kind, outThrottle, store.Capacity{})
			reason := tableReason(true)
			if p.index != "" {
				reason = indexReason(true)
			}
			err = &store.ThrottledError{Code: s.throttleCode, Reason: reason, Key: w.key}
			break
		}
		out.Consumed = capacityOf(&w, &ev)
		if ev.failed {
			s.count(kind, outCondition, out.Consumed)
			cf := &store.ConditionFailedError{}
			if w.retOld && ev.exists {
				cf.Item = s.result(ev.old)
			}
			err = cf
			break
		}
		s.commit(&w, &ev, now)
		s.count(kind, outOK, out.Consumed)
		s.returned(&out, w.ret, &ev)
	}
	s.mu.Unlock()
	if lerr := s.late(kind, d); lerr != nil {
		return store.WriteOutput{}, lerr
	}
	return out, err
}

// Put implements [store.Store.Put].
func (s *Store) Put(ctx context.Context, in store.PutInput) (store.WriteOutput, error) {
	if err := s.enter(ctx, OpPut); err != nil {
		return store.WriteOutput{}, err
	}
	w, err := s.preparePut(&in, false)
	return s.write(ctx, OpPut, w, err)
}

// Update implements [store.Store.Update].
func (s *Store) Update(ctx context.Context, in store.UpdateInput) (store.WriteOutput, error) {
	if err := s.enter(ctx, OpUpdate); err != nil {
		return store.WriteOutput{}, err
	}
	w, err := s.prepareUpdate(&in, false)
	return s.write(ctx, OpUpdate, w, err)
}

// Delete implements [store.Store.Delete].
func (s *Store) Delete(ctx context.Context, in store.DeleteInput) (store.WriteOutput, error) {
	if err := s.enter(ctx, OpDelete); err != nil {
		return store.WriteOutput{}, err
	}
	w, err := s.prepareDelete(&in, false)
	return s.write(ctx, OpDelete, w, err)
}

// WriteConcurrently implements [store.Store.WriteConcurrently]. memsim runs
// the writes one after another, in order, each as a request of its own
// (with its own hook call and fault decision); a simulator that wants them
// interleaved with other clients schedules them itself.
func (s *Store) WriteConcurrently(ctx context.Context, writes []store.Write) []store.WriteResult {
	out := make([]store.WriteResult, len(writes))
	for i, w := range writes {
		r := &out[i]
		switch {
		case w.Check != nil:
			r.Err = verr(msgCheckAlone)
		case w.Put != nil && w.Update == nil && w.Delete == nil:
			r.Output, r.Err = s.Put(ctx, *w.Put)
		case w.Update != nil && w.Put == nil && w.Delete == nil:
			r.Output, r.Err = s.Update(ctx, *w.Update)
		case w.Delete != nil && w.Put == nil && w.Update == nil:
			r.Output, r.Err = s.Delete(ctx, *w.Delete)
		default:
			r.Err = verr(msgOneWrite)
		}
	}
	return out
}
