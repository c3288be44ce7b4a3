package dynamo

// Tests through the real SDK client and its retry middleware, against an
// HTTP server that answers from a script: the "injected transport" with
// which the project tests what no DynamoDB server emulates (5xx, lost
// answers, throttling).

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/storetest"
)

// reply is one scripted answer.
type reply struct {
	status int
	body   string
	lose   bool // read the request, then close the connection unanswered
	hang   bool // never answer (until the client gives up)
}

const jsonErrPrefix = "com.amazonaws.dynamodb.v20120810#"

func apiErr(status int, code, msg string, extra ...string) reply {
	body := `{"__type":"` + jsonErrPrefix + code + `","message":` + quote(msg)
	for _, e := range extra {
		body += "," + e
	}
	return reply{status: status, body: body + "}"}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

var (
	ok200         = reply{status: 200, body: `{"ConsumedCapacity":{"TableName":"t","CapacityUnits":1.0}}`}
	internal500   = apiErr(500, "InternalServerError", "Internal server error")
	throttled400  = apiErr(400, "ThrottlingException", "Throughput exceeds the current capacity of your table or index.", `"throttlingReasons":[{"reason":"TableWriteKeyRangeThroughputExceeded","resource":"arn:aws:dynamodb:us-east-1:1:table/t"}]`)
	provisioned   = apiErr(400, "ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded.")
	validation400 = apiErr(400, "ValidationException", "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: ttl")
)

// wireRequest is one request the scripted server received.
type wireRequest struct {
	target string
	body   map[string]any
}

type scriptServer struct {
	*httptest.Server
	mu      sync.Mutex
	script  []reply
	got     []wireRequest
	release chan struct{}
}

func newScriptServer(t *testing.T, script ...reply) *scriptServer {
	s := &scriptServer{script: script, release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() { close(s.release); s.Close() })
	return s
}

func (s *scriptServer) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	target := r.Header.Get("X-Amz-Target")
	s.mu.Lock()
	s.got = append(s.got, wireRequest{target: target[strings.LastIndex(target, ".")+1:], body: body})
	rep := ok200
	if len(s.script) > 0 {
		rep, s.script = s.script[0], s.script[1:]
	}
	s.mu.Unlock()
	switch {
	case rep.lose:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	case rep.hang:
		select {
		case <-r.Context().Done():
		case <-s.release:
		}
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

func (s *scriptServer) requests() []wireRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wireRequest(nil), s.got...)
}

// wireClient is an SDK client for endpoint with the default standard
// retryer (3 attempts, retry quota), minus the backoff delays.
func wireClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		BaseEndpoint: aws.String(endpoint),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		}),
	})
}

func wireStore(t *testing.T, script ...reply) (*Store, *scriptServer) {
	srv := newScriptServer(t, script...)
	return New(wireClient(srv.URL), "t"), srv
}

var counterKey = store.Key{PK: "E#1", SK: "#STATE"}

func addOne(t testing.TB) store.UpdateInput {
	return store.UpdateInput{Key: counterKey, Expr: storetest.Build(t, store.Update{}.Add("tk", store.Int(-1)), store.Condition{}), Return: store.ReturnAllNew}
}

func expectUnavailable(t *testing.T, err error, outcomeUnknown bool) *store.UnavailableError {
	t.Helper()
	var u *store.UnavailableError
	if !errors.As(err, &u) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("error %v (%T), want a *store.UnavailableError", err, err)
	}
	if u.OutcomeUnknown != outcomeUnknown {
		t.Errorf("OutcomeUnknown = %v, want %v (error %v)", u.OutcomeUnknown, outcomeUnknown, err)
	}
	return u
}

func expectRequests(t *testing.T, srv *scriptServer, n int) []wireRequest {
	t.Helper()
	got := srv.requests()
	if len(got) != n {
		t.Fatalf("server received %d requests, want %d", len(got), n)
	}
	return got
}

// An UpdateItem whose answer was a 5xx may have applied: it is not retried,
// so an ADD is never applied twice, and the caller learns that the outcome
// is unknown.
func TestUpdateIsNotRetriedAfterServerError(t *testing.T) {
	st, srv := wireStore(t, internal500, ok200)
	_, err := st.Update(context.Background(), addOne(t))
	expectUnavailable(t, err, true)
	expectRequests(t, srv, 1)
}

func TestUpdateIsNotRetriedAfterLostAnswer(t *testing.T) {
	st, srv := wireStore(t, reply{lose: true}, ok200)
	_, err := st.Update(context.Background(), addOne(t))
	u := expectUnavailable(t, err, true)
	if u.Op != "Update" {
		t.Errorf("Op = %q", u.Op)
	}
	expectRequests(t, srv, 1)
}

func TestWritesAreNotRetriedAfterServerError(t *testing.T) {
	st, srv := wireStore(t, internal500, internal500, ok200)
	_, err := st.Put(context.Background(), store.PutInput{Item: store.Item{"PK": store.Str("a"), "SK": store.Str("b")}})
	expectUnavailable(t, err, true)
	_, err = st.Delete(context.Background(), store.DeleteInput{Key: counterKey})
	expectUnavailable(t, err, true)
	expectRequests(t, srv, 2)
}

// A timeout after the request was sent: the write may have applied.
func TestUpdateTimeoutIsOutcomeUnknown(t *testing.T) {
	st, srv := wireStore(t, reply{hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := st.Update(ctx, addOne(t))
	expectUnavailable(t, err, true)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
	expectRequests(t, srv, 1)
}

// Throttles change nothing: they are retried with the client's retryer,
// and one that outlasts the retries is both throttled and unavailable.
func TestUpdateRetriesThrottles(t *testing.T) {
	st, srv := wireStore(t, throttled400, provisioned, ok200)
	out, err := st.Update(context.Background(), addOne(t))
	if err != nil {
		t.Fatal(err)
	}
	if out.Consumed.WriteUnits != 1 {
		t.Errorf("Consumed = %+v", out.Consumed)
	}
	expectRequests(t, srv, 3)
}

func TestThrottleThatOutlastsRetries(t *testing.T) {
	st, srv := wireStore(t, throttled400, throttled400, throttled400, ok200)
	_, err := st.Update(context.Background(), addOne(t))
	expectUnavailable(t, err, false)
	var te *store.ThrottledError
	if !errors.As(err, &te) || !errors.Is(err, store.ErrThrottled) {
		t.Fatalf("error %v does not hold a *store.ThrottledError", err)
	}
	want := store.ThrottledError{Code: store.ThrottleThrottling, Reason: "TableWriteKeyRangeThroughputExceeded", Key: counterKey}
	if *te != want {
		t.Errorf("ThrottledError = %+v, want %+v", *te, want)
	}
	expectRequests(t, srv, 3)
}

// A failure to connect proves nothing was sent.
func TestConnectionRefusedIsNotOutcomeUnknown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	st := New(wireClient("http://"+addr), "t")
	_, err = st.Update(context.Background(), addOne(t))
	expectUnavailable(t, err, false)
}

func TestCancelledContextSendsNothing(t *testing.T) {
	st, srv := wireStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := st.Update(ctx, addOne(t))
	expectUnavailable(t, err, false)
	_, err = st.Get(ctx, store.GetInput{Key: counterKey})
	expectUnavailable(t, err, false)
	_, err = st.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{{Update: ptr(addOne(t))}}})
	expectUnavailable(t, err, false)
	expectRequests(t, srv, 0)
}

func ptr[T any](v T) *T { return &v }

// Reads keep the SDK's retries.
func TestReadsAreRetried(t *testing.T) {
	st, srv := wireStore(t, internal500, reply{status: 200, body: `{"Item":{"PK":{"S":"E#1"},"SK":{"S":"#STATE"},"tk":{"N":"9007199254740993"}}}`})
	out, err := st.Get(context.Background(), store.GetInput{Key: counterKey, ConsistentRead: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := out.Item.Int("tk"); n != 9007199254740993 {
		t.Errorf("tk = %d", n)
	}
	expectRequests(t, srv, 2)
}

func TestReadFailureIsNotOutcomeUnknown(t *testing.T) {
	st, _ := wireStore(t, internal500, internal500, internal500)
	_, err := st.Get(context.Background(), store.GetInput{Key: counterKey})
	expectUnavailable(t, err, false)
}

// TransactWriteItems keeps the SDK's retries: the retry carries the same
// ClientRequestToken, so DynamoDB applies it once.
func TestTransactWriteRetriesWithTheSameToken(t *testing.T) {
	st, srv := wireStore(t, internal500, reply{status: 200, body: `{}`})
	_, err := st.TransactWrite(context.Background(), store.TransactWriteInput{Actions: []store.Write{{Update: ptr(addOne(t))}}})
	if err != nil {
		t.Fatal(err)
	}
	got := expectRequests(t, srv, 2)
	t1, _ := got[0].body["ClientRequestToken"].(string)
	t2, _ := got[1].body["ClientRequestToken"].(string)
	if t1 == "" || t1 != t2 {
		t.Errorf("ClientRequestTokens %q and %q, want one generated token on both attempts", t1, t2)
	}
}

func TestTransactWriteUsesTheCallersToken(t *testing.T) {
	st, srv := wireStore(t, reply{status: 200, body: `{}`})
	_, err := st.TransactWrite(context.Background(), store.TransactWriteInput{
		Actions: []store.Write{{Update: ptr(addOne(t))}}, ClientToken: "token-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := expectRequests(t, srv, 1)[0].body["ClientRequestToken"]; got != "token-1" {
		t.Errorf("ClientRequestToken = %v", got)
	}
}

// After an attempt with an unknown outcome, a throttle on the retry does
// not prove that nothing was applied.
func TestTransactWriteAmbiguousThenThrottled(t *testing.T) {
	st, _ := wireStore(t, internal500, throttled400, throttled400)
	_, err := st.TransactWrite(context.Background(), store.TransactWriteInput{Actions: []store.Write{{Update: ptr(addOne(t))}}})
	expectUnavailable(t, err, true)
	if !errors.Is(err, store.ErrThrottled) {
		t.Errorf("error %v does not match ErrThrottled", err)
	}
}

func TestTransactWriteThrottledOnly(t *testing.T) {
	st, _ := wireStore(t, throttled400, throttled400, throttled400)
	_, err := st.TransactWrite(context.Background(), store.TransactWriteInput{Actions: []store.Write{{Update: ptr(addOne(t))}}})
	expectUnavailable(t, err, false)
	if !errors.Is(err, store.ErrThrottled) {
		t.Errorf("error %v does not match ErrThrottled", err)
	}
}

func TestTransactWriteServerErrors(t *testing.T) {
	st, srv := wireStore(t, internal500, internal500, internal500)
	_, err := st.TransactWrite(context.Background(), store.TransactWriteInput{Actions: []store.Write{{Update: ptr(addOne(t))}}})
	expectUnavailable(t, err, true)
	expectRequests(t, srv, 3)
}

const oldItemJSON = `{"PK":{"S":"E#1"},"SK":{"S":"#STATE"},"tk":{"N":"-5"},"pad":{"S":"` // + padding + `"}}`

func oldItem(pad int) string { return oldItemJSON + strings.Repeat("x", pad) + `"}}` }

func TestConditionFailure(t *testing.T) {
	ccf := apiErr(400, "ConditionalCheckFailedException", "The conditional request failed", `"Item":`+oldItem(2000))
	for _, wantOld := range []bool{true, false} {
		st, srv := wireStore(t, ccf)
		in := addOne(t)
		in.Expr = storetest.Build(t, store.Update{}.Add("tk", store.Int(-1)), store.Name("tk").GreaterThanEqual(store.Int(1)))
		in.ReturnOldOnConditionFailure = wantOld
		out, err := st.Update(context.Background(), in)
		var cf *store.ConditionFailedError
		if !errors.As(err, &cf) || !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("error %v, want a condition failure", err)
		}
		if wantOld {
			if n, _ := cf.Item.Int("tk"); n != -5 || len(cf.Item) != 4 {
				t.Errorf("old item %v", cf.Item)
			}
		} else if cf.Item != nil {
			t.Errorf("old item %v returned without being asked for", cf.Item)
		}
		// 2,000-odd bytes: 2 WCU, estimated from the item DynamoDB sent
		// (always asked for, whatever the caller wanted).
		if out.Consumed != (store.Capacity{WriteUnits: 2}) {
			t.Errorf("Consumed = %+v, want 2 WCU", out.Consumed)
		}
		body := expectRequests(t, srv, 1)[0].body
		if body["ReturnValuesOnConditionCheckFailure"] != "ALL_OLD" || body["ReturnConsumedCapacity"] != "INDEXES" {
			t.Errorf("request %v", body)
		}
	}
	// No item: 1 WCU.
	st, _ := wireStore(t, apiErr(400, "ConditionalCheckFailedException", "The conditional request failed"))
	in := addOne(t)
	in.Expr = storetest.Build(t, store.Update{}.Add("tk", store.Int(-1)), store.Name("PK").Exists())
	in.ReturnOldOnConditionFailure = true
	out, err := st.Update(context.Background(), in)
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) || cf.Item != nil || out.Consumed.WriteUnits != 1 {
		t.Errorf("missing item: %v %v %+v", err, cf, out.Consumed)
	}
}

func TestTransactionCanceled(t *testing.T) {
	body := `"CancellationReasons":[{"Code":"None"},{"Code":"ConditionalCheckFailed","Message":"The conditional request failed","Item":` + oldItem(10) + `},{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item."}]`
	st, _ := wireStore(t, apiErr(400, "TransactionCanceledException", "Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed, TransactionConflict]", body))
	cond := storetest.Build(t, store.Update{}.Add("tk", store.Int(-1)), store.Name("tk").GreaterThanEqual(store.Int(1)))
	out, err := st.TransactWrite(context.Background(), store.TransactWriteInput{Actions: []store.Write{
		{Update: &store.UpdateInput{Key: store.Key{PK: "a", SK: "b"}, Expr: cond}},
		{Update: &store.UpdateInput{Key: counterKey, Expr: cond, ReturnOldOnConditionFailure: true}},
		{Check: &store.CheckInput{Key: store.Key{PK: "c", SK: "d"}, Expr: storetest.Build(t, store.Update{}, store.Name("PK").Exists())}},
	}})
	var tc *store.TransactionCanceledError
	if !errors.As(err, &tc) || errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("error %v", err)
	}
	if len(tc.Reasons) != 3 || tc.Reasons[0].Code != "None" || tc.Reasons[1].Code != "ConditionalCheckFailed" ||
		tc.Reasons[1].Message != "The conditional request failed" || tc.Reasons[2].Code != "TransactionConflict" {
		t.Errorf("reasons %+v", tc.Reasons)
	}
	if n, _ := tc.Reasons[1].Item.Int("tk"); n != -5 || tc.Reasons[0].Item != nil {
		t.Errorf("items %+v", tc.Reasons)
	}
	// Estimate: 2 WCU per action per KB.
	if out.Consumed.WriteUnits != 6 {
		t.Errorf("Consumed = %+v", out.Consumed)
	}
}

func TestErrorsByCode(t *testing.T) {
	for _, c := range []struct {
		name  string
		reply reply
		check func(t *testing.T, err error)
	}{
		{"validation", validation400, func(t *testing.T, err error) {
			var ve *store.ValidationError
			if !errors.As(err, &ve) || ve.Message != "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: ttl" {
				t.Errorf("%v", err)
			}
		}},
		{"serialization", apiErr(400, "SerializationException", "Start of structure or map found where not expected"), func(t *testing.T, err error) {
			if !errors.Is(err, store.ErrValidation) {
				t.Errorf("%v", err)
			}
		}},
		{"transaction conflict", apiErr(400, "TransactionConflictException", "Operation was rejected because there is an ongoing transaction for the item"), func(t *testing.T, err error) {
			if !errors.Is(err, store.ErrTransactionConflict) || !strings.Contains(err.Error(), counterKey.String()) {
				t.Errorf("%v", err)
			}
		}},
		{"missing table", apiErr(400, "ResourceNotFoundException", "Requested resource not found"), func(t *testing.T, err error) {
			var api smithy.APIError
			if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrValidation) || !errors.As(err, &api) || api.ErrorCode() != "ResourceNotFoundException" {
				t.Errorf("%v", err)
			}
		}},
		{"request limit", apiErr(400, "RequestLimitExceeded", "Throughput exceeds the current throughput limit for your account."), func(t *testing.T, err error) {
			var te *store.ThrottledError
			if !errors.As(err, &te) || te.Code != store.ThrottleRequestLimitExceeded {
				t.Errorf("%v", err)
			}
		}},
		{"service unavailable", reply{status: 503, body: `{"__type":"com.amazonaws.dynamodb.v20120810#ServiceUnavailable"}`}, func(t *testing.T, err error) {
			expectUnavailable(t, err, true)
		}},
		{"unreadable answer", reply{status: 200, body: `{"Attributes":{"tk":{"BOOL":true}}}`}, func(t *testing.T, err error) {
			// The write applied; its result cannot be read.
			expectUnavailable(t, err, true)
			var de *DecodeError
			if !errors.As(err, &de) || de.Attribute != "tk" {
				t.Errorf("%v", err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Enough replies for every retry.
			st, _ := wireStore(t, c.reply, c.reply, c.reply)
			_, err := st.Update(context.Background(), addOne(t))
			c.check(t, err)
		})
	}
	st, _ := wireStore(t, apiErr(400, "IdempotentParameterMismatchException", "Different parameters with the same client token"))
	_, err := st.TransactWrite(context.Background(), store.TransactWriteInput{Actions: []store.Write{{Update: ptr(addOne(t))}}, ClientToken: "x"})
	var ve *store.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Message, "client token") {
		t.Errorf("idempotent parameter mismatch: %v", err)
	}
}

// The SDK's own parameter validation (which never sends the request) is
// a validation error.
func TestClientSideValidation(t *testing.T) {
	inv := smithy.InvalidParamsError{Context: "UpdateItemInput"}
	inv.Add(smithy.NewErrParamRequired("Key"))
	err := New(nil, "t").mapError(opUpdate, writeCall, counterKey, &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem", Err: &inv})
	var ve *store.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Message, "Key") {
		t.Errorf("%v", err)
	}
}

func TestSafeRetryerWithoutClientRetryer(t *testing.T) {
	var o dynamodb.Options
	singleWriteRetries(&o)
	if o.Retryer.MaxAttempts() != 1 || o.Retryer.IsErrorRetryable(errors.New("x")) {
		t.Errorf("nil retryer became %#v", o.Retryer)
	}
}
