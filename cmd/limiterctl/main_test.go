package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store/dynamo"
)

// Every command runs end to end against DynamoDB Local: run() with real
// arguments, the real client construction (LoadDefaultConfig, --endpoint,
// the dummy credentials), one JVM for the package.
func TestMain(m *testing.M) { dynamotest.Main(m) }

// cli runs limiterctl against one table of a DynamoDB Local.
type cli struct {
	t     *testing.T
	srv   *dynamotest.Server
	table string
	ns    string
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	srv := dynamotest.Start(t)
	for _, v := range []string{"LIMITER_TABLE", "LIMITER_ENDPOINT", "LIMITER_NAMESPACE", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_REGION"} {
		t.Setenv(v, "")
	}
	t.Setenv("LIMITER_PRINCIPAL", "test-operator")
	// DynamoDB Local keeps one database per access key: the harness's.
	t.Setenv("AWS_ACCESS_KEY_ID", dynamotest.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", dynamotest.SecretAccessKey)
	return &cli{t: t, srv: srv, table: srv.NewTable(t), ns: "default"}
}

// run runs limiterctl with the table, endpoint and namespace flags first.
func (c *cli) run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	all := append([]string{"--table", c.table, "--endpoint", c.srv.Endpoint, "--namespace", c.ns}, args...)
	code = run(all, &out, &errOut)
	return out.String(), errOut.String(), code
}

// ok runs a command that must succeed and returns its standard output.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != exitOK {
		c.t.Fatalf("limiterctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fails runs a command that must exit with code, its standard error
// containing every one of want.
func (c *cli) fails(code int, want []string, args ...string) string {
	c.t.Helper()
	out, errOut, got := c.run(args...)
	if got != code {
		c.t.Fatalf("limiterctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(errOut+out, w) {
			c.t.Fatalf("limiterctl %s: output lacks %q\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), w, out, errOut)
		}
	}
	return out
}

// json runs a command with -o json and decodes its output into v.
func (c *cli) json(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("limiterctl %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// contains fails unless s holds every one of want.
func contains(t *testing.T, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Fatalf("output lacks %q:\n%s", w, s)
		}
	}
}

// limiter is a service's limiter on the CLI's table and namespace.
func (c *cli) limiter() *limiter.Limiter { return c.limiterWith(c.srv.Client) }

func (c *cli) limiterWith(client *dynamodb.Client) *limiter.Limiter {
	c.t.Helper()
	lim, err := limiter.New(dynamo.New(client, c.table), limiter.WithNamespace(c.ns))
	if err != nil {
		c.t.Fatal(err)
	}
	return lim
}

func (c *cli) acquire(lim *limiter.Limiter, entity, resource string, limits []limiter.Limit, consume map[string]int64) {
	c.t.Helper()
	if _, err := lim.Acquire(context.Background(), limiter.Request{Entity: entity, Resource: resource, Limits: limits, Consume: consume}); err != nil {
		c.t.Fatal(err)
	}
}

func staticCredentials(id, secret string) credentials.StaticCredentialsProvider {
	return credentials.NewStaticCredentialsProvider(id, secret, "")
}
