package httplimit_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/httplimit"
)

// A key an operator revoked (mode refuse) gets 403, not 429: no
// Retry-After for a client to sleep on and retry forever, no RateLimit
// fields, and a body that names no key. A key let through (mode admit) is
// served without RateLimit fields: nothing was charged, so there is no
// state to report.
func TestDisabledScopes(t *testing.T) {
	lim, adm, _ := newPlanes(t)
	must(t, adm.SetMode(context.Background(), admin.Scope{Entity: "revoked"}, admin.ModeRefuse))
	must(t, adm.SetMode(context.Background(), admin.Scope{Entity: "internal-batch", Resource: "gpt-4"}, admin.ModeAdmit))
	h := newMiddleware(t, lim).Handler(ok)

	w := serve(h, "revoked", 1)
	p := problemOf(t, w)
	if w.Code != http.StatusForbidden || w.Header().Get(httplimit.HeaderRetryAfter) != "" || w.Header().Get("RateLimit") != "" {
		t.Fatalf("refused scope: %d, headers %v", w.Code, w.Header())
	}
	if p.Detail != "This key is not allowed to use this resource now." {
		t.Fatalf("detail %q", p.Detail)
	}
	for i := 0; i < 20; i++ { // far beyond rpm
		w := serve(h, "internal-batch", 1)
		if w.Code != http.StatusOK || w.Header().Get("RateLimit") != "" {
			t.Fatalf("admitted scope: %d, headers %v", w.Code, w.Header())
		}
	}
}

// A limit watched in shadow is not announced to clients: one pacing itself
// by the RateLimit fields would slow down for a limit that refuses
// nothing. WithShadowLimits(true) shows it.
func TestShadowLimitsLeftOutOfTheFields(t *testing.T) {
	lim, adm, _ := newPlanes(t)
	rpd := limiter.PerDay("rpd", 1)
	rpd.Shadow = true
	must(t, adm.PutLimits(context.Background(), admin.Scope{Resource: "gpt-4"}, []limiter.Limit{rpd}))
	for i := 0; i < 3; i++ {
		w := serve(newMiddleware(t, lim).Handler(ok), "key-1", 1)
		if w.Code != http.StatusOK || strings.Contains(w.Header().Get("RateLimit-Policy"), "rpd") {
			t.Fatalf("request %d: %d, policy %q", i, w.Code, w.Header().Get("RateLimit-Policy"))
		}
	}
	w := serve(newMiddleware(t, lim, httplimit.WithShadowLimits(true)).Handler(ok), "key-1", 1)
	if !strings.Contains(w.Header().Get("RateLimit-Policy"), `"rpd"`) {
		t.Fatalf("WithShadowLimits(true): policy %q", w.Header().Get("RateLimit-Policy"))
	}
}
