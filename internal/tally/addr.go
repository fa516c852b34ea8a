package tally

import (
	"fmt"
	"net"
)

// CheckAddr accepts a host:port to listen on for metrics. Unless
// allowRemote, the host must be loopback: a literal loopback address
// (127.0.0.0/8, ::1) or a name that resolves only to loopback addresses
// ("localhost"). An empty host (":9641") means every interface and is
// refused too. The metrics say what runs and how much: they are not for
// the network at large without a decision to expose them.
func CheckAddr(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr %q: %v (want host:port, e.g. 127.0.0.1:9641)", addr, err)
	}
	if port == "" {
		return fmt.Errorf("--metrics-addr %q: no port", addr)
	}
	if allowRemote {
		return nil
	}
	if host == "" {
		return fmt.Errorf("--metrics-addr %q listens on every interface; use a loopback address such as 127.0.0.1:%s, or add --metrics-allow-remote", addr, port)
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else if ips, err = net.LookupIP(host); err != nil {
		return fmt.Errorf("--metrics-addr %q: %v", addr, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("--metrics-addr %q is not a loopback address (%s); use 127.0.0.1 or ::1, or add --metrics-allow-remote", addr, ip)
		}
	}
	return nil
}
