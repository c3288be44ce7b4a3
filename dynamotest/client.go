package dynamotest

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// NewClient returns an SDK client for a DynamoDB Local at endpoint, built
// from explicit options rather than config.LoadDefaultConfig, so that
// nothing in the environment (AWS_PROFILE, AWS_CA_BUNDLE, a real region)
// leaks into tests. Its transport resends the requests DynamoDB Local
// rejected for a lock timeout (see [LockTimeoutRetries]). optFns are
// applied last (a nil one is skipped).
func NewClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	// Enough idle connections for benchmarks with 32+ goroutines.
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 512, 512
	return dynamodb.New(dynamodb.Options{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		BaseEndpoint: aws.String(strings.TrimRight(endpoint, "/")),
		HTTPClient:   &http.Client{Transport: &lockRetryTransport{base: tr}},
	}, slices.DeleteFunc(slices.Clone(optFns), func(fn func(*dynamodb.Options)) bool { return fn == nil })...)
}

func noRetries(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} }

// lockTimeoutMessage is what DynamoDB Local answers, with HTTP 500
// InternalServerError, when a request waited too long for its internal
// (SQLite) lock, which happens under concurrency on a loaded machine: "This
// action timed out because it too long waiting for a lock. This request will
// succeed in actual DynamoDB API". The request was not applied.
var lockTimeoutMessage = []byte("too long waiting for a lock")

var lockRetries atomic.Int64

// LockTimeoutRetries returns how many requests the clients of this package
// have resent because DynamoDB Local rejected them for a lock timeout.
//
// That 500 is an artifact of the emulator, which says itself that the
// request would succeed on DynamoDB and was not applied. Left visible it
// would fail writes that store/dynamo deliberately does not retry (a 5xx
// leaves a write's outcome unknown), so the transport resends such
// requests, up to 50 times with a short pause. Every other answer,
// InternalServerError included, reaches the SDK unchanged.
func LockTimeoutRetries() int64 { return lockRetries.Load() }

type lockRetryTransport struct {
	base http.RoundTripper
}

func (t *lockRetryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		r := req.Clone(req.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		resp, err := t.base.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusInternalServerError || attempt == 50 {
			return resp, err
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(answer, lockTimeoutMessage) {
			resp.Body = io.NopCloser(bytes.NewReader(answer))
			return resp, nil
		}
		lockRetries.Add(1)
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
		}
	}
}
