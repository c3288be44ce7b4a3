// Command llm-gateway is an example service: an LLM-style completion
// endpoint limited per API key and model, to requests and tokens a minute
// and to a monthly budget in money, per key and per team, with its state
// in DynamoDB. See README.md.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/httplimit"
	"github.com/shardlimit/limiter/store/dynamo"
)

// Every key gets these limits per model: requests and tokens a minute, a
// budget of $5 a calendar month (UTC) in micro-dollars, and at most 10
// requests in flight across every server (a request whose server dies
// holds its slot at most 2.5 minutes). premiumKey gets ten times as much a
// minute and a month, stored in the table, and belongs to team, whose own
// budget of $100 a month and 50 requests in flight its keys share: each
// request charges the key's limits and the team's, all or nothing.
var (
	defaultLimits = []limiter.Limit{limiter.PerMinute("rpm", 10), limiter.PerMinute("tpm", 1_000), monthly("usd", 5_000_000), inFlight(10)}
	premiumLimits = []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10_000), monthly("usd", 50_000_000), inFlight(10)}
	teamLimits    = []limiter.Limit{limiter.PerMinute("rpm", 1_000), limiter.PerMinute("tpm", 100_000), monthly("usd", 100_000_000), inFlight(50)}
)

// inFlight is a cap of n requests in flight; a request's slot is counted
// for 2 minutes at most (and a quarter more when its server died).
func inFlight(n int64) limiter.Limit {
	return limiter.Limit{Name: "inflight", Capacity: n, Window: "concurrent", TTL: 2 * time.Minute}
}

const (
	premiumKey = "sk-premium"
	team       = "team-acme"
	// microDollarsPerToken is the model's price: $2 per million tokens.
	microDollarsPerToken = 2
)

// monthly is a budget of n per calendar month, in UTC.
func monthly(name string, n int64) limiter.Limit {
	return limiter.Limit{Name: name, Capacity: n, Window: "month"}
}

func main() {
	addr := flag.String("addr", "localhost:8080", "address to listen on")
	endpoint := flag.String("dynamodb", "http://localhost:8000", "DynamoDB endpoint; empty for AWS, configured from the environment")
	table := flag.String("table", "rate-limits", "DynamoDB table, created if missing")
	flag.Parse()
	lim, err := setup(context.Background(), *endpoint, *table)
	if err != nil {
		log.Fatal(err)
	}
	h, err := newHandler(lim)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("listening on http://%s", *addr)
	log.Fatal(http.ListenAndServe(*addr, h))
}

// setup provisions the table and returns a limiter on it, with the
// premium key's limits stored.
func setup(ctx context.Context, endpoint, table string) (*limiter.Limiter, error) {
	var opts []func(*config.LoadOptions) error
	if endpoint != "" { // DynamoDB Local takes any credentials
		opts = append(opts, config.WithRegion("us-east-1"),
			config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, err
	}
	client := dynamo.NewClient(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			// DynamoDB Local sends no CRC32 with its errors; the SDK would
			// log a checksum warning for every refused write.
			o.DisableValidateResponseChecksum = true
		}
	})
	if err := dynamo.CreateTable(ctx, client, table); err != nil {
		return nil, err
	}
	st := dynamo.New(client, table)
	lim, err := limiter.New(st, limiter.WithNamespace("llm-gateway"))
	if err != nil {
		return nil, err
	}
	// The gateway stores the premium key's limits itself, for the demo; in
	// production an operator does it (limiterctl, or package admin) with
	// rights the gateway does not need.
	adm, err := admin.New(st, admin.WithNamespace("llm-gateway"), admin.WithLimiter(lim))
	if err != nil {
		return nil, err
	}
	if err := adm.PutLimits(ctx, admin.Scope{Entity: team}, teamLimits); err != nil {
		return nil, err
	}
	if err := adm.PutEntity(ctx, admin.Entity{ID: entityOf(premiumKey), Parent: team, Cascade: true}); err != nil {
		return nil, err
	}
	return lim, adm.PutLimits(ctx, admin.Scope{Entity: entityOf(premiumKey)}, premiumLimits)
}

func newHandler(lim *limiter.Limiter) (http.Handler, error) {
	mw, err := httplimit.New(lim, apiKey, httplimit.WithLimits(defaultLimits...), httplimit.WithCost(estimate),
		httplimit.WithQuotaUnits(map[string]string{"tpm": "tokens", "usd": "micro-usd"}))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/models/{model}/complete", mw.Handler(http.HandlerFunc(complete)))
	return mux, nil
}

// apiKey limits a request as its bearer token on the model in the path.
func apiKey(r *http.Request) (entity, resource string, err error) {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || key == "" {
		return "", "", &httplimit.RequestError{Status: http.StatusUnauthorized, Err: errors.New("send Authorization: Bearer <key>")}
	}
	return entityOf(key), r.PathValue("model"), nil
}

// entityOf hashes an API key into an entity id: ids must match the
// limiter's rule, and a secret has no business in the table.
func entityOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "key-" + hex.EncodeToString(sum[:16])
}

type completion struct {
	Prompt    string `json:"prompt"`
	MaxTokens int64  `json:"max_tokens"`
}

// estimate charges one request, the most tokens it can use (the prompt
// plus max_tokens) and their price. The handler reports the real count,
// and the middleware settles both against the estimate.
func estimate(r *http.Request) (map[string]int64, error) {
	c, err := decode(r)
	if err != nil {
		return nil, err
	}
	most := tokens(c.Prompt) + c.MaxTokens
	return map[string]int64{"rpm": 1, "tpm": most, "usd": most * microDollarsPerToken, "inflight": 1}, nil
}

// decode reads the JSON body and puts it back for the handler.
func decode(r *http.Request) (completion, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	c := completion{MaxTokens: 100}
	if err == nil {
		err = json.Unmarshal(body, &c)
	}
	if err == nil && (c.MaxTokens < 1 || c.MaxTokens > 500) {
		err = errors.New("max_tokens must be between 1 and 500")
	}
	return c, err
}

// tokens counts words, this model's tokens.
func tokens(s string) int64 { return int64(len(strings.Fields(s))) }

// complete is the "model": it echoes the prompt back, at most max_tokens
// words of it, and reports what the call really used before it answers,
// so that the RateLimit field counts it.
func complete(w http.ResponseWriter, r *http.Request) {
	c, _ := decode(r) // the cost function checked it
	words := strings.Fields(c.Prompt)
	out := strings.Join(words[:min(int64(len(words)), c.MaxTokens)], " ")
	used := tokens(c.Prompt) + tokens(out)
	httplimit.ReportCost(r.Context(), map[string]int64{"tpm": used, "usd": used * microDollarsPerToken})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"model": r.PathValue("model"), "text": out, "total_tokens": used})
}
