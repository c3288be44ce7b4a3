package engine

import "testing"

// Story tests for mutants of internal/engine that lived through its other
// tests (see mutants_test.go); the equivalents are named at the end of
// this file.

// Pools hold half of a 10-token shard: its balance fills only to the
// other half, 5 tokens, and an empty shard is as full as it gets in 500
// ms at 10 a second. The views report that, not the second the whole
// burst would take (a reset the shard never reaches while the pools
// hold), and a request of 6 tokens, above what the shard can hold, gets
// no retry time: any wait promised would be refused again.
func TestAShardsViewsFillOnlyToWhatThePoolsLeave(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 6})
	img := holdItem(p, shape{rf: T, tk: map[string]int64{"rps": 0}}, 1, T-100, map[string]int64{"rps": 5000})
	v := p.Views(img, 1, T, false, true)[0]
	if v.ResetMs != 500 {
		t.Fatalf("full in %d ms; want 500, the pools' 5 tokens left out", v.ResetMs)
	}
	if !v.Exceeded || v.RetryMs != -1 {
		t.Fatalf("6 tokens of a shard that holds 5: exceeded %v, retry %d ms; want exceeded, no retry time (-1)", v.Exceeded, v.RetryMs)
	}
}

// A writer whose clock runs 300 ms ahead emptied the shard at its now:
// the item's rf is 300 ms past ours, and nothing refills before rf. A
// refusal at our now waits 400 ms for a token (the 300 ms to rf and the
// token's 100), and the shard is full in 1,300 ms: counted from our now,
// the caller would retry at 100 ms into a shard still empty.
func TestAShardRefilledAheadOfOurClockRefillsFromItsRf(t *testing.T) {
	p := plan1(bucketRef)
	img := image(t, shape{rf: T + 300, tk: map[string]int64{"rps": 0}}.item(p))
	v := p.Views(img, 1, T, false, true)[0]
	if v.RetryMs != 400 || v.ResetMs != 1300 {
		t.Fatalf("retry after %d ms, full in %d ms; want 400 and 1300 (nothing refills before rf)", v.RetryMs, v.ResetMs)
	}
}
