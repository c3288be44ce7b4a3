package admin_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/store/memsim"
)

// Two services share a table; one of them is retired with its namespace.
func ExampleAdmin_DeleteNamespace() {
	ctx := context.Background()
	st := memsim.New()
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		lim, err := limiter.New(st, limiter.WithNamespace(ns))
		if err != nil {
			panic(err)
		}
		req := limiter.Request{Entity: "key-1", Resource: "gpt-4", Limits: []limiter.Limit{limiter.PerMinute("rpm", 60)},
			Consume: map[string]int64{"rpm": 1}}
		if _, err := lim.Acquire(ctx, req); err != nil {
			panic(err)
		}
	}
	list, err := admin.ListNamespaces(ctx, st)
	if err != nil {
		panic(err)
	}
	for _, n := range list {
		fmt.Printf("%s: %d items, %d buckets\n", n.Name, n.Items, n.Buckets)
	}

	adm, err := admin.New(st, admin.WithNamespace("tenant-a"))
	if err != nil {
		panic(err)
	}
	deleted, err := adm.DeleteNamespace(ctx, admin.DeleteNamespaceOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("deleted %d items of %s\n", deleted.Items, deleted.Name)
	_, err = adm.Namespace(ctx)
	fmt.Println(errors.Is(err, admin.ErrUnknownNamespace))
	// Output:
	// tenant-a: 1 items, 1 buckets
	// tenant-b: 1 items, 1 buckets
	// deleted 1 items of tenant-a
	// true
}
