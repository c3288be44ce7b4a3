package expr

import (
	"slices"
	"strings"
	"unicode/utf16"
)

// DynamoDB detects overlapping and conflicting update paths while building a
// tree of the paths, last action first (ExpressionValidator.buildProjectionTree),
// and reads "path two" of its message off the tree by following the first
// key, in java.util.HashMap order, at each level. This file reproduces that.

// pathString prints a resolved path as DynamoDB's messages do: [a, [1]].
func pathString(els []pathEl) string {
	s := make([]string, len(els))
	for i, e := range els {
		s[i] = e.text
		if e.kind == tINDEX {
			s[i] = "[" + e.text + "]"
		}
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// javaStringHash is java.lang.String.hashCode: over UTF-16 code units (a
// byte that is not UTF-8 counts as U+FFFD).
func javaStringHash(s string) int32 {
	var h int32
	for _, c := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(c)
	}
	return h
}

// elHash is the hashCode of the DocPath element: commons-lang
// HashCodeBuilder(8191, 127).append(field), i.e. 8191*127 + field hash.
func elHash(e pathEl) int32 {
	if e.kind == tINDEX {
		return 8191*127 + int32(e.index)
	}
	return 8191*127 + javaStringHash(e.text)
}

// javaOrder returns the iteration order of a java.util.HashMap into which
// keys with the given hashes were put in slice order (distinct keys, default
// capacity 16, load factor 0.75): by bucket of the final table, then by
// insertion within a bucket. (Buckets turned into trees, which needs eight
// colliding keys, are not modelled.)
func javaOrder(hashes []int32) []int {
	capacity := 16
	for capacity*3/4 < len(hashes) {
		capacity *= 2
	}
	order := make([]int, len(hashes))
	for i := range order {
		order[i] = i
	}
	bucket := func(i int) int {
		h := uint32(hashes[i])
		return int((h ^ h>>16) & uint32(capacity-1))
	}
	slices.SortStableFunc(order, func(a, b int) int { return bucket(a) - bucket(b) })
	return order
}

// ptNode is a node of the path tree; a nil child marks the end of a path.
type ptNode struct {
	keys     []pathEl
	children []*ptNode
}

// first returns the index of the key a HashMap iteration yields first.
func (n *ptNode) first() int {
	hashes := make([]int32, len(n.keys))
	for i, k := range n.keys {
		hashes[i] = elHash(k)
	}
	return javaOrder(hashes)[0]
}

// insert adds path to the tree rooted at root and returns DynamoDB's message
// if it overlaps or conflicts with a path already there.
func (root *ptNode) insert(path []pathEl) string {
	node := root
	for depth, e := range path {
		i := slices.Index(node.keys, e)
		if i < 0 && (len(node.keys) == 0 || node.keys[0].kind == e.kind) {
			var child *ptNode // the rest of the path, as a chain
			for _, r := range slices.Backward(path[depth+1:]) {
				child = &ptNode{keys: []pathEl{r}, children: []*ptNode{child}}
			}
			node.keys, node.children = append(node.keys, e), append(node.children, child)
			return ""
		}
		if i >= 0 && node.children[i] != nil && depth+1 < len(path) {
			node = node.children[i]
			continue
		}
		what := "overlap"
		if i < 0 {
			what = "conflict" // a list index where the tree has a name, or the reverse
		}
		// "path two": the path so far, then the first keys down to a leaf.
		two := slices.Clone(path[:depth])
		for node != nil && len(node.keys) > 0 {
			f := node.first()
			two, node = append(two, node.keys[f]), node.children[f]
		}
		return "Two document paths " + what + " with each other; must remove or rewrite one of these paths; path one: " +
			pathString(path) + ", path two: " + pathString(two)
	}
	return ""
}
