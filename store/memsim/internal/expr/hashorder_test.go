package expr

import (
	"strings"
	"testing"
)

// DynamoDB names the other path of an overlap or conflict, and picks which
// of several failing actions it reports, by walking a java.util.HashMap of
// path elements: these tests pin that order where it depends on the table
// growing past 12 keys, on a list index's hash, and on how a byte that is
// not UTF-8 is hashed.

// TestOverlapNamesTheFirstKeyOfTwelve: twelve later actions fill a table
// of 16 buckets; the overlapping action itself is not a key of it (counted,
// it would grow the table to 32 buckets and name another path).
func TestOverlapNamesTheFirstKeyOfTwelve(t *testing.T) {
	u := "SET x = :v, n407 = :v, n408 = :v, n409 = :v, n410 = :v, n411 = :v, n412 = :v, n413 = :v, n414 = :v, n415 = :v, n416 = :v, n417 = :v, x = :v"
	_, err := mustParse(t, u, "").Bind(nil, values{":v": N(1)}, isKey)
	wantMessage(t, err, "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [x], path two: [n409]")
}

// TestConflictNamesAListIndexByItsHash: a list index hashes as 8191*127 +
// the index.
func TestConflictNamesAListIndexByItsHash(t *testing.T) {
	_, err := mustParse(t, "SET a.x = :v, a[0] = :v, a[1] = :v", "").Bind(nil, values{":v": N(1)}, isKey)
	wantMessage(t, err, "Invalid UpdateExpression: Two document paths conflict with each other; must remove or rewrite one of these paths; path one: [a, x], path two: [a, [1]]")
}

// TestInvalidUTF8HashesAsTheReplacementCharacter: DynamoDB receives JSON,
// in which a byte that is not UTF-8 arrives as U+FFFD; the hash that picks
// "path two" counts it so.
func TestInvalidUTF8HashesAsTheReplacementCharacter(t *testing.T) {
	_, err := mustParse(t, "SET x = :v, #n = :v, x = :v", "").Bind(names{"#n": "\x80f"}, values{":v": N(1)}, isKey)
	wantMessage(t, err, "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [x], path two: [\x80f]")
}

// TestFirstFaultCountsEachAttributeOnce: of several failing actions, the
// one reported is the first, in HashMap order, of the top-level attributes
// the update writes, each counted once however many of its nested paths
// the update names: twelve attributes, so a table of 16 buckets.
func TestFirstFaultCountsEachAttributeOnce(t *testing.T) {
	acts := []string{"a.c = :v", "a.b = :v", "z = q"}
	for _, c := range "bcdefghijk" {
		acts = append(acts, string(c)+" = :v")
	}
	b := bind(t, "SET "+strings.Join(acts, ", "), "", nil, values{":v": N(1)})
	_, _, err := b.Apply(item("PK", S("p"), "SK", S("s")), testKey)
	wantMessage(t, err, msgAttrNotFound)
}
