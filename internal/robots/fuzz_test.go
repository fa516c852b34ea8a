package robots

import (
	"regexp"
	"strings"
	"testing"
)

// refMatch is an independent matcher: the pattern compiled to a regexp.
func refMatch(pattern, path string) bool {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	anchored := strings.HasSuffix(pattern, "$")
	if anchored {
		pattern = pattern[:len(pattern)-1]
	}
	for _, part := range strings.Split(pattern, "*") {
		b.WriteString(regexp.QuoteMeta(part))
		b.WriteString(".*")
	}
	s := strings.TrimSuffix(b.String(), ".*")
	if anchored {
		s += "$"
	}
	return regexp.MustCompile(s).MatchString(path)
}

// FuzzParse checks that parsing and matching never panic, that /robots.txt
// is always allowed, and that Allowed agrees with a brute-force reference
// (regexp matching, longest pattern wins, allow wins ties).
func FuzzParse(f *testing.F) {
	f.Add(rfcSimple, "foobot", "/example/page.html")
	f.Add("User-agent: *\nAllow: /page*\nDisallow: /*.php$\n", "x", "/page.php")
	f.Add("user-agent: a\ndisallow: /x\n\nuser-agent: A\nallow: /x$\n", "a/1.0", "/x")
	f.Add("User-agent: *\nDisallow: /a%2fb # c\nCrawl-delay: 3.5\n", "b", "/a%2Fb?x")
	f.Add("\xEF\xBB\xBFUser-agent:*\rDisallow:*\r\nAllow:/$", "", "/")
	f.Add("User-agent: *\nDisallow: /**a**b*$\n", "z", "/xaxbx")
	f.Add("User-agent: *\nDisallow: /\u30c4\n", "z", "/%e3%83%84")
	f.Fuzz(func(t *testing.T, body, ua, path string) {
		r := Parse([]byte(body))
		r.CrawlDelay(ua)
		if ok, rule := r.Allowed(ua, "/robots.txt"); !ok || rule != nil {
			t.Fatalf("/robots.txt not allowed: %+v", rule)
		}
		ok, rule := r.Allowed(ua, path)
		p := normalizePath(path)
		if p == "/robots.txt" {
			return
		}
		var best *Rule
		if ar := r.lookup(ua); ar != nil {
			for _, c := range ar.rules {
				if !refMatch(c.Pattern, p) {
					continue
				}
				if best == nil || len(c.Pattern) > len(best.Pattern) ||
					(len(c.Pattern) == len(best.Pattern) && c.Allow && !best.Allow) {
					best = c
				}
			}
		}
		want := best == nil || best.Allow
		if ok != want {
			t.Fatalf("Allowed(%q, %q) = %v by %+v; reference %v by %+v", ua, path, ok, rule, want, best)
		}
		if (rule == nil) != (best == nil) || (rule != nil && (len(rule.Pattern) != len(best.Pattern) || rule.Allow != best.Allow)) {
			t.Fatalf("Allowed(%q, %q) decided by %+v; reference %+v", ua, path, rule, best)
		}
	})
}
