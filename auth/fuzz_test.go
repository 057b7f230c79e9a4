package auth

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// FuzzParseTokens feeds tokens files to ParseTokens and, when they parse,
// to New. Every token it returns has a known role and a value with no
// surrounding space; New either refuses the set or accepts exactly
// those tokens.
func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		"operator=0123456789abcdef0123456789abcdef\nagent=fedcba9876543210fedcba9876543210\n",
		"# comment\n\n  viewer = abcdefabcdefabcdefabcdef  \r\n",
		"operator=short\n", "nobody=0123456789abcdef0123456789abcdef\n", "operator\n", "operator=\n",
		"operator=a b c d e f g h i j k l m n o p\n", "agent=x=y=z0123456789abcdef0123\n",
		"operator=0123456789abcdef0123456789abcdef\nagent=0123456789abcdef0123456789abcdef\n",
		"\xff=\xfe\n", strings.Repeat("a", 70000) + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		toks, err := ParseTokens(bytes.NewReader(data), "tokens")
		if err != nil {
			return
		}
		for _, tk := range toks {
			if _, err := ParseRole(string(tk.Role)); err != nil {
				t.Fatalf("token with role %q: %v", tk.Role, err)
			}
			if tk.Value == "" || strings.TrimSpace(tk.Value) != tk.Value {
				t.Fatalf("token value %q is empty or has surrounding space", tk.Value)
			}
		}
		a, err := New(Config{Tokens: toks})
		if err != nil {
			return
		}
		if len(toks) > 0 && a.Local() {
			t.Fatalf("%d tokens accepted, yet the auth is local (every request allowed)", len(toks))
		}
		for _, tk := range toks {
			if !a.Has(tk.Role) {
				t.Fatalf("auth from %q does not have role %s", data, tk.Role)
			}
			if role, err := a.Check(tk.Value); err != nil || role != tk.Role {
				t.Fatalf("token %q of role %s checks as %q, %v", tk.Value, tk.Role, role, err)
			}
			longer := tk.Value + "x"
			if role, err := a.Check(longer); err == nil && !slices.ContainsFunc(toks, func(o Token) bool { return o.Value == longer }) {
				t.Fatalf("token %q plus one byte checks as %s", tk.Value, role)
			}
		}
	})
}
