package main

import (
	"context"
	"errors"
	"io"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/shardlimit/limiter/store/dynamo"
)

// limiterctl's client has the limiter's settings (dynamo.NewClient), not
// the SDK's seconds-long backoffs and absent timeouts: against a refused
// loopback port a call makes dynamo.MaxAttempts attempts, each pause is at
// most dynamo.MaxBackoff and each attempt at most dynamo.AttemptTimeout.
func TestRefusedEndpointFailsFast(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_PROFILE", "")
	c := newCmdCtx(context.Background(), io.Discard, io.Discard)
	c.endpoint = "http://127.0.0.1:1"
	client, err := c.dynamo()
	if err != nil {
		t.Fatal(err)
	}
	o := client.Options()
	if hc, ok := o.HTTPClient.(*awshttp.BuildableClient); !ok || hc.GetTimeout() != dynamo.AttemptTimeout {
		t.Errorf("HTTP client %T: want the SDK's with a timeout of %v", o.HTTPClient, dynamo.AttemptTimeout)
	}
	refused := errors.New("connection refused")
	for range 50 {
		if d, err := o.Retryer.RetryDelay(8, refused); err != nil || d > dynamo.MaxBackoff {
			t.Fatalf("a retry pauses %v (%v), want at most %v", d, err, dynamo.MaxBackoff)
		}
	}

	attempts := 0
	count := func(s *middleware.Stack) error {
		return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("countAttempts",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				attempts++
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	}
	_, err = client.ListTables(context.Background(), &dynamodb.ListTablesInput{}, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, count)
	})
	if code, hint := classify(err, c); code != exitStoreError || attempts != dynamo.MaxAttempts {
		t.Errorf("refused endpoint: exit %d (%s) after %d attempts; want %d after %d (err %v)", code, hint, attempts, exitStoreError, dynamo.MaxAttempts, err)
	}
}
