package expr

import (
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DynamoDB detects overlapping and conflicting update paths while building a
// tree of the paths (DynamoDB Local's ExpressionValidator.buildProjectionTree),
// one path at a time in reverse order of the actions. When a path collides,
// "path two" of the message is read off the tree by following, at each
// level, the first key of a java.util.HashMap whose keys hash as
// DocPathMapElement / DocPathListElement do. This file reproduces that,
// Java hash iteration order included, so the message names the same path.

// resolvedEl is a path element after placeholders are resolved.
type resolvedEl struct {
	list  bool   // a list index, not a map key
	name  string // map key
	index int64  // list index
}

func (e resolvedEl) String() string {
	if e.list {
		return "[" + strconv.FormatInt(e.index, 10) + "]"
	}
	return e.name
}

func pathString(els []resolvedEl) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, e := range els {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(e.String())
	}
	sb.WriteByte(']')
	return sb.String()
}

// javaStringHash is java.lang.String.hashCode: over UTF-16 code units.
func javaStringHash(s string) int32 {
	var h int32
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
		} else {
			h = 31*h + int32(r)
		}
	}
	return h
}

// elHash is the hashCode of the DocPath element: commons-lang
// HashCodeBuilder(8191, 127).append(field), i.e. 8191*127 + field hash.
func elHash(e resolvedEl) int32 {
	const base = int32(8191 * 127)
	if e.list {
		return base + int32(e.index)
	}
	return base + javaStringHash(e.name)
}

// javaOrder returns the iteration order of a java.util.HashMap into which
// keys with the given hashes were put in slice order (distinct keys, default
// capacity 16, load factor 0.75): by bucket of the final table, then by
// insertion within a bucket. (Buckets turned into trees, which needs eight
// colliding keys, are not modelled.)
func javaOrder(hashes []int32) []int {
	capacity := 16
	for n := 1; n <= len(hashes); n++ {
		if n > capacity*3/4 {
			capacity *= 2
		}
	}
	order := make([]int, len(hashes))
	for i := range order {
		order[i] = i
	}
	bucket := func(i int) int {
		h := uint32(hashes[i])
		return int((h ^ h>>16) & uint32(capacity-1))
	}
	sort.SliceStable(order, func(a, b int) bool { return bucket(order[a]) < bucket(order[b]) })
	return order
}

// ptNode is a node of the path tree; a nil child marks the end of a path.
type ptNode struct {
	keys     []resolvedEl
	children []*ptNode
}

func (n *ptNode) find(e resolvedEl) int {
	for i, k := range n.keys {
		if k == e {
			return i
		}
	}
	return -1
}

// first returns the index of the key a HashMap iteration yields first.
func (n *ptNode) first() int {
	hashes := make([]int32, len(n.keys))
	for i, k := range n.keys {
		hashes[i] = elHash(k)
	}
	return javaOrder(hashes)[0]
}

func chain(rest []resolvedEl) *ptNode {
	if len(rest) == 0 {
		return nil
	}
	return &ptNode{keys: []resolvedEl{rest[0]}, children: []*ptNode{chain(rest[1:])}}
}

// leafPath is buildPathToProjectionTreeLeaf: the first depth elements of
// path, then the first keys down from node to a leaf.
func leafPath(path []resolvedEl, depth int, node *ptNode) []resolvedEl {
	out := append([]resolvedEl(nil), path[:depth]...)
	for node != nil && len(node.keys) > 0 {
		i := node.first()
		out = append(out, node.keys[i])
		node = node.children[i]
	}
	return out
}

// insert adds path to the tree rooted at root and returns DynamoDB's message
// if it overlaps or conflicts with a path already there.
func (root *ptNode) insert(path []resolvedEl) string {
	node := root
	for depth := 0; ; depth++ {
		e := path[depth]
		i := node.find(e)
		if i < 0 {
			if len(node.keys) > 0 && node.keys[node.first()].list != e.list {
				return "Two document paths conflict with each other; must remove or rewrite one of these paths; path one: " +
					pathString(path) + ", path two: " + pathString(leafPath(path, depth, node))
			}
			node.keys = append(node.keys, e)
			node.children = append(node.children, chain(path[depth+1:]))
			return ""
		}
		child := node.children[i]
		if child != nil && depth+1 < len(path) {
			node = child
			continue
		}
		return "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: " +
			pathString(path) + ", path two: " + pathString(leafPath(path, depth, node))
	}
}
