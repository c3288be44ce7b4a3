package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
)

// cmdCtx is one invocation: its flags, writers and, made on first use, its
// DynamoDB client and limiter.
type cmdCtx struct {
	ctx            context.Context
	stdout, stderr io.Writer
	fs             *flag.FlagSet
	cmd            *command
	args           []string
	helpAsked      bool

	// Global flags.
	table, region, endpoint, namespace, principal, output string

	client *dynamodb.Client
	lim    *limiter.Limiter
	adm    *admin.Admin
	last   limiter.Event // the limiter's last call, as its observer saw it
}

func newCmdCtx(ctx context.Context, stdout, stderr io.Writer) *cmdCtx {
	c := &cmdCtx{ctx: ctx, stdout: stdout, stderr: stderr}
	c.fs = flag.NewFlagSet("limiterctl", flag.ContinueOnError)
	c.fs.SetOutput(io.Discard)
	c.fs.Usage = func() {}
	c.fs.StringVar(&c.table, "table", os.Getenv("LIMITER_TABLE"), "the limiter's table ($LIMITER_TABLE)")
	c.fs.StringVar(&c.region, "region", "", "AWS region ($AWS_REGION, else us-east-1)")
	c.fs.StringVar(&c.endpoint, "endpoint", os.Getenv("LIMITER_ENDPOINT"), "DynamoDB endpoint URL, e.g. http://localhost:8000 ($LIMITER_ENDPOINT)")
	c.fs.StringVar(&c.namespace, "namespace", cmp.Or(os.Getenv("LIMITER_NAMESPACE"), "default"), "the limiter namespace ($LIMITER_NAMESPACE)")
	c.fs.StringVar(&c.principal, "principal", "", "who changes are recorded as ($LIMITER_PRINCIPAL, else $USER)")
	c.fs.StringVar(&c.output, "o", "table", "output format: table or json")
	return c
}

// parse parses flags from args. With interleave, flags may follow
// positional arguments (limiterctl entity create key-1 --parent team);
// otherwise parsing stops at the first positional argument (the command).
func (c *cmdCtx) parse(args []string, interleave bool) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.helpAsked = true
				if !interleave {
					return []string{"help"}, nil
				}
				return pos, nil
			}
			return nil, usageErrorf("%v", err)
		}
		rest := c.fs.Args()
		if !interleave || len(rest) == 0 {
			if c.output != "table" && c.output != "json" {
				return nil, usageErrorf("-o %q: want table or json", c.output)
			}
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// dynamo returns the DynamoDB client: dynamo.NewClient on the default AWS
// configuration (environment, shared config, instance role), with --region
// and --endpoint. For an --endpoint and no AWS credentials in the environment
// it uses static dummy credentials, which DynamoDB Local accepts.
func (c *cmdCtx) dynamo() (*dynamodb.Client, error) {
	if c.client != nil {
		return c.client, nil
	}
	region := cmp.Or(c.region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), "us-east-1")
	// No SDK log lines: limiterctl reports errors itself, and DynamoDB
	// Local's answers to calls it does not implement make the SDK warn.
	opts := []func(*config.LoadOptions) error{config.WithRegion(region), config.WithLogger(logging.Nop{})}
	if c.endpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(c.ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	// The limiter's client settings (dynamo.NewClient), not the SDK's: a
	// refused or silent endpoint fails in well under a second per attempt,
	// not after the SDK's seconds-long backoffs.
	c.client = dynamo.NewClient(cfg, func(o *dynamodb.Options) {
		if c.endpoint != "" {
			o.BaseEndpoint = aws.String(c.endpoint)
		}
	})
	return c.client, nil
}

// limiter returns a limiter on the table and namespace, without a cache
// (every read is fresh) and quiet.
func (c *cmdCtx) limiter() (*limiter.Limiter, error) {
	if c.lim != nil {
		return c.lim, nil
	}
	st, err := c.openStore()
	if err != nil {
		return nil, err
	}
	if c.lim, err = limiter.New(st, limiter.WithNamespace(c.namespace), limiter.WithCacheTTL(0),
		limiter.WithLogger(slog.New(slog.DiscardHandler)), limiter.WithObserver(limiter.ObserverFunc(func(e limiter.Event) { c.last = e }))); err != nil {
		return nil, usageErrorf("%v", err)
	}
	return c.lim, nil
}

// admin returns an Admin on the table and namespace, recording changes as
// made by --principal when it is set.
func (c *cmdCtx) admin() (*admin.Admin, error) {
	if c.adm != nil {
		return c.adm, nil
	}
	st, err := c.openStore()
	if err != nil {
		return nil, err
	}
	opts := []admin.Option{admin.WithNamespace(c.namespace)}
	if c.principal != "" {
		opts = append(opts, admin.WithDefaultPrincipal(c.principal))
	}
	if c.adm, err = admin.New(st, opts...); err != nil {
		return nil, usageErrorf("%v", err)
	}
	return c.adm, nil
}

// openStore returns the DynamoDB store of the table.
func (c *cmdCtx) openStore() (store.Store, error) {
	table, client, err := c.tableClient()
	if err != nil {
		return nil, err
	}
	return dynamo.New(client, table), nil
}

// tableClient returns --table, which every command but help needs, and
// the DynamoDB client.
func (c *cmdCtx) tableClient() (string, *dynamodb.Client, error) {
	if c.table == "" {
		return "", nil, usageErrorf("--table is required (or set LIMITER_TABLE)")
	}
	client, err := c.dynamo()
	return c.table, client, err
}

// json reports whether -o json was asked for.
func (c *cmdCtx) json() bool { return c.output == "json" }

func (c *cmdCtx) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// tabular writes aligned columns; flush it at the end.
func (c *cmdCtx) tabular(header ...string) *tabwriter.Writer {
	w := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	if len(header) > 0 {
		fmt.Fprintln(w, strings.Join(header, "\t"))
	}
	return w
}

// mapped returns f of every element of xs, in order; never nil, so that
// an empty list is [] in JSON.
func mapped[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func row(w io.Writer, cells ...any) {
	for i, x := range cells {
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, x)
	}
	fmt.Fprintln(w)
}

// classify maps an error to an exit code and a hint on what to do next.
func classify(err error, c *cmdCtx) (code int, hint string) {
	var ue *usageError
	var f *failure
	var api smithy.APIError
	var op *net.OpError
	switch {
	case errors.As(err, &ue):
		return exitUsage, ""
	case errors.As(err, &f):
		return exitFailure, ""
	case errors.Is(err, limiter.ErrInvalid):
		return exitUsage, "nothing was changed"
	case errors.Is(err, limiter.ErrSchemaVersion):
		return exitFailure, "the table holds a layout this limiterctl does not know: use the limiterctl of the library version that wrote it"
	case errors.Is(err, dynamo.ErrSchemaMismatch):
		return exitFailure, "the table's keys or indexes are not the limiter's: see docs/dynamodb.md (the table) and deploy/"
	case errors.As(err, &op) || strings.Contains(err.Error(), "connection refused"):
		return exitStoreError, "nothing answered at " + cmp.Or(c.endpoint, "the DynamoDB endpoint") + ": start DynamoDB Local (docs/operations.md) or fix --endpoint"
	case errors.As(err, &api):
		switch api.ErrorCode() {
		case "ResourceNotFoundException":
			return exitStoreError, fmt.Sprintf("table %q not found in region %s: create it with \"limiterctl table create\", or check --table, --region and --endpoint", c.table, c.regionName())
		case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException":
			return exitStoreError, "check the AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID) and their IAM permissions (docs/dynamodb.md#iam)"
		}
		return exitStoreError, ""
	case errors.Is(err, store.ErrThrottled), errors.Is(err, store.ErrUnavailable), errors.Is(err, limiter.ErrUnavailable),
		errors.Is(err, store.ErrTransactionConflict), errors.Is(err, context.DeadlineExceeded):
		return exitStoreError, "the store failed or was busy; the command is safe to run again"
	case strings.Contains(err.Error(), "credentials"):
		return exitStoreError, "set AWS credentials (AWS_PROFILE or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
	}
	return exitFailure, ""
}

func (c *cmdCtx) regionName() string {
	if c.client != nil {
		return c.client.Options().Region
	}
	return c.region
}
