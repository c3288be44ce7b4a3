package dynamo

import (
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Client settings for a limiter on a request path. The SDK's defaults are
// made for batch jobs: up to 3 attempts with a random pause of up to 2 s
// before the first retry and 4 s before the second, and no timeout on an
// attempt at all (the dialer alone gives up after 30 s). With them an
// acquire against an endpoint that refuses connections takes seconds to
// fail, and one against an endpoint that never answers waits for the
// caller's deadline.
const (
	// MaxAttempts is how many attempts [Retryer] makes of one call, the
	// first included.
	MaxAttempts = 3
	// AttemptTimeout bounds each attempt of a call made through a client
	// configured by [ClientOptions]: connecting, sending and reading the
	// whole answer. DynamoDB answers in milliseconds; an attempt that takes
	// a second is lost, and the retryer's next attempt is the better bet.
	AttemptTimeout = time.Second
	// MinBackoff and MaxBackoff bound the pause before a retry: full
	// jitter over min(MaxBackoff, MinBackoff << attempt).
	MinBackoff = 25 * time.Millisecond
	MaxBackoff = 200 * time.Millisecond
)

// Retryer returns a new standard retryer with the settings above: 3
// attempts, full-jitter backoff from 25 ms capped at 200 ms, and the SDK's
// retry quota (a circuit breaker shared by the calls of one client, see
// docs/dynamodb.md). Which errors are retried is still decided per call by
// this package (see the package documentation): a single-item write is
// retried only when nothing was applied.
//
// Call it once per client: each retryer has its own retry quota.
func Retryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = MaxAttempts
		o.MaxBackoff = MaxBackoff
		// Set explicitly: with MaxBackoff under a second the SDK's legacy
		// backoff would return exactly MaxBackoff every time, and throttled
		// clients would retry in lockstep.
		o.Backoff = retry.BackoffDelayerFunc(backoff)
	})
}

func backoff(attempt int, _ error) (time.Duration, error) {
	d := MaxBackoff
	if attempt >= 0 && attempt < 8 {
		d = min(MinBackoff<<attempt, MaxBackoff)
	}
	return rand.N(d) + 1, nil // the global source: jitter, not simulation
}

// ClientOptions applies the limiter's client settings to the options of a
// DynamoDB client: a [Retryer], and an [AttemptTimeout] on the client's
// HTTP client when it is the SDK's own (an *awshttp.BuildableClient, which
// keeps its transport settings, such as a custom CA bundle) without a
// timeout. A custom HTTP client is left as it is: give it a timeout of its
// own.
//
// With these settings a call fails within about MaxAttempts *
// AttemptTimeout plus two backoffs (3.4 s at most), and at once against an
// endpoint that refuses connections. Pass it to dynamodb.NewFromConfig or
// dynamodb.New; options passed after it win. A context deadline on each
// acquire still bounds the whole call.
func ClientOptions(o *dynamodb.Options) {
	if o == nil {
		return
	}
	o.Retryer = Retryer()
	switch c := o.HTTPClient.(type) {
	case nil:
		o.HTTPClient = awshttp.NewBuildableClient().WithTimeout(AttemptTimeout)
	case *awshttp.BuildableClient:
		if c.GetTimeout() == 0 {
			o.HTTPClient = c.WithTimeout(AttemptTimeout)
		}
	}
}

// NewClient returns a DynamoDB client for the limiter: the SDK's client
// for cfg with [ClientOptions] applied, then optFns (a nil one is skipped).
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	st := dynamo.New(dynamo.NewClient(cfg), "rate-limits")
func NewClient(cfg aws.Config, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	fns := []func(*dynamodb.Options){ClientOptions}
	for _, fn := range optFns {
		if fn != nil {
			fns = append(fns, fn)
		}
	}
	return dynamodb.NewFromConfig(cfg, fns...)
}
