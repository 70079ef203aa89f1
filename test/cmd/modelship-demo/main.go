// Command modelship-demo shows modelship doing its job on this machine, with no cluster: it
// starts a real control plane with fake GPU nodes, Prometheus, a simulated vLLM fleet under a
// production trace, and the controller; applies a ModelServer; rolls out a good new version
// (promoted) and then a slow one (rolled back by itself), while the autoscaler follows the load.
// It prints one line every two seconds until Ctrl-C or --duration, then stops everything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/test/framework/devenv"
	"github.com/modelship/modelship/test/framework/gateway"
	"github.com/modelship/modelship/test/framework/stack"
)

const (
	namespace = "demo"
	name      = "llama"
	imageV1   = "vllm/vllm-openai:v0.10.2"
	imageGood = "vllm/vllm-openai:v0.11.0"
	imageSlow = "vllm/vllm-openai:v0.11.1-slow"
)

func main() {
	dir := flag.String("dir", ".work/demo", "folder for the logs and data of every part")
	duration := flag.Duration("duration", 0, "stop this long after everything is up, with success (0: run until Ctrl-C)")
	speed := flag.Float64("speed", 10, "trace replay speed (10: the hour-long trace in 6 minutes)")
	rate := flag.Float64("rate-scale", 0.5, "trace rate multiplier")
	nodes := flag.Int("gpu-nodes", 2, "fake GPU nodes (8 GPUs each)")
	trace := flag.String("trace", "", "request trace to replay, TIMESTAMP,ContextTokens,GeneratedTokens (default: "+stack.DefaultTrace+")")
	simulated := flag.Bool("simulated-gateway", false, "the fleet simulator splits the requests by the route's weights itself (the old mode) instead of sending them through Traefik")
	flag.Parse()
	// Everything runs in a network namespace of its own, where the pods' addresses exist; the
	// parent keeps listeners on this machine's loopback for kubectl, Prometheus and the Gateway.
	ns, code, err := gateway.Reexec(devenv.HostForwards...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "modelship-demo:", err)
		os.Exit(1)
	}
	if ns == nil {
		os.Exit(code) // the demo ran in its namespace and ended with code
	}
	if err := run(ns, *dir, *trace, *duration, *speed, *rate, *nodes, *simulated); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "modelship-demo:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

func run(ns *gateway.Netns, dir, trace string, duration time.Duration, speed, rate float64, nodes int, simulated bool) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	log := funcr.New(func(_, args string) { fmt.Printf("    %s %s\n", time.Now().Format("15:04:05"), args) }, funcr.Options{})
	ctrl.SetLogger(logr.Discard())
	say("Starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (%d GPU nodes), Prometheus, the fleet simulator and the controller; logs in %s", nodes, abs)
	s, err := stack.Start(ctx, stack.Options{
		Dir: abs, Trace: trace, Speed: speed, RateScale: rate, GPUNodes: nodes, Logger: log,
		Profiles:         []string{"revision=v0.11.1-slow:latency=3.0"},
		SimulatedGateway: simulated,
	})
	if err != nil {
		return err
	}
	defer func() {
		say("Stopping everything")
		s.Stop()
	}()
	host, err := s.Env.ServeHostForwards(ctx, ns)
	if err != nil {
		return err
	}
	o := s.Env.Options()
	if simulated {
		say("The Gateway is played by the fleet simulator (--simulated-gateway): it splits the requests by the route's weights itself; Traefik %s (GatewayClass %s) runs but serves nothing", gateway.Version, o.GatewayClassName)
	} else {
		say("The Gateway is Traefik %s (GatewayClass %s, controller %s): every request of the trace goes through it to the pods' own addresses (%s, in this demo's network namespace), each pod served by the fleet simulator",
			gateway.Version, o.GatewayClassName, o.GatewayControllerName, devenv.PodCIDR)
	}
	say("Ready. From your shell: export KUBECONFIG=%s", host.Kubeconfig)
	say("Prometheus: %s   Gateway: curl -H 'Host: llm.local' %s/v1/models", host.PrometheusURL, host.GatewayURL)
	q, err := metrics.NewPrometheus(metrics.Config{URL: s.Env.PrometheusURL(), Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := s.Client.Create(ctx, stack.ModelServer(namespace, name, imageV1)); err != nil {
		return fmt.Errorf("applying the ModelServer: %w", err)
	}
	say("Applied ModelServer %s/%s running %s; the simulator replays the Azure LLM trace at %gx speed", namespace, name, imageV1, speed)
	// --duration counts from here, so that a first run's builds do not eat the story. It ends
	// the loop between two lines, never a request half-way.
	var end <-chan time.Time
	if duration > 0 {
		timer := time.NewTimer(duration)
		defer timer.Stop()
		end = timer.C
	}
	err = watch(ctx, s.Client, q, s.Env.Failed(), end)
	if errors.Is(err, errDurationReached) {
		say("--duration %s reached", duration)
		return nil
	}
	return err
}

// errDurationReached ends watch when --duration has passed.
var errDurationReached = errors.New("duration reached")

// watch prints the state every two seconds and drives the story: a good release, then a slow
// one. A part of the stack that exits (failed) ends it with that part's error and log; end (nil
// for never) ends it with errDurationReached.
func watch(ctx context.Context, c client.Client, q metrics.Querier, failed <-chan error, end <-chan time.Time) error {
	stage := 0
	var healthySince time.Time
	fmt.Println(stack.Header())
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		snap, err := stack.Observe(ctx, c, q, namespace, name)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		fmt.Println(snap.Line())
		if snap.Phase == v1alpha1.PhaseHealthy || snap.Phase == v1alpha1.PhaseRolledBack {
			if healthySince.IsZero() {
				healthySince = time.Now()
			}
		} else {
			healthySince = time.Time{}
		}
		settled := !healthySince.IsZero() && time.Since(healthySince) > 30*time.Second
		switch {
		case stage == 0 && settled:
			stage++
			say("Releasing %s (a good version): watch it warm up, take 10%%, 25%%, 50%% of the traffic, then promote", imageGood)
			if err := setImage(ctx, c, imageGood); err != nil {
				return err
			}
			healthySince = time.Time{}
		case stage == 1 && settled:
			stage++
			say("Releasing %s (3x slower time to first token): analysis should roll it back by itself", imageSlow)
			if err := setImage(ctx, c, imageSlow); err != nil {
				return err
			}
			healthySince = time.Time{}
		case stage == 2 && snap.Phase == v1alpha1.PhaseRolledBack:
			stage++
			ms := &v1alpha1.ModelServer{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ms); err == nil && len(ms.Status.History) > 0 {
				say("Rolled back: %s", ms.Status.History[0].Reason)
			}
			say("The stable version kept serving. The autoscaler keeps following the trace's load; Ctrl-C to stop")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-failed:
			return fmt.Errorf("a part of the demo stopped, so the story cannot go on: %w", err)
		case <-end:
			return errDurationReached
		case <-t.C:
		}
	}
}

func setImage(ctx context.Context, c client.Client, image string) error {
	ms := &v1alpha1.ModelServer{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ms); err != nil {
		return err
	}
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Template.Spec.Containers[0].Image = image
	return c.Patch(ctx, ms, patch)
}
