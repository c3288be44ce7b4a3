package memsim

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// scanPageBytes is the size of a Scan page without a Limit, as DynamoDB's
// 1 MB.
const scanPageBytes = 1 << 20

// Scan implements [store.Store]: the table's items in key order (partition
// key, then sort key, byte-wise), a page at a time, billed as eventually
// consistent reads of every item the page read. A Scan is neither
// throttled nor subject to injected faults or hooks: it serves operator
// commands, which the simulations do not model.
func (s *Store) Scan(ctx context.Context, in store.ScanInput) (store.ScanOutput, error) {
	if err := s.usable(ctx); err != nil {
		return store.ScanOutput{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.ScanOutput{}, &store.UnavailableError{Op: "Scan", Err: err}
	}
	if in.Limit < 0 {
		return store.ScanOutput{}, verr(msgBadLimit(in.Limit))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]store.Key, 0, len(s.items))
	for k := range s.items {
		if in.Start == nil || compareKeys(k, *in.Start) > 0 {
			all = append(all, k)
		}
	}
	slices.SortFunc(all, compareKeys)
	var out store.ScanOutput
	size := 0
	for i, k := range all {
		if (in.Limit > 0 && i == in.Limit) || (in.Limit == 0 && size >= scanPageBytes) {
			next := all[i-1]
			out.Next = &next
			break
		}
		e := s.items[k]
		size += e.size
		if strings.HasPrefix(k.PK, in.PartitionKeyPrefix) {
			out.Items = append(out.Items, maps.Clone(e.item))
		}
	}
	if size > 0 {
		out.Consumed.ReadUnits = ReadUnits(size, false)
	}
	return out, nil
}
