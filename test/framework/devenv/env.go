// Package devenv starts and stops a real local Kubernetes cluster and its companions as plain
// processes on 127.0.0.1, for the one-command demo (test/cmd/modelship-dev) and the end-to-end tests.
//
// A started Env runs etcd, kube-apiserver, kube-controller-manager (Deployments, ReplicaSets,
// garbage collection, HPA, EndpointSlices), kube-scheduler and kwok, which plays the kubelet of
// fake GPU nodes: pods scheduled there become Running and Ready without any container, with an
// address of PodCIDR. The Gateway API CRDs (standard channel), the modelship CRDs, a GatewayClass
// and a Gateway are installed, and Traefik (test/framework/gateway) serves that Gateway on its
// "web" entry point (GatewayURL); Prometheus is optional, and scrapes Traefik (job "traefik")
// when it runs. Every process writes to <Dir>/<name>.log and runs in its own process group, so
// that Stop leaves nothing behind.
//
// The whole environment runs inside a network namespace of the project's own (gateway.Reexec
// makes it: lo up, PodCIDR routed locally on lo), where a process can serve a pod's address and
// nothing outside sees it; Start refuses to run anywhere else (gateway.CheckNetns).
//
// GPU nodes carry the taint nvidia.com/gpu=present:NoSchedule, as GPU node pools of managed
// clusters do, and kube-apiserver runs the ExtendedResourceToleration admission plugin, which
// adds the matching toleration to every pod that requests nvidia.com/gpu. So a model server's
// pod template needs no toleration of its own (nor any kwok-specific one), while a pod that
// requests no GPU stays Pending, as it would on a real GPU pool. Options.NoGPUTaint turns the
// taint off.
package devenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/modelship/modelship/test/framework/gateway"
)

// Defaults of Options.
const (
	// DefaultGPUsPerNode is the nvidia.com/gpu capacity of a fake node when Options.GPUsPerNode is 0.
	DefaultGPUsPerNode = 8
	// DefaultGPUProduct is the nvidia.com/gpu.product label of fake nodes when Options.GPUProduct is empty.
	DefaultGPUProduct = "NVIDIA-H100-80GB-HBM3"
	// DefaultGatewayClassName is the GatewayClass created for the demo.
	DefaultGatewayClassName = "traefik"
	// DefaultGatewayControllerName is the controllerName of the demo GatewayClass: Traefik's
	// kubernetesgateway provider, which serves the Gateway and sets the routes' status.
	DefaultGatewayControllerName = gateway.ControllerName
	// DefaultGatewayName is the Gateway created in DefaultGatewayNamespace for the demo.
	DefaultGatewayName = "modelship"
	// DefaultGatewayNamespace is the namespace of the demo Gateway.
	DefaultGatewayNamespace = "default"
)

// Part names: each is also the name of the part's process and log file (<Dir>/<name>.log).
const (
	PartEtcd              = "etcd"
	PartAPIServer         = "kube-apiserver"
	PartControllerManager = "kube-controller-manager"
	PartScheduler         = "kube-scheduler"
	PartKwok              = "kwok"
	PartPrometheus        = "prometheus"
	PartTraefik           = "traefik"
)

// Addresses the fake pods and nodes get. Both are in the benchmarking range 198.18.0.0/15
// (gateway.BenchmarkRange); only PodCIDR is routed, locally on lo, inside the environment's
// network namespace, so a process there can serve a pod's address.
const (
	// PodCIDR is the pool kwok gives pod addresses from (its --cidr; its default, 10.0.0.0/24,
	// is a private range that must never be routed).
	PodCIDR = gateway.PodCIDR
	// NodeIP is every fake node's InternalIP (kwok's --node-ip): outside PodCIDR, nothing
	// serves or dials it.
	NodeIP = "198.18.0.2"
)

// Options says what Start starts. The zero value, with Dir set, is a cluster without nodes and
// without Prometheus.
type Options struct {
	// Dir holds everything of this environment: logs (<name>.log), certificates and tokens
	// (pki/), kubeconfigs, etcd and Prometheus data. Data of an earlier run there is removed at
	// start. Required.
	Dir string
	// AssetsDir holds the binaries etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
	// kwok and the folder kwok-stages/ (hack/controlplane.sh all). Defaults to DefaultAssetsDir().
	AssetsDir string
	// RepoRoot is the modelship checkout, for config/crd/bases and for finding the Gateway API
	// module. Defaults to the nearest parent folder of the working directory holding modelship's go.mod.
	RepoRoot string
	// CRDDirs are applied after the Gateway API and InferencePool CRDs. Defaults to
	// <RepoRoot>/config/crd/bases.
	CRDDirs []string
	// GatewayAPICRDDir is the Gateway API standard-channel CRD folder. Defaults to
	// config/crd/standard of the sigs.k8s.io/gateway-api module required by RepoRoot's go.mod.
	GatewayAPICRDDir string

	// GPUNodes is the number of fake GPU nodes (gpu-node-0, gpu-node-1, ...).
	GPUNodes int
	// GPUsPerNode is each node's nvidia.com/gpu capacity. Defaults to DefaultGPUsPerNode.
	GPUsPerNode int
	// GPUProduct is each node's nvidia.com/gpu.product label. Defaults to DefaultGPUProduct.
	GPUProduct string
	// NodeCPU, NodeMemory and NodePods are each node's capacity. Default 64, 512Gi and 110.
	NodeCPU, NodeMemory, NodePods string
	// NoGPUTaint leaves the nvidia.com/gpu=present:NoSchedule taint off the GPU nodes.
	NoGPUTaint bool

	// NoGateway skips the demo GatewayClass and Gateway and Traefik (the CRDs are installed
	// anyway).
	NoGateway bool
	// NoTraefik applies the GatewayClass and Gateway but runs no Traefik, so no data plane
	// serves them (a benchmark of the control plane alone, where Traefik rebuilding its
	// configuration for every route would compete for the CPU).
	NoTraefik bool
	// TraefikBinary is the traefik program. Defaults to gateway.FindBinary's (make gateway
	// builds it once into the cache).
	TraefikBinary string
	// TraefikKubernetesCRD enables Traefik's kubernetescrd provider beside the Gateway API one
	// (gateway.Options.KubernetesCRD: TraefikServices, for Argo Rollouts' Traefik router). The
	// traefik.io CRDs must be among CRDDirs.
	TraefikKubernetesCRD bool
	// GatewayClassName, GatewayControllerName, GatewayName and GatewayNamespace name the demo
	// Gateway objects. Default to the Default* constants.
	GatewayClassName, GatewayControllerName, GatewayName, GatewayNamespace string

	// WithPrometheus starts Prometheus on 127.0.0.1, scraping every second.
	WithPrometheus bool
	// PrometheusBinary is the prometheus program. Defaults to "prometheus" in PATH (hack/prometheus.sh).
	PrometheusBinary string
	// PrometheusScrapeTargets are host:port addresses scraped on /metrics with honor_labels: true
	// (the fleet simulator exports series labelled as if from many pods). Env.SetScrapeTargets
	// changes them later.
	PrometheusScrapeTargets []string

	// StartTimeout bounds the wait for each part to become ready. Defaults to 90 s.
	StartTimeout time.Duration
	// Logger receives progress messages. Defaults to logr.Discard().
	Logger logr.Logger
}

// PartTiming is how long one part took from start to ready.
type PartTiming struct {
	// Part is the part's name (a Part* constant or a setup step such as "crds").
	Part string
	// Took is the time from launch to ready.
	Took time.Duration
}

// Env is a running environment. Its methods are safe for concurrent use.
type Env struct {
	opts       Options
	pki        *pki
	etcdURL    string
	kubeconfig string
	restConfig *rest.Config
	promURL    string
	promDir    string
	gatewayURL string // Traefik's web entry point
	traefikURL string // Traefik's traefik entry point: /ping, /metrics
	log        logr.Logger

	mu        sync.Mutex
	parts     []*Process // in start order; stopped in reverse order
	byName    map[string]*Process
	timings   []PartTiming
	stopOnce  sync.Once
	stopped   bool
	processes []*Process // started through StartProcess
	cleanups  []func()   // added through OnStop; run in reverse order after every process stopped
	failed    chan error // the first unexpected exit (see Failed); made on first use
	// started is set once Start has every part ready: before that, start steps report their
	// own failures (and a part retried on fresh ports exits on purpose).
	started bool
}

// Start starts the environment and returns once every part is ready: the API server serves,
// the controllers and the scheduler are healthy, the GPU nodes are Ready, the CRDs are
// established and Prometheus (if asked for) is ready. On error everything started is stopped
// again and the error names the part and shows the end of its log.
func Start(ctx context.Context, opts Options) (*Env, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := gateway.CheckNetns(); err != nil {
		return nil, fmt.Errorf("devenv: %w", err)
	}
	e := &Env{opts: opts, log: opts.Logger, byName: map[string]*Process{}}
	if err := e.start(ctx); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("devenv: Options.Dir is required")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return o, fmt.Errorf("devenv: %w", err)
	}
	o.Dir = dir
	if o.AssetsDir == "" {
		o.AssetsDir = DefaultAssetsDir()
	}
	if o.RepoRoot == "" {
		root, err := FindRepoRoot()
		if err != nil {
			return o, err
		}
		o.RepoRoot = root
	}
	if o.CRDDirs == nil {
		o.CRDDirs = DefaultCRDDirs(o.RepoRoot)
	}
	if o.GPUNodes < 0 {
		return o, fmt.Errorf("devenv: Options.GPUNodes is %d, want 0 or more", o.GPUNodes)
	}
	if o.GPUsPerNode <= 0 {
		o.GPUsPerNode = DefaultGPUsPerNode
	}
	setDefault(&o.GPUProduct, DefaultGPUProduct)
	setDefault(&o.NodeCPU, "64")
	setDefault(&o.NodeMemory, "512Gi")
	setDefault(&o.NodePods, "110")
	setDefault(&o.GatewayClassName, DefaultGatewayClassName)
	setDefault(&o.GatewayControllerName, DefaultGatewayControllerName)
	setDefault(&o.GatewayName, DefaultGatewayName)
	setDefault(&o.GatewayNamespace, DefaultGatewayNamespace)
	setDefault(&o.PrometheusBinary, "prometheus")
	if o.StartTimeout <= 0 {
		o.StartTimeout = 90 * time.Second
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o, nil
}

func setDefault(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

func (e *Env) start(ctx context.Context) error {
	o := e.opts
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return fmt.Errorf("devenv: %w", err)
	}
	// A fresh cluster each time: new certificates and ports make old data useless.
	for _, d := range []string{"pki", "etcd-data", "prometheus-data", "certs"} {
		if err := os.RemoveAll(filepath.Join(o.Dir, d)); err != nil {
			return fmt.Errorf("devenv: clean %s: %w", d, err)
		}
	}
	if err := checkAssets(o.AssetsDir); err != nil {
		return err
	}
	p, err := newPKI(filepath.Join(o.Dir, "pki"))
	if err != nil {
		return fmt.Errorf("devenv: %w", err)
	}
	e.pki = p

	type step struct {
		name string
		run  func(context.Context) error
	}
	steps := []step{
		{PartEtcd, e.startEtcd},
		{PartAPIServer, e.startAPIServer},
		{"crds", e.installCRDs},
		{PartControllerManager, e.startControllerManager},
		{PartScheduler, e.startScheduler},
		{PartKwok, e.startKwok},
	}
	if o.GPUNodes > 0 {
		steps = append(steps, step{"gpu-nodes", e.createNodes})
	}
	if !o.NoGateway {
		steps = append(steps, step{PartTraefik, e.startGateway})
	}
	if o.WithPrometheus {
		steps = append(steps, step{PartPrometheus, e.startPrometheus})
	}
	for _, s := range steps {
		began := time.Now()
		if err := e.runStep(ctx, s.name, s.run); err != nil {
			return fmt.Errorf("devenv: %w", err)
		}
		took := time.Since(began)
		e.mu.Lock()
		e.timings = append(e.timings, PartTiming{Part: s.name, Took: took})
		e.mu.Unlock()
		e.log.Info("Ready", "part", s.name, "took", took.Round(time.Millisecond).String())
	}
	// A part that was ready and died while later steps ran is reported here; from now on
	// through Failed.
	e.mu.Lock()
	e.started = true
	parts := append([]*Process(nil), e.parts...)
	e.mu.Unlock()
	for _, p := range parts {
		if !p.Running() {
			return fmt.Errorf("devenv: %w", p.exitError(p.ExitErr()))
		}
	}
	return nil
}

// maxPortAttempts is how often a part is started with fresh ports when its port was taken.
const maxPortAttempts = 3

// runStep runs one start step, again with fresh ports when the part's port was taken.
func (e *Env) runStep(ctx context.Context, name string, run func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := run(ctx)
		if err == nil || !errors.Is(err, errPortInUse) || attempt == maxPortAttempts {
			return err
		}
		e.log.Info("Port taken, retrying with new ports", "part", name, "attempt", attempt)
		e.forget(name)
	}
}

// forget stops a part that failed to start and drops it, so that it can be launched again.
func (e *Env) forget(name string) {
	e.mu.Lock()
	p := e.byName[name]
	delete(e.byName, name)
	for i, q := range e.parts {
		if q == p {
			e.parts = append(e.parts[:i], e.parts[i+1:]...)
			break
		}
	}
	e.mu.Unlock()
	if p != nil {
		_ = p.Kill()
	}
}

// failures returns the channel of unexpected exits, making it on first use.
func (e *Env) failures() chan error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failed == nil {
		e.failed = make(chan error, 1)
	}
	return e.failed
}

// Failed receives an *ExitError when a part or a companion exits while nothing asked it to
// stop: it crashed, or gave up (a bad flag, a missing file). Only the first such exit is
// delivered; exits asked for by Process.Stop, Kill, Restart or Env.Stop are not reported. A
// command that runs the environment selects on it beside its own work, so that a dead part
// ends the command with an error naming the part, its exit status and the tail of its log.
func (e *Env) Failed() <-chan error { return e.failures() }

// partExited delivers an unexpected exit to Failed once Start has finished, unless the
// environment is stopping.
func (e *Env) partExited(p *Process, err error) {
	ch := e.failures()
	e.mu.Lock()
	report := e.started && !e.stopped
	e.mu.Unlock()
	if !report {
		return
	}
	exitErr := p.exitError(err)
	e.log.Info("Part exited unexpectedly", "part", p.Name(), "status", exitStatus(err), "log", p.LogPath())
	select {
	case ch <- exitErr:
	default: // an earlier exit is already waiting; the first one tells the story
	}
}

// exitStatus is how a run ended, for logs.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// launch starts a part's process and registers it for Stop.
func (e *Env) launch(name string, argv []string) (*Process, error) {
	return e.launchEnv(name, argv, nil)
}

// launchEnv is launch with env added to the part's environment.
func (e *Env) launchEnv(name string, argv, env []string) (*Process, error) {
	p, err := newProcess(name, e.opts.Dir, argv, env)
	if err != nil {
		return nil, err
	}
	p.onExit = e.partExited
	if err := p.start(true); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.parts = append(e.parts, p)
	e.byName[name] = p
	e.mu.Unlock()
	return p, nil
}

// StartProcess starts a companion program (the controller, the fleet simulator) in its own
// process group with its stdout and stderr in <Dir>/<name>.log. argv[0] is the program (a path,
// or a name looked up in PATH); env is added to this process's environment (KUBECONFIG is set
// to Env.Kubeconfig() unless env sets it). Stop stops it before the cluster.
func (e *Env) StartProcess(name string, argv []string, env []string) (*Process, error) {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return nil, fmt.Errorf("devenv: start %s: environment is stopped", name)
	}
	if _, taken := e.byName[name]; taken {
		e.mu.Unlock()
		return nil, fmt.Errorf("devenv: start %s: a process of that name already runs here", name)
	}
	e.mu.Unlock()
	full := append([]string{"KUBECONFIG=" + e.kubeconfig}, env...)
	p, err := newProcess(name, e.opts.Dir, argv, full)
	if err != nil {
		return nil, fmt.Errorf("devenv: %w", err)
	}
	p.onExit = e.partExited
	if err := p.start(true); err != nil {
		return nil, fmt.Errorf("devenv: %w", err)
	}
	e.mu.Lock()
	e.processes = append(e.processes, p)
	e.byName[name] = p
	e.mu.Unlock()
	return p, nil
}

// Process returns the process of a part (a Part* constant) or of a StartProcess call by name,
// or nil.
func (e *Env) Process(name string) *Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byName[name]
}

// Processes returns every process started, companions first, then the parts in reverse start
// order (the order Stop stops them in).
func (e *Env) Processes() []*Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	var all []*Process
	for i := len(e.processes) - 1; i >= 0; i-- {
		all = append(all, e.processes[i])
	}
	for i := len(e.parts) - 1; i >= 0; i-- {
		all = append(all, e.parts[i])
	}
	return all
}

// OnStop registers f to run when the environment stops, after every process has stopped:
// for changes a companion made to the host (an address added to an interface). Functions run
// in reverse order of registration. If the environment is already stopped, f runs at once.
func (e *Env) OnStop(f func()) {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		f()
		return
	}
	e.cleanups = append(e.cleanups, f)
	e.mu.Unlock()
}

// Stop stops every process started, companions first, then Prometheus, Traefik, kwok, the scheduler,
// the controller manager, kube-apiserver and etcd, each with SIGTERM to its process group and
// SIGKILL after 10 s, then runs the functions given to OnStop. Logs and data stay in Dir.
// Calling it again does nothing.
func (e *Env) Stop() {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		e.stopped = true
		e.mu.Unlock()
		for _, p := range e.Processes() {
			if err := p.Stop(); err != nil {
				e.log.Error(err, "Stopping", "process", p.Name())
			}
		}
		e.mu.Lock()
		cleanups := e.cleanups
		e.cleanups = nil
		e.mu.Unlock()
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		e.log.Info("Stopped", "dir", e.opts.Dir)
	})
}

// Dir is the environment's folder (absolute).
func (e *Env) Dir() string { return e.opts.Dir }

// Kubeconfig is the path of an admin kubeconfig for the cluster.
func (e *Env) Kubeconfig() string { return e.kubeconfig }

// RESTConfig returns a new admin client configuration for the cluster.
func (e *Env) RESTConfig() *rest.Config { return rest.CopyConfig(e.restConfig) }

// PrometheusURL is Prometheus' base URL (http://127.0.0.1:<port>), or "" without Prometheus.
func (e *Env) PrometheusURL() string { return e.promURL }

// GatewayURL is the demo Gateway's HTTP listener, Traefik's web entry point
// (http://127.0.0.1:<port>), or "" with NoGateway. Requests for a route's hostname sent there go
// through Traefik to the pods' addresses.
func (e *Env) GatewayURL() string { return e.gatewayURL }

// TraefikURL is Traefik's own entry point (http://127.0.0.1:<port>), serving /ping and its
// Prometheus /metrics, or "" with NoGateway.
func (e *Env) TraefikURL() string { return e.traefikURL }

// Timings says how long each part took to become ready, in start order.
func (e *Env) Timings() []PartTiming {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]PartTiming(nil), e.timings...)
}

// Options returns the options the environment runs with, defaults filled in.
func (e *Env) Options() Options { return e.opts }

// DefaultCRDDirs are the CRD folders an environment installs when Options.CRDDirs is nil:
// modelship's. The Gateway API's and the InferencePool's come from their Go modules.
func DefaultCRDDirs(repoRoot string) []string {
	return []string{filepath.Join(repoRoot, "config", "crd", "bases")}
}

// Names of the listeners a command opens on the host's loopback (gateway.Reexec) before it
// re-executes itself in the environment's network namespace, for ServeHostForwards.
const (
	// ForwardAPIServer reaches kube-apiserver: kubectl from the user's shell.
	ForwardAPIServer = "kube-apiserver"
	// ForwardPrometheus reaches Prometheus' UI and API.
	ForwardPrometheus = "prometheus"
	// ForwardGateway reaches the Gateway's HTTP listener (Traefik's web entry point).
	ForwardGateway = "gateway"
)

// HostForwards are the forwards ServeHostForwards serves, in the order to give gateway.Reexec.
var HostForwards = []string{ForwardAPIServer, ForwardPrometheus, ForwardGateway}

// HostAccess is how a program in the host's network namespace reaches the environment: through
// forwarders from the host's loopback into the environment's namespace.
type HostAccess struct {
	// Kubeconfig is an admin kubeconfig whose server is the host-side address of kube-apiserver
	// (<Dir>/host.kubeconfig): export KUBECONFIG=... and kubectl works from any shell.
	Kubeconfig string
	// PrometheusURL is Prometheus on the host's loopback, or "" without Prometheus.
	PrometheusURL string
	// GatewayURL is the Gateway's HTTP listener on the host's loopback, or "" without a Gateway.
	GatewayURL string
}

// ServeHostForwards serves, until ctx ends, the host-side listeners ns holds (see HostForwards)
// into the environment: kube-apiserver, Prometheus and the Gateway; it writes the host-side
// kubeconfig. Listeners ns does not hold, and parts that do not run, are left out.
func (e *Env) ServeHostForwards(ctx context.Context, ns *gateway.Netns) (HostAccess, error) {
	var a HostAccess
	if ns == nil {
		return a, errors.New("devenv: no network namespace to forward into")
	}
	targets := []struct {
		name, url string
		set       func(hostAddr string) error
	}{
		{ForwardAPIServer, e.restConfig.Host, func(h string) error {
			a.Kubeconfig = filepath.Join(e.opts.Dir, "host.kubeconfig")
			return e.pki.writeKubeconfig(a.Kubeconfig, "https://"+h, "admin")
		}},
		{ForwardPrometheus, e.promURL, func(h string) error { a.PrometheusURL = "http://" + h; return nil }},
		{ForwardGateway, e.gatewayURL, func(h string) error { a.GatewayURL = "http://" + h; return nil }},
	}
	for _, t := range targets {
		if t.url == "" || ns.HostAddress(t.name) == "" {
			continue
		}
		u, err := url.Parse(t.url)
		if err != nil {
			return a, fmt.Errorf("devenv: forward %s: %w", t.name, err)
		}
		host, err := ns.Forward(ctx, t.name, u.Host)
		if err != nil {
			return a, fmt.Errorf("devenv: %w", err)
		}
		if err := t.set(host); err != nil {
			return a, fmt.Errorf("devenv: forward %s: %w", t.name, err)
		}
	}
	return a, nil
}
