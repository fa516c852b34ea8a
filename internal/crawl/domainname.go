package crawl

import (
	"strings"

	"github.com/farro-dev/farro/internal/domain"
)

// DomainOf returns the canonical domain of a normalized URL (seed 004
// section 3.2, internal/domain: lowercase, trailing dot stripped, ports
// 80/443 stripped, "www." folded, punycode; subdomains kept) and its
// registrable parent (public suffix + 1).
func DomainOf(normalized string) (canonical, parent string, err error) {
	canonical, err = domain.Canonical(normalized)
	if err != nil {
		return "", "", err
	}
	host := canonical
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			host = host[:i+1]
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	return canonical, domain.Registrable(host), nil
}
