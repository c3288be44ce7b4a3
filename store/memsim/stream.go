package memsim

import (
	"maps"
	"sort"
	"time"

	"github.com/shardlimit/limiter/store"
)

// Stream event names, as DynamoDB Streams sends them.
const (
	EventInsert = "INSERT" // the write created the item
	EventModify = "MODIFY" // the write changed an existing item
	EventRemove = "REMOVE" // the write deleted the item
)

// Record is one change stream record (DynamoDB Streams with
// NEW_AND_OLD_IMAGES): one per item a write changed. A write that changes
// nothing (ADD n :0, SET to the same value, deleting a missing item, a
// failed condition) emits nothing.
type Record struct {
	// Seq is the record's sequence number: global, starting at 1, without
	// gaps, in the order the writes were applied.
	Seq uint64
	// Event is EventInsert, EventModify or EventRemove.
	Event string
	// Keys is the item's key.
	Keys store.Key
	// Old is the item before the write (nil for INSERT); New the item after
	// it (nil for REMOVE).
	Old, New store.Item
	// At is the store clock's time when the write was applied.
	At time.Time
}

// emit appends the record of a committed change. Call with s.mu held.
func (s *Store) emit(key store.Key, ev *evaluation, now int64) {
	s.lastSeq++
	r := Record{Seq: s.lastSeq, Keys: key, At: time.Unix(0, now).UTC()}
	switch {
	case ev.remove:
		r.Event, r.Old = EventRemove, ev.old
	case !ev.exists:
		r.Event, r.New = EventInsert, ev.new
	default:
		r.Event, r.Old, r.New = EventModify, ev.old, ev.new
	}
	s.records = append(s.records, r)
	s.totals.StreamRecords++
}

// Stream returns the retained records with Seq > afterSeq, in order. The
// images are copies the caller may keep and modify (the store's own maps
// with [WithSharedResults]).
func (s *Store) Stream(afterSeq uint64) []Record {
	return s.AppendStream(nil, afterSeq)
}

// AppendStream is [Store.Stream] appending to buf, so that a consumer that
// reads the stream after every request reuses one slice.
func (s *Store) AppendStream(buf []Record, afterSeq uint64) []Record {
	if s == nil {
		return buf
	}
	s.mu.Lock()
	i := sort.Search(len(s.records), func(i int) bool { return s.records[i].Seq > afterSeq })
	n := len(buf)
	buf = append(buf, s.records[i:]...)
	s.mu.Unlock()
	if !s.shared {
		for j := n; j < len(buf); j++ {
			buf[j].Old = maps.Clone(buf[j].Old)
			buf[j].New = maps.Clone(buf[j].New)
		}
	}
	return buf
}

// StreamLen returns the number of records emitted so far, which is also
// the Seq of the latest one (0 when none). Records dropped by [Store.TrimStream]
// still count.
func (s *Store) StreamLen() uint64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeq
}

// TrimStream drops the records with Seq <= throughSeq, as a consumer that
// has processed them would let DynamoDB's 24-hour retention do. memsim keeps
// every record until trimmed; a long simulation with the stream on should
// trim what its consumers have read.
func (s *Store) TrimStream(throughSeq uint64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.records), func(i int) bool { return s.records[i].Seq > throughSeq })
	clear(s.records[:i])
	if i == len(s.records) {
		s.records = s.records[:0] // reuse the array from its start
		return
	}
	s.records = s.records[i:]
}
