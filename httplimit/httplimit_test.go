package httplimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/httplimit"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

var (
	rpm    = limiter.PerMinute("rpm", 3)
	tpm    = limiter.PerMinute("tpm", 1000)
	limits = []limiter.Limit{rpm, tpm}
	t0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// newLimiter returns a limiter on memsim with a manual clock.
func newLimiter(t testing.TB, st store.Store, opts ...limiter.Option) (*limiter.Limiter, *memsim.ManualClock) {
	t.Helper()
	clock := memsim.NewManualClock(t0)
	if st == nil {
		st = memsim.New(memsim.WithClock(clock))
	}
	lim, err := limiter.New(st, append([]limiter.Option{limiter.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return lim, clock
}

// newPlanes returns a limiter on memsim with a manual clock, and an Admin
// that keeps it up to date.
func newPlanes(t testing.TB) (*limiter.Limiter, *admin.Admin, *memsim.ManualClock) {
	t.Helper()
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	lim, err := limiter.New(st, limiter.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(st, admin.WithClock(clock), admin.WithLimiter(lim))
	if err != nil {
		t.Fatal(err)
	}
	return lim, adm, clock
}

// apiKey keys requests by the X-API-Key header (401 without one) on the
// resource named by the path.
func apiKey(r *http.Request) (string, string, error) {
	k := r.Header.Get("X-API-Key")
	if k == "" {
		return "", "", &httplimit.RequestError{Status: http.StatusUnauthorized, Err: errors.New("missing X-API-Key")}
	}
	if k == "internal" {
		return "", "", nil
	}
	return k, strings.TrimPrefix(r.URL.Path, "/"), nil
}

// tokens charges one request and the estimate in X-Tokens.
func tokens(r *http.Request) (map[string]int64, error) {
	n, err := strconv.ParseInt(r.Header.Get("X-Tokens"), 10, 64)
	if err != nil {
		return nil, errors.New("X-Tokens must be a number")
	}
	return map[string]int64{"rpm": 1, "tpm": n}, nil
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })

func newMiddleware(t testing.TB, lim *limiter.Limiter, opts ...httplimit.Option) *httplimit.Middleware {
	t.Helper()
	mw, err := httplimit.New(lim, apiKey, append([]httplimit.Option{httplimit.WithLimits(limits...), httplimit.WithCost(tokens)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

func serve(h http.Handler, key string, tok int64) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/gpt-4", nil)
	if key != "" {
		r.Header.Set("X-API-Key", key)
	}
	r.Header.Set("X-Tokens", strconv.FormatInt(tok, 10))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func problemOf(t testing.TB, w *httptest.ResponseRecorder) httplimit.Problem {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, w.Body)
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %s: %v", w.Body, err)
	}
	if p.Status != w.Code {
		t.Fatalf("problem status %d, answer %d", p.Status, w.Code)
	}
	return p
}

func TestAdmittedRequestCarriesItsState(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	h := newMiddleware(t, lim).Handler(ok)

	w := serve(h, "key-1", 100)
	if w.Code != 200 || w.Body.String() != "ok\n" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// rpm: 2 of 3 left, the next token in 20 s; tpm: 900 of 1000, the next
	// token in 60 ms.
	want := map[string]string{
		"RateLimit-Policy": `"rpm";q=3;w=60, "tpm";q=1000;w=60`,
		"RateLimit":        `"rpm";r=2;t=20, "tpm";r=900;t=1`,
		"Retry-After":      "",
	}
	for k, v := range want {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	// The items keep their order when tpm has less left.
	w = serve(h, "key-1", 800)
	if got := w.Header().Get("RateLimit"); got != `"rpm";r=1;t=20, "tpm";r=100;t=1` {
		t.Errorf("RateLimit %q", got)
	}
}

func TestRefusalIs429WithAProblemBody(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	h := newMiddleware(t, lim).Handler(ok)
	for i := 0; i < 3; i++ {
		if w := serve(h, "key-1", 100); w.Code != 200 {
			t.Fatalf("request %d: %d", i+1, w.Code)
		}
	}
	w := serve(h, "key-1", 100)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// rpm is empty: one token in 20 s.
	for k, v := range map[string]string{
		"Retry-After":      "20",
		"RateLimit":        `"rpm";r=0;t=20, "tpm";r=700;t=1`,
		"RateLimit-Policy": `"rpm";q=3;w=60, "tpm";q=1000;w=60`,
	} {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	p := problemOf(t, w)
	want := httplimit.Problem{Type: httplimit.ProblemTypeQuotaExceeded, Title: "Rate limit exceeded", Status: 429,
		Detail:           "Rate limit exceeded: rpm (requested 1, remaining 0); retry after 20 s.",
		ViolatedPolicies: []string{"rpm"}, RetryAfter: 20,
		Limits: []httplimit.ProblemLimit{{Name: "rpm", Requested: 1, Remaining: 0, RetryAfter: 20}}}
	if d := cmp.Diff(want, p); d != "" {
		t.Errorf("problem (-want +got):\n%s", d)
	}
	// The member names on the wire.
	for _, m := range []string{`"violated-policies":["rpm"]`, `"retry_after":20`, `"type":"https://iana.org/assignments/http-problem-types#quota-exceeded"`} {
		if !strings.Contains(w.Body.String(), m) {
			t.Errorf("body lacks %s: %s", m, w.Body)
		}
	}
}

func TestReportCostAdjustsAfterTheHandler(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	var reported bool
	h := newMiddleware(t, lim).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reported = httplimit.ReportCost(r.Context(), map[string]int64{"tpm": 500})
		httplimit.ReportCost(r.Context(), map[string]int64{"tpm": 700}) // the last report wins
	}))
	if w := serve(h, "key-1", 100); w.Code != 200 || !reported {
		t.Fatalf("%d, reported %v", w.Code, reported)
	}
	st, err := lim.Status(context.Background(), "key-1", "gpt-4", limits)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Remaining != 2 || st[1].Remaining != 300 {
		t.Fatalf("rpm %d, tpm %d left; want 2 and 300 (700 tokens used)", st[0].Remaining, st[1].Remaining)
	}
	if httplimit.ReportCost(context.Background(), map[string]int64{"tpm": 1}) {
		t.Error("ReportCost outside the middleware reported true")
	}
}

// A negative reported cost returns the request's charge and no more: one
// key's handler cannot erase what other requests of the key consumed.
func TestNegativeReportedCostReturnsOnlyTheCharge(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	h := newMiddleware(t, lim).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Tokens") == "100" {
			httplimit.ReportCost(r.Context(), map[string]int64{"tpm": -5000})
		}
	}))
	for _, tok := range []int64{600, 100} {
		if w := serve(h, "key-1", tok); w.Code != 200 {
			t.Fatalf("%d", w.Code)
		}
	}
	st, err := lim.Status(context.Background(), "key-1", "gpt-4", limits)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Remaining != 1 || st[1].Remaining != 400 {
		t.Fatalf("rpm %d, tpm %d left; want 1 and 400 (the first request's 600 stay used)", st[0].Remaining, st[1].Remaining)
	}
}

func TestHandlerMayRollBack(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := newMiddleware(t, lim, httplimit.WithLogger(logger)).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httplimit.ReportCost(r.Context(), map[string]int64{"tpm": 900})
		if err := httplimit.LeaseFrom(r.Context()).Rollback(r.Context()); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}))
	if w := serve(h, "key-1", 100); w.Code != http.StatusBadGateway {
		t.Fatalf("%d", w.Code)
	}
	st, _ := lim.Status(context.Background(), "key-1", "gpt-4", limits)
	if st[0].Remaining != 3 || st[1].Remaining != 1000 {
		t.Fatalf("after a rollback: rpm %d, tpm %d left", st[0].Remaining, st[1].Remaining)
	}
	if logs.Len() > 0 {
		t.Errorf("logged: %s", &logs)
	}
	if httplimit.LeaseFrom(context.Background()) != nil {
		t.Error("LeaseFrom outside the middleware")
	}
}

func TestRequestErrors(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	h := newMiddleware(t, lim).Handler(ok)
	for _, tc := range []struct {
		name, key string
		tok       string
		status    int
		detail    string
	}{
		{"no key", "", "1", 401, "missing X-API-Key"},
		{"bad cost", "key-1", "many", 400, "X-Tokens must be a number"},
		{"bad entity", "key with spaces", "1", 400, "Request.Entity"},
		{"over the burst", "key-1", "5000", 400, "Request.Consume[tpm]"},
	} {
		r := httptest.NewRequest("GET", "/gpt-4", nil)
		if tc.key != "" {
			r.Header.Set("X-API-Key", tc.key)
		}
		r.Header.Set("X-Tokens", tc.tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, w.Code, tc.status)
			continue
		}
		p := problemOf(t, w)
		if p.Type != "about:blank" || p.Title != http.StatusText(tc.status) || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("%s: %+v", tc.name, p)
		}
		if w.Header().Get("RateLimit") != "" {
			t.Errorf("%s: RateLimit set", tc.name)
		}
	}
	// An empty entity passes unlimited.
	if w := serve(h, "internal", 1); w.Code != 200 || w.Header().Get("RateLimit") != "" {
		t.Errorf("internal: %d %q", w.Code, w.Header().Get("RateLimit"))
	}
}

// A configuration fault is a 500 that reveals nothing, logged at Error.
func TestConfigurationFaultIs500(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	var logs bytes.Buffer
	mw, err := httplimit.New(lim, apiKey, httplimit.WithCost(tokens), // no limits, none stored
		httplimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	w := serve(mw.Handler(ok), "key-1", 1)
	if w.Code != 500 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if p := problemOf(t, w); strings.Contains(p.Detail, "Request") {
		t.Errorf("detail reveals the cause: %q", p.Detail)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "Request.Limits") {
		t.Errorf("log: %s", &logs)
	}
}

func TestStoreDownFollowsThePolicy(t *testing.T) {
	down := memsim.New(memsim.WithFaults(memsim.Always(memsim.Fault5xxBeforeApply)))
	lim, _ := newLimiter(t, down, limiter.WithLogger(slog.New(slog.DiscardHandler)))

	w := serve(newMiddleware(t, lim).Handler(ok), "key-1", 1)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("fail-closed: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if p := problemOf(t, w); p.Type != "about:blank" || p.Title != "Service Unavailable" {
		t.Errorf("%+v", p)
	}

	var ran bool
	h := newMiddleware(t, lim, httplimit.WithPolicy(limiter.FailOpen)).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran = httplimit.ReportCost(r.Context(), map[string]int64{"tpm": 50}) // a no-op Adjust
	}))
	w = serve(h, "key-1", 1)
	if w.Code != 200 || !ran || w.Header().Get("RateLimit") != "" {
		t.Fatalf("fail-open: %d, ran %v, RateLimit %q", w.Code, ran, w.Header().Get("RateLimit"))
	}
}

func TestExposeLimits(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	h := newMiddleware(t, lim, httplimit.ExposeLimits("tpm")).Handler(ok)
	w := serve(h, "key-1", 100)
	if got := w.Header().Get("RateLimit") + " | " + w.Header().Get("RateLimit-Policy"); got != `"tpm";r=900;t=1 | "tpm";q=1000;w=60` {
		t.Errorf("only tpm: %q", got)
	}

	h = newMiddleware(t, lim, httplimit.ExposeLimits()).Handler(ok)
	for i := 0; i < 3; i++ {
		w = serve(h, "key-1", 1)
	}
	if w.Code != 429 || w.Header().Get("RateLimit") != "" || w.Header().Get("RateLimit-Policy") != "" || w.Header().Get("Retry-After") == "" {
		t.Errorf("none: %d %v", w.Code, w.Header())
	}
}

// A cascade parent's limits appear as parent/NAME, and its refusal names
// them.
func TestParentLimits(t *testing.T) {
	lim, adm, _ := newPlanes(t)
	withParent(t, adm, []limiter.Limit{limiter.PerMinute("rpm", 2), limiter.PerMinute("tpm", 1000)})
	h := newMiddleware(t, lim).Handler(ok)

	// The first request creates both buckets in a transaction, which
	// returns no item: its lease carries no state yet.
	serve(h, "key-1", 10)
	w := serve(h, "key-1", 10)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := w.Header().Get("RateLimit"); got != `"rpm";r=1;t=20, "tpm";r=980;t=1, "parent/rpm";r=0;t=30, "parent/tpm";r=980;t=1` {
		t.Errorf("RateLimit %q", got)
	}
	w = serve(h, "key-1", 10)
	if w.Code != 429 {
		t.Fatalf("%d", w.Code)
	}
	if p := problemOf(t, w); len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "parent/rpm" || w.Header().Get("Retry-After") != "30" {
		t.Errorf("%+v, Retry-After %s", p, w.Header().Get("Retry-After"))
	}
}

// Limits stored for an entity override the middleware's, and the policy
// says so.
func TestStoredOverrideShowsInThePolicy(t *testing.T) {
	lim, adm, _ := newPlanes(t)
	must(t, adm.PutLimits(context.Background(), admin.Scope{Entity: "key-1"},
		[]limiter.Limit{limiter.PerMinute("rpm", 10), limiter.PerHour("tpm", 3600).WithBurst(7200)}))
	w := serve(newMiddleware(t, lim).Handler(ok), "key-1", 1)
	if got := w.Header().Get("RateLimit-Policy"); got != `"rpm";q=10;w=60, "tpm";q=7200;w=7200` {
		t.Errorf("RateLimit-Policy %q", got)
	}
}

func TestCustomErrorHandler(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	var seen error
	h := newMiddleware(t, lim, httplimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
		seen = err
		if w.Header().Get("Retry-After") == "" || w.Header().Get("RateLimit") == "" {
			t.Error("fields not set before the error handler")
		}
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"type":"rate_limit_exceeded"}}`)
	})).Handler(ok)
	var w *httptest.ResponseRecorder
	for i := 0; i < 4; i++ {
		w = serve(h, "key-1", 1)
	}
	var rl *limiter.RateLimitedError
	if w.Code != 429 || !errors.As(seen, &rl) || !strings.Contains(w.Body.String(), "rate_limit_exceeded") {
		t.Fatalf("%d %s, error %v", w.Code, w.Body, seen)
	}
}

func TestNewChecksItsOptions(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	for name, f := range map[string]func() (*httplimit.Middleware, error){
		"nil limiter": func() (*httplimit.Middleware, error) { return httplimit.New(nil, apiKey, httplimit.WithLimits(rpm)) },
		"nil key":     func() (*httplimit.Middleware, error) { return httplimit.New(lim, nil, httplimit.WithLimits(rpm)) },
		"no cost":     func() (*httplimit.Middleware, error) { return httplimit.New(lim, apiKey) },
		"invalid limit": func() (*httplimit.Middleware, error) {
			return httplimit.New(lim, apiKey, httplimit.WithLimits(limiter.Limit{Name: "x"}))
		},
		"nil logger": func() (*httplimit.Middleware, error) {
			return httplimit.New(lim, apiKey, httplimit.WithLimits(rpm), httplimit.WithLogger(nil))
		},
		"zero timeout": func() (*httplimit.Middleware, error) {
			return httplimit.New(lim, apiKey, httplimit.WithLimits(rpm), httplimit.WithAdjustTimeout(0))
		},
	} {
		if mw, err := f(); err == nil || mw != nil {
			t.Errorf("%s: %v, %v", name, mw, err)
		}
	}
	// Without WithCost, one token of each limit.
	mw, err := httplimit.New(lim, apiKey, httplimit.WithLimits(limits...))
	if err != nil {
		t.Fatal(err)
	}
	w := serve(mw.Handler(ok), "key-2", 0)
	if got := w.Header().Get("RateLimit"); got != `"rpm";r=2;t=20, "tpm";r=999;t=1` {
		t.Errorf("default cost: %q", got)
	}
}

// The header helpers serve callers of Acquire without the middleware.
func TestHeaderHelpers(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	ctx := context.Background()
	req := limiter.Request{Entity: "k", Resource: "r", Limits: []limiter.Limit{rpm}, Consume: map[string]int64{"rpm": 3}}
	lease, err := lim.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	httplimit.SetLeaseHeaders(h, lease, nil)
	if h.Get("RateLimit") != `"rpm";r=0;t=20` {
		t.Errorf("lease: %v", h)
	}
	_, err = lim.Acquire(ctx, req)
	var rl *limiter.RateLimitedError
	if !errors.As(err, &rl) {
		t.Fatal(err)
	}
	h = http.Header{}
	httplimit.SetRefusalHeaders(h, rl, nil)
	// Three tokens fit in 60 s, the next one comes in 20.
	if h.Get("RateLimit") != `"rpm";r=0;t=20` || h.Get("Retry-After") != "60" {
		t.Errorf("refusal: %v", h)
	}
	h = http.Header{}
	httplimit.SetLeaseHeaders(h, nil, nil)
	httplimit.SetRefusalHeaders(h, nil, nil)
	if len(h) != 0 {
		t.Errorf("nil: %v", h)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A monthly budget shows as a quota policy of a month (w in seconds, 30
// days nominal), and its RateLimit item's t is the time to the month's
// end: January has 31 days.
func TestCalendarQuotaShowsItsWindow(t *testing.T) {
	lim, adm, _ := newPlanes(t)
	must(t, adm.PutLimits(context.Background(), admin.Scope{Entity: "key-1"},
		[]limiter.Limit{limiter.PerMinute("rpm", 10), {Name: "tpm", Capacity: 100_000, Window: "month"}}))
	w := serve(newMiddleware(t, lim).Handler(ok), "key-1", 1000)
	if got := w.Header().Get("RateLimit-Policy"); got != `"rpm";q=10;w=60, "tpm";q=100000;w=2592000` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := w.Header().Get("RateLimit"); !strings.Contains(got, `"tpm";r=99000;t=2678400`) {
		t.Errorf("RateLimit %q, want tpm's 99000 left until the end of January", got)
	}
}

// A concurrency cap shows as a quota of requests in flight: the draft's
// "concurrent-requests" unit and no window; its RateLimit item's r is the
// free slots while the request runs. The middleware's commit gives the
// slot back, so the next request finds it free again.
func TestConcurrencyCapShowsAsConcurrentRequests(t *testing.T) {
	lim, adm, _ := newPlanes(t)
	must(t, adm.PutLimits(context.Background(), admin.Scope{Entity: "key-1"},
		[]limiter.Limit{limiter.PerMinute("rpm", 10), {Name: "inflight", Capacity: 2, Window: "concurrent", TTL: time.Minute}}))
	mw, err := httplimit.New(lim, apiKey, httplimit.WithCost(func(*http.Request) (map[string]int64, error) {
		return map[string]int64{"rpm": 1, "inflight": 1}, nil
	}))
	must(t, err)
	for range 3 {
		w := serve(mw.Handler(ok), "key-1", 0)
		if got := w.Header().Get("RateLimit-Policy"); got != `"inflight";q=2;qu="concurrent-requests", "rpm";q=10;w=60` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
		if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"inflight";r=1;`) {
			t.Fatalf("RateLimit %q, want 1 slot free while the request runs", got)
		}
	}
}
