package dynamo_test

import (
	"testing"

	"github.com/shardlimit/limiter/dynamotest"
)

// TestMain shares one DynamoDB Local among the tests of the package.
func TestMain(m *testing.M) { dynamotest.Main(m) }
