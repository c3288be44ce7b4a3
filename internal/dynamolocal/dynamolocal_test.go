package dynamolocal

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
)

func TestMain(m *testing.M) { Main(m) }

func TestSharedServerServesTables(t *testing.T) {
	srv := Start(t)
	if again := Start(t); again != srv {
		t.Fatal("Start under Main returned a second server")
	}
	if !strings.HasPrefix(srv.Endpoint, "http://127.0.0.1:") {
		t.Errorf("endpoint %s", srv.Endpoint)
	}
	a, b := srv.NewTable(t), srv.NewTable(t)
	if a == b {
		t.Fatalf("NewTable returned %s twice", a)
	}
	ctx := context.Background()
	for _, name := range []string{a, b} {
		d, err := srv.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
		if err != nil {
			t.Fatal(err)
		}
		if d.Table.TableStatus != "ACTIVE" || len(d.Table.GlobalSecondaryIndexes) != 2 {
			t.Errorf("table %s: %s, %d indexes", name, d.Table.TableStatus, len(d.Table.GlobalSecondaryIndexes))
		}
	}
}

func TestTableNamesAreValid(t *testing.T) {
	srv := Start(t)
	t.Run("sub test/with spaces and ünïcode and a very long name "+strings.Repeat("x", 300), func(t *testing.T) {
		name := srv.NewTable(t)
		if len(name) > 255 || strings.ContainsAny(name, " /ü") {
			t.Errorf("table name %q", name)
		}
	})
}

// A server of its own stops with its whole process group.
func TestStopKillsTheProcess(t *testing.T) {
	Start(t) // skips without an installation
	srv, err := start()
	if err != nil {
		t.Fatal(err)
	}
	pid := srv.PID()
	if _, err := srv.Client.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv.Stop() // idempotent
	select {
	case <-srv.done:
	case <-time.After(10 * time.Second):
		t.Fatal("process still running")
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d still exists: %v", pid, err)
	}
}

func TestInstallFindsTheJar(t *testing.T) {
	dir, err := Install()
	if err != nil {
		t.Skipf("%v (run %s)", err, InstallCommand)
	}
	if !strings.Contains(dir, "dynamodb_local_") {
		t.Errorf("dir %s", dir)
	}
}

func TestLockTimeoutsAreResent(t *testing.T) {
	lockAnswer := `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"This action timed out because it too long waiting for a lock. This request will succeed in actual DynamoDB API"}`
	otherAnswer := `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}`
	var mu sync.Mutex
	var bodies []string
	answers := []struct {
		status int
		body   string
	}{{500, lockAnswer}, {500, lockAnswer}, {200, `{"TableNames":[]}`}, {500, otherAnswer}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		a := answers[0]
		answers = answers[1:]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	defer srv.Close()
	c := NewClient(srv.URL, func(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} })
	before := LockTimeoutRetries()
	if _, err := c.ListTables(context.Background(), &dynamodb.ListTablesInput{Limit: aws.Int32(7)}); err != nil {
		t.Fatal(err)
	}
	if got := LockTimeoutRetries() - before; got != 2 {
		t.Errorf("%d lock retries, want 2", got)
	}
	if len(bodies) != 3 || bodies[0] != bodies[2] || !strings.Contains(bodies[2], `"Limit":7`) {
		t.Errorf("bodies sent: %q", bodies)
	}
	// Any other 500 reaches the SDK.
	_, err := c.ListTables(context.Background(), &dynamodb.ListTablesInput{})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "InternalServerError" {
		t.Errorf("other 500: %v", err)
	}
}
