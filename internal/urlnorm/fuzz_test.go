package urlnorm

import (
	"net/url"
	"strings"
	"testing"
)

var fuzzOptions = []Options{
	{},
	{SortQuery: true, StripWWW: true, LowercasePath: true, DropEmptyQuery: true},
	{StripWWW: true},
	{LowercasePath: true, SortQuery: true},
}

// FuzzNormalize checks that Normalize never panics, is idempotent, produces
// only valid URI characters, and that its output is accepted by net/url
// with the same host (so net/http requests exactly the normalized URL).
// Resolve is exercised with the fuzz input as a link too.
func FuzzNormalize(f *testing.F) {
	seeds := []string{
		"http://example.com",
		"HTTP://www.EXAMPLE.com:80/a/./b/../c/%7e%41?q=%3d#frag",
		"https://user:pass@[2001:DB8::1]:443/x?y",
		"http://münchen.de/straße?ä=ö",
		"http://m%C3%BCnchen.de/",
		"http://ｅｘａｍｐｌｅ。com./",
		"http://xn--mnchen-3ya.de/%2E%2E/%2e/",
		"http://www.www.example.co.uk/A/B?b=1&a=2&&",
		"http://1.2.3.4./%zz%",
		"http://0x7f.1/",
		"http://a..b/",
		"http://[::ffff:1.2.3.4]:0080/",
		"http://host:/..//../x",
		"http://h/a b\\c[d]{e}|f^g`h\"i<j>k",
		"  http://h/\t\n ",
		"http://a@b@c/",
		"mailto:x@y",
		"//example.com/x",
		"../g;x=1/./y",
		"http:g",
		"http://xn--zca/",
		"http://r3---sn-x.example/",
		"http://www.localhost/",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, o := range fuzzOptions {
			n, err := Normalize(s, o)
			if err != nil {
				continue
			}
			checkNormalized(t, s, n, o)
			n2, err := Normalize(n, o)
			if err != nil {
				t.Fatalf("Normalize(%q) = %q, but that is refused: %v (options %+v)", s, n, err, o)
			}
			if n2 != n {
				t.Fatalf("not idempotent (options %+v):\n in:  %q\n 1st: %q\n 2nd: %q", o, s, n, n2)
			}
			if r, err := Resolve(n, "", o); err != nil || r != n {
				t.Fatalf("Resolve(%q, \"\") = %q, %v", n, r, err)
			}
		}
		const base = "http://a/b/c/d;p?q"
		r, err := Resolve(base, s, Options{})
		if err != nil {
			return
		}
		checkNormalized(t, s, r, Options{})
		if r2, err := Normalize(r, Options{}); err != nil || r2 != r {
			t.Fatalf("Resolve(%q) = %q not normalized: %q, %v", s, r, r2, err)
		}
	})
}

func checkNormalized(t *testing.T, in, n string, o Options) {
	t.Helper()
	if !strings.HasPrefix(n, "http://") && !strings.HasPrefix(n, "https://") {
		t.Fatalf("Normalize(%q) = %q: bad scheme", in, n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if c <= 0x20 || c >= 0x7f || strings.IndexByte("\"<>\\^`{|}#", c) >= 0 {
			t.Fatalf("Normalize(%q) = %q: invalid character %q", in, n, c)
		}
	}
	u, err := url.Parse(n)
	if err != nil {
		t.Fatalf("net/url refuses Normalize(%q) = %q: %v", in, n, err)
	}
	if u.Fragment != "" || u.Host == "" || u.Opaque != "" {
		t.Fatalf("net/url reads Normalize(%q) = %q as %#v", in, n, u)
	}
	if u.RequestURI() != n[len(u.Scheme)+3+strings.IndexByte(n[len(u.Scheme)+3:], '/'):] {
		t.Fatalf("net/http would request %q for %q", u.RequestURI(), n)
	}
}
