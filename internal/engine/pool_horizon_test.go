package engine

import "testing"

// A pool's rest goes back to the bucket until ReturnHorizonMs after the
// write that took the pool (PoolLifeMs before its end); from then on it is
// dropped, as a crashed process's is: the bucket may have expired and been
// made again, full.
func TestAPoolsRestGoesBackUntilTheHorizon(t *testing.T) {
	p := plan1(bucketRef)
	taken := T
	mk := func() *pool {
		return &pool{plan: p, left: map[string]int64{"rps": 3000}, until: taken + PoolLifeMs}
	}
	r := mk().drain(taken + ReturnHorizonMs - 1)
	if r == nil {
		t.Fatal("a millisecond before the horizon: nothing back, want the rest of 3 tokens")
	}
	if r.Plan.Amounts()["rps"] != -3000 {
		t.Fatalf("a millisecond before the horizon: %v, want the rest of 3 tokens back", r.Plan.Amounts())
	}
	if r := mk().drain(taken + ReturnHorizonMs); r != nil {
		t.Fatalf("at the horizon: %+v, want the rest dropped", r)
	}
}
