package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
)

// A manifest declares every limit stored in a namespace:
//
//	namespace: default          # optional; must match --namespace when both are given
//	scopes:
//	  - resource: gpt-4         # every entity on gpt-4
//	    limits: [rpm:1000/min, tpm:1000000/min]
//	  - entity: team-a          # team-a on every resource
//	    limits: [rpm:500/min:600]
//	  - entity: key-1           # key-1 on gpt-4
//	    resource: gpt-4
//	    limits:
//	      - rpm:100/min:150
//	      - {name: tpm, capacity: 100000, burst: 150000, refill: 50000, period: min}
//	  - entity: key-revoked     # a scope may have a mode: admit, refuse or shadow
//	    mode: refuse            # (enforce, the default, is left out)
//	  - resource: gpt-4o        # a limit tried in shadow (":shadow", or
//	    limits: [rpd:5000/day:shadow]  # shadow: true in the mapping form)
//
// A limit is a string in the limit syntax or, for a limit whose capacity
// and refill differ, a mapping. A scope has limits, a mode, or both.
// "Every stored limit" means every scope with limits or a mode stored in
// the namespace: a scope stored in the table but absent from the manifest
// is deleted by apply (its limits deleted, its mode back to enforce; plan
// and diff show it as a deletion), unless --keep-unlisted.
type manifest struct {
	file      string // its name, for errors
	Namespace string
	Scopes    []manifestScope
}

type manifestScope struct {
	Scope  admin.Scope
	Limits []limiter.Limit
	Mode   admin.Mode
	line   int
}

// parseManifest reads a manifest; errors name the file and line.
func parseManifest(name string, data []byte) (manifest, error) {
	m := manifest{file: name}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return m, fmt.Errorf("%s: %v", name, err)
	}
	if len(doc.Content) == 0 {
		return m, fmt.Errorf("%s: empty manifest; want a mapping with scopes (limiterctl limits export writes one)", name)
	}
	at := func(n *yaml.Node, format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s", name, n.Line, fmt.Sprintf(format, a...))
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return m, at(root, "want a mapping with namespace and scopes")
	}
	seen := map[admin.Scope]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "namespace":
			if v.Kind != yaml.ScalarNode {
				return m, at(v, "namespace must be a string")
			}
			m.Namespace = v.Value
		case "scopes":
			if v.Kind != yaml.SequenceNode {
				return m, at(v, "scopes must be a list")
			}
			for _, sn := range v.Content {
				s, err := parseScope(sn, at)
				if err != nil {
					return m, err
				}
				if prev, dup := seen[s.Scope]; dup {
					return m, at(sn, "%v appears twice (also at line %d)", s.Scope, prev)
				}
				seen[s.Scope] = sn.Line
				m.Scopes = append(m.Scopes, s)
			}
		default:
			return m, at(k, "unknown key %q; a manifest has namespace and scopes", k.Value)
		}
	}
	return m, nil
}

func parseScope(n *yaml.Node, at func(*yaml.Node, string, ...any) error) (manifestScope, error) {
	s := manifestScope{line: n.Line}
	if n.Kind != yaml.MappingNode {
		return s, at(n, "a scope must be a mapping with entity and/or resource, and limits")
	}
	var limitsNode *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "entity":
			s.Scope.Entity = v.Value
		case "resource":
			s.Scope.Resource = v.Value
		case "limits":
			limitsNode = v
		case "mode":
			m, err := parseMode(v.Value)
			if err != nil || v.Kind != yaml.ScalarNode {
				return s, at(v, "mode of a scope: unknown mode %q: want admit, refuse, shadow or enforce (the default)", v.Value)
			}
			s.Mode = m
		default:
			return s, at(k, "unknown key %q in a scope; want entity, resource, limits and mode", k.Value)
		}
	}
	if s.Scope.Entity == "" && s.Scope.Resource == "" {
		return s, at(n, "a scope needs an entity, a resource or both")
	}
	if limitsNode == nil && s.Mode != admin.ModeEnforce {
		return s, nil // a mode alone
	}
	if limitsNode == nil || limitsNode.Kind != yaml.SequenceNode || len(limitsNode.Content) == 0 {
		return s, at(n, "%v needs a non-empty list of limits, or a mode (admit, refuse or shadow)", s.Scope)
	}
	names := map[string]bool{}
	for _, ln := range limitsNode.Content {
		l, err := parseManifestLimit(ln)
		if err != nil {
			return s, at(ln, "%v", err)
		}
		if names[l.Name] {
			return s, at(ln, "limit %q appears twice in %v", l.Name, s.Scope)
		}
		names[l.Name] = true
		s.Limits = append(s.Limits, l)
	}
	return s, nil
}

// parseManifestLimit reads a limit: a string in the limit syntax, or a
// mapping of name, capacity, burst (optional), refill and period.
func parseManifestLimit(n *yaml.Node) (limiter.Limit, error) {
	if n.Kind == yaml.ScalarNode {
		return limiter.ParseLimit(n.Value)
	}
	if n.Kind != yaml.MappingNode {
		return limiter.Limit{}, errors.New("a limit is a string (name:rate/period[:burst], such as rpm:100/min) or a mapping of name, capacity, burst, refill, period")
	}
	var j limitJSON
	if err := n.Decode(&j); err != nil {
		return limiter.Limit{}, err
	}
	for i := 0; i < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "name", "capacity", "burst", "refill", "period", "shadow":
		default:
			return limiter.Limit{}, fmt.Errorf("unknown key %q in a limit; want name, capacity, burst, refill, period, shadow", n.Content[i].Value)
		}
	}
	p, err := parsePeriod(j.Period)
	if err != nil {
		return limiter.Limit{}, fmt.Errorf("limit %q: period %q: %v", j.Name, j.Period, err)
	}
	l := limiter.Limit{Name: j.Name, Capacity: j.Capacity, Burst: j.Burst, Refill: j.Refill, Period: p, Shadow: j.Shadow}
	if err := l.Validate(); err != nil {
		return limiter.Limit{}, err
	}
	return l, nil
}

// encodeManifest writes stored limits as a manifest.
func encodeManifest(ns string, stored []admin.StoredLimits) ([]byte, error) {
	type scopeOut struct {
		Entity   string `yaml:"entity,omitempty"`
		Resource string `yaml:"resource,omitempty"`
		Limits   []any  `yaml:"limits,flow,omitempty"`
		Mode     string `yaml:"mode,omitempty"`
	}
	out := struct {
		Namespace string     `yaml:"namespace"`
		Scopes    []scopeOut `yaml:"scopes"`
	}{Namespace: ns, Scopes: []scopeOut{}}
	for _, s := range stored {
		so := scopeOut{Entity: s.Scope.Entity, Resource: s.Scope.Resource, Mode: string(s.Mode)}
		for _, l := range s.Limits {
			if hasSpec(l) {
				so.Limits = append(so.Limits, l.String())
			} else {
				so.Limits = append(so.Limits, toJSON(l))
			}
		}
		out.Scopes = append(out.Scopes, so)
	}
	var buf bytes.Buffer
	buf.WriteString("# Every limit stored in the namespace: limiterctl limits plan|apply|diff -f FILE.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

type planMode uint8

const (
	planOnly planMode = iota
	planApply
	planDiff
)

// change is one step of a plan: a scope's limits and mode before and
// after.
type change struct {
	Action                string // add, change, delete
	Scope                 admin.Scope
	Before, After         []limiter.Limit
	ModeBefore, ModeAfter admin.Mode
}

type changeJSON struct {
	Action     string      `json:"action"`
	Entity     string      `json:"entity,omitempty"`
	Resource   string      `json:"resource,omitempty"`
	Before     []limitJSON `json:"before,omitempty"`
	After      []limitJSON `json:"after,omitempty"`
	ModeBefore string      `json:"mode_before,omitempty"`
	ModeAfter  string      `json:"mode_after,omitempty"`
}

func limitsPlan(c *cmdCtx, file string, keepUnlisted bool, mode planMode) error {
	if file == "" {
		return usageErrorf("%s needs -f FILE (the manifest; - for standard input)", c.cmd.path)
	}
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return usageErrorf("read the manifest: %v", err)
	}
	m, err := parseManifest(file, data)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if m.Namespace != "" && m.Namespace != c.namespace {
		if c.namespaceGiven() {
			return usageErrorf("%s is for namespace %q, but --namespace (or LIMITER_NAMESPACE) is %q", file, m.Namespace, c.namespace)
		}
		c.namespace = m.Namespace
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	changes, err := plan(c, adm, m, keepUnlisted)
	if err != nil {
		return err
	}
	applied := 0
	if mode == planApply {
		for _, ch := range changes {
			switch {
			case sameLimits(ch.Before, ch.After) && (ch.Before == nil) == (ch.After == nil):
			case ch.After == nil:
				err = adm.DeleteLimits(c.ctx, ch.Scope)
			default:
				err = adm.PutLimits(c.ctx, ch.Scope, ch.After)
			}
			if err == nil && ch.ModeBefore != ch.ModeAfter {
				err = adm.SetMode(c.ctx, ch.Scope, ch.ModeAfter)
			}
			if err != nil {
				return fmt.Errorf("applied %d of %d changes, then %v: %w (apply again: it is idempotent)", applied, len(changes), ch.Scope, err)
			}
			applied++
		}
	}
	if err := c.printPlan(file, changes, mode); err != nil {
		return err
	}
	if mode == planDiff && len(changes) > 0 {
		return &failure{}
	}
	return nil
}

// namespaceGiven reports whether the namespace came from the flag or the
// environment rather than the default.
func (c *cmdCtx) namespaceGiven() bool {
	given := os.Getenv("LIMITER_NAMESPACE") != ""
	c.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "namespace" })
	return given
}

// plan compares the manifest with the stored limits. The listing comes
// from the index; a manifest scope it lacks (stored a moment ago) is read
// directly, so only stored limits created within the index's lag and absent
// from the manifest can be missed.
func plan(c *cmdCtx, adm *admin.Admin, m manifest, keepUnlisted bool) ([]change, error) {
	stored, err := adm.ListLimits(c.ctx, "")
	if err != nil {
		return nil, err
	}
	have := map[admin.Scope]admin.StoredLimits{}
	for _, s := range stored {
		have[s.Scope] = s
	}
	var changes []change
	want := map[admin.Scope]bool{}
	for _, s := range m.Scopes {
		want[s.Scope] = true
		cur, ok := have[s.Scope]
		if !ok {
			cur.Limits, _, err = adm.GetLimits(c.ctx, s.Scope)
			if err == nil {
				cur.Mode, err = adm.GetMode(c.ctx, s.Scope)
			}
			if errors.Is(err, limiter.ErrInvalid) {
				return nil, usageErrorf("%s:%d: %v", m.file, s.line, err) // a bad id
			} else if err != nil {
				return nil, err
			}
			ok = cur.Limits != nil || cur.Mode != admin.ModeEnforce
		}
		ch := change{Action: "change", Scope: s.Scope, Before: cur.Limits, After: s.Limits, ModeBefore: cur.Mode, ModeAfter: s.Mode}
		switch {
		case !ok:
			ch.Action = "add"
			changes = append(changes, ch)
		case !sameLimits(cur.Limits, s.Limits) || (cur.Limits == nil) != (s.Limits == nil) || cur.Mode != s.Mode:
			changes = append(changes, ch)
		}
	}
	if !keepUnlisted {
		for _, s := range stored {
			if !want[s.Scope] {
				changes = append(changes, change{Action: "delete", Scope: s.Scope, Before: s.Limits, ModeBefore: s.Mode})
			}
		}
	}
	sort.SliceStable(changes, func(i, j int) bool { return scopeLess(changes[i].Scope, changes[j].Scope) })
	return changes, nil
}

// scopeLess orders entities' scopes (by entity, then resource) before
// resources'.
func scopeLess(a, b admin.Scope) bool {
	if (a.Entity == "") != (b.Entity == "") {
		return a.Entity != ""
	}
	if a.Entity != b.Entity {
		return a.Entity < b.Entity
	}
	return a.Resource < b.Resource
}

func (c *cmdCtx) printPlan(file string, changes []change, mode planMode) error {
	count := map[string]int{}
	for _, ch := range changes {
		count[ch.Action]++
	}
	if c.json() {
		out := mapped(changes, func(ch change) changeJSON {
			return changeJSON{ch.Action, ch.Scope.Entity, ch.Scope.Resource, limitsJSON(ch.Before), limitsJSON(ch.After),
				string(ch.ModeBefore), string(ch.ModeAfter)}
		})
		return c.printJSON(map[string]any{"namespace": c.namespace, "manifest": file, "applied": mode == planApply,
			"changes": out, "add": count["add"], "change": count["change"], "delete": count["delete"]})
	}
	if len(changes) == 0 {
		fmt.Fprintf(c.stdout, "No changes: the stored limits of namespace %q match %s.\n", c.namespace, file)
		return nil
	}
	for _, ch := range changes {
		switch ch.Action {
		case "add":
			fmt.Fprintf(c.stdout, "+ %v: %s\n", ch.Scope, describeScope(ch.After, ch.ModeAfter))
		case "change":
			fmt.Fprintf(c.stdout, "~ %v: %s -> %s\n", ch.Scope, describeScope(ch.Before, ch.ModeBefore), describeScope(ch.After, ch.ModeAfter))
		case "delete":
			fmt.Fprintf(c.stdout, "- %v: %s (stored, not in the manifest)\n", ch.Scope, describeScope(ch.Before, ch.ModeBefore))
		}
	}
	verb := map[planMode]string{planOnly: "Plan", planApply: "Applied", planDiff: "Differences"}[mode]
	fmt.Fprintf(c.stdout, "%s: %d to add, %d to change, %d to delete (namespace %q).\n", verb,
		count["add"], count["change"], count["delete"], c.namespace)
	if mode == planOnly {
		fmt.Fprintln(c.stdout, strings.TrimSpace("Run limiterctl limits apply -f "+file+" to make these changes."))
	}
	return nil
}

// describeScope writes a scope's limits and mode for a plan: the limits,
// then "mode M" unless the mode is enforce; "no limits" for none.
func describeScope(ls []limiter.Limit, m admin.Mode) string {
	d := describeLimits(ls)
	if d == "" {
		d = "no limits"
	}
	if m != admin.ModeEnforce {
		d += ", mode " + string(m)
	}
	return d
}
