package memsim

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// Get implements [store.Store.Get]: 1 read unit per started 4 KB for a
// strongly consistent read, half for an eventually consistent one, and the
// minimum for a missing item. Reads always see the latest write (memsim
// does not model stale eventually consistent reads).
func (s *Store) Get(ctx context.Context, in store.GetInput) (store.GetOutput, error) {
	if err := s.enter(ctx, OpGet); err != nil {
		return store.GetOutput{}, err
	}
	if err := s.checkKey(in.Key); err != nil {
		s.countLocked(OpGet, outValidation, store.Capacity{})
		return store.GetOutput{}, err
	}
	d, err := s.start(ctx, OpGet, "", in.Key, func() []store.Key { return []store.Key{in.Key} })
	if err != nil {
		return store.GetOutput{}, err
	}
	now := s.clock.Now().UnixNano()
	var out store.GetOutput
	s.mu.Lock()
	e := s.items[in.Key]
	units := ReadUnits(e.size, in.ConsistentRead)
	if _, ok := s.admit(now, chargeList{{part: partKey{pk: in.Key.PK}, milli: milli(units)}}); !ok {
		s.count(OpGet, outThrottle, store.Capacity{})
		err = &store.ThrottledError{Code: s.throttleCode, Reason: tableReason(false), Key: in.Key}
	} else {
		out.Consumed = store.Capacity{ReadUnits: units}
		s.count(OpGet, outOK, out.Consumed)
	}
	s.mu.Unlock()
	if err == nil {
		out.Item = maps.Clone(e.item)
	}
	if lerr := s.late(OpGet, d); lerr != nil {
		return store.GetOutput{}, lerr
	}
	return out, err
}

// BatchGet implements [store.Store.BatchGet]. Each item is rounded up to
// 4 KB separately. If any partition cannot pay for its keys the whole call
// is throttled (the store contract has no unprocessed keys: a real backend
// retries them).
func (s *Store) BatchGet(ctx context.Context, in store.BatchGetInput) (store.BatchGetOutput, error) {
	if err := s.enter(ctx, OpBatchGet); err != nil {
		return store.BatchGetOutput{}, err
	}
	if err := s.checkBatch(in.Keys); err != nil {
		s.countLocked(OpBatchGet, outValidation, store.Capacity{})
		return store.BatchGetOutput{}, err
	}
	d, err := s.start(ctx, OpBatchGet, "", in.Keys[0], func() []store.Key { return slices.Clone(in.Keys) })
	if err != nil {
		return store.BatchGetOutput{}, err
	}
	now := s.clock.Now().UnixNano()
	found := make([]store.Item, len(in.Keys))
	var clBuf [8]charge // a batch of a few keys (the common one) needs no heap for its charges
	cl := chargeList(clBuf[:0])
	var units float64
	s.mu.Lock()
	for i, k := range in.Keys {
		e := s.items[k]
		found[i] = e.item // copied below, outside the lock
		u := ReadUnits(e.size, in.ConsistentRead)
		units += u
		cl = cl.add(charge{part: partKey{pk: k.PK}, milli: milli(u)})
	}
	if p, ok := s.admit(now, cl); !ok {
		s.count(OpBatchGet, outThrottle, store.Capacity{})
		err = &store.ThrottledError{Code: s.throttleCode, Reason: tableReason(false), Key: in.Keys[slices.IndexFunc(in.Keys, func(k store.Key) bool { return k.PK == p.pk })]}
	} else {
		s.count(OpBatchGet, outOK, store.Capacity{ReadUnits: units})
	}
	s.mu.Unlock()
	if lerr := s.late(OpBatchGet, d); lerr != nil {
		return store.BatchGetOutput{}, lerr
	}
	if err != nil {
		return store.BatchGetOutput{}, err
	}
	for i, x := range found {
		found[i] = maps.Clone(x)
	}
	return store.BatchGetOutput{Items: found, Consumed: store.Capacity{ReadUnits: units}}, nil
}

func (s *Store) checkBatch(keys []store.Key) error {
	switch {
	case len(keys) == 0:
		return verr(msgNoKeys)
	case len(keys) > 100:
		return verr(msgTooManyKeys)
	}
	for _, k := range keys {
		if err := s.checkKey(k); err != nil {
			return err
		}
	}
	if hasDuplicate(keys) {
		return verr(msgDuplicateKeys)
	}
	return nil
}

func hasDuplicate(keys []store.Key) bool {
	seen := make(map[store.Key]struct{}, len(keys))
	for _, k := range keys {
		if _, dup := seen[k]; dup {
			return true
		}
		seen[k] = struct{}{}
	}
	return false
}

// Query implements [store.Store.Query]. It reads one partition of the
// table or of an index, in ascending sort-key order (byte order; for an
// index, items with equal index sort keys follow table key order). The read
// units are the returned items' total size rounded up to 4 KB (at least
// one read), halved for an eventually consistent query; index queries are
// always eventually consistent. memsim answers in one page whatever the
// size (the contract follows pagination to the end).
func (s *Store) Query(ctx context.Context, in store.QueryInput) (store.QueryOutput, error) {
	if err := s.enter(ctx, OpQuery); err != nil {
		return store.QueryOutput{}, err
	}
	ixPos, pkName := -1, s.schema.PartitionKey
	for i, st := range s.indexes {
		if in.Index != "" && st.ix.Name == in.Index {
			ixPos, pkName = i, st.ix.PartitionKey
		}
	}
	var bad error
	switch {
	case in.Index != "" && ixPos < 0:
		bad = verr("The table does not have the specified index: " + in.Index)
	case in.Index != "" && in.ConsistentRead:
		bad = verr(msgConsistentOnIndex)
	case in.PartitionKey == "":
		bad = verr(msgEmptyKey(pkName))
	case in.Limit < 0:
		bad = verr(msgBadLimit(in.Limit))
	}
	if bad != nil {
		s.countLocked(OpQuery, outValidation, store.Capacity{})
		return store.QueryOutput{}, bad
	}
	key := store.Key{PK: in.PartitionKey}
	d, err := s.start(ctx, OpQuery, in.Index, key, func() []store.Key { return []store.Key{key} })
	if err != nil {
		return store.QueryOutput{}, err
	}
	now := s.clock.Now().UnixNano()
	var items []store.Item
	var units float64
	s.mu.Lock()
	if ixPos < 0 {
		items, units = s.queryTable(in)
	} else {
		items, units = s.queryIndex(ixPos, in)
	}
	if _, ok := s.admit(now, chargeList{{part: partKey{index: in.Index, pk: in.PartitionKey}, milli: milli(units)}}); !ok {
		s.count(OpQuery, outThrottle, store.Capacity{})
		reason := tableReason(false)
		if in.Index != "" {
			reason = indexReason(false)
		}
		err = &store.ThrottledError{Code: s.throttleCode, Reason: reason, Key: key}
		items = nil
	} else {
		s.count(OpQuery, outOK, store.Capacity{ReadUnits: units})
	}
	s.mu.Unlock()
	if lerr := s.late(OpQuery, d); lerr != nil {
		return store.QueryOutput{}, lerr
	}
	if err != nil {
		return store.QueryOutput{}, err
	}
	return store.QueryOutput{Items: items, Consumed: store.Capacity{ReadUnits: units}}, nil
}

// queryTable returns copies of the matching items and the read units. Call
// with s.mu held.
func (s *Store) queryTable(in store.QueryInput) ([]store.Item, float64) {
	sks := s.byPK[in.PartitionKey]
	keys := make([]string, 0, len(sks))
	for sk := range sks {
		if strings.HasPrefix(sk, in.SortKeyPrefix) {
			keys = append(keys, sk)
		}
	}
	slices.Sort(keys)
	if in.Limit > 0 && len(keys) > in.Limit {
		keys = keys[:in.Limit]
	}
	items := make([]store.Item, len(keys))
	size := 0
	for i, sk := range keys {
		e := s.items[store.Key{PK: in.PartitionKey, SK: sk}]
		items[i] = maps.Clone(e.item)
		size += e.size
	}
	return items, ReadUnits(size, in.ConsistentRead)
}

// queryIndex is queryTable for an index. Call with s.mu held.
func (s *Store) queryIndex(pos int, in store.QueryInput) ([]store.Item, float64) {
	st := &s.indexes[pos]
	type hit struct {
		sk  string
		key store.Key
	}
	members := st.members[in.PartitionKey]
	hits := make([]hit, 0, len(members))
	for k := range members {
		sk, _ := s.items[k].item.Str(st.ix.SortKey)
		if strings.HasPrefix(sk, in.SortKeyPrefix) {
			hits = append(hits, hit{sk, k})
		}
	}
	slices.SortFunc(hits, func(a, b hit) int { return cmp.Or(cmp.Compare(a.sk, b.sk), compareKeys(a.key, b.key)) })
	if in.Limit > 0 && len(hits) > in.Limit {
		hits = hits[:in.Limit]
	}
	items := make([]store.Item, len(hits))
	size := 0
	for i, h := range hits {
		e := s.items[h.key]
		items[i] = s.projected(e.item, st.ix)
		size += s.indexEntrySize(e.item, e.size, st.ix)
	}
	return items, ReadUnits(size, false)
}
