package memsim

import (
	"maps"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/schema"
)

// Size limits and capacity unit sizes, as DynamoDB defines them.
const (
	// MaxItemSize is DynamoDB's item size limit, 400 KB, attribute names
	// included.
	MaxItemSize = 400 * 1024
	// MaxTransactionSize is the aggregate item size limit of one
	// transaction, 4 MB.
	MaxTransactionSize = 4 * 1024 * 1024
	// MaxPartitionKeySize and MaxSortKeySize are the key value limits, in
	// bytes.
	MaxPartitionKeySize = 2048
	MaxSortKeySize      = 1024

	writeUnitBytes = 1024
	readUnitBytes  = 4096
)

// ItemSize returns the size of it as DynamoDB counts it for capacity and
// for the 400 KB limit: for each attribute, the UTF-8 bytes of its name
// plus the size of its value ([ValueSize]).
func ItemSize(it store.Item) int {
	n := 0
	for name, v := range it {
		n += len(name) + ValueSize(v)
	}
	return n
}

// ValueSize returns the stored size of v: a string's UTF-8 bytes; for a
// number, see [NumberSize].
func ValueSize(v store.Value) int {
	if s, ok := v.AsString(); ok {
		return len(s)
	}
	if n, ok := v.AsInt(); ok {
		return NumberSize(n)
	}
	return 0
}

// NumberSize returns the stored size of the number n. DynamoDB documents
// it as "approximately 1 byte per two significant digits, plus 1 byte";
// the exact rule, which this implements, stores the number in base 100
// (pairs of decimal digits aligned on the decimal point, so 120 is the two
// digits 1|20), drops trailing zero pairs (1000 is 10|00, one digit), and
// adds one byte for the exponent and one more for a negative number; zero
// takes 1 byte. So 1 → 2 bytes, 99 → 2, 100 → 2, 120 → 3, 12345 → 4,
// -1 → 3, and an int64 at most 12.
func NumberSize(n int64) int {
	if n == 0 {
		return 1
	}
	size := 1
	u := uint64(n)
	if n < 0 {
		u = -u // two's complement magnitude; correct for math.MinInt64 too
		size++
	}
	for u%100 == 0 {
		u /= 100
	}
	digits := 0
	for ; u > 0; u /= 10 {
		digits++
	}
	return size + (digits+1)/2 // one byte per pair of decimal digits
}

// WriteUnits returns the write capacity units of writing size bytes once:
// one per started KB, at least one.
func WriteUnits(size int) float64 {
	if size <= writeUnitBytes {
		return 1
	}
	return float64((size + writeUnitBytes - 1) / writeUnitBytes)
}

// ReadUnits returns the read capacity units of reading size bytes: one per
// started 4 KB (at least one) for a strongly consistent read, half that for
// an eventually consistent one.
func ReadUnits(size int, consistent bool) float64 {
	u := 1
	if size > readUnitBytes {
		u = (size + readUnitBytes - 1) / readUnitBytes
	}
	if consistent {
		return float64(u)
	}
	return float64(u) / 2
}

// indexEntrySize returns the size of the entry of it in ix: the table and
// index key attributes, plus, for ProjectAll, every other attribute. (The
// 100 bytes of per-entry overhead DynamoDB adds are storage only, not
// throughput.)
func (s *Store) indexEntrySize(it store.Item, size int, ix schema.Index) int {
	if ix.Projection == schema.ProjectAll {
		return size
	}
	return ItemSize(s.projected(it, ix))
}

// projected returns the entry of it in a keys-only index, or a clone of it
// for ProjectAll.
func (s *Store) projected(it store.Item, ix schema.Index) store.Item {
	if ix.Projection == schema.ProjectAll {
		return maps.Clone(it)
	}
	out := make(store.Item, 4)
	for _, name := range [...]string{s.schema.PartitionKey, s.schema.SortKey, ix.PartitionKey, ix.SortKey} {
		if v, ok := it[name]; ok {
			out[name] = v
		}
	}
	return out
}
