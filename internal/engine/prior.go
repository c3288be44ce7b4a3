package engine

import "math"

// The cold write. A process's first write to a bucket it has no image of
// cannot tell a full bucket (the full write fits) from one at its limit
// (the speculative charge fits). Buckets of one configuration tend to be
// used alike (a limit far above its traffic leaves every key full between
// acquires), so the choice is taken from what this process's earlier
// first writes to buckets of the same plan found: full or not (a decayed
// share), and the other writers' rate it measured on them. With no
// history, the speculative charge.

// coldWeight is the weight of the newest first write in a plan's share of
// full buckets.
const coldWeight = 1.0 / 8

// maxPlans bounds how many plans a Memory keeps a history of; past it the
// history starts over.
const maxPlans = 1024

type prior struct {
	full   float64 // decayed share of first writes that found the bucket full
	seen   bool    // a first write was recorded
	others float64 // the last estimate of the others' write rate on a bucket of the plan (writes per ms)
}

// notePrior records what a first write of plan p (by its hash) found: a
// full bucket or not (found is nil when it says nothing), and the others'
// write rate on it (others < 0: none measured).
func (m *Memory) notePrior(hash int64, found *bool, others float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notePriorLocked(hash, found, others)
}

// notePriorLocked is notePrior for a caller that holds m.mu.
func (m *Memory) notePriorLocked(hash int64, found *bool, others float64) {
	if m.plans == nil || len(m.plans) >= maxPlans && m.plans[hash] == nil {
		m.plans = make(map[int64]*prior)
	}
	pr := m.plans[hash]
	if pr == nil {
		pr = &prior{}
		m.plans[hash] = pr
	}
	if found != nil {
		f := 0.0
		if *found {
			f = 1
		}
		if !pr.seen {
			pr.full, pr.seen = f, true
		} else {
			pr.full += coldWeight * (f - pr.full)
		}
	}
	if others >= 0 {
		pr.others = others
	}
}

// coldWrite returns the first write to a bucket of p at n shards that the
// process has no image of: PathNone for the speculative charge, PathFull
// for the full write, PathRetry for the ride-ahead write (burning
// rideShare of each burst; see Plan.first for the choice between the
// last two).
func (m *Memory) coldWrite(p *Plan, n int64) Path {
	m.mu.Lock()
	pr := m.plans[p.hash]
	var full, others float64
	if pr != nil {
		full, others = pr.full, pr.others
	}
	m.mu.Unlock()
	if pr == nil || full <= 0.5 {
		return PathNone
	}
	tau := p.chargeTime(n)
	k := p.slack(n, p.rideBurn(n, rideMax))
	if others <= 0 || k < 1 || 1-math.Exp(-others*float64(tau)) <= math.Exp(-others*float64(k+tau)) {
		return PathFull
	}
	return PathRetry
}
