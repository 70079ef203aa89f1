//go:build e2e

// Package e2e holds modelship's end-to-end stories: the real control plane with fake GPU nodes
// (kwok), Traefik serving the Gateway, Prometheus, the fleet simulator replaying a production
// trace, and the controller binary, all started once by TestMain (test/framework/stack) in a
// network namespace of the run's own (the test binary re-executes itself there; it needs root
// and skips without). Each story runs in
// its own namespace with its own ModelServer, says what it does as Given/When/Then lines, asserts
// behaviour, and reports numbers as "FIGURE:" lines.
//
// Run with `make e2e`, or `go test -tags e2e -v ./test/e2e/...` after hack/controlplane.sh all
// and hack/prometheus.sh. The stories that share the stack run in parallel (the package raises
// -test.parallel to 8 unless it is given); the ones that stop Prometheus, the controller or the
// simulator run one after the other, after them. Logs go to a temporary folder, kept and printed
// when a story fails (or always with MODELSHIP_E2E_KEEP=1).
package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/test/framework/devenv"
	"github.com/modelship/modelship/test/framework/gateway"
	"github.com/modelship/modelship/test/framework/stack"
)

// Images of the stories. The simulator makes imageSlow three times slower (slowProfile).
const (
	imageV1   = "vllm/vllm-openai:v0.10.2"
	imageGood = "vllm/vllm-openai:v0.11.0"
	imageV3   = "vllm/vllm-openai:v0.11.2"
	imageSlow = "vllm/vllm-openai:v0.11.1-slow"

	slowProfile = "revision=v0.11.1-slow:latency=3.0"
	// rateScale is the simulator's normal load: about 14 requests per second per ModelServer,
	// which the stories' 6 replicas serve at about 45% GPU utilization (see the known issues on
	// storyGoodVersionPromoted).
	rateScale = 0.25
	// replicas of the stories with a fixed count.
	replicas = 6
	// gpuNodes of devenv.DefaultGPUsPerNode GPUs: room for the stories that run together, 8 at
	// once (test.parallel) of up to 12 one-GPU pods each (6 stable and 6 candidate, or a shadow
	// candidate sized for a 100% mirror). With 6 nodes (48 GPUs) the stories' candidates waited
	// minutes in NoRoomForCandidate whenever the big ones overlapped, and timed out on a slower run.
	gpuNodes = 12
)

// simulatedGatewayEnv, set, runs the stories on the simulator's old mode (it splits the
// requests itself; Traefik serves nothing), where the InferencePool story runs.
const simulatedGatewayEnv = "MODELSHIP_E2E_SIMULATED_GATEWAY"

var (
	// st is the stack every story runs on.
	st *stack.Stack
	// prom queries the stack's Prometheus for the figures.
	prom metrics.Querier
)

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		// The stories sharing the stack mostly wait; run them all at once even on 2 cores.
		_ = flag.Set("test.parallel", "8")
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The stack runs in a network namespace of its own, where the pods' addresses exist: the
	// test binary re-executes itself there and exits with its result.
	ns, code, err := gateway.Reexec()
	if errors.Is(err, gateway.ErrNoNetns) {
		fmt.Fprintf(os.Stderr, "e2e: SKIP: %v\n", err)
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if ns == nil {
		return code
	}
	if missing := devenv.MissingAssets(devenv.DefaultAssetsDir()); len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: control plane assets in %s lack %s: run hack/controlplane.sh all (make controlplane)\n",
			devenv.DefaultAssetsDir(), strings.Join(missing, ", "))
		return 1
	}
	dir, err := os.MkdirTemp("", "modelship-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	log := funcr.New(func(prefix, args string) {
		fmt.Fprintf(os.Stderr, "%s e2e %s %s\n", time.Now().Format("15:04:05"), prefix, args)
	}, funcr.Options{})
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	began := time.Now()
	s, err := stack.Start(ctx, stack.Options{
		Dir: dir, Speed: 10, RateScale: rateScale, GPUNodes: gpuNodes, Seed: 7,
		Profiles: []string{slowProfile, degradeProfile, erroringProfile}, Logger: log,
		SimulatedGateway: os.Getenv(simulatedGatewayEnv) != "",
		// Traefik's kubernetescrd provider: the shadow phase mirrors through a TraefikService.
		TraefikKubernetesCRD: true, CRDDirs: []string{gateway.CRDDir()},
	})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: starting the stack: %v\nlogs kept in %s\n", err, dir)
		return 1
	}
	release := s.Env.StopOnSignals()
	st = s
	fmt.Fprintf(os.Stderr, "e2e: stack up in %s; requests served through %s; logs in %s; KUBECONFIG=%s\n",
		time.Since(began).Round(time.Second), s.GatewayName, dir, s.Env.Kubeconfig())
	fmt.Fprintf(os.Stderr, "FIGURE: stack start: %s\n", time.Since(began).Round(time.Second))
	q, err := metrics.NewPrometheus(metrics.Config{URL: s.Env.PrometheusURL(), Timeout: 3 * time.Second})
	if err != nil {
		s.Stop()
		release()
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	prom = q

	// A part that exits while no story asked for it (stories stop Prometheus, kill the
	// controller and replace the simulator on purpose) ends the run: every later result would
	// be about a broken stack, not about modelship.
	done := make(chan struct{})
	go func() {
		select {
		case err := <-s.Env.Failed():
			fmt.Fprintf(os.Stderr, "e2e: FAIL: a part of the stack stopped, ending the run: %v\nlogs kept in %s\n", err, dir)
			s.Stop()
			os.Exit(1)
		case <-done:
		}
	}()
	code = m.Run()
	close(done)

	s.Stop()
	release()
	if code != 0 || os.Getenv("MODELSHIP_E2E_KEEP") != "" {
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s (controller: %s, simulator: %s)\n", dir,
			filepath.Join(dir, "env", "controller.log"), filepath.Join(dir, "env", "fleet-sim*.log"))
	} else {
		_ = os.RemoveAll(dir)
	}
	return code
}
