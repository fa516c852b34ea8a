package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// ErrPrivateAddress is returned when the SSRF guard refuses to connect.
var ErrPrivateAddress = errors.New("refused: private, loopback or link-local address")

// privateNets are refused unless the crawl allows private addresses, on top
// of what netip.Addr's predicates cover.
var privateNets = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, broadcast
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("fec0::/10"),      // deprecated site-local
	netip.MustParsePrefix("2002::/16"),      // 6to4 can embed private IPv4
	netip.MustParsePrefix("100::/64"),       // discard
	netip.MustParsePrefix("192.88.99.0/24"), // 6to4 relay anycast
	netip.MustParsePrefix("169.254.0.0/16"), // link-local (also IsLinkLocalUnicast)
	netip.MustParsePrefix("255.255.255.255/32"),
}

// IsPrivate reports whether a is an address a crawler must not reach
// unless told to: loopback, private (RFC 1918, unique local), link-local,
// unspecified, multicast and the special-purpose ranges above.
func IsPrivate(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range privateNets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientKey identifies the settings a client is built from.
type clientKey struct {
	allowPrivate bool
	resolve      string
	connect      time.Duration
}

// Clients caches one HTTP client per distinct network setting, so that
// connections are kept alive across the jobs an agent runs.
type Clients struct {
	mu sync.Mutex
	m  map[clientKey]*http.Client
}

// NewClients returns an empty cache.
func NewClients() *Clients { return &Clients{m: map[clientKey]*http.Client{}} }

func resolveKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		keys = append(keys, strings.ToLower(k)+"="+v)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// Get returns the client for these settings. Clients never follow
// redirects (a 3xx is the artifact), never use a proxy from the
// environment, and dial only addresses the SSRF guard accepts.
func (c *Clients) Get(allowPrivate bool, resolve map[string]string, connect time.Duration) *http.Client {
	k := clientKey{allowPrivate, resolveKey(resolve), connect}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.m[k]; ok {
		return cl
	}
	res := map[string]string{}
	for hp, a := range resolve {
		res[strings.ToLower(hp)] = a
	}
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", ErrPrivateAddress, address)
			}
			if IsPrivate(ap.Addr()) {
				return fmt.Errorf("%w: %s", ErrPrivateAddress, ap.Addr())
			}
			return nil
		}
	}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if a, ok := res[strings.ToLower(host)+":"+port]; ok {
				addr = net.JoinHostPort(a, port)
			}
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &sendConn{Conn: c}, nil // closes gate tickets (gate.go)
		},
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   connect,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       30 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	cl := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	c.m[k] = cl
	return cl
}

// CloseIdle closes idle connections of every client.
func (c *Clients) CloseIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.m {
		cl.CloseIdleConnections()
	}
}

// classify maps a request error to an artifact error code.
func classify(err error) string {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var ne net.Error
	switch {
	case errors.Is(err, ErrPrivateAddress):
		return crawl.ErrCodePrivate
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return crawl.ErrCodeTimeout
		}
		return crawl.ErrCodeDNS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return crawl.ErrCodeTimeout
	case errors.As(err, &ne) && ne.Timeout():
		return crawl.ErrCodeTimeout
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return crawl.ErrCodeConnect
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() {
		return crawl.ErrCodeTimeout
	}
	return crawl.ErrCodeNetwork
}
