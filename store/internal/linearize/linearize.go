// Package linearize checks that a store.Store behaves as one copy of the
// table applying one request at a time: many goroutines issue random
// conditional updates, ADDs, puts, deletes, transactions and reads on a few
// keys, each call's invocation and response are recorded, and the history
// is checked with porcupine against a sequential model built on memsim.
//
// The model applies a request to a copy of the model state (a fresh memsim
// store holding the items) and compares the response the store gave with
// memsim's: success or condition failure with the old item, the returned
// attributes, the kind of error, the cancellation reasons with their old
// items, the capacity of single-item writes. Ambiguous outcomes are the
// store's to choose: a write whose answer was lost (a timeout, an
// *store.UnavailableError with OutcomeUnknown) may have applied at any
// moment after it was sent or never, which porcupine expresses as an
// operation that returns at the end of time; a read without an answer
// says nothing and is left out; a request refused for a transaction
// conflict or a throttle applied nothing and constrains nothing else.
//
// It is a test helper: the tests of store/memsim and store/dynamo run it.
package linearize

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/storegen"
	"github.com/shardlimit/limiter/store/memsim"
)

// Config says what history to record.
type Config struct {
	// Clients is the number of goroutines issuing calls at once.
	Clients int
	// Ops is the number of calls each client makes.
	Ops int
	// Seed drives the requests drawn (each client draws from its own
	// stream).
	Seed uint64
	// NS prefixes the keys; histories that share a table need their own.
	NS string
	// TimeoutPct is the percentage of calls made with the short deadline
	// Timeout, so that some answers are lost (ambiguous outcomes).
	TimeoutPct int
	Timeout    time.Duration
	// Groups is the number of independent key groups (at least 1): six
	// keys each, in three partitions; a transaction stays within a group.
	// The checker takes the groups one at a time (their histories are
	// independent), which keeps its search short.
	Groups int
	// NoOldOnBlindDelete asks no old item of deletes without a condition.
	// DynamoDB Local needs it: concurrent unconditional DeleteItem calls
	// with ReturnValues ALL_OLD on one item each return the item (54 of 60
	// rounds of six deleters), as if each had deleted it; conditional
	// writes, and Put and Update returning old or new values, are atomic
	// there. DynamoDB applies a single item's writes one at a time.
	NoOldOnBlindDelete bool
}

// call is one request: exactly one of the inputs is set.
type call struct {
	group int
	get   *store.GetInput
	put   *store.PutInput
	upd   *store.UpdateInput
	del   *store.DeleteInput
	tx    *store.TransactWriteInput
}

// outcome is what a client saw of a call, in a canonical form.
type outcome struct {
	// unknown: the call's effect is not known (the output says nothing).
	unknown bool
	// refused: the store applied nothing and said so for a reason the
	// model does not produce (a transaction conflict, a throttle).
	refused bool
	text    string
}

// pcg draws storegen's choices from a seeded PCG.
type pcg struct{ r *rand.Rand }

func (p pcg) Draw(_ string, n int) int { return p.r.IntN(n) }

// Record issues cfg.Clients × cfg.Ops random calls on st from concurrent
// goroutines and returns the history.
func Record(st store.Store, cfg Config) []porcupine.Operation {
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	for cl := range cfg.Clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(cfg.Seed, uint64(cl)))
			gens := make([]*storegen.Gen, max(cfg.Groups, 1))
			for i := range gens {
				gens[i] = &storegen.Gen{Src: pcg{r}, NS: cfg.NS + "g" + strconv.Itoa(i)}
			}
			for range cfg.Ops {
				group := r.IntN(len(gens))
				c := draw(gens[group])
				c.group = group
				if cfg.NoOldOnBlindDelete && c.del != nil && c.del.Expr.Condition == "" {
					c.del.Return = store.ReturnNone
				}
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if cfg.TimeoutPct > 0 && r.IntN(100) < cfg.TimeoutPct {
					ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
				}
				t0 := now()
				out := run(ctx, st, c)
				t1 := now()
				cancel()
				if out.unknown {
					if c.get != nil {
						continue // a read without an answer tells nothing
					}
					t1 = math.MaxInt64 // may take effect any time after it was sent
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: cl, Input: c, Call: t0, Output: out, Return: t1})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return history
}

// draw draws one call: conditional updates and ADDs most often, puts,
// deletes, transactions and strongly consistent reads.
func draw(g *storegen.Gen) call {
	switch g.Draw("op", 20) {
	case 0, 1, 2:
		in := g.PutInput(g.Key(), false)
		return call{put: &in}
	case 3, 4, 5, 6, 7, 8, 9:
		in := g.UpdateInput(g.Key(), false)
		return call{upd: &in}
	case 10, 11:
		in := g.DeleteInput(g.Key(), false)
		return call{del: &in}
	case 12, 13, 14, 15:
		in := g.TransactInput()
		return call{tx: &in}
	}
	return call{get: &store.GetInput{Key: g.Key(), ConsistentRead: true}}
}

// run makes the call on st and returns what the client saw.
func run(ctx context.Context, st store.Store, c call) outcome {
	var b strings.Builder
	var err error
	switch {
	case c.get != nil:
		var out store.GetOutput
		out, err = st.Get(ctx, *c.get)
		if err == nil {
			b.WriteString("item=" + canon(out.Item))
		}
	case c.tx != nil:
		_, err = st.TransactWrite(ctx, *c.tx)
	default:
		var out store.WriteOutput
		switch {
		case c.put != nil:
			out, err = st.Put(ctx, *c.put)
		case c.upd != nil:
			out, err = st.Update(ctx, *c.upd)
		default:
			out, err = st.Delete(ctx, *c.del)
		}
		if err == nil {
			// Not the capacity: DynamoDB Local bills two concurrent
			// deletes of one item each for the item, where one of them,
			// in any order, found nothing to delete.
			b.WriteString("attrs=" + canon(out.Attributes))
		}
	}
	if err == nil {
		return outcome{text: "ok " + b.String()}
	}
	var cf *store.ConditionFailedError
	var tc *store.TransactionCanceledError
	switch {
	case store.OutcomeUnknown(err):
		return outcome{unknown: true, text: err.Error()}
	case errors.As(err, &cf):
		return outcome{text: "condition-failed old=" + canon(cf.Item)}
	case errors.As(err, &tc):
		b.WriteString("canceled")
		for _, r := range tc.Reasons {
			switch r.Code {
			case store.ReasonTransactionConflict, store.ReasonThrottlingError, store.ReasonProvisionedThroughputExceeded:
				return outcome{refused: true, text: "canceled: " + r.Code}
			}
			b.WriteString(" " + r.Code + "=" + canon(r.Item))
		}
		return outcome{text: b.String()}
	case errors.Is(err, store.ErrTransactionConflict), errors.Is(err, store.ErrThrottled):
		return outcome{refused: true, text: err.Error()}
	case errors.Is(err, store.ErrValidation):
		// The kind only: messages differ between backends in wording.
		return outcome{text: "validation"}
	case errors.Is(err, store.ErrUnavailable):
		// A read that failed, or a write the backend says did not apply.
		if c.get != nil {
			return outcome{unknown: true, text: err.Error()}
		}
		return outcome{refused: true, text: err.Error()}
	}
	return outcome{text: "error " + err.Error()}
}

// canon formats an item canonically: attributes in name order.
func canon(it store.Item) string {
	if it == nil {
		return "nil"
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range slices.Sorted(maps.Keys(it)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Quote(n) + ":" + it[n].String())
	}
	b.WriteByte('}')
	return b.String()
}

// state is the model's table: its items in key order, and their canonical
// form (for equality and hashing).
type state struct {
	items []store.Item
	text  string
}

func newState(items []store.Item) *state {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(canon(it))
	}
	return &state{items: items, text: b.String()}
}

// Model is the sequential specification: memsim applying one call at a
// time.
func Model() porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[int][]porcupine.Operation{}
			for _, op := range h {
				g := op.Input.(call).group
				by[g] = append(by[g], op)
			}
			var out [][]porcupine.Operation
			for _, g := range slices.Sorted(maps.Keys(by)) {
				out = append(out, by[g])
			}
			return out
		},
		Init: func() interface{} { return newState(nil) },
		Step: func(st, in, out interface{}) (bool, interface{}) {
			s, c, o := st.(*state), in.(call), out.(outcome)
			if o.refused {
				return true, s
			}
			m := memsim.New(memsim.WithPartitionLimits(0, 0), memsim.WithStream(false))
			for _, it := range s.items {
				if _, err := m.Put(context.Background(), store.PutInput{Item: it}); err != nil {
					panic("linearize: model state rejected: " + err.Error())
				}
			}
			got := run(context.Background(), m, c)
			if !o.unknown && got.text != o.text {
				return false, s
			}
			return true, newState(m.Items())
		},
		Equal: func(a, b interface{}) bool { return a.(*state).text == b.(*state).text },
		Hash: func(st interface{}) uint64 {
			h := fnv.New64a()
			h.Write([]byte(st.(*state).text))
			return h.Sum64()
		},
		DescribeOperation: func(in, out interface{}) string {
			return describe(in.(call)) + " -> " + out.(outcome).text
		},
		DescribeState: func(st interface{}) string { return st.(*state).text },
	}
}

func describe(c call) string {
	switch {
	case c.get != nil:
		return fmt.Sprintf("Get %s", c.get.Key)
	case c.put != nil:
		return fmt.Sprintf("Put %s if %q %v", canon(c.put.Item), c.put.Expr.Condition, c.put.Expr.Values)
	case c.upd != nil:
		return fmt.Sprintf("Update %s %q if %q %v", c.upd.Key, c.upd.Expr.Update, c.upd.Expr.Condition, c.upd.Expr.Values)
	case c.del != nil:
		return fmt.Sprintf("Delete %s if %q %v", c.del.Key, c.del.Expr.Condition, c.del.Expr.Values)
	}
	if c.tx == nil {
		return "nothing"
	}
	parts := make([]string, len(c.tx.Actions))
	for i, a := range c.tx.Actions {
		if a.Check != nil {
			parts[i] = fmt.Sprintf("Check %s if %q %v", a.Check.Key, a.Check.Expr.Condition, a.Check.Expr.Values)
			continue
		}
		parts[i] = describe(call{put: a.Put, upd: a.Update, del: a.Delete})
	}
	return "Transact[" + strings.Join(parts, "; ") + "]"
}

// Stats counts what a history holds.
type Stats struct {
	Ops, Unknown, Refused int
}

func stats(h []porcupine.Operation) Stats {
	var s Stats
	for _, op := range h {
		o := op.Output.(outcome)
		s.Ops++
		if o.unknown {
			s.Unknown++
		}
		if o.refused {
			s.Refused++
		}
	}
	return s
}

// Check records a history on st with cfg and fails t unless porcupine
// finds it linearizable within timeout. On a violation it writes
// porcupine's visualization to a file and names it.
func Check(t testing.TB, st store.Store, cfg Config, timeout time.Duration) Stats {
	t.Helper()
	h := Record(st, cfg)
	s := stats(h)
	res, info := porcupine.CheckOperationsVerbose(Model(), h, timeout)
	switch res {
	case porcupine.Ok:
		return s
	case porcupine.Unknown:
		t.Fatalf("linearize: no verdict within %v on %d operations (seed %d): make the history shorter", timeout, len(h), cfg.Seed)
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("linearize-%s-%d.html", cfg.NS, cfg.Seed))
	if err := porcupine.VisualizePath(Model(), info, path); err != nil {
		path = "(visualization failed: " + err.Error() + ")"
	}
	t.Fatalf("linearize: the history of %d operations (%+v, seed %d) is not linearizable; see %s\n%s",
		len(h), s, cfg.Seed, path, explain(h, info))
	return s
}

// explain shows, for each group whose history could not be linearized
// whole, the last operations of its longest partial linearization and the
// first ones (by return time) it could not place after them.
func explain(h []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var b strings.Builder
	m := Model()
	groups := m.Partition(h)
	for g, part := range info.PartialLinearizationsOperations() {
		if len(part) == 0 || g >= len(groups) {
			continue
		}
		longest := part[0]
		for _, p := range part {
			if len(p) > len(longest) {
				longest = p
			}
		}
		if len(longest) == len(groups[g]) {
			continue
		}
		done := map[int64]bool{} // by call time and client: unique enough
		for _, op := range longest {
			done[op.Call<<8|int64(op.ClientId)] = true
		}
		var rest []porcupine.Operation
		for _, op := range groups[g] {
			if !done[op.Call<<8|int64(op.ClientId)] {
				rest = append(rest, op)
			}
		}
		slices.SortFunc(rest, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
		fmt.Fprintf(&b, "group %d: %d of %d operations linearized, the last ones:\n", g, len(longest), len(groups[g]))
		for _, op := range longest[max(0, len(longest)-6):] {
			fmt.Fprintf(&b, "  [%d..%d] client %d: %s\n", op.Call, op.Return, op.ClientId, m.DescribeOperation(op.Input, op.Output))
		}
		b.WriteString(" not placed after them (first to return first):\n")
		for _, op := range rest[:min(6, len(rest))] {
			fmt.Fprintf(&b, "  [%d..%d] client %d: %s\n", op.Call, op.Return, op.ClientId, m.DescribeOperation(op.Input, op.Output))
		}
	}
	return b.String()
}

// Budget returns how many histories to check and how many calls each
// client makes: the defaults given (the short run of make test), unless
// the environment variables LINEARIZE_HISTORIES and LINEARIZE_OPS say
// otherwise (make linearize sets them for the long run).
func Budget(t testing.TB, histories, ops int) (int, int) {
	t.Helper()
	return storegen.EnvInt(t, "LINEARIZE_HISTORIES", histories), storegen.EnvInt(t, "LINEARIZE_OPS", ops)
}
