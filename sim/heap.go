package sim

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

// before reports whether a comes before b: (at, seq) is a total order.
func (a event) before(b event) bool { return a.at < b.at || (a.at == b.at && a.seq < b.seq) }

// eventHeap is the scheduler's queue.
type eventHeap = minHeap[event]

// minHeap is a binary min-heap: h[i] comes before its children h[2i+1]
// and h[2i+2]. Its elements' order must be total (ties broken by a
// sequence number), so that the order of pops does not depend on the
// heap's shape.
type minHeap[T interface{ before(T) bool }] []T

func (h *minHeap[T]) push(e T) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].before(s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

// pop removes and returns the first element; the heap must not be empty.
func (h *minHeap[T]) pop() T {
	s := *h
	first := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		least := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(s) && s[c].before(s[least]) {
				least = c
			}
		}
		if least == i {
			break
		}
		s[i], s[least] = s[least], s[i]
		i = least
	}
	*h = s
	return first
}
