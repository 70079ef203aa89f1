package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The network rule of the local environment: traffic goes only to loopback, or to pod addresses
// that exist only inside a network namespace the test creates. Pods get addresses from the
// benchmarking range 198.18.0.0/15 (RFC 2544, never routed on the Internet); PodCIDR is routed
// locally on that namespace's lo, so that a process there can bind any of its addresses and
// nothing outside the namespace ever sees them.
const (
	// BenchmarkRange is the range pod addresses come from.
	BenchmarkRange = "198.18.0.0/15"
	// PodCIDR is the part of BenchmarkRange routed locally (`ip route add local PodCIDR dev lo`)
	// inside the namespace.
	PodCIDR = "198.18.128.0/17"
	// AdvertiseAddress is the address a kube-apiserver inside the namespace advertises: it
	// finds none by itself there (no default route), and exits. It is in BenchmarkRange but
	// outside PodCIDR: nothing serves or dials it.
	AdvertiseAddress = "198.18.0.1"
	// NetnsEnv marks a test binary re-executed inside its own network namespace; its value is
	// the namespace the parent ran in (as /proc/self/ns/net reads), which the child must not be
	// in.
	NetnsEnv = "MODELSHIP_GATEWAY_NETNS"
)

var (
	benchmarkRange = netip.MustParsePrefix(BenchmarkRange)
	podCIDR        = netip.MustParsePrefix(PodCIDR)
)

// PodAddress is the n-th address of PodCIDR counted from 198.18.200.0: PodAddress(1) is
// 198.18.200.1. It panics when the address leaves PodCIDR.
func PodAddress(n int) netip.Addr {
	if n < 0 || n > 55*256-1 {
		panic(fmt.Sprintf("gateway.PodAddress(%d): outside %s", n, PodCIDR))
	}
	b := netip.MustParseAddr("198.18.200.0").As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Allowed tells whether the project may send a packet to addr: loopback, or the benchmarking
// range (which only a namespace of the test's own routes). Private ranges (10/8, 172.16/12,
// 192.168/16) and public addresses are refused.
func Allowed(addr netip.Addr) bool {
	addr = addr.Unmap()
	return addr.IsLoopback() || benchmarkRange.Contains(addr)
}

// ErrRefused is returned by the guarded dialer for a destination Allowed refuses.
var ErrRefused = errors.New("gateway: refusing to dial outside loopback and " + BenchmarkRange)

// guardControl is the dialer's Control hook: it runs after the socket is made and before
// connect, so a refused destination never gets a packet.
func guardControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrRefused, address)
	}
	if !Allowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrRefused, address)
	}
	return nil
}

// Dialer dials only what Allowed allows.
func Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, Control: guardControl}
}

// Transport is an HTTP transport that dials only what Allowed allows and ignores proxy
// settings from the environment.
func Transport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         Dialer().DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
}

// netnsID is the network namespace of this process, as /proc/self/ns/net reads ("net:[4026531840]").
func netnsID() (string, error) {
	id, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return "", fmt.Errorf("reading /proc/self/ns/net: %w", err)
	}
	return id, nil
}

// iface is what checkFresh looks at of an interface.
type iface struct {
	name string
	up   bool
}

// checkFresh refuses any namespace but a fresh one of our own: the marker must name the
// parent's namespace, this process must be in another one, and every interface there must be
// down (a new namespace has lo down, and maybe the kernel's fallback tunnel devices, down too;
// any namespace in use has at least lo up).
func checkFresh(parent, self string, interfaces []iface) error {
	if parent == "" {
		return fmt.Errorf("gateway: refusing to set up %s: %s is not set (only a test binary re-executed under `unshare --net` by RunInNetns sets it up)", PodCIDR, NetnsEnv)
	}
	if self == parent {
		return fmt.Errorf("gateway: refusing to set up %s: still in the network namespace the test started in (%s); the pod addresses exist only in a namespace of the test's own", PodCIDR, self)
	}
	for _, i := range interfaces {
		if i.up {
			return fmt.Errorf("gateway: refusing to set up %s: interface %q is up, so this is not a fresh namespace", PodCIDR, i.name)
		}
	}
	return nil
}

// SetupNetns prepares the namespace this process runs in, after checking it is a fresh one of
// the test's own (parent is the namespace the parent ran in, from NetnsEnv): lo up, and PodCIDR
// routed locally on lo. It refuses anything else, so it never touches the host's network.
func SetupNetns(parent string) error {
	self, err := netnsID()
	if err != nil {
		return err
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("gateway: listing interfaces: %w", err)
	}
	states := make([]iface, 0, len(ifs))
	for _, i := range ifs {
		states = append(states, iface{i.Name, i.Flags&net.FlagUp != 0})
	}
	if err := checkFresh(parent, self, states); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"route", "add", "local", PodCIDR, "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil { //nolint:noctx // a quick setup command
			return fmt.Errorf("gateway: ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// NetnsAPIServer writes into dir a kube-apiserver launcher for a namespace of the test's own: it
// runs assets/kube-apiserver with --advertise-address=AdvertiseAddress (without, it finds no
// default route there and exits). Point envtest at it with TEST_ASSET_KUBE_APISERVER.
func NetnsAPIServer(dir, assets string) (string, error) {
	orig := filepath.Join(assets, "kube-apiserver")
	if _, err := os.Stat(orig); err != nil {
		return "", fmt.Errorf("gateway: %w", err)
	}
	path := filepath.Join(dir, "kube-apiserver")
	quoted := "'" + strings.ReplaceAll(orig, "'", `'\''`) + "'"
	script := fmt.Sprintf("#!/bin/sh\nexec %s --advertise-address=%s \"$@\"\n", quoted, AdvertiseAddress)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil { //nolint:gosec // an executable launcher
		return "", fmt.Errorf("gateway: %w", err)
	}
	return path, nil
}

// RunInNetns runs the calling test inside a network namespace of its own. In the test binary
// as `go test` started it, it re-executes the binary for this test only under `unshare --net`
// (with NetnsEnv set), streams the child's output into t's log, reports the child's result
// (failure or skip) and returns false: the caller returns at once. In the re-executed child it
// sets the namespace up (SetupNetns: lo up, PodCIDR routed on lo) and returns true: the caller
// runs its body there. It skips when the process is not root or lacks unshare or ip.
func RunInNetns(t *testing.T) bool {
	t.Helper()
	if parent := os.Getenv(NetnsEnv); parent != "" {
		if err := SetupNetns(parent); err != nil {
			t.Fatal(err)
		}
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for `unshare --net` (a network namespace of the test's own, where pod addresses in " + PodCIDR + " are served)")
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (util-linux, iproute2) to make a network namespace of the test's own: %v", tool, err)
		}
	}
	self, err := netnsID()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--net", "--", os.Args[0], "-test.run=^" + regexp.QuoteMeta(t.Name()) + "$", "-test.v=true", "-test.count=1"}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).Round(time.Second).String())
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Env = append(os.Environ(), NetnsEnv+"="+self)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare --net: %v", err)
	}
	_ = pw.Close()
	var skipped, failed bool
	var skipReason string
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		t.Log("netns| " + line)
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "--- SKIP"):
			skipped = true
		case strings.HasPrefix(strings.TrimSpace(line), "--- FAIL"):
			failed = true
		case skipped && skipReason == "":
			skipReason = strings.TrimSpace(line)
		}
	}
	err = cmd.Wait()
	_ = pr.Close()
	switch {
	case failed || (err != nil && !skipped):
		t.Fatalf("the test failed inside its network namespace (%v)", err)
	case skipped:
		t.Skipf("skipped inside its network namespace: %s", skipReason)
	}
	return false
}
