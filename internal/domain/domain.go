// Package domain gives every crawled site one canonical domain name (seed 004
// section 3.2) and its registrable parent from the public suffix list.
//
// Canonical rules:
//
//   - the input may be a bare host ("Example.COM"), host:port, an IPv4
//     address, a bracketed IPv6 address with or without a port, a bare IPv6
//     address ("::1"), a URL of any scheme ("https://user@host:8443/p?q"), a
//     protocol-relative URL ("//host/p") or a host followed by a path
//     ("example.com/p");
//   - the host is normalized exactly as urlnorm does (lowercase, IDN to
//     punycode with the IDNA lookup profile, percent-decoding, IPv4/IPv6
//     canonical forms, same validity rules), so a domain name computed from
//     a normalized URL and from the raw link always agree;
//   - a trailing dot is stripped ("example.com." -> "example.com");
//   - leading "www." labels are folded ("www.example.com" -> "example.com")
//     when what remains is still a registrable domain ("www.co.uk" and
//     "www.com" stay as they are; see urlnorm.FoldWWW);
//   - ports 80 and 443 are stripped whatever the scheme (the seed's "strip
//     if default (80/443)": http://h:443 and https://h:80 are still the same
//     site for politeness); any other port is kept as "host:port", because a
//     different port is a different server;
//   - subdomains are kept separate ("blog.example.com" stays); Registrable
//     gives the parent to record alongside;
//   - IPv6 addresses are always bracketed ("[2001:db8::1]", "[::1]:8080").
//
// Registrable returns the eTLD+1 from golang.org/x/net/publicsuffix (which
// includes the private section of the list: "user.github.io" is its own
// registrable domain). For IP addresses, single-label names such as
// "localhost", public suffixes themselves ("co.uk") and anything the list
// cannot handle it returns the host itself (normalized, without port or
// trailing dot; IPv6 in brackets).
package domain

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/publicsuffix"

	"github.com/farro-dev/farro/internal/urlnorm"
)

// ErrInvalid is wrapped by every error Canonical returns.
var ErrInvalid = errors.New("domain: invalid host")

// Canonical returns the canonical domain name of a host, host:port or URL.
func Canonical(hostOrURL string) (string, error) {
	s := strings.TrimSpace(hostOrURL)
	if i := strings.Index(s, "://"); i >= 0 && !strings.ContainsAny(s[:i], "/?#[") {
		s = s[i+3:]
	} else if strings.HasPrefix(s, "//") {
		s = s[2:]
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "", fmt.Errorf("%w: empty host in %q", ErrInvalid, hostOrURL)
	}
	host, port := s, ""
	if a, err := netip.ParseAddr(s); err == nil && a.Is6() {
		host = "[" + s + "]" // bare IPv6 address, no port possible
	} else if strings.HasPrefix(s, "[") {
		if i := strings.IndexByte(s, ']'); i >= 0 {
			host, port = s[:i+1], s[i+1:]
			if port != "" {
				if port[0] != ':' {
					return "", fmt.Errorf("%w: %q", ErrInvalid, hostOrURL)
				}
				port = port[1:]
			}
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, port = s[:i], s[i+1:]
	}
	h, err := urlnorm.NormalizeHost(host)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalid, hostOrURL, err)
	}
	h = strings.TrimSuffix(h, ".")
	h = urlnorm.FoldWWW(h)
	p, err := canonicalPort(port)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalid, hostOrURL, err)
	}
	if p != "" {
		return h + ":" + p, nil
	}
	return h, nil
}

// canonicalPort validates a port, strips leading zeros and drops 80 and 443.
func canonicalPort(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	n := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < '0' || c > '9' {
			return "", fmt.Errorf("bad port %q", p)
		}
		n = n*10 + int(c-'0')
		if n > 65535 {
			return "", fmt.Errorf("bad port %q", p)
		}
	}
	if n == 0 {
		return "", fmt.Errorf("bad port %q", p)
	}
	if n == 80 || n == 443 {
		return "", nil
	}
	return fmt.Sprint(n), nil
}

// Registrable returns the registrable domain (eTLD+1) of host, normally a
// name returned by Canonical. A port is ignored and never returned. See the
// package documentation for what is returned when there is no eTLD+1.
func Registrable(host string) string {
	h := strings.ToLower(strings.TrimSpace(host))
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		if a.Is6() {
			return "[" + a.String() + "]"
		}
		return a.String()
	}
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i >= 0 {
			return h[:i+1] // [IPv6]:port
		}
		return h
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	if n, err := urlnorm.NormalizeHost(h); err == nil {
		h = strings.TrimSuffix(n, ".")
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return h
	}
	e, err := publicsuffix.EffectiveTLDPlusOne(h)
	if err != nil || e == "" {
		return h
	}
	return e
}
