// Package peers starts the real peers modelship is measured against (Flagger, KEDA) against the
// local environment (test/framework/devenv), from the binaries hack/peers.sh builds into the
// cache. It is the harness of `modelship-bench peers`.
package peers

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/modelship/modelship/test/framework/devenv"
)

// Versions of the peers (hack/peers.sh builds these).
const (
	FlaggerVersion = "v1.36.1"
	KEDAVersion    = "v2.21.0"
)

// Dir is the peers' cache folder ($MODELSHIP_CACHE or ~/.cache/modelship, then peers/).
func Dir() string {
	if d := os.Getenv("MODELSHIP_CACHE"); d != "" {
		return filepath.Join(d, "peers")
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "modelship", "peers")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "modelship", "peers")
}

// Built reports whether both peers are in the cache, and what is missing.
func Built() (bool, string) {
	if ok, why := FlaggerBuilt(); !ok {
		return ok, why
	}
	return KEDABuilt()
}

// FlaggerBuilt reports whether Flagger and its CRDs are in the cache, and what is missing.
func FlaggerBuilt() (bool, string) {
	dir := filepath.Join(Dir(), "flagger-"+FlaggerVersion)
	return present("flagger", filepath.Join(dir, "flagger"), filepath.Join(dir, "crd.yaml"))
}

// KEDABuilt reports whether KEDA's operator and metrics adapter are in the cache, and what is
// missing.
func KEDABuilt() (bool, string) {
	dir := filepath.Join(Dir(), "keda-"+KEDAVersion)
	return present("keda", filepath.Join(dir, "keda-operator"), filepath.Join(dir, "keda-adapter"))
}

// present reports whether every path exists, and else the first missing with how to build
// the peer.
func present(peer string, paths ...string) (bool, string) {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false, p + " missing: run hack/peers.sh " + peer + " (minutes on 2 cores, once)"
		}
	}
	return true, ""
}

// CRDDirs are the peers' CRD folders, for devenv.Options.CRDDirs: Flagger's and KEDA's.
func CRDDirs() []string { return []string{FlaggerCRDDir(), KEDACRDDir()} }

// FlaggerCRDDir holds Flagger's CRDs (crd.yaml).
func FlaggerCRDDir() string { return filepath.Join(Dir(), "flagger-"+FlaggerVersion) }

// KEDACRDDir holds KEDA's CRDs.
func KEDACRDDir() string { return filepath.Join(Dir(), "keda-"+KEDAVersion, "crds") }

// Peer is one running peer and the address that answers its health check.
type Peer struct {
	Process *devenv.Process
	Health  string
	// Ready is how long it took from start to a healthy answer.
	Ready time.Duration
	// MetricsService is, for KEDA's operator, the address (host:port) of its gRPC metrics
	// service, which KEDA's adapter asks for metric values.
	MetricsService string
	// CertDir is, for KEDA's operator, the folder of the certificates of that gRPC link (ca.crt,
	// tls.crt, tls.key); the adapter uses the same ones, as both ends check the peer's.
	CertDir string
}

// freePort is devenv.FreePort as text, for flags.
func freePort() (string, error) {
	port, err := devenv.FreePort()
	return strconv.Itoa(port), err
}

// StartFlagger runs Flagger with the Gateway API provider against env, reading metrics from
// prometheusURL.
func StartFlagger(ctx context.Context, env *devenv.Env, prometheusURL string) (*Peer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	p, err := env.StartProcess("flagger", []string{filepath.Join(Dir(), "flagger-"+FlaggerVersion, "flagger"),
		"-kubeconfig", env.Kubeconfig(), "-mesh-provider", "gatewayapi:v1", "-metrics-server", prometheusURL,
		"-port", port, "-log-level", "info"}, nil)
	if err != nil {
		return nil, err
	}
	peer := &Peer{Process: p, Health: "http://127.0.0.1:" + port + "/healthz"}
	return peer, waitHealthy(ctx, peer, began, http.DefaultClient)
}

// StartKEDA runs KEDA's operator against env (all namespaces, its objects in namespace keda,
// certificates in a folder of the environment).
func StartKEDA(ctx context.Context, env *devenv.Env) (*Peer, error) {
	probe, err := freePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	grpcPort, err := freePort()
	if err != nil {
		return nil, err
	}
	certs := filepath.Join(env.Dir(), "keda-certs")
	if _, err := writeSelfSigned(certs, nil, nil); err != nil {
		return nil, err
	}
	began := time.Now()
	p, err := env.StartProcess("keda-operator", []string{filepath.Join(Dir(), "keda-"+KEDAVersion, "keda-operator"),
		"--health-probe-bind-address", "127.0.0.1:" + probe, "--metrics-bind-address", "127.0.0.1:" + metricsPort,
		"--metrics-service-bind-address", "127.0.0.1:" + grpcPort, "--cert-dir", certs,
		"--enable-webhook-patching=false", "--enable-apiservice-patching=false"},
		[]string{"WATCH_NAMESPACE=", "POD_NAMESPACE=keda", "KEDA_CLUSTER_OBJECT_NAMESPACE=keda"})
	if err != nil {
		return nil, err
	}
	peer := &Peer{Process: p, Health: "http://127.0.0.1:" + probe + "/healthz",
		MetricsService: "127.0.0.1:" + grpcPort, CertDir: certs}
	return peer, waitHealthy(ctx, peer, began, http.DefaultClient)
}

// waitHealthy waits up to 2 minutes for p.Health to answer 200 OK through client, and records
// in p.Ready how long it took since began.
func waitHealthy(ctx context.Context, p *Peer, began time.Time, client *http.Client) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Health, nil)
		if res, err := client.Do(req); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				p.Ready = time.Since(began)
				return nil
			}
		}
		if !p.Process.Running() {
			return fmt.Errorf("%s exited; see %s", p.Process.Name(), p.Process.LogPath())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s within 2 minutes; see %s", p.Process.Name(), p.Health, p.Process.LogPath())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
