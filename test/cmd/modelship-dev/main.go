// Command modelship-dev runs modelship's local development environment: a real Kubernetes
// control plane with fake GPU nodes (kwok), the Gateway API and modelship CRDs, Traefik serving
// the demo Gateway, and Prometheus, all as processes on 127.0.0.1 of a network namespace of
// their own (it re-executes itself there: root is needed), with forwarders from the host's
// loopback for kubectl, Prometheus and the Gateway.
//
//	modelship-dev up [--dir .work/env] [--gpu-nodes 2] [--gpus-per-node 8] [--prometheus=true]
//
// It prints the kubeconfig path, waits for Ctrl-C and stops everything it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/modelship/modelship/test/framework/devenv"
	"github.com/modelship/modelship/test/framework/gateway"
)

// companion starts one more program in the environment (the controller, the fleet simulator)
// once the cluster is up; it uses env.StartProcess so that Stop ends it too.
type companion func(ctx context.Context, env *devenv.Env) error

// companions are started in order after the environment. The demo adds the controller and the
// fleet simulator here (the simulator's metrics address goes to env.SetScrapeTargets).
var companions []companion

func main() {
	if len(os.Args) < 2 || os.Args[1] != "up" {
		fmt.Fprintln(os.Stderr, "usage: modelship-dev up [--dir .work/env] [--gpu-nodes 2] [--gpus-per-node 8] [--gpu-product NAME] [--prometheus=true] [--scrape host:port,...] [--crds DIR,...] [--assets DIR]")
		os.Exit(2)
	}
	ns, code, err := gateway.Reexec(devenv.HostForwards...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "modelship-dev:", err)
		os.Exit(1)
	}
	if ns == nil {
		os.Exit(code) // the program ran in its namespace and ended with code
	}
	if err := up(ns, os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "modelship-dev:", err)
		os.Exit(1)
	}
}

func up(ns *gateway.Netns, args []string) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	opts := devenv.Options{}
	var scrape, crds string
	fs.StringVar(&opts.Dir, "dir", ".work/env", "folder for logs, certificates, kubeconfig and data")
	fs.StringVar(&opts.AssetsDir, "assets", "", "control plane binaries (default: hack/controlplane.sh's cache)")
	fs.IntVar(&opts.GPUNodes, "gpu-nodes", 2, "fake GPU nodes")
	fs.IntVar(&opts.GPUsPerNode, "gpus-per-node", devenv.DefaultGPUsPerNode, "nvidia.com/gpu per node")
	fs.StringVar(&opts.GPUProduct, "gpu-product", devenv.DefaultGPUProduct, "nvidia.com/gpu.product label of the nodes")
	fs.BoolVar(&opts.WithPrometheus, "prometheus", true, "run Prometheus (hack/prometheus.sh installs it)")
	fs.StringVar(&scrape, "scrape", "", "comma-separated host:port targets for Prometheus")
	fs.StringVar(&crds, "crds", "", "comma-separated CRD folders applied after the Gateway API's (default: config/crd/bases)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if scrape != "" {
		opts.PrometheusScrapeTargets = strings.Split(scrape, ",")
	}
	if crds != "" {
		opts.CRDDirs = strings.Split(crds, ",")
	}
	opts.Logger = funcr.New(func(prefix, args string) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), args)
	}, funcr.Options{})

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	began := time.Now()
	env, err := devenv.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer env.Stop()
	for _, c := range companions {
		if err := c(ctx, env); err != nil {
			return err
		}
	}
	host, err := env.ServeHostForwards(ctx, ns)
	if err != nil {
		return err
	}
	printSummary(env, host, time.Since(began))
	select {
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "\nStopping...")
		return nil
	case err := <-env.Failed():
		return fmt.Errorf("stopping everything: %w", err)
	}
}

func printSummary(env *devenv.Env, host devenv.HostAccess, took time.Duration) {
	fmt.Printf("\nmodelship dev environment is up (%s), in a network namespace of its own:\n", took.Round(time.Millisecond))
	for _, t := range env.Timings() {
		fmt.Printf("  %-24s ready in %s\n", t.Part, t.Took.Round(time.Millisecond))
	}
	fmt.Printf("\nFrom this machine's shell (forwarded from 127.0.0.1 into the namespace):\n")
	fmt.Printf("kubeconfig: %s\n", host.Kubeconfig)
	if host.PrometheusURL != "" {
		fmt.Printf("prometheus: %s\n", host.PrometheusURL)
	}
	if host.GatewayURL != "" {
		fmt.Printf("gateway:    %s (Traefik %s, GatewayClass %s)\n", host.GatewayURL, gateway.Version, env.Options().GatewayClassName)
	}
	fmt.Printf("logs:       %s/*.log\n\n", env.Dir())
	fmt.Printf("  export KUBECONFIG=%s\n\nPress Ctrl-C to stop everything.\n", host.Kubeconfig)
}
