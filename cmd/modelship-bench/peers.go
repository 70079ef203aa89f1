package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelship/modelship/internal/harness/devenv"
	"github.com/modelship/modelship/internal/harness/peers"
	"github.com/modelship/modelship/internal/harness/testenv"
)

func init() {
	register("peers", "the real Flagger and KEDA started on the local environment (the side-by-side scenarios are not written yet)", runPeers)
}

// runPeers starts the local environment with the peers' CRDs, then Flagger (Gateway API
// provider, the environment's Prometheus) and KEDA's operator, and reports how long each took
// to answer its health check. The scenarios of issue #14 (autoscaling against KEDA + the real
// HPA, rollouts against a Flagger Canary, Prometheus outages) build on this.
func runPeers(args []string) error {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	dir := fs.String("dir", ".work/bench/peers", "working folder")
	smoke := fs.Bool("flagger-smoke", false, "drive a Flagger Canary of a model-server Deployment through initialization, a promotion and a rollback (constant queries; KEDA is not started)")
	threshold := fs.Int("threshold", 2, "with -flagger-smoke: the Canary's analysis.threshold (failed checks that roll back)")
	outage := fs.Duration("outage", 0, "with -flagger-smoke: also stop Prometheus this long during a fourth rollout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if ok, why := peers.Built(); !ok {
		return fmt.Errorf("the peers are not built: %s", why)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	abs, err := freshDir(*dir)
	if err != nil {
		return err
	}
	root := testenv.RepoRoot()
	crds := append([]string{filepath.Join(root, "config", "crd", "bases"),
		filepath.Join(root, "third_party", "gateway-api-inference-extension-v1.6.0")}, peers.CRDDirs()...)
	env, err := devenv.Start(ctx, devenv.Options{Dir: filepath.Join(abs, "env"), GPUNodes: 2, WithPrometheus: true, CRDDirs: crds})
	if err != nil {
		return err
	}
	defer env.Stop()
	c, err := client.New(env.RESTConfig(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "keda"}}); err != nil {
		return err
	}
	flagger, err := peers.StartFlagger(ctx, env, env.PrometheusURL())
	if err != nil {
		return err
	}
	if *smoke {
		fmt.Printf("flagger %s answered %s after %s; log %s\n", peers.FlaggerVersion, flagger.Health, flagger.Ready.Round(1e6), flagger.Process.LogPath())
		return runFlaggerSmoke(ctx, env, c, *threshold, *outage)
	}
	keda, err := peers.StartKEDA(ctx, env)
	if err != nil {
		return err
	}
	fmt.Printf("flagger %s answered %s after %s\n", peers.FlaggerVersion, flagger.Health, flagger.Ready.Round(1e6))
	fmt.Printf("keda-operator %s answered %s after %s\n", peers.KEDAVersion, keda.Health, keda.Ready.Round(1e6))
	fmt.Printf("flagger_ready_s=%.1f keda_operator_ready_s=%.1f\n", flagger.Ready.Seconds(), keda.Ready.Seconds())
	return nil
}

// runFlaggerSmoke runs peers.FlaggerSmoke and prints its steps, the route and Services Flagger
// wrote, and key=value lines of the times.
func runFlaggerSmoke(ctx context.Context, env *devenv.Env, c client.Client, threshold int, outage time.Duration) error {
	report, err := peers.FlaggerSmoke(ctx, env, c, peers.SmokeOptions{Threshold: threshold, Outage: outage, Log: os.Stdout})
	if report == nil {
		return err
	}
	if report.Route != nil {
		fmt.Printf("HTTPRoute backends after initialization: %s\n", strings.Join(report.Route.Backends, " "))
	}
	for _, s := range report.Services {
		fmt.Printf("Service %s\n", s)
	}
	for _, s := range report.Steps {
		var weights []string
		for _, o := range s.History {
			if o.Route != nil && (len(weights) == 0 || weights[len(weights)-1] != fmt.Sprintf("%d/%d", o.Route.Primary, o.Route.Canary)) {
				weights = append(weights, fmt.Sprintf("%d/%d", o.Route.Primary, o.Route.Canary))
			}
		}
		status := "ok"
		if s.Note != "" {
			status = s.Note + "; " + status
		}
		if s.Err != nil {
			status = s.Err.Error()
		}
		fmt.Printf("%-10s reached %-12s after %6.1fs, route primary/canary %s: %s\n", s.Name, s.Reached, s.Took.Seconds(), strings.Join(weights, " -> "), status)
	}
	for _, s := range report.Steps {
		fmt.Printf("flagger_%s_s=%.1f ", s.Name, s.Took.Seconds())
	}
	fmt.Println()
	return err
}
