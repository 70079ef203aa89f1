package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reexecHelperEnv makes the test binary act as a program that calls Reexec (see
// TestReexecHelperProgram).
const reexecHelperEnv = "MODELSHIP_TEST_REEXEC_HELPER"

// TestReexecHelperProgram is not a test: TestReexecRunsTheProgramInANamespaceOfItsOwn runs the
// test binary with reexecHelperEnv set, and then this is a program that calls Reexec with one
// forward. Inside its namespace it serves HTTP on a pod address, forwards the host-side
// listener to it, prints what the test checks, and exits with status 7 when its stdin closes.
func TestReexecHelperProgram(t *testing.T) {
	if os.Getenv(reexecHelperEnv) == "" {
		t.Skip("a helper program for TestReexecRunsTheProgramInANamespaceOfItsOwn")
	}
	ns, code, err := Reexec("api")
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	if ns == nil {
		os.Exit(code) // the parent, in the host's namespace
	}
	if err := CheckNetns(); err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	id, _ := netnsID()
	ln, err := net.Listen("tcp", net.JoinHostPort(PodAddress(9).String(), "0"))
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { //nolint:gosec // a test server
			_, _ = fmt.Fprintf(w, "pod %s in %s", ln.Addr(), id)
		}))
	}()
	host, err := ns.Forward(t.Context(), "api", ln.Addr().String())
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	fmt.Println("NETNS", id)
	fmt.Println("HOST", host)
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(7)
}

func TestReexecRunsTheProgramInANamespaceOfItsOwn(t *testing.T) {
	if os.Getenv(NetnsEnv) != "" || os.Getenv(reexecHelperEnv) != "" {
		t.Skip("runs in the host's namespace only")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	self, err := netnsID()
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckNetns(); err == nil {
		t.Fatal("CheckNetns accepts the host's namespace")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestReexecHelperProgram$", "-test.count=1")
	cmd.Env = append(os.Environ(), reexecHelperEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	var childNS, host string
	sc := bufio.NewScanner(stdout)
	for (childNS == "" || host == "") && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "ERROR"):
			t.Fatalf("the re-executed program: %s", line)
		case strings.HasPrefix(line, "NETNS "):
			childNS = strings.TrimPrefix(line, "NETNS ")
		case strings.HasPrefix(line, "HOST "):
			host = strings.TrimPrefix(line, "HOST ")
		}
	}
	if childNS == "" || host == "" {
		t.Fatalf("the re-executed program said nothing (%v)", sc.Err())
	}
	if childNS == self {
		t.Fatalf("the program ran in the host's namespace %s", self)
	}
	if !strings.HasPrefix(host, "127.0.0.1:") {
		t.Fatalf("host-side address %s, want one on 127.0.0.1", host)
	}
	// From the host's namespace, through the forwarder, to a pod address inside.
	resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: Transport()}).Get("http://" + host + "/")
	if err != nil {
		t.Fatalf("GET through the forwarder: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	want := fmt.Sprintf("pod %s:", PodAddress(9))
	if !strings.HasPrefix(string(body), want) || !strings.HasSuffix(string(body), childNS) {
		t.Fatalf("answer %q, want one from %s... in %s", body, want, childNS)
	}
	// The pod address exists in the child's namespace only.
	if c, err := net.ListenPacket("udp4", net.JoinHostPort(PodAddress(9).String(), "0")); err == nil {
		_ = c.Close()
		t.Errorf("%s can be bound in the host's namespace too", PodAddress(9))
	}
	_ = stdin.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("the program exited with %v, want the re-executed program's status 7", err)
	}
}

func TestExitCodeOfTheReexecutedProgram(t *testing.T) {
	if got := exitCode(nil); got != 0 {
		t.Errorf("exitCode(nil) = %d, want 0", got)
	}
	if got := exitCode(errors.New("start failed")); got != 1 {
		t.Errorf("exitCode(other error) = %d, want 1", got)
	}
	for _, tc := range []struct {
		script string
		want   int
	}{{"exit 3", 3}, {"kill -TERM $$", 128 + int(syscall.SIGTERM)}} {
		err := exec.CommandContext(t.Context(), "sh", "-c", tc.script).Run()
		if got := exitCode(err); got != tc.want {
			t.Errorf("exitCode(%q: %v) = %d, want %d", tc.script, err, got, tc.want)
		}
	}
}

func TestForwardNames(t *testing.T) {
	if got := forwardNames(""); got != nil {
		t.Errorf("forwardNames(\"\") = %q, want none", got)
	}
	if got := forwardNames("kube-apiserver,prometheus"); len(got) != 2 || got[0] != "kube-apiserver" || got[1] != "prometheus" {
		t.Errorf("forwardNames = %q", got)
	}
}
