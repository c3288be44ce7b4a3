// Package admin is the limiter's control plane: what operators do to a
// namespace, apart from the servers that acquire (package limiter).
//
//	adm, err := admin.New(st, admin.WithNamespace("prod"))
//	err = adm.PutEntity(ctx, admin.Entity{ID: "key-1", Parent: "project-7", Cascade: true})
//	err = adm.PutLimits(ctx, admin.Scope{Entity: "key-1"}, []limiter.Limit{limiter.PerMinute("rpm", 600)})
//
// An Admin writes entities and stored limits (Put, Get, Delete, List),
// records every change in an audit trail (Audit, ContextWithPrincipal),
// lists buckets, resets them and tops them up (Buckets, ResetBucket,
// TopUp, ResumeTopUps), reads the usage
// snapshots the aggregator writes (Usage), sets a table up (InitTable,
// TableSchemaVersion) and lists, counts and deletes whole namespaces
// (ListNamespaces, Namespace, DeleteNamespace: operator commands that scan
// the table). Limiters read entities and stored limits on their
// own, through their cache: a change reaches a limiter when its cache
// entries expire (limiter.WithCacheTTL) or when it is invalidated, at once
// for the limiter given with WithLimiter. Processes that only acquire need
// no rights to write configuration (see docs/dynamodb.md, "IAM").
//
// Errors are the limiter's: bad input is a *limiter.ValidationError naming
// the field, a store failure a *limiter.UnavailableError.
package admin
