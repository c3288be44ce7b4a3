package memsim_test

import (
	"testing"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
	"github.com/shardlimit/limiter/store/storetest"
)

// TestConformance runs the suite every backend passes; store/dynamo runs
// the same one against DynamoDB Local.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memsim.New() })
}
