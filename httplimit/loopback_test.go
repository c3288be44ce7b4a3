package httplimit_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/httplimit"
)

// sfItem is one item of a RateLimit or RateLimit-Policy field.
type sfItem struct {
	name    string
	params  map[string]int64  // the Integer parameters
	strings map[string]string // the String ones
}

var sfItemRE = regexp.MustCompile(`^"([^"\\]*)"((?:;[a-z][a-z0-9_.*-]*=(?:[0-9]{1,15}|"[^"\\]*"))*)$`)

// parseList parses a structured-field list of string items with integer
// and string parameters (without escapes), the shape both fields have; it
// fails t on anything else.
func parseList(t testing.TB, field string) []sfItem {
	t.Helper()
	var out []sfItem
	for _, member := range strings.Split(field, ",") {
		m := sfItemRE.FindStringSubmatch(strings.TrimSpace(member))
		if m == nil {
			t.Fatalf("not a list of string items with integer parameters: %q", field)
		}
		it := sfItem{name: m[1], params: map[string]int64{}, strings: map[string]string{}}
		for _, p := range strings.Split(m[2], ";")[1:] {
			k, v, _ := strings.Cut(p, "=")
			if s, ok := strings.CutPrefix(v, `"`); ok {
				it.strings[k] = strings.TrimSuffix(s, `"`)
			} else {
				it.params[k], _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out = append(out, it)
	}
	return out
}

// A real client against a real server on loopback: the fields parse, the
// remaining counts down, and the refusal carries Retry-After and a problem
// the client can decode.
func TestRealClientOnLoopback(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	srv := httptest.NewServer(newMiddleware(t, lim).Handler(ok))
	defer srv.Close()
	post := func() *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/gpt-4", strings.NewReader(`{"prompt":"hi"}`))
		req.Header.Set("X-API-Key", "key-1")
		req.Header.Set("X-Tokens", "200")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i := int64(1); i <= 3; i++ {
		resp := post()
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %s", i, resp.Status)
		}
		pol := parseList(t, resp.Header.Get("RateLimit-Policy"))
		cur := parseList(t, resp.Header.Get("RateLimit"))
		if len(pol) != 2 || len(cur) != 2 {
			t.Fatalf("request %d: %v %v", i, pol, cur)
		}
		byName := map[string]sfItem{}
		for _, it := range cur {
			byName[it.name] = it
		}
		if r := byName["rpm"].params["r"]; r != 3-i {
			t.Errorf("request %d: rpm r=%d, want %d", i, r, 3-i)
		}
		if r := byName["tpm"].params["r"]; r != 1000-200*i {
			t.Errorf("request %d: tpm r=%d", i, r)
		}
		for _, it := range pol {
			if it.params["q"] <= 0 || it.params["w"] != 60 {
				t.Errorf("policy item %+v", it)
			}
		}
	}
	resp := post()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra != 20 {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	var p httplimit.Problem
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.Status != 429 || p.RetryAfter != int64(ra) || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "rpm" {
		t.Fatalf("%+v", p)
	}
	for _, it := range parseList(t, resp.Header.Get("RateLimit")) {
		if it.params["t"] > int64(ra) {
			t.Errorf("%s: t=%d after Retry-After %d", it.name, it.params["t"], ra)
		}
	}
}

// Values the fields cannot carry as they are: negative remaining (debt),
// and quotas of fast, sub-second limits.
func TestFieldValuesStayValid(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	fast := limiter.Limit{Name: "burst.x", Capacity: 5, Refill: 5, Period: 100 * time.Millisecond} // 5 per 100 ms
	mw, err := httplimit.New(lim, apiKey, httplimit.WithLimits(fast, tpm),
		httplimit.WithCost(func(*http.Request) (map[string]int64, error) { return map[string]int64{"burst.x": 1, "tpm": 10}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httplimit.ReportCost(r.Context(), map[string]int64{"tpm": 5000}) // debt
	}))
	serve(h, "key-1", 0)
	w := serve(h, "key-1", 0)
	pol := parseList(t, w.Header().Get("RateLimit-Policy"))
	cur := parseList(t, w.Header().Get("RateLimit"))
	for _, it := range pol {
		if it.name == "burst.x" && (it.params["q"] != 50 || it.params["w"] != 1) {
			t.Errorf("sub-second limit: %+v, want q=50;w=1", it)
		}
	}
	for _, it := range cur {
		if it.params["r"] < 0 {
			t.Errorf("%+v", it)
		}
	}
}

// The handler's writer keeps what the server's can do: hijacking the
// connection, and the ResponseController's calls (through Unwrap).
func TestHandlerWriterKeepsItsAbilities(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	srv := httptest.NewServer(newMiddleware(t, lim).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/deadline" {
			if err := http.NewResponseController(w).SetWriteDeadline(time.Time{}); err != nil {
				t.Error(err)
			}
			return
		}
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		rw.Flush()
	})))
	defer srv.Close()
	for _, path := range []string{"/hijack", "/deadline"} {
		req, _ := http.NewRequest("POST", srv.URL+path, nil)
		req.Header.Set("X-API-Key", "key-1")
		req.Header.Set("X-Tokens", "1")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		hijacked := path == "/hijack"
		if resp.StatusCode != 200 || (string(body) == "hijacked") != hijacked || (resp.Header.Get("RateLimit") == "") != hijacked {
			t.Errorf("%s: %s %q, RateLimit %q", path, resp.Status, body, resp.Header.Get("RateLimit"))
		}
	}
}
