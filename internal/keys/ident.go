package keys

// The identifier rules, checked by hand (not regexp) because they run on
// every acquire:
//
//	entity id   ^[a-zA-Z0-9][a-zA-Z0-9_.\-:@]{0,255}$
//	resource    ^[a-zA-Z0-9][a-zA-Z0-9_.\-:@/]{0,255}$
//	namespace   ^[a-zA-Z0-9][a-zA-Z0-9_.\-]{0,63}$
//	limit name  ^[a-zA-Z][a-zA-Z0-9_.\-]{0,63}$, not "wcu"
const (
	RuleEntity    = `must match ^[a-zA-Z0-9][a-zA-Z0-9_.\-:@]{0,255}$`
	RuleResource  = `must match ^[a-zA-Z0-9][a-zA-Z0-9_.\-:@/]{0,255}$`
	RuleNamespace = `must match ^[a-zA-Z0-9][a-zA-Z0-9_.\-]{0,63}$`
	RuleLimitName = `must match ^[a-zA-Z][a-zA-Z0-9_.\-]{0,63}$`
)

// ValidEntity, ValidResource, ValidNamespace and ValidLimitName report
// whether s follows its rule ("wcu" aside).
func ValidEntity(s string) bool    { return ValidIdent(s, 256, false, ":@") }
func ValidResource(s string) bool  { return ValidIdent(s, 256, false, ":@/") }
func ValidNamespace(s string) bool { return ValidIdent(s, 64, false, "") }
func ValidLimitName(s string) bool { return ValidIdent(s, 64, true, "") }

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ValidIdent reports whether s is 1 to max bytes, starts with a letter or
// a digit (a letter when firstLetterOnly), and goes on with letters,
// digits, '_', '.', '-' and the bytes of extra.
func ValidIdent(s string, max int, firstLetterOnly bool, extra string) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	if !isAlnum(s[0]) || firstLetterOnly && s[0] <= '9' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if isAlnum(c) || c == '_' || c == '.' || c == '-' {
			continue
		}
		ok := false
		for j := 0; j < len(extra); j++ {
			if c == extra[j] {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
