package memsim

import (
	"cmp"
	"slices"

	"github.com/shardlimit/limiter/store"
)

// The partition model.
//
// Every partition key value of the table, and every partition key value of
// each index, is a partition of its own with two token buckets: write units
// and read units. A bucket holds at most one second of its rate (default
// 1000 WCU and 3000 RCU), starts full, and refills continuously at its rate
// by the store's clock. A request first computes what it would consume on
// each partition it touches (the table partition of each item, and the
// index partitions its index writes land on); if any of those buckets holds
// less than that, the request is throttled: it changes nothing and consumes
// nothing. Otherwise every bucket is debited.
//
// Arithmetic is exact: a bucket counts in milli-units times nanoseconds, so
// refill over d nanoseconds at r milli-units per second adds exactly d*r.
//
// Not modelled: DynamoDB's burst capacity (up to 300 s of unused capacity,
// spent before a partition throttles), adaptive capacity beyond the
// per-partition ceiling, on-demand warm throughput and the 2x-previous-peak
// rule, split for heat. A single partition key of DynamoDB never exceeds
// 1000 WCU/s and 3000 RCU/s however it is split, and that ceiling is what
// the limiter designs against.

const (
	nsPerSecond = int64(1e9)
	// maxRate is the largest per-partition rate, in units per second,
	// that the bucket arithmetic supports without overflow.
	maxRate = 1_000_000
)

type partKey struct {
	index string // "" for the table
	pk    string
}

type bucket struct {
	started bool
	last    int64 // Unix ns of the last refill
	tokens  int64 // milli-units * ns
}

// refill brings b up to now, for a rate in milli-units per second.
func (b *bucket) refill(now, rate int64) {
	capacity := rate * nsPerSecond
	if !b.started {
		b.started, b.last, b.tokens = true, now, capacity
		return
	}
	if now <= b.last {
		return
	}
	el := now - b.last
	b.last = now
	if el >= nsPerSecond {
		b.tokens = capacity
		return
	}
	b.tokens += el * rate
	if b.tokens > capacity {
		b.tokens = capacity
	}
}

// available returns the units b would hold at now, without changing it.
func (b bucket) available(now, rate int64) float64 {
	b.refill(now, rate)
	return float64(b.tokens/nsPerSecond) / 1000
}

type partition struct {
	write, read bucket
	stats       PartitionStats
}

// PartitionStats describes one partition: its consumption and throttles
// since the store was created, and the capacity it has left now.
type PartitionStats struct {
	// Index is the index the partition belongs to, "" for the table.
	Index string
	// PK is the partition key value.
	PK string
	// Requests counts the requests that consumed capacity on the
	// partition.
	Requests uint64
	// Throttles counts the requests throttled because this partition was
	// over its ceiling.
	Throttles uint64
	// Consumed is the capacity consumed on the partition. For an index
	// partition, its writes are in both WriteUnits and IndexWriteUnits.
	Consumed store.Capacity
	// WriteAvailable and ReadAvailable are the units the partition's
	// buckets hold at the clock's current time (the limit for an unlimited
	// store: 0).
	WriteAvailable, ReadAvailable float64
}

// charge is what a request would consume on one partition.
type charge struct {
	part  partKey
	p     *partition // part's partition, resolved by admit
	write bool
	milli int64 // milli-units
}

func milli(units float64) int64 { return int64(units * 1000) }

// chargeList is a request's charges, merged per (partition, read/write).
type chargeList []charge

func (cl chargeList) add(c charge) chargeList {
	for i := range cl {
		if cl[i].part == c.part && cl[i].write == c.write {
			cl[i].milli += c.milli
			return cl
		}
	}
	return append(cl, c)
}

func (s *Store) part(k partKey) *partition {
	p := s.parts[k]
	if p == nil {
		p = &partition{stats: PartitionStats{Index: k.index, PK: k.pk}}
		s.parts[k] = p
	}
	return p
}

// admit checks the charges against their partitions at now. If every
// partition can pay, it debits them all, records the consumption and
// returns ok; otherwise it debits nothing, counts a throttle on the first
// partition that cannot pay, and returns that partition.
func (s *Store) admit(now int64, cl chargeList) (partKey, bool) {
	for i := range cl {
		c := &cl[i]
		c.p = s.part(c.part)
		rate := s.rcuRate
		if c.write {
			rate = s.wcuRate
		}
		if rate == 0 {
			continue
		}
		p := c.p
		b := &p.read
		if c.write {
			b = &p.write
		}
		b.refill(now, rate)
		if b.tokens < c.milli*nsPerSecond {
			p.stats.Throttles++
			return c.part, false
		}
	}
	for i, c := range cl {
		p := c.p
		u := float64(c.milli) / 1000
		if c.write {
			if s.wcuRate != 0 {
				p.write.tokens -= c.milli * nsPerSecond
			}
			p.stats.Consumed.WriteUnits += u
			if c.part.index != "" {
				p.stats.Consumed.IndexWriteUnits += u
			}
		} else {
			if s.rcuRate != 0 {
				p.read.tokens -= c.milli * nsPerSecond
			}
			p.stats.Consumed.ReadUnits += u
		}
		// One request per partition, even when it pays reads and writes.
		if !slices.ContainsFunc(cl[:i], func(prev charge) bool { return prev.part == c.part }) {
			p.stats.Requests++
		}
	}
	return partKey{}, true
}

// Partition returns the statistics of the table partition pk.
func (s *Store) Partition(pk string) PartitionStats {
	return s.IndexPartition("", pk)
}

// PartitionConsumed returns the capacity partition pk of the table has
// consumed: the Consumed of [Store.Partition], without the rest (no clock
// read, no bucket refilled), for a caller that samples it on every write.
// It is zero for a partition nothing was charged to.
func (s *Store) PartitionConsumed(pk string) store.Capacity { return s.counters(pk).Consumed }

// PartitionThrottles returns how many requests partition pk of the table
// has throttled for being over its ceiling: the Throttles of
// [Store.Partition], without the rest.
func (s *Store) PartitionThrottles(pk string) uint64 { return s.counters(pk).Throttles }

// counters returns table partition pk's counters (zero for a partition
// nothing was charged to) without its buckets' availability.
func (s *Store) counters(pk string) PartitionStats {
	if s == nil {
		return PartitionStats{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.parts[partKey{pk: pk}]; p != nil {
		return p.stats
	}
	return PartitionStats{}
}

// IndexPartition returns the statistics of partition pk of index (the
// table for "").
func (s *Store) IndexPartition(index, pk string) PartitionStats {
	if s.zero() {
		return PartitionStats{Index: index, PK: pk}
	}
	now := s.clock.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[partKey{index, pk}]
	if p == nil {
		p = &partition{stats: PartitionStats{Index: index, PK: pk}}
	}
	return s.statsOf(p, now)
}

func (s *Store) statsOf(p *partition, now int64) PartitionStats {
	st := p.stats
	if s.wcuRate != 0 {
		st.WriteAvailable = p.write.available(now, s.wcuRate)
	}
	if s.rcuRate != 0 {
		st.ReadAvailable = p.read.available(now, s.rcuRate)
	}
	return st
}

// Partitions returns the statistics of every partition that has been
// touched, table partitions first, then each index's, each group sorted by
// partition key.
func (s *Store) Partitions() []PartitionStats {
	if s.zero() {
		return nil
	}
	now := s.clock.Now().UnixNano()
	s.mu.Lock()
	out := make([]PartitionStats, 0, len(s.parts))
	for _, p := range s.parts {
		out = append(out, s.statsOf(p, now))
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b PartitionStats) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.PK, b.PK))
	})
	return out
}
