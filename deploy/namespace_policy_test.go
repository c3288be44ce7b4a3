package deploy_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shardlimit/limiter/internal/keys"
)

// statement is one statement of a namespace's data-plane policy, in one
// comparable form.
type statement struct {
	Actions []string
	// Resource is "table" or "index/GSI3".
	Resource string
	// Operator is the condition's operator, LeadingKeys its values with
	// the namespace written as {ns}.
	Operator    string
	LeadingKeys []string
}

// resourceKind reduces an ARN expression to what it names.
func resourceKind(t *testing.T, arn string) string {
	switch {
	case strings.HasSuffix(arn, "/index/GSI3"):
		return "index/GSI3"
	case strings.HasSuffix(arn, "table/${TableName}"), arn == "<aws_dynamodb_table.rate_limits.arn>":
		return "table"
	}
	t.Fatalf("resource %q is neither the table nor its GSI3", arn)
	return ""
}

func namespacePolicyFromCloudFormation(t *testing.T, path string) map[string]statement {
	resources := readCloudFormation(t, path)
	if len(resources) != 1 {
		t.Fatalf("%s: %d resources, want the policy alone", path, len(resources))
	}
	sub := func(v any) string { // a string or {Fn::Sub: string}
		if s, ok := v.(m); ok {
			v = s["Fn::Sub"]
		}
		return strings.ReplaceAll(str(v), "${Namespace}", "{ns}")
	}
	out := map[string]statement{}
	for _, r := range resources {
		if r.Type != "AWS::IAM::ManagedPolicy" {
			t.Fatalf("%s: a %s, want an AWS::IAM::ManagedPolicy", path, r.Type)
		}
		for _, st := range list(r.Properties["PolicyDocument"].(m)["Statement"]) {
			st := st.(m)
			s := statement{Actions: strList(st["Action"]), Resource: resourceKind(t, sub(st["Resource"]))}
			for op, c := range st["Condition"].(m) {
				s.Operator = op
				for _, v := range list(c.(m)["dynamodb:LeadingKeys"]) {
					s.LeadingKeys = append(s.LeadingKeys, sub(v))
				}
			}
			out[str(st["Sid"])] = s
		}
	}
	return out
}

func namespacePolicyFromTerraform(t *testing.T, dir string) map[string]statement {
	f := parseTerraform(t, dir)
	var policy struct {
		Statement []struct {
			Sid       string
			Action    any
			Resource  string
			Condition map[string]map[string][]string
		}
	}
	if err := json.Unmarshal([]byte(f.str(t, f.one(t, "aws_iam_policy"), "policy")), &policy); err != nil {
		t.Fatal(err)
	}
	out := map[string]statement{}
	for _, st := range policy.Statement {
		s := statement{Actions: strList(st.Action), Resource: resourceKind(t, st.Resource)}
		for op, c := range st.Condition {
			s.Operator = op
			for _, v := range c["dynamodb:LeadingKeys"] {
				s.LeadingKeys = append(s.LeadingKeys, strings.ReplaceAll(v, "<each.key>", "{ns}"))
			}
		}
		out[st.Sid] = s
	}
	return out
}

// like is IAM's StringLike: '*' matches any run of characters, '?' any
// one character.
func like(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if like(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && like(pattern[1:], s[1:])
	}
	return s != "" && s[0] == pattern[0] && like(pattern[1:], s[1:])
}

// allowed reports whether every key matches one of the statement's
// LeadingKeys for namespace ns (ForAllValues:StringLike).
func (s statement) allowed(ns string, pks ...string) bool {
	for _, pk := range pks {
		ok := false
		for _, p := range s.LeadingKeys {
			if like(strings.ReplaceAll(p, "{ns}", ns), pk) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// namespaceKeys returns the partition keys of every kind of item of ns in
// the table, and of its index entries.
func namespaceKeys(ns string) (table, index []string) {
	b := keys.Bucket{Namespace: ns, Entity: "key-1", Resource: "gpt-4/turbo"}
	table = []string{b.PK(), b.WithShard(7).PK(), keys.EntityPK(ns, "key-1"), keys.ResourceLimits(ns, "gpt-4/turbo").PK,
		keys.AuditPK(ns, "key-1", ""), keys.AuditPK(ns, "", "gpt-4/turbo"), keys.UsagePK(ns, "key-1")}
	for _, a := range b.IndexAttrs() {
		if strings.HasSuffix(a.Name, "PK") {
			index = append(index, a.Value)
		}
	}
	index = append(index, keys.ConfigIndexPK(ns), b.ShardsQuery().PartitionKey)
	return table, index
}

func TestNamespacePolicyConfinesTheDataPlane(t *testing.T) {
	cfn := namespacePolicyFromCloudFormation(t, "cloudformation/namespace-policy.yaml")
	tf := namespacePolicyFromTerraform(t, "terraform")
	if d := cmp.Diff(cfn, tf); d != "" {
		t.Fatalf("the namespace policy differs between CloudFormation and Terraform (-CloudFormation +Terraform):\n%s", d)
	}
	items, shards := cfn["NamespaceItems"], cfn["NamespaceShards"]
	for sid, s := range cfn {
		sort.Strings(s.Actions)
		if s.Operator != "ForAllValues:StringLike" {
			t.Errorf("%s: condition operator %q, want ForAllValues:StringLike (every key of a request must match)", sid, s.Operator)
		}
	}
	// The data plane's actions (docs/dynamodb.md, IAM), and no more.
	want := map[string]statement{
		"NamespaceItems": {Actions: []string{"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
			Resource: "table", Operator: "ForAllValues:StringLike", LeadingKeys: items.LeadingKeys},
		"NamespaceShards": {Actions: []string{"dynamodb:Query"}, Resource: "index/GSI3",
			Operator: "ForAllValues:StringLike", LeadingKeys: shards.LeadingKeys},
	}
	if d := cmp.Diff(want, cfn); d != "" {
		t.Errorf("namespace policy (-want +got):\n%s", d)
	}

	for _, ns := range []string{"tenant-a", "A.b_9"} {
		table, index := namespaceKeys(ns)
		for _, pk := range table {
			if !items.allowed(ns, pk) {
				t.Errorf("namespace %s: table key %q does not match %v", ns, pk, items.LeadingKeys)
			}
		}
		if !items.allowed(ns, keys.Schema().PK) {
			t.Errorf("namespace %s: the schema-version item %q does not match %v", ns, keys.Schema().PK, items.LeadingKeys)
		}
		for _, pk := range index {
			if !shards.allowed(ns, pk) {
				t.Errorf("namespace %s: index key %q does not match %v", ns, pk, shards.LeadingKeys)
			}
		}
		// Nothing of a neighbouring namespace: longer, shorter, other.
		for _, other := range []string{ns + "x", ns[:len(ns)-1], "other"} {
			otherTable, otherIndex := namespaceKeys(other)
			for _, pk := range append(otherTable, otherIndex...) {
				if items.allowed(ns, pk) || shards.allowed(ns, pk) {
					t.Errorf("namespace %s's policy lets key %q of namespace %s through", ns, pk, other)
				}
			}
		}
	}
	if shards.allowed("tenant-a", keys.Schema().PK) {
		t.Errorf("the index statement admits %q, which no index holds", keys.Schema().PK)
	}
}
