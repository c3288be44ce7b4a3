package httplimit_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/httplimit"
	"github.com/shardlimit/limiter/store/dynamo"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// End to end on DynamoDB Local: a real client, a real server, the real
// backend. Admissions count down, the refusal is a problem, a reported
// cost reaches the table, and a stored override shows in the policy.
func TestEndToEndOnDynamoDBLocal(t *testing.T) {
	st := dynamotest.Start(t).NewStore(t)
	lim, _ := newLimiter(t, st)
	h := newMiddleware(t, lim).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httplimit.ReportCost(r.Context(), map[string]int64{"tpm": 250}) // estimated 100
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(key string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/gpt-4", nil)
		req.Header.Set("X-API-Key", key)
		req.Header.Set("X-Tokens", "100")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	var last *http.Response
	for i := 0; i < 3; i++ {
		if last = get("key-1"); last.StatusCode != 200 {
			t.Fatalf("request %d: %s", i+1, last.Status)
		}
	}
	// The third request saw the first two at their real cost (250 each)
	// and its own, reported before the handler answered: 1000 - 750.
	if got := last.Header.Get("RateLimit"); got != `"rpm";r=0;t=20, "tpm";r=250;t=1` {
		t.Errorf("RateLimit %q", got)
	}
	resp := get("key-1")
	var p httplimit.Problem
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "20" {
		t.Fatalf("%s, Retry-After %s: %+v %v", resp.Status, resp.Header.Get("Retry-After"), p, err)
	}
	if p.Type != httplimit.ProblemTypeQuotaExceeded || strings.Join(p.ViolatedPolicies, ",") != "rpm" {
		t.Errorf("%+v", p)
	}
	states, err := lim.Status(context.Background(), "key-1", "gpt-4", limits)
	if err != nil {
		t.Fatal(err)
	}
	if states[1].Remaining != 250 {
		t.Errorf("tpm %d left in the table, want 250 (three requests of 250)", states[1].Remaining)
	}

	// A stored override for another key: its policy shows it.
	adm, err := admin.New(st, admin.WithLimiter(lim))
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.PutLimits(context.Background(), admin.Scope{Entity: "key-2"},
		[]limiter.Limit{limiter.PerMinute("rpm", 600), limiter.PerMinute("tpm", 100_000)}); err != nil {
		t.Fatal(err)
	}
	resp = get("key-2")
	if got := resp.Header.Get("RateLimit-Policy"); resp.StatusCode != 200 || got != `"rpm";q=600;w=60, "tpm";q=100000;w=60` {
		t.Errorf("%s: RateLimit-Policy %q", resp.Status, got)
	}
}

// DynamoDB down (nothing listens on the endpoint): fail-closed answers 503
// with a problem, fail-open lets the request through; neither waits for
// the SDK's default backoff (dynamo.NewClient).
func TestDynamoDBDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close()
	client := dynamo.NewClient(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	st := dynamo.New(client, "rate-limits")
	quiet := limiter.WithLogger(slog.New(slog.DiscardHandler))

	closed, _ := newLimiter(t, st, quiet)
	w := serve(newMiddleware(t, closed).Handler(ok), "key-1", 1)
	if p := problemOf(t, w); w.Code != 503 || p.Title != "Service Unavailable" || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("fail-closed: %d %+v", w.Code, p)
	}
	open, _ := newLimiter(t, st, quiet, limiter.WithPolicy(limiter.FailOpen))
	if w := serve(newMiddleware(t, open).Handler(ok), "key-1", 1); w.Code != 200 || w.Header().Get("RateLimit") != "" {
		t.Fatalf("fail-open: %d %v", w.Code, w.Header())
	}
}
