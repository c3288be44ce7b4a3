package limiter

import (
	"errors"
	"testing"
	"time"
)

var llm = []Limit{PerMinute("rpm", 100), PerMinute("tpm", 10_000)}

// LLM token reconciliation: estimate 500 tokens, learn the call used 800,
// adjust by +300. The bucket may go into debt; tc counts what was used.
func TestAdjustChargesTheDifferenceAndMayGoIntoDebt(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	le := e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1, "tpm": 9_500}))
	if err := le.Adjust(e.ctx, map[string]int64{"tpm": 800}); err != nil {
		t.Fatal(err)
	}
	e.expectCost(PathSpeculative, 1, 0, 1)
	if got := e.tokens("k1", "gpt-4", "tpm"); got != -300_000 {
		t.Fatalf("tk = %d, want -300000 (in debt)", got)
	}
	if got := e.consumed("k1", "gpt-4", "tpm"); got != 10_300_000 {
		t.Fatalf("tc = %d, want 10300000", got)
	}
	// In debt, even a request that takes no tpm waits for the debt to clear.
	e.mustReject(l, req("k1", llm, map[string]int64{"rpm": 1}))
	if err := le.Adjust(e.ctx, map[string]int64{"tpm": -800}); err != nil {
		t.Fatal(err)
	}
	e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1}))
}

// Rollback returns everything the lease charged, adjustments included; a
// lease is then over and says so.
func TestRollbackReturnsEverythingAndEndsTheLease(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1, "tpm": 100}))
	before := e.tokens("k1", "gpt-4", "tpm")
	le := e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1, "tpm": 500}))
	if err := le.Adjust(e.ctx, map[string]int64{"tpm": 250}); err != nil {
		t.Fatal(err)
	}
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.tokens("k1", "gpt-4", "tpm"); got != before {
		t.Fatalf("tk after rollback = %d, want %d", got, before)
	}
	if got := e.consumed("k1", "gpt-4", "tpm"); got != 100_000 {
		t.Fatalf("tc after rollback = %d, want 100000", got)
	}
	for name, err := range map[string]error{
		"Adjust":   le.Adjust(e.ctx, map[string]int64{"tpm": 1}),
		"Rollback": le.Rollback(e.ctx),
		"Commit":   le.Commit(),
	} {
		if !errors.Is(err, ErrLeaseEnded) {
			t.Errorf("%s after Rollback = %v, want ErrLeaseEnded", name, err)
		}
	}
	le2 := e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1}))
	if err := le2.Commit(); err != nil || !errors.Is(le2.Adjust(e.ctx, map[string]int64{"rpm": 1}), ErrLeaseEnded) {
		t.Fatal("a committed lease must end")
	}
}

// Adjusting a bucket that is full again (the refill caught up) first
// materializes the refill under the rf lock: charging a full bucket without
// moving rf would let the idle time be credited twice.
func TestAdjustOnAFullBucketMaterializesTheRefill(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	le := e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1, "tpm": 100}))
	e.clock.Add(time.Minute)
	if err := le.Adjust(e.ctx, map[string]int64{"tpm": 400}); err != nil {
		t.Fatal(err)
	}
	e.expectCost(PathNormal, 2, 0, 2)
	if got := e.tokens("k1", "gpt-4", "tpm"); got != 9_600_000 {
		t.Fatalf("tk = %d, want 9600000 (full, minus 400)", got)
	}
}

func TestAdjustRejectsUnknownLimitsAndHugeAmounts(t *testing.T) {
	e := newEnv(t)
	le := e.mustAcquire(e.limiter(), req("k1", llm, map[string]int64{"rpm": 1}))
	for _, d := range []map[string]int64{{"nope": 1}, {"wcu": 1}, {"tpm": MaxTokens + 1}} {
		if err := le.Adjust(e.ctx, d); !errors.Is(err, ErrInvalid) {
			t.Errorf("Adjust(%v) = %v, want a validation error", d, err)
		}
	}
}

// Zero amounts of an Adjust charge nothing and leave nothing for a
// Rollback to return; the others are charged in millitokens, and returned.
func TestAdjustWithZeroAmounts(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	le := e.mustAcquire(l, req("k1", llm, map[string]int64{"rpm": 1, "tpm": 500}))
	tpm, rpm := e.tokens("k1", "gpt-4", "tpm"), e.tokens("k1", "gpt-4", "rpm")
	if err := le.Adjust(e.ctx, map[string]int64{"tpm": 0, "rpm": 0}); err != nil {
		t.Fatal(err)
	}
	if got := e.tokens("k1", "gpt-4", "tpm"); got != tpm {
		t.Fatalf("tpm tk after a zero adjust = %d, want %d", got, tpm)
	}
	if err := le.Adjust(e.ctx, map[string]int64{"tpm": 7, "rpm": 0}); err != nil {
		t.Fatal(err)
	}
	if got := e.tokens("k1", "gpt-4", "tpm"); got != tpm-7_000 {
		t.Fatalf("tpm tk = %d, want %d", got, tpm-7_000)
	}
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.consumed("k1", "gpt-4", "tpm"); got != 0 {
		t.Fatalf("tpm tc after rollback = %d, want 0", got)
	}
	if got := e.tokens("k1", "gpt-4", "rpm"); got != rpm+1_000 {
		t.Fatalf("rpm tk after rollback = %d, want %d", got, rpm+1_000)
	}
}

// What adjusts added to a lease part, per limit: none at first, sums per
// name, names apart.
func TestNetAmounts(t *testing.T) {
	var part leasePart
	if part.net != nil {
		t.Fatal("a part never adjusted has net amounts")
	}
	part.addNet("rpm", 5)
	part.addNet("tpm", -3)
	part.addNet("rpm", 2)
	if len(part.net) != 2 || part.net["rpm"] != 7 || part.net["tpm"] != -3 {
		t.Fatalf("net amounts %v, want rpm 7, tpm -3", part.net)
	}
}
