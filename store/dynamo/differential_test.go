package dynamo_test

import (
	cmp2 "cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
	"github.com/shardlimit/limiter/store/internal/storegen"
	"github.com/shardlimit/limiter/store/memsim"
)

// TestDifferential runs random sequences of the operations the limiter uses
// on memsim and on DynamoDB Local, and requires the same answers from both:
// items and attributes, the kind of every error, the old item of a failed
// condition, the cancellation reasons of a transaction, and the capacity
// consumed by every successful call. docs/dynamodb.md ("Differential test")
// describes what is generated and what is left out.
//
// DIFF_SEQUENCES (default 200) sets the number of sequences unless
// -rapid.checks is given, DIFF_MAX_OPS (default 30) the length of the longest
// sequence. make differential runs the long campaign.
func TestDifferential(t *testing.T) {
	srv := dynamotest.Start(t)
	table := srv.NewTable(t)
	ddb := dynamo.New(srv.Client, table)

	setRapidChecks(t, storegen.EnvInt(t, "DIFF_SEQUENCES", 200))
	maxOps := storegen.EnvInt(t, "DIFF_MAX_OPS", 30)

	var seqs, ops, runs atomic.Int64
	start := time.Now()
	rapid.Check(t, func(rt *rapid.T) {
		// Every run (shrinking runs included) gets its own keys in the
		// shared table, so it starts from an empty table as memsim does.
		g := newDiffGen(rt, "r"+strconv.FormatInt(runs.Add(1), 10))
		mem := memsim.New()
		n := rapid.IntRange(1, maxOps).Draw(rt, "ops")
		for i := range n {
			o := g.op()
			ctx := context.Background()
			want := o.run(ctx, mem)
			got := o.run(ctx, ddb)
			ops.Add(1)
			if d := cmp.Diff(want, got, diffValueCmp); d != "" {
				rt.Fatalf("op %d: %s\nmemsim: %s\ndynamodb: %s\ndiff (-memsim +dynamodb):\n%s", i, o.desc, shortenZ(fmt.Sprintf("%+v", want)), shortenZ(fmt.Sprintf("%+v", got)), shortenZ(d))
			}
			rt.Logf("op %d: %s -> %s", i, o.desc, shortenZ(fmt.Sprintf("%+v", got)))
		}
		seqs.Add(1)
	})
	t.Logf("differential: %d sequences, %d operations, %s", seqs.Load(), ops.Load(), time.Since(start).Round(time.Millisecond))
}

// diffValueCmp compares store.Values (whose fields are unexported).
var diffValueCmp = cmp.Comparer(store.Value.Equal)

// setRapidChecks makes n the number of rapid checks unless -rapid.checks was
// given on the command line.
func setRapidChecks(t *testing.T, n int) {
	t.Helper()
	explicit := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "rapid.checks" {
			explicit = true
		}
	})
	if explicit {
		return
	}
	prev := flag.Lookup("rapid.checks").Value.String()
	if err := flag.Set("rapid.checks", strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("rapid.checks", prev) })
}

// diffResult is what the test compares of one call. Consumed is compared
// only for calls that succeeded: DynamoDB reports no capacity with an error
// and store/dynamo estimates it (see the package documentation).
type diffResult struct {
	Err      string // "" or the error's kind
	Item     store.Item
	Items    []store.Item
	CondItem store.Item // *store.ConditionFailedError.Item
	Reasons  []diffReason
	Consumed *store.Capacity
}

func (r diffResult) String() string {
	c := "-"
	if r.Consumed != nil {
		c = fmt.Sprintf("%+v", *r.Consumed)
	}
	return fmt.Sprintf("{Err:%q Item:%v Items:%v CondItem:%v Reasons:%+v Consumed:%s}", r.Err, r.Item, r.Items, r.CondItem, r.Reasons, c)
}

type diffReason struct {
	Code string
	Item store.Item
}

func errKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, store.ErrConditionFailed):
		return "ConditionFailed"
	case errors.Is(err, store.ErrTransactionCanceled):
		return "TransactionCanceled"
	case errors.Is(err, store.ErrTransactionConflict):
		return "TransactionConflict"
	case errors.Is(err, store.ErrValidation):
		// Only the kind: the messages' wording is not part of the contract.
		return "Validation"
	case errors.Is(err, store.ErrThrottled):
		return "Throttled"
	case errors.Is(err, store.ErrUnavailable):
		return "Unavailable: " + err.Error()
	}
	return "other: " + err.Error()
}

func result(err error, consumed store.Capacity) diffResult {
	r := diffResult{Err: errKind(err)}
	if err == nil {
		r.Consumed = &consumed
		return r
	}
	var cf *store.ConditionFailedError
	if errors.As(err, &cf) {
		r.CondItem = cf.Item
	}
	var tc *store.TransactionCanceledError
	if errors.As(err, &tc) {
		for _, rs := range tc.Reasons {
			r.Reasons = append(r.Reasons, diffReason{Code: rs.Code, Item: rs.Item})
		}
	}
	return r
}

// diffOp is one generated call, runnable on any store.
type diffOp struct {
	desc string
	run  func(ctx context.Context, st store.Store) diffResult
}

// diffGen draws operations over a small key space (see storegen):
// partitions ns#p0..p2, sort keys a1 and ab, index partitions ns#g0..g1.
type diffGen struct {
	storegen.Gen
	rt *rapid.T
}

// rapidSource draws through rapid, which records and shrinks the choices.
type rapidSource struct{ rt *rapid.T }

func (r rapidSource) Draw(label string, n int) int { return rapid.IntRange(0, n-1).Draw(r.rt, label) }

func newDiffGen(rt *rapid.T, ns string) *diffGen {
	g := &diffGen{Gen: storegen.Gen{Src: rapidSource{rt}, NS: ns}, rt: rt}
	return g
}

func (g *diffGen) op() diffOp {
	o := g.op1()
	o.desc = shortenZ(o.desc)
	return o
}

// shortenZ abbreviates the long strings that push items past 1 KB in logs.
func shortenZ(s string) string {
	return longZ.ReplaceAllStringFunc(s, func(z string) string { return fmt.Sprintf("z×%d", len(z)) })
}

var longZ = regexp.MustCompile(`z{20,}`)

func (g *diffGen) op1() diffOp {
	switch g.Draw("op", 10) {
	case 0, 1:
		in := g.PutInput(g.Key(), false)
		return diffOp{fmt.Sprintf("Put %+v", in), func(ctx context.Context, st store.Store) diffResult {
			out, err := st.Put(ctx, in)
			r := result(err, out.Consumed)
			r.Item = out.Attributes
			return r
		}}
	case 2, 3, 4:
		in := g.UpdateInput(g.Key(), false)
		return diffOp{fmt.Sprintf("Update %+v", in), func(ctx context.Context, st store.Store) diffResult {
			out, err := st.Update(ctx, in)
			r := result(err, out.Consumed)
			r.Item = out.Attributes
			return r
		}}
	case 5:
		in := g.DeleteInput(g.Key(), false)
		return diffOp{fmt.Sprintf("Delete %+v", in), func(ctx context.Context, st store.Store) diffResult {
			out, err := st.Delete(ctx, in)
			r := result(err, out.Consumed)
			r.Item = out.Attributes
			return r
		}}
	case 6:
		if g.Chance("batch", 50) {
			in := store.BatchGetInput{Keys: g.DistinctKeys(g.Range("nkeys", 1, 4)), ConsistentRead: g.Chance("consistent", 70)}
			return diffOp{fmt.Sprintf("BatchGet %+v", in), func(ctx context.Context, st store.Store) diffResult {
				out, err := st.BatchGet(ctx, in)
				r := result(err, out.Consumed)
				r.Items = out.Items
				for _, it := range out.Items {
					if it == nil {
						// Exclusion: DynamoDB Local reports no read units
						// for the keys of a BatchGet that have no item;
						// memsim charges the minimum for each, as
						// DynamoDB bills a read of a missing item.
						r.Consumed = nil
					}
				}
				return r
			}}
		}
		in := store.GetInput{Key: g.Key(), ConsistentRead: g.Chance("consistent", 70)}
		return diffOp{fmt.Sprintf("Get %+v", in), func(ctx context.Context, st store.Store) diffResult {
			out, err := st.Get(ctx, in)
			r := result(err, out.Consumed)
			r.Item = out.Item
			return r
		}}
	case 7, 8:
		in := g.TransactInput()
		return diffOp{fmt.Sprintf("TransactWrite %s", describeTx(in)), func(ctx context.Context, st store.Store) diffResult {
			out, err := st.TransactWrite(ctx, in)
			r := result(err, out.Consumed)
			// Exclusion: the capacity of a committed transaction is not
			// compared. DynamoDB Local under-reports it (1 write unit for a
			// transaction deleting two missing items, where DynamoDB bills
			// 2 per action, as memsim does: 4).
			r.Consumed = nil
			return r
		}}
	}
	in := g.QueryInput()
	return diffOp{fmt.Sprintf("Query %+v", in), func(ctx context.Context, st store.Store) diffResult {
		out, err := st.Query(ctx, in)
		r := result(err, out.Consumed)
		r.Items = out.Items
		if in.Index != "" {
			// Exclusion: DynamoDB returns index entries that share an
			// index sort key in an unspecified order (DynamoDB Local: not
			// by table key, as memsim does); compare them ordered by
			// index sort key, then table key.
			slices.SortStableFunc(r.Items, func(a, b store.Item) int {
				return cmp2.Or(
					strings.Compare(a[store.AttrGSI2SK].String(), b[store.AttrGSI2SK].String()),
					strings.Compare(a[store.AttrPK].String(), b[store.AttrPK].String()),
					strings.Compare(a[store.AttrSK].String(), b[store.AttrSK].String()))
			})
		}
		if len(r.Items) == 0 {
			// memsim answers an empty slice, store/dynamo nil: the
			// contract does not tell them apart.
			r.Items = nil
			if r.Consumed != nil {
				// Exclusion: DynamoDB Local reports 0 read units for a
				// Query that returns nothing; memsim charges the minimum
				// (0.5 eventually consistent, 1 strongly consistent), as
				// DynamoDB bills a Query that matches no item.
				r.Consumed = nil
			}
		}
		return r
	}}
}

func describeTx(in store.TransactWriteInput) string {
	var b strings.Builder
	for i, a := range in.Actions {
		if i > 0 {
			b.WriteString("; ")
		}
		switch {
		case a.Put != nil:
			fmt.Fprintf(&b, "Put %+v", *a.Put)
		case a.Update != nil:
			fmt.Fprintf(&b, "Update %+v", *a.Update)
		case a.Delete != nil:
			fmt.Fprintf(&b, "Delete %+v", *a.Delete)
		case a.Check != nil:
			fmt.Fprintf(&b, "Check %+v", *a.Check)
		}
	}
	return "[" + b.String() + "]"
}
