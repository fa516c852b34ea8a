package urlnorm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestNormalize(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		// RFC 3986 section 6.2.2.1: case
		{"HTTP://www.EXAMPLE.com/", "http://www.example.com/"},
		{"http://example.com/%7Bfoo%7d", "http://example.com/%7Bfoo%7D"},
		{"http://example.com/a%c3%a9", "http://example.com/a%C3%A9"},
		// RFC 3986 section 6.2.2: eXAMPLE://a/./b/../b/%63/%7bfoo%7d
		{"hTTp://a/./b/../b/%63/%7bfoo%7d", "http://a/b/c/%7Bfoo%7D"},
		// 6.2.2.2: decode unreserved only
		{"http://example.com/%7euser/%41%42%2d%2E%5F", "http://example.com/~user/AB-._"},
		{"http://example.com/a%2Fb%3Fc%23d%25", "http://example.com/a%2Fb%3Fc%23d%25"},
		{"http://example.com/?q=%3d%26%2b%61", "http://example.com/?q=%3D%26%2Ba"},
		// 6.2.3: scheme-based
		{"http://example.com", "http://example.com/"},
		{"http://example.com:/", "http://example.com/"},
		{"http://example.com:80/", "http://example.com/"},
		{"https://example.com:443/x", "https://example.com/x"},
		{"http://example.com:443/", "http://example.com:443/"},
		{"https://example.com:80/", "https://example.com:80/"},
		{"http://example.com:0080/", "http://example.com/"},
		{"http://example.com:08080/", "http://example.com:8080/"},
		{"http://example.com?q", "http://example.com/?q"},
		// dot segments
		{"http://example.com/a/b/../c/./d", "http://example.com/a/c/d"},
		{"http://example.com/../../a", "http://example.com/a"},
		{"http://example.com/a/%2E%2E/b", "http://example.com/b"},
		{"http://example.com/a/..", "http://example.com/"},
		{"http://example.com/a/.", "http://example.com/a/"},
		{"http://example.com/a/...", "http://example.com/a/..."},
		{"http://example.com/a//../b", "http://example.com/a/b"},
		// query and fragment
		{"http://example.com/p?b=2&a=1#frag", "http://example.com/p?b=2&a=1"},
		{"http://example.com/p?", "http://example.com/p?"},
		{"http://example.com/p#", "http://example.com/p"},
		{"http://example.com/p?a=1/./b", "http://example.com/p?a=1/./b"},
		{"http://example.com/p?x=a b", "http://example.com/p?x=a%20b"},
		{"http://example.com/p?x[]=1", "http://example.com/p?x%5B%5D=1"},
		// repairs
		{"http://example.com/a b", "http://example.com/a%20b"},
		{"http://example.com/é", "http://example.com/%C3%A9"},
		{"http://example.com/100%", "http://example.com/100%25"},
		{"http://example.com/%zz", "http://example.com/%25zz"},
		{"http://example.com/a\\b", "http://example.com/a%5Cb"},
		{"  http://example.com/a\n\tb  ", "http://example.com/ab"},
		// path case is kept
		{"http://example.com/A/B", "http://example.com/A/B"},
		// hosts
		{"http://münchen.de/", "http://xn--mnchen-3ya.de/"},
		{"http://MÜNCHEN.DE/", "http://xn--mnchen-3ya.de/"},
		{"http://XN--MNCHEN-3YA.de/", "http://xn--mnchen-3ya.de/"},
		{"http://m%C3%BCnchen.de/", "http://xn--mnchen-3ya.de/"},
		{"http://straße.de/", "http://xn--strae-oqa.de/"},
		{"http://ｅｘａｍｐｌｅ。com/", "http://example.com/"},
		{"http://ex%41mple.com/", "http://example.com/"},
		{"http://example.com./", "http://example.com./"},
		{"http://r3---sn-abc.googlevideo.com/", "http://r3---sn-abc.googlevideo.com/"},
		{"http://my_host.example.com/", "http://my_host.example.com/"},
		{"http://192.168.0.1:8080/", "http://192.168.0.1:8080/"},
		{"http://192.168.0.1./", "http://192.168.0.1/"},
		{"http://[2001:DB8:0:0::1]/", "http://[2001:db8::1]/"},
		{"http://[::1]:80/", "http://[::1]/"},
		{"http://[::FFFF:1.2.3.4]:8080/", "http://[::ffff:1.2.3.4]:8080/"},
		// userinfo
		{"http://User:Pa%73s@Example.com/", "http://User:Pass@example.com/"},
		{"http://@example.com/", "http://example.com/"},
		{"http://a@b@example.com/", "http://a%40b@example.com/"},
	}
	for _, c := range cases {
		got, err := Normalize(c.in, Options{})
		if err != nil {
			t.Errorf("Normalize(%q): unexpected error %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("Normalize(%q) = %q, want %q", c.in, got, c.want)
		}
		again, err := Normalize(got, Options{})
		if err != nil || again != got {
			t.Errorf("not idempotent: Normalize(%q) = %q, %v", got, again, err)
		}
	}
}

func TestNormalizeOptions(t *testing.T) {
	cases := []struct {
		in   string
		o    Options
		want string
	}{
		{"http://example.com/p?b=2&a=1&b=1&a=0", Options{SortQuery: true}, "http://example.com/p?a=1&a=0&b=2&b=1"},
		{"http://example.com/p?b=2&a=1", Options{}, "http://example.com/p?b=2&a=1"},
		{"http://www.example.com/", Options{StripWWW: true}, "http://example.com/"},
		{"http://www.www.example.com/", Options{StripWWW: true}, "http://example.com/"},
		{"http://WWW.Example.com./", Options{StripWWW: true}, "http://example.com./"},
		{"http://www.co.uk/", Options{StripWWW: true}, "http://www.co.uk/"},
		{"http://www.com/", Options{StripWWW: true}, "http://www.com/"},
		{"http://www.example.com/", Options{}, "http://www.example.com/"},
		{"http://example.com/A/%7E/B%2f?Q=X", Options{LowercasePath: true}, "http://example.com/a/~/b%2F?Q=X"},
		{"http://example.com/p?", Options{DropEmptyQuery: true}, "http://example.com/p"},
		{"http://example.com/p?x", Options{DropEmptyQuery: true}, "http://example.com/p?x"},
	}
	for _, c := range cases {
		got, err := Normalize(c.in, c.o)
		if err != nil {
			t.Errorf("Normalize(%q, %+v): %v", c.in, c.o, err)
			continue
		}
		if got != c.want {
			t.Errorf("Normalize(%q, %+v) = %q, want %q", c.in, c.o, got, c.want)
		}
		if again, _ := Normalize(got, c.o); again != got {
			t.Errorf("not idempotent with %+v: %q -> %q", c.o, got, again)
		}
	}
}

func TestNormalizeErrors(t *testing.T) {
	cases := []struct {
		in   string
		want error
	}{
		{"", ErrNotAbsolute},
		{"/relative/path", ErrNotAbsolute},
		{"example.com/x", ErrNotAbsolute},
		{"//example.com/x", ErrNotAbsolute},
		{"ftp://example.com/", ErrUnsupportedScheme},
		{"mailto:a@example.com", ErrUnsupportedScheme},
		{"javascript:alert(1)", ErrUnsupportedScheme},
		{"data:text/plain,hi", ErrUnsupportedScheme},
		{"http:example.com", ErrInvalid},
		{"http:/example.com", ErrInvalid},
		{"http://", ErrInvalid},
		{"http:///path", ErrInvalid},
		{"http://:80/", ErrInvalid},
		{"http://user@/", ErrInvalid},
		{"http://example.com:abc/", ErrInvalid},
		{"http://example.com:65536/", ErrInvalid},
		{"http://example.com:0/", ErrInvalid},
		{"http://example.com:-1/", ErrInvalid},
		{"http://exa mple.com/", ErrInvalid},
		{"http://a..b/", ErrInvalid},
		{"http://.example.com/", ErrInvalid},
		{"http://example.com../", ErrInvalid},
		{"http://ex!ample.com/", ErrInvalid},
		{"http://ex%zzample.com/", ErrInvalid},
		{"http://ex%2Fample.com/", ErrInvalid},
		{"http://%FF.com/", ErrInvalid},
		{"http://xn--a.com/", ErrInvalid},
		{"http://xn--.com/", ErrInvalid},
		{"http://a\u200db.com/", ErrInvalid},
		{"http://" + strings.Repeat("a", 64) + ".com/", ErrInvalid},
		{"http://" + strings.Repeat("a.", 127) + "com/", ErrInvalid},
		{"http://[::1/", ErrInvalid},
		{"http://[::1]x/", ErrInvalid},
		{"http://[fe80::1%25eth0]/", ErrInvalid},
		{"http://[v1.fe]/", ErrInvalid},
		{"http://[1.2.3.4]/", ErrInvalid},
		{"http://0x7f.1/", ErrInvalid},
		{"http://3232235521/", ErrInvalid},
		{"http://1.2.3.256/", ErrInvalid},
		{"http://01.2.3.4/", ErrInvalid},
		{"http://foo.123/", ErrInvalid},
	}
	for _, c := range cases {
		got, err := Normalize(c.in, Options{})
		if !errors.Is(err, c.want) {
			t.Errorf("Normalize(%q) = %q, %v; want error %v", c.in, got, err, c.want)
		}
	}
}

// TestResolveRFC3986 runs the examples of RFC 3986 section 5.4 (with the
// fragment dropped and the result normalized).
func TestResolveRFC3986(t *testing.T) {
	const base = "http://a/b/c/d;p?q"
	cases := []struct{ ref, want string }{
		// 5.4.1 normal examples
		{"g", "http://a/b/c/g"},
		{"./g", "http://a/b/c/g"},
		{"g/", "http://a/b/c/g/"},
		{"/g", "http://a/g"},
		{"//g", "http://g/"},
		{"?y", "http://a/b/c/d;p?y"},
		{"g?y", "http://a/b/c/g?y"},
		{"#s", "http://a/b/c/d;p?q"},
		{"g#s", "http://a/b/c/g"},
		{"g?y#s", "http://a/b/c/g?y"},
		{";x", "http://a/b/c/;x"},
		{"g;x", "http://a/b/c/g;x"},
		{"g;x?y#s", "http://a/b/c/g;x?y"},
		{"", "http://a/b/c/d;p?q"},
		{".", "http://a/b/c/"},
		{"./", "http://a/b/c/"},
		{"..", "http://a/b/"},
		{"../", "http://a/b/"},
		{"../g", "http://a/b/g"},
		{"../..", "http://a/"},
		{"../../", "http://a/"},
		{"../../g", "http://a/g"},
		// 5.4.2 abnormal examples
		{"../../../g", "http://a/g"},
		{"../../../../g", "http://a/g"},
		{"/./g", "http://a/g"},
		{"/../g", "http://a/g"},
		{"g.", "http://a/b/c/g."},
		{".g", "http://a/b/c/.g"},
		{"g..", "http://a/b/c/g.."},
		{"..g", "http://a/b/c/..g"},
		{"./../g", "http://a/b/g"},
		{"./g/.", "http://a/b/c/g/"},
		{"g/./h", "http://a/b/c/g/h"},
		{"g/../h", "http://a/b/c/h"},
		{"g;x=1/./y", "http://a/b/c/g;x=1/y"},
		{"g;x=1/../y", "http://a/b/c/y"},
		{"g?y/./x", "http://a/b/c/g?y/./x"},
		{"g?y/../x", "http://a/b/c/g?y/../x"},
		{"g#s/./x", "http://a/b/c/g"},
		{"g#s/../x", "http://a/b/c/g"},
	}
	for _, c := range cases {
		got, err := Resolve(base, c.ref, Options{})
		if err != nil {
			t.Errorf("Resolve(%q): %v", c.ref, err)
			continue
		}
		if got != c.want {
			t.Errorf("Resolve(%q) = %q, want %q", c.ref, got, c.want)
		}
	}
	// "g:h" is an absolute URI with an unsupported scheme; "http:g" is
	// (strictly) the absolute URI "http:g", which has no host.
	if _, err := Resolve(base, "g:h", Options{}); !errors.Is(err, ErrUnsupportedScheme) {
		t.Errorf("Resolve(g:h) error = %v, want ErrUnsupportedScheme", err)
	}
	if _, err := Resolve(base, "http:g", Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Resolve(http:g) error = %v, want ErrInvalid", err)
	}
}

func TestResolve(t *testing.T) {
	cases := []struct {
		base, ref string
		o         Options
		want      string
		err       error
	}{
		{base: "https://Example.com/dir/page.html", ref: "other.html", want: "https://example.com/dir/other.html"},
		{base: "https://example.com/dir/page.html", ref: "//cdn.example.net/x.js", want: "https://cdn.example.net/x.js"},
		{base: "http://example.com/dir/", ref: "HTTPS://Other.example/A?b#c", want: "https://other.example/A?b"},
		{base: "http://example.com", ref: "a", want: "http://example.com/a"},
		{base: "http://example.com/a/b", ref: "  ../c\n", want: "http://example.com/c"},
		{base: "http://example.com/a/b", ref: "%2E%2E/c", want: "http://example.com/c"},
		{base: "http://example.com/a/b", ref: "?q=1", want: "http://example.com/a/b?q=1"},
		{base: "http://example.com/a/b?x#f", ref: "#top", want: "http://example.com/a/b?x"},
		{base: "http://www.example.com/a", ref: "/b", o: Options{StripWWW: true}, want: "http://example.com/b"},
		{base: "http://example.com/", ref: "münchen", want: "http://example.com/m%C3%BCnchen"},
		{base: "http://example.com/", ref: "//münchen.de", want: "http://xn--mnchen-3ya.de/"},
		{base: "http://example.com/", ref: "mailto:someone@example.com", err: ErrUnsupportedScheme},
		{base: "http://example.com/", ref: "javascript:void(0)", err: ErrUnsupportedScheme},
		{base: "http://example.com/", ref: "JavaScript:void(0)", err: ErrUnsupportedScheme},
		{base: "http://example.com/", ref: "data:image/png;base64,AAAA", err: ErrUnsupportedScheme},
		{base: "http://example.com/", ref: "ftp://example.com/f", err: ErrUnsupportedScheme},
		{base: "http://example.com/", ref: "tel:+123", err: ErrUnsupportedScheme},
		{base: "http://example.com/", ref: "//bad host/", err: ErrInvalid},
		{base: "ftp://example.com/", ref: "a", err: ErrUnsupportedScheme},
		{base: "/relative", ref: "a", err: ErrNotAbsolute},
		{base: "http:/nohost", ref: "a", err: ErrInvalid},
	}
	for _, c := range cases {
		got, err := Resolve(c.base, c.ref, c.o)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Resolve(%q, %q) = %q, %v; want error %v", c.base, c.ref, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q", c.base, c.ref, got, err, c.want)
		}
	}
}

func TestRemoveDotSegments(t *testing.T) {
	// RFC 3986 section 5.2.4 examples.
	cases := map[string]string{
		"/a/b/c/./../../g":   "/a/g",
		"mid/content=5/../6": "mid/6",
		"":                   "",
		"/":                  "/",
		"/..":                "/",
		"../a":               "a",
		"./a":                "a",
		".":                  "",
		"..":                 "",
		"/a/b/..":            "/a/",
	}
	for in, want := range cases {
		if got := removeDotSegments(in); got != want {
			t.Errorf("removeDotSegments(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalizeHostAndFoldWWW(t *testing.T) {
	if h, err := NormalizeHost("Bücher.Example"); err != nil || h != "xn--bcher-kva.example" {
		t.Errorf("NormalizeHost = %q, %v", h, err)
	}
	if h := FoldWWW("www.blog.example.com"); h != "blog.example.com" {
		t.Errorf("FoldWWW = %q", h)
	}
	if h := FoldWWW("www.localhost"); h != "www.localhost" {
		t.Errorf("FoldWWW(www.localhost) = %q", h)
	}
}

// TestLargeInputs guards against super-linear behaviour on hostile links.
func TestLargeInputs(t *testing.T) {
	big := strings.Repeat("/a/..", 200000) + strings.Repeat("/%2e%2E", 100000) + strings.Repeat("/x", 100000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err := Normalize("http://example.com"+big+"?"+strings.Repeat("b=1&a=2&", 50000), Options{SortQuery: true, LowercasePath: true})
		if err != nil || !strings.HasPrefix(got, "http://example.com/x/x/") {
			t.Errorf("big path: %.60q, %v", got, err)
		}
		var host strings.Builder
		for r := rune(0x4E00); r < 0x4E00+20000; r++ { // distinct code points: worst case for punycode
			host.WriteRune(r)
		}
		// refused by the length cap, before IDNA (whose punycode step is
		// quadratic: ~5 s for this host without the cap)
		if _, err := Normalize("http://"+host.String()+".de/", Options{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "host too long") {
			t.Errorf("huge IDN host: %v, want ErrInvalid (host too long)", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Normalize too slow on large input")
	}
}

// TestSortQueryStable: values of a repeated name keep their order (their
// order can matter to the server), however many parameters there are.
func TestSortQueryStable(t *testing.T) {
	var in, wantA, wantB []string
	for i := 0; i < 60; i++ {
		in = append(in, fmt.Sprintf("b=%d", i), fmt.Sprintf("a=%d", 59-i))
		wantA = append(wantA, fmt.Sprintf("a=%d", 59-i))
		wantB = append(wantB, fmt.Sprintf("b=%d", i))
	}
	got, err := Normalize("http://h/?"+strings.Join(in, "&"), Options{SortQuery: true})
	want := "http://h/?" + strings.Join(append(wantA, wantB...), "&")
	if err != nil || got != want {
		t.Errorf("SortQuery:\n got  %s\n want %s", got, want)
	}
}
