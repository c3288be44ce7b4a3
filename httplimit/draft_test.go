package httplimit_test

import (
	"context"
	"github.com/shardlimit/limiter/admin"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/httplimit"
)

// costOf charges n of each named limit.
func costOf(n int64, names ...string) httplimit.Option {
	return httplimit.WithCost(func(*http.Request) (map[string]int64, error) {
		c := make(map[string]int64, len(names))
		for _, name := range names {
			c[name] = n
		}
		return c, nil
	})
}

// withParent makes key-1 cascade to project-1, which has limits.
func withParent(t testing.TB, adm *admin.Admin, limits []limiter.Limit) {
	t.Helper()
	ctx := context.Background()
	must(t, adm.PutEntity(ctx, admin.Entity{ID: "project-1"}))
	must(t, adm.PutEntity(ctx, admin.Entity{ID: "key-1", Parent: "project-1", Cascade: true}))
	must(t, adm.PutLimits(ctx, admin.Scope{Entity: "project-1"}, limits))
}

func mustNew(t testing.TB, lim *limiter.Limiter, opts ...httplimit.Option) *httplimit.Middleware {
	t.Helper()
	mw, err := httplimit.New(lim, apiKey, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// The field values of draft-ietf-httpapi-ratelimit-headers-11, byte for
// byte, from limits that produce them. The draft's token-bucket-free
// examples (fixed windows whose t is the end of the window) have no
// equivalent and are left out; so is "pk", which the middleware does not
// send.
func TestDraftExamples(t *testing.T) {
	per := func(name string, n int64, d time.Duration) limiter.Limit {
		return limiter.Limit{Name: name, Capacity: n, Refill: n, Period: d}
	}
	for _, c := range []struct {
		section string
		opts    []httplimit.Option
		field   string
		want    string
	}{
		// 3.2: a time window.
		{"3.2", []httplimit.Option{httplimit.WithLimits(per("default", 100, 10*time.Second))},
			"RateLimit-Policy", `"default";q=100;w=10`},
		// 3.2: two policies. The draft writes them without the space after
		// the comma that structured-field serialization (RFC 9651, 4.1.1)
		// puts there; parsers read both.
		{"3.2", []httplimit.Option{httplimit.WithLimits(per("permin", 50, time.Minute), per("perhr", 1000, time.Hour))},
			"RateLimit-Policy", strings.ReplaceAll(`"permin";q=50;w=60,"perhr";q=1000;w=3600`, `,"`, `, "`)},
		// 3.2: a quota unit (the draft's example also has a "pk").
		{"3.2", []httplimit.Option{httplimit.WithLimits(per("peruser", 65535, 10*time.Second)),
			httplimit.WithQuotaUnits(map[string]string{"peruser": httplimit.UnitContentBytes})},
			"RateLimit-Policy", strings.TrimSuffix(`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, `;pk=:sdfjLJUOUH==:`)},
		// B.3.1: an hourly and a daily policy, in the order given.
		{"B.3.1", []httplimit.Option{httplimit.WithLimits(per("hour", 1000, time.Hour), per("day", 5000, 24*time.Hour))},
			"RateLimit-Policy", `"hour";q=1000;w=3600, "day";q=5000;w=86400`},
		// 4.2: 50 units available, the next in 30 s (100 units, one every 30 s).
		{"4.2", []httplimit.Option{httplimit.WithLimits(per("default", 100, 3000*time.Second)), costOf(50, "default")},
			"RateLimit", `"default";r=50;t=30`},
		// B.1.1: quota exhausted for the next 50 seconds.
		{"B.1.1", []httplimit.Option{httplimit.WithLimits(per("default", 1, 50*time.Second))},
			"RateLimit", `"default";r=0;t=50`},
	} {
		lim, _ := newLimiter(t, nil)
		w := serve(mustNew(t, lim, c.opts...).Handler(ok), "key-1", 0)
		if got := w.Header().Get(c.field); w.Code != 200 || got != c.want {
			t.Errorf("%s: %d %s: %s, want %s", c.section, w.Code, c.field, got, c.want)
		}
	}

	// B.1.4: a throttled response, its quota back in 5 s. The draft's
	// Retry-After is a date 5 s after the Date; the middleware sends the
	// seconds.
	lim, _ := newLimiter(t, nil)
	h := mustNew(t, lim, httplimit.WithLimits(per("default", 1, 5*time.Second))).Handler(ok)
	serve(h, "key-1", 0)
	w := serve(h, "key-1", 0)
	if got := w.Header().Get("RateLimit"); w.Code != 429 || got != `"default";r=0;t=5` || w.Header().Get("Retry-After") != "5" {
		t.Errorf("B.1.4: %d RateLimit %s, Retry-After %s", w.Code, got, w.Header().Get("Retry-After"))
	}
	if p := problemOf(t, w); p.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" || !slices.Equal(p.ViolatedPolicies, []string{"default"}) {
		t.Errorf("B.1.4: %+v", p)
	}
}

// A 60-a-minute key emptied gets its next request in a second, and the
// fields say so: t is the time until more is available, not until the
// bucket is full again.
func TestEmptiedKeyWaitsOneSecond(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	h := mustNew(t, lim, httplimit.WithLimits(limiter.PerMinute("rpm", 60)), costOf(60, "rpm")).Handler(ok)
	if w := serve(h, "key-1", 0); w.Code != 200 || w.Header().Get("RateLimit") != `"rpm";r=0;t=1` {
		t.Fatalf("%d RateLimit %s, want r=0;t=1", w.Code, w.Header().Get("RateLimit"))
	}
	h = mustNew(t, lim, httplimit.WithLimits(limiter.PerMinute("rpm", 60))).Handler(ok)
	w := serve(h, "key-1", 0)
	if w.Code != 429 || w.Header().Get("RateLimit") != `"rpm";r=0;t=1` || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("%d RateLimit %s, Retry-After %s", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
}

// A limit of tokens says so; requests, the default, need no "qu"; a
// parent's limit has the unit of its name.
func TestTokenLimitsCarryTheirUnit(t *testing.T) {
	lim, adm, _ := newPlanes(t)
	ctx := context.Background()
	withParent(t, adm, limits)
	h := newMiddleware(t, lim, httplimit.WithQuotaUnits(map[string]string{"tpm": "tokens", "rpm": httplimit.UnitRequests})).Handler(ok)
	serve(h, "key-1", 10) // creates the buckets: no state yet
	w := serve(h, "key-1", 10)
	want := `"rpm";q=3;w=60, "tpm";q=1000;qu="tokens";w=60, "parent/rpm";q=3;w=60, "parent/tpm";q=1000;qu="tokens";w=60`
	if got := w.Header().Get("RateLimit-Policy"); got != want {
		t.Errorf("RateLimit-Policy %s, want %s", got, want)
	}
	serve(h, "key-1", 10)
	w = serve(h, "key-1", 10) // refused
	if got := w.Header().Get("RateLimit-Policy"); w.Code != 429 || got != `"rpm";q=3;w=60, "tpm";q=1000;qu="tokens";w=60` {
		t.Errorf("refusal: %d RateLimit-Policy %s", w.Code, got)
	}

	h2 := http.Header{}
	lease, err := lim.Acquire(ctx, limiter.Request{Entity: "key-2", Resource: "r", Limits: limits, Consume: map[string]int64{"rpm": 1, "tpm": 1}})
	must(t, err)
	httplimit.SetLeaseHeaders(h2, lease, map[string]string{"tpm": "tokens"})
	if got := h2.Get("RateLimit-Policy"); got != `"rpm";q=3;w=60, "tpm";q=1000;qu="tokens";w=60` {
		t.Errorf("SetLeaseHeaders: %s", got)
	}

	for _, bad := range []string{"", "Tokens", "to ken", "9s", `a"b`, strings.Repeat("x", 65)} {
		if mw, err := httplimit.New(lim, apiKey, httplimit.WithLimits(limits...), httplimit.WithQuotaUnits(map[string]string{"tpm": bad})); err == nil || mw != nil || !strings.Contains(err.Error(), `WithQuotaUnits: the unit of "tpm"`) {
			t.Errorf("unit %q: %v", bad, err)
		}
	}
}

// The items keep one order on every answer, admitted or refused, whatever
// each limit has left and whatever order the maps are built in: the
// limits' order in WithLimits (here not name order), then the parent's.
func TestOrderIsStable(t *testing.T) {
	lim, adm, clock := newPlanes(t)
	withParent(t, adm, limits)
	rnd := rand.New(rand.NewPCG(1, 2))
	mw := mustNew(t, lim, httplimit.WithLimits(tpm, rpm), httplimit.WithQuotaUnits(map[string]string{"tpm": "tokens"}),
		httplimit.WithCost(func(*http.Request) (map[string]int64, error) {
			c := map[string]int64{}
			for _, i := range rnd.Perm(2) { // the map built in a shuffled order
				c[[]string{"rpm", "tpm"}[i]] = 1 + rnd.Int64N([]int64{2, 400}[i])
			}
			return c, nil
		}))
	h := mw.Handler(ok)
	want := []string{"tpm", "rpm", "parent/tpm", "parent/rpm"}
	codes := map[int]int{}
	for i := 0; i < 50; i++ {
		w := serve(h, "key-1", 0)
		clock.Add(time.Duration(rnd.Int64N(30_000)) * time.Millisecond)
		codes[w.Code]++
		if w.Header().Get("RateLimit") == "" {
			continue // the first request: the buckets were created, no state
		}
		var pol, cur []string
		for _, it := range parseList(t, w.Header().Get("RateLimit-Policy")) {
			pol = append(pol, it.name)
		}
		for _, it := range parseList(t, w.Header().Get("RateLimit")) {
			cur = append(cur, it.name)
		}
		if w.Code == 200 && (!slices.Equal(pol, want) || !slices.Equal(cur, want)) {
			t.Fatalf("response %d: %v and %v, want %v", i, pol, cur, want)
		}
		if w.Code == 429 && (!slices.Equal(pol, cur) || !slices.Equal(pol, want[:2]) && !slices.Equal(pol, want[2:])) {
			t.Fatalf("refusal %d: %v and %v", i, pol, cur)
		}
	}
	if codes[200] < 10 || codes[429] < 10 {
		t.Errorf("answers %v: want both kinds", codes)
	}
}

// The fields of an admitted request show the cost the handler reported
// before it answered; one reported after the answer started cannot reach
// them.
func TestFieldsShowTheReportedCost(t *testing.T) {
	for _, c := range []struct {
		name    string
		handler func(w http.ResponseWriter, r *http.Request)
		want    string
	}{
		{"reported, then written", func(w http.ResponseWriter, r *http.Request) {
			httplimit.ReportCost(r.Context(), map[string]int64{"tpm": 500})
			w.WriteHeader(201)
		}, `"rpm";r=2;t=20, "tpm";r=500;t=1`},
		{"reported, nothing written", func(w http.ResponseWriter, r *http.Request) {
			httplimit.ReportCost(r.Context(), map[string]int64{"tpm": 20})
		}, `"rpm";r=2;t=20, "tpm";r=980;t=1`},
		{"reported, then flushed", func(w http.ResponseWriter, r *http.Request) {
			httplimit.ReportCost(r.Context(), map[string]int64{"tpm": 0, "rpm": 0}) // refunded to full
			w.(http.Flusher).Flush()
		}, `"rpm";r=3;t=20, "tpm";r=1000;t=1`},
		{"written, then reported", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("ok"))
			httplimit.ReportCost(r.Context(), map[string]int64{"tpm": 500})
		}, `"rpm";r=2;t=20, "tpm";r=900;t=1`},
	} {
		lim, _ := newLimiter(t, nil)
		w := serve(newMiddleware(t, lim).Handler(http.HandlerFunc(c.handler)), "key-1", 100)
		if got := w.Header().Get("RateLimit"); got != c.want {
			t.Errorf("%s: %d RateLimit %s, want %s", c.name, w.Code, got, c.want)
		}
	}
}
