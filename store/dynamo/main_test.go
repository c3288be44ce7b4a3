package dynamo_test

import (
	"testing"

	"github.com/shardlimit/limiter/internal/dynamolocal"
)

// TestMain shares one DynamoDB Local among the tests of the package.
func TestMain(m *testing.M) { dynamolocal.Main(m) }
