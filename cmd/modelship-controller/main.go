// Command modelship-controller runs the modelship controller: ModelServers served as blue/green
// Deployments behind a Gateway API HTTPRoute, rolled out on Prometheus analysis and autoscaled.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/cmd/modelship-controller/manager"
	"github.com/modelship/modelship/internal/controller"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/notify"
	"github.com/modelship/modelship/internal/signals"
	"github.com/modelship/modelship/internal/warmup"
	"github.com/modelship/modelship/internal/window"
)

// config is the controller's command line.
type config struct {
	metricsAddr, probeAddr string
	metricsSecure          bool
	leaderElect            bool
	leaderElectNamespace   string
	workers                int
	watchNamespaces        string
	prometheus             metrics.Config
	warmupURL              string
	warmupTimeout          time.Duration
	signalInterval         time.Duration
	scrapeInterval         time.Duration
	queryPolicy            string
	gatewayMetricsNS       string
	gpuExporter            signals.GPUExporter
	notifyURLs             string
	notifyTimeout          time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.metricsAddr, "metrics-bind-address", ":8443", "Address of the controller's own metrics endpoint (0 disables it).")
	flag.BoolVar(&c.metricsSecure, "metrics-secure", true, "Serve /metrics over HTTPS to authenticated and authorized clients only (a TokenReview and a SubjectAccessReview for GET /metrics); false serves plain HTTP to anyone.")
	flag.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	flag.BoolVar(&c.leaderElect, "leader-elect", false, "Elect a leader so that only one replica acts (the manifests and the chart turn it on).")
	flag.StringVar(&c.leaderElectNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the controller's own namespace in a cluster; required outside one).")
	flag.StringVar(&c.watchNamespaces, "watch-namespaces", "", "Comma-separated namespaces to serve ModelServers in (namespaced mode: the caches and the RBAC cover only these); empty serves all.")
	flag.IntVar(&c.workers, "max-concurrent-reconciles", controller.DefaultWorkers, "How many ModelServers are reconciled at once.")
	flag.StringVar(&c.prometheus.URL, "prometheus-url", "", "Prometheus HTTP API URL for analysis and autoscaling (e.g. http://prometheus.monitoring:9090).")
	flag.StringVar(&c.prometheus.BearerTokenFile, "prometheus-bearer-token-file", "", "File holding a bearer token for Prometheus, re-read on every query.")
	flag.StringVar(&c.prometheus.CAFile, "prometheus-ca-file", "", "CA bundle to verify Prometheus's TLS certificate.")
	flag.DurationVar(&c.prometheus.Timeout, "prometheus-timeout", 10*time.Second, "Timeout of one Prometheus query.")
	flag.IntVar(&c.prometheus.MaxConcurrent, "prometheus-max-concurrent-queries", metrics.DefaultMaxConcurrent, "Most Prometheus queries in flight at once.")
	flag.StringVar(&c.warmupURL, "warmup-url-template", "", "Where warm-up checks go instead of http://<podIP>:<port>/<path>: {namespace}, {pod}, {port} and {path} are substituted.")
	flag.DurationVar(&c.warmupTimeout, "warmup-timeout", 3*time.Second, "Timeout of one warm-up check.")
	flag.DurationVar(&c.signalInterval, "autoscaling-signal-interval", 10*time.Second, "How often the built-in autoscaling signals are fetched (one query per signal for all ModelServers).")
	flag.DurationVar(&c.scrapeInterval, "prometheus-scrape-interval", window.DefaultScrapeInterval, "How often Prometheus scrapes the model server pods (default of spec.rollout.analysis.scrapeInterval): analysis windows span at least four scrapes.")
	flag.StringVar(&c.gatewayMetricsNS, "gateway-metrics-namespace", "", "The namespace label of the gateway's own Prometheus series (the namespace Traefik runs in, as its scrape target labels them): the gateway metrics (spec.rollout.analysis.gateway, the autoscaling metric gateway) read that target's series only; empty refuses them.")
	flag.StringVar(&c.queryPolicy, "query-policy", string(metrics.DefaultQueryPolicy), "Which PromQL ModelServers may have the controller run with its Prometheus credentials: namespaced (presets, built-in signals, and custom queries whose every selector has namespace=\"{{.Namespace}}\" as they run; no external metrics); presets (presets and built-in signals only); any (every query and external metric: whoever writes a ModelServer then reads anything the controller's credentials read, an opt-in for clusters of one team).")
	flag.StringVar(&c.gpuExporter.Namespace, "gpu-exporter-namespace", signals.DefaultGPUExporter.Namespace, "Namespace label of the GPU exporter's scrape targets (dcgm-exporter's namespace): only its series' exported_namespace/exported_pod name the pod holding a GPU. Empty: not checked.")
	flag.StringVar(&c.gpuExporter.Job, "gpu-exporter-job", signals.DefaultGPUExporter.Job, "Job label of the GPU exporter's scrape targets, checked besides --gpu-exporter-namespace when set. With both empty, exported_* labels are never read.")
	opts := zap.Options{}
	flag.StringVar(&c.notifyURLs, "notify-url", "", "Comma-separated webhook URLs (http or https) that every ModelServer's rollout events and scaling limits are posted to as JSON, with a Slack-compatible text field (besides each ModelServer's spec.notifications).")
	flag.DurationVar(&c.notifyTimeout, "notify-timeout", notify.DefaultTimeout, "Timeout of one notification webhook call and of one rollout gate call (each is retried).")
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "modelship-controller:", err)
		os.Exit(1)
	}
}

func splitNamespaces(s string) []string {
	var out []string
	for _, ns := range strings.Split(s, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// LeaderElectionID names the Lease the replicas compete for.
const LeaderElectionID = "modelship-controller.serving.modelship.dev"

func run(c config) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(gatewayv1.Install(scheme))
	utilruntime.Must(inferencev1.Install(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 manager.MetricsServerOptions(c.metricsAddr, c.metricsSecure),
		HealthProbeBindAddress:  c.probeAddr,
		LeaderElection:          c.leaderElect,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: c.leaderElectNamespace,
		Cache:                   manager.CacheOptions(splitNamespaces(c.watchNamespaces)...),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	policy, err := metrics.ParseQueryPolicy(c.queryPolicy)
	if err != nil {
		return fmt.Errorf("--query-policy: %w", err)
	}
	if c.scrapeInterval <= 0 {
		return fmt.Errorf("--prometheus-scrape-interval must be positive, got %s", c.scrapeInterval)
	}
	apis, err := signals.NewKubeMetricsAPIs(mgr.GetConfig())
	if err != nil {
		return err
	}
	r := &controller.ModelServerReconciler{
		Client:         mgr.GetClient(),
		LiveReader:     mgr.GetAPIReader(),
		Workers:        c.workers,
		Scheme:         scheme,
		Recorder:       mgr.GetEventRecorder("modelship"),
		Prober:         warmup.NewHTTPProber(c.warmupTimeout, c.warmupURL),
		MetricsAPIs:    apis,
		ScrapeInterval: c.scrapeInterval,
		QueryPolicy:    policy,
		Now:            time.Now,

		GatewayMetricsNamespace: c.gatewayMetricsNS,
	}
	sender := notify.NewSender(splitNamespaces(c.notifyURLs), nil, ctrl.Log.WithName("notify"))
	sender.Client = warmup.NewClient(c.notifyTimeout)
	r.Notifier = sender
	if c.prometheus.URL != "" {
		q, err := metrics.NewPrometheus(c.prometheus)
		if err != nil {
			return fmt.Errorf("prometheus client: %w", err)
		}
		r.Prometheus = q
		sig := signals.DefaultQueries()
		sig.GPUExporter = c.gpuExporter
		r.Signals = signals.NewSnapshotCache(q, sig, c.signalInterval)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("ready check: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}
