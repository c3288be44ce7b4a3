package admin

import (
	"context"
	"math"
	"testing"

	"github.com/shardlimit/limiter/internal/zerotest"
	"time"

	"github.com/shardlimit/limiter"
)

// zcall is a zerotest.Call, in tables without field names.
type zcall struct {
	Name string
	Fn   func() error
	Want string
}

// The Admin methods TestBadCallsAreValidationErrors leaves out, on a nil
// or zero Admin and with a nil context, and every method with empty,
// negative, huge and unknown input: an error naming the field, no panic,
// nothing written.
func TestStoryNilAndZeroInputsNeverPanic(t *testing.T) {
	e := newEnv(t)
	a := e.limiter().Admin
	var nilCtx context.Context
	var zero Admin
	var nilAdmin *Admin
	var nilWindow *UsageWindow
	k := Scope{Entity: "k"}
	calls := []zcall{}
	for _, c := range []struct {
		what  string
		a     *Admin
		ctx   context.Context
		field string
	}{{"nil ctx", a, nilCtx, "ctx"}, {"zero Admin", &zero, e.ctx, "Admin"}, {"nil Admin", nilAdmin, e.ctx, "Admin"}} {
		a, ctx := c.a, c.ctx
		calls = append(calls,
			zcall{c.what + " DeleteNamespace", func() error { _, err := a.DeleteNamespace(ctx, DeleteNamespaceOptions{}); return err }, c.field},
			zcall{c.what + " Namespace", func() error { _, err := a.Namespace(ctx); return err }, c.field},
			zcall{c.what + " SetMode", func() error { return a.SetMode(ctx, k, ModeAdmit) }, c.field},
			zcall{c.what + " GetMode", func() error { _, err := a.GetMode(ctx, k); return err }, c.field},
			zcall{c.what + " TopUp", func() error { _, err := a.TopUp(ctx, "k", "r", map[string]int64{"rpm": 1}); return err }, c.field},
			zcall{c.what + " ResumeTopUps", func() error { _, err := a.ResumeTopUps(ctx, "k", "r"); return err }, c.field},
		)
	}
	calls = append(calls, []zcall{
		{"ListNamespaces nil ctx", func() error { _, err := ListNamespaces(nilCtx, e.st); return err }, "ctx"},
		{"ListNamespaces nil store", func() error { _, err := ListNamespaces(e.ctx, nil); return err }, "store"},
		{"New nil option", func() error { _, err := New(e.st, nil); return err }, "ok"},
		{"WithAuditRetention -1", func() error { _, err := New(e.st, WithAuditRetention(-1)); return err }, "Retention"},
		{"WithAuditRetention 0", func() error { _, err := New(e.st, WithAuditRetention(0)); return err }, ""},
		{"WithAuditRetention huge", func() error { _, err := New(e.st, WithAuditRetention(math.MaxInt64)); return err }, ""},
		{"WithLimiter(nil)", func() error { _, err := New(e.st, WithLimiter(nil)); return err }, ""},
		{"WithDefaultPrincipal empty", func() error { _, err := New(e.st, WithDefaultPrincipal("")); return err }, ""},
		{"WithNamespace empty", func() error { _, err := New(e.st, WithNamespace("")); return err }, "Namespace"},
		{"ContextWithPrincipal nil ctx", func() error { ContextWithPrincipal(nilCtx, "p"); return nil }, ""},
		{"ContextWithPrincipal empty", func() error { ContextWithPrincipal(e.ctx, ""); return nil }, ""},

		{"PutEntity zero", func() error { return a.PutEntity(e.ctx, Entity{}) }, "ID"},
		{"PutEntity own parent", func() error { return a.PutEntity(e.ctx, Entity{ID: "k", Parent: "k"}) }, "Parent"},
		{"PutEntity cascade without parent", func() error { return a.PutEntity(e.ctx, Entity{ID: "k", Cascade: true}) }, "Cascade"},
		{"GetEntity empty", func() error { _, _, err := a.GetEntity(e.ctx, ""); return err }, "id"},
		{"DeleteEntity empty", func() error { return a.DeleteEntity(e.ctx, "") }, "id"},
		{"ListEntities -1", func() error { _, err := a.ListEntities(e.ctx, "", -1); return err }, "limit"},
		{"ListEntities huge", func() error { _, err := a.ListEntities(e.ctx, "", math.MaxInt); return err }, ""},
		{"PutLimits zero Scope", func() error { return a.PutLimits(e.ctx, Scope{}, rpm(1)) }, "Scope"},
		{"PutLimits nil limits", func() error { return a.PutLimits(e.ctx, k, nil) }, "limits"},
		{"PutLimits zero Limit", func() error { return a.PutLimits(e.ctx, k, []limiter.Limit{{}}) }, "Name"},
		{"PutLimits negative", func() error { return a.PutLimits(e.ctx, k, []limiter.Limit{limiter.PerSecond("rpm", -1)}) }, "rpm"},
		{"PutLimits huge", func() error {
			return a.PutLimits(e.ctx, k, []limiter.Limit{limiter.PerSecond("rpm", math.MaxInt64)})
		}, "rpm"},
		{"GetLimits zero Scope", func() error { _, _, err := a.GetLimits(e.ctx, Scope{}); return err }, "Scope"},
		{"DeleteLimits zero Scope", func() error { return a.DeleteLimits(e.ctx, Scope{}) }, "Scope"},
		{"Audit zero query", func() error { _, err := a.Audit(e.ctx, AuditQuery{}); return err }, "Entity"},
		{"Audit Limit -1", func() error { _, err := a.Audit(e.ctx, AuditQuery{Entity: "k", Limit: -1}); return err }, "Limit"},
		{"Usage zero query", func() error { _, err := a.Usage(e.ctx, UsageQuery{}); return err }, "Entity"},
		{"Usage window 255", func() error {
			_, err := a.Usage(e.ctx, UsageQuery{Entity: "k", Window: 255, From: t0, To: t0.Add(time.Hour)})
			return err
		}, "Window"},
		{"Usage From after To", func() error {
			_, err := a.Usage(e.ctx, UsageQuery{Entity: "k", Window: UsageHourly, From: t0.Add(time.Hour), To: t0})
			return err
		}, "To"},
		{"Buckets empty", func() error { _, err := a.Buckets(e.ctx, "", ""); return err }, "entity"},
		{"ResetBucket empty", func() error { _, err := a.ResetBucket(e.ctx, "", ""); return err }, "entity"},
		{"SetMode nonsense", func() error { return a.SetMode(e.ctx, k, "nonsense") }, "mode"},
		{"SetMode zero Scope", func() error { return a.SetMode(e.ctx, Scope{}, ModeAdmit) }, "Scope"},
		{"GetMode zero Scope", func() error { _, err := a.GetMode(e.ctx, Scope{}); return err }, "Scope"},
		{"TopUp empty", func() error { _, err := a.TopUp(e.ctx, "", "", map[string]int64{"rpm": 1}); return err }, "entity"},
		{"TopUp nil tokens", func() error { _, err := a.TopUp(e.ctx, "k", "r", nil); return err }, "tokens"},
		{"TopUp 0", func() error { _, err := a.TopUp(e.ctx, "k", "r", map[string]int64{"rpm": 0}); return err }, "rpm"},
		{"TopUp -1", func() error { _, err := a.TopUp(e.ctx, "k", "r", map[string]int64{"rpm": -1}); return err }, "rpm"},
		{"TopUp MaxInt64", func() error { _, err := a.TopUp(e.ctx, "k", "r", map[string]int64{"rpm": math.MaxInt64}); return err }, "rpm"},
		{"TopUp empty name", func() error { _, err := a.TopUp(e.ctx, "k", "r", map[string]int64{"": 1}); return err }, "tokens"},
		{"ResumeTopUps empty", func() error { _, err := a.ResumeTopUps(e.ctx, "", ""); return err }, "entity"},
		{"DeleteNamespace rate -1", func() error {
			_, err := a.DeleteNamespace(e.ctx, DeleteNamespaceOptions{WriteUnitsPerSecond: -1})
			return err
		}, "WriteUnitsPerSecond"},
		{"DeleteNamespace rate NaN", func() error {
			_, err := a.DeleteNamespace(e.ctx, DeleteNamespaceOptions{WriteUnitsPerSecond: math.NaN()})
			return err
		}, "WriteUnitsPerSecond"},
		{"DeleteNamespace rate -Inf", func() error {
			_, err := a.DeleteNamespace(e.ctx, DeleteNamespaceOptions{WriteUnitsPerSecond: math.Inf(-1)})
			return err
		}, "WriteUnitsPerSecond"},

		{"zero Scope.String", func() error { _ = Scope{}.String(); return nil }, ""},
		{"UsageWindow(0).String", func() error { _ = UsageWindow(0).String(); return nil }, ""},
		{"UsageWindow(255).MarshalText", func() error { _, err := UsageWindow(255).MarshalText(); return err }, ""},
		{"nil UsageWindow.UnmarshalText", func() error { return nilWindow.UnmarshalText([]byte("hourly")) }, ""},
		{"UsageWindow.UnmarshalText nil", func() error { var w UsageWindow; return w.UnmarshalText(nil) }, ""},
	}...)
	before := e.st.Len()
	zerotest.Run(t, calls)
	if n := e.st.Len() - before; n != 0 {
		t.Errorf("nil, zero and bad calls changed the item count by %d", n)
	}
}
