package domain

import (
	"errors"
	"testing"
)

func TestCanonical(t *testing.T) {
	cases := []struct{ in, want string }{
		// seed 004 section 3.2 table
		{"https://example.com", "example.com"},
		{"www.example.com", "example.com"},
		{"example.com:443", "example.com"},
		{"Example.COM", "example.com"},
		{"example.com.", "example.com"},
		{"münchen.de", "xn--mnchen-3ya.de"},
		{"blog.example.com", "blog.example.com"},
		// more
		{"  HTTPS://User:pw@WWW.Example.COM.:443/path?q#f ", "example.com"},
		{"http://example.com:80/", "example.com"},
		{"http://example.com:443/", "example.com"},
		{"example.com:80", "example.com"},
		{"example.com:8080", "example.com:8080"},
		{"example.com:08080", "example.com:8080"},
		{"example.com:", "example.com"},
		{"http://www.example.com:8443/x", "example.com:8443"},
		{"//www.example.com/x", "example.com"},
		{"example.com/some/path", "example.com"},
		{"www.www.example.com", "example.com"},
		{"www.co.uk", "www.co.uk"},
		{"www.com", "www.com"},
		{"www.blog.example.com", "blog.example.com"},
		{"wwwexample.com", "wwwexample.com"},
		{"MÜNCHEN.DE.", "xn--mnchen-3ya.de"},
		{"http://www.münchen.de:8080/", "xn--mnchen-3ya.de:8080"},
		{"xn--MNCHEN-3ya.de", "xn--mnchen-3ya.de"},
		{"ftp://files.example.org/pub", "files.example.org"},
		{"localhost", "localhost"},
		{"localhost:8080", "localhost:8080"},
		// IPs
		{"192.168.1.1", "192.168.1.1"},
		{"192.168.1.1:80", "192.168.1.1"},
		{"192.168.1.1:8080", "192.168.1.1:8080"},
		{"http://127.0.0.1:9000/x", "127.0.0.1:9000"},
		{"127.0.0.1.", "127.0.0.1"},
		{"[::1]", "[::1]"},
		{"[::1]:8080", "[::1]:8080"},
		{"[::1]:443", "[::1]"},
		{"::1", "[::1]"},
		{"[2001:DB8:0::1]:80", "[2001:db8::1]"},
		{"http://[2001:db8::1]:8080/p", "[2001:db8::1]:8080"},
		{"2001:db8::1", "[2001:db8::1]"},
	}
	for _, c := range cases {
		got, err := Canonical(c.in)
		if err != nil || got != c.want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", c.in, got, err, c.want)
			continue
		}
		if again, err := Canonical(got); err != nil || again != got {
			t.Errorf("Canonical not idempotent: %q -> %q, %v", got, again, err)
		}
	}
}

func TestCanonicalErrors(t *testing.T) {
	for _, in := range []string{
		"", "   ", "http://", "http:///x", ":80", "exa mple.com", "a..b", "example.com:http",
		"example.com:0", "example.com:65536", "[::1", "[::1]x", "[::1]:abc", "[fe80::1%25eth0]",
		"xn--a.com", "0x7f.1", "1.2.3.256", "ex!ample.com",
	} {
		if got, err := Canonical(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("Canonical(%q) = %q, %v; want ErrInvalid", in, got, err)
		}
	}
}

func TestRegistrable(t *testing.T) {
	cases := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"blog.example.com", "example.com"},
		{"a.b.c.example.co.uk", "example.co.uk"},
		{"example.co.uk", "example.co.uk"},
		{"co.uk", "co.uk"},
		{"com", "com"},
		{"user.github.io", "user.github.io"},
		{"x.user.github.io", "user.github.io"},
		{"blog.example.com:8080", "example.com"},
		{"Blog.Example.COM.", "example.com"},
		{"bücher.beispiel.de", "beispiel.de"},
		{"shop.xn--mnchen-3ya.de", "xn--mnchen-3ya.de"},
		{"localhost", "localhost"},
		{"localhost:8080", "localhost"},
		{"192.168.1.1", "192.168.1.1"},
		{"192.168.1.1:8080", "192.168.1.1"},
		{"[::1]", "[::1]"},
		{"[::1]:8080", "[::1]"},
		{"::1", "[::1]"},
		{"[2001:DB8::1]", "[2001:db8::1]"},
		{"", ""},
		{"example.unknowntld", "example.unknowntld"},
		{"a.example.unknowntld", "example.unknowntld"},
	}
	for _, c := range cases {
		if got := Registrable(c.in); got != c.want {
			t.Errorf("Registrable(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
