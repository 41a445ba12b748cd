package kafkaserver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// serverStats counts what the server refused or closed.
type serverStats struct {
	acceptErrors atomic.Int64 // accept failed (too many open files, ...)
	refused      atomic.Int64 // connections closed past MaxConnections or MaxConnectionsPerIP
	idle         atomic.Int64 // connections closed after IdleTimeout
	slowFrames   atomic.Int64 // connections closed with a frame not complete within FrameTimeout
	refusedLog   everySecond  // refused connections are logged at most once a second
	denied       atomic.Int64 // actions the authorizer denied

	tlsFailed      atomic.Int64     // TLS handshakes failed (or not done within FrameTimeout)
	tlsFailedLog   everySecond      // failed TLS handshakes are logged at most once a second
	saslOK         atomic.Int64     // SASL authentications and re-authentications that succeeded
	saslFailed     atomic.Int64     // SASL authentications failed (a wrong password, an unknown user, a mechanism not enabled, a bad token)
	saslReauth     atomic.Int64     // of saslOK, the re-authentications of a connection (KIP-368)
	saslExpired    atomic.Int64     // connections closed for a request after their SASL session expired
	saslFailedLogs keyedEverySecond // failed authentications are logged at most once a second per principal and reason

	throttled       atomic.Int64     // responses throttled for a client quota (quotas.go)
	throttledMillis atomic.Int64     // the throttle time of those, in milliseconds
	throttledLogs   keyedEverySecond // throttles are logged at most once a second per principal and client ID
}

// everySecond lets an event through at most once a second. It is safe
// for concurrent use; the zero value is ready.
type everySecond struct{ last atomic.Int64 } // unix nanoseconds

// allow reports whether the event at now is let through.
func (e *everySecond) allow(now time.Time) bool {
	last := e.last.Load()
	return now.UnixNano()-last >= int64(time.Second) && e.last.CompareAndSwap(last, now.UnixNano())
}

// defaultMaxConnections is MaxConnections' default: 3/4 of the file
// descriptors the process may open (Go raises the soft RLIMIT_NOFILE to
// the hard one at start), the rest left for the data folder, the bucket
// and the listener.
func defaultMaxConnections() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 || rl.Cur > 1<<30 {
		return 1 << 20
	}
	return max(int(rl.Cur/4*3), 16)
}

// overLimit says which limit a new connection from ip is past, or "";
// under s.mu.
func (s *Server) overLimit(ip string) string {
	if max := s.cfg.MaxConnections; max > 0 && len(s.mu.conns) >= max {
		return "max-connections " + strconv.Itoa(max)
	}
	if max, ok := s.cfg.MaxConnectionsPerIPOverrides[canonicalIP(ip)]; ok {
		if s.mu.perIP[ip] >= max {
			return "max-connections-per-ip-overrides " + strconv.Itoa(max)
		}
		return ""
	}
	if max := s.cfg.MaxConnectionsPerIP; max > 0 && s.mu.perIP[ip] >= max {
		return "max-connections-per-ip " + strconv.Itoa(max)
	}
	return ""
}

// canonicalIP is an IP address as the overrides of MaxConnectionsPerIP
// are keyed: an IPv4 address mapped in IPv6 is the IPv4 one. Anything
// else is itself.
func canonicalIP(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	return a.Unmap().String()
}

// resolveConnectionOverrides checks Config.MaxConnectionsPerIPOverrides
// and keys it by canonical IP address, a host name by each of its
// addresses (resolved with ctx).
func resolveConnectionOverrides(ctx context.Context, overrides map[string]int) (map[string]int, error) {
	out := make(map[string]int, len(overrides))
	for host, n := range overrides {
		if n < 0 {
			return nil, fmt.Errorf("kafkaserver: Config.MaxConnectionsPerIPOverrides[%q] %d is negative", host, n)
		}
		if host == "" {
			return nil, fmt.Errorf("kafkaserver: Config.MaxConnectionsPerIPOverrides has an empty host")
		}
		addrs := []string{host}
		if _, err := netip.ParseAddr(host); err != nil {
			if addrs, err = net.DefaultResolver.LookupHost(ctx, host); err != nil {
				return nil, fmt.Errorf("kafkaserver: Config.MaxConnectionsPerIPOverrides[%q]: %w", host, err)
			}
		}
		for _, a := range addrs {
			out[canonicalIP(a)] = n
		}
	}
	return out, nil
}

// remoteIP is a connection's remote IP address (its whole address if it
// has no port).
func remoteIP(nc net.Conn) string {
	addr := nc.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
