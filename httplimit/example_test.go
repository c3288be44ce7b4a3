package httplimit_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/httplimit"
	"github.com/shardlimit/limiter/store/memsim"
)

// An LLM endpoint limited per API key and model: 2 requests and 1,000
// tokens a minute. Each request is charged an estimate of 300 tokens; the
// handler reports the real count before it answers, so the RateLimit field
// shows it, and the middleware adjusts by the difference after the handler
// returns. The third request is refused: "t" says when the next request
// fits, 30 s, not when the limit is full again.
func Example() {
	// memsim and a fixed clock keep the example reproducible; in
	// production: dynamo.New(dynamo.NewClient(cfg), "rate-limits").
	clock := memsim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim, _ := limiter.New(memsim.New(memsim.WithClock(clock)), limiter.WithClock(clock))

	key := func(r *http.Request) (entity, resource string, err error) {
		return r.Header.Get("X-API-Key"), r.PathValue("model"), nil
	}
	cost := func(r *http.Request) (map[string]int64, error) {
		return map[string]int64{"rpm": 1, "tpm": 300}, nil
	}
	mw, err := httplimit.New(lim, key,
		httplimit.WithLimits(limiter.PerMinute("rpm", 2), limiter.PerMinute("tpm", 1_000)),
		httplimit.WithCost(cost),
		httplimit.WithQuotaUnits(map[string]string{"tpm": "tokens"}))
	if err != nil {
		panic(err)
	}
	chat := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// ... call the model; it used 120 tokens ...
		httplimit.ReportCost(r.Context(), map[string]int64{"tpm": 120})
		fmt.Fprintln(w, "hello")
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/{model}/chat", mw.Handler(chat))

	for i := 1; i <= 3; i++ {
		req := httptest.NewRequest("POST", "/v1/gpt-4/chat", nil)
		req.Header.Set("X-API-Key", "key-1")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if i == 1 {
			fmt.Println("RateLimit-Policy:", w.Header().Get("RateLimit-Policy"))
		}
		fmt.Println(w.Code, "RateLimit:", w.Header().Get("RateLimit"))
		if w.Code == http.StatusTooManyRequests {
			var p httplimit.Problem
			_ = json.Unmarshal(w.Body.Bytes(), &p)
			fmt.Println("Retry-After:", w.Header().Get("Retry-After"))
			fmt.Println(p.Detail)
		}
	}
	// Output:
	// RateLimit-Policy: "rpm";q=2;w=60, "tpm";q=1000;qu="tokens";w=60
	// 200 RateLimit: "rpm";r=1;t=30, "tpm";r=880;t=1
	// 200 RateLimit: "rpm";r=0;t=30, "tpm";r=760;t=1
	// 429 RateLimit: "rpm";r=0;t=30, "tpm";r=760;t=1
	// Retry-After: 30
	// Rate limit exceeded: rpm (requested 1, remaining 0); retry after 30 s.
}
