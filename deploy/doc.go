// Package deploy holds the limiter's infrastructure as files, and the test
// that keeps them from drifting from the code:
//
//	cloudformation/limiter.yaml   the table, the aggregator Lambda, its trigger and role
//	terraform/*.tf                the same as Terraform
//
// deploy_test.go parses both (gopkg.in/yaml.v3 with CloudFormation's
// short-form tags, github.com/hashicorp/hcl/v2) and checks that their table
// is the one dynamo.CreateTable creates: attribute definitions, key
// schema, index names, keys and projections, TTL attribute, stream view
// type and billing mode; that both add point-in-time recovery and deletion
// protection; and that both give the aggregator the same least-privilege
// permissions and stream trigger. It is a module of its own so that its
// parsers are not dependencies of the limiter.
package deploy
