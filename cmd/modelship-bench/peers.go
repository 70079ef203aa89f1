package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

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
// to answer its health check. With -smoke it then starts KEDA's metrics adapter and checks the
// KEDA + HPA path end to end (kedaSmoke). The scenarios of issue #14 (autoscaling against KEDA + the real
// HPA, rollouts against a Flagger Canary, Prometheus outages) build on this.
func runPeers(args []string) error {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	dir := fs.String("dir", ".work/bench/peers", "working folder")
	smoke := fs.Bool("smoke", false, "also start KEDA's metrics adapter and check that the real HPA scales a Deployment from a ScaledObject (needs CAP_NET_ADMIN: the adapter gets an address of its own on lo)")
	outage := fs.Duration("outage", 0, "with -smoke: then stop Prometheus this long and report what the HPA does")
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
	keda, err := peers.StartKEDA(ctx, env)
	if err != nil {
		return err
	}
	fmt.Printf("flagger %s answered %s after %s\n", peers.FlaggerVersion, flagger.Health, flagger.Ready.Round(1e6))
	fmt.Printf("keda-operator %s answered %s after %s\n", peers.KEDAVersion, keda.Health, keda.Ready.Round(1e6))
	fmt.Printf("flagger_ready_s=%.1f keda_operator_ready_s=%.1f\n", flagger.Ready.Seconds(), keda.Ready.Seconds())
	if *smoke {
		return kedaSmoke(ctx, env, keda, *outage)
	}
	return nil
}
