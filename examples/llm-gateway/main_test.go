package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/httplimit"
)

// The service as its README runs it, on DynamoDB Local: the table is
// provisioned, the headers count down, the real token count and its price
// are charged against the monthly budgets (the key's, and for the premium
// key its team's too), the premium key's stored limits apply, and the
// eleventh request is refused.
func TestServiceOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	table := "llm-gateway-test"
	t.Cleanup(func() {
		_, _ = srv.Client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table})
	})
	lim, err := setup(context.Background(), srv.Endpoint, table)
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHandler(lim)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	post := func(key, body string) *http.Response {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/models/echo-1/complete", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	// Charged 3 + 10 tokens, used 3 + 3.
	resp := post("sk-alice", `{"prompt":"one two three","max_tokens":10}`)
	var out struct {
		TotalTokens int64 `json:"total_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || out.TotalTokens != 6 {
		t.Fatalf("%s %+v %v", resp.Status, out, err)
	}
	if got := resp.Header.Get("RateLimit-Policy"); got != `"rpm";q=10;w=60, "tpm";q=1000;qu="tokens";w=60, "usd";q=5000000;qu="micro-usd";w=2592000, "inflight";q=10;qu="concurrent-requests"` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	// The budget was charged the estimate's price (13 tokens, 26
	// micro-dollars), then settled at the 6 tokens used: 12.
	if usd := budget(resp, "usd"); usd != 5_000_000-12 {
		t.Errorf("usd left %d, want 4999988: RateLimit %q", usd, resp.Header.Get("RateLimit"))
	}
	// The handler reported the 6 tokens it used before it answered: 1000 -
	// 6. What refills meanwhile (1000 tokens a minute, 17 a second) adds a
	// few tokens, more on a slow machine, up to the burst.
	if rpm, tpm := remaining(resp); rpm != 9 || tpm < 994 || tpm > 1000 {
		t.Errorf("RateLimit %q", resp.Header.Get("RateLimit"))
	}
	// 1000 - 6 - 2: each request charged what it used (the second was
	// charged 1 + 100 tokens, its estimate, until it reported 2).
	resp = post("sk-alice", `{"prompt":"again"}`)
	if _, tpm := remaining(resp); tpm < 992 || tpm > 1000 {
		t.Errorf("the second request's RateLimit %q, want tpm r in [992, 1000]", resp.Header.Get("RateLimit"))
	}
	for i := 3; i <= 10; i++ {
		post("sk-alice", `{"prompt":"x","max_tokens":1}`)
	}
	resp = post("sk-alice", `{"prompt":"x","max_tokens":1}`)
	var p httplimit.Problem
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("eleventh request: %s %+v", resp.Status, p)
	}

	resp = post("sk-premium", `{"prompt":"hi"}`)
	if got := resp.Header.Get("RateLimit-Policy"); resp.StatusCode != 200 || got != `"rpm";q=100;w=60, "tpm";q=10000;qu="tokens";w=60, "usd";q=50000000;qu="micro-usd";w=2592000, "inflight";q=10;qu="concurrent-requests", `+
		`"parent/rpm";q=1000;w=60, "parent/tpm";q=100000;qu="tokens";w=60, "parent/usd";q=100000000;qu="micro-usd";w=2592000, `+
		`"parent/inflight";q=50;qu="concurrent-requests"` {
		t.Errorf("premium: %s %q", resp.Status, resp.Header.Get("RateLimit-Policy"))
	}
	// 2 tokens used (the prompt and its echo): 4 micro-dollars, from the
	// key's budget and the team's.
	if key, team := budget(resp, "usd"), budget(resp, "parent/usd"); key != 50_000_000-4 || team != 100_000_000-4 {
		t.Errorf("premium: usd left %d, team's %d; want 49999996 and 99999996: RateLimit %q", key, team, resp.Header.Get("RateLimit"))
	}
	if resp = post("", `{}`); resp.StatusCode != 401 {
		t.Errorf("no key: %s", resp.Status)
	}
	if resp = post("sk-bob", `{"max_tokens":9999}`); resp.StatusCode != 400 {
		t.Errorf("max_tokens 9999: %s", resp.Status)
	}
}

var remainingRE = regexp.MustCompile(`"(rpm|tpm)";r=(\d+);`)

// budget returns the r of a limit in a response's RateLimit field (-1
// when it is not there).
func budget(resp *http.Response, name string) int64 {
	m := regexp.MustCompile(`"` + regexp.QuoteMeta(name) + `";r=(\d+);`).FindStringSubmatch(resp.Header.Get("RateLimit"))
	if m == nil {
		return -1
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// remaining returns the r of rpm and tpm in a response's RateLimit field.
func remaining(resp *http.Response) (rpm, tpm int) {
	for _, m := range remainingRE.FindAllStringSubmatch(resp.Header.Get("RateLimit"), -1) {
		n, _ := strconv.Atoi(m[2])
		if m[1] == "rpm" {
			rpm = n
		} else {
			tpm = n
		}
	}
	return rpm, tpm
}
