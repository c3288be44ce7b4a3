package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/httplimit"
)

// A gateway charges each request's model and "all-models" (stored: 2
// requests a minute): the RateLimit fields show both resources, the
// other's limits named "all-models/NAME"; when all-models is spent the
// request is refused and the model is not charged.
func TestWithAlsoChargesEveryResource(t *testing.T) {
	lim, adm, _ := newPlanes(t)
	ctx := context.Background()
	if err := adm.PutLimits(ctx, admin.Scope{Resource: "all-models"}, []limiter.Limit{limiter.PerMinute("rpm", 2)}); err != nil {
		t.Fatal(err)
	}
	allModels := func(*http.Request) ([]string, error) { return []string{"all-models"}, nil }
	h := newMiddleware(t, lim, httplimit.WithAlso(allModels)).Handler(ok)
	w := serve(h, "key-1", 100)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	for k, v := range map[string]string{
		"RateLimit-Policy": `"rpm";q=3;w=60, "tpm";q=1000;w=60, "all-models/rpm";q=2;w=60, "all-models/tpm";q=1000;w=60`,
		"RateLimit":        `"rpm";r=2;t=20, "tpm";r=900;t=1, "all-models/rpm";r=1;t=30, "all-models/tpm";r=900;t=1`,
	} {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if w := serve(h, "key-1", 100); w.Code != 200 {
		t.Fatalf("second request: %d", w.Code)
	}
	w = serve(h, "key-1", 100)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("RateLimit") != `"rpm";r=0;t=30, "tpm";r=800;t=1` {
		t.Fatalf("third request: %d, RateLimit %q; want 429 with all-models' state", w.Code, w.Header().Get("RateLimit"))
	}
	st, err := lim.Status(ctx, "key-1", "gpt-4", limits)
	if err != nil || st[0].Remaining != 1 {
		t.Fatalf("gpt-4 status %+v, %v: want 1 rpm left (the refused request charged nothing)", st, err)
	}
}

// The resources are the client's input: an error of the function, or a
// resource named twice, is a 400.
func TestWithAlsoBadResourcesAre400(t *testing.T) {
	lim, _ := newLimiter(t, nil)
	for name, f := range map[string]func(*http.Request) ([]string, error){
		"error":        func(*http.Request) ([]string, error) { return nil, errors.New("unknown model family") },
		"twice":        func(*http.Request) ([]string, error) { return []string{"gpt-4"}, nil },
		"invalid name": func(*http.Request) ([]string, error) { return []string{"-x"}, nil },
	} {
		w := serve(newMiddleware(t, lim, httplimit.WithAlso(f)).Handler(ok), "key-1", 100)
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, w.Code, w.Body)
		}
	}
}
