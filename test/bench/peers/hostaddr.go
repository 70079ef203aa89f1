package peers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"

	"github.com/modelship/modelship/test/framework/gateway"
)

// hostAddressPrefix is where AddHostAddress takes addresses from: 198.18.0.0/24, a part of
// the benchmarking range 198.18.0.0/15 (RFC 2544), which no network of this machine uses.
const hostAddressPrefix = "198.18.0."

// hostAddressDevice is the interface the addresses go on: the loopback of the environment's
// own network namespace, so that they exist there only.
const hostAddressDevice = "lo"

// AddHostAddress gives this machine an address of its own for one server, on the loopback
// interface: the first of 198.18.0.1 ... 198.18.0.254 that is not yet in use (`ip addr add
// <addr>/32 dev lo`, which needs CAP_NET_ADMIN). It exists because kube-apiserver refuses
// loopback addresses (127.0.0.0/8) in EndpointSlices, so an extension API server behind the
// aggregator cannot listen on 127.0.0.1. The returned function removes the address again. It
// refuses to run outside the environment's network namespace (gateway.CheckNetns), so the
// host's interfaces never get an address.
func AddHostAddress(ctx context.Context) (net.IP, func() error, error) {
	if err := gateway.CheckNetns(); err != nil {
		return nil, nil, fmt.Errorf("add an address to lo: %w", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, nil, fmt.Errorf("add a host address: %w (iproute2 is needed)", err)
	}
	for i := 1; i < 255; i++ {
		addr := fmt.Sprintf("%s%d", hostAddressPrefix, i)
		out, err := exec.CommandContext(ctx, "ip", "addr", "add", addr+"/32", "dev", hostAddressDevice).CombinedOutput()
		if err == nil {
			remove := func() error {
				// A fresh context: removal runs at teardown, when the caller's may be done.
				out, err := exec.CommandContext(context.Background(), "ip", "addr", "del", addr+"/32", "dev", hostAddressDevice).CombinedOutput()
				if err != nil {
					return fmt.Errorf("ip addr del %s/32 dev %s: %w: %s", addr, hostAddressDevice, err, strings.TrimSpace(string(out)))
				}
				return nil
			}
			return net.ParseIP(addr), remove, nil
		}
		// "File exists": another environment holds this one; try the next.
		if strings.Contains(string(out), "exists") {
			continue
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("ip addr add %s/32 dev %s: %w: %s", addr, hostAddressDevice, err, strings.TrimSpace(string(out)))
	}
	return nil, nil, errors.New("add a host address: every address of " + hostAddressPrefix + "0/24 is in use")
}
