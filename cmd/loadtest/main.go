// Command loadtest puts a load on the limiter, against DynamoDB, DynamoDB
// Local or memsim (DynamoDB in memory), and reports what every acquire cost:
// store calls per attempt by write path, write and read units per admitted
// acquire, admitted, refused, unavailable and falsely refused acquires,
// latency, shard doublings, the hottest partition's peak write rate
// (memsim), and the throughput of the cheapest possible write (a single
// unconditional UpdateItem ADD) measured in the same run, interleaved.
//
//	go run ./cmd/loadtest                                              # memsim, 32 writers, one bucket far above the load
//	go run ./cmd/loadtest -store dynamodb-local -writers 32 -duration 20s
//	go run ./cmd/loadtest -limits rps:200/s -rate 400 -writers 32 -processes 32
//	go run ./cmd/loadtest -latency 30ms -limits rps:200/s -rate 400
//	go run ./cmd/loadtest -store dynamodb -table rate-limits -create-table -region eu-west-1
//
// docs/performance.md explains the report and gives the measured numbers.
// Exit status: 0 after a run, 1 when the run failed or an acquire returned
// an unexpected error, 2 for bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/shardlimit/limiter"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// options are the parsed flags.
type options struct {
	store, endpoint, table, region string
	createTable, keepTable, stream bool
	partitionWCU                   float64
	latency                        time.Duration

	writers, processes int
	rate               float64
	limits, parent     []limiter.Limit
	consume            map[string]int64
	keys               int
	resource           string
	also               []string // more resources every acquire charges (Request.Also)
	cascade            bool

	duration, slice, warmup, progress               time.Duration
	seed                                            uint64
	json, raw, verbose, localRefusals, reservations bool
	namespace                                       string
	rawItem                                         string
}

// run parses args, runs the load and prints the report on stdout
// (progress and errors on stderr). It returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "loadtest:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := execute(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "loadtest:", err)
		return 1
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
			return 1
		}
	} else {
		rep.print(stdout)
	}
	if rep.Errors > 0 {
		fmt.Fprintf(stderr, "loadtest: %d acquires failed with an unexpected error, the first: %s\n", rep.Errors, rep.FirstError)
		return 1
	}
	return 0
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	var limits, parent, consume, also string
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.store, "store", storeMemsim, "target: memsim, dynamodb-local or dynamodb")
	fs.StringVar(&o.endpoint, "endpoint", "", "dynamodb-local: the URL of a running DynamoDB Local (default: start one from testdata/dynamodb-local); dynamodb: an endpoint other than AWS's")
	fs.StringVar(&o.table, "table", "", "table name (dynamodb: required; dynamodb-local: default a fresh table, deleted at the end)")
	fs.StringVar(&o.region, "region", "", "dynamodb: AWS region (default: from the AWS configuration)")
	fs.BoolVar(&o.createTable, "create-table", false, "dynamodb: create the table (dynamo.CreateTable) if it does not exist")
	fs.BoolVar(&o.keepTable, "keep-table", false, "dynamodb-local: keep the table the run created")
	fs.BoolVar(&o.stream, "stream", false, "create the table with a stream (DynamoDB Local writes 5-50x slower with one); memsim: keep a change stream")
	fs.Float64Var(&o.partitionWCU, "partition-wcu", 1000, "memsim: write units per second one partition takes before it throttles (0: no ceiling)")
	fs.DurationVar(&o.latency, "latency", 0, "memsim: server round-trip time of every call, e.g. 30ms (half before the store applies it, half after)")
	fs.IntVar(&o.writers, "writers", 32, "concurrent writers (goroutines), in total")
	fs.IntVar(&o.processes, "processes", 1, "separate limiter.Limiter instances the writers are spread over (round robin)")
	fs.Float64Var(&o.rate, "rate", 0, "offered acquires per second, all writers together (0: closed loop, every writer as fast as it can)")
	fs.StringVar(&limits, "limits", "rps:100000/s", "limits of every bucket, comma-separated: name:rate/period[:burst], such as rps:100/s or tpm:10000/min:20000, or a calendar quota name:n/window[:anchor][@zone], such as usd:50000000/month@Europe/Paris, or a concurrency cap name:n/concurrent:ttl, such as inflight:10/concurrent:5m (see limiter.ParseLimit); every lease is committed at once")
	fs.StringVar(&consume, "consume", "", "tokens per acquire: N of every limit, or name:N,... (default 1 of every limit)")
	fs.IntVar(&o.keys, "keys", 1, "entities the writers spread over (uniformly at random); 1: one hot bucket")
	fs.StringVar(&o.resource, "resource", "", "the resource of every acquire (default limiter.DefaultResource)")
	fs.StringVar(&also, "also", "", "more resources every acquire charges too, all or none (limiter.Request.Also), comma-separated, with the same limits")
	fs.BoolVar(&o.cascade, "cascade", false, "every entity has one parent, charged by every acquire too")
	fs.StringVar(&parent, "parent-limits", "", "with -cascade: the parent's limits, stored for it (default: the same as -limits)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time of the limiter (the raw floor runs as long again)")
	fs.DurationVar(&o.slice, "slice", 2*time.Second, "with -raw: the limiter and the raw floor alternate in slices this long")
	fs.DurationVar(&o.warmup, "warmup", 0, "unmeasured warm-up of the server first (limiter on other entities, and the raw write), e.g. 10s for a fresh DynamoDB Local")
	fs.DurationVar(&o.progress, "progress", 5*time.Second, "a progress line on stderr this often, for runs longer than that (0: none)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the writers' entity choice and the limiters' shard choice")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.BoolVar(&o.raw, "raw", true, "also measure the raw floor: the same writers issuing one unconditional UpdateItem ADD on one item")
	fs.StringVar(&o.rawItem, "raw-item", rawItemTiny, "the raw floor's item: tiny (its key and the counter) or bucket (a bucket item the limiter made, every attribute and index key)")
	fs.BoolVar(&o.localRefusals, "local-refusals", true, "let the limiters refuse from what they know of a bucket without a store call (limiter.WithLocalRefusals)")
	fs.BoolVar(&o.reservations, "reservations", false, "turn reservations on in every limiter (limiter.WithReservations): a busy process admits from a share it took in one write")
	fs.BoolVar(&o.verbose, "v", false, "log the limiter's warnings and shard doublings on stderr")
	fs.StringVar(&o.namespace, "namespace", "", "limiter namespace (default: a fresh one per run)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: loadtest [flags]\n\nPuts a load on the limiter and reports what each acquire cost (see docs/performance.md).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	}
	var err error
	if o.limits, err = parseLimits("limits", limits); err != nil {
		return nil, err
	}
	o.parent = o.limits
	if parent != "" {
		if !o.cascade {
			return nil, errors.New("-parent-limits needs -cascade")
		}
		if o.parent, err = parseLimits("parent-limits", parent); err != nil {
			return nil, err
		}
	}
	if o.consume, err = parseConsume(consume, o.limits); err != nil {
		return nil, err
	}
	if also != "" {
		o.also = strings.Split(also, ",")
	}
	return o, o.check()
}

func (o *options) check() error {
	switch {
	case o.store != storeMemsim && o.store != storeDynamoDBLocal && o.store != storeDynamoDB:
		return fmt.Errorf("-store %q: want %s, %s or %s", o.store, storeMemsim, storeDynamoDBLocal, storeDynamoDB)
	case o.writers < 1:
		return fmt.Errorf("-writers %d: want at least 1", o.writers)
	case o.processes < 1 || o.processes > o.writers:
		return fmt.Errorf("-processes %d: want between 1 and -writers (%d)", o.processes, o.writers)
	case o.rate < 0 || math.IsNaN(o.rate) || math.IsInf(o.rate, 0):
		return fmt.Errorf("-rate %v: want 0 (closed loop) or a positive number of acquires per second", o.rate)
	case len(o.also) > 15:
		return fmt.Errorf("-also: %d resources; at most 15 (16 with the acquire's own)", len(o.also))
	case o.keys < 1 || o.keys > 1<<20:
		return fmt.Errorf("-keys %d: want between 1 and %d", o.keys, 1<<20)
	case o.rawItem != rawItemTiny && o.rawItem != rawItemBucket:
		return fmt.Errorf("-raw-item %q: want %s or %s", o.rawItem, rawItemTiny, rawItemBucket)
	case o.duration <= 0:
		return fmt.Errorf("-duration %v: want a positive duration", o.duration)
	case o.slice <= 0:
		return fmt.Errorf("-slice %v: want a positive duration", o.slice)
	case o.warmup < 0 || o.progress < 0:
		return errors.New("-warmup and -progress must not be negative")
	case o.latency < 0:
		return fmt.Errorf("-latency %v: must not be negative", o.latency)
	case o.latency > 0 && o.store != storeMemsim:
		return fmt.Errorf("-latency is for -store %s only (a real server has its own)", storeMemsim)
	case o.partitionWCU < 0 || o.partitionWCU > 1e6:
		return fmt.Errorf("-partition-wcu %v: want between 0 (no ceiling) and 1000000", o.partitionWCU)
	case o.store == storeMemsim && (o.endpoint != "" || o.table != "" || o.createTable):
		return fmt.Errorf("-endpoint, -table and -create-table are for -store %s or %s", storeDynamoDBLocal, storeDynamoDB)
	case o.store == storeDynamoDB && o.table == "":
		return fmt.Errorf("-store %s needs -table (and -create-table to create it)", storeDynamoDB)
	}
	return nil
}
