package engine

import "github.com/shardlimit/limiter/store"

// An acquire that repeats the machine's last one (the same limits, shard
// count and amounts: a process taking the same tokens again and again)
// makes the same speculative write but for the values that hold now.
// emitSpeculative's values are constants of the plan and the count, or now
// plus such a constant; the machine's value buffer remembers which is
// which, and the next such write copies the values and adds now instead of
// running emitSpeculative again. The memory is built on the second write
// in a row of the same key, from the values at now and at now + 1: a
// process whose amounts change from acquire to acquire (tokens per
// request) pays a comparison, not the second emit.
//
// The blind full write (no cushion: a lone writer on a bucket far below
// its limit takes it on nearly every acquire) is remembered the same way,
// in a memory of its own, but for its expiry: the ttl attribute is in
// seconds, (now + a constant) / 1000, so it is computed again for every
// write instead of being taken for a constant or for now plus one.

// maxCachedSpecs is how many limits (the hidden one included) a remembered
// write may have.
const maxCachedSpecs = 4

// maxCachedNow bounds the clocks (Unix ms) served from memory. The
// constants emitSpeculative and emitFull add to now are at most
// bucket.MaxRefillTime (2^61, a refill bound) or the refill route's age:
// below maxCachedNow now plus such a constant never saturates, so a value
// the write computes as satAdd(now, c) is now + c.
const maxCachedNow = 1 << 52

// specKey is what a speculative write's values depend on, but now: its
// plan template (the limits), the shard count and the amounts (the write
// reserves and releases nothing). The amounts say which limits it
// charges, and so which compiled template (shape) it fills.
type specKey struct {
	pt      *planTemplate
	n       int64
	amounts [maxCachedSpecs]int64
}

type specState uint8

const (
	specNone  specState = iota
	specSeen            // the key was written once
	specBuilt           // base and atNow hold the key's values
	specNever           // the key's values are not as the write's emit promises
)

// specValues is a machine's memory of its last speculative write (or of
// its last blind full write): its compiled template t, the values in
// placeholder order, those at atNow as offsets from now (offs, in atNow's
// order), and for a full write the placeholder of the expiry computed for
// each write (ttlAt) with what it is computed from.
type specValues struct {
	key     specKey
	t       *template
	state   specState
	base    []store.Value
	atNow   []int32
	offs    []int64
	ttlAt   int32 // (a full write's)
	ttlSpan int64 // the expiry's span (Plan.ttlSpan) for the key
	// held says the buffer's values (valueBuf.vals) are still those of
	// the last write from this memory, and ex is its Expr, which keeps
	// them: every value but those at atNow and ttlAt is in place, and
	// setting those makes ex the next write's (take clears it).
	held bool
	ex   store.Expr
}

// keyOf returns the key of p's speculative write on n shards; ok is false
// for a write that cannot be remembered.
func keyOf(p *Plan, n int64) (k specKey, ok bool) {
	if p.pt == nil || len(p.specs) > maxCachedSpecs {
		return k, false
	}
	k.pt, k.n = p.pt, n
	for i := range p.specs {
		s := &p.specs[i]
		if s.hold != 0 || s.release != 0 {
			return k, false
		}
		k.amounts[i] = s.amount
	}
	return k, true
}

// speculative is Plan.speculative without burn, into b: from the memory
// of the last write when it is of the same key, else through emit (which
// is p.emitSpeculative at n and now), remembering the key. A write from
// memory leaves its values in b.vals (b.spec.held): the next one from the
// same memory sets only those that hold now, in the same Expr.
func (b *valueBuf) speculative(p *Plan, n, now int64, emit func(sink)) (store.Expr, error) {
	return b.remembered(&b.spec, pathSpeculative, p, n, now, emit)
}

// blindFull is Plan.full without a cushion, into b, as speculative is
// Plan.speculative (emit is p.emitFull at n, now and 0).
func (b *valueBuf) blindFull(p *Plan, n, now int64, emit func(sink)) (store.Expr, error) {
	return b.remembered(&b.full, pathFull, p, n, now, emit)
}

// remembered is the write of path (speculative, or full without a
// cushion) from m, b's memory of that path's last write.
func (b *valueBuf) remembered(m *specValues, path pathKind, p *Plan, n, now int64, emit func(sink)) (store.Expr, error) {
	k, ok := keyOf(p, n)
	inRange := now >= 0 && now <= maxCachedNow
	if ok && inRange && m.state == specBuilt && m.key == k {
		held := m.held
		var args []store.Value
		if held {
			args = b.vals[:len(m.base)] // m.ex keeps them
		} else {
			args = b.take(len(m.base))
			copy(args, m.base)
		}
		for j, i := range m.atNow {
			args[i] = store.Int(now + m.offs[j])
		}
		if path == pathFull {
			args[m.ttlAt] = store.Int(expiryAt(now, m.ttlSpan)) // p.ttl(nil, n, now)
		}
		if !held {
			m.ex = m.t.t.CompactArgs(args)
			m.held = m.ex.Values == nil // the Expr keeps args (see store.Template.CompactArgs)
		}
		return m.ex, nil
	}
	t, err := p.shape(path, emit)
	if err != nil {
		return store.Expr{}, err
	}
	switch {
	case !ok || t.at == nil || !inRange:
		return t.fill(b, emit), nil
	case m.key != k:
		m.key, m.t, m.state = k, t, specSeen
		return t.fill(b, emit), nil
	}
	args := b.take(len(t.at))
	ex, ok := t.fillAt(&b.sink, args, emit)
	if !ok {
		return t.fill(nil, emit), nil // (cannot happen: see fill)
	}
	if m.state == specSeen {
		m.learn(args, b, path, p, t, n, now)
	}
	return ex, nil
}

// emitRemembered emits the write of path at n and now, as remembered
// makes it.
func (p *Plan) emitRemembered(path pathKind, k sink, n, now int64) {
	if path == pathFull {
		p.emitFull(k, n, now, 0)
		return
	}
	p.emitSpeculative(k, n, now, nil)
}

// learn builds the memory of the key from the values of the write just
// made at now (at, in placeholder order) and those of the same write at
// now + 1: a value that moved by one holds now, one that did not is a
// constant. Anything else (a value that is not a number, or moved
// otherwise) marks the key specNever.
//
// The expiry (the value set for store.AttrTTL, if any) is neither, though
// it looks like one or the other: its placeholder is kept in ttlAt, and
// every write from memory computes it after the others.
func (m *specValues) learn(at []store.Value, b *valueBuf, path pathKind, p *Plan, t *template, n, now int64) {
	m.state = specNever
	if cap(m.base) < len(at) {
		m.base = make([]store.Value, len(at))
	}
	next := m.base[:len(at)]
	b.sink = argSink{args: next, at: t.at}
	p.emitRemembered(path, &b.sink, n, now+1)
	complete := b.sink.k == len(t.at)
	b.sink = argSink{}
	if !complete {
		return
	}
	if path == pathFull { // (the speculative write sets no expiry)
		b.find = valueOf{name: store.AttrTTL, found: -1}
		p.emitRemembered(path, &b.find, n, now)
		if b.find.found < 0 {
			return // (cannot happen: emitFull sets it)
		}
		m.ttlAt, m.ttlSpan = t.at[b.find.found], p.ttlSpan(nil, n)
	}
	m.atNow, m.offs = m.atNow[:0], m.offs[:0]
	for i := range at {
		v, ok := at[i].AsInt()
		w, ok1 := next[i].AsInt()
		switch {
		case !ok || !ok1:
			return
		case w == v:
			next[i] = at[i]
		case w == v+1: // (its base value is never read: each write sets it)
			m.atNow = append(m.atNow, int32(i))
			m.offs = append(m.offs, v-now)
		default:
			return
		}
	}
	m.state = specBuilt
}

// valueOf is a sink that finds which of the values emitted (counted from
// 0) is the one set for name: found, -1 if none.
type valueOf struct {
	name  string
	k     int
	found int
}

func (s *valueOf) add(string, int64)            { s.k++ }
func (s *valueOf) cond(condKind, string, int64) { s.k++ }
func (s *valueOf) exists(string)                {}
func (s *valueOf) notExists(string)             {}
func (s *valueOf) set(name string, _ int64) {
	if name == s.name && s.found < 0 {
		s.found = s.k
	}
	s.k++
}
func (s *valueOf) either(a, b, c, d term) {
	for _, t := range [...]term{a, b, c, d} {
		if t.k != condAbsent {
			s.k++
		}
	}
}
