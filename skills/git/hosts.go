package git

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"skillfs/skills"
)

// Host is one host a RemotePolicy allows (see ParseHosts).
type Host struct {
	Name string // a DNS name, lower case, or an IP address
	Port int    // 0: any port
	HTTP bool   // read over plain http too, not only https
}

// String is the host as ParseHosts reads it.
func (h Host) String() string {
	s := h.Name
	if strings.Contains(s, ":") {
		s = "[" + s + "]"
	}
	if h.Port != 0 {
		s += ":" + strconv.Itoa(h.Port)
	}
	if h.HTTP {
		s = "http://" + s
	}
	return s
}

// ParseHosts reads a list of hosts separated by commas, each
// "[http://|https://]HOST[:PORT]": HOST a DNS name or an IP address (an
// IPv6 one in brackets), PORT 1 to 65535 (none: any). "http://" lets the
// host be read over plain http too; "https://" is the default. An empty
// list is no host. Anything else — a path, credentials, an empty entry, a
// name that is no DNS name — is ErrInvalid naming the entry.
func ParseHosts(s string) ([]Host, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var hosts []Host
	for _, e := range strings.Split(s, ",") {
		h, err := parseHost(strings.TrimSpace(e))
		if err != nil {
			return nil, fmt.Errorf("host %q: %v: %w", e, err, skills.ErrInvalid)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

func parseHost(e string) (Host, error) {
	var h Host
	lower := strings.ToLower(e)
	switch {
	case strings.HasPrefix(lower, "http://"):
		h.HTTP, e = true, e[len("http://"):]
	case strings.HasPrefix(lower, "https://"):
		e = e[len("https://"):]
	case strings.Contains(e, "://"):
		return h, fmt.Errorf("only http:// or https:// may come before a host")
	}
	if e == "" {
		return h, fmt.Errorf("no host")
	}
	if strings.ContainsAny(e, "/@?#") {
		return h, fmt.Errorf("a host and a port only, no path or credentials")
	}
	name, port := e, ""
	if strings.HasPrefix(e, "[") {
		end := strings.Index(e, "]")
		if end < 0 {
			return h, fmt.Errorf("no ] after an IPv6 address")
		}
		name, port = e[1:end], e[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return h, fmt.Errorf("not [IPv6]:PORT")
		}
		port = strings.TrimPrefix(port, ":")
		if a, err := netip.ParseAddr(name); err != nil || !a.Is6() || a.Zone() != "" {
			return h, fmt.Errorf("%q in brackets is no IPv6 address", name)
		}
	} else if i := strings.LastIndex(e, ":"); i >= 0 {
		if strings.Count(e, ":") > 1 {
			return h, fmt.Errorf("an IPv6 address goes in brackets")
		}
		name, port = e[:i], e[i+1:]
	}
	if port != "" || strings.HasSuffix(e, ":") {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return h, fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
		h.Port = n
	}
	if a, err := netip.ParseAddr(name); err == nil {
		h.Name = a.String()
		return h, nil
	}
	if !dnsName(name) {
		return h, fmt.Errorf("%q is no DNS name or IP address", name)
	}
	h.Name = strings.ToLower(strings.TrimSuffix(name, "."))
	return h, nil
}

// dnsName says whether s is a DNS name: labels of letters, digits and
// hyphens (and underscores), 1 to 63 bytes each, 253 in all, an optional
// final dot.
func dnsName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// RemotePolicy is what a clone on behalf of a caller the daemon does not
// trust with its network (a session's install) may read
// (CloneOptions.Remote):
//
//   - only an https URL (an http one only of a host listed with http://);
//     no ssh, git or file transport, and no redirect is followed;
//   - with Hosts empty, any host whose addresses, as resolved here, are
//     all public: none loopback, private (RFC 1918, fc00::/7),
//     link-local, unspecified, multicast, shared (100.64.0.0/10) or
//     otherwise reserved, nor a NAT64 or 6to4 form of one; git is then
//     pinned to the addresses checked (http.curloptResolve), so a name
//     that resolves anew elsewhere is not followed there (a proxy of the
//     daemon's environment resolves the name itself);
//   - with Hosts set, only those hosts, whatever their addresses.
//
// The check runs on the URL git is to read, after the URL rewrites. A
// refusal is an *Error wrapping ErrPermission. With Plain, errors carry
// none of git's own messages (Error.Detail is kept for the daemon's log
// but not shown), only a fixed reason for each failure: not found, could
// not be reached, or refused.
type RemotePolicy struct {
	Hosts []Host
	Plain bool
	// lookup resolves a host name (nil: the system's resolver).
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// remoteCheck is what checking a URL against a policy decided: the extra
// configuration git runs with.
type remoteCheck struct {
	config []string
}

// check checks the URL git is to read against p (see RemotePolicy).
func (p *RemotePolicy) check(ctx context.Context, src Source, fetchURL string) (*remoteCheck, error) {
	refuse := func(reason string) error {
		return &Error{Source: src, Reason: reason, Err: skills.ErrPermission, plain: p.Plain}
	}
	u, err := url.Parse(fetchURL)
	scheme := ""
	if err == nil {
		scheme = strings.ToLower(u.Scheme)
	}
	if err != nil || (scheme != "https" && scheme != "http") || u.Host == "" || u.Opaque != "" {
		return nil, refuse("only an https URL of a remote host is read here")
	}
	name := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if a, err := netip.ParseAddr(name); err == nil {
		name = a.String()
	}
	port := 443
	if scheme == "http" {
		port = 80
	}
	if ps := u.Port(); ps != "" {
		if port, err = strconv.Atoi(ps); err != nil || port < 1 || port > 65535 {
			return nil, refuse("only an https URL of a remote host is read here")
		}
	}
	rc := &remoteCheck{config: []string{
		"http.followRedirects=false",
		"protocol.http.allow=never", "protocol.ssh.allow=never", "protocol.git.allow=never", "protocol.file.allow=never",
	}}
	if len(p.Hosts) > 0 {
		for _, h := range p.Hosts {
			if h.Name == name && (h.Port == 0 || h.Port == port) && (scheme == "https" || h.HTTP) {
				if scheme == "http" {
					rc.config = append(rc.config, "protocol.http.allow=always")
				}
				return rc, nil
			}
		}
		return nil, refuse(fmt.Sprintf("%s://%s is not among the hosts allowed to be read here", scheme, net.JoinHostPort(name, strconv.Itoa(port))))
	}
	if scheme != "https" {
		return nil, refuse("only an https URL of a remote host is read here")
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(name); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lookup := p.lookup
		if lookup == nil {
			lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		addrs, _ = lookup(ctx, name)
	}
	// A name that does not resolve is answered as one that resolves to
	// an address not read: whether a name exists in the daemon's network
	// is nothing to tell.
	noPublic := refuse(fmt.Sprintf("host %q has no public address: only hosts on the internet are read here", name))
	if len(addrs) == 0 {
		return nil, noPublic
	}
	pinned := make([]string, len(addrs))
	for i, a := range addrs {
		if !Public(a) {
			return nil, noPublic
		}
		pinned[i] = a.Unmap().String()
		if a.Unmap().Is6() {
			pinned[i] = "[" + pinned[i] + "]"
		}
	}
	if net.ParseIP(name) == nil {
		rc.config = append(rc.config, fmt.Sprintf("http.curloptResolve=%s:%d:%s", name, port, strings.Join(pinned, ",")))
	}
	return rc, nil
}

// notPublic are the ranges of addresses that are no host on the internet,
// beyond those netip tells (loopback, private, link-local, multicast,
// unspecified).
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier-grade NAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: an IPv4 address behind it
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local NAT64
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: an IPv4 address behind it
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
}

// Public says whether a is an address of a host on the internet: not
// loopback, private (RFC 1918, fc00::/7), link-local, unspecified,
// multicast, nor in another range reserved for no such host (notPublic);
// an IPv4-mapped address is judged as its IPv4 address.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// unreachable says whether git's messages (its standard error) say the
// host could not be reached, rather than that it answered.
func unreachable(stderr string) bool {
	low := strings.ToLower(stderr)
	for _, s := range []string{"could not resolve host", "failed to connect", "couldn't connect", "connection refused",
		"connection timed out", "operation timed out", "network is unreachable", "no route to host", "connection reset",
		"empty reply from server", "recv failure", "ssl", "tls", "certificate", "gnutls"} {
		if strings.Contains(low, s) {
			return true
		}
	}
	return false
}
