package gateway

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
)

// The addresses this package serves and dials are the benchmarking range's, routed only in a
// namespace of the test's own.
func TestAddressRangesAreTheBenchmarkingRange(t *testing.T) {
	bench := netip.MustParsePrefix("198.18.0.0/15")
	if got := netip.MustParsePrefix(BenchmarkRange); got != bench {
		t.Fatalf("BenchmarkRange = %s, want %s", got, bench)
	}
	pods := netip.MustParsePrefix(PodCIDR)
	if !bench.Contains(pods.Addr()) || pods.Bits() < bench.Bits() {
		t.Fatalf("PodCIDR %s is not inside %s", pods, bench)
	}
	for _, n := range []int{0, 1, 2, 255, 256, 55*256 - 1} {
		if a := PodAddress(n); !pods.Contains(a) {
			t.Errorf("PodAddress(%d) = %s, outside %s", n, a, pods)
		}
	}
	if adv := netip.MustParseAddr(AdvertiseAddress); !bench.Contains(adv) || pods.Contains(adv) {
		t.Errorf("AdvertiseAddress %s must be in %s and outside %s", adv, bench, pods)
	}
	if got := PodAddress(1).String(); got != "198.18.200.1" {
		t.Errorf("PodAddress(1) = %s, want 198.18.200.1", got)
	}
	for _, n := range []int{-1, 55 * 256} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("PodAddress(%d) did not panic", n)
				}
			}()
			_ = PodAddress(n)
		}()
	}
}

// Nothing dials a private range or a public address: the guard refuses before connect (its
// Control hook runs between socket and connect), so no packet leaves.
func TestTheDialGuardRefusesPrivateAndPublicAddresses(t *testing.T) {
	for _, a := range []string{"127.0.0.1:8000", "[::1]:8000", "198.18.200.1:8080", "198.19.255.254:80", "198.18.0.1:1"} {
		if err := guardControl("tcp", a, nil); err != nil {
			t.Errorf("guard refuses %s: %v", a, err)
		}
	}
	for _, a := range []string{
		"10.0.0.1:80", "10.96.0.1:443", "172.16.0.1:80", "172.31.255.1:80", "192.168.1.1:80",
		"8.8.8.8:53", "100.64.0.1:80", "169.254.169.254:80", "198.17.255.255:80", "198.20.0.1:80",
		"[fd00::1]:80", "[2001:db8::1]:80", "[::ffff:10.0.0.1]:80", "example.com:80", "",
	} {
		err := guardControl("tcp", a, nil)
		if !errors.Is(err, ErrRefused) {
			t.Errorf("guard allows %q (err %v)", a, err)
		}
	}
	// The transport the tests use is guarded and ignores proxy settings.
	tr := Transport()
	if tr.Proxy != nil {
		t.Error("Transport uses a proxy from the environment")
	}
	if d := Dialer(); d.Control == nil {
		t.Error("Dialer has no guard")
	}
}

// The namespace setup refuses to run anywhere but in a fresh namespace of the test's own: not
// without the marker, not in the namespace the test started in, not with any interface up.
func TestNetnsSetupRefusesAnythingButAFreshNamespace(t *testing.T) {
	lo, loUp, eth0Up, tunl0 := iface{"lo", false}, iface{"lo", true}, iface{"eth0", true}, iface{"tunl0", false}
	cases := []struct {
		name, parent, self string
		ifs                []iface
		ok                 bool
	}{
		{"fresh", "net:[1]", "net:[2]", []iface{lo}, true},
		{"fresh with the kernel's fallback tunnel", "net:[1]", "net:[2]", []iface{lo, tunl0}, true},
		{"no marker", "", "net:[2]", []iface{lo}, false},
		{"same namespace", "net:[1]", "net:[1]", []iface{lo}, false},
		{"lo already up", "net:[1]", "net:[2]", []iface{loUp}, false},
		{"host interfaces", "net:[1]", "net:[2]", []iface{loUp, eth0Up}, false},
	}
	for _, c := range cases {
		err := checkFresh(c.parent, c.self, c.ifs)
		if (err == nil) != c.ok {
			t.Errorf("%s: checkFresh = %v, want ok=%v", c.name, err, c.ok)
		}
	}
	// In this process (the namespace `go test` runs in), the real setup refuses before it runs
	// any ip command: with the marker naming this namespace, and without a marker.
	self, err := netnsID()
	if err != nil {
		t.Skipf("no /proc/self/ns/net here: %v", err)
	}
	if os.Getenv(NetnsEnv) != "" {
		t.Skip("running inside a test namespace")
	}
	for _, parent := range []string{self, ""} {
		err := SetupNetns(parent)
		if err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("SetupNetns(%q) in the test's own namespace = %v, want a refusal", parent, err)
		}
	}
}

// Traefik's flags: the provider and its channel, no throttling, metrics and ping, a log file, no
// calls home.
func TestTraefikArgs(t *testing.T) {
	args := Options{Kubeconfig: "/k", Dir: "/d", WebPort: 8000, AdminPort: 8082}.Args()
	for _, want := range []string{
		"--global.checkNewVersion=false",
		"--global.sendAnonymousUsage=false",
		"--entryPoints.web.address=127.0.0.1:8000",
		"--entryPoints.traefik.address=127.0.0.1:8082",
		"--providers.kubernetesgateway=true",
		"--providers.kubernetesgateway.experimentalChannel=false",
		"--providers.providersThrottleDuration=0s",
		"--metrics.prometheus=true",
		"--log.filePath=/d/traefik.log",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("traefik args lack %s: %v", want, args)
		}
	}
	for _, a := range (Options{Kubeconfig: "/k", Dir: "/d", WebPort: 8000, AdminPort: 8082, LogToStdout: true}).Args() {
		if strings.HasPrefix(a, "--log.filePath") {
			t.Errorf("with LogToStdout, traefik still logs to a file: %s", a)
		}
	}
}

// The kubernetescrd provider (TraefikServices, for Argo Rollouts' Traefik router) is off unless
// asked for, and unthrottled when on.
func TestTraefikArgsKubernetesCRD(t *testing.T) {
	base := Options{Kubeconfig: "/k", Dir: "/d", WebPort: 8000, AdminPort: 8082}
	for _, a := range base.Args() {
		if strings.HasPrefix(a, "--providers.kubernetescrd") {
			t.Errorf("the kubernetescrd provider is on without KubernetesCRD: %s", a)
		}
	}
	base.KubernetesCRD = true
	args := base.Args()
	for _, want := range []string{
		"--providers.kubernetesgateway=true",
		"--providers.kubernetescrd=true",
		"--providers.kubernetescrd.throttleDuration=0s",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("traefik args with KubernetesCRD lack %s: %v", want, args)
		}
	}
}
