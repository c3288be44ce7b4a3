package expr

import (
	"slices"
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

// Token kinds. Those from tComma to tMinus are in the order of punctuation.
const (
	tEOF tokKind = iota
	tComma
	tLParen
	tRParen
	tDot
	tLBrack
	tRBrack
	tPlus
	tMinus
	tCmp // a comparator: = <> < <= > >=
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

const punctuation = ",().[]+-"

var keywords = map[string]tokKind{"IN": tIN, "BETWEEN": tBETWEEN, "NOT": tNOT, "AND": tAND, "OR": tOR,
	"SET": tSET, "ADD": tADD, "DELETE": tDELETE, "REMOVE": tREMOVE}

// sectionNames are the keywords of update sections, by kind - tSET.
var sectionNames = [...]string{"SET", "ADD", "DELETE", "REMOVE"}

type token struct {
	kind       tokKind
	start, end int32 // byte offsets in the source
}

func isIDStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIDChar(c byte) bool  { return isIDStart(c) || c >= '0' && c <= '9' || c == '_' }

// lex splits src into tokens, the last of which is tEOF. Whitespace is not
// returned: the hidden whitespace between two tokens is the source text
// between them.
func lex(src string) []token {
	toks := make([]token, 0, len(src)/3+2)
	for i := 0; i < len(src); {
		c := src[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			i++
			continue
		}
		start, kind := i, tUNKNOWN
		span := func(ok func(byte) bool) {
			for i++; i < len(src) && ok(src[i]); i++ {
			}
		}
		switch {
		case isIDStart(c):
			span(isIDChar)
			kind = tID
			if k, ok := keywords[strings.ToUpper(src[start:i])]; ok {
				kind = k
			}
		case c >= '0' && c <= '9':
			span(func(d byte) bool { return c != '0' && d >= '0' && d <= '9' })
			kind = tINDEX
		case c == '#' || c == ':':
			if span(isIDChar); i > start+1 && c == '#' {
				kind = tNAME
			} else if i > start+1 {
				kind = tVALUE
			}
		case strings.IndexByte(punctuation, c) >= 0:
			i, kind = i+1, tComma+tokKind(strings.IndexByte(punctuation, c))
		case c == '=' || c == '<' || c == '>':
			span(func(d byte) bool { return i == start+1 && (c != '=' && d == '=' || c == '<' && d == '>') })
			kind = tCmp
		default:
			_, n := utf8.DecodeRuneInString(src[start:])
			i += n
		}
		toks = append(toks, token{kind: kind, start: int32(start), end: int32(i)})
	}
	return append(toks, token{kind: tEOF, start: int32(len(src)), end: int32(len(src))})
}

// cleanUTF8 replaces bytes that are not valid UTF-8 with the replacement
// character, as DynamoDB prints them (it receives JSON, which cannot carry
// them).
func cleanUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// syntaxMessage formats DynamoDB's syntax error for the token at index i:
// `Syntax error; token: "<tok>", near: "<prev><ws><tok><ws><next>"`, where
// the hidden whitespace on either side is included verbatim (DynamoDB
// Local's ExpressionErrorListener).
func syntaxMessage(src string, toks []token, i int) string {
	var near strings.Builder
	pos, tok := int32(0), "<EOF>"
	if i > 0 {
		pos = toks[i-1].start
	}
	for _, t := range toks[max(i-1, 0):min(i+2, len(toks))] {
		near.WriteString(cleanUTF8(src[pos:t.start]) + cleanUTF8(src[t.start:t.end]))
		pos = t.end
	}
	if t := toks[i]; t.kind != tEOF {
		tok = cleanUTF8(src[t.start:t.end])
	}
	return `Syntax error; token: "` + tok + `", near: "` + near.String() + `"`
}

// utf16Len is the length of s in UTF-16 code units, the unit Java's
// String.length() counts (DynamoDB's expression size limit, size()).
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// isReserved reports whether an identifier is one of DynamoDB's reserved
// words, whatever its case.
func isReserved(id string) bool {
	_, ok := slices.BinarySearch(reservedWords, strings.ToUpper(id))
	return ok
}

// reservedWords is the reserved-word list of DynamoDB Local's expression
// parser (com.amazonaws.services.dynamodbv2.parser.ReservedKeywords), in
// order: the list published at
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ReservedWords.html
// without CONVERT and SIZE and with REMOVE.
var reservedWords = strings.Fields(reservedList)

const reservedList = "" +
	"ABORT ABSOLUTE ACTION ADD AFTER AGENT AGGREGATE ALL ALLOCATE ALTER ANALYZE AND ANY ARCHIVE ARE ARRAY AS ASC " +
	"ASCII ASENSITIVE ASSERTION ASYMMETRIC AT ATOMIC ATTACH ATTRIBUTE AUTH AUTHORIZATION AUTHORIZE AUTO AVG BACK " +
	"BACKUP BASE BATCH BEFORE BEGIN BETWEEN BIGINT BINARY BIT BLOB BLOCK BOOLEAN BOTH BREADTH BUCKET BULK BY BYTE " +
	"CALL CALLED CALLING CAPACITY CASCADE CASCADED CASE CAST CATALOG CHAR CHARACTER CHECK CLASS CLOB CLOSE CLUSTER " +
	"CLUSTERED CLUSTERING CLUSTERS COALESCE COLLATE COLLATION COLLECTION COLUMN COLUMNS COMBINE COMMENT COMMIT " +
	"COMPACT COMPILE COMPRESS CONDITION CONFLICT CONNECT CONNECTION CONSISTENCY CONSISTENT CONSTRAINT CONSTRAINTS " +
	"CONSTRUCTOR CONSUMED CONTINUE COPY CORRESPONDING COUNT COUNTER CREATE CROSS CUBE CURRENT CURSOR CYCLE DATA " +
	"DATABASE DATE DATETIME DAY DEALLOCATE DEC DECIMAL DECLARE DEFAULT DEFERRABLE DEFERRED DEFINE DEFINED DEFINITION " +
	"DELETE DELIMITED DEPTH DEREF DESC DESCRIBE DESCRIPTOR DETACH DETERMINISTIC DIAGNOSTICS DIRECTORIES DISABLE " +
	"DISCONNECT DISTINCT DISTRIBUTE DO DOMAIN DOUBLE DROP DUMP DURATION DYNAMIC EACH ELEMENT ELSE ELSEIF EMPTY " +
	"ENABLE END EQUAL EQUALS ERROR ESCAPE ESCAPED EVAL EVALUATE EXCEEDED EXCEPT EXCEPTION EXCEPTIONS EXCLUSIVE EXEC " +
	"EXECUTE EXISTS EXIT EXPLAIN EXPLODE EXPORT EXPRESSION EXTENDED EXTERNAL EXTRACT FAIL FALSE FAMILY FETCH FIELDS " +
	"FILE FILTER FILTERING FINAL FINISH FIRST FIXED FLATTERN FLOAT FOR FORCE FOREIGN FORMAT FORWARD FOUND FREE FROM " +
	"FULL FUNCTION FUNCTIONS GENERAL GENERATE GET GLOB GLOBAL GO GOTO GRANT GREATER GROUP GROUPING HANDLER HASH HAVE " +
	"HAVING HEAP HIDDEN HOLD HOUR IDENTIFIED IDENTITY IF IGNORE IMMEDIATE IMPORT IN INCLUDING INCLUSIVE INCREMENT " +
	"INCREMENTAL INDEX INDEXED INDEXES INDICATOR INFINITE INITIALLY INLINE INNER INNTER INOUT INPUT INSENSITIVE " +
	"INSERT INSTEAD INT INTEGER INTERSECT INTERVAL INTO INVALIDATE IS ISOLATION ITEM ITEMS ITERATE JOIN KEY KEYS LAG " +
	"LANGUAGE LARGE LAST LATERAL LEAD LEADING LEAVE LEFT LENGTH LESS LEVEL LIKE LIMIT LIMITED LINES LIST LOAD LOCAL " +
	"LOCALTIME LOCALTIMESTAMP LOCATION LOCATOR LOCK LOCKS LOG LOGED LONG LOOP LOWER MAP MATCH MATERIALIZED MAX " +
	"MAXLEN MEMBER MERGE METHOD METRICS MIN MINUS MINUTE MISSING MOD MODE MODIFIES MODIFY MODULE MONTH MULTI " +
	"MULTISET NAME NAMES NATIONAL NATURAL NCHAR NCLOB NEW NEXT NO NONE NOT NULL NULLIF NUMBER NUMERIC OBJECT OF " +
	"OFFLINE OFFSET OLD ON ONLINE ONLY OPAQUE OPEN OPERATOR OPTION OR ORDER ORDINALITY OTHER OTHERS OUT OUTER OUTPUT " +
	"OVER OVERLAPS OVERRIDE OWNER PAD PARALLEL PARAMETER PARAMETERS PARTIAL PARTITION PARTITIONED PARTITIONS PATH " +
	"PERCENT PERCENTILE PERMISSION PERMISSIONS PIPE PIPELINED PLAN POOL POSITION PRECISION PREPARE PRESERVE PRIMARY " +
	"PRIOR PRIVATE PRIVILEGES PROCEDURE PROCESSED PROJECT PROJECTION PROPERTY PROVISIONING PUBLIC PUT QUERY QUIT " +
	"QUORUM RAISE RANDOM RANGE RANK RAW READ READS REAL REBUILD RECORD RECURSIVE REDUCE REF REFERENCE REFERENCES " +
	"REFERENCING REGEXP REGION REINDEX RELATIVE RELEASE REMAINDER REMOVE RENAME REPEAT REPLACE REQUEST RESET " +
	"RESIGNAL RESOURCE RESPONSE RESTORE RESTRICT RESULT RETURN RETURNING RETURNS REVERSE REVOKE RIGHT ROLE ROLES " +
	"ROLLBACK ROLLUP ROUTINE ROW ROWS RULE RULES SAMPLE SATISFIES SAVE SAVEPOINT SCAN SCHEMA SCOPE SCROLL SEARCH " +
	"SECOND SECTION SEGMENT SEGMENTS SELECT SELF SEMI SENSITIVE SEPARATE SEQUENCE SERIALIZABLE SESSION SET SETS " +
	"SHARD SHARE SHARED SHORT SHOW SIGNAL SIMILAR SKEWED SMALLINT SNAPSHOT SOME SOURCE SPACE SPACES SPARSE SPECIFIC " +
	"SPECIFICTYPE SPLIT SQL SQLCODE SQLERROR SQLEXCEPTION SQLSTATE SQLWARNING START STATE STATIC STATUS STORAGE " +
	"STORE STORED STREAM STRING STRUCT STYLE SUB SUBMULTISET SUBPARTITION SUBSTRING SUBTYPE SUM SUPER SYMMETRIC " +
	"SYNONYM SYSTEM TABLE TABLESAMPLE TEMP TEMPORARY TERMINATED TEXT THAN THEN THROUGHPUT TIME TIMESTAMP TIMEZONE " +
	"TINYINT TO TOKEN TOTAL TOUCH TRAILING TRANSACTION TRANSFORM TRANSLATE TRANSLATION TREAT TRIGGER TRIM TRUE " +
	"TRUNCATE TTL TUPLE TYPE UNDER UNDO UNION UNIQUE UNIT UNKNOWN UNLOGGED UNNEST UNPROCESSED UNSIGNED UNTIL UPDATE " +
	"UPPER URL USAGE USE USER USERS USING UUID VACUUM VALUE VALUED VALUES VARCHAR VARIABLE VARIANCE VARINT VARYING " +
	"VIEW VIEWS VIRTUAL VOID WAIT WHEN WHENEVER WHERE WHILE WINDOW WITH WITHIN WITHOUT WORK WRAPPED WRITE YEAR ZONE "
