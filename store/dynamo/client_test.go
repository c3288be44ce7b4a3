package dynamo_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
	"github.com/shardlimit/limiter/store/storetest"
)

func TestRetryerSettings(t *testing.T) {
	r := dynamo.Retryer()
	if got := r.MaxAttempts(); got != 3 {
		t.Fatalf("MaxAttempts = %d, want 3", got)
	}
	for attempt := 0; attempt < 40; attempt++ {
		for i := 0; i < 50; i++ {
			d, err := r.RetryDelay(attempt, errors.New("x"))
			if err != nil || d <= 0 || d > dynamo.MaxBackoff {
				t.Fatalf("RetryDelay(%d) = %v, %v; want in (0, %v]", attempt, d, err, dynamo.MaxBackoff)
			}
			if cap := dynamo.MinBackoff << attempt; attempt < 3 && d > cap {
				t.Fatalf("RetryDelay(%d) = %v, above %v", attempt, d, cap)
			}
		}
	}
	if dynamo.Retryer() == r {
		t.Fatal("Retryer returned a shared retryer: clients would share one retry quota")
	}
}

func TestClientOptionsSetsAnAttemptTimeout(t *testing.T) {
	var o dynamodb.Options
	dynamo.ClientOptions(&o)
	bc, ok := o.HTTPClient.(*awshttp.BuildableClient)
	if !ok || bc.GetTimeout() != dynamo.AttemptTimeout {
		t.Fatalf("HTTPClient = %T (timeout %v), want a BuildableClient with %v", o.HTTPClient, timeoutOf(o.HTTPClient), dynamo.AttemptTimeout)
	}
	if o.Retryer == nil || o.Retryer.MaxAttempts() != dynamo.MaxAttempts {
		t.Fatalf("Retryer = %v", o.Retryer)
	}

	// The SDK's client keeps its transport and gets the timeout.
	o = dynamodb.Options{HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.MaxIdleConnsPerHost = 77 })}
	dynamo.ClientOptions(&o)
	bc = o.HTTPClient.(*awshttp.BuildableClient)
	if bc.GetTimeout() != dynamo.AttemptTimeout || bc.GetTransport().MaxIdleConnsPerHost != 77 {
		t.Fatalf("timeout %v, MaxIdleConnsPerHost %d", bc.GetTimeout(), bc.GetTransport().MaxIdleConnsPerHost)
	}

	// A timeout of the caller's own is kept, and so is a custom client.
	o = dynamodb.Options{HTTPClient: awshttp.NewBuildableClient().WithTimeout(5 * time.Second)}
	dynamo.ClientOptions(&o)
	if got := timeoutOf(o.HTTPClient); got != 5*time.Second {
		t.Fatalf("caller's timeout replaced: %v", got)
	}
	custom := &http.Client{}
	o = dynamodb.Options{HTTPClient: custom}
	dynamo.ClientOptions(&o)
	if o.HTTPClient != custom {
		t.Fatal("custom HTTP client replaced")
	}

	// NewClient applies them, and options after them win.
	c := dynamo.NewClient(aws.Config{Region: "us-east-1"})
	if got := timeoutOf(c.Options().HTTPClient); got != dynamo.AttemptTimeout {
		t.Fatalf("NewClient: timeout %v", got)
	}
	if c.Options().Retryer.MaxAttempts() != dynamo.MaxAttempts {
		t.Fatalf("NewClient: MaxAttempts %d", c.Options().Retryer.MaxAttempts())
	}
	c = dynamo.NewClient(aws.Config{Region: "us-east-1"}, func(o *dynamodb.Options) { o.HTTPClient = custom })
	if c.Options().HTTPClient != custom {
		t.Fatal("NewClient: a later option did not win")
	}
}

func timeoutOf(c any) time.Duration {
	if bc, ok := c.(*awshttp.BuildableClient); ok {
		return bc.GetTimeout()
	}
	return -1
}

func testConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint: aws.String(endpoint),
	}
}

// A closed port: every call fails with a store.UnavailableError, and a
// write says nothing was applied (the connection was refused).
func TestNewClientAgainstAClosedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close()

	st := dynamo.New(dynamo.NewClient(testConfig(endpoint)), "rate-limits")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := store.Key{PK: "a", SK: "b"}

	_, err = st.Get(ctx, store.GetInput{Key: key})
	var u *store.UnavailableError
	if !errors.As(err, &u) || u.OutcomeUnknown || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Get: %v (%#v), want an UnavailableError from a refused connection", err, u)
	}
	_, err = st.Update(ctx, store.UpdateInput{Key: key, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
	if !errors.As(err, &u) || u.OutcomeUnknown {
		t.Fatalf("Update: %v, want an UnavailableError with OutcomeUnknown false", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the calls ran into the test's 30 s deadline")
	}
}

// An endpoint that accepts connections and never answers: the attempt
// timeout ends the call, not the caller's deadline. The write is not
// retried (it may have been applied) and says so.
func TestNewClientAgainstASilentEndpoint(t *testing.T) {
	release := make(chan struct{})
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	st := dynamo.New(dynamo.NewClient(testConfig(srv.URL)), "rate-limits")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := st.Update(ctx, store.UpdateInput{Key: store.Key{PK: "a", SK: "b"},
		Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
	var u *store.UnavailableError
	if !errors.As(err, &u) || !u.OutcomeUnknown {
		t.Fatalf("Update: %v, want an UnavailableError with OutcomeUnknown true", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the call ran into the test's deadline: no attempt timeout")
	}
	if n := attempts.Load(); n != 1 {
		t.Fatalf("%d attempts of a write whose outcome is unknown, want 1", n)
	}
}
