// Package lru is a size-bounded least-recently-used cache whose entries
// also expire. It reads no clock and starts no goroutine: the caller passes
// the current time to every lookup and the expiry to every insert, so a
// simulator driving virtual time sees every expiry, and nothing runs in the
// background. It is not safe for concurrent use; the caller locks.
//
// (hashicorp/golang-lru's expirable cache was the alternative: with a TTL
// its constructor starts a cleanup goroutine that never exits, and it
// dates entries with the wall clock.)
package lru

import "time"

// Cache maps keys to values, holding at most its capacity of entries:
// adding one more evicts the least recently used. An entry whose expiry is
// not after the time of a lookup is gone.
//
// The entries live in slots, linked by index in recency order, and the
// slots of entries that left are reused: adding an entry allocates nothing
// once the cache has grown to its working size (a container/list element
// and its entry were two allocations per insert). Slots come in chunks,
// so that growing never copies the entries held.
type Cache[K comparable, V any] struct {
	max    int
	chunks []*[chunkSize]node[K, V]
	slots  int32       // slots made so far, in chunks
	items  map[K]int32 // slot index
	// head is the most recently used entry, tail the least (nil: -1);
	// free is the first of the slots no entry holds, linked by next.
	head, tail, free int32
	n                int
	// last is the index of the last lookup or insert (-1 when it left):
	// a lookup of the same key again, the common case, skips hashing it.
	last int32
}

// chunkSize is how many slots a chunk holds.
const chunkSize = 16

type node[K comparable, V any] struct {
	key        K
	val        V
	expires    time.Time
	prev, next int32
}

// New returns an empty cache holding at most size entries (at least 1).
func New[K comparable, V any](size int) *Cache[K, V] {
	return &Cache[K, V]{max: max(size, 1), items: make(map[K]int32), head: -1, tail: -1, free: -1, last: -1}
}

// node returns slot i.
func (c *Cache[K, V]) node(i int32) *node[K, V] { return &c.chunks[i/chunkSize][i%chunkSize] }

// Get returns the value of key if it is cached and has not expired at now,
// and marks it as the most recently used. An expired entry is removed.
func (c *Cache[K, V]) Get(key K, now time.Time) (V, bool) {
	i := c.last
	if i < 0 || c.node(i).key != key {
		var ok bool
		if i, ok = c.items[key]; !ok {
			var zero V
			return zero, false
		}
	}
	e := c.node(i)
	if !now.Before(e.expires) {
		c.remove(i)
		var zero V
		return zero, false
	}
	c.toFront(i)
	c.last = i
	return e.val, true
}

// unlink takes node i out of the recency order.
func (c *Cache[K, V]) unlink(i int32) {
	e := c.node(i)
	if e.prev >= 0 {
		c.node(e.prev).next = e.next
	} else {
		c.head = e.next
	}
	if e.next >= 0 {
		c.node(e.next).prev = e.prev
	} else {
		c.tail = e.prev
	}
}

// pushFront makes node i, out of the order, the most recently used.
func (c *Cache[K, V]) pushFront(i int32) {
	e := c.node(i)
	e.prev, e.next = -1, c.head
	if c.head >= 0 {
		c.node(c.head).prev = i
	} else {
		c.tail = i
	}
	c.head = i
}

// toFront marks node i as the most recently used.
func (c *Cache[K, V]) toFront(i int32) {
	if c.head != i {
		c.unlink(i)
		c.pushFront(i)
	}
}

// remove drops the entry of node i and frees its slot (cleared, so that
// the cache keeps nothing of what left it).
func (c *Cache[K, V]) remove(i int32) {
	if c.last == i {
		c.last = -1
	}
	c.unlink(i)
	e := c.node(i)
	delete(c.items, e.key)
	*e = node[K, V]{next: c.free}
	c.free = i
	c.n--
}

// Add caches val for key until expires, replacing any value key had, and
// evicts the least recently used entry when the cache is over capacity.
func (c *Cache[K, V]) Add(key K, val V, expires time.Time) {
	if i, ok := c.items[key]; ok {
		e := c.node(i)
		e.val, e.expires = val, expires
		c.toFront(i)
		c.last = i
		return
	}
	i := c.free
	if i >= 0 {
		c.free = c.node(i).next
	} else {
		if c.slots%chunkSize == 0 {
			c.chunks = append(c.chunks, new([chunkSize]node[K, V]))
		}
		i = c.slots
		c.slots++
	}
	*c.node(i) = node[K, V]{key: key, val: val, expires: expires}
	c.items[key] = i
	c.pushFront(i)
	c.n++
	c.last = i
	if c.n > c.max {
		c.remove(c.tail)
	}
}

// Purge drops every entry.
func (c *Cache[K, V]) Purge() {
	c.chunks, c.slots = nil, 0
	clear(c.items)
	c.head, c.tail, c.free, c.last, c.n = -1, -1, -1, -1, 0
}

// Len returns the number of entries held, expired ones not yet removed
// included.
func (c *Cache[K, V]) Len() int { return c.n }

// Remove drops key's entry, if any.
func (c *Cache[K, V]) Remove(key K) {
	if i, ok := c.items[key]; ok {
		c.remove(i)
	}
}
