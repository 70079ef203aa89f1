// Package stack runs modelship the way a user would, on the local environment: the real control
// plane with fake GPU nodes, Traefik serving the Gateway and Prometheus (test/framework/devenv),
// the fleet simulator playing the model servers (each pod served on its own address) and sending
// the trace's requests through the Gateway, and the controller as its built binary with its
// normal flags. The demo command and the end-to-end tests both start it, inside the local
// environment's network namespace.
package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelship/modelship/internal/testenv"
	"github.com/modelship/modelship/test/framework/devenv"
	"github.com/modelship/modelship/test/framework/fleet"
	"github.com/modelship/modelship/test/framework/fleetsim"
	"github.com/modelship/modelship/test/framework/gateway"
)

// DefaultTrace is the trace the simulator replays when Options.Trace is empty, relative to the
// repository's root: the Azure LLM inference trace 2023 (conversation), shipped in the
// repository with its source and license (test/traces/README.md).
const DefaultTrace = "test/traces/azure-llm-2023-conv.csv"

// DefaultColdStart is the simulated pods' model load time when Options.ColdStart is zero.
const DefaultColdStart = 5 * time.Second

// simulatorStartTimeout bounds the wait for the fleet simulator to serve after its start.
const simulatorStartTimeout = time.Minute

// Options configure a stack.
type Options struct {
	// Dir holds logs and data of every part. Required.
	Dir string
	// Trace is the request trace the simulator replays (TIMESTAMP,ContextTokens,GeneratedTokens).
	// Defaults to DefaultTrace in the repository.
	Trace string
	// Speed compresses the trace's time (60: an hour in a minute); RateScale multiplies its rate.
	Speed, RateScale float64
	// Profiles are the simulator's per-revision performance rules, e.g. "revision=v0.11.1:latency=3.0".
	Profiles []string
	// ColdStart is how long a simulated pod loads its model after its containers become ready.
	ColdStart time.Duration
	// GPUNodes and GPUsPerNode size the fake GPU fleet.
	GPUNodes, GPUsPerNode int
	// CRDDirs are more CRD folders to install after the project's (the peers' CRDs for
	// make bench-peers).
	CRDDirs []string
	// ControllerArgs are added to the controller's flags.
	ControllerArgs []string
	// Seed makes the simulator deterministic.
	Seed int64
	// TraefikKubernetesCRD enables Traefik's kubernetescrd provider (TraefikServices, for Argo
	// Rollouts' Traefik router); the traefik.io CRDs must be among CRDDirs.
	TraefikKubernetesCRD bool
	// SimulatedGateway keeps the simulator's old mode: it splits the trace's requests by the
	// routes' weights itself and writes their status, and Traefik (still running) serves
	// nothing. For what Traefik cannot serve (InferencePool backends).
	SimulatedGateway bool
	// Logger receives progress messages.
	Logger logr.Logger
}

// Stack is a running local environment with the simulator and the controller.
type Stack struct {
	Env        *devenv.Env
	Client     client.Client
	Simulator  *devenv.Process
	Controller *devenv.Process
	// SimulatorURL serves the simulated pods' /metrics and warm-up endpoints.
	SimulatorURL string
	// ResponsesMetric is the simulator's counter of answers to the trace's requests, labelled
	// namespace, modelserver, color (of the pod that answered) and code: what the load
	// generator got back through Traefik (fleetsim.MetricLoadResponses), or, with
	// SimulatedGateway, the simulated Gateway's responses (fleet.MetricGatewayResponses).
	ResponsesMetric string
	// GatewayName says which Gateway serves the requests, for people.
	GatewayName string
	bin         string
	simRestarts int
	// simulatedGateway: the simulator plays the Gateway and answers the warm-up checks too.
	simulatedGateway bool
}

// Build compiles the controller and the plugin (the product's module, repoRoot) and the
// simulator (the test module, repoRoot/test) into dir.
func Build(ctx context.Context, repoRoot, dir string) error {
	for _, b := range []struct {
		module string
		pkgs   []string
	}{
		{repoRoot, []string{"./cmd/modelship-controller", "./cmd/kubectl-modelship"}},
		{filepath.Join(repoRoot, "test"), []string{"./cmd/modelship-fleet-sim"}},
	} {
		cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", dir + string(os.PathSeparator)}, b.pkgs...)...)
		cmd.Dir = b.module
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building the controller and the simulator: %w\n%s", err, out)
		}
	}
	return nil
}

// Start builds the binaries, starts the environment, the simulator and the controller. It
// checks the trace first (with the simulator's own loader) and waits for the simulator to
// serve, so that a simulator that cannot run fails Start with its error and the end of its
// log. Once it returns, Env.Failed reports any part that exits unasked.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if o.Dir == "" {
		return nil, fmt.Errorf("stack: Options.Dir is required")
	}
	root := testenv.RepoRoot()
	if o.Trace == "" {
		o.Trace = filepath.Join(root, DefaultTrace)
	}
	// The simulator would exit at once on a bad trace: say so before minutes of building and
	// starting a cluster.
	if _, err := fleet.LoadTrace(o.Trace); err != nil {
		return nil, fmt.Errorf("stack: the fleet simulator cannot replay its trace (--trace %s): %w", o.Trace, err)
	}
	if o.Speed == 0 {
		o.Speed = 10
	}
	if o.RateScale == 0 {
		o.RateScale = 0.5
	}
	if o.ColdStart == 0 {
		o.ColdStart = DefaultColdStart
	}
	if o.GPUNodes == 0 {
		o.GPUNodes = 2
	}
	bin := filepath.Join(o.Dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	o.Logger.Info("Building the controller, the fleet simulator and the kubectl plugin")
	if err := Build(ctx, root, bin); err != nil {
		return nil, err
	}
	simPort, err := devenv.FreePort()
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	simAddr := "127.0.0.1:" + strconv.Itoa(simPort)
	var crds []string
	if len(o.CRDDirs) > 0 {
		crds = append(devenv.DefaultCRDDirs(root), o.CRDDirs...)
	}
	env, err := devenv.Start(ctx, devenv.Options{
		Dir: filepath.Join(o.Dir, "env"), RepoRoot: root, GPUNodes: o.GPUNodes, GPUsPerNode: o.GPUsPerNode, CRDDirs: crds,
		TraefikKubernetesCRD: o.TraefikKubernetesCRD,
		WithPrometheus:       true, PrometheusScrapeTargets: []string{simAddr}, Logger: o.Logger,
	})
	if err != nil {
		return nil, err
	}
	s := &Stack{Env: env, SimulatorURL: "http://" + simAddr, bin: bin,
		ResponsesMetric: fleetsim.MetricLoadResponses, GatewayName: "Traefik " + gateway.Version}
	if o.SimulatedGateway {
		s.ResponsesMetric, s.GatewayName = fleet.MetricGatewayResponses, "the fleet simulator (simulated Gateway)"
		s.simulatedGateway = true
	}
	c, err := client.New(env.RESTConfig(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		env.Stop()
		return nil, fmt.Errorf("stack: client: %w", err)
	}
	s.Client = c

	simArgs := []string{filepath.Join(bin, "modelship-fleet-sim"), "--trace", o.Trace, "--listen", simAddr,
		"--speed", fmt.Sprint(o.Speed), "--rate-scale", fmt.Sprint(o.RateScale), "--cold-start", o.ColdStart.String(),
		"--seed", fmt.Sprint(o.Seed + 1)}
	for _, p := range o.Profiles {
		simArgs = append(simArgs, "--profile", p)
	}
	if !o.SimulatedGateway {
		// Every pod served on its own address; the trace's requests sent to Traefik's listener.
		simArgs = append(simArgs, "--gateway-url", env.GatewayURL())
	}
	if s.Simulator, err = env.StartProcess("fleet-sim", simArgs, nil); err != nil {
		env.Stop()
		return nil, err
	}
	if err := devenv.WaitServing(ctx, s.Simulator, s.SimulatorURL+"/healthz", simulatorStartTimeout); err != nil {
		env.Stop()
		return nil, fmt.Errorf("stack: starting the fleet simulator: %w", err)
	}
	if err := s.StartController(o.ControllerArgs...); err != nil {
		env.Stop()
		return nil, err
	}
	return s, nil
}

// StartController starts the controller binary with its normal flags, pointed at the local
// Prometheus. Its warm-up checks go to the pods' own addresses (http://<podIP>:<port>/<path>,
// served by the simulator's pod servers in the environment's network namespace), or, with
// SimulatedGateway, to the simulator's /pods/{namespace}/{pod}/{path}. Through Traefik it reads
// the gateway metrics from Traefik's series (--gateway-metrics-namespace).
func (s *Stack) StartController(extra ...string) error {
	p, err := s.StartControllerNamed("controller", extra...)
	if err != nil {
		return err
	}
	s.Controller = p
	return nil
}

// StartControllerNamed starts another controller process (its log is <Dir>/env/<name>.log) with
// the same flags as StartController and extra; later flags win, so extra may override them
// (e.g. --metrics-bind-address). The failover story runs two with --leader-elect.
func (s *Stack) StartControllerNamed(name string, extra ...string) (*devenv.Process, error) {
	args := []string{filepath.Join(s.bin, "modelship-controller"),
		"--prometheus-url", s.Env.PrometheusURL(), "--prometheus-timeout", "3s"}
	if s.simulatedGateway {
		args = append(args, "--warmup-url-template", s.SimulatorURL+"/pods/{namespace}/{pod}/{path}")
	} else {
		// Traefik's series in the local Prometheus carry namespace=traefik: the gateway
		// metrics (analysis.gateway, the autoscaling metric gateway) read them.
		args = append(args, "--gateway-metrics-namespace", devenv.TraefikMetricsNamespace)
	}
	args = append(append(args,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--autoscaling-signal-interval", "2s",
		// The local Prometheus scrapes every second (test/framework/devenv/prometheus.go); 8s is
		// overstated on purpose: analysis windows of 32s hold about 60 requests of a candidate
		// at 10% of ~20 requests/s, a few times the API's default minSamples of 20, and the e2e
		// stories' timings (the autoscaler's 32s serving window among them) were set on it.
		// make bench-peers tells its rollouts the truth per ModelServer
		// (spec.rollout.analysis.scrapeInterval: 1s): a step's window grows and its data count
		// from its first tested look, so short windows no longer cost a slow candidate its test.
		"--prometheus-scrape-interval", "8s"), extra...)
	return s.Env.StartProcess(name, args, nil)
}

// RestartSimulator replaces the running fleet simulator with a new one replaying the trace at
// rateScale times its rate, on the same address (Prometheus' scrape target and the controller's
// warm-up URL stay valid) and with the same other flags. The new process is named
// fleet-sim-<n> (its log is <Dir>/env/fleet-sim-<n>.log) and becomes s.Simulator. The
// simulated pods keep their state in the cluster; their counters restart from zero.
func (s *Stack) RestartSimulator(rateScale float64) error {
	old := s.Simulator
	args := old.Args()
	replaced := false
	for i := 1; i+1 < len(args); i++ {
		if args[i] == "--rate-scale" {
			args[i+1] = fmt.Sprint(rateScale)
			replaced = true
		}
	}
	if !replaced {
		args = append(args, "--rate-scale", fmt.Sprint(rateScale))
	}
	if err := old.Stop(); err != nil {
		return fmt.Errorf("stack: stopping the simulator: %w", err)
	}
	s.simRestarts++
	p, err := s.Env.StartProcess("fleet-sim-"+strconv.Itoa(s.simRestarts), args, nil)
	if err != nil {
		return fmt.Errorf("stack: restarting the simulator: %w", err)
	}
	s.Simulator = p
	if err := devenv.WaitServing(context.Background(), p, s.SimulatorURL+"/healthz", simulatorStartTimeout); err != nil {
		return fmt.Errorf("stack: restarting the simulator: %w", err)
	}
	return nil
}

// Plugin is the path of the built kubectl-modelship binary.
func (s *Stack) Plugin() string { return filepath.Join(s.bin, "kubectl-modelship") }

// Stop stops everything the stack started.
func (s *Stack) Stop() { s.Env.Stop() }
