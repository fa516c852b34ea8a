package ctl

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"github.com/farro-dev/farro/internal/crawl"
)

// resolveDomain names the domain of crawl st that arg (a domain,
// host[:port] or URL) means. A host given without a port matches the
// domain of that exact name, or else the crawl's one domain of that host
// on another port ("127.0.0.1" for "127.0.0.1:8080"); two or more such
// domains are an error listing them. Ports 80 and 443 are never part of a
// domain name, so "example.org:443" is "example.org".
func resolveDomain(st *crawl.Store, cr *crawl.Crawl, arg string) (string, *crawl.Domain, error) {
	dn, err := canonicalDomain(cr, arg)
	if err != nil {
		return "", nil, err
	}
	d, err := st.LoadDomain(dn)
	if err == nil {
		return dn, d, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", nil, err
	}
	missing := fmt.Errorf("crawl %s has no domain %s", cr.Name, dn)
	if argHasPort(arg) || domainHost(dn) != dn {
		return "", nil, missing
	}
	doms, err := st.Domains()
	if err != nil {
		return "", nil, err
	}
	var cands []*crawl.Domain
	for _, d := range doms {
		if domainHost(d.Domain) == dn {
			cands = append(cands, d)
		}
	}
	switch len(cands) {
	case 0:
		return "", nil, missing
	case 1:
		return cands[0].Domain, cands[0], nil
	}
	names := make([]string, len(cands))
	for i, d := range cands {
		names[i] = d.Domain
	}
	return "", nil, fmt.Errorf("crawl %s has %d domains on host %s: %s; name one with its port", cr.Name, len(cands), dn, strings.Join(names, ", "))
}

// domainHost is a domain name without its port ("[::1]:8080" -> "[::1]").
func domainHost(d string) string {
	if strings.HasPrefix(d, "[") {
		if i := strings.IndexByte(d, ']'); i > 0 {
			return d[:i+1]
		}
		return d
	}
	if i := strings.LastIndexByte(d, ':'); i >= 0 {
		return d[:i]
	}
	return d
}

// argHasPort reports whether the operator wrote a port: then only that
// port's domain is meant.
func argHasPort(arg string) bool {
	raw := arg
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw + "/"
	}
	u, err := url.Parse(raw)
	return err == nil && u.Port() != ""
}
