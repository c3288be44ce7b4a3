package sim

import (
	"math/rand/v2"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// sweeper is DynamoDB's time to live in the simulation: it deletes the
// items whose ttl (Unix seconds) has passed, one by one, each at a random
// delay after its expiry (FaultPlan.ExpiryDelay), so that the shards of a
// bucket go in no particular order. It learns the items and their ttl from
// the change stream (drain), keeps one pending deletion per item in a heap
// ordered by due time, and runs as scheduler events (evSweep): it is part
// of the simulation's one sequence of events, with no goroutine. A
// deletion is a conditional Delete through memsim ("ttl < now", as
// DynamoDB spares an item whose ttl moved on): the change stream shows a
// REMOVE record with no cause.
type sweeper struct {
	s        *Sim
	rng      *rand.Rand
	delay    int64 // the largest delay after expiry (ns)
	from, to int64 // deletions happen in [from, to) (virtual ns)
	ttl      map[store.Key]int64
	queued   map[store.Key]bool
	due      minHeap[sweepEntry] // ordered by (at, seq)
	seq      uint64
	gen      int32 // the armed evSweep event's generation
	armedAt  int64 // when the armed event fires (-1: none)
	// deleted counts the items deleted; consumed what their deletes cost
	// (DynamoDB's TTL deletes are free: the report leaves it out).
	deleted  uint64
	consumed store.Capacity
}

type sweepEntry struct {
	at  int64
	seq uint64
	key store.Key
}

func newSweeper(s *Sim, delay time.Duration, from, to int64) *sweeper {
	return &sweeper{s: s, rng: s.derive(streamExpiry, 0), delay: int64(delay), from: from, to: to,
		ttl: make(map[store.Key]int64), queued: make(map[store.Key]bool), armedAt: -1}
}

// observe learns the items' ttl from change stream records.
func (w *sweeper) observe(recs []memsim.Record) {
	for i := range recs {
		r := &recs[i]
		v, ok := r.New.Int(store.AttrTTL)
		if !ok { // removed, or no ttl
			delete(w.ttl, r.Keys)
			continue
		}
		w.ttl[r.Keys] = v
		if !w.queued[r.Keys] {
			w.queue(r.Keys, v)
		}
	}
}

// eligible returns the virtual time from which an item whose ttl is v may
// be deleted: once the current Unix second is past v.
func (w *sweeper) eligible(v int64) int64 {
	if v >= (1<<63-1)/int64(time.Second)-1 {
		return 1<<63 - 1
	}
	return (v+1)*int64(time.Second) - w.s.base
}

// queue schedules an item's deletion at a random delay after it may go.
func (w *sweeper) queue(k store.Key, v int64) {
	at := max(w.eligible(v), w.from)
	if at >= w.to {
		return // after the fault window: never
	}
	at += w.rng.Int64N(w.delay + 1)
	w.push(sweepEntry{at: at, key: k})
}

func (w *sweeper) push(e sweepEntry) {
	w.seq++
	e.seq = w.seq
	w.queued[e.key] = true
	w.due.push(e)
	w.arm()
}

func (a sweepEntry) before(b sweepEntry) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// arm makes sure an evSweep event fires when the earliest deletion is due.
func (w *sweeper) arm() {
	if len(w.due) == 0 {
		return
	}
	at := w.due[0].at
	if w.armedAt >= 0 && w.armedAt <= at {
		return
	}
	w.gen++
	w.armedAt = at
	w.s.push(at, evSweep, -1, w.gen)
}

// fire runs the deletions that are due (the evSweep event of generation
// gen; a superseded one does nothing).
func (w *sweeper) fire(gen int32) {
	if gen != w.gen {
		return
	}
	w.armedAt = -1
	s := w.s
	for len(w.due) > 0 && w.due[0].at <= s.now {
		e := w.due.pop()
		delete(w.queued, e.key)
		v, ok := w.ttl[e.key]
		switch {
		case !ok: // deleted meanwhile
		case w.eligible(v) > s.now: // the ttl moved on
			w.queue(e.key, v)
		case s.now < w.to:
			w.remove(e.key)
		}
	}
	w.arm()
}

// remove deletes one expired item, as DynamoDB's TTL process does: only if
// its ttl is still in the past.
func (w *sweeper) remove(k store.Key) {
	s := w.s
	nowSec := (s.base + s.now) / int64(time.Second)
	expired, err := store.Build(store.Update{}, store.Name(store.AttrTTL).LessThan(store.Int(nowSec)))
	var out store.WriteOutput
	if err == nil { // Build fails only on an empty name or a zero Value
		s.faults.bypass = true
		out, err = s.st.Delete(bgctx, store.DeleteInput{Key: k, Expr: expired})
		s.faults.bypass = false
	}
	w.consumed = w.consumed.Add(out.Consumed)
	code := errCode(err)
	s.mix(uint64(s.now))
	s.mix(uint64(0xee)<<32 | uint64(code))
	s.mixString(k.PK)
	switch code {
	case codeOK:
		w.deleted++
	case codeCondition: // refreshed or gone: the stream tells
	default: // a partition over its ceiling: later
		if _, ok := w.ttl[k]; ok && !w.queued[k] {
			w.push(sweepEntry{at: s.now + int64(time.Second) + w.rng.Int64N(int64(time.Minute)), key: k})
		}
	}
	s.drain(nil)
}
