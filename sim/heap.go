package sim

import "container/heap"

// evKind is what a scheduled event does.
type evKind uint8

const (
	evWake    evKind = iota + 1 // resume a client that slept
	evApply                     // apply an in-flight request to the store
	evDeliver                   // hand an in-flight request's answer to its client
	evSweep                     // delete the expired items that are due (slot: the sweeper's generation)
)

// event is one entry of the scheduler's queue.
type event struct {
	at   int64  // virtual time, ns since the simulation's epoch
	seq  uint64 // insertion order: ties on at are broken by it, so order never depends on the heap's layout
	who  int32  // client index
	slot int32  // in-flight request index (evApply, evDeliver), or the sweeper's generation (evSweep)
	kind evKind
}

// eventHeap is a min-heap of events ordered by (at, seq), on
// container/heap. (at, seq) is a total order, so the order of pops does
// not depend on the heap's shape.
type eventHeap []event

// before reports whether a comes before b.
func (a *event) before(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// push adds e.
func (h *eventHeap) push(e event) { heap.Push(h, e) }

// pop removes and returns the first event; the heap must not be empty.
func (h *eventHeap) pop() event { return heap.Pop(h).(event) }

// The methods of heap.Interface.
func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(i, j int) bool { return h[i].before(&h[j]) }
func (h eventHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	s := *h
	e := s[len(s)-1]
	*h = s[:len(s)-1]
	return e
}
