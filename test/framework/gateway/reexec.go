package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
)

// ForwardsEnv names, in a program re-executed by Reexec, the host-side listeners it inherits as
// file descriptors 3, 4, ... (comma-separated, in that order).
const ForwardsEnv = "MODELSHIP_NETNS_FORWARDS"

// ErrNoNetns says that this machine or user cannot make a network namespace (not root, or no
// ip command): the local environment does not run. Tests skip on it.
var ErrNoNetns = errors.New("gateway: the local environment runs in a network namespace of its own (`unshare --net`), which needs root and iproute2's ip")

// Netns is the network namespace a program runs in after Reexec: its own, with lo up and
// PodCIDR routed locally on lo. It holds the listeners its parent opened on the host's loopback
// for it (see Forward).
type Netns struct {
	mu        sync.Mutex
	listeners map[string]net.Listener
}

// Reexec runs this program inside a network namespace of its own. In the host's namespace it
// opens one listener on 127.0.0.1 (a free port) for each name in forwards, runs the program
// again (same arguments and environment) in a new network namespace with those listeners as
// file descriptors 3, 4, ..., forwards SIGINT, SIGTERM and SIGHUP to it, waits for it and
// returns its exit status and a nil *Netns: the caller exits with that status. In the
// re-executed program it checks that the namespace is a fresh one of its own, sets it up
// (SetupNetns: lo up, PodCIDR routed locally on lo) and returns the *Netns: the caller goes on
// with its work there, and may serve the inherited listeners with Forward.
//
// It returns ErrNoNetns (wrapped) when the process is not root or lacks ip.
func Reexec(forwards ...string) (*Netns, int, error) {
	if parent := os.Getenv(NetnsEnv); parent != "" {
		return enter(parent, os.Getenv(ForwardsEnv))
	}
	if os.Geteuid() != 0 {
		return nil, 0, fmt.Errorf("%w: this process is not root", ErrNoNetns)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrNoNetns, err)
	}
	for _, name := range forwards {
		if name == "" || strings.Contains(name, ",") {
			return nil, 0, fmt.Errorf("gateway: forward name %q: want a non-empty name without commas", name)
		}
	}
	self, err := netnsID()
	if err != nil {
		return nil, 0, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, 0, fmt.Errorf("gateway: finding this program to re-execute it: %w", err)
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	for _, name := range forwards {
		ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, 0, fmt.Errorf("gateway: listening on the host's loopback for %s: %w", name, err)
		}
		f, err := ln.(*net.TCPListener).File()
		_ = ln.Close() // the duplicate in f keeps the socket open
		if err != nil {
			return nil, 0, fmt.Errorf("gateway: listener of %s: %w", name, err)
		}
		files = append(files, f)
	}
	cmd := exec.Command(exe, os.Args[1:]...) //nolint:noctx // runs until it exits; signals are forwarded
	cmd.Args[0] = os.Args[0]
	cmd.Env = append(os.Environ(), NetnsEnv+"="+self, ForwardsEnv+"="+strings.Join(forwards, ","))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = files
	// A new network namespace; a process group of its own, so that a terminal's Ctrl-C reaches
	// it once, from here; killed if this process dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("gateway: starting %s in a new network namespace: %w", exe, err)
	}
	for _, f := range files {
		_ = f.Close()
	}
	files = nil
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			return nil, exitCode(err), nil
		}
	}
}

// exitCode is the status a parent exits with for a child that ended with err: its own exit
// status, or 128+signal when a signal ended it.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		if c := ee.ExitCode(); c >= 0 {
			return c
		}
	}
	return 1
}

// enter sets up the namespace of a re-executed program and takes over the inherited listeners.
func enter(parent, forwards string) (*Netns, int, error) {
	if err := SetupNetns(parent); err != nil {
		return nil, 0, err
	}
	n := &Netns{listeners: map[string]net.Listener{}}
	for i, name := range forwardNames(forwards) {
		f := os.NewFile(uintptr(3+i), name)
		ln, err := net.FileListener(f)
		_ = f.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("gateway: the listener for %s (file descriptor %d) from the parent: %w", name, 3+i, err)
		}
		n.listeners[name] = ln
	}
	return n, 0, nil
}

// forwardNames splits ForwardsEnv's value.
func forwardNames(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// HostAddress is the host-side address (127.0.0.1:port, in the host's namespace) of the
// listener named name, or "" when the parent opened none of that name.
func (n *Netns) HostAddress(name string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ln, ok := n.listeners[name]; ok {
		return ln.Addr().String()
	}
	return ""
}

// Forward serves the host-side listener named name until ctx ends: every connection a program
// in the host's namespace makes to HostAddress(name) is relayed to target (host:port, dialed
// inside this namespace through the guarded Dialer). It returns the host-side address. The
// accepted connections are sockets of the host's namespace (the parent made the listener
// there), so no address or route is ever added to the host.
func (n *Netns) Forward(ctx context.Context, name, target string) (string, error) {
	n.mu.Lock()
	ln, ok := n.listeners[name]
	n.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("gateway: no host-side listener named %q (Reexec opens one per name it is given)", name)
	}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relay(ctx, c, target)
		}
	}()
	return ln.Addr().String(), nil
}

// relay copies between an accepted connection and a new one to target, both ways, until
// either side ends.
func relay(ctx context.Context, c net.Conn, target string) {
	defer func() { _ = c.Close() }()
	up, err := Dialer().DialContext(ctx, "tcp", target)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	select {
	case <-done:
		<-done
	case <-ctx.Done():
	}
}

// CheckNetns tells whether this process runs in a network namespace the project set up
// (Reexec or RunInNetns): NetnsEnv names the parent's namespace, this one differs, and an
// address of PodCIDR can be bound (it is routed locally on lo here). It returns an error
// saying how to run otherwise; nothing is changed either way.
func CheckNetns() error {
	parent := os.Getenv(NetnsEnv)
	if parent == "" {
		return fmt.Errorf("gateway: the local environment runs only inside a network namespace of the project's own (pod addresses in %s exist only there): run it through `make demo`, `make dev-up`, `make e2e`, or a program that calls gateway.Reexec first; %s is not set", PodCIDR, NetnsEnv)
	}
	self, err := netnsID()
	if err != nil {
		return err
	}
	if self == parent {
		return fmt.Errorf("gateway: still in the network namespace the program started in (%s): the local environment runs only in one of its own", self)
	}
	c, err := (&net.ListenConfig{}).ListenPacket(context.Background(), "udp4", net.JoinHostPort(PodAddress(0).String(), "0"))
	if err != nil {
		return fmt.Errorf("gateway: %s is not routed locally in this network namespace (SetupNetns did not run here?): %w", PodCIDR, err)
	}
	_ = c.Close()
	return nil
}
