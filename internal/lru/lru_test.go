package lru

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](2)
	c.Add("a", 1, t0.Add(time.Hour))
	c.Add("b", 2, t0.Add(time.Hour))
	if _, ok := c.Get("a", t0); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	c.Add("c", 3, t0.Add(time.Hour)) // evicts b
	if _, ok := c.Get("b", t0); ok {
		t.Fatal("b should have been evicted (least recently used)")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.Get(k, t0); !ok || v != want {
			t.Fatalf("%s = %d, %v; want %d", k, v, ok, want)
		}
	}
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2", c.Len())
	}
}

func TestExpiresByTheCallersClock(t *testing.T) {
	c := New[string, int](10)
	c.Add("a", 1, t0.Add(time.Minute))
	if _, ok := c.Get("a", t0.Add(time.Minute-time.Nanosecond)); !ok {
		t.Fatal("expired early")
	}
	if _, ok := c.Get("a", t0.Add(time.Minute)); ok {
		t.Fatal("not expired at its expiry")
	}
	if c.Len() != 0 {
		t.Fatal("an expired entry stays after a lookup")
	}
	c.Add("a", 2, t0.Add(time.Hour)) // re-added with a new expiry
	c.Add("a", 3, t0.Add(2*time.Hour))
	if v, ok := c.Get("a", t0.Add(90*time.Minute)); !ok || v != 3 {
		t.Fatalf("a = %d, %v; want 3 (replaced, with the later expiry)", v, ok)
	}
}

func TestSizeAtLeastOneAndPurge(t *testing.T) {
	c := New[int, int](0) // capacity raised to 1
	c.Add(1, 1, t0.Add(time.Hour))
	c.Add(2, 2, t0.Add(time.Hour))
	if _, ok := c.Get(1, t0); ok || c.Len() != 1 {
		t.Fatal("capacity 0 must hold one entry")
	}
	c.Add(4, 4, t0.Add(time.Hour))
	c.Purge()
	if _, ok := c.Get(4, t0); ok || c.Len() != 0 {
		t.Fatal("Purge left an entry")
	}
}

// A key looked up again is found without hashing (Cache.last): an entry
// that left by any way must not be found that way.
func TestRepeatedLookupAfterTheEntryLeft(t *testing.T) {
	c := New[string, int](2)
	c.Add("a", 1, t0.Add(time.Hour))
	c.Remove("a")
	if _, ok := c.Get("a", t0); ok {
		t.Fatal("a found after Remove")
	}
	c.Add("a", 1, t0.Add(time.Hour))
	c.Add("b", 2, t0.Add(time.Hour))
	c.Add("c", 3, t0.Add(time.Hour)) // evicts a
	if _, ok := c.Get("a", t0); ok {
		t.Fatal("a found after its eviction")
	}
	if _, ok := c.Get("c", t0); !ok {
		t.Fatal("c missing")
	}
	c.Purge()
	if _, ok := c.Get("c", t0); ok {
		t.Fatal("c found after Purge")
	}
	c.Add("d", 4, t0.Add(time.Minute))
	if _, ok := c.Get("d", t0.Add(time.Minute)); ok {
		t.Fatal("d found at its expiry")
	}
	if _, ok := c.Get("d", t0); ok || c.Len() != 0 {
		t.Fatal("d found after it expired and was removed")
	}
	c.Add("e", 5, t0.Add(time.Hour))
	c.Add("e", 6, t0.Add(time.Hour)) // replaced in place
	if v, ok := c.Get("e", t0); !ok || v != 6 {
		t.Fatalf("e = %d, %v; want 6", v, ok)
	}
}

// The cache against a plain model (a slice in recency order, most recent
// first) over a long random run of lookups, inserts, removals and
// expiries: the same answers, the same entries, the same order of
// eviction.
func TestAgainstAModel(t *testing.T) {
	type ent struct {
		k, v    int
		expires time.Time
	}
	const size = 5
	c := New[int, int](size)
	var model []ent // most recently used first
	find := func(k int) int {
		for i, e := range model {
			if e.k == k {
				return i
			}
		}
		return -1
	}
	x := uint64(1)
	rnd := func(n int) int { // xorshift: deterministic, no global source
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(n))
	}
	now := t0
	for step := 0; step < 20000; step++ {
		k := rnd(9)
		switch op := rnd(10); {
		case op < 4:
			v, ok := c.Get(k, now)
			i := find(k)
			wantOK := i >= 0 && now.Before(model[i].expires)
			if ok != wantOK || (ok && v != model[i].v) {
				t.Fatalf("step %d: Get(%d) = %d, %v; want %v (model %v)", step, k, v, ok, wantOK, model)
			}
			if i >= 0 {
				e := model[i]
				model = append(model[:i], model[i+1:]...)
				if wantOK {
					model = append([]ent{e}, model...)
				}
			}
		case op < 8:
			e := ent{k, step, now.Add(time.Duration(1+rnd(20)) * time.Second)}
			c.Add(k, e.v, e.expires)
			if i := find(k); i >= 0 {
				model = append(model[:i], model[i+1:]...)
			}
			model = append([]ent{e}, model...)
			if len(model) > size {
				model = model[:size]
			}
		case op < 9:
			c.Remove(k)
			if i := find(k); i >= 0 {
				model = append(model[:i], model[i+1:]...)
			}
		default:
			now = now.Add(time.Second)
		}
		if c.Len() != len(model) {
			t.Fatalf("step %d: Len = %d, want %d", step, c.Len(), len(model))
		}
	}
}

// Once the cache has grown to its size, inserting (and evicting) reuses
// the slots of the entries that left: no allocation per insert.
func TestAddAllocatesNothingOnceFull(t *testing.T) {
	type key struct{ a, b string }
	keys := make([]key, 256)
	for i := range keys {
		keys[i] = key{string(rune('a' + i%26)), string(rune('A' + i/26))}
	}
	c := New[key, *int](64)
	v := new(int)
	i := 0
	add := func() {
		c.Add(keys[i%len(keys)], v, t0.Add(time.Hour))
		i++
	}
	for range 4 * len(keys) {
		add()
	}
	if n := testing.AllocsPerRun(1000, add); n != 0 {
		t.Fatalf("Add allocates %v times per call in a full cache; want 0", n)
	}
	get := func() { c.Get(keys[(i+len(keys)-1)%len(keys)], t0) }
	if n := testing.AllocsPerRun(1000, get); n != 0 {
		t.Fatalf("Get allocates %v times per call; want 0", n)
	}
}
