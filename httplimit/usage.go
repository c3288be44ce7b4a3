package httplimit

import (
	"context"
	"maps"
	"sync"

	"github.com/shardlimit/limiter"
)

// usage is what the middleware keeps of an admitted request: the lease,
// what it charged, and the real cost the handler reported.
type usage struct {
	lease   *limiter.Lease
	charged map[string]int64

	mu     sync.Mutex
	actual map[string]int64
}

type usageKey struct{}

func usageFrom(ctx context.Context) *usage {
	if ctx == nil {
		return nil
	}
	u, _ := ctx.Value(usageKey{}).(*usage)
	return u
}

// ReportCost tells the middleware what the request really cost, in tokens
// per limit name: after the handler returns, the middleware adjusts the
// lease by the difference from what it charged (a larger cost charges
// more, a smaller one returns tokens, never more than the request was
// charged: a cost below zero counts as zero). A later report of the same
// name replaces the earlier one; names not reported keep the charge. A cost
// reported before the handler starts its answer shows in the RateLimit
// field (see the package documentation). It is safe
// to call from any goroutine while the handler runs, and reports false
// when ctx did not come through the middleware (or the request was let
// through unlimited, or ctx is nil).
//
//	resp, err := callModel(r.Context(), prompt)
//	httplimit.ReportCost(r.Context(), map[string]int64{"tpm": resp.Usage.TotalTokens})
func ReportCost(ctx context.Context, cost map[string]int64) bool {
	u := usageFrom(ctx)
	if u == nil {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.actual == nil {
		u.actual = make(map[string]int64, len(cost))
	}
	maps.Copy(u.actual, cost)
	return true
}

// LeaseFrom returns the lease the middleware acquired for the request, or
// nil (also for a nil ctx). A handler may end it itself (Rollback when the work the tokens paid
// for failed, returning the whole charge); the middleware then neither
// adjusts nor commits it.
func LeaseFrom(ctx context.Context) *limiter.Lease {
	if u := usageFrom(ctx); u != nil {
		return u.lease
	}
	return nil
}

// delta returns, per reported limit, the reported cost minus the charge.
func (u *usage) delta() map[string]int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	var d map[string]int64
	for name, n := range u.actual {
		if x := n - u.charged[name]; x != 0 {
			if d == nil {
				d = make(map[string]int64, len(u.actual))
			}
			d[name] = x
		}
	}
	return d
}
