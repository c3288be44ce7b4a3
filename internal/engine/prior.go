package engine

import "math"

// The cold write. A process's first write to a bucket it has no image of
// cannot tell a full bucket (the full write fits) from one at its limit
// (the speculative charge fits). Buckets of one configuration tend to be
// used alike (a limit far above its traffic leaves every key full between
// acquires), so the choice is taken from what this process's earlier
// first writes to buckets of the same plan found: full or not (a decayed
// share), and the other writers' rate it measured on them. A plan with no
// history follows what the process's first writes to buckets of any plan
// found; with none at all, the full write: a bucket is most often used
// below its limit, and then full.

// coldWeight is the weight of the newest first write in a plan's share of
// full buckets.
const coldWeight = 1.0 / 8

// maxPlans bounds how many plans a Memory keeps a history of; past it the
// history starts over.
const maxPlans = 1024

type prior struct {
	full   float64 // decayed share of first writes that found the bucket full
	seen   bool    // a first write was recorded
	others float64 // the others' write rate on buckets of the plan, a decayed mean of the estimates (writes per ms)
	known  bool    // others was measured
	// miss is the decayed share of the full writes made first on buckets
	// of the plan that failed (from 0: a few failures are needed to move
	// it, a full write that fails now and then barely does).
	miss float64
}

// found records a first write that found the bucket full or not.
func (pr *prior) found(full bool) {
	f := 0.0
	if full {
		f = 1
	}
	if !pr.seen {
		pr.full, pr.seen = f, true
	} else {
		pr.full += coldWeight * (f - pr.full)
	}
}

// nearlyFullShare is the share of its burst (percent) every limit the
// plan charges holds, at now, on an item a first write found or left, for
// that write to count as having found the bucket full.
const nearlyFullShare = 90

// nearlyFull reports whether every limit the plan charges holds, on im
// refilled to now, at least nearlyFullShare of its burst: a bucket used
// below its limit, which the full or the ride-ahead write fits.
func (p *Plan) nearlyFull(im *Image, n, now int64) bool {
	for i := range p.specs {
		if s := &p.specs[i]; !s.hidden && s.amount > 0 {
			st, _ := im.projected(s, n, now)
			if st.Tokens*100 < st.Burst*nearlyFullShare {
				return false
			}
		}
	}
	return true
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
		pr.found(*found)
		m.anyPlan.found(*found)
	}
	if others >= 0 {
		if !pr.known {
			pr.others, pr.known = others, true
		} else {
			pr.others += coldWeight * (others - pr.others)
		}
	}
}

// noteFull records whether a full write made first to a bucket of plan p
// (by its hash) landed. The full write's odds are judged from the others'
// rate (see Plan.first), which assumes the bucket full again a charge's
// refill time after each of their writes; when the others burn (ride
// ahead, headroom) it stays below its burst for longer, and full writes
// fail far more often than the rate says. What they found corrects that.
func (m *Memory) noteFull(hash int64, failed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.noteFullLocked(hash, failed)
}

// noteFullLocked is noteFull for a caller that holds m.mu.
func (m *Memory) noteFullLocked(hash int64, failed bool) {
	pr := m.plans[hash]
	if pr == nil {
		return // no first write of the plan was recorded: nothing to correct
	}
	f := 0.0
	if failed {
		f = 1
	}
	pr.miss += coldWeight * (f - pr.miss)
}

// fullMiss returns the decayed share of plan p's first full writes that
// failed (see noteFull).
func (m *Memory) fullMiss(hash int64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pr := m.plans[hash]; pr != nil {
		return pr.miss
	}
	return 0
}

// coldWrite returns the first write to a bucket of p at n shards that the
// process has no image of, or whose image says nothing of the other
// writers (see ShardView.knowsOthers): PathNone for the speculative
// charge, PathFull for the full write, PathRetry for the ride-ahead write
// (burning rideShare of each burst; see Plan.first for the choice between
// the last two). A plan with no history: the speculative charge when
// the process's first writes to buckets of any plan mostly found them
// below their burst, else the full write. Before any estimate of the others,
// the ride-ahead write, which lands whether or not they wrote moments ago,
// unless the client has an item of the bucket (warm): a bucket it saw
// full has likely sat full since. The full write's odds are the larger of
// what the others' rate says and the share of the plan's first full
// writes that failed (noteFull). A client with an item that says full by
// now (warm), on a plan whose buckets its first writes mostly found below
// their burst and which others write: the ride-ahead write, which lands
// wherever the speculative one would and also on a bucket full for less
// than its slack (the item is old news: the others likely wrote since).
func (m *Memory) coldWrite(p *Plan, n int64, warm bool) Path {
	m.mu.Lock()
	pr := m.plans[p.hash]
	var full, others, miss float64
	known, seen := false, false
	if pr != nil {
		full, others, known, seen, miss = pr.full, pr.others, pr.known, pr.seen, pr.miss
	}
	anyPlan := m.anyPlan
	m.mu.Unlock()
	if !seen {
		if anyPlan.seen && anyPlan.full <= 0.5 {
			return PathNone
		}
		return PathFull
	}
	tau := p.chargeTime(n)
	k := p.slack(n, p.rideBurn(n, rideMax))
	if full <= 0.5 {
		if warm && known && others > 0 && k >= 1 {
			return PathRetry // others keep them below their burst, or just full
		}
		return PathNone
	}
	if k < 1 {
		return PathFull // no slack to ride on
	}
	// How likely each write fails. Before any estimate of the others, the
	// ride-ahead write, which lands whether or not they wrote moments
	// ago, unless the client has an item: a bucket it saw full has likely
	// sat full since (unless most full writes fail). No one else writes:
	// the full write.
	missFull, missRide := 0.0, 0.5
	switch {
	case known:
		missFull, missRide = 1-math.Exp(-others*float64(tau)), math.Exp(-others*float64(k+tau))
	case !warm:
		missFull = 1
	}
	if max(missFull, miss) > missRide {
		return PathRetry // the ride-ahead write also lands if others wrote
	}
	return PathFull
}
