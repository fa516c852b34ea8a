package ctl

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/fetch"
)

// seedLookupBudget bounds the DNS lookups crawl start makes to check its
// seeds: a seed whose host is not resolved in time is accepted (the
// fetcher's SSRF guard still refuses it, and its domain then says
// private_address).
const seedLookupBudget = 3 * time.Second

// checkPrivateSeeds refuses a crawl without allow_private whose seeds go
// to private, loopback or link-local addresses only: the fetcher's SSRF
// guard would refuse every request to them. The address is the crawl's
// resolve entry for the seed's HOST:PORT, the host itself when it is an
// IP literal, else what DNS answers now (a host that does not resolve,
// or not within seedLookupBudget, is accepted). A host with a public
// address among private ones is accepted: the guard lets the dialer fall
// back to the public one.
func checkPrivateSeeds(ctx context.Context, cr *crawl.Crawl) error {
	if cr.AllowPrivate {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, seedLookupBudget)
	defer cancel()
	checked := map[string]string{} // HOST:PORT -> the private address, "" if fine
	var first, firstAddr string
	n := 0
	for _, s := range cr.Seeds {
		hp, ok := seedHostPort(s.URL)
		if !ok {
			continue // Validate judges the URL itself
		}
		addr, done := checked[hp]
		if !done {
			addr = privateAddrOf(ctx, cr, hp)
			checked[hp] = addr
		}
		if addr == "" {
			continue
		}
		if n == 0 {
			first, firstAddr = s.URL, addr
		}
		n++
	}
	if n == 0 {
		return nil
	}
	more := ""
	if n > 1 {
		more = fmt.Sprintf(" (and %d more seeds)", n-1)
	}
	return Usagef("seed %s: %s is a private, loopback or link-local address, which the crawler refuses without --allow-private%s", first, firstAddr, more)
}

// seedHostPort returns the lowercased HOST:PORT a seed URL connects to.
func seedHostPort(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		default:
			return "", false
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), true
}

// privateAddrOf returns the private address hp goes to, or "" when it
// has a public one, or none known.
func privateAddrOf(ctx context.Context, cr *crawl.Crawl, hp string) string {
	host, _, _ := net.SplitHostPort(hp)
	var addrs []netip.Addr
	if a, ok := cr.Resolve[hp]; ok {
		if ip, err := netip.ParseAddr(a); err == nil {
			addrs = []netip.Addr{ip}
		}
	} else if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if ctx.Err() == nil {
		addrs, _ = net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	if len(addrs) == 0 {
		return ""
	}
	for _, a := range addrs {
		if !fetch.IsPrivate(a) {
			return ""
		}
	}
	return addrs[0].Unmap().String()
}
