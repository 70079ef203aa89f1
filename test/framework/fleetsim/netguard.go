package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/modelship/modelship/test/framework/gateway"
)

// ErrAddressRefused is returned when the simulator is asked to bind or dial an address outside
// loopback (127.0.0.0/8) and the benchmarking range (198.18.0.0/15, which only a network
// namespace of the project's own routes): the project's network rule.
var ErrAddressRefused = errors.New("fleetsim: refusing an address outside 127.0.0.0/8 and " + gateway.BenchmarkRange)

// AddressAllowed tells whether the simulator may bind or dial addr (gateway.Allowed).
func AddressAllowed(addr netip.Addr) bool {
	return addr.IsValid() && !addr.IsUnspecified() && gateway.Allowed(addr)
}

// checkAddress refuses a host:port whose host is not a literal allowed address.
func checkAddress(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address and port", ErrAddressRefused, address)
	}
	if !AddressAllowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrAddressRefused, address)
	}
	return nil
}

// ListenFunc binds a TCP listener (net.ListenConfig.Listen's shape); PodServers take one so that
// tests bind 127.0.0.x and the local environment the pods' own addresses.
type ListenFunc func(ctx context.Context, network, address string) (net.Listener, error)

// GuardedListen binds address only when it is a literal allowed address (AddressAllowed): never
// an unspecified one (":8000", "0.0.0.0"), a name, a private or a public address.
func GuardedListen(ctx context.Context, network, address string) (net.Listener, error) {
	if err := checkAddress(address); err != nil {
		return nil, err
	}
	return (&net.ListenConfig{}).Listen(ctx, network, address)
}

// guard wraps a ListenFunc with the address check, so that an injected one cannot bind outside
// the rule either.
func guard(listen ListenFunc) ListenFunc {
	return func(ctx context.Context, network, address string) (net.Listener, error) {
		if err := checkAddress(address); err != nil {
			return nil, err
		}
		return listen(ctx, network, address)
	}
}

// dialControl runs after a socket is made and before it connects: a refused destination never
// gets a packet, whatever name resolved to it.
func dialControl(_, address string, _ syscall.RawConn) error { return checkAddress(address) }

// GuardedDialer dials only allowed addresses.
func GuardedDialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: dialControl}
}

// GuardedTransport is an HTTP transport that dials only allowed addresses and ignores proxy
// settings from the environment.
func GuardedTransport(maxConnsPerHost int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         GuardedDialer(5 * time.Second).DialContext,
		MaxIdleConnsPerHost: maxConnsPerHost,
		IdleConnTimeout:     30 * time.Second,
	}
}
