package query

import (
	"database/sql"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// regexPatterns and regexSubjects are matched against each other on Go,
// SQLite (edgeplat_re_match) and PostgreSQL (the translated ARE): every
// engine must agree with Go's RE2 on every pair.
var regexPatterns = []string{
	``, `a`, `abc`, `boiler.*`, `.*temp`, `.`, `(?s).`, `(?s:.)+`, `.+`,
	`a|b|`, `(a|bc)+`, `(?:ab)*c?`, `a{2}`, `a{2,}`, `a{1,3}`, `a{0}`, `(ab){0,2}`,
	`[a-c]+`, `[^a-c]+`, `[^a]`, `[[:alpha:]]+`, `[[:^digit:]]+`, `\d+`, `\D`, `\w+`, `\W`, `\s`, `\S+`,
	`(?i)boiler`, `(?i)ǅ`, `(?i:K)`, `(?i)straße`, `[a-z]+(?i:X)`,
	`\pL+`, `\p{Greek}+`, `\PL`, `\x{1F600}`, `é+`, `°C|K`,
	`^a`, `a$`, `\Aa\z`, `a^b`, `x*?`, `(a+)+$`,
	`\.`, `a\.b`, `\[x\]`, `\\`, `\$`, `-`, `[\-\]\\^]+`, `\^`, `'`, `"`, `[.]`,
	`\Qa.b\E`, `\Q(\E+`, `a\n?b`, `[^\n]+`, `\t`,
	`boiler\.(temp|pressure)`, `3f2b.*`, `.*-8f00-.*`, `[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}`,
	`[^\x00-\x{10FFFF}]`, `\x00`, `[\x00-a]+`,
}

var regexSubjects = []string{
	"", "a", "b", "ab", "abc", "aa", "aaa", "aaaa", "abab", "ababc", "c", "bc", "bcbc",
	"boiler", "boiler.temp", "BOILER", "Boiler.Temp", "boiler.pressure", "boilerxtemp", "pump.temp",
	"x", "X", "xX", "ǅ", "ǆ", "Ǆ", "k", "K", "\u212a", "straße", "STRASSE", "strasse", "STRAẞE",
	"α", "αβγ", "Ω", "é", "éé", "e\u0301", "😀", "°C", "K", "°F",
	"\n", "a\nb", "ab\n", "a\n", "\t", " ", "  a", "1", "123", "12a", "_", "-", "]", "\\", "^", "$", "'", "\"", ".", "[x]", "a.b",
	"(", "((", "3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f", "3F2B8C1E-9D4A-4B7E-8F00-1A2B3C4D5E6F",
}

func TestPGRegexTranslation(t *testing.T) {
	tests := []struct{ in, want string }{
		{`boiler.*`, `^(?:boiler(?:[^\n])*)$`},
		{`a|b`, `^(?:[a-b])$`},
		{`x|yz`, `^(?:(?:x|yz))$`},
		{`(?i)k`, `^(?:[Kk\u212A])$`},
		{`a{2,5}`, `^(?:(?:a){2,5})$`},
		{`a{3}`, `^(?:(?:a){3})$`},
		{`a{3,}`, `^(?:(?:a){3,})$`},
		{`(ab)+?`, `^(?:(?:(?:ab))+)$`},
		{`\d`, `^(?:[0-9])$`},
		{`[^a]`, `^(?:[\u0000-\u0060b-\U0010FFFF])$`},
		{`(?s).`, `^(?:.)$`},
		{`°`, `^(?:\u00B0)$`},
		{`😀`, `^(?:\U0001F600)$`},
		{`\Aa\z`, `^(?:^a$)$`},
		{`a'b`, `^(?:a\u0027b)$`},
		{``, `^(?:(?:))$`},
		{`[^\x00-\x{10FFFF}]`, `^(?:[^\u0001-\U0010FFFF])$`},
	}
	for _, tt := range tests {
		got, err := pgRegex(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("pgRegex(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for in, msg := range map[string]string{
		`\bword`:     `word boundaries (\b, \B) are not supported`,
		`a\B`:        `word boundaries`,
		`(?m)^a`:     `multi-line anchors`,
		`(?m)a$`:     `multi-line anchors`,
		`a{256}`:     `repetition counts above 255`,
		`a{1,1000}`:  `repetition counts above 255`,
		`a{1001}`:    `invalid repeat count`,
		`(`:          `missing closing )`,
		`\8`:         `invalid escape sequence`,
		`(?P<n>a)\1`: `invalid escape sequence`,
		`(?=a)`:      `invalid or unsupported Perl syntax`,
		`\Qab`:       `cannot be anchored`,
	} {
		_, err := pgRegex(in)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("pgRegex(%q) = %v, want an error containing %q", in, err, msg)
		}
	}
}

// areToGo rewrites the escapes pgRegex writes into Go's syntax, so Go can
// check that the translated tree means what the original did. PostgreSQL
// itself is checked by TestRegexPostgresIntegration.
func areToGo(t *testing.T, are string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(are); i++ {
		if are[i] == '\\' && i+1 < len(are) && (are[i+1] == 'u' || are[i+1] == 'U') {
			n := 4
			if are[i+1] == 'U' {
				n = 8
			}
			v, err := strconv.ParseUint(are[i+2:i+2+n], 16, 32)
			if err != nil {
				t.Fatalf("bad escape in %q", are)
			}
			b.WriteString(`\x{` + strconv.FormatUint(v, 16) + `}`)
			i += 1 + n
			continue
		}
		b.WriteByte(are[i])
	}
	// An ARE's dot matches newline; Go's needs (?s).
	return "(?s)" + b.String()
}

func TestPGRegexMeaning(t *testing.T) {
	for _, pat := range regexPatterns {
		are, err := pgRegex(pat)
		if err != nil {
			t.Errorf("pgRegex(%q): %v", pat, err)
			continue
		}
		goRE := regexp.MustCompile(anchored(pat))
		tr, err := regexp.Compile(areToGo(t, are))
		if err != nil {
			t.Errorf("translation of %q, %q, is not a valid RE2 either: %v", pat, are, err)
			continue
		}
		for _, s := range regexSubjects {
			if want, got := goRE.MatchString(s), tr.MatchString(s); want != got {
				t.Errorf("%q vs %q (from %q): RE2 %v, translation %v", s, pat, are, want, got)
			}
		}
	}
}

func TestSQLiteRegexpFunction(t *testing.T) {
	conn, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := t.Context()
	for _, pat := range regexPatterns {
		re := regexp.MustCompile(anchored(pat))
		for _, s := range regexSubjects {
			var got bool
			if err := conn.QueryRowContext(ctx, "SELECT "+sqliteRegexpFunc+"($1, $2)", anchored(pat), s).Scan(&got); err != nil {
				t.Fatalf("%q ~ %q: %v", s, pat, err)
			}
			if want := re.MatchString(s); got != want {
				t.Errorf("%s(%q, %q) = %v, want %v", sqliteRegexpFunc, anchored(pat), s, got, want)
			}
		}
	}
	var v sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT "+sqliteRegexpFunc+"('a', NULL)").Scan(&v); err != nil || v.Valid {
		t.Errorf("NULL value: %v, %v; want NULL", v, err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT "+sqliteRegexpFunc+"('(', 'a')").Scan(&v); err == nil {
		t.Error("invalid pattern: no error")
	}
	if err := conn.QueryRowContext(ctx, "SELECT "+sqliteRegexpFunc+"(1, 'a')").Scan(&v); err == nil {
		t.Error("numeric pattern: no error")
	}
	for i := range regexpCacheSize + 10 { // the cache stays bounded
		if _, err := cachedRegexp(strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	regexpCache.Lock()
	n := len(regexpCache.m)
	regexpCache.Unlock()
	if n > regexpCacheSize {
		t.Errorf("cache holds %d patterns, bound %d", n, regexpCacheSize)
	}
}
