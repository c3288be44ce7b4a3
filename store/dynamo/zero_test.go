package dynamo

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/shardlimit/limiter/store"
)

// Every request of a nil or zero Store, of one made with a nil client or
// an empty table name, or with a nil context, is a ValidationError naming
// the problem, made before any call (the fake API panics on any call);
// CreateTable likewise; the other functions take nil and zero input
// without a panic.
func TestStoryNilAndZeroInputsNeverPanic(t *testing.T) {
	ctx := context.Background()
	var nilCtx context.Context
	var nilStore *Store
	k := store.Key{PK: "p", SK: "s"}
	for _, c := range []struct {
		what string
		s    *Store
		ctx  context.Context
		want string
	}{
		{"nil Store", nilStore, ctx, "nil or zero"},
		{"zero Store", &Store{}, ctx, "nil or zero"},
		{"nil client", New(nil, "t"), ctx, "nil or zero"},
		{"empty table", New(&fakeAPI{}, ""), ctx, "table name"},
		{"nil ctx", New(&fakeAPI{}, "t"), nilCtx, "ctx"},
	} {
		s, ctx := c.s, c.ctx
		for name, call := range map[string]func() error{
			"Get":      func() error { _, err := s.Get(ctx, store.GetInput{Key: k}); return err },
			"BatchGet": func() error { _, err := s.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{k}}); return err },
			"Put": func() error {
				_, err := s.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("s")}})
				return err
			},
			"Update": func() error { _, err := s.Update(ctx, store.UpdateInput{Key: k}); return err },
			"Delete": func() error { _, err := s.Delete(ctx, store.DeleteInput{Key: k}); return err },
			"Query":  func() error { _, err := s.Query(ctx, store.QueryInput{PartitionKey: "p"}); return err },
			"Scan":   func() error { _, err := s.Scan(ctx, store.ScanInput{}); return err },
			"TransactWrite": func() error {
				_, err := s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{{Delete: &store.DeleteInput{Key: k}}}})
				return err
			},
			"WriteConcurrently": func() error {
				res := s.WriteConcurrently(ctx, []store.Write{{Delete: &store.DeleteInput{Key: k}}, {Delete: &store.DeleteInput{Key: k}}})
				return errors.Join(res[0].Err, res[1].Err)
			},
		} {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s %s panicked: %v", c.what, name, p)
					}
				}()
				if err := call(); !errors.Is(err, store.ErrValidation) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s %s: %v, want a ValidationError naming %s", c.what, name, err, c.want)
				}
			}()
		}
	}
	var nilDE *DecodeError
	calls := map[string]func() error{
		"CreateTable nil ctx":     func() error { return CreateTable(nilCtx, nil, "t") },
		"CreateTable nil client":  func() error { return CreateTable(ctx, nil, "t") },
		"CreateTable empty table": func() error { return CreateTable(ctx, nil, "") },
		"CheckTable(nil)":         func() error { return CheckTable(nil) },
		"New nil option":          func() error { New(&fakeAPI{}, "t", nil); return errors.New("ok") },
		"nil Store.Table":         func() error { _ = nilStore.Table(); _ = (&Store{}).Table(); return errors.New("ok") },
		"ClientOptions(nil)":      func() error { ClientOptions(nil); return errors.New("ok") },
		"NewClient zero config":   func() error { NewClient(aws.Config{}, nil); return errors.New("ok") },
		"nil DecodeError.Error":   func() error { _ = nilDE.Error(); return errors.New("ok") },
	}
	for name, call := range calls {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", name, p)
				}
			}()
			if err := call(); err == nil {
				t.Errorf("%s: no error", name)
			}
		}()
	}
}
