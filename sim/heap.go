package sim

// evKind is what a scheduled event does.
type evKind uint8

const (
	evWake    evKind = iota + 1 // resume a client that slept
	evApply                     // apply an in-flight request to the store
	evDeliver                   // hand an in-flight request's answer to its client
	evSweep                     // delete the expired items that are due (slot: the sweeper's generation)
)

// event is one entry of the scheduler's queue. Events are values: pushing
// one never allocates once the heap has grown to its working size.
type event struct {
	at   int64  // virtual time, ns since the simulation's epoch
	seq  uint64 // insertion order: ties on at are broken by it, so order never depends on the heap's layout
	who  int32  // client index
	slot int32  // in-flight request index (evApply, evDeliver), or the sweeper's generation (evSweep)
	kind evKind
}

// eventHeap is a 4-ary min-heap of events ordered by (at, seq): half the
// depth of a binary heap, and a node's children share a cache line or two.
// (at, seq) is a total order, so the order of pops does not depend on the
// heap's shape.
type eventHeap []event

// before reports whether a comes before b.
func (a *event) before(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// push and pop move the event in hand along a hole instead of swapping it
// down (or up) level by level: one copy of an event per level, not three.
func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !e.before(&s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = e
}

func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	n := len(s) - 1
	x := s[n]
	s = s[:n]
	if n > 0 {
		s.down(x)
	}
	*h = s
	return top
}

// replaceTop puts e in place of the first event: a pop and a push in one
// pass down the heap (the scheduler's usual step: an event is handled and
// schedules the next one of its client).
func (h eventHeap) replaceTop(e event) { h.down(e) }

// down moves x from the root's place down to where it belongs. A node
// with all four children (the usual case) compares them unrolled, on a
// slice of exactly four.
func (h eventHeap) down(x event) {
	s := h
	n := len(s)
	i := 0
	for {
		first := 4*i + 1
		if first+4 <= n {
			c := s[first : first+4 : first+4]
			m := 0
			if c[1].before(&c[m]) {
				m = 1
			}
			if c[2].before(&c[m]) {
				m = 2
			}
			if c[3].before(&c[m]) {
				m = 3
			}
			if !c[m].before(&x) {
				break
			}
			s[i] = c[m]
			i = first + m
			continue
		}
		if first >= n {
			break
		}
		m := first
		for c := first + 1; c < n; c++ {
			if s[c].before(&s[m]) {
				m = c
			}
		}
		if !s[m].before(&x) {
			break
		}
		s[i] = s[m]
		i = m
	}
	s[i] = x
}
