// Package dynamolocal is the repository's name for [dynamotest], the
// DynamoDB Local harness the limiter's own tests use (and its users may
// use for theirs). It only forwards: see package dynamotest.
package dynamolocal

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardlimit/limiter/dynamotest"
)

// Server is a running DynamoDB Local.
type Server = dynamotest.Server

// Credentials and region of the clients of this package.
const (
	AccessKeyID     = dynamotest.AccessKeyID
	SecretAccessKey = dynamotest.SecretAccessKey
	Region          = dynamotest.Region
)

// Main runs the tests of a package with one shared server.
func Main(m *testing.M) { dynamotest.Main(m) }

// Start returns a running server, or skips t (fails it when CI=true).
func Start(t testing.TB) *Server {
	t.Helper()
	return dynamotest.Start(t)
}

// NewClient returns an SDK client for a DynamoDB Local at endpoint.
func NewClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamotest.NewClient(endpoint, optFns...)
}

// LockTimeoutRetries returns how many requests were resent for a lock
// timeout of DynamoDB Local.
func LockTimeoutRetries() int64 { return dynamotest.LockTimeoutRetries() }

// Launch starts a DynamoDB Local outside a test; see dynamotest.Launch.
func Launch() (*Server, error) { return dynamotest.Launch() }
