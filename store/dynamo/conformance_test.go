package dynamo_test

import (
	"testing"

	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
	"github.com/shardlimit/limiter/store/storetest"
)

// TestConformance runs the store conformance suite against DynamoDB Local,
// with a fresh table for every case.
func TestConformance(t *testing.T) {
	srv := dynamotest.Start(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return dynamo.New(srv.Client, srv.NewTable(t))
	})
}
