package limiter

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/internal/items"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// An acquire of several resources (Request.Also): a gateway charges the
// model a request uses and "all-models", whose stored limit caps the key
// across every model. The resources' buckets are charged all or nothing.

// alsoReq asks for one rpm of gpt-4 and of each of also, 100 a minute
// unless stored limits say otherwise.
func alsoReq(entity string, also ...string) Request {
	r := req(entity, rpm(100), one)
	r.Also = also
	return r
}

// alsoEnv stores a limit of 3 a minute on the resource "all-models".
func alsoEnv(t *testing.T, opts ...memsim.Option) (*env, *Limiter) {
	e := newEnv(t, opts...)
	l := e.limiter()
	if err := l.putLimits(e.ctx, scope{Resource: "all-models"}, rpm(3)); err != nil {
		t.Fatal(err)
	}
	return e, l
}

// Both buckets are charged by two concurrent writes: one round trip, 2
// WCU. The lease shows each resource's limits, the request's resource
// first; Status shows each bucket.
func TestAlsoChargesEveryResourceInOneRoundTrip(t *testing.T) {
	e, l := alsoEnv(t)
	e.mustAcquire(l, alsoReq("key-1", "all-models")) // creates both buckets
	lease := e.mustAcquire(l, alsoReq("key-1", "all-models"))
	e.expectCost(PathSpeculative, 1, 0, 2)
	if a, b := e.tokens("key-1", "gpt-4", "rpm"), e.tokens("key-1", "all-models", "rpm"); a != 98_000 || b != 1_000 {
		t.Fatalf("gpt-4 tk %d, all-models tk %d; want 98000 and 1000 (all-models has its stored 3 a minute)", a, b)
	}
	got := lease.Limits()
	if len(got) != 2 || got[0].Resource != "gpt-4" || got[1].Resource != "all-models" ||
		got[0].Remaining != 98 || got[1].Remaining != 1 || got[1].Limit.Capacity != 3 {
		t.Fatalf("lease limits %+v, want gpt-4's 98 of 100 then all-models' 1 of 3", got)
	}
	if p := lease.ParentLimits(); p != nil {
		t.Fatalf("parent limits %+v without a cascade, want nil", p)
	}
	st, err := l.Status(e.ctx, "key-1", "all-models", rpm(100))
	if err != nil || len(st) != 1 || st[0].Resource != "all-models" || st[0].Remaining != 1 {
		t.Fatalf("status of all-models: %+v, %v; want 1 remaining", st, err)
	}
}

// One resource refusing refuses the acquire, and the others are refunded:
// after all-models' 3 a minute are spent, an acquire of gpt-4 and
// claude-3 with all-models charges neither model, and the refusal names
// all-models.
func TestAlsoIsAllOrNothing(t *testing.T) {
	e, l := alsoEnv(t)
	for i := 0; i < 3; i++ {
		e.mustAcquire(l, alsoReq("key-1", "all-models"))
	}
	e.mustAcquire(l, req("key-1", rpm(100), one)) // gpt-4 alone is not capped
	gpt, gptTC := e.tokens("key-1", "gpt-4", "rpm"), e.consumed("key-1", "gpt-4", "rpm")
	for _, c := range []*Limiter{l, e.limiter()} { // informed, then blind writes
		rl := e.mustReject(c, alsoReq("key-1", "claude-3", "all-models"))
		if rl.Resource != "all-models" || rl.Entity != "key-1" || rl.Parent || rl.RetryAfter <= 0 {
			t.Fatalf("refusal %+v, want all-models' with a wait", rl)
		}
		if a, tc := e.tokens("key-1", "gpt-4", "rpm"), e.consumed("key-1", "gpt-4", "rpm"); a != gpt || tc != gptTC {
			t.Fatalf("gpt-4 charged by a refused acquire: tk %d->%d, tc %d->%d", gpt, a, gptTC, tc)
		}
		if it := e.bucketItem("key-1", "claude-3", 0); it != nil {
			if tc := e.consumed("key-1", "claude-3", "rpm"); tc != 0 {
				t.Fatalf("claude-3 keeps %d millitokens of a refused acquire", tc)
			}
		}
	}
}

// With a cascade, each resource's parent bucket is charged too: four
// writes in one round trip. The parent's refusal on one resource refunds
// the other three.
func TestAlsoWithCascadeChargesEachResourcesParent(t *testing.T) {
	e, l := cascadeEnv(t) // project-1: 10 a minute on every resource
	e.mustAcquire(l, alsoReq("key-1", "all-models"))
	lease := e.mustAcquire(l, alsoReq("key-1", "all-models"))
	e.expectCost(PathSpeculative, 1, 0, 4)
	if p := e.tokens("project-1", "all-models", "rpm"); p != 8_000 {
		t.Fatalf("project-1 all-models tk %d, want 8000", p)
	}
	if ps := lease.ParentLimits(); len(ps) != 2 || ps[0].Resource != "gpt-4" || ps[1].Resource != "all-models" {
		t.Fatalf("parent limits %+v, want gpt-4's then all-models'", ps)
	}
	// The project's all-models bucket alone is spent (by another key).
	if err := l.putEntity(e.ctx, items.Entity{ID: "key-2", Parent: "project-1", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		r := req("key-2", rpm(100), one)
		r.Resource = "all-models"
		e.mustAcquire(l, r)
	}
	before := map[string]int64{}
	for _, b := range [][2]string{{"key-1", "gpt-4"}, {"key-1", "all-models"}, {"project-1", "gpt-4"}} {
		before[b[0]+"/"+b[1]] = e.consumed(b[0], b[1], "rpm")
	}
	rl := e.mustReject(l, alsoReq("key-1", "all-models"))
	if !rl.Parent || rl.Entity != "project-1" || rl.Resource != "all-models" {
		t.Fatalf("refusal %+v, want the parent's on all-models", rl)
	}
	for b, tc := range before {
		en, res, _ := strings.Cut(b, "/")
		if got := e.consumed(en, res, "rpm"); got != tc {
			t.Fatalf("%s charged by a refused acquire: tc %d->%d", b, tc, got)
		}
	}
}

// The lease settles every bucket: Adjust charges (or refunds) each
// resource that has the limit, Rollback returns each resource's charge,
// each in one round trip of concurrent writes.
func TestAlsoLeaseSettlesEachResource(t *testing.T) {
	e, l := alsoEnv(t)
	lease := e.mustAcquire(l, alsoReq("key-1", "all-models"))
	if err := lease.Adjust(e.ctx, map[string]int64{"rpm": 1}); err != nil {
		t.Fatal(err)
	}
	if ev := e.last(); ev.RoundTrips != 1 || ev.WriteUnits != 2 {
		t.Fatalf("Adjust of two buckets: %d round trips, %.0f WCU; want 1 and 2", ev.RoundTrips, ev.WriteUnits)
	}
	if a, b := e.consumed("key-1", "gpt-4", "rpm"), e.consumed("key-1", "all-models", "rpm"); a != 2_000 || b != 2_000 {
		t.Fatalf("after Adjust(+1): tc %d and %d, want 2000 on each resource", a, b)
	}
	if got := lease.Limits(); len(got) != 2 || got[0].Remaining != 98 || got[1].Remaining != 1 {
		t.Fatalf("lease limits after the adjust %+v, want 98 and 1 remaining", got)
	}
	if err := lease.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if a, b := e.consumed("key-1", "gpt-4", "rpm"), e.consumed("key-1", "all-models", "rpm"); a != 0 || b != 0 {
		t.Fatalf("after Rollback: tc %d and %d, want 0 on each resource", a, b)
	}
}

// A limit stored on one of the resources only is charged there and can be
// adjusted: the lease holds it.
func TestAlsoAdjustsALimitOfOneResource(t *testing.T) {
	e, l := alsoEnv(t)
	if err := l.putLimits(e.ctx, scope{Resource: "all-models"}, []Limit{PerMinute("rpm", 3), PerMinute("tpm", 1000)}); err != nil {
		t.Fatal(err)
	}
	lease := e.mustAcquire(l, alsoReq("key-1", "all-models"))
	if err := lease.Adjust(e.ctx, map[string]int64{"tpm": 400}); err != nil {
		t.Fatalf("Adjust of a limit only all-models has: %v", err)
	}
	if got := e.consumed("key-1", "all-models", "tpm"); got != 400_000 {
		t.Fatalf("all-models tpm tc %d, want 400000", got)
	}
	var v *ValidationError
	if err := lease.Adjust(e.ctx, map[string]int64{"rpd": 1}); !errors.As(err, &v) {
		t.Fatalf("Adjust of a limit no resource has: %v, want a validation error", err)
	}
}

// Bad input is refused before any I/O, naming the field: more than 16
// resources, one named twice or repeating Request.Resource, an invalid
// name, or a Consume that does not fit one resource's limits. Nothing is
// charged.
func TestAlsoBadInputChangesNothing(t *testing.T) {
	e, l := alsoEnv(t)
	var many []string
	for i := range 16 {
		many = append(many, fmt.Sprintf("m-%d", i))
	}
	tooBig := alsoReq("key-1", "gpt-4-mini")
	tooBig.Consume = map[string]int64{"rpm": 101}
	if err := l.putLimits(e.ctx, scope{Resource: "gpt-4-mini"}, rpm(1000)); err != nil {
		t.Fatal(err)
	}
	tooBig2 := alsoReq("key-1", "all-models")
	tooBig2.Limits, tooBig2.Consume = rpm(1000), map[string]int64{"rpm": 5}
	before := e.st.Totals().Ops[memsim.OpUpdate].Requests + e.st.Totals().Ops[memsim.OpPut].Requests
	for _, c := range []struct {
		req   Request
		field string
	}{
		{alsoReq("key-1", many...), "Request.Also"},
		{alsoReq("key-1", many[:15]...), ""}, // 16 in all: fine
		{alsoReq("key-1", "all-models", "all-models"), "Request.Also[1]"},
		{alsoReq("key-1", "all-models", "gpt-4"), "Request.Also[1]"},
		{alsoReq("key-1", "-bad"), "Request.Also[0]"},
		{alsoReq("key-1", ""), "Request.Also[0]"},
		{tooBig2, "Request.Consume[rpm]"},
	} {
		_, err := l.Acquire(e.ctx, c.req)
		var v *ValidationError
		switch {
		case c.field == "":
			if err != nil {
				t.Fatalf("16 resources: %v, want a lease", err)
			}
			before = e.st.Totals().Ops[memsim.OpUpdate].Requests + e.st.Totals().Ops[memsim.OpPut].Requests
		case !errors.As(err, &v) || v.Field != c.field:
			t.Fatalf("Also %q: %v, want a validation error of %s", c.req.Also, err, c.field)
		}
	}
	if got := e.st.Totals().Ops[memsim.OpUpdate].Requests + e.st.Totals().Ops[memsim.OpPut].Requests; got != before {
		t.Fatalf("%d writes for bad requests, want none", got-before)
	}
	_, err := l.Acquire(e.ctx, tooBig2)
	if err == nil || !strings.Contains(err.Error(), "on resource all-models") {
		t.Fatalf("%v: want the error to name the resource whose burst is exceeded", err)
	}
}

// One resource's write times out (it may have applied) while another
// refuses: the answer is an unknown outcome, never also a refusal, and the
// third resource, charged, is refunded.
func TestAlsoUnknownOutcomeIsReportedAsSuch(t *testing.T) {
	sc := newScript()
	e, l := alsoEnv(t, memsim.WithFaults(sc.injector()))
	for i := 0; i < 3; i++ {
		e.mustAcquire(l, alsoReq("key-1", "all-models"))
	}
	claudePK := keys.Bucket{Namespace: "ns", Entity: "key-1", Resource: "claude-3"}.PK()
	sc.on(claudePK, memsim.FaultLostResponse)
	sc.arm()
	before := e.consumed("key-1", "gpt-4", "rpm")
	lease, err := e.limiter().Acquire(e.ctx, alsoReq("key-1", "claude-3", "all-models"))
	var u *UnavailableError
	switch {
	case lease != nil:
		t.Fatal("a lease, want an error")
	case !errors.As(err, &u) || !store.OutcomeUnknown(err) || errors.Is(err, ErrRateLimited):
		t.Fatalf("%v, want an unavailability whose outcome is unknown, not a refusal", err)
	case u.Refusal == nil || u.Refusal.Resource != "all-models":
		t.Fatalf("%v: want all-models' refusal in Refusal", err)
	}
	if got := e.consumed("key-1", "gpt-4", "rpm"); got != before {
		t.Fatalf("gpt-4 keeps %d millitokens of the refused acquire, want it refunded", got-before)
	}
}

// The modes of the resources of one acquire (Request.Also): a gateway
// tries a shadow cap on "all-models" while the models enforce their own.
// The shadow cap that would refuse must not refuse: the acquire is
// admitted, every model is charged as before, the cap is not charged
// once spent, and Event.WouldRefuse names it with its resource.
func TestAlsoShadowLimitOfOneResourceRefusesNothing(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	capped := rpm(2)
	capped[0].Shadow = true
	if err := l.putLimits(e.ctx, scope{Resource: "all-models"}, capped); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		e.mustAcquire(l, alsoReq("key-1", "claude-3", "all-models"))
		ev := e.last()
		if i < 2 && ev.WouldRefuse != nil {
			t.Fatalf("acquire %d: would refuse %v with the cap not spent", i, ev.WouldRefuse)
		}
		if i >= 2 && (ev.Outcome != Admitted || len(ev.WouldRefuse) != 1 || ev.WouldRefuse[0] != "all-models/rpm") {
			t.Fatalf("acquire %d: %+v, want admitted, all-models/rpm would refuse", i, ev)
		}
	}
	if a, b, c := e.tokens("key-1", "gpt-4", "rpm"), e.tokens("key-1", "claude-3", "rpm"), e.tokens("key-1", "all-models", "rpm"); a != 96_000 || b != 96_000 || c != 0 {
		t.Fatalf("gpt-4 tk %d, claude-3 tk %d, all-models tk %d; want 96000, 96000 (four charges) and 0 (two: not charged when spent)", a, b, c)
	}
}

// A resource of the acquire in refuse mode refuses it all: an operator
// revoked "all-models" for a key, so no model may be charged either. The
// answer is ErrDisabled, not a rate limit, and nothing is written. A
// resource in admit mode is left out of the charge: the others are
// charged as before.
func TestAlsoModesOfEachResource(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	if err := l.putScope(e.ctx, scope{Entity: "revoked", Resource: "all-models"}, nil, items.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	_, err := l.Acquire(e.ctx, alsoReq("revoked", "claude-3", "all-models"))
	var rl *RateLimitedError
	if !errors.Is(err, ErrDisabled) || errors.As(err, &rl) || !strings.Contains(err.Error(), `"all-models"`) {
		t.Fatalf("acquire with all-models refused: %v, want ErrDisabled naming all-models", err)
	}
	if ev := e.last(); ev.Outcome != Disabled || ev.Mode != "refuse" {
		t.Fatalf("event %+v, want Outcome Disabled, Mode refuse", ev)
	}
	for _, r := range []string{"gpt-4", "claude-3", "all-models"} {
		if it := e.bucketItem("revoked", r, 0); it != nil {
			t.Fatalf("refuse mode on all-models wrote %s: %v", r, it)
		}
	}

	if err := l.putScope(e.ctx, scope{Entity: "free", Resource: "all-models"}, nil, items.ModeAdmit); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		e.mustAcquire(l, alsoReq("free", "all-models"))
		// The observer tells which resource the acquire left out: its
		// charge alone does not show that all-models was not charged.
		if ev := e.last(); ev.Mode != "" || !slices.Equal(ev.LeftOut, []string{"all-models"}) {
			t.Fatalf("acquire with all-models in admit mode: Mode %q, LeftOut %q; want \"\" and [all-models]", ev.Mode, ev.LeftOut)
		}
	}
	if a := e.tokens("free", "gpt-4", "rpm"); a != 98_000 || e.bucketItem("free", "all-models", 0) != nil {
		t.Fatalf("gpt-4 tk %d, all-models item %v; want 98000 and no item (admit mode leaves it out)", a, e.bucketItem("free", "all-models", 0))
	}
	if err := l.putScope(e.ctx, scope{Entity: "free", Resource: "gpt-4"}, nil, items.ModeAdmit); err != nil {
		t.Fatal(err)
	}
	l.Invalidate()
	e.mustAcquire(l, alsoReq("free", "all-models"))
	if ev := e.last(); ev.Mode != "admit" || !slices.Equal(ev.LeftOut, []string{"gpt-4", "all-models"}) || ev.Path != PathNone || e.tokens("free", "gpt-4", "rpm") != 98_000 {
		t.Fatalf("every resource in admit mode: %+v, gpt-4 tk %d; want admitted without a write", ev, e.tokens("free", "gpt-4", "rpm"))
	}
}

// A shadow cap on all-models would refuse while claude-3's write times out
// (the answer was lost): without the cap the acquire would have been
// admitted, so it is admitted, on a second try that skips the cap. The
// first try's charge on claude-3 may stand: the observer's Err says so
// (here it did not: a process with no memory of the bucket sent a create,
// which found the item), and gpt-4, charged by the first try, was refunded
// before the second.
func TestAlsoShadowRefusalWithAnUnknownOutcomeIsRetried(t *testing.T) {
	sc := newScript()
	e, l := alsoEnv(t, memsim.WithFaults(sc.injector()))
	capped := rpm(3)
	capped[0].Shadow = true
	if err := l.putLimits(e.ctx, scope{Resource: "all-models"}, capped); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // the cap's 3 a minute are spent
		e.mustAcquire(l, alsoReq("key-1", "claude-3", "all-models"))
	}
	claudePK := keys.Bucket{Namespace: "ns", Entity: "key-1", Resource: "claude-3"}.PK()
	sc.on(claudePK, memsim.FaultLostResponse)
	sc.arm()
	gpt, claude := e.consumed("key-1", "gpt-4", "rpm"), e.consumed("key-1", "claude-3", "rpm")
	lease, err := e.limiter().Acquire(e.ctx, alsoReq("key-1", "claude-3", "all-models"))
	if err != nil || lease == nil {
		t.Fatalf("%v: a shadow limit refused (the other side's outcome unknown); want a lease", err)
	}
	ev := e.last()
	if ev.Outcome != Admitted || !slices.Equal(ev.WouldRefuse, []string{"all-models/rpm"}) || !store.OutcomeUnknown(ev.Err) {
		t.Fatalf("event %+v: want admitted, all-models/rpm would refuse, Err the unknown outcome of claude-3's first charge", ev)
	}
	if g, c := e.consumed("key-1", "gpt-4", "rpm")-gpt, e.consumed("key-1", "claude-3", "rpm")-claude; g != 1000 || c != 1000 {
		t.Fatalf("gpt-4 charged %d, claude-3 %d millitokens; want 1000 each (the first try refunded, or not applied)", g, c)
	}
}

// The request's own resource in admit mode leaves all-models the only
// resource charged; when all-models' shadow cap would refuse, the
// observer must still name it "all-models/rpm", not "rpm" (which is
// gpt-4's limit, which the acquire did not even charge).
func TestAlsoShadowRefusalNamesItsResourceWhenTheFirstIsLeftOut(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	capped := rpm(1)
	capped[0].Shadow = true
	if err := l.putLimits(e.ctx, scope{Resource: "all-models"}, capped); err != nil {
		t.Fatal(err)
	}
	if err := l.putScope(e.ctx, scope{Entity: "key-1", Resource: "gpt-4"}, nil, items.ModeAdmit); err != nil {
		t.Fatal(err)
	}
	e.mustAcquire(l, alsoReq("key-1", "all-models")) // the cap's one token
	e.mustAcquire(l, alsoReq("key-1", "all-models"))
	if ev := e.last(); ev.Outcome != Admitted || !slices.Equal(ev.LeftOut, []string{"gpt-4"}) || !slices.Equal(ev.WouldRefuse, []string{"all-models/rpm"}) {
		t.Fatalf("event %+v: want admitted, gpt-4 left out, all-models/rpm would refuse", ev)
	}
}
