package peers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/modelship/modelship/test/framework/devenv"
)

// ArgoRolloutsVersion is the Argo Rollouts release hack/peers.sh builds (v1.10.2 needs a newer
// Go than the project's).
const ArgoRolloutsVersion = "v1.10.1"

// ArgoDir is the cache folder of Argo Rollouts: the controller, crds/ (its CRDs) and
// traefik-crds/ (Traefik's traefik.io CRDs, for the TraefikService its router writes).
func ArgoDir() string { return filepath.Join(Dir(), "argo-rollouts-"+ArgoRolloutsVersion) }

// ArgoBinary is the controller hack/peers.sh argo-rollouts builds.
func ArgoBinary() string { return filepath.Join(ArgoDir(), "rollouts-controller") }

// ArgoBuilt reports whether Argo Rollouts and the CRDs it needs are in the cache, and what is
// missing.
func ArgoBuilt() (bool, string) {
	for _, p := range []string{ArgoBinary(), filepath.Join(ArgoDir(), "crds"), filepath.Join(ArgoDir(), "traefik-crds")} {
		if _, err := os.Stat(p); err != nil {
			return false, p + " missing: run hack/peers.sh argo-rollouts (15 minutes measured on 2 shared cores, once)"
		}
	}
	return true, ""
}

// ArgoCRDDirs are the CRD folders the Argo Rollouts contender needs, for devenv.Options.CRDDirs:
// Argo Rollouts' (Rollout, AnalysisTemplate, ClusterAnalysisTemplate, AnalysisRun, Experiment)
// and Traefik's (TraefikService and the other traefik.io kinds, all of which Traefik's
// kubernetescrd provider lists before it serves).
func ArgoCRDDirs() []string {
	return []string{filepath.Join(ArgoDir(), "crds"), filepath.Join(ArgoDir(), "traefik-crds")}
}

// ArgoOptions configure an Argo Rollouts controller process.
type ArgoOptions struct {
	// Binary is the controller; ArgoBinary() when empty.
	Binary string
	// Kubeconfig is the API server's kubeconfig. Required.
	Kubeconfig string
	// Dir receives rollouts-controller.log. Required.
	Dir string
	// HealthzPort and MetricsPort are the controller's listeners (it binds them on every
	// address); free ports when 0.
	HealthzPort, MetricsPort int
	// LogLevel is debug, info, warn or error; info when empty.
	LogLevel string
}

// ArgoController is a running Argo Rollouts controller: a devenv.Process (Stop, Exited, Args,
// LogPath) with its endpoints.
type ArgoController struct {
	*devenv.Process
	// Health answers 200 once the controller runs.
	Health string
	// Metrics is its Prometheus endpoint.
	Metrics string
	// Ready is how long it took from start to a healthy answer.
	Ready time.Duration
}

// Args are the controller's flags: the kubeconfig, no leader election (one replica), the two
// listeners, and Argo Rollouts' defaults for everything else (all namespaces, the traefik.io
// v1alpha1 API for its Traefik router, 15 min resync).
func (o ArgoOptions) Args() []string {
	level := o.LogLevel
	if level == "" {
		level = "info"
	}
	return []string{
		"--kubeconfig", o.Kubeconfig,
		"--leader-elect=false",
		"--healthzPort", strconv.Itoa(o.HealthzPort),
		"--metricsPort", strconv.Itoa(o.MetricsPort),
		"--loglevel", level,
	}
}

// StartArgoRollouts runs the Argo Rollouts controller against the API server of o.Kubeconfig
// and waits (at most 2 minutes) for its /healthz. Stop ends it.
func StartArgoRollouts(ctx context.Context, o ArgoOptions) (*ArgoController, error) {
	if o.Kubeconfig == "" || o.Dir == "" {
		return nil, errors.New("argo rollouts: ArgoOptions.Kubeconfig and Dir are required")
	}
	if o.Binary == "" {
		o.Binary = ArgoBinary()
	}
	if _, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("argo rollouts: %w (run hack/peers.sh argo-rollouts)", err)
	}
	for _, port := range []*int{&o.HealthzPort, &o.MetricsPort} {
		if *port == 0 {
			p, err := devenv.FreePort()
			if err != nil {
				return nil, err
			}
			*port = p
		}
	}
	began := time.Now()
	// Out of any cluster: the kubeconfig, never an in-cluster configuration (the service
	// variables and KUBECONFIG cleared); its own namespace (leases, its ConfigMap, which it does
	// without) is Argo's default.
	proc, err := devenv.StartProcess("rollouts-controller", o.Dir, append([]string{o.Binary}, o.Args()...),
		[]string{"POD_NAMESPACE=argo-rollouts", "KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="})
	if err != nil {
		return nil, fmt.Errorf("argo rollouts: %w", err)
	}
	a := &ArgoController{
		Process: proc,
		Health:  fmt.Sprintf("http://127.0.0.1:%d/healthz", o.HealthzPort),
		Metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", o.MetricsPort),
	}

	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.Health, nil)
		if res, err := client.Do(req); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				a.Ready = time.Since(began)
				return a, nil
			}
		}
		select {
		case <-a.Exited():
			return nil, fmt.Errorf("argo rollouts: the controller exited at start (%v); see %s", a.ExitErr(), a.LogPath())
		case <-ctx.Done():
			_ = a.Stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = a.Stop()
			return nil, fmt.Errorf("argo rollouts: no answer on %s within 2 minutes; see %s", a.Health, a.LogPath())
		}
	}
}
