package expr

import (
	"strings"
	"unicode/utf8"
)

// The lexer reproduces DynamoDB's expression lexer (the ANTLR grammar
// DynamoDbGrammar.g4 shipped in DynamoDB Local): whitespace [ \t\n\r]+ is a
// hidden token; keywords are case-insensitive and win over identifiers of
// the same length (so "set" is never an attribute name but "setx" is);
// identifiers are [A-Za-z][A-Za-z0-9_]*; "#" and ":" placeholders need at
// least one [A-Za-z0-9_]; list indexes are 0 or [1-9][0-9]*; any other
// character is a one-character UNKNOWN token that the parser rejects.

type tokKind uint8

const (
	tEOF tokKind = iota
	tComma
	tLParen
	tRParen
	tDot
	tLBrack
	tRBrack
	tEQ
	tNE
	tLT
	tLE
	tGT
	tGE
	tPlus
	tMinus
	tIN
	tBETWEEN
	tNOT
	tAND
	tOR
	tSET
	tADD
	tDELETE
	tREMOVE
	tINDEX
	tID
	tNAME  // #placeholder
	tVALUE // :placeholder
	tUNKNOWN
)

type token struct {
	kind       tokKind
	start, end int32 // byte offsets in the source
}

func isIDStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIDChar(c byte) bool  { return isIDStart(c) || c >= '0' && c <= '9' || c == '_' }
func isWS(c byte) bool      { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

var keywords = [...]struct {
	word string
	kind tokKind
}{
	{"IN", tIN}, {"BETWEEN", tBETWEEN}, {"NOT", tNOT}, {"AND", tAND}, {"OR", tOR},
	{"SET", tSET}, {"ADD", tADD}, {"DELETE", tDELETE}, {"REMOVE", tREMOVE},
}

// lex splits src into tokens, the last of which is tEOF. Whitespace is not
// returned: the hidden whitespace between two tokens is the source text
// between them.
func lex(src string) []token {
	toks := make([]token, 0, len(src)/3+2)
	i := 0
	for i < len(src) {
		c := src[i]
		if isWS(c) {
			i++
			continue
		}
		start := i
		kind := tUNKNOWN
		switch {
		case isIDStart(c):
			for i < len(src) && isIDChar(src[i]) {
				i++
			}
			kind = tID
			word := src[start:i]
			for _, k := range keywords {
				if len(word) == len(k.word) && strings.EqualFold(word, k.word) {
					kind = k.kind
					break
				}
			}
		case c == '0':
			i++
			kind = tINDEX
		case c >= '1' && c <= '9':
			for i < len(src) && src[i] >= '0' && src[i] <= '9' {
				i++
			}
			kind = tINDEX
		case c == '#' || c == ':':
			j := i + 1
			for j < len(src) && isIDChar(src[j]) {
				j++
			}
			if j > i+1 {
				i = j
				kind = tNAME
				if c == ':' {
					kind = tVALUE
				}
			} else {
				i++
			}
		default:
			i++
			switch c {
			case ',':
				kind = tComma
			case '(':
				kind = tLParen
			case ')':
				kind = tRParen
			case '.':
				kind = tDot
			case '[':
				kind = tLBrack
			case ']':
				kind = tRBrack
			case '=':
				kind = tEQ
			case '+':
				kind = tPlus
			case '-':
				kind = tMinus
			case '<':
				kind = tLT
				if i < len(src) && src[i] == '>' {
					i++
					kind = tNE
				} else if i < len(src) && src[i] == '=' {
					i++
					kind = tLE
				}
			case '>':
				kind = tGT
				if i < len(src) && src[i] == '=' {
					i++
					kind = tGE
				}
			default:
				if c >= utf8.RuneSelf {
					_, n := utf8.DecodeRuneInString(src[start:])
					i = start + n
				}
			}
		}
		toks = append(toks, token{kind: kind, start: int32(start), end: int32(i)})
	}
	toks = append(toks, token{kind: tEOF, start: int32(len(src)), end: int32(len(src))})
	return toks
}

// tokenText returns the text of a token as DynamoDB prints it: "<EOF>" for
// the end when eofText is set, and the replacement character for a byte that
// is not valid UTF-8 (DynamoDB receives JSON, which cannot carry one).
func tokenText(src string, t token, eofText bool) string {
	if t.kind == tEOF {
		if eofText {
			return "<EOF>"
		}
		return ""
	}
	return cleanUTF8(src[t.start:t.end])
}

func cleanUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// syntaxMessage formats DynamoDB's syntax error for the token at index i:
// `Syntax error; token: "<tok>", near: "<prev><ws><tok><ws><next>"`, where
// the hidden whitespace on either side is included verbatim (DynamoDB
// Local's ExpressionErrorListener).
func syntaxMessage(src string, toks []token, i int) string {
	cur := toks[i]
	var near strings.Builder
	leftStart := int32(0)
	if i > 0 {
		prev := toks[i-1]
		near.WriteString(tokenText(src, prev, false))
		leftStart = prev.end
	}
	near.WriteString(cleanUTF8(src[leftStart:cur.start]))
	if cur.kind != tEOF {
		near.WriteString(tokenText(src, cur, false))
		next := toks[i+1]
		near.WriteString(cleanUTF8(src[cur.end:next.start]))
		near.WriteString(tokenText(src, next, false))
	}
	return `Syntax error; token: "` + tokenText(src, cur, true) + `", near: "` + near.String() + `"`
}

// utf16Len is the length of s in UTF-16 code units, the unit Java's
// String.length() counts (DynamoDB's expression size limit, size()).
func utf16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
