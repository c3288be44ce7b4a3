package engine

import "testing"

// Ten processes on a hundred keys of rpm:600/min, each key at a fifth of
// its limit: a process's first write to a key it had not written for
// seconds was the full write, which the others' rate said fails one time
// in ten (another write within a token's refill, 100 ms). But the others'
// first writes ride ahead, burning 3 % of the burst, and leave the bucket
// below its burst for 1.8 s: 85 % of those full writes failed, and row 4
// of the load tool paid 0.05 calls per acquire for them. Now the share of
// this process's first full writes that failed counts beside the rate:
// after a few failures, the ride-ahead write.
func TestFirstWriteLearnsThatFullWritesFail(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perMinute("rpm", 600)}, map[string]int64{"rpm": 1})
	m := NewMemory(0)
	full := true
	m.notePrior(p.hash, &full, 0.001) // buckets found nearly full, the others at a write a second
	if got := m.coldWrite(p, 1, false); got != PathFull {
		t.Fatalf("before any failure: %v, want the full write (it fails 10 %% of the time by the rate, the ride-ahead 15 %%)", got)
	}
	v := &ShardView{Img: image(t, shape{rf: T - 5000}.item(p)), At: T - 100, Others: 0.001, RateAt: T - 100}
	if got := p.first(v, 1, T); got != PathFull {
		t.Fatalf("warm, before any failure: %v, want the full write", got)
	}
	m.noteFull(p.hash, false)
	for range 4 {
		m.noteFull(p.hash, true)
	}
	if got := m.coldWrite(p, 1, false); got != PathRetry {
		t.Fatalf("after 4 failed full writes: %v, want the ride-ahead write", got)
	}
	v.FullMiss = m.fullMiss(p.hash)
	if got := p.first(v, 1, T); got != PathRetry {
		t.Fatalf("warm, after 4 failed full writes (share %.2f): %v, want the ride-ahead write", v.FullMiss, got)
	}
}

// One failure in ten, as the rate predicts where every writer makes the
// full write on a full bucket, keeps the full write.
func TestFirstWriteKeepsTheFullWriteThatFailsAsPredicted(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perMinute("rpm", 600)}, map[string]int64{"rpm": 1})
	m := NewMemory(0)
	full := true
	m.notePrior(p.hash, &full, 0.001)
	for i := range 50 {
		m.noteFull(p.hash, i%10 == 0)
	}
	if got := m.coldWrite(p, 1, false); got != PathFull {
		t.Fatalf("%v (share failed %.2f), want the full write", got, m.fullMiss(p.hash))
	}
}

// Row 4 of the load tool (10 processes, 100 keys of rpm:600/min at a third
// of their limit): a process writes a key every few seconds, and its item
// of the key, seconds old, says full by now. It made the full write, which
// failed on four keys in five: the others' writes since had ridden ahead
// of the refill and kept the bucket below its burst. An item older than an
// estimate counts the others' slack in the full write's odds, and a
// process whose first writes to such buckets mostly found them below
// their burst rides ahead from an item that says full.
func TestAnOldItemThatSaysFullIsOldNews(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perMinute("rpm", 600)}, map[string]int64{"rpm": 1})
	old := image(t, shape{rf: T - 5000}.item(p))
	fresh := &ShardView{Img: old, At: T - 100, Others: 0.0007, RateAt: T - 5000}
	if got := p.first(fresh, 1, T); got != PathFull {
		t.Fatalf("an item 100 ms old, others at 0.7 writes a second: %v, want the full write", got)
	}
	stale := &ShardView{Img: old, At: T - 5000, Others: 0.0007, RateAt: T - 5000}
	if got := p.first(stale, 1, T); got != PathRetry {
		t.Fatalf("an item 5 s old, others at 0.7 writes a second: %v, want the ride-ahead write", got)
	}

	m := NewMemory(0)
	notFull := false
	m.notePrior(p.hash, &notFull, 0.0018)
	if got := m.coldWrite(p, 1, true); got != PathRetry {
		t.Fatalf("an item, buckets found below their burst, others writing: %v, want the ride-ahead write", got)
	}
	if got := m.coldWrite(p, 1, false); got != PathNone {
		t.Fatalf("no item: %v, want the speculative charge (buckets at their limit lack the burn)", got)
	}
	alone := NewMemory(0)
	alone.notePrior(p.hash, &notFull, 0)
	if got := alone.coldWrite(p, 1, true); got != PathNone {
		t.Fatalf("an item, no one else writes: %v, want none (its own refill says full)", got)
	}
}
