package testsite

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Response is what the site answers for one request.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	Delay  time.Duration
	Gzip   bool
	// Links are the hrefs of an HTML page (root-relative or absolute), as
	// a crawler must see them (2xx HTML only).
	Links []string
	HTML  bool
	// LoginWall: the answer is a login wall (a redirect to a login page,
	// or a login form answered for a URL that is not a login page).
	LoginWall bool
	// Images are the distinct image URLs of an HTML page (root-relative or
	// absolute; data: URLs left out), as a crawler must count them
	// (images.go).
	Images []string
}

const robotsA = `# a.site.test
User-agent: *
Disallow: /private   # everything private...
Allow: /private/open

User-agent: otherbot
Disallow: /
`

const robotsB = `User-agent: *
Crawl-delay: 0.3
Disallow: /nope
`

const robotsE = `User-agent: *
Disallow: /hidden
`

const robotsF = `User-agent: farro-test
Disallow: /

User-agent: *
Allow: /
`

// filler makes pages a few KiB, like real ones.
var filler = strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 40)

func text(status int, ctype, body string) Response {
	return Response{Status: status, Header: http.Header{"Content-Type": {ctype}}, Body: []byte(body)}
}

func notFound() Response {
	return text(404, "text/html; charset=utf-8", "<html><body>not found</body></html>")
}

// page renders an HTML page linking to links; base, when set, is emitted
// as <base href> and links below it are written relative to it.
func page(title, base string, links ...string) Response {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + title + "</title>")
	if base != "" {
		b.WriteString(`<base href="` + base + `">`)
	}
	b.WriteString("</head>\n<body><h1>" + title + "</h1>\n<p>" + filler + "</p>\n<ul>\n")
	for i, l := range links {
		href := l
		if base != "" && strings.HasPrefix(l, base) && len(l) > len(base) {
			href = l[len(base):]
		}
		switch i % 7 {
		case 3:
			fmt.Fprintf(&b, "<li><area href=\"%s\" alt=\"x\"></li>\n", href)
		case 5:
			fmt.Fprintf(&b, "<li><iframe src=\"%s\"></iframe></li>\n", href)
		default:
			fmt.Fprintf(&b, "<li><a href=\"%s\">link %d</a></li>\n", href, i)
		}
	}
	b.WriteString("</ul>\n</body></html>\n")
	return Response{Status: 200, Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}}, Body: []byte(b.String()), Links: links, HTML: true}
}

func redirect(status int, loc string) Response {
	return Response{Status: status, Header: http.Header{"Location": {loc}, "Content-Type": {"text/html"}}, Body: []byte("<a href=\"" + loc + "\">moved</a>")}
}

// Page is the site's answer to host and uri; hit counts the earlier
// requests of the same URL.
func (s *Site) Page(host, uri string, hit int) Response {
	path := uri
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if strings.HasPrefix(host, "t") && strings.HasSuffix(host, ".site.test") {
		if n, err := strconv.Atoi(strings.TrimSuffix(host[1:], ".site.test")); err == nil && n >= 1 && n <= s.Opts.ExtraHosts {
			return s.chain(host, path, s.Opts.ExtraPages)
		}
	}
	if s.Opts.Plain {
		switch host {
		case HostA:
			if path == "/robots.txt" {
				return notFound()
			}
			return s.tree(path)
		case HostB, HostC:
			if path == "/robots.txt" {
				return notFound()
			}
			return s.chain(host, path, 30)
		}
		return notFound()
	}
	if r, ok := s.imageSite(host, path); ok { // images.go
		return r
	}
	switch host {
	case HostA:
		return s.pageA(host, path, uri)
	case HostWWWA:
		switch path {
		case "/robots.txt":
			return text(200, "text/plain", robotsA)
		case "/about":
			return page("about", "")
		}
	case HostB:
		switch {
		case path == "/robots.txt":
			return text(200, "text/plain", robotsB)
		case path == "/":
			return page("b", "", "/b/1", "/b/2", "/b/3", "/b/4", "/nope", "/nope/deeper", "/landing")
		case path == "/landing":
			return page("landing", "", "/")
		case strings.HasPrefix(path, "/b/"):
			n, err := strconv.Atoi(path[3:])
			if err != nil || n < 1 || n > 6 {
				return notFound()
			}
			return page("b "+path, "", "/", fmt.Sprintf("/b/%d", n+1))
		}
	case HostC:
		switch path {
		case "/robots.txt":
			return notFound()
		case "/":
			return page("c", "", "/c/1", "/limited", "/c/2")
		case "/limited":
			if hit == 0 {
				r := text(429, "text/html", "<html><body>slow down</body></html>")
				r.Header.Set("Retry-After", strconv.Itoa(int(RetryAfterC/time.Second)))
				return r
			}
			return page("limited", "")
		case "/c/1", "/c/2":
			return page("c "+path, "", "/")
		}
	case HostD:
		switch path {
		case "/robots.txt":
			return text(500, "text/plain", "oops")
		case "/":
			return page("d", "", "/d/1")
		}
	case HostE:
		switch path {
		case "/robots.txt":
			return redirect(301, "/real-robots.txt")
		case "/real-robots.txt":
			return text(200, "text/plain", robotsE)
		case "/":
			return page("e", "", "/hidden", "/shown", "/hidden/deeper")
		case "/shown", "/hidden", "/hidden/deeper":
			return page("e "+path, "", "/")
		}
	case HostF:
		switch path {
		case "/robots.txt":
			return text(200, "text/plain", robotsF)
		case "/":
			return page("f", "", "/f/1")
		}
	case HostSlow:
		switch path {
		case "/robots.txt":
			return notFound()
		case "/":
			r := page("slow", "")
			r.Delay = s.Opts.TooSlowDelay
			return r
		}
	case HostOut:
		return page("out", "", "/")
	case HostWall, HostMembers, HostPortal:
		return loginSite(host, path)
	}
	return notFound()
}

// loginPage is a sign-in form (a password input in a form).
func loginPage(links ...string) Response {
	r := page("sign in", "", links...)
	form := []byte(`<form method="post" action="/session"><input name="user"><input type="password" name="pw"><button>Sign in</button></form>`)
	r.Body = bytes.Replace(r.Body, []byte("</h1>"), append([]byte("</h1>\n"), form...), 1)
	return r
}

// loginSite serves the login-wall hosts: wall (every page redirects to
// /login), members (every page is a login form) and portal (public pages,
// one of which, /account, redirects to /login; /login is a login form).
func loginSite(host, path string) Response {
	if path == "/robots.txt" {
		return notFound()
	}
	switch host {
	case HostWall:
		if path == "/login" {
			return loginPage("/signup", "/")
		}
		r := redirect(302, "/login?next="+path)
		r.LoginWall = true
		return r
	case HostMembers:
		r := loginPage("/m/1", "/m/2")
		r.LoginWall = true
		return r
	}
	switch path {
	case "/":
		return page("portal", "", "/docs/1", "/docs/2", "/account", "/login")
	case "/docs/1", "/docs/2":
		return page("portal "+path, "", "/")
	case "/account":
		r := redirect(302, "/login?next=/account")
		r.LoginWall = true
		return r
	case "/login":
		return loginPage("/")
	}
	return notFound()
}

func (s *Site) pageA(host, path, uri string) Response {
	port := strconv.Itoa(s.Port)
	abs := func(h, p string) string { return "http://" + h + ":" + port + p }
	switch path {
	case "/robots.txt":
		return text(200, "text/plain", robotsA)
	case "/":
		r := page("a", "",
			"/p/1", "/p/2", "/p/3", "/p/4",
			// Variants of /p/1 that normalization folds.
			"/p/./1", "/p/x/../1", "/p/1#top", "HTTP://A.SITE.TEST:"+port+"/p/%31",
			"/private/secret", "/private/open", "/missing", "/error", "/data.json", "/big", "/gz", "/slow-ok",
			"/old", "/loop1", "/cross", "/trap/1",
			abs(HostWWWA, "/about"),
			abs(HostB, "/"), abs(HostC, "/"), abs(HostD, "/"), abs(HostE, "/"), abs(HostF, "/"), abs(HostSlow, "/"),
			abs(HostOut, "/"), "mailto:someone@site.test", "javascript:void(0)", "ftp://a.site.test/file",
		)
		return r
	case "/about", "/private/open", "/private/secret", "/new", "/gz-child", "/big-child", "/big-end":
		return page(path, "", "/")
	case "/missing":
		r := page("missing", "", "/from-404")
		r.Status = 404
		return r
	case "/error":
		r := page("error", "", "/from-500")
		r.Status = 500
		return r
	case "/data.json":
		return text(200, "application/json", `{"next":"/json-link","html":"<a href=\"/json-link\">x</a>"}`)
	case "/big":
		head := `<!DOCTYPE html><html><body><a href="/big-child">child</a><p>`
		tail := `</p><a href="/big-end">end</a></body></html>`
		body := head + strings.Repeat("x", max(s.Opts.BigBytes-len(head)-len(tail), 0)) + tail
		return Response{Status: 200, Header: http.Header{"Content-Type": {"text/html"}}, Body: []byte(body), Links: []string{"/big-child", "/big-end"}, HTML: true}
	case "/gz":
		r := page("gz", "", "/gz-child")
		r.Gzip = true
		return r
	case "/slow-ok":
		r := page("slow ok", "", "/")
		r.Delay = s.Opts.SlowDelay
		return r
	case "/old":
		return redirect(301, "new")
	case "/loop1":
		return redirect(302, "/loop2")
	case "/loop2":
		return redirect(302, "/loop1")
	case "/cross":
		return redirect(302, abs(HostB, "/landing"))
	}
	if strings.HasPrefix(path, "/trap/") {
		n, err := strconv.Atoi(path[len("/trap/"):])
		if err != nil || n < 1 {
			return notFound()
		}
		return page("trap", "", fmt.Sprintf("/trap/%d", n+1), fmt.Sprintf("/trap/%d?session=%d", n+1, n))
	}
	return s.tree(path)
}

// tree serves a.site.test's page tree: "/" (plain mode) and "/p/i/j/...".
func (s *Site) tree(path string) Response {
	var segs []int
	if path != "/" {
		if !strings.HasPrefix(path, "/p/") {
			return notFound()
		}
		for _, part := range strings.Split(strings.TrimSuffix(path[3:], "/"), "/") {
			n, err := strconv.Atoi(part)
			if err != nil || n < 1 {
				return notFound()
			}
			segs = append(segs, n)
		}
	}
	level := len(segs)
	if level > s.Opts.Levels {
		return notFound()
	}
	for i, n := range segs {
		if n > max(s.Opts.Fanout-i, 1) {
			return notFound()
		}
	}
	prefix := "/p"
	for _, n := range segs {
		prefix += "/" + strconv.Itoa(n)
	}
	var links []string
	if level < s.Opts.Levels {
		for k := 1; k <= max(s.Opts.Fanout-level, 1); k++ {
			links = append(links, fmt.Sprintf("%s/%d", prefix, k))
		}
	}
	links = append(links, "/")
	if level > 0 {
		links = append(links, path+"#self")
	}
	base := ""
	if level == 1 && segs[0] == 2 {
		base = prefix + "/" // relative links against <base href>
	}
	return page("tree "+path, base, links...)
}

// chain serves the pages of a t<N> host (and b, c in plain mode): "/"
// links to /n/1../n/4, /n/k to /n/(4k+1)..(4k+4), up to n pages.
func (s *Site) chain(host, path string, n int) Response {
	if path == "/robots.txt" {
		return notFound()
	}
	k := 0
	if path != "/" {
		if !strings.HasPrefix(path, "/n/") {
			return notFound()
		}
		v, err := strconv.Atoi(path[3:])
		if err != nil || v < 1 || v > n {
			return notFound()
		}
		k = v
	}
	var links []string
	for c := 4*k + 1; c <= 4*k+4 && c <= n; c++ {
		links = append(links, fmt.Sprintf("/n/%d", c))
	}
	links = append(links, "/")
	return page(host+" "+path, "", links...)
}
