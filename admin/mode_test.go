package admin

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/keys"
)

// An operator disables a key, then a resource, through the control plane,
// and enables them again: a scope's mode and limits share one item, so
// setting one must keep the other (a revoked key keeps its limits for
// when it comes back), every change is audited with both, and a limiter
// given the Admin sees each change at once.
func TestSetModeKeepsLimitsAndIsAudited(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	ctx := ContextWithPrincipal(e.ctx, "oncall")
	k := Scope{Entity: "k"}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		e.clock.Add(time.Second)
	}
	step("limits", l.PutLimits(ctx, k, rpm(1)))
	e.mustAcquire(l, req("k", nil, one))
	e.mustReject(l, req("k", nil, one))
	e.clock.Add(time.Minute) // full again
	step("admit", l.SetMode(ctx, k, ModeAdmit))
	step("admit again", l.SetMode(ctx, k, ModeAdmit)) // no change: no record
	e.mustAcquire(l, req("k", nil, one))
	if ev := e.last(); ev.Mode != "admit" {
		t.Fatalf("after SetMode admit: %+v", ev)
	}
	if ls, ok, err := l.GetLimits(e.ctx, k); err != nil || !ok || !cmp.Equal(ls, rpm(1)) {
		t.Fatalf("the limits after SetMode: %v %v %v", ls, ok, err)
	}
	step("refuse", l.SetMode(ctx, k, ModeRefuse))
	if _, err := l.Acquire(e.ctx, req("k", nil, one)); !errors.Is(err, limiter.ErrDisabled) {
		t.Fatalf("after SetMode refuse: %v", err)
	}
	step("delete limits", l.DeleteLimits(ctx, k)) // the mode stays
	if m, err := l.GetMode(e.ctx, k); m != ModeRefuse || err != nil {
		t.Fatalf("mode after DeleteLimits: %q %v", m, err)
	}
	stored, err := l.ListLimits(e.ctx, "")
	if err != nil || !cmp.Equal(stored, []StoredLimits{{Scope: k, Mode: ModeRefuse}}) {
		t.Fatalf("ListLimits: %+v %v", stored, err)
	}
	step("enforce", l.SetMode(ctx, k, ModeEnforce)) // nothing left: the item goes
	if it := e.st.Peek(keys.EntityLimits("ns", "k", keys.AnyResource)); it != nil {
		t.Fatalf("a scope with neither limits nor a mode keeps an item: %v", it)
	}
	e.mustAcquire(l, req("k", rpm(5), one)) // limited again, by the caller's limit now
	if ev := e.last(); ev.Mode != "" || ev.WriteUnits == 0 {
		t.Fatalf("enforcing again: %+v", ev)
	}

	recs, err := l.Audit(e.ctx, AuditQuery{Entity: "k"})
	if err != nil {
		t.Fatal(err)
	}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	want := []AuditRecord{
		{At: at(65), Principal: "oncall", Action: AuditSetMode, Scope: k, Before: &AuditState{Mode: ModeRefuse}},
		{At: at(64), Principal: "oncall", Action: AuditDeleteLimits, Scope: k, Before: &AuditState{Limits: rpm(1), Mode: ModeRefuse}, After: &AuditState{Mode: ModeRefuse}},
		{At: at(63), Principal: "oncall", Action: AuditSetMode, Scope: k, Before: &AuditState{Limits: rpm(1), Mode: ModeAdmit}, After: &AuditState{Limits: rpm(1), Mode: ModeRefuse}},
		{At: at(61), Principal: "oncall", Action: AuditSetMode, Scope: k, Before: &AuditState{Limits: rpm(1)}, After: &AuditState{Limits: rpm(1), Mode: ModeAdmit}},
		{At: at(0), Principal: "oncall", Action: AuditPutLimits, Scope: k, After: &AuditState{Limits: rpm(1)}},
	}
	if diff := cmp.Diff(want, recs); diff != "" {
		t.Fatalf("audit (-want +got):\n%s", diff)
	}
}

// Bad input changes nothing: an unknown mode names the field, a scope
// with neither entity nor resource is refused, and nothing is written.
func TestSetModeRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	before := e.st.Len()
	var v *limiter.ValidationError
	if err := l.SetMode(e.ctx, Scope{Entity: "k"}, "bypass"); !errors.As(err, &v) || v.Field != "mode" {
		t.Fatalf("unknown mode: %v", err)
	}
	if err := l.SetMode(e.ctx, Scope{}, ModeAdmit); !errors.As(err, &v) || v.Field != "Scope" {
		t.Fatalf("empty scope: %v", err)
	}
	if err := (*Admin)(nil).SetMode(e.ctx, Scope{Entity: "k"}, ModeAdmit); !errors.As(err, &v) {
		t.Fatalf("nil Admin: %v", err)
	}
	if n := e.st.Len(); n != before {
		t.Fatalf("bad input wrote %d items", n-before)
	}
}

// Switching a limit from shadow to enforcing is one PutLimits, and its
// audit record shows the flag before and after: an operator reading the
// trail can tell when a limit started to refuse.
func TestShadowToEnforcingIsOneAuditedChange(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	s := Scope{Resource: "gpt-4"}
	shadow := rpm(1)
	shadow[0].Shadow = true
	if err := l.PutLimits(e.ctx, s, shadow); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		e.mustAcquire(l, req("k", nil, one))
	}
	if got, _, err := l.GetLimits(e.ctx, s); err != nil || !got[0].Shadow {
		t.Fatalf("stored: %+v %v", got, err)
	}
	e.clock.Add(time.Second) // audit records of one millisecond come in no order
	if err := l.PutLimits(e.ctx, s, rpm(1)); err != nil {
		t.Fatal(err)
	}
	e.mustReject(l, req("k", nil, one))
	recs, err := l.Audit(e.ctx, AuditQuery{Resource: "gpt-4"})
	if err != nil || len(recs) != 2 || !recs[0].Before.Limits[0].Shadow || recs[0].After.Limits[0].Shadow {
		t.Fatalf("audit: %+v %v", recs, err)
	}
	if err := l.SetMode(e.ctx, Scope{Entity: "k"}, ModeShadow); err != nil {
		t.Fatal(err)
	}
	e.mustAcquire(l, req("k", nil, one))
	if ev := e.last(); ev.Mode != "shadow" || len(ev.WouldRefuse) != 1 {
		t.Fatalf("shadow mode: %+v", ev)
	}
}
