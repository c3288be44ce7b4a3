package httplimit_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/internal/zerotest"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/httplimit"
	"github.com/shardlimit/limiter/store/memsim"
)

// zcall is a zerotest.Call, in tables without field names.
type zcall struct {
	Name string
	Fn   func() error
	Want string
}

// serveOnce answers one GET through h and returns an error carrying the
// status unless it is want.
func serveOnce(h http.Handler, r *http.Request, want int) error {
	if r == nil {
		r = httptest.NewRequest(http.MethodGet, "/", nil)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != want {
		return errors.New(http.StatusText(w.Code) + ": " + strings.TrimSpace(w.Body.String()))
	}
	return nil
}

// The middleware and the package's functions with a nil limiter, key
// function, option, Middleware, handler, header or error, a request with
// no remote address, nonsense costs and options: an error naming what is
// wrong (or the documented answer), never a panic.
func TestStoryNilAndZeroInputsNeverPanic(t *testing.T) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock))
	lim, err := limiter.New(st, limiter.WithNamespace("ns"), limiter.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	key := func(r *http.Request) (string, string, error) { n++; return "k" + strconv.Itoa(n), "r", nil } // a fresh bucket each
	byAddr := func(r *http.Request) (string, string, error) { return r.RemoteAddr, "", nil }
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	mw := func(k httplimit.KeyFunc, opts ...httplimit.Option) (*httplimit.Middleware, error) {
		quiet := slog.New(slog.DiscardHandler)
		return httplimit.New(lim, k, append([]httplimit.Option{httplimit.WithLimits(rpm), httplimit.WithLogger(quiet)}, opts...)...)
	}
	serveWith := func(k httplimit.KeyFunc, r *http.Request, want int, opts ...httplimit.Option) error {
		m, err := mw(k, opts...)
		if err != nil {
			return err
		}
		return serveOnce(m.Handler(ok), r, want)
	}
	noAddr := httptest.NewRequest(http.MethodGet, "/", nil)
	noAddr.RemoteAddr = ""
	var nilMW *httplimit.Middleware
	var nilRE *httplimit.RequestError
	var nilCtx context.Context
	lease, err := lim.Acquire(context.Background(), limiter.Request{Entity: "h", Limits: limits, Consume: map[string]int64{"rpm": 1}})
	if err != nil {
		t.Fatal(err)
	}
	calls := []zcall{
		{"New nil limiter", func() error { _, err := httplimit.New(nil, key, httplimit.WithLimits(rpm)); return err }, "limiter"},
		{"New nil key", func() error { _, err := mw(nil); return err }, "key"},
		{"New nil option", func() error { _, err := mw(key, nil); return err }, "ok"},
		{"zero Limiter", func() error {
			m, err := httplimit.New(&limiter.Limiter{}, key, httplimit.WithLimits(rpm), httplimit.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				return err
			}
			return serveOnce(m.Handler(ok), nil, http.StatusInternalServerError)
		}, ""},
		{"WithLogger(nil)", func() error { _, err := mw(key, httplimit.WithLogger(nil)); return err }, "WithLogger"},
		{"WithErrorHandler(nil)", func() error { _, err := mw(key, httplimit.WithErrorHandler(nil)); return err }, "WithErrorHandler"},
		{"WithAdjustTimeout(0)", func() error { _, err := mw(key, httplimit.WithAdjustTimeout(0)); return err }, "WithAdjustTimeout"},
		{"WithAdjustTimeout(-1)", func() error { _, err := mw(key, httplimit.WithAdjustTimeout(-1)); return err }, "WithAdjustTimeout"},
		{"WithCost(nil) alone", func() error { _, err := httplimit.New(lim, key, httplimit.WithCost(nil)); return err }, "WithCost"},
		{"WithLimits zero Limit", func() error { _, err := mw(key, httplimit.WithLimits(limiter.Limit{})); return err }, "Name"},
		{"WithLimits none", func() error { _, err := httplimit.New(lim, key, httplimit.WithLimits()); return err }, "WithCost"},
		{"WithQuotaUnits nil", func() error { _, err := mw(key, httplimit.WithQuotaUnits(nil)); return err }, "ok"},
		{"WithQuotaUnits empty unit", func() error { _, err := mw(key, httplimit.WithQuotaUnits(map[string]string{"rpm": ""})); return err }, "WithQuotaUnits"},
		{"WithPolicy 255", func() error { _, err := mw(key, httplimit.WithPolicy(255)); return err }, "WithPolicy"},
		{"WithAlso(nil)", func() error { return serveWith(key, nil, http.StatusOK, httplimit.WithAlso(nil)) }, "ok"},
		{"ExposeLimits()", func() error { return serveWith(key, nil, http.StatusOK, httplimit.ExposeLimits()) }, "ok"},

		{"nil Middleware Handler", func() error { return serveOnce(nilMW.Handler(ok), nil, http.StatusInternalServerError) }, "ok"},
		{"zero Middleware Handler", func() error {
			return serveOnce((&httplimit.Middleware{}).Handler(ok), nil, http.StatusInternalServerError)
		}, "ok"},
		{"Handler(nil)", func() error {
			m, err := mw(key)
			if err != nil {
				return err
			}
			return serveOnce(m.Handler(nil), nil, http.StatusInternalServerError)
		}, "ok"},
		{"request with no remote addr", func() error { return serveWith(byAddr, noAddr, http.StatusOK) }, "ok"},
		{"key error", func() error {
			return serveWith(func(*http.Request) (string, string, error) { return "", "", errors.New("no key") }, nil, http.StatusBadRequest)
		}, "ok"},
		{"bad entity", func() error {
			return serveWith(func(*http.Request) (string, string, error) { return "a b\x00", "", nil }, nil, http.StatusBadRequest)
		}, "ok"},
		{"nil cost", func() error {
			// the cost function's bug, not the client's: 500, logged
			return serveWith(key, nil, http.StatusInternalServerError, httplimit.WithCost(func(*http.Request) (map[string]int64, error) { return nil, nil }))
		}, "ok"},
		{"negative cost", func() error {
			return serveWith(key, nil, http.StatusBadRequest, httplimit.WithCost(func(*http.Request) (map[string]int64, error) {
				return map[string]int64{"rpm": -1}, nil
			}))
		}, "ok"},
		{"nonsense ReportCost", func() error {
			m, err := mw(key)
			if err != nil {
				return err
			}
			return serveOnce(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				httplimit.ReportCost(r.Context(), nil)
				httplimit.ReportCost(r.Context(), map[string]int64{"": 1, "nope": 2, "rpm": math.MinInt64})
				httplimit.ReportCost(r.Context(), map[string]int64{"rpm": math.MaxInt64})
			})), nil, http.StatusOK)
		}, "ok"},

		{"SetLeaseHeaders nil header", func() error { httplimit.SetLeaseHeaders(nil, lease, nil); return nil }, ""},
		{"SetLeaseHeaders nil lease", func() error { httplimit.SetLeaseHeaders(http.Header{}, nil, nil); return nil }, ""},
		{"SetLeaseHeaders zero lease", func() error { httplimit.SetLeaseHeaders(http.Header{}, &limiter.Lease{}, nil); return nil }, ""},
		{"SetRefusalHeaders nil header", func() error { httplimit.SetRefusalHeaders(nil, &limiter.RateLimitedError{}, nil); return nil }, ""},
		{"SetRefusalHeaders zero error", func() error {
			httplimit.SetRefusalHeaders(http.Header{}, &limiter.RateLimitedError{RetryAfter: math.MaxInt64}, nil)
			return nil
		}, ""},
		{"WriteError nil request", func() error { httplimit.WriteError(httptest.NewRecorder(), nil, errors.New("x")); return nil }, ""},
		{"WriteError nil error", func() error { httplimit.WriteError(httptest.NewRecorder(), nil, nil); return nil }, ""},
		{"WriteError nil RateLimitedError", func() error {
			var rl *limiter.RateLimitedError
			httplimit.WriteError(httptest.NewRecorder(), nil, rl)
			return nil
		}, ""},
		{"WriteError nil RequestError", func() error { httplimit.WriteError(httptest.NewRecorder(), nil, nilRE); return nil }, ""},
		{"nil RequestError.Error", func() error { _ = nilRE.Error(); return nil }, ""},
		{"nil RequestError.Unwrap", func() error { _ = nilRE.Unwrap(); return nil }, ""},
		{"zero RequestError.Error", func() error { _ = (&httplimit.RequestError{}).Error(); return nil }, ""},
		{"ReportCost nil ctx", func() error { httplimit.ReportCost(nilCtx, nil); return nil }, ""},
	}
	zerotest.Run(t, calls)
}
