package crawl

import (
	"reflect"
	"strings"
	"testing"
)

func TestURLFilter(t *testing.T) {
	f := Filters{
		AcceptRegex:  []string{`/docs/`, `\.html$`},
		AcceptPrefix: []string{"/blog/", "HTTP://Other.test"},
		RejectRegex:  []string{`[?&]sessionid=`},
		RejectPrefix: []string{"/docs/private/", "http://a.test/blog/drafts"},
	}
	c := New("f")
	c.Seeds = []Seed{{URL: "http://a.test/"}}
	c.Filters = f
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.AcceptPrefix[1] != "http://other.test/" {
		t.Errorf("accept prefix URL not normalized: %q", c.AcceptPrefix)
	}
	uf, err := NewURLFilter(c.Filters, c.Normalize.Options())
	if err != nil {
		t.Fatal(err)
	}
	for u, want := range map[string]string{
		"http://a.test/docs/x":                 "",
		"http://a.test/x.html":                 "",
		"http://a.test/blog/1":                 "",
		"http://other.test/anything":           "",
		"http://a.test/docs/x?sessionid=1":     "matches --reject-regex [?&]sessionid=",
		"http://a.test/docs/private/x":         "matches --reject-prefix /docs/private/",
		"http://a.test/blog/drafts/1":          "matches --reject-prefix http://a.test/blog/drafts",
		"http://a.test/images/x.png":           "matches no --accept-regex or --accept-prefix",
		"http://a.test/x/blog/1":               "matches no --accept-regex or --accept-prefix", // a path prefix is anchored at the path
		"http://other.test.evil/docs-not-here": "matches no --accept-regex or --accept-prefix",
	} {
		ok, why := uf.Allowed(u)
		if ok != (want == "") || why != want {
			t.Errorf("Allowed(%s) = %v %q, want %q", u, ok, why, want)
		}
	}
	// No accept pattern: everything not rejected passes; a nil filter
	// passes everything.
	uf, _ = NewURLFilter(Filters{RejectPrefix: []string{"/x"}}, c.Normalize.Options())
	if ok, _ := uf.Allowed("http://a.test/y"); !ok {
		t.Error("reject-only filter refused an unrelated URL")
	}
	if ok, _ := uf.Allowed("http://a.test/x1"); ok {
		t.Error("reject-only filter let a rejected URL through")
	}
	if ok, _ := (*URLFilter)(nil).Allowed("http://a.test/"); !ok {
		t.Error("nil filter refused")
	}
}

func TestFiltersValidate(t *testing.T) {
	for _, c := range []struct {
		f    Filters
		want string
	}{
		{Filters{AcceptRegex: []string{"("}}, "--accept-regex \"(\": error parsing regexp"},
		{Filters{RejectRegex: []string{""}}, "--reject-regex"},
		{Filters{AcceptPrefix: []string{"docs/"}}, "--accept-prefix \"docs/\": neither a path starting with / nor an http(s) URL"},
		{Filters{RejectPrefix: []string{"/a b"}}, "must not contain white space"},
		{Filters{ContentTypes: []string{"html"}}, "--content-types \"html\": want TYPE/SUBTYPE"},
		{Filters{ContentTypes: []string{"text/html; charset=utf-8"}}, "want TYPE/SUBTYPE"},
		{Filters{ContentTypes: []string{"*/html"}}, "want TYPE/SUBTYPE"},
		{Filters{RejectRegex: make([]string, MaxFilterPatterns+1)}, "at most 256"},
	} {
		c2 := New("v")
		c2.Seeds = []Seed{{URL: "http://a.test/"}}
		c2.Filters = c.f
		err := c2.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line containing %q", c.f, err, c.want)
		}
	}
	c := New("ct")
	c.Seeds = []Seed{{URL: "http://a.test/"}}
	c.ContentTypes = []string{" Text/HTML", "image/*"}
	if err := c.Validate(); err != nil || !reflect.DeepEqual(c.ContentTypes, []string{"text/html", "image/*"}) {
		t.Errorf("content types: %q, %v", c.ContentTypes, err)
	}
	// Stored and read back.
	c.RejectRegex = []string{`a{1,3}`}
	back, err := ParseCrawl(c.Marshal())
	if err != nil || !reflect.DeepEqual(back.Filters, c.Filters) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func TestContentTypeAccepted(t *testing.T) {
	acc := []string{"text/html", "application/xhtml+xml", "image/*"}
	for ct, want := range map[string]bool{
		"text/html":                true,
		"Text/HTML; charset=utf-8": true,
		"application/xhtml+xml":    true,
		"image/png":                true,
		"application/pdf":          false,
		"text/plain":               false,
		"":                         true, // unknown until sniffed
		"garbage;;;":               true,
	} {
		if got := ContentTypeAccepted(acc, ct); got != want {
			t.Errorf("ContentTypeAccepted(%q) = %v, want %v", ct, got, want)
		}
	}
	if !ContentTypeAccepted(nil, "application/pdf") || !ContentTypeAccepted([]string{"*/*"}, "application/pdf") {
		t.Error("no list, or */*, must accept every type")
	}
}
