package robots

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type check struct {
	ua, path string
	allowed  bool
	line     int // line of the deciding rule; 0 = no rule
}

func runChecks(t *testing.T, name, body string, checks []check) {
	t.Helper()
	r := Parse([]byte(body))
	for _, c := range checks {
		got, rule := r.Allowed(c.ua, c.path)
		line := 0
		if rule != nil {
			line = rule.Line
		}
		if got != c.allowed || line != c.line {
			t.Errorf("%s: Allowed(%q, %q) = %v (rule line %d %+v), want %v (rule line %d)",
				name, c.ua, c.path, got, line, rule, c.allowed, c.line)
		}
	}
}

// RFC 9309 section 5.1.
const rfcSimple = `User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot
`

func TestRFC9309SimpleExample(t *testing.T) {
	runChecks(t, "5.1", rfcSimple, []check{
		{"AnyBot", "/", true, 0},
		{"AnyBot", "/example/page.html", false, 3},
		{"AnyBot", "/publications/x.html", true, 4},
		{"AnyBot", "/images/a.gif", false, 2},
		{"AnyBot", "/images/a.gif?x", true, 0},
		{"AnyBot", "/publications/a.gif", true, 4}, // "/publications/" (14) beats "*.gif$" (6)
		{"foobot", "/example/page.html", true, 8},
		{"foobot", "/example/allowed.gif", true, 9},
		{"foobot", "/example/other.html", false, 7},
		{"foobot", "/", false, 7},
		{"barbot", "/example/page.html", false, 13},
		{"bazbot", "/example/page.html", false, 13},
		{"barbot", "/example/other.html", true, 0},
		{"barbot", "/a.gif", true, 0}, // barbot has its own group: '*' does not apply
		{"quxbot", "/example/page.html", true, 0},
		{"quxbot", "/a.gif", true, 0},
	})
}

// RFC 9309 section 2.2.1: groups naming the same agent are merged; other
// agents' groups are not.
func TestGroupMerging(t *testing.T) {
	body := `user-agent: ExampleBot
disallow: /foo
disallow: /bar

user-agent: ExampleBot
disallow: /baz

user-agent: *
disallow: /foo
disallow: /bar

user-agent: BazBot
disallow: /baz
`
	runChecks(t, "2.2.1", body, []check{
		{"ExampleBot", "/foo", false, 2},
		{"ExampleBot", "/bar", false, 3},
		{"ExampleBot", "/baz", false, 6},
		{"ExampleBot", "/qux", true, 0},
		{"BazBot", "/baz", false, 13},
		{"BazBot", "/foo", true, 0},
		{"Other", "/foo", false, 9},
		{"Other", "/baz", true, 0},
	})
	// merged crawl-delay: the larger one
	body2 := "User-agent: a\nCrawl-delay: 2\n\nUser-agent: b\nDisallow: /\n\nUser-agent: A\nCrawl-delay: 5\n"
	if d, ok := Parse([]byte(body2)).CrawlDelay("a"); !ok || d != 5*time.Second {
		t.Errorf("merged crawl-delay = %v %v, want 5s", d, ok)
	}
}

// RFC 9309 section 5.2: longest match.
func TestLongestMatch(t *testing.T) {
	body := `User-Agent: foobot
Allow: /example/page/
Disallow: /example/page/disallowed.gif
`
	runChecks(t, "5.2", body, []check{
		{"foobot", "/example/page/", true, 2},
		{"foobot", "/example/page/allowed.gif", true, 2},
		{"foobot", "/example/page/disallowed.gif", false, 3},
		{"foobot", "/example/", true, 0},
	})
	// order in the file does not matter
	body = "User-agent: *\nDisallow: /a/b\nAllow: /a\n"
	runChecks(t, "order", body, []check{
		{"x", "/a/b/c", false, 2},
		{"x", "/a/c", true, 3},
	})
}

func TestAllowWinsTies(t *testing.T) {
	runChecks(t, "tie1", "User-agent: *\nDisallow: /page\nAllow: /page\n", []check{
		{"x", "/page", true, 3},
	})
	runChecks(t, "tie2", "User-agent: *\nAllow: /page\nDisallow: /page\n", []check{
		{"x", "/page", true, 2},
	})
	// equal length, different patterns, both matching
	runChecks(t, "tie3", "User-agent: *\nDisallow: /*.ph\nAllow: /page\n", []check{
		{"x", "/page.php5", true, 3},
		{"x", "/other.php", false, 2},
	})
	// ties are decided after percent-normalization
	runChecks(t, "tie4", "User-agent: *\nDisallow: /%7efoo\nAllow: /~foo\n", []check{
		{"x", "/~foo", true, 3},
		{"x", "/%7Efoo", true, 3},
	})
}

func TestWildcards(t *testing.T) {
	body := `User-agent: *
Allow: /page*
Disallow: /*.php$
Disallow: /private*/secret
Allow: /$
Disallow: /
Disallow: /this/*/exactly$
Allow: /fish*.php
`
	runChecks(t, "wild", body, []check{
		// "/*.php$" (7) beats "/page*" (6)
		{"x", "/page.php", false, 3},
		{"x", "/page.php?x=1", true, 2},
		{"x", "/page.php5", true, 2},
		{"x", "/page", true, 2},
		{"x", "/pages/index.html", true, 2},
		{"x", "/index.php", false, 3},
		{"x", "/dir/index.php", false, 3},
		{"x", "/private/x/secret", false, 4},
		{"x", "/private-area/secret/more", false, 4},
		{"x", "/private/secre", false, 6},
		{"x", "/", true, 5},
		{"x", "/other", false, 6},
		{"x", "/this/a/b/exactly", false, 7},
		{"x", "/fish.php", true, 8},
		{"x", "/fishheads/catfish.php?parameters", true, 8},
		{"x", "/Fish.PHP", false, 6},
	})
	// Google's documented examples for '*' and '$'.
	runChecks(t, "google", "User-agent: *\nDisallow: /*.php$\nDisallow: /fish*\n", []check{
		{"x", "/filename.php", false, 2},
		{"x", "/folder/filename.php", false, 2},
		{"x", "/filename.php?parameters", true, 0},
		{"x", "/filename.php/", true, 0},
		{"x", "/windows.PHP", true, 0},
		{"x", "/fish", false, 3},
		{"x", "/fish.html", false, 3},
		{"x", "/fishheads/yummy.html", false, 3},
		{"x", "/Fish.asp", true, 0},
		{"x", "/catfish", true, 0},
	})
	// a '$' that is not at the end is literal; "**" is the same as "*"
	runChecks(t, "literal$", "User-agent: *\nDisallow: /a$b\nDisallow: /c**d$\n", []check{
		{"x", "/a$b", false, 2},
		{"x", "/ab", true, 0},
		{"x", "/cxxd", false, 3},
		{"x", "/cd", false, 3},
		{"x", "/cdx", true, 0},
	})
}

func TestCommentsAndSyntax(t *testing.T) {
	body := "\xEF\xBB\xBF# leading comment\r\n" +
		"USER-AGENT:FarroBot # our bot\r\n" +
		"  disallow  :   /tmp/   # inline comment\r" +
		"DISALLOW: /a#b\n" +
		"Allow: / # comment in line\n" +
		"Disallow /nocolon\n" +
		"dissallow: /typo\n" +
		"Sitemap: https://example.com/sitemap.xml\n" +
		"Unknown-Directive: /x\n" +
		"Disallow: # empty after comment\n" +
		"Disallow: private\n" +
		"Disallow: https://example.com/full/url\n"
	runChecks(t, "syntax", body, []check{
		{"farrobot", "/tmp/x", false, 3},
		{"farrobot", "/a", false, 4},
		{"farrobot", "/a#b", false, 4}, // fragment dropped from the path
		{"farrobot", "/ab", false, 4},
		{"farrobot", "/b", true, 5},
		{"farrobot", "/nocolon", false, 6},
		{"farrobot", "/typo", false, 7},
		{"farrobot", "/x", true, 5},
		{"farrobot", "/private", false, 11},
		{"farrobot", "/full/url", false, 12},
	})
	if got := Parse([]byte(body)).Sitemaps(); len(got) != 1 || got[0] != "https://example.com/sitemap.xml" {
		t.Errorf("Sitemaps() = %q", got)
	}
	// a '#' inside a value cuts it: "/a#b" is the pattern "/a", not "/a#b"
	r := Parse([]byte(body))
	if _, rule := r.Allowed("farrobot", "/a"); rule == nil || rule.Pattern != "/a" {
		t.Errorf("inline comment not stripped: %+v", rule)
	}
}

func TestUserAgentMatching(t *testing.T) {
	body := `User-agent: farrobot
Disallow: /farro

User-agent: Googlebot-News
Disallow: /news

User-agent: OtherBot/2.1
Disallow: /other

User-agent: *
Disallow: /star
`
	runChecks(t, "ua", body, []check{
		{"FarroBot/1.0", "/farro", false, 2},
		{"FarroBot/1.0 (+https://example.com/bot)", "/farro", false, 2},
		{"FARROBOT", "/farro", false, 2},
		{"farrobot", "/star", true, 0},
		{"Googlebot", "/news", true, 0}, // googlebot-news is another agent
		{"Googlebot", "/star", false, 11},
		{"Googlebot-News/1.0", "/news", false, 5},
		{"otherbot", "/other", false, 8},
		{"Farro", "/farro", true, 0}, // not a prefix match
		{"Farro", "/star", false, 11},
		{"", "/star", false, 11},
		{"Mozilla/5.0 (compatible; FarroBot/1.0)", "/star", false, 11},
	})
	// No '*' group and no matching group: everything allowed.
	runChecks(t, "nostar", "User-agent: a\nDisallow: /\n", []check{{"b", "/x", true, 0}})
	// A group without rules allows everything for its agent.
	runChecks(t, "empty", "User-agent: a\nDisallow:\n\nUser-agent: *\nDisallow: /\n", []check{
		{"a", "/x", true, 0},
		{"b", "/x", false, 5},
	})
	// Blank lines do not end a group: a and * share the rule.
	runChecks(t, "blank", "User-agent: a\n\nUser-agent: *\nDisallow: /x\n", []check{
		{"a", "/x", false, 4},
		{"b", "/x", false, 4},
	})
	// Rules before any user-agent line are ignored.
	runChecks(t, "orphan", "Disallow: /\nUser-agent: *\nDisallow: /x\n", []check{
		{"a", "/y", true, 0},
		{"a", "/x", false, 3},
	})
	// "User-agent: *" with trailing spaces names the global group.
	runChecks(t, "star", "User-agent: *  \nDisallow: /x\n", []check{{"a", "/x", false, 2}})
}

func TestPercentEncoding(t *testing.T) {
	// RFC 9309 section 2.2.2 table.
	body := "User-agent: *\n" +
		"Disallow: /foo/bar?baz=quz\n" +
		"Disallow: /foo/bar/\u30c4\n" +
		"Disallow: /foo/bar/%62%61%7A\n" +
		"Disallow: /a%2fb\n" +
		"Disallow: /sp ace\n"
	runChecks(t, "pct", body, []check{
		{"x", "/foo/bar?baz=quz", false, 2},
		{"x", "/foo/bar/%E3%83%84", false, 3},
		{"x", "/foo/bar/%e3%83%84", false, 3},
		{"x", "/foo/bar/\u30c4", false, 3},
		{"x", "/foo/bar/baz", false, 4},
		{"x", "/foo/bar/%62az", false, 4},
		{"x", "/a%2Fb", false, 5},
		{"x", "/a/b", true, 0}, // %2F is reserved: not the same as '/'
		{"x", "/sp%20ace", false, 6},
	})
}

func TestRobotsTxtAlwaysAllowed(t *testing.T) {
	for _, r := range []*Robots{DisallowAll(), Parse([]byte("User-agent: *\nDisallow: /\nDisallow: /robots.txt$\n"))} {
		if ok, _ := r.Allowed("x", "/robots.txt"); !ok {
			t.Error("/robots.txt disallowed")
		}
		if ok, _ := r.Allowed("x", "/other"); ok {
			t.Error("/other allowed")
		}
	}
}

func TestFullURLAndEmptyPath(t *testing.T) {
	r := Parse([]byte("User-agent: *\nDisallow: /x\nAllow: /$\nDisallow: /\n"))
	cases := []struct {
		p  string
		ok bool
	}{
		{"https://example.com/x/y", false},
		{"HTTP://example.com", true},
		{"https://example.com?q", false},
		{"", true},
		{"x", false},
		{"/#frag", true},
	}
	for _, c := range cases {
		if ok, _ := r.Allowed("a", c.p); ok != c.ok {
			t.Errorf("Allowed(%q) = %v, want %v", c.p, ok, c.ok)
		}
	}
}

func TestCrawlDelay(t *testing.T) {
	body := "User-agent: a\nCrawl-delay: 1.5\n\nUser-agent: b\nCrawl-delay: abc\nDisallow: /\n\nUser-agent: *\ncrawl-delay : 10 # slow\n" +
		"User-agent: c\nCrawl-delay: -1\n\nUser-agent: d\nCrawl-delay: 1e300\n"
	r := Parse([]byte(body))
	cases := []struct {
		ua   string
		want time.Duration
		ok   bool
	}{
		{"a/1.0", 1500 * time.Millisecond, true},
		{"b", 0, false},
		{"zzz", 10 * time.Second, true},
		{"c", 0, false},
		{"d", time.Duration(1<<63 - 1), true},
	}
	for _, c := range cases {
		d, ok := r.CrawlDelay(c.ua)
		if d != c.want || ok != c.ok {
			t.Errorf("CrawlDelay(%q) = %v %v, want %v %v", c.ua, d, ok, c.want, c.ok)
		}
	}
	// crawl-delay ends the user-agent list: b gets no delay here.
	r = Parse([]byte("User-agent: a\nCrawl-delay: 3\nUser-agent: b\nDisallow: /\n"))
	if _, ok := r.CrawlDelay("b"); ok {
		t.Error("b inherited a's crawl-delay")
	}
	if ok, _ := r.Allowed("a", "/x"); !ok {
		t.Error("a inherited b's rules")
	}
	if _, ok := AllowAll().CrawlDelay("a"); ok {
		t.Error("AllowAll has a crawl-delay")
	}
}

func TestForStatus(t *testing.T) {
	body := []byte("User-agent: *\nDisallow: /private\n")
	cases := []struct {
		status   int
		path     string
		expected bool
	}{
		{200, "/private", false},
		{200, "/public", true},
		{204, "/private", false},
		{0, "/public", false},
		{500, "/public", false},
		{503, "/public", false},
		{429, "/public", false},
		{404, "/private", true},
		{401, "/private", true},
		{403, "/private", true},
		{410, "/private", true},
		{301, "/private", true},
		{100, "/public", false},
		{600, "/public", false},
	}
	for _, c := range cases {
		if ok, _ := ForStatus(c.status, body).Allowed("farrobot", c.path); ok != c.expected {
			t.Errorf("ForStatus(%d).Allowed(%q) = %v, want %v", c.status, c.path, ok, c.expected)
		}
	}
	var nilRobots *Robots
	if ok, _ := nilRobots.Allowed("x", "/y"); !ok {
		t.Error("nil Robots disallows")
	}
}

func TestLargeFile(t *testing.T) {
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	i := 0
	for b.Len() < 500<<10 {
		fmt.Fprintf(&b, "Disallow: /dir%06d/\n", i)
		i++
	}
	last := i - 1
	b.WriteString("Disallow: /after-500k\n")
	// pad past the cap; rules there are ignored
	for b.Len() < MaxBytes+1000 {
		b.WriteString("# padding padding padding padding padding\n")
	}
	b.WriteString("Disallow: /beyond-cap\n")
	r := Parse([]byte(b.String()))
	if ok, rule := r.Allowed("x", fmt.Sprintf("/dir%06d/page", last)); ok || rule == nil {
		t.Errorf("rule %d (near 500 KiB) not applied", last)
	}
	if ok, _ := r.Allowed("x", "/after-500k"); ok {
		t.Error("rule after 500 KiB (below the cap) not applied")
	}
	if ok, _ := r.Allowed("x", "/beyond-cap"); !ok {
		t.Error("rule beyond the 512 KiB cap applied")
	}
	// A line cut by the cap is dropped, not parsed truncated: the cap falls
	// after "Allow: /fo" of "Allow: /foo/bar".
	head := "User-agent: *\nDisallow: /\n"
	pad := strings.Repeat("#", MaxBytes-len("Allow: /fo")-len(head)-1) + "\n"
	body := head + pad + "Allow: /foo/bar\n"
	if len(head+pad+"Allow: /fo") != MaxBytes {
		t.Fatal("bad test arithmetic")
	}
	if ok, _ := Parse([]byte(body)).Allowed("x", "/fox"); ok {
		t.Error("a line truncated by the cap was parsed")
	}
	if ok, _ := Parse([]byte(head+"Allow: /foo/bar\n")).Allowed("x", "/foo/bar"); !ok {
		t.Error("control: Allow: /foo/bar not applied")
	}
}

func BenchmarkAllowed(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("User-agent: *\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&sb, "Disallow: /d%d/*.php$\nAllow: /d%d/x\n", i, i)
	}
	r := Parse([]byte(sb.String()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Allowed("farrobot", "/d1999/some/long/path/file.html?query=1")
	}
}
