package engine

import (
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store/memsim"
)

// A shadow limit that would refuse is skipped: the root package charges
// the acquire again without it. That second charge must go through on
// every path even when the skipped limit is empty or in debt (a positive
// adjust put it there), or a shadow limit would refuse after all; the
// skipped limit's tokens and total consumed stay as they were, and the
// other limits are charged. Without Skipping the same charge is refused.
func TestSkippedLimitNeverRefuses(t *testing.T) {
	st := memsim.New(memsim.WithClock(memsim.NewManualClock(memsim.Epoch())))
	now := func() int64 { return memsim.Epoch().UnixMilli() }
	m := NewMemory(0)
	limits := []Limit{perMinute("rpm", 100), perMinute("tpm", 10)}
	charge := func(p *Plan) Step { return chargeOn(st, m, now, p) }
	// Spend tpm, then put it in debt with an adjust.
	if step := charge(NewPlan(bucketRef, limits, map[string]int64{"rpm": 1, "tpm": 10})); !step.Done {
		t.Fatalf("first charge: %+v", step)
	}
	a := NewAdjust(m, NewPlan(bucketRef, limits, nil).WithAmounts(map[string]int64{"tpm": 5000_000}), 0, 1)
	if step, _ := drive(st, now, a.Start(now()), a.Feed); step.Err != nil {
		t.Fatalf("adjust: %+v", step)
	}
	tk := attr(t, st, bucketRef, 0, "b_tpm_tk")
	if tk >= 0 {
		t.Fatalf("tpm at %d, want debt", tk)
	}
	p := NewPlan(bucketRef, limits, map[string]int64{"rpm": 1, "tpm": 3})
	if step := charge(p); step.Refused == nil {
		t.Fatalf("enforcing tpm: %+v, want a refusal", step)
	}
	for i := 0; i < 5; i++ { // the speculative path, then whatever the memory picks
		if step := charge(p.Skipping([]string{"tpm"})); !step.Done {
			t.Fatalf("charge %d skipping tpm: %+v, want admitted", i, step)
		}
	}
	if got := attr(t, st, bucketRef, 0, "b_tpm_tc"); got != 10_000+5_000_000 {
		t.Fatalf("tpm consumed %d, want the first charge and the adjust only", got)
	}
	if got := attr(t, st, bucketRef, 0, "b_rpm_tc"); got != 6_000 {
		t.Fatalf("rpm consumed %d, want 6 charges", got)
	}
	// A fresh process (empty memory) starts from a blind write: the same.
	m = NewMemory(0)
	if step := charge(p.Skipping([]string{"tpm"})); !step.Done {
		t.Fatalf("a new process skipping tpm: %+v", step)
	}
}

// A skipped calendar quota stays a quota: the charge skipping a spent
// shadow quota goes through and leaves the quota as it was, and the rate
// beside it is judged on its own tokens. A Skipping that dropped the
// quotas from the plan lost the quota's attributes from the limiter's
// views, and a refusal by the rate then told a wait that was not the
// rate's.
func TestSkippedQuotaStaysAQuota(t *testing.T) {
	st := memsim.New(memsim.WithClock(memsim.NewManualClock(memsim.Epoch())))
	now := func() int64 { return memsim.Epoch().UnixMilli() }
	m := NewMemory(0)
	usd := Limit{Name: "usd", Limit: bucket.Limit{Capacity: 5000, Burst: 5000}, Calendar: bucket.Calendar{Window: bucket.Month}}
	limits := []Limit{perMinute("rpm", 100), usd}
	charge := func(p *Plan) Step { return chargeOn(st, m, now, p) }
	if step := charge(NewPlan(bucketRef, limits, map[string]int64{"rpm": 1, "usd": 5})); !step.Done {
		t.Fatalf("spending the quota: %+v", step)
	}
	p := NewPlan(bucketRef, limits, map[string]int64{"rpm": 1, "usd": 1})
	if step := charge(p); step.Refused == nil {
		t.Fatalf("enforcing usd: %+v, want a refusal", step)
	}
	skipping := p.Skipping([]string{"usd"})
	if len(skipping.quotas) != 1 || skipping.quotas[0].amount != 0 || p.quotas[0].amount != 1000 {
		t.Fatalf("skipping usd: quotas %+v (the plan's %+v), want usd kept, charging nothing", skipping.quotas, p.quotas)
	}
	if step := charge(skipping); !step.Done {
		t.Fatalf("charge skipping usd: %+v, want admitted", step)
	}
	if got := attr(t, st, bucketRef, 0, bucket.QuotaAttrName("usd", bucket.FieldTokens)); got != 0 {
		t.Fatalf("usd holds %d, want 0: spent, and the skipping charge took nothing", got)
	}
}

// A caller told to wait a refusal's RetryAfter, which leaves shadow limits
// out, retries when the enforcing limits have the tokens: that retry must
// reach the store, not be refused from the memory's guess of what others
// consume. The memory's promise of when the request fits counted the
// shadow limit's longer wait too, so the retry came before it and was
// refused locally on that guess, with a wait of seconds, although no one
// had written the bucket (the simulator's invariant 7). And a refusal by
// the shadow limit alone, which the root package answers at once with a
// charge skipping it, promised a millisecond later, so that charge was
// judged on the guess too.
func TestRetryAfterAShadowLimitRefusedIsNotRefusedAgainLocally(t *testing.T) {
	st := memsim.New(memsim.WithClock(memsim.NewManualClock(memsim.Epoch())))
	at := memsim.Epoch().UnixMilli()
	now := func() int64 { return at }
	m := NewMemory(0)
	img := perSecond("img", 1)
	img.Shadow = true
	limits := []Limit{rps10, img}
	charge := func(p *Plan) Step { return chargeOn(st, m, now, p) }
	if step := charge(NewPlan(bucketRef, limits, map[string]int64{"rps": 10, "img": 1})); !step.Done {
		t.Fatalf("spending both limits: %+v", step)
	}
	// The others were seen taking half of rps's refill.
	measured(m, bucketRef, 0, 0.01, 0.01, at, map[string]float64{"rps": 5})
	p := NewPlan(bucketRef, limits, map[string]int64{"rps": 1, "img": 1})
	step := charge(p)
	if step.Refused == nil {
		t.Fatalf("both limits empty: %+v, want a refusal", step)
	}
	var wait, shadowWait int64 // the caller's RetryAfter, and the shadow limit's
	for _, v := range step.Refused.Views() {
		switch {
		case v.Exceeded && v.Name == "img":
			shadowWait = v.RetryMs
		case v.Exceeded:
			wait = max(wait, v.RetryMs)
		}
	}
	if wait <= 0 || shadowWait <= wait {
		t.Fatalf("refusal: wait %d ms, the shadow limit's %d ms; want both, the shadow limit's longer", wait, shadowWait)
	}
	if got := m.View(bucketRef, 0).Promise - at; got != wait {
		t.Fatalf("promised the request fits in %d ms, want the RetryAfter the caller waits, %d ms (the shadow limit's wait is %d ms)", got, wait, shadowWait)
	}
	at += wait
	step = charge(p)
	if step.Refused == nil || step.Refused.Local {
		t.Fatalf("the retry after %d ms: %+v, want refused by the store (the shadow limit has no token yet)", wait, step)
	}
	for _, v := range step.Refused.Views() {
		if v.Exceeded && v.Name != "img" {
			t.Fatalf("the retry is refused by %s, want by the shadow limit alone", v.Name)
		}
	}
	if got := m.View(bucketRef, 0).Promise; got != at {
		t.Fatalf("a refusal by the shadow limit alone promised T+%d, want now (T+%d)", got-memsim.Epoch().UnixMilli(), wait)
	}
	if step = charge(p.Skipping([]string{"img"})); !step.Done {
		t.Fatalf("the charge skipping the shadow limit: %+v, want admitted", step)
	}
}

// A caller told to wait a refusal by a rate, beside a shadow quota that is
// spent, retries when the rate has the tokens. The retry is refused
// locally (the image shows the quota spent until the month ends, and the
// root package answers that by charging again skipping it), and that
// refusal judged the rate on the guess of what the others consume since
// the image, although the promise had come: the rate "refused" again with
// a longer wait, and the caller was sent back to wait although no one had
// written the bucket (the simulator's invariant 7, found by TestProperty:
// 100 writers, a shadow monthly quota beside 794 a second). Once the
// promise has come, a local refusal counts only this process's writes in
// flight against a rate, as the decision to refuse does.
func TestRetryAfterARateBesideASpentShadowQuotaIsNotRefusedByTheRate(t *testing.T) {
	st := memsim.New(memsim.WithClock(memsim.NewManualClock(memsim.Epoch())))
	at := memsim.Epoch().UnixMilli()
	now := func() int64 { return at }
	m := NewMemory(0)
	usd := Limit{Name: "usd", Limit: bucket.Limit{Capacity: 5000, Burst: 5000}, Calendar: bucket.Calendar{Window: bucket.Month}, Shadow: true}
	limits := []Limit{rps10, usd}
	charge := func(p *Plan) Step { return chargeOn(st, m, now, p) }
	if step := chargeOn(st, NewMemory(0), now, NewPlan(bucketRef, limits, map[string]int64{"rps": 10, "usd": 5})); !step.Done {
		t.Fatalf("another process spending both limits: %+v", step)
	}
	// The others were seen taking nearly all of rps's refill.
	measured(m, bucketRef, 0, 0.01, 0.01, at, map[string]float64{"rps": 9.5})
	p := NewPlan(bucketRef, limits, map[string]int64{"rps": 1, "usd": 1})
	step := charge(p)
	if step.Refused == nil || step.Refused.Local {
		t.Fatalf("both limits spent by another process: %+v, want refused by the store", step)
	}
	var wait int64
	for _, v := range step.Refused.Views() {
		if v.Exceeded && v.Name == "rps" {
			wait = v.RetryMs
		}
	}
	if wait <= 0 {
		t.Fatalf("refusal: rps waits %d ms, want a wait", wait)
	}
	at += wait
	step = charge(p)
	if step.Refused == nil || !step.Refused.Local {
		t.Fatalf("the retry after %d ms: %+v, want refused locally (the image shows the quota spent)", wait, step)
	}
	for _, v := range step.Refused.Views() {
		if v.Exceeded && v.Name != "usd" {
			t.Fatalf("the retry after %d ms is refused by %s (retry after %d ms), want by the shadow quota alone", wait, v.Name, v.RetryMs)
		}
	}
	if step = charge(p.Skipping([]string{"usd"})); !step.Done {
		t.Fatalf("the charge skipping the shadow quota: %+v, want admitted", step)
	}
}
