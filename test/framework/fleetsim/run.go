package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/fleet"
)

// Config is the simulator's configuration.
type Config struct {
	// Trace is the request log to replay against every routed ModelServer.
	Trace fleet.Trace
	// Replay shapes the replay (speed, rate scale, seed; it always loops).
	Replay fleet.ReplayOptions
	// Fleet configures the model.
	Fleet fleet.Config
	// Pods says how pods become replicas.
	Pods PodOptions
	// Listen is the HTTP address of /metrics and the warm-up endpoints.
	Listen string
	// SyncInterval between reads of the cluster. Zero means 1s.
	SyncInterval time.Duration
	// TickInterval between advances of the fleet. Zero means 50ms, 10ms when pods are served.
	TickInterval time.Duration
	// LogInterval between status lines. Zero means 10s.
	LogInterval time.Duration
	// ServePods serves every simulated pod on its own podIP and port (PodServers), as the
	// vLLM process of a real pod would; their addresses must be local (a network namespace's
	// 198.18.128.0/17, or loopback).
	ServePods bool
	// PodListen binds the pods' listeners; nil is GuardedListen.
	PodListen ListenFunc
	// Gateway, when its URL is set, sends the trace's requests as HTTP requests to a real
	// Gateway's listener instead of routing them in the fleet by the HTTPRoutes' weights; the
	// simulator then neither reads weights nor writes route status (the Gateway does both),
	// and serves the pods (ServePods is implied). The counts of answers are on /metrics
	// (MetricLoadResponses, and fleet.MetricGatewayResponses as before, with the codes
	// CodeClientError and CodeDropped besides HTTP's), at GET /loadgen/responses and in the
	// status lines.
	Gateway LoadOptions
}

// NewScheme knows pods, ModelServers and HTTPRoutes.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, gatewayv1.Install} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	return s, nil
}

// Run runs the simulator in real time until ctx ends: it watches the cluster, replays the trace
// against the routed ModelServers, advances the fleet and serves HTTP.
func Run(ctx context.Context, restCfg *rest.Config, cfg Config, log logr.Logger) error {
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = time.Second
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 50 * time.Millisecond
		if cfg.ServePods || cfg.Gateway.URL != "" {
			// Pods answer as the fleet advances: finer ticks, answers closer to their time.
			cfg.TickInterval = 10 * time.Millisecond
		}
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = 10 * time.Second
	}
	cfg.Replay.Loop = true
	replay, err := fleet.NewReplay(cfg.Trace, cfg.Replay)
	if err != nil {
		return fmt.Errorf("starting the replay: %w", err)
	}
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	start := time.Now()
	f := fleet.New(cfg.Fleet, start)
	var load *LoadGenerator
	var extra []prometheus.Collector
	if cfg.Gateway.URL != "" {
		if cfg.Gateway.OnResponse == nil {
			cfg.Gateway.OnResponse = f.CountGatewayResponse
		}
		if load, err = NewLoadGenerator(cfg.Gateway); err != nil {
			return err
		}
		cfg.ServePods = true
		extra = append(extra, load)
	}
	handler, err := NewHandler(f, time.Now, extra...)
	if err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		log.Info("Serving metrics and warm-up checks", "address", ln.Addr().String())
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving HTTP: %w", err)
		}
		return nil
	})); err != nil {
		return fmt.Errorf("adding the HTTP server: %w", err)
	}

	syncer := &Syncer{Client: mgr.GetClient(), Fleet: f, Pods: cfg.Pods, Now: time.Now, RealGateway: load != nil}
	if cfg.ServePods {
		syncer.Servers = &PodServers{Fleet: f, Now: time.Now, Listen: cfg.PodListen, Log: log.WithName("pods")}
	}
	loop := &loop{syncer: syncer, fleet: f, replay: replay, cfg: cfg, start: start, log: log, cache: mgr.GetCache(), load: load}
	if err := mgr.Add(manager.RunnableFunc(loop.run)); err != nil {
		return fmt.Errorf("adding the simulation loop: %w", err)
	}
	log.Info("Starting the fleet simulator", "gateway", cfg.Gateway.URL, "servePods", cfg.ServePods, "requests", len(cfg.Trace.Requests),
		"traceDuration", cfg.Trace.Duration(), "cycle", replay.CycleDuration(),
		"speed", cfg.Replay.Speed, "rateScale", cfg.Replay.RateScale,
		"meanRPS", float64(len(cfg.Trace.Requests))*cfg.Replay.RateScale/replay.CycleDuration().Seconds())
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running: %w", err)
	}
	return nil
}

// loop advances the fleet in real time.
type loop struct {
	syncer *Syncer
	fleet  *fleet.Fleet
	replay *fleet.Replay
	cfg    Config
	start  time.Time
	log    logr.Logger
	cache  cache.Cache
	load   *LoadGenerator // nil: the fleet routes by the weights
}

// watchPods stops a pod's server as soon as the pod watch says the pod went, is terminating or
// moved (PodServers.Observe), not at the next sync: the address may be handed to a new pod.
func (l *loop) watchPods(ctx context.Context) error {
	inf, err := l.cache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	observe := func(obj any, deleted bool) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			l.syncer.Servers.Observe(pod, deleted)
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { observe(obj, false) },
		DeleteFunc: func(obj any) { observe(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	return nil
}

func (l *loop) run(ctx context.Context) error {
	if !l.cache.WaitForCacheSync(ctx) {
		return errors.New("the cache did not sync")
	}
	if l.load != nil {
		// Real requests: the replay starts now, not with a burst of the arrivals due while the
		// cache synced (the fleet's clock is only a clock here; arrivals carry no time).
		l.start = time.Now()
	}
	if l.syncer.Servers != nil {
		defer l.syncer.Servers.Close()
		if err := l.watchPods(ctx); err != nil {
			return err
		}
	}
	tick := time.NewTicker(l.cfg.TickInterval)
	defer tick.Stop()
	if l.load != nil {
		defer l.load.Wait()
	}
	var routed []string
	var nss []string
	var targets []Target
	lastSync, lastLog := time.Time{}, time.Now()
	for {
		select {
		case <-ctx.Done():
			l.log.Info("Stopping the fleet simulator")
			return nil
		case <-tick.C:
		}
		now := time.Now()
		if now.Sub(lastSync) >= l.cfg.SyncInterval {
			servers, err := l.syncer.Sync(ctx)
			if err != nil {
				l.log.Error(err, "Sync failed")
			}
			routed, nss = routed[:0], nss[:0]
			for _, s := range servers {
				nss = append(nss, s.Namespace)
				routed = append(routed, s.Name)
			}
			targets = l.syncer.Targets()
			lastSync = now
		}
		for _, a := range l.replay.Until(now.Sub(l.start)) {
			if l.load != nil {
				for _, t := range targets {
					l.load.Send(ctx, t, a)
				}
				continue
			}
			for i := range routed {
				l.fleet.Submit(nss[i], routed[i], fleet.Request{
					Arrival: l.start.Add(a.At), ContextTokens: a.ContextTokens, GeneratedTokens: a.GeneratedTokens,
				})
			}
		}
		l.fleet.Advance(now)
		if now.Sub(lastLog) >= l.cfg.LogInterval {
			for _, w := range l.fleet.TakeWindow() {
				ttft := "n/a"
				if w.HasTTFT {
					ttft = w.TTFTP95.Round(time.Millisecond).String()
				}
				l.log.Info("Fleet status", "ModelServer", w.Namespace+"/"+w.Name,
					"rps", fmt.Sprintf("%.1f", w.RPS()), "errors", w.Errors, "weights", w.Weights,
					"pods", w.Pods, "ttftP95", ttft)
			}
			if l.load != nil {
				l.log.Info("Gateway responses", "counts", FormatCounts(l.load.Counts()))
			}
			lastLog = now
		}
	}
}
