// Package urlnorm gives every crawlable URL one identity: its normalized form.
//
// Normalize applies the syntax-based and scheme-based normalizations of
// RFC 3986 section 6 to absolute http and https URLs, and Resolve resolves a
// link found in a page against the page's URL (RFC 3986 section 5) and then
// normalizes the result. The parser is a small RFC 3986 splitter written for
// this package (net/url is deliberately not used: it decodes paths, keeps
// fragments and accepts things a crawler must refuse).
//
// Always applied ("safe", RFC 3986 section 6.2.2 and 6.2.3):
//
//   - the scheme and the host are lowercased;
//   - the hex digits of percent-encodings are uppercased and percent-encoded
//     unreserved characters (ALPHA DIGIT "-" "." "_" "~") are decoded;
//     reserved characters are never decoded (%2F stays %2F);
//   - dot segments are removed (after decoding, so "%2E%2E" counts as "..");
//   - the default port is dropped (":80" for http, ":443" for https), as is an
//     empty port ("http://h:/") and leading zeros of a port ("h:0080" = "h:80");
//   - an empty path becomes "/";
//   - the fragment is dropped;
//   - internationalized host names are converted to punycode with the IDNA
//     lookup profile (UTS #46 non-transitional: "ß" stays "ß", so
//     "straße.de" becomes "xn--strae-oqa.de"); percent-encoded UTF-8 in a host
//     is decoded first;
//   - IPv6 literals are written in their RFC 5952 form ("[2001:db8::1]").
//
// Decisions (documented here because other packages depend on them):
//
//   - Only absolute http and https URLs with a non-empty host are accepted.
//     Another scheme gives ErrUnsupportedScheme, a relative reference
//     ErrNotAbsolute, anything else an error wrapping ErrInvalid.
//   - Surrounding whitespace and C0 controls are trimmed and ASCII tab, CR
//     and LF are removed anywhere, as browsers do with href attributes.
//   - Characters that may not appear in a URI component (space, '"', '<',
//     '>', '\\', '^', '`', '{', '|', '}', '[' and ']' outside an IPv6
//     literal, controls and all non-ASCII bytes) are percent-encoded as UTF-8,
//     and a '%' that does not start a valid percent-encoding becomes "%25".
//     This is a repair, not an equivalence: it makes every accepted URL a
//     valid RFC 3986 URI that net/http sends byte for byte. A backslash is
//     encoded, not treated as a slash (WHATWG does the latter).
//   - Userinfo is kept (percent-normalized); it is rare in crawls and
//     dropping it would change the request. An entirely empty userinfo
//     ("http://@host/") is dropped.
//   - A trailing dot in the host is kept: RFC 3986 treats "example.com." and
//     "example.com" as different reg-names and servers may see different Host
//     headers. (package domain strips it for domain identity.)
//   - Host names: each ASCII label may hold letters, digits, '-' and '_'
//     (underscores and "r3---sn-..." style hyphens exist in real host names
//     that browsers reach); labels that are non-ASCII or start with "xn--" go
//     through idna.Lookup and must be valid IDNA. Labels are 1..63 octets and
//     the name at most 253 octets (a host longer than 1024 octets is refused
//     before IDNA, whose punycode step is quadratic on hostile input).
//     Anything else (sub-delims, '%', empty labels) is an invalid host.
//   - A host whose last label is all digits or hex-looking ("0x7f") must be a
//     dotted-decimal IPv4 address without leading zeros; "http://0x7f.1/" or
//     "http://3232235521/" are refused instead of guessing as browsers do (an
//     SSRF guard must see the same address the dialer would use). IPv4
//     addresses lose a trailing dot.
//   - IPv6 zone identifiers and IPvFuture literals are refused.
//   - Ports must be 1..65535.
//   - Reference resolution is RFC 3986 "strict": "http:g" against an http
//     base is the absolute URI "http:g", which has no host and is refused.
//
// Optional rules (all off by default: "nothing risky by default"):
//
//   - SortQuery sorts query parameters by name, stably (values of a repeated
//     name keep their order);
//   - StripWWW removes leading "www." labels when what remains is still a
//     registrable domain (www.example.com -> example.com, www.co.uk stays);
//   - LowercasePath lowercases the path (not the query, not percent-hex);
//   - DropEmptyQuery drops a '?' with nothing after it.
//
// Normalize is idempotent: Normalize(Normalize(x)) == Normalize(x) for every
// x it accepts, with the same options (FuzzNormalize checks this).
package urlnorm

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Options selects the optional (potentially meaning-changing) rules. The zero
// value applies only the safe RFC 3986 normalizations.
type Options struct {
	SortQuery      bool // sort query parameters by name (stable)
	StripWWW       bool // fold leading "www." labels of the host
	LowercasePath  bool // lowercase the path
	DropEmptyQuery bool // "http://h/p?" -> "http://h/p"
}

var (
	// ErrUnsupportedScheme: the URL or link has a scheme other than http or
	// https (mailto:, javascript:, data:, ftp:, ...).
	ErrUnsupportedScheme = errors.New("urlnorm: unsupported scheme")
	// ErrNotAbsolute: Normalize was given a relative reference.
	ErrNotAbsolute = errors.New("urlnorm: not an absolute URL")
	// ErrInvalid: the URL is malformed (no host, bad host, bad port, ...).
	ErrInvalid = errors.New("urlnorm: invalid URL")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ref is a URI reference split into its five components (RFC 3986
// Appendix B); the has* flags distinguish empty from absent components.
type ref struct {
	scheme   string
	hasAuth  bool
	auth     string
	path     string
	hasQuery bool
	query    string
}

// clean trims leading and trailing C0 controls and spaces and removes ASCII
// tab, CR and LF everywhere.
func clean(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= 0x20 })
	if strings.ContainsAny(s, "\t\r\n") {
		s = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\r' || r == '\n' {
				return -1
			}
			return r
		}, s)
	}
	return s
}

// split parses s as a URI reference. It never fails: every string is a
// (possibly invalid) reference; validation happens later. The fragment is
// discarded.
func split(s string) ref {
	var r ref
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	// scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ':' {
			if i > 0 {
				r.scheme = s[:i]
				s = s[i+1:]
			}
			break
		}
		if isAlpha(c) || (i > 0 && (isDigit(c) || c == '+' || c == '-' || c == '.')) {
			continue
		}
		break
	}
	if strings.HasPrefix(s, "//") {
		s = s[2:]
		end := strings.IndexAny(s, "/?")
		if end < 0 {
			end = len(s)
		}
		r.hasAuth = true
		r.auth = s[:end]
		s = s[end:]
	}
	if i := strings.IndexByte(s, '?'); i >= 0 {
		r.hasQuery = true
		r.query = s[i+1:]
		s = s[:i]
	}
	r.path = s
	return r
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case isDigit(c):
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

const upperHex = "0123456789ABCDEF"

func isUnreserved(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~'
}

func isSubDelim(c byte) bool {
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=':
		return true
	}
	return false
}

func isPchar(c byte) bool { return isUnreserved(c) || isSubDelim(c) || c == ':' || c == '@' }

func pathChar(c byte) bool     { return isPchar(c) || c == '/' }
func queryChar(c byte) bool    { return isPchar(c) || c == '/' || c == '?' }
func userinfoChar(c byte) bool { return isUnreserved(c) || isSubDelim(c) || c == ':' }

// PercentNormalize rewrites s so that percent-encodings use uppercase hex,
// percent-encoded unreserved characters are decoded, bytes for which allowed
// reports false are percent-encoded, and a '%' not followed by two hex digits
// becomes "%25". It is idempotent for any allowed that accepts all unreserved
// characters and rejects '%'.
func PercentNormalize(s string, allowed func(byte) bool) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' {
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				v := unhex(s[i+1])<<4 | unhex(s[i+2])
				if isUnreserved(v) {
					b.WriteByte(v)
				} else {
					b.WriteByte('%')
					b.WriteByte(upperHex[v>>4])
					b.WriteByte(upperHex[v&15])
				}
				i += 2
				continue
			}
			b.WriteString("%25")
			continue
		}
		if c != '%' && allowed(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

// QueryChar reports whether c may appear unencoded in a URI query.
func QueryChar(c byte) bool { return queryChar(c) }

// removeDotSegments implements RFC 3986 section 5.2.4.
func removeDotSegments(in string) string {
	if !strings.Contains(in, ".") {
		return in
	}
	out := make([]byte, 0, len(in))
	for len(in) > 0 {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			out = popSegment(out)
		case in == "/..":
			in = "/"
			out = popSegment(out)
		case in == "." || in == "..":
			in = ""
		default:
			// move the first segment (with its leading '/', if any) to out
			start := 0
			if in[0] == '/' {
				start = 1
			}
			end := strings.IndexByte(in[start:], '/')
			if end < 0 {
				end = len(in)
			} else {
				end += start
			}
			out = append(out, in[:end]...)
			in = in[end:]
		}
	}
	return string(out)
}

// popSegment removes the last segment and its preceding '/' (if any).
func popSegment(out []byte) []byte {
	i := len(out) - 1
	for i >= 0 && out[i] != '/' {
		i--
	}
	if i < 0 {
		return out[:0]
	}
	return out[:i]
}

// Normalize returns the normalized form of the absolute http or https URL raw.
// See the package documentation for the rules.
func Normalize(raw string, o Options) (string, error) {
	r := split(clean(raw))
	if r.scheme == "" {
		return "", ErrNotAbsolute
	}
	return finish(r, o)
}

// Resolve resolves the link ref against the absolute http or https URL base
// (RFC 3986 section 5.2, strict) and normalizes the result. Links with
// another scheme (mailto:, javascript:, data:, ftp:, ...) give
// ErrUnsupportedScheme.
func Resolve(base, reference string, o Options) (string, error) {
	b := split(clean(base))
	if b.scheme == "" {
		return "", fmt.Errorf("base: %w", ErrNotAbsolute)
	}
	if s := strings.ToLower(b.scheme); s != "http" && s != "https" {
		return "", fmt.Errorf("base: %w: %q", ErrUnsupportedScheme, b.scheme)
	}
	if !b.hasAuth {
		return "", fmt.Errorf("base: %w", invalid("no host"))
	}
	r := split(clean(reference))
	var t ref
	switch {
	case r.scheme != "":
		t = r
	case r.hasAuth:
		t = r
		t.scheme = b.scheme
	default:
		t.scheme, t.hasAuth, t.auth = b.scheme, b.hasAuth, b.auth
		switch {
		case r.path == "":
			t.path = b.path
			if r.hasQuery {
				t.hasQuery, t.query = true, r.query
			} else {
				t.hasQuery, t.query = b.hasQuery, b.query
			}
		case r.path[0] == '/':
			t.path = r.path
			t.hasQuery, t.query = r.hasQuery, r.query
		default:
			t.path = merge(b, r.path)
			t.hasQuery, t.query = r.hasQuery, r.query
		}
	}
	// dot segments are removed by finish (after percent-normalization, which
	// only makes more dot segments visible), so resolution does not need to.
	return finish(t, o)
}

// merge implements RFC 3986 section 5.2.3.
func merge(base ref, p string) string {
	if base.hasAuth && base.path == "" {
		return "/" + p
	}
	if i := strings.LastIndexByte(base.path, '/'); i >= 0 {
		return base.path[:i+1] + p
	}
	return p
}

// finish validates and normalizes a split absolute reference.
func finish(r ref, o Options) (string, error) {
	scheme := strings.ToLower(r.scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("%w: %q", ErrUnsupportedScheme, r.scheme)
	}
	if !r.hasAuth {
		return "", invalid("no host")
	}
	userinfo, hasUser, host, port := splitAuthority(r.auth)
	h, err := normalizeHost(host, true)
	if err != nil {
		return "", err
	}
	if o.StripWWW {
		h = FoldWWW(h)
	}
	p, err := normalizePort(port)
	if err != nil {
		return "", err
	}
	if (scheme == "http" && p == "80") || (scheme == "https" && p == "443") {
		p = ""
	}

	var b strings.Builder
	b.Grow(len(scheme) + len(r.auth) + len(r.path) + len(r.query) + 8)
	b.WriteString(scheme)
	b.WriteString("://")
	if hasUser && userinfo != "" {
		b.WriteString(PercentNormalize(userinfo, userinfoChar))
		b.WriteByte('@')
	}
	b.WriteString(h)
	if p != "" {
		b.WriteByte(':')
		b.WriteString(p)
	}
	path := PercentNormalize(r.path, pathChar)
	if o.LowercasePath {
		path = lowerOutsideEscapes(path)
	}
	path = removeDotSegments(path)
	if path == "" || path[0] != '/' {
		// An authority is present, so the path is empty or absolute; a
		// relative-looking path ("http://h" + "g" cannot occur from split,
		// but merge of weird bases can) gets its slash.
		path = "/" + path
	}
	b.WriteString(path)
	if r.hasQuery {
		q := PercentNormalize(r.query, queryChar)
		if o.SortQuery {
			q = sortQuery(q)
		}
		if q != "" || !o.DropEmptyQuery {
			b.WriteByte('?')
			b.WriteString(q)
		}
	}
	return b.String(), nil
}

// splitAuthority splits authority into userinfo, host and port. The last '@'
// ends the userinfo; a port follows the last ':' after the host (or after the
// closing ']' of an IP literal).
func splitAuthority(a string) (userinfo string, hasUser bool, host, port string) {
	if i := strings.LastIndexByte(a, '@'); i >= 0 {
		userinfo, hasUser, a = a[:i], true, a[i+1:]
	}
	if strings.HasPrefix(a, "[") {
		if i := strings.IndexByte(a, ']'); i >= 0 {
			host, rest := a[:i+1], a[i+1:]
			if strings.HasPrefix(rest, ":") {
				return userinfo, hasUser, host, rest[1:]
			}
			if rest != "" {
				// garbage after the literal: make the host invalid
				return userinfo, hasUser, a, ""
			}
			return userinfo, hasUser, host, ""
		}
		return userinfo, hasUser, a, ""
	}
	if i := strings.LastIndexByte(a, ':'); i >= 0 {
		return userinfo, hasUser, a[:i], a[i+1:]
	}
	return userinfo, hasUser, a, ""
}

// normalizePort validates a port and strips leading zeros. "" means no port.
func normalizePort(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	for i := 0; i < len(p); i++ {
		if !isDigit(p[i]) {
			return "", invalid("bad port %q", p)
		}
	}
	q := strings.TrimLeft(p, "0")
	if q == "" || len(q) > 5 {
		return "", invalid("bad port %q", p)
	}
	n, _ := strconv.Atoi(q)
	if n < 1 || n > 65535 {
		return "", invalid("bad port %q", p)
	}
	return q, nil
}

// NormalizeHost normalizes a URL host (without port): lowercase, IDN to
// punycode, IPv4 and bracketed IPv6 literals canonicalized. A trailing dot on
// a name is kept. It returns an error wrapping ErrInvalid for hosts that
// Normalize would refuse.
func NormalizeHost(host string) (string, error) { return normalizeHost(host, true) }

// maxHostBytes bounds the (percent-decoded) host before IDNA processing.
const maxHostBytes = 1024

func normalizeHost(host string, decodePct bool) (string, error) {
	if host == "" {
		return "", invalid("empty host")
	}
	if host[0] == '[' {
		if len(host) < 2 || host[len(host)-1] != ']' {
			return "", invalid("bad IP literal %q", host)
		}
		lit := host[1 : len(host)-1]
		if strings.ContainsAny(lit, "%") {
			return "", invalid("IPv6 zone identifiers are not supported: %q", host)
		}
		if strings.HasPrefix(lit, "v") || strings.HasPrefix(lit, "V") {
			return "", invalid("IPvFuture literals are not supported: %q", host)
		}
		a, err := netip.ParseAddr(lit)
		if err != nil || !a.Is6() {
			return "", invalid("bad IPv6 literal %q", host)
		}
		return "[" + a.String() + "]", nil
	}
	if decodePct && strings.IndexByte(host, '%') >= 0 {
		d, ok := pctDecode(host)
		if !ok {
			return "", invalid("bad percent-encoding in host %q", host)
		}
		host = d
	}
	if len(host) > maxHostBytes {
		// DNS names are at most 253 octets; the cap also bounds the
		// quadratic cost of punycode encoding on hostile input.
		return "", invalid("host too long")
	}
	if !utf8.ValidString(host) {
		return "", invalid("host is not UTF-8: %q", host)
	}
	// Split into labels on '.' and the dots UTS #46 maps to '.'.
	labels := strings.FieldsFunc(host, isDot)
	trailingDot := false
	if r, _ := utf8.DecodeLastRuneInString(host); isDot(r) {
		trailingDot = true
	}
	// FieldsFunc drops empty fields, so detect empty labels separately.
	if n := countDots(host); n != len(labels)-1+boolInt(trailingDot) || len(labels) == 0 {
		return "", invalid("empty label in host %q", host)
	}
	total := 0
	for i, l := range labels {
		nl, err := normalizeLabel(l)
		if err != nil {
			return "", invalid("host %q: %v", host, err)
		}
		labels[i] = nl
		total += len(nl) + 1
	}
	if total-1 > 253 {
		return "", invalid("host name too long")
	}
	last := labels[len(labels)-1]
	if looksNumeric(last) {
		ip := strings.Join(labels, ".")
		a, err := netip.ParseAddr(ip)
		if err != nil || !a.Is4() {
			return "", invalid("bad IPv4 address %q", host)
		}
		return a.String(), nil
	}
	out := strings.Join(labels, ".")
	if trailingDot {
		out += "."
	}
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isDot(r rune) bool {
	return r == '.' || r == '\u3002' || r == '\uFF0E' || r == '\uFF61'
}

func countDots(s string) int {
	n := 0
	for _, r := range s {
		if isDot(r) {
			n++
		}
	}
	return n
}

// looksNumeric reports whether a label is one WHATWG would parse as an IPv4
// number: all decimal digits, or "0x" followed by hex digits.
func looksNumeric(l string) bool {
	if l == "" {
		return false
	}
	if strings.HasPrefix(l, "0x") {
		for i := 2; i < len(l); i++ {
			if !isHex(l[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if !isDigit(l[i]) {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// normalizeLabel lowercases and validates one host label, converting
// internationalized labels to punycode.
func normalizeLabel(l string) (string, error) {
	if isASCII(l) {
		l = strings.ToLower(l)
		if !strings.HasPrefix(l, "xn--") {
			return l, checkASCIILabel(l)
		}
	}
	a, err := idna.Lookup.ToASCII(l)
	if err != nil {
		return "", err
	}
	if a == "" || strings.IndexByte(a, '.') >= 0 {
		return "", fmt.Errorf("bad internationalized label %q", l)
	}
	if err := checkASCIILabel(a); err != nil {
		return "", err
	}
	// The result must be stable: a punycode label that idna would rewrite
	// again (or that decodes to plain ASCII) is not a canonical label.
	if b, err := idna.Lookup.ToASCII(a); err != nil || b != a {
		return "", fmt.Errorf("unstable internationalized label %q", l)
	}
	return a, nil
}

func checkASCIILabel(l string) error {
	if l == "" || len(l) > 63 {
		return fmt.Errorf("bad label length %q", l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !('a' <= c && c <= 'z' || isDigit(c) || c == '-' || c == '_') {
			return fmt.Errorf("bad character %q in label %q", c, l)
		}
	}
	return nil
}

func pctDecode(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", false
			}
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), true
}

// FoldWWW removes leading "www." labels from a normalized host name as long
// as what remains is still a registrable domain or below one (so
// "www.example.com" -> "example.com" but "www.co.uk" and "www.com" stay).
// IP literals are returned unchanged. A trailing dot is preserved.
func FoldWWW(host string) string {
	for strings.HasPrefix(host, "www.") {
		rest := host[4:]
		name := strings.TrimSuffix(rest, ".")
		if name == "" || strings.HasSuffix(name, ".") {
			break
		}
		if _, err := publicsuffix.EffectiveTLDPlusOne(name); err != nil {
			break
		}
		if a, err := netip.ParseAddr(name); err == nil && a.IsValid() {
			break
		}
		host = rest
	}
	return host
}

// lowerOutsideEscapes lowercases ASCII letters except the hex digits of
// percent-encodings (which stay uppercase).
func lowerOutsideEscapes(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		if b[i] == '%' && i+2 < len(b) {
			i += 2
			continue
		}
		if 'A' <= b[i] && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}

// sortQuery stably sorts '&'-separated parameters by name (the part before
// the first '='). Values of a repeated name keep their relative order.
func sortQuery(q string) string {
	if strings.IndexByte(q, '&') < 0 {
		return q
	}
	params := strings.Split(q, "&")
	name := func(p string) string {
		if i := strings.IndexByte(p, '='); i >= 0 {
			return p[:i]
		}
		return p
	}
	sort.SliceStable(params, func(i, j int) bool { return name(params[i]) < name(params[j]) })
	return strings.Join(params, "&")
}
