// Package storegen draws random store requests over a small key space, for
// the tests that compare backends (memsim against DynamoDB Local, the
// structured expression path against the string path) and check concurrent
// histories. It draws from any Source: rapid in property tests, a seeded
// PCG in concurrent ones.
//
// What it draws stays inside what memsim and DynamoDB Local agree on; each
// exclusion is explained where it is made (docs/dynamodb.md lists them).
package storegen

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// Source draws the random choices: Draw returns an int in [0, n), n > 0.
// label names the choice (rapid shows it when it shrinks a failure).
type Source interface {
	Draw(label string, n int) int
}

// Gen draws requests. NS prefixes every partition key, so that runs sharing
// a table do not meet.
type Gen struct {
	Src Source
	NS  string
}

var (
	sortKeys = []string{"a1", "ab"}
	// NumAttrs are number attributes; "s" and the GSI2 keys are strings.
	// Each name keeps one type so that updates never meet a type mismatch
	// (a validation error whose cases the conformance suite covers).
	NumAttrs = []string{store.AttrTTL, "a_b", "gpt-3.5", "n"}
	strAttrs = []string{"s", store.AttrGSI2PK, store.AttrGSI2SK}
	// updateAttrs are the names an update draws. An update that writes
	// GSI2PK writes GSI2SK the same way, and Put writes both or neither:
	// an item holds both GSI2 keys or none. Exclusion: DynamoDB Local
	// charges an index write for an item holding only one of an index's
	// keys (which puts it in no index); memsim, like DynamoDB, charges none.
	updateAttrs = append(append([]string{}, NumAttrs...), "s", store.AttrGSI2PK)
)

// Draw returns an int in [0, n).
func (g *Gen) Draw(label string, n int) int { return g.Src.Draw(label, n) }

// Range returns an int in [lo, hi].
func (g *Gen) Range(label string, lo, hi int) int { return lo + g.Src.Draw(label, hi-lo+1) }

// Chance is true with pct percent probability.
func (g *Gen) Chance(label string, pct int) bool { return g.Src.Draw(label, 100) < pct }

// Key draws one of six keys: partitions NS#p0..p2, sort keys a1 and ab.
func (g *Gen) Key() store.Key {
	return store.Key{PK: g.NS + "#p" + strconv.Itoa(g.Draw("pk", 3)), SK: sortKeys[g.Draw("sk", len(sortKeys))]}
}

// DistinctKeys draws n <= 6 distinct keys.
func (g *Gen) DistinctKeys(n int) []store.Key {
	perm := []int{0, 1, 2, 3, 4, 5}
	for i := range n {
		j := i + g.Draw("keys", len(perm)-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	ks := make([]store.Key, n)
	for i := range ks {
		ks[i] = store.Key{PK: g.NS + "#p" + strconv.Itoa(perm[i]/2), SK: sortKeys[perm[i]%2]}
	}
	return ks
}

// Num draws a small number.
func (g *Gen) Num() store.Value { return store.Int(int64(g.Range("num", -3, 10))) }

func (g *Gen) strFor(name string) store.Value {
	switch name {
	case store.AttrGSI2PK:
		return store.Str(g.NS + "#g" + strconv.Itoa(g.Draw("gpk", 2)))
	case store.AttrGSI2SK:
		return store.Str([]string{"a", "ab", "b"}[g.Draw("gsk", 3)])
	}
	if g.Chance("big", 5) {
		// Pushes the item past 1 KB: two write units.
		return store.Str(strings.Repeat("z", 1000+g.Draw("bigN", 200)))
	}
	return store.Str([]string{"", "x", "xy", "y", "gpt"}[g.Draw("str", 5)])
}

func (g *Gen) valueFor(name string) store.Value {
	if slices.Contains(NumAttrs, name) {
		return g.Num()
	}
	return g.strFor(name)
}

func (g *Gen) attrName() string {
	all := append(append([]string{}, NumAttrs...), strAttrs...)
	return all[g.Draw("attr", len(all))]
}

// Item draws an item at k with a random subset of the attributes.
func (g *Gen) Item(k store.Key) store.Item {
	it := store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK)}
	for _, n := range updateAttrs {
		if g.Chance("has", 40) {
			it[n] = g.valueFor(n)
		}
	}
	if _, ok := it[store.AttrGSI2PK]; ok {
		// The GSI2 keys go together (see updateAttrs).
		it[store.AttrGSI2SK] = g.valueFor(store.AttrGSI2SK)
	}
	return it
}

// Cond draws a condition, nested at most two levels below depth 0.
func (g *Gen) Cond(depth int) store.Condition {
	if depth < 2 && g.Chance("compound", 25) {
		switch g.Draw("logic", 3) {
		case 0:
			return store.And(g.Cond(depth+1), g.Cond(depth+1))
		case 1:
			return store.Or(g.Cond(depth+1), g.Cond(depth+1))
		default:
			return store.Not(g.Cond(depth + 1))
		}
	}
	switch g.Draw("leaf", 6) {
	case 0:
		names := []string{store.AttrPK, store.AttrSK, g.attrName()}
		return store.Name(names[g.Draw("ename", 3)]).Exists()
	case 1:
		names := []string{store.AttrPK, store.AttrSK, g.attrName()}
		return store.Name(names[g.Draw("nename", 3)]).NotExists()
	case 2:
		// begins_with on a string attribute or the sort key.
		names := []string{store.AttrSK, "s", store.AttrGSI2SK}
		return store.Name(names[g.Draw("bwname", 3)]).BeginsWith([]string{"a", "x", "g", "ab"}[g.Draw("prefix", 4)])
	case 3:
		n := store.Name(NumAttrs[g.Draw("between", len(NumAttrs))])
		lo := g.Range("lo", -3, 5)
		return n.Between(store.Int(int64(lo)), store.Int(int64(lo+g.Range("width", 0, 5))))
	}
	// A comparison: a number attribute with a number, a string attribute
	// with a string, and sometimes a mismatch (false, not an error) or
	// another attribute.
	name := g.attrName()
	var rhs store.Operand = g.valueFor(name)
	switch g.Draw("rhs", 10) {
	case 0:
		if slices.Contains(NumAttrs, name) {
			rhs = store.Str("x")
		} else {
			rhs = store.Int(1)
		}
	case 1:
		rhs = store.Name(g.attrName())
	}
	cmps := []func(store.Name, store.Operand) store.Condition{store.Name.Equal, store.Name.NotEqual,
		store.Name.LessThan, store.Name.LessThanEqual, store.Name.GreaterThan, store.Name.GreaterThanEqual}
	return cmps[g.Draw("cmp", len(cmps))](store.Name(name), rhs)
}

// MaybeCond draws a condition with pct percent probability, else none.
func (g *Gen) MaybeCond(pct int) store.Condition {
	if g.Chance("hascond", pct) {
		return g.Cond(0)
	}
	return store.Condition{}
}

// Update draws 1 to 3 actions on distinct names, and rarely (overlap) the
// same name twice: DynamoDB's "Two document paths overlap" validation
// error. tx: the update is a transaction action.
func (g *Gen) Update(tx bool) store.Update {
	var u store.Update
	used := map[string]bool{}
	onlyRemoves := true
	for range g.Range("nact", 1, 3) {
		name := updateAttrs[g.Draw("uattr", len(updateAttrs))]
		if used[name] && !g.Chance("overlap", 10) {
			continue
		}
		used[name] = true
		if slices.Contains(NumAttrs, name) {
			kinds := 6
			if tx {
				// Exclusion: no SET from a missing attribute inside a
				// transaction (see the case below).
				kinds = 5
			}
			kind := g.Draw("numact", kinds)
			if kind != 4 {
				onlyRemoves = false
			}
			switch kind {
			case 0:
				u = u.Add(name, g.Num())
			case 1:
				u = u.Set(name, g.Num())
			case 2:
				u = u.SetIfNotExists(name, g.Num())
			case 3:
				u = u.SetIfNotExistsPlus(name, g.Num(), g.Num())
			case 4:
				u = u.Remove(name)
			default:
				// SET to another number attribute: a validation error when
				// that attribute is missing. Not in transactions: there
				// DynamoDB Local rejects the whole TransactWriteItems with a
				// ValidationException, memsim cancels the transaction with a
				// ValidationError reason for the action (what DynamoDB
				// answers); the kind differs, so the shape is left out.
				u = u.Set(name, store.Name(NumAttrs[g.Draw("src", len(NumAttrs))]))
			}
			continue
		}
		names := []string{name}
		if name == store.AttrGSI2PK {
			names = append(names, store.AttrGSI2SK)
		}
		kind := g.Draw("stract", 3)
		if kind != 2 {
			onlyRemoves = false
		}
		for _, name := range names {
			switch kind {
			case 0:
				u = u.Set(name, g.strFor(name))
			case 1:
				u = u.SetIfNotExists(name, g.strFor(name))
			default:
				u = u.Remove(name)
			}
		}
	}
	if onlyRemoves {
		// Exclusion (DynamoDB Local): an update made of REMOVE actions
		// only creates, on a key with no item, an item holding just the
		// key in DynamoDB Local; DynamoDB on AWS creates nothing, and so
		// does memsim (docs/dynamodb.md). Such updates get one more
		// action, on a name they do not use.
		for _, n := range NumAttrs {
			if !used[n] {
				u = u.SetIfNotExists(n, g.Num())
				break
			}
		}
	}
	return u
}

// Expr makes the Expr of u and c with store.Build. Generated builders
// always build; an error is a bug of the generator, and panics.
func (g *Gen) Expr(u store.Update, c store.Condition) store.Expr {
	e, err := store.Build(u, c)
	if err != nil {
		panic("storegen: generated expression does not build: " + err.Error())
	}
	return e
}

// PutInput draws a Put at k (tx: a transaction action).
func (g *Gen) PutInput(k store.Key, tx bool) store.PutInput {
	in := store.PutInput{Item: g.Item(k), ReturnOldOnConditionFailure: g.Chance("retold", 50)}
	switch g.Draw("putcond", 3) {
	case 0:
		in.Expr = g.Expr(store.Update{}, store.Name(store.AttrPK).NotExists())
	case 1:
		in.Expr = g.Expr(store.Update{}, g.Cond(0))
	}
	if !tx && g.Chance("putret", 50) {
		in.Return = store.ReturnAllOld
	}
	return in
}

// UpdateInput draws an Update at k.
func (g *Gen) UpdateInput(k store.Key, tx bool) store.UpdateInput {
	in := store.UpdateInput{
		Key:                         k,
		Expr:                        g.Expr(g.Update(tx), g.MaybeCond(50)),
		ReturnOldOnConditionFailure: g.Chance("retold", 50),
	}
	if !tx {
		in.Return = store.ReturnValue(g.Draw("updret", 5))
	}
	return in
}

// DeleteInput draws a Delete at k.
func (g *Gen) DeleteInput(k store.Key, tx bool) store.DeleteInput {
	in := store.DeleteInput{
		Key:                         k,
		Expr:                        g.Expr(store.Update{}, g.MaybeCond(60)),
		ReturnOldOnConditionFailure: g.Chance("retold", 50),
	}
	if !tx && g.Chance("delret", 50) {
		in.Return = store.ReturnAllOld
	}
	return in
}

// CheckInput draws a condition check at k.
func (g *Gen) CheckInput(k store.Key) store.CheckInput {
	return store.CheckInput{Key: k, Expr: g.Expr(store.Update{}, g.Cond(0)), ReturnOldOnConditionFailure: g.Chance("retold", 50)}
}

// TransactInput draws a transaction of 2 or 3 actions on distinct keys.
func (g *Gen) TransactInput() store.TransactWriteInput {
	keys := g.DistinctKeys(g.Range("nactions", 2, 3))
	var in store.TransactWriteInput
	for _, k := range keys {
		var a store.Write
		switch g.Draw("txop", 4) {
		case 0:
			p := g.PutInput(k, true)
			a.Put = &p
		case 1:
			u := g.UpdateInput(k, true)
			a.Update = &u
		case 2:
			d := g.DeleteInput(k, true)
			a.Delete = &d
		default:
			c := g.CheckInput(k)
			a.Check = &c
		}
		in.Actions = append(in.Actions, a)
	}
	return in
}

// QueryInput draws a Query of a table partition or of a GSI2 partition.
func (g *Gen) QueryInput() store.QueryInput {
	var in store.QueryInput
	if g.Chance("index", 40) {
		in = store.QueryInput{
			Index:         store.IndexGSI2,
			PartitionKey:  g.NS + "#g" + strconv.Itoa(g.Draw("qgpk", 2)),
			SortKeyPrefix: []string{"", "a", "ab", "b"}[g.Draw("qprefix", 4)],
		}
	} else {
		in = store.QueryInput{
			PartitionKey:   g.NS + "#p" + strconv.Itoa(g.Draw("qpk", 3)),
			SortKeyPrefix:  []string{"", "a", "ab", "b"}[g.Draw("qprefix", 4)],
			ConsistentRead: g.Chance("consistent", 70),
		}
	}
	if in.Index == "" && g.Chance("limit", 20) {
		// Not on the index: which of several entries with the same index
		// sort key comes first is unspecified.
		in.Limit = 1
	}
	return in
}

// EnvInt returns the positive integer in the environment variable name, or
// def when it is not set; it fails t on anything else. Campaign sizes of
// the tests that use this package come from the environment (the long
// runs of the Makefile set them).
func EnvInt(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}
