package httplimit_test

import (
	"context"
	"testing"

	"github.com/shardlimit/limiter/httplimit"
)

// A nil context is no request's: nothing to report to, no lease; no panic.
func TestNilContext(t *testing.T) {
	var ctx context.Context
	if httplimit.ReportCost(ctx, map[string]int64{"tpm": 1}) {
		t.Error("ReportCost(nil ctx) reported true")
	}
	if httplimit.LeaseFrom(ctx) != nil {
		t.Error("LeaseFrom(nil ctx) is not nil")
	}
}
