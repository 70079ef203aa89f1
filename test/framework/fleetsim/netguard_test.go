package fleetsim

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"testing"
)

func TestTheAddressGuard(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": true, "127.3.2.1": true, "::1": true,
		"198.18.0.1": true, "198.18.128.7": true, "198.19.255.254": true,
		"198.17.255.255": false, "198.20.0.0": false,
		"10.0.0.1": false, "172.16.0.1": false, "192.168.1.1": false,
		"8.8.8.8": false, "0.0.0.0": false, "::": false, "fd00::1": false, "2001:db8::1": false,
	} {
		if got := AddressAllowed(netip.MustParseAddr(addr)); got != want {
			t.Errorf("AddressAllowed(%s) = %v, want %v", addr, got, want)
		}
	}
	ctx := context.Background()
	for _, addr := range []string{"10.0.0.1:8000", "0.0.0.0:8000", ":8000", "localhost:8000", "192.168.0.1:80", "1.1.1.1:80"} {
		if ln, err := GuardedListen(ctx, "tcp", addr); !errors.Is(err, ErrAddressRefused) {
			if ln != nil {
				_ = ln.Close()
			}
			t.Errorf("GuardedListen(%s): %v, want refused", addr, err)
		}
	}
	ln, err := GuardedListen(ctx, "tcp", "127.0.0.9:0")
	if err != nil {
		t.Fatalf("GuardedListen on loopback: %v", err)
	}
	_ = ln.Close()
	// The dialer refuses before connecting: no packet leaves for 10.0.0.1 or 1.1.1.1.
	for _, addr := range []string{"10.0.0.1:80", "1.1.1.1:80", "172.16.0.1:80"} {
		if c, err := GuardedDialer(0).DialContext(ctx, "tcp", addr); !errors.Is(err, ErrAddressRefused) {
			if c != nil {
				_ = c.Close()
			}
			t.Errorf("dial %s: %v, want refused", addr, err)
		}
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://192.168.1.1/", nil)
	if resp, err := (&http.Client{Transport: GuardedTransport(1)}).Do(req); !errors.Is(err, ErrAddressRefused) {
		if resp != nil {
			_ = resp.Body.Close()
		}
		t.Errorf("GET http://192.168.1.1/: %v, want refused", err)
	}
}
