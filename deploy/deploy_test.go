package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	"gopkg.in/yaml.v3"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store/dynamo"
)

// table is what a table definition says, in one comparable form.
type table struct {
	Attributes map[string]string // name -> type
	Keys       string            // "PK HASH, SK RANGE"
	Indexes    map[string]string // name -> "GSI2PK HASH, GSI2SK RANGE; KEYS_ONLY"
	TTL        string            // the TTL attribute, "" when off
	Stream     string            // stream view type, "" when off
	Billing    string
}

// extras are what the deploy files add to the code's table.
type extras struct {
	PointInTimeRecovery bool
	DeletionProtection  bool
}

// aggregator is what the deploy files say about the aggregator Lambda.
type aggregator struct {
	Actions          map[string][]string // statement Sid -> actions
	Runtime, Handler string
	Env              []string // variable names
	StartingPosition string
	ResponseTypes    []string
	MaxRetries       int
	FilterSK         []string // the SK values the trigger's filter admits
}

// provision is a ProvisionAPI with no table, that records what
// dynamo.CreateTable asks for.
type provision struct {
	created *dynamodb.CreateTableInput
	ttl     *types.TimeToLiveSpecification
}

func (p *provision) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	p.created = in
	d := &types.TableDescription{TableName: in.TableName, TableStatus: types.TableStatusActive, KeySchema: in.KeySchema,
		AttributeDefinitions: in.AttributeDefinitions}
	for _, g := range in.GlobalSecondaryIndexes {
		d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, types.GlobalSecondaryIndexDescription{
			IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection, IndexStatus: types.IndexStatusActive})
	}
	return &dynamodb.CreateTableOutput{TableDescription: d}, nil
}

func (p *provision) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return nil, &types.ResourceNotFoundException{}
}

func (p *provision) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	p.ttl = in.TimeToLiveSpecification
	return &dynamodb.UpdateTimeToLiveOutput{}, nil
}

// fromCode is the table dynamo.CreateTable creates.
func fromCode(t *testing.T) table {
	p := &provision{}
	if err := dynamo.CreateTable(context.Background(), p, "rate-limits"); err != nil {
		t.Fatal(err)
	}
	in := p.created
	tb := table{Attributes: map[string]string{}, Indexes: map[string]string{}, Billing: string(in.BillingMode)}
	for _, a := range in.AttributeDefinitions {
		tb.Attributes[*a.AttributeName] = string(a.AttributeType)
	}
	keyString := func(ks []types.KeySchemaElement) string {
		var parts []string
		for _, k := range ks {
			parts = append(parts, *k.AttributeName+" "+string(k.KeyType))
		}
		return strings.Join(parts, ", ")
	}
	tb.Keys = keyString(in.KeySchema)
	for _, g := range in.GlobalSecondaryIndexes {
		tb.Indexes[*g.IndexName] = keyString(g.KeySchema) + "; " + string(g.Projection.ProjectionType)
	}
	if in.StreamSpecification != nil && *in.StreamSpecification.StreamEnabled {
		tb.Stream = string(in.StreamSpecification.StreamViewType)
	}
	if p.ttl != nil && *p.ttl.Enabled {
		tb.TTL = *p.ttl.AttributeName
	}
	return tb
}

func TestDeployFilesMatchTheCode(t *testing.T) {
	want := fromCode(t)
	cfnTable, cfnExtras, cfnAgg := fromCloudFormation(t, "cloudformation/limiter.yaml")
	tfTable, tfExtras, tfAgg := fromTerraform(t, "terraform")
	for name, got := range map[string]table{"CloudFormation": cfnTable, "Terraform": tfTable} {
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s's table differs from dynamo.CreateTable's (-code +%s):\n%s", name, name, d)
		}
	}
	for name, x := range map[string]extras{"CloudFormation": cfnExtras, "Terraform": tfExtras} {
		if !x.PointInTimeRecovery || !x.DeletionProtection {
			t.Errorf("%s: point-in-time recovery %v, deletion protection %v; want both on", name, x.PointInTimeRecovery, x.DeletionProtection)
		}
	}
	if d := cmp.Diff(cfnAgg, tfAgg); d != "" {
		t.Errorf("the aggregator differs between CloudFormation and Terraform (-CloudFormation +Terraform):\n%s", d)
	}
	wantActions := map[string][]string{
		"ReadTheStream":                {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"},
		"SnapshotsDoublingPropagation": {"dynamodb:UpdateItem"},
		"FindShards":                   {"dynamodb:Query"},
		"Logs":                         {"logs:CreateLogStream", "logs:PutLogEvents"},
	}
	if d := cmp.Diff(wantActions, cfnAgg.Actions); d != "" {
		t.Errorf("the aggregator's permissions are not the least it needs (docs/aggregator.md):\n%s", d)
	}
	if len(cfnAgg.FilterSK) != 1 || cfnAgg.FilterSK[0] != keys.SKBucket {
		t.Errorf("the trigger's filter admits SK %v, want the bucket items' %q", cfnAgg.FilterSK, keys.SKBucket)
	}
	if cfnAgg.Runtime != "provided.al2023" || cfnAgg.Handler != "bootstrap" || cfnAgg.MaxRetries != -1 ||
		!contains(cfnAgg.ResponseTypes, "ReportBatchItemFailures") || !contains(cfnAgg.Env, "AGGREGATOR_TABLE") {
		t.Errorf("aggregator: %+v", cfnAgg)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// CloudFormation.

// longForm rewrites CloudFormation's short-form intrinsic tags (!Ref X,
// !GetAtt A.B, !Sub "...") into their long form ({Ref: X}, {Fn::GetAtt:
// [A, B]}, {Fn::Sub: "..."}), which yaml.v3 decodes as plain maps.
func longForm(n *yaml.Node) {
	for _, c := range n.Content {
		longForm(c)
	}
	if !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
		return
	}
	fn := n.Tag[1:]
	key := "Fn::" + fn
	if fn == "Ref" || fn == "Condition" {
		key = fn
	}
	inner := *n
	inner.Tag = ""
	if fn == "GetAtt" && inner.Kind == yaml.ScalarNode {
		res, attr, _ := strings.Cut(inner.Value, ".")
		inner = yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Value: res}, {Kind: yaml.ScalarNode, Value: attr}}}
	}
	*n = yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: key}, &inner}}
}

type m = map[string]any

// cfnResource is one resource of a CloudFormation template.
type cfnResource struct {
	Type       string `yaml:"Type"`
	Properties m      `yaml:"Properties"`
}

// readCloudFormation returns the resources of the template at path, by
// logical id, intrinsic functions in their long form.
func readCloudFormation(t *testing.T, path string) map[string]cfnResource {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	longForm(&doc)
	var tpl struct {
		Resources map[string]cfnResource `yaml:"Resources"`
	}
	if err := doc.Decode(&tpl); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tpl.Resources
}

func fromCloudFormation(t *testing.T, path string) (table, extras, aggregator) {
	resources := readCloudFormation(t, path)
	one := func(typ string) m {
		var found []m
		for _, r := range resources {
			if r.Type == typ {
				found = append(found, r.Properties)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%s: %d resources of type %s, want 1", path, len(found), typ)
		}
		return found[0]
	}
	p := one("AWS::DynamoDB::Table")
	tb := table{Attributes: map[string]string{}, Indexes: map[string]string{}, Billing: str(p["BillingMode"])}
	for _, a := range list(p["AttributeDefinitions"]) {
		tb.Attributes[str(a.(m)["AttributeName"])] = str(a.(m)["AttributeType"])
	}
	keyString := func(ks any) string {
		var parts []string
		for _, k := range list(ks) {
			parts = append(parts, str(k.(m)["AttributeName"])+" "+str(k.(m)["KeyType"]))
		}
		return strings.Join(parts, ", ")
	}
	tb.Keys = keyString(p["KeySchema"])
	for _, g := range list(p["GlobalSecondaryIndexes"]) {
		g := g.(m)
		tb.Indexes[str(g["IndexName"])] = keyString(g["KeySchema"]) + "; " + str(g["Projection"].(m)["ProjectionType"])
	}
	if s, ok := p["StreamSpecification"].(m); ok {
		tb.Stream = str(s["StreamViewType"])
	}
	if ttl, ok := p["TimeToLiveSpecification"].(m); ok && ttl["Enabled"] == true {
		tb.TTL = str(ttl["AttributeName"])
	}
	var x extras
	if pitr, ok := p["PointInTimeRecoverySpecification"].(m); ok {
		x.PointInTimeRecovery = pitr["PointInTimeRecoveryEnabled"] == true
	}
	x.DeletionProtection = p["DeletionProtectionEnabled"] == true

	agg := aggregator{Actions: map[string][]string{}}
	for _, pol := range list(one("AWS::IAM::Role")["Policies"]) {
		for _, st := range list(pol.(m)["PolicyDocument"].(m)["Statement"]) {
			st := st.(m)
			agg.Actions[str(st["Sid"])] = strList(st["Action"])
			checkResource(t, path, str(st["Sid"]), st["Resource"])
		}
	}
	fn := one("AWS::Lambda::Function")
	agg.Runtime, agg.Handler = str(fn["Runtime"]), str(fn["Handler"])
	for k := range fn["Environment"].(m)["Variables"].(m) {
		agg.Env = append(agg.Env, k)
	}
	sort.Strings(agg.Env)
	esm := one("AWS::Lambda::EventSourceMapping")
	agg.StartingPosition, agg.ResponseTypes = str(esm["StartingPosition"]), strList(esm["FunctionResponseTypes"])
	agg.MaxRetries = esm["MaximumRetryAttempts"].(int)
	for _, f := range list(esm["FilterCriteria"].(m)["Filters"]) {
		agg.FilterSK = append(agg.FilterSK, filterSK(t, str(f.(m)["Pattern"]))...)
	}
	return tb, x, agg
}

// checkResource refuses a statement on every resource.
func checkResource(t *testing.T, where, sid string, r any) {
	t.Helper()
	if s, ok := r.(string); ok && (s == "*" || s == "") {
		t.Errorf("%s: statement %s grants %q: name the resource", where, sid, s)
	}
}

// filterSK returns the SK values an event filter pattern admits.
func filterSK(t *testing.T, pattern string) []string {
	var p struct {
		Dynamodb struct {
			Keys struct{ SK struct{ S []string } }
		}
	}
	if err := json.Unmarshal([]byte(pattern), &p); err != nil {
		t.Fatalf("filter pattern %q: %v", pattern, err)
	}
	return p.Dynamodb.Keys.SK.S
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// strList reads an IAM-style "one string or a list of strings".
func strList(v any) []string {
	if s, ok := v.(string); ok {
		return []string{s}
	}
	var out []string
	for _, x := range list(v) {
		out = append(out, str(x))
	}
	return out
}

// Terraform.

// tfFile is the parsed Terraform module: its resource blocks by type and
// an evaluation context in which variables have their defaults, every
// resource attribute it references is a placeholder string, and the
// functions it calls exist.
type tfFile struct {
	resources map[string][]*hclsyntax.Block
	ctx       *hcl.EvalContext
}

func parseTerraform(t *testing.T, dir string) tfFile {
	parser := hclparse.NewParser()
	f := tfFile{resources: map[string][]*hclsyntax.Block{}}
	vars := map[string]cty.Value{}
	refs := map[string]any{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".tf") {
			continue
		}
		file, diags := parser.ParseHCLFile(dir + "/" + e.Name())
		if diags.HasErrors() {
			t.Fatalf("%s: %v", e.Name(), diags)
		}
		body := file.Body.(*hclsyntax.Body)
		for _, b := range body.Blocks {
			switch b.Type {
			case "resource":
				f.resources[b.Labels[0]] = append(f.resources[b.Labels[0]], b)
			case "variable":
				if a, ok := b.Body.Attributes["default"]; ok {
					v, diags := a.Expr.Value(nil)
					if diags.HasErrors() {
						t.Fatalf("variable %s: %v", b.Labels[0], diags)
					}
					vars[b.Labels[0]] = v
				}
			}
		}
		hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
			if sc, ok := n.(*hclsyntax.ScopeTraversalExpr); ok && sc.Traversal.RootName() != "var" {
				addRef(refs, sc.Traversal)
			}
			return nil
		})
	}
	placeholder := function.New(&function.Spec{Params: []function.Parameter{{Name: "x", Type: cty.String}}, Type: function.StaticReturnType(cty.String),
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) { return cty.StringVal("<computed>"), nil }})
	variables := map[string]cty.Value{"var": cty.ObjectVal(vars)}
	for k, v := range refs {
		variables[k] = toCty(v)
	}
	f.ctx = &hcl.EvalContext{Variables: variables,
		Functions: map[string]function.Function{"jsonencode": stdlib.JSONEncodeFunc, "filebase64sha256": placeholder}}
	return f
}

// addRef records a reference a.b.c as a nested placeholder "<a.b.c>".
func addRef(refs map[string]any, tr hcl.Traversal) {
	var names []string
	for _, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			names = append(names, s.Name)
		case hcl.TraverseAttr:
			names = append(names, s.Name)
		}
	}
	at := refs
	for i, n := range names {
		if i == len(names)-1 {
			if _, ok := at[n]; !ok {
				at[n] = "<" + strings.Join(names, ".") + ">"
			}
			return
		}
		next, ok := at[n].(map[string]any)
		if !ok {
			next = map[string]any{}
			at[n] = next
		}
		at = next
	}
}

func toCty(v any) cty.Value {
	if s, ok := v.(string); ok {
		return cty.StringVal(s)
	}
	attrs := map[string]cty.Value{}
	for k, x := range v.(map[string]any) {
		attrs[k] = toCty(x)
	}
	return cty.ObjectVal(attrs)
}

func (f tfFile) one(t *testing.T, typ string) *hclsyntax.Body {
	t.Helper()
	if len(f.resources[typ]) != 1 {
		t.Fatalf("terraform: %d resources of type %s, want 1", len(f.resources[typ]), typ)
	}
	return f.resources[typ][0].Body
}

// val evaluates attribute name of body ("" → cty.NilVal when absent).
func (f tfFile) val(t *testing.T, body *hclsyntax.Body, name string) cty.Value {
	t.Helper()
	a, ok := body.Attributes[name]
	if !ok {
		return cty.NilVal
	}
	v, diags := a.Expr.Value(f.ctx)
	if diags.HasErrors() {
		t.Fatalf("terraform: %s: %v", name, diags)
	}
	return v
}

func (f tfFile) str(t *testing.T, body *hclsyntax.Body, name string) string {
	v := f.val(t, body, name)
	if v == cty.NilVal || v.IsNull() {
		return ""
	}
	if v.Type() == cty.Bool {
		return fmt.Sprint(v.True())
	}
	if v.Type() == cty.Number {
		return v.AsBigFloat().String()
	}
	return v.AsString()
}

func blocks(body *hclsyntax.Body, typ string) []*hclsyntax.Body {
	var out []*hclsyntax.Body
	for _, b := range body.Blocks {
		if b.Type == typ {
			out = append(out, b.Body)
		}
	}
	return out
}

func fromTerraform(t *testing.T, dir string) (table, extras, aggregator) {
	f := parseTerraform(t, dir)
	p := f.one(t, "aws_dynamodb_table")
	tb := table{Attributes: map[string]string{}, Indexes: map[string]string{}, Billing: f.str(t, p, "billing_mode")}
	for _, a := range blocks(p, "attribute") {
		tb.Attributes[f.str(t, a, "name")] = f.str(t, a, "type")
	}
	keyString := func(b *hclsyntax.Body) string {
		s := f.str(t, b, "hash_key") + " HASH"
		if r := f.str(t, b, "range_key"); r != "" {
			s += ", " + r + " RANGE"
		}
		return s
	}
	tb.Keys = keyString(p)
	for _, g := range blocks(p, "global_secondary_index") {
		tb.Indexes[f.str(t, g, "name")] = keyString(g) + "; " + f.str(t, g, "projection_type")
	}
	if f.str(t, p, "stream_enabled") == "true" {
		tb.Stream = f.str(t, p, "stream_view_type")
	}
	for _, ttl := range blocks(p, "ttl") {
		if f.str(t, ttl, "enabled") == "true" {
			tb.TTL = f.str(t, ttl, "attribute_name")
		}
	}
	var x extras
	for _, pitr := range blocks(p, "point_in_time_recovery") {
		x.PointInTimeRecovery = f.str(t, pitr, "enabled") == "true"
	}
	x.DeletionProtection = f.str(t, p, "deletion_protection_enabled") == "true"

	agg := aggregator{Actions: map[string][]string{}}
	var policy struct {
		Statement []struct {
			Sid      string
			Action   any
			Resource any
		}
	}
	pol := f.one(t, "aws_iam_role_policy")
	if err := json.Unmarshal([]byte(f.str(t, pol, "policy")), &policy); err != nil {
		t.Fatal(err)
	}
	for _, st := range policy.Statement {
		agg.Actions[st.Sid] = strList(st.Action)
		checkResource(t, dir, st.Sid, st.Resource)
	}
	fn := f.one(t, "aws_lambda_function")
	agg.Runtime, agg.Handler = f.str(t, fn, "runtime"), f.str(t, fn, "handler")
	for _, env := range blocks(fn, "environment") {
		for k := range f.val(t, env, "variables").AsValueMap() {
			agg.Env = append(agg.Env, k)
		}
	}
	sort.Strings(agg.Env)
	esm := f.one(t, "aws_lambda_event_source_mapping")
	agg.StartingPosition = f.str(t, esm, "starting_position")
	for _, v := range f.val(t, esm, "function_response_types").AsValueSlice() {
		agg.ResponseTypes = append(agg.ResponseTypes, v.AsString())
	}
	n, _ := f.val(t, esm, "maximum_retry_attempts").AsBigFloat().Int64()
	agg.MaxRetries = int(n)
	for _, fc := range blocks(esm, "filter_criteria") {
		for _, flt := range blocks(fc, "filter") {
			agg.FilterSK = append(agg.FilterSK, filterSK(t, f.str(t, flt, "pattern"))...)
		}
	}
	return tb, x, agg
}
