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

import (
	"container/list"
	"time"
)

// Cache maps keys to values, holding at most its capacity of entries:
// adding one more evicts the least recently used. An entry whose expiry is
// not after the time of a lookup is gone.
type Cache[K comparable, V any] struct {
	max   int
	order list.List // of *entry[K, V]; front: most recently used
	items map[K]*list.Element
	// last is the element of the last lookup or insert (nil when it left):
	// a lookup of the same key again, the common case, skips hashing it.
	last *list.Element
}

type entry[K comparable, V any] struct {
	key     K
	val     V
	expires time.Time
}

// New returns an empty cache holding at most size entries (at least 1).
func New[K comparable, V any](size int) *Cache[K, V] {
	return &Cache[K, V]{max: max(size, 1), items: make(map[K]*list.Element)}
}

// Get returns the value of key if it is cached and has not expired at now,
// and marks it as the most recently used. An expired entry is removed.
func (c *Cache[K, V]) Get(key K, now time.Time) (V, bool) {
	var zero V
	el := c.last
	if el == nil || el.Value.(*entry[K, V]).key != key {
		var ok bool
		if el, ok = c.items[key]; !ok {
			return zero, false
		}
	}
	e := el.Value.(*entry[K, V])
	if !now.Before(e.expires) {
		c.remove(el)
		return zero, false
	}
	c.order.MoveToFront(el)
	c.last = el
	return e.val, true
}

// remove drops the entry of el.
func (c *Cache[K, V]) remove(el *list.Element) {
	if c.last == el {
		c.last = nil
	}
	c.order.Remove(el)
	delete(c.items, el.Value.(*entry[K, V]).key)
}

// Add caches val for key until expires, replacing any value key had, and
// evicts the least recently used entry when the cache is over capacity.
func (c *Cache[K, V]) Add(key K, val V, expires time.Time) {
	if el, ok := c.items[key]; ok {
		e := el.Value.(*entry[K, V])
		e.val, e.expires = val, expires
		c.order.MoveToFront(el)
		c.last = el
		return
	}
	el := c.order.PushFront(&entry[K, V]{key: key, val: val, expires: expires})
	c.items[key] = el
	c.last = el
	if c.order.Len() > c.max {
		c.remove(c.order.Back())
	}
}

// Purge drops every entry.
func (c *Cache[K, V]) Purge() {
	c.order.Init()
	clear(c.items)
	c.last = nil
}

// Len returns the number of entries held, expired ones not yet removed
// included.
func (c *Cache[K, V]) Len() int { return c.order.Len() }

// Remove drops key's entry, if any.
func (c *Cache[K, V]) Remove(key K) {
	if el, ok := c.items[key]; ok {
		c.remove(el)
	}
}
