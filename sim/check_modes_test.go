package sim

import (
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
)

// modeStory is the crafted world with "solo" (bucket 2) refused from 10 s
// and admitted from 20 s on, and a cache TTL of one second.
func modeStory(t *testing.T) *story {
	m := testModel()
	m.CacheTTL = int64(time.Second)
	m.Buckets[2].Modes = []modeSpan{{From: 0}, {From: 10_000 * int64(time.Millisecond), Mode: "refuse"},
		{From: 20_000 * int64(time.Millisecond), Mode: "admit"}}
	return &story{t: t, c: newChecker(m, testBase)}
}

// Acquires that follow the modes pass, and add nothing to the bucket's
// accounting: the admitted ones charged nothing, so the bucket that was
// never written has nothing to answer for.
func TestCheckerModesFollowed(t *testing.T) {
	s := modeStory(t)
	s.op(opAcquire, 2, 10_500, 1, 100).done(10_600, outRejected) // enforced within the TTL of the change: fine
	refused := s.op(opAcquire, 2, 12_000, 1, 100)
	refused.op.Mode = "refuse"
	refused.done(12_001, outDisabled)
	for i := int64(0); i < 50; i++ { // far beyond the bucket's 10 rpm
		a := s.op(opAcquire, 2, 21_000+i, 1, 100)
		a.op.Mode = "admit"
		a.done(21_000+i, outAdmitted)
		rb := s.op(opRollback, 2, 22_000+i, 1, 100)
		rb.op.Mode = "admit"
		rb.done(22_000+i, outAdmitted)
	}
	s.expect(nil)
}

// A limiter that ignored a refused scope (enforced it, long after the
// change reached every cache) is caught, and so is one whose admit mode
// still wrote the bucket.
func TestCheckerFlagsModesIgnored(t *testing.T) {
	s := modeStory(t)
	s.op(opAcquire, 2, 15_000, 1, 100).done(15_010, outRejected) // a rate limit in refuse mode
	s.expect(nil, InvModes)

	s = modeStory(t)
	a := s.op(opAcquire, 2, 25_000, 1, 100).write(25_005, nil, soloA1)
	a.op.Mode = "admit"
	a.done(25_010, outAdmitted)
	s.expect([]store.Item{soloA1}, InvModes, InvLostUpdate)
}

// A shadow limit that would refuse is skipped by the acquire: its write
// charges rpm and not tpm, which the checker accepts for a limit marked
// shadow, and accounts exactly (tpm's total stays 0). A refusal by shadow
// limits alone is a violation: shadow limits never refuse.
func TestCheckerShadowLimits(t *testing.T) {
	m := testModel()
	m.Buckets[2].Limits[1].Shadow = true
	s := &story{t: t, c: newChecker(m, testBase)}
	skipped := item("solo", 0, 1, 0, lim{tk: 9, tc: 1, ra: 10}, lim{tk: 1000, ra: 1000})
	a := s.op(opAcquire, 2, 0, 1, 100).write(5, nil, skipped)
	a.op.Shard = 0
	a.op.Skipped[0][1] = true
	a.done(8, outAdmitted)
	s.expect([]store.Item{skipped})

	s = &story{t: t, c: newChecker(m, testBase)}
	r := s.op(opAcquire, 2, 10, 1, 100)
	r.op.ShadowRefused = true
	r.done(12, outRejected)
	s.expect(nil, InvModes)
}
