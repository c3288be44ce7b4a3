package dynamo

import (
	"context"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// singleWriteRetries is the per-call option of PutItem, UpdateItem and
// DeleteItem: the client's retryer, restricted to errors after which
// nothing was applied.
func singleWriteRetries(o *dynamodb.Options) {
	o.Retryer = safeRetryer{retryerV2(o.Retryer)}
}

// safeRetryer retries only what its inner retryer would retry AND what
// certainly changed nothing (throttles, failures to connect). Delays,
// attempt limits and the retry quota are the inner retryer's.
type safeRetryer struct{ aws.RetryerV2 }

func (r safeRetryer) IsErrorRetryable(err error) bool {
	return notApplied(err) && r.RetryerV2.IsErrorRetryable(err)
}

// recordingRetryer is the client's retryer unchanged, noting whether it
// retried after an attempt whose outcome is unknown. TransactWriteItems
// uses it: its retries are idempotent, but after such an attempt a final
// error does not prove that nothing was applied.
type recordingRetryer struct {
	aws.RetryerV2
	ambiguous atomic.Bool
}

// install is the per-call option that puts r in front of the client's
// retryer.
func (r *recordingRetryer) install(o *dynamodb.Options) {
	r.RetryerV2 = retryerV2(o.Retryer)
	o.Retryer = r
}

func (r *recordingRetryer) IsErrorRetryable(err error) bool {
	ok := r.RetryerV2.IsErrorRetryable(err)
	if ok && !notApplied(err) {
		r.ambiguous.Store(true)
	}
	return ok
}

// retryerV2 adapts any retryer (nil means none) to RetryerV2.
func retryerV2(r aws.Retryer) aws.RetryerV2 {
	switch r := r.(type) {
	case nil:
		return v2{aws.NopRetryer{}}
	case aws.RetryerV2:
		return r
	default:
		return v2{r}
	}
}

// v2 adds GetAttemptToken to a Retryer, as the SDK's middleware does.
type v2 struct{ aws.Retryer }

func (r v2) GetAttemptToken(context.Context) (func(error) error, error) {
	return r.GetInitialToken(), nil
}
