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

// eventHeap is a binary min-heap of events ordered by (at, seq): h[i]
// comes before its children h[2i+1] and h[2i+2]. (at, seq) is a total
// order, so the order of pops does not depend on the heap's shape.
type eventHeap []event

// before reports whether a comes before b.
func (a *event) before(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// push adds e.
func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].before(&s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

// pop removes and returns the first event; the heap must not be empty.
func (h *eventHeap) pop() event {
	s := *h
	first := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		least := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(s) && s[c].before(&s[least]) {
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
