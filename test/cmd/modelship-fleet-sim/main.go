// Command modelship-fleet-sim simulates the model-server fleet of modelship's ModelServers for
// tests without GPUs: it watches the ModelServers' pods and HTTPRoutes, replays a request trace,
// serves vLLM and DCGM metrics for every pod at /metrics and warm-up checks at
// /pods/{namespace}/{pod}/{path...}. By default it is also the data plane: it splits the
// requests by the routes' weights and accepts the routes as a Gateway would (controllerName
// modelship.dev/fleet-sim). With --gateway-url a real Gateway is: every pod is served on its
// own address (--serve-pods) and the trace's requests are sent to the Gateway's listener.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr/funcr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/modelship/modelship/test/framework/fleet"
	"github.com/modelship/modelship/test/framework/fleetsim"
)

// profiles collects repeated --profile flags.
type profiles []fleetsim.ProfileRule

func (p *profiles) String() string { return fmt.Sprint(len(*p), " profiles") }

func (p *profiles) Set(s string) error {
	r, err := fleetsim.ParseProfile(s)
	if err != nil {
		return err
	}
	*p = append(*p, r)
	return nil
}

func main() {
	var (
		tracePath string
		cfg       fleetsim.Config
		rules     profiles
		seed      uint64
		strategy  string
	)
	def := fleet.DefaultCapacity()
	flag.StringVar(&tracePath, "trace", "", "CSV request trace (TIMESTAMP,ContextTokens,GeneratedTokens)")
	flag.Float64Var(&cfg.Replay.Speed, "speed", 60, "time compression of the trace (60 replays an hour in a minute, at 60x the rate)")
	flag.Float64Var(&cfg.Replay.RateScale, "rate-scale", 1, "multiplier of the number of requests (duplicates or thins them deterministically)")
	flag.StringVar(&cfg.Listen, "listen", ":9400", "HTTP address of /metrics and /pods/{namespace}/{pod}/{path...}")
	flag.Var(&rules, "profile", `performance of a revision, repeatable: "revision=<revision or image substring>:latency=2.0,errors=0.1"`)
	flag.Uint64Var(&seed, "seed", 1, "seed of the replay's thinning and of the error draws")
	flag.DurationVar(&cfg.Pods.ColdStart, "cold-start", 30*time.Second, "model load time after a pod's containers become ready (its warm-up check fails until then)")
	flag.Float64Var(&cfg.Pods.Capacity.PrefillTokensPerSecond, "prefill-tokens-per-second", def.PrefillTokensPerSecond, "prompt throughput of a replica")
	flag.Float64Var(&cfg.Pods.Capacity.DecodeTokensPerSecond, "decode-tokens-per-second", def.DecodeTokensPerSecond, "aggregate generation throughput of a replica's full batch")
	flag.DurationVar(&cfg.Pods.Capacity.MinInterTokenLatency, "min-inter-token-latency", def.MinInterTokenLatency, "time per token of a lone sequence")
	flag.IntVar(&cfg.Pods.Capacity.MaxBatch, "max-batch", def.MaxBatch, "largest number of requests a replica runs at once")
	flag.IntVar(&cfg.Pods.Capacity.KVCacheTokens, "kv-cache-tokens", def.KVCacheTokens, "KV-cache capacity of a replica in tokens")
	flag.IntVar(&cfg.Fleet.MaxTokens, "max-tokens", 512, "cap of generated tokens per request (finished_reason=length); 0 for none")
	flag.StringVar(&strategy, "strategy", string(fleet.LeastLoaded), "pod choice within a color: least-loaded or round-robin")
	flag.DurationVar(&cfg.Fleet.Step, "step", 10*time.Millisecond, "simulation time step")
	flag.DurationVar(&cfg.SyncInterval, "sync-interval", time.Second, "real time between reads of the cluster (pods, routes); a pod's server binds at the first read that sees its podIP")
	flag.DurationVar(&cfg.TickInterval, "tick-interval", 0, "real time between advances of the simulation (0: 50ms, 10ms when pods are served)")
	flag.BoolVar(&cfg.ServePods, "serve-pods", false, "serve every simulated pod on its own podIP:port (OpenAI endpoints, /health, /metrics); the addresses must be in 127.0.0.0/8 or 198.18.0.0/15")
	flag.StringVar(&cfg.Gateway.URL, "gateway-url", "", "send the trace's requests to this Gateway listener (http://host:port) instead of routing them by the HTTPRoutes' weights; implies --serve-pods, and the simulator neither reads weights nor writes route status")
	flag.IntVar(&cfg.Gateway.Concurrency, "gateway-concurrency", 512, "most requests in flight to the Gateway per ModelServer (more are counted as dropped)")
	flag.DurationVar(&cfg.Gateway.Timeout, "gateway-timeout", 2*time.Minute, "timeout of one request to the Gateway")
	flag.BoolVar(&cfg.Gateway.Stream, "gateway-stream", false, `send requests with "stream": true and read the server-sent events`)
	verbosity := flag.Int("v", 0, "log verbosity")
	flag.Parse()
	ctrl.SetLogger(funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, time.Now().UTC().Format(time.RFC3339Nano), prefix, args)
	}, funcr.Options{Verbosity: *verbosity}))
	log := ctrl.Log.WithName("fleet-sim")

	if err := run(tracePath, seed, strategy, rules, &cfg); err != nil {
		log.Error(err, "Invalid configuration")
		os.Exit(2)
	}
	restCfg, err := config.GetConfig() // honours --kubeconfig and KUBECONFIG
	if err != nil {
		log.Error(err, "Loading the kubeconfig")
		os.Exit(1)
	}
	if err := fleetsim.Run(ctrl.SetupSignalHandler(), restCfg, cfg, log); err != nil {
		log.Error(err, "Fleet simulator failed")
		os.Exit(1)
	}
}

// run validates the flags and loads the trace into cfg.
func run(tracePath string, seed uint64, strategy string, rules profiles, cfg *fleetsim.Config) error {
	if tracePath == "" {
		return fmt.Errorf("--trace is required")
	}
	t, err := fleet.LoadTrace(tracePath)
	if err != nil {
		return err
	}
	switch s := fleet.Strategy(strings.TrimSpace(strategy)); s {
	case fleet.LeastLoaded, fleet.RoundRobin:
		cfg.Fleet.Strategy = s
	default:
		return fmt.Errorf("--strategy %q: want least-loaded or round-robin", strategy)
	}
	if cfg.Gateway.URL != "" {
		if _, err := fleetsim.NewLoadGenerator(cfg.Gateway); err != nil {
			return fmt.Errorf("--gateway-url: %w", err)
		}
	}
	cfg.Trace = t
	cfg.Replay.Seed = seed
	cfg.Fleet.Seed = seed
	cfg.Pods.Profiles = rules
	return nil
}
