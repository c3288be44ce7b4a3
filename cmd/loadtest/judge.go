package main

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/shardlimit/limiter"
)

// False refusals: a refusal is false when the bucket held the tokens the
// request asked for. The tool sees every admission of the run (all its
// limiters are in this process, and it refunds nothing), so it replays
// the exact token bucket of each limit (start full at Burst, refill
// continuously at Refill per Period, ceiling Burst) fed with those
// admissions in the order they completed, and judges each refusal at the
// moment its Acquire started: false when every limit of the bucket (and,
// with cascade, of the parent's bucket) held the requested tokens, fed
// only the admissions that had completed before that moment.
//
// The approximation: the store charged each admission at some moment
// between its start and its end, and decided each refusal at some moment
// between the refusal's start and end; the tool knows neither moment. An
// admission still in flight when a refusal started is not yet in the ideal
// bucket, although the store may already have charged it, so the ideal
// bucket can look fuller than the real one was; and charging admissions at
// their end makes the ideal bucket lose the refill of one call duration
// when it leaves its ceiling. Both are worth about rate x call duration in
// tokens. Far from the limit that is nothing; at the limit, where the
// bucket hovers within a token of empty, such an offset decides whether a
// refusal counts, so read the count there together with the admission
// bound (admitted against burst + rate x time), which has no such
// uncertainty. The ideal bucket refills continuously where the limiter
// refills per whole millisecond.

// attempt is one measured Acquire: when it started and ended (ns since
// the run started), which entity it asked for, and how it ended.
type attempt struct {
	start, end int64
	key        int32
	outcome    uint8
}

// Outcomes of an attempt.
const (
	outAdmitted uint8 = iota + 1
	outRefused
	outUnavailable
	outError
)

// idealBucket is one limit's token bucket in continuous time, in tokens.
type idealBucket struct {
	level, burst, perNs float64
	at                  int64 // ns of the last update
	fills               int64 // how often it reached its burst
}

// A calendar quota is a bucket that does not refill (a run stays within
// one of its windows).
func newIdealBucket(l limiter.Limit) *idealBucket {
	return &idealBucket{level: float64(l.Capacity), burst: float64(l.EffectiveBurst()), perNs: perSecond(l) / 1e9}
}

func (b *idealBucket) advance(t int64) {
	if t > b.at {
		if b.level < b.burst && b.level+float64(t-b.at)*b.perNs >= b.burst {
			b.fills++
		}
		b.level = min(b.burst, b.level+float64(t-b.at)*b.perNs)
		b.at = t
	}
}

// charge is one limit of a bucket and what an acquire takes from it.
type charge struct {
	b    *idealBucket
	need float64
}

// judge counts the false refusals among atts, and the refusals made while
// the ideal bucket held the tokens (held: the false ones and those whose
// tokens an admission used later). nkeys entities use limits (with
// consume); with cascade every acquire also charges one parent bucket of
// parentLimits.
//
// A refusal is false when the ideal bucket held its tokens at its start
// and they went unused: they stayed in the bucket until it was full again
// (its refill then spilled) or the run ended, so the refused request could
// have had them without any admission being refused. The refusals are
// judged from the last to the first, each counted false taking its tokens
// from every later moment until the bucket was full again, so that a
// token left unused makes one false refusal, not one per refusal that saw
// it.
//
// split counts the false refusals that started within splitWindow of a
// doubling of their key's bucket: splits holds, per key, the instants (ns
// since the run started) the acquires that doubled it ended (nil: none).
func judge(atts []attempt, nkeys int, limits, parentLimits []limiter.Limit, consume map[string]int64, cascade bool, splits [][]int64) (falseN, held, split int64) {
	var admitted, refused []attempt
	for _, a := range atts {
		switch a.outcome {
		case outAdmitted:
			admitted = append(admitted, a)
		case outRefused:
			refused = append(refused, a)
		}
	}
	slices.SortFunc(admitted, func(a, b attempt) int { return cmp.Compare(a.end, b.end) })
	slices.SortFunc(refused, func(a, b attempt) int { return cmp.Compare(a.start, b.start) })
	charges := newCharges(nkeys, limits, parentLimits, consume, cascade)

	// The replay, forward: each event (an admission at its end, a refusal
	// at its start) records every charged bucket's level after it, and how
	// often the bucket had been full by then.
	type event struct {
		a     *attempt
		first int // its first mark in marks
	}
	type mark struct {
		level float64
		fills int64
	}
	events := make([]event, 0, len(admitted)+len(refused))
	var marks []mark
	note := func(a *attempt, at int64, take bool) {
		events = append(events, event{a, len(marks)})
		for _, c := range charges[a.key] {
			c.b.advance(at)
			if take {
				c.b.level -= c.need
			}
			marks = append(marks, mark{c.b.level, c.b.fills})
		}
	}
	i := 0
	for k := range refused {
		r := &refused[k]
		// Admissions that completed strictly before the refusal started.
		for ; i < len(admitted) && admitted[i].end < r.start; i++ {
			note(&admitted[i], admitted[i].end, true)
		}
		note(r, r.start, false)
	}
	for ; i < len(admitted); i++ { // they used tokens the last refusals saw
		note(&admitted[i], admitted[i].end, true)
	}

	// Backward: per bucket, the lowest level from here on until it was
	// next full (less what the refusals counted false since took).
	type low struct {
		min   float64
		fills int64
	}
	lows := make(map[*idealBucket]*low)
	for k := len(events) - 1; k >= 0; k-- {
		e := events[k]
		cs := charges[e.a.key]
		ok, all := true, true
		for j, c := range cs {
			m := marks[e.first+j]
			l := lows[c.b]
			if l == nil || l.fills != m.fills {
				l = &low{min: math.Inf(1), fills: m.fills}
				lows[c.b] = l
			}
			l.min = min(l.min, m.level)
			ok = ok && l.min >= c.need
			all = all && m.level >= c.need
		}
		if e.a.outcome != outRefused || !all {
			continue
		}
		held++
		if ok {
			falseN++
			if nearSplit(splits, e.a) {
				split++
			}
			for _, c := range cs {
				lows[c.b].min -= c.need
			}
		}
	}
	return falseN, held, split
}

// splitWindow is how near a doubling of its key's bucket (before or
// after) a refusal counts as the split's: the shard at its ceiling
// before it, the new shards filling and the processes learning the new
// count after it.
const splitWindow = int64(time.Second)

// nearSplit reports whether a started within splitWindow of a doubling of
// its key.
func nearSplit(splits [][]int64, a *attempt) bool {
	if int(a.key) >= len(splits) {
		return false
	}
	for _, d := range splits[a.key] {
		if a.start >= d-splitWindow && a.start <= d+splitWindow {
			return true
		}
	}
	return false
}

// newCharges returns, per entity, the ideal buckets its acquires charge.
func newCharges(nkeys int, limits, parentLimits []limiter.Limit, consume map[string]int64, cascade bool) [][]charge {
	charges := make([][]charge, nkeys)
	for k := range charges {
		charges[k] = chargesOf(limits, consume)
	}
	if cascade {
		parent := chargesOf(parentLimits, consume) // one parent, shared
		for k := range charges {
			charges[k] = append(charges[k], parent...)
		}
	}
	return charges
}

// chargesOf gives each limit a fresh ideal bucket; limits the request
// does not consume from are left out (nothing charges them).
func chargesOf(limits []limiter.Limit, consume map[string]int64) []charge {
	var out []charge
	for _, l := range limits {
		if n := consume[l.Name]; n > 0 && l.Window != "concurrent" { // a cap's leases end at once: it never binds
			out = append(out, charge{b: newIdealBucket(l), need: float64(n)})
		}
	}
	return out
}

// mergeLimits returns the parent's limits as the limiter resolves them
// when parentLimits are stored for the parent: per name the stored one,
// and the caller's names the stored ones do not define.
func mergeLimits(stored, caller []limiter.Limit) []limiter.Limit {
	out := slices.Clone(stored)
	for _, l := range caller {
		if !slices.ContainsFunc(out, func(x limiter.Limit) bool { return x.Name == l.Name }) {
			out = append(out, l)
		}
	}
	return out
}
