package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/testenv"
	"github.com/modelship/modelship/test/bench/scalebench"
	"github.com/modelship/modelship/test/framework/devenv"
	"github.com/modelship/modelship/test/framework/stack"
)

func init() {
	register("scale", "many ModelServers and pods on one controller: steady state, reconcile latency, API requests, writes, Prometheus queries, memory", runScale)
}

const (
	scaleNamespace = "scale"
	scaleImageV1   = "vllm/vllm-openai:v0.10.2"
	scaleImageV2   = "vllm/vllm-openai:v0.11.0"
	// signalInterval is the controller's --autoscaling-signal-interval in the bench.
	signalInterval = 10 * time.Second
)

// scaleFigures is what one size measured.
type scaleFigures struct {
	size, pods         int
	steady             time.Duration
	p50, p99           string
	reconciles         float64
	requestsPerMin     map[string]float64
	writesPerNoChange  float64
	noChangePasses     float64
	queriesPerInterval float64
	rssMiB, cpuCores   float64
	candidateCreated   []time.Duration
	window             time.Duration
}

func runScale(args []string) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	sizesFlag := fs.String("sizes", "100,1000", "ModelServer counts to measure, in increasing order (one control plane, grown from one size to the next)")
	replicas := fs.Int("replicas", 10, "pods per ModelServer")
	window := fs.Duration("window", time.Minute, "steady-state measurement window per size")
	dir := fs.String("dir", ".work/bench/scale", "working folder (logs, binaries, cluster data)")
	workers := fs.Int("workers", 4, "the controller's --max-concurrent-reconciles")
	verbose := fs.Bool("v", false, "log the environment's progress")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var sizes []int
	for _, s := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("--sizes: %q is not a positive count", s)
		}
		sizes = append(sizes, n)
	}
	sort.Ints(sizes)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	abs, err := freshDir(*dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(abs, "bin"), 0o755); err != nil {
		return err
	}
	log := logr.Discard()
	if *verbose {
		log = funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{})
	}

	maxPods := sizes[len(sizes)-1] * *replicas
	nodes := maxPods/450 + 2
	fmt.Printf("scale: starting the control plane with %d kwok nodes of 500 pods (for up to %d pods)\n", nodes, maxPods)
	env, err := devenv.Start(ctx, devenv.Options{Dir: filepath.Join(abs, "env"), GPUNodes: nodes, NodePods: "500", NoGPUTaint: true, NoTraefik: true, Logger: log})
	if err != nil {
		return err
	}
	defer env.Stop()
	prom, err := scalebench.StartPromStub()
	if err != nil {
		return err
	}
	defer prom.Close()
	fmt.Println("scale: building the controller")
	if err := stack.Build(ctx, testenv.RepoRoot(), filepath.Join(abs, "bin")); err != nil {
		return err
	}
	metricsPort, err := devenv.FreePort()
	if err != nil {
		return err
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(metricsPort)
	ctrlProc, err := env.StartProcess("controller", []string{filepath.Join(abs, "bin", "modelship-controller"),
		"--prometheus-url", prom.URL, "--prometheus-timeout", "3s",
		"--metrics-bind-address", metricsAddr, "--metrics-secure=false", "--health-probe-bind-address", "0",
		"--autoscaling-signal-interval", signalInterval.String(), "--max-concurrent-reconciles", strconv.Itoa(*workers)}, nil)
	if err != nil {
		return err
	}
	metricsURL := "http://" + metricsAddr + "/metrics"
	c, err := client.New(env.RESTConfig(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNamespace}}); err != nil {
		return err
	}

	var results []scaleFigures
	created, rolledOut := 0, 0
	for _, size := range sizes {
		f := scaleFigures{size: size, pods: size * *replicas, window: *window}
		fmt.Printf("scale: %d ModelServers (%d pods): creating %d more\n", size, f.pods, size-created)
		began := time.Now()
		for i := created; i < size; i++ {
			if err := c.Create(ctx, scaleModelServer(i, int32(*replicas))); err != nil {
				return fmt.Errorf("creating ModelServer %d: %w", i, err)
			}
		}
		created = size
		// The ModelServers rolled out at a smaller size stay in their rollout (analysis has no
		// data from the stub): the others must all be Healthy.
		if err := waitHealthy(ctx, c, size-rolledOut, 20*time.Minute, ctrlProc); err != nil {
			return err
		}
		f.steady = time.Since(began)
		fmt.Printf("scale: %d ModelServers Healthy %s after the first was created\n", size, f.steady.Round(time.Second))

		// Steady state: what the controller does when nothing changes.
		time.Sleep(15 * time.Second) // let the last status writes and requeues pass
		s0, err := scalebench.ScrapeMetrics(ctx, metricsURL)
		if err != nil {
			return err
		}
		q0 := prom.Queries()
		time.Sleep(*window)
		s1, err := scalebench.ScrapeMetrics(ctx, metricsURL)
		if err != nil {
			return err
		}
		q1 := prom.Queries()
		f.requestsPerMin = map[string]float64{}
		before := s0.ByLabel("rest_client_requests_total", "method")
		for m, v := range s1.ByLabel("rest_client_requests_total", "method") {
			if d := (v - before[m]) / window.Minutes(); d > 0 {
				f.requestsPerMin[m] = d
			}
		}
		f.queriesPerInterval = float64(q1-q0) / (window.Seconds() / signalInterval.Seconds())
		f.rssMiB = s1.Sum("process_resident_memory_bytes", nil) / (1 << 20)
		f.cpuCores = (s1.Sum("process_cpu_seconds_total", nil) - s0.Sum("process_cpu_seconds_total", nil)) / window.Seconds()

		// No-change passes: touching an annotation makes every ModelServer reconcile with
		// nothing to do.
		s2, err := scalebench.ScrapeMetrics(ctx, metricsURL)
		if err != nil {
			return err
		}
		for i := 0; i < size; i++ {
			if err := touch(ctx, c, i); err != nil {
				return err
			}
		}
		time.Sleep(15 * time.Second)
		s3, err := scalebench.ScrapeMetrics(ctx, metricsURL)
		if err != nil {
			return err
		}
		match := map[string]string{"controller": "modelserver"}
		f.noChangePasses = s3.Sum("controller_runtime_reconcile_total", match) - s2.Sum("controller_runtime_reconcile_total", match)
		writes := 0.0
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "APPLY"} {
			writes += s3.Sum("rest_client_requests_total", map[string]string{"method": m}) - s2.Sum("rest_client_requests_total", map[string]string{"method": m})
		}
		f.writesPerNoChange = writes / max(f.noChangePasses, 1)
		h := s3.HistogramOf("controller_runtime_reconcile_time_seconds").Minus(s0.HistogramOf("controller_runtime_reconcile_time_seconds"))
		f.p50, f.p99, f.reconciles = h.Quantile(0.5), h.Quantile(0.99), h.Count

		// A template change: how long until the candidate's Deployment exists.
		for i := 0; i < 5 && i*10+8 < size; i++ {
			d, err := timeToCandidate(ctx, c, i*10+8)
			if err != nil {
				return err
			}
			f.candidateCreated = append(f.candidateCreated, d)
			rolledOut++
		}
		results = append(results, f)
		printScale(f)
	}
	printScaleSummary(results)
	return nil
}

// scaleModelServer is the i-th ModelServer of the mix: 6 in 10 with fixed replicas, 2 in 10
// autoscaled (whose signals have no data from the stub: they hold), 2 in 10 rolled out later.
// Its pods request no GPU: the bench measures the controller, not the GPU fit.
func scaleModelServer(i int, replicas int32) *v1alpha1.ModelServer {
	ms := stack.ModelServer(scaleNamespace, fmt.Sprintf("ms-%04d", i), scaleImageV1)
	ms.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	ms.Spec.Template.Spec.NodeSelector = nil
	ms.Spec.Template.Spec.Tolerations = nil
	ms.Spec.Rollout.Warmup = nil
	ms.Spec.Rollout.StepDuration = v1alpha1.Duration{Duration: time.Hour}
	ms.Spec.Replicas = ptr.To(replicas)
	ms.Spec.Autoscaling = nil
	if i%10 == 6 || i%10 == 7 {
		ms.Spec.Replicas = nil
		ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(replicas)), MaxReplicas: replicas + 2}
	}
	return ms
}

func waitHealthy(ctx context.Context, c client.Client, size int, timeout time.Duration, ctrl *devenv.Process) error {
	deadline := time.Now().Add(timeout)
	last := time.Time{}
	for {
		var list v1alpha1.ModelServerList
		if err := c.List(ctx, &list, client.InNamespace(scaleNamespace)); err != nil {
			return err
		}
		healthy := 0
		for _, ms := range list.Items {
			if ms.Status.Phase == v1alpha1.PhaseHealthy && ms.Status.ObservedGeneration >= ms.Generation {
				healthy++
			}
		}
		if healthy >= size {
			return nil
		}
		if time.Since(last) > 30*time.Second {
			fmt.Printf("scale:   %d/%d Healthy\n", healthy, size)
			last = time.Now()
		}
		if !ctrl.Running() {
			return fmt.Errorf("the controller exited; see %s", ctrl.LogPath())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d/%d ModelServers Healthy after %s", healthy, size, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func touch(ctx context.Context, c client.Client, i int) error {
	ms := &v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Namespace: scaleNamespace, Name: fmt.Sprintf("ms-%04d", i)}}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"bench.modelship.dev/touched":%q}}}`, time.Now().Format(time.RFC3339Nano))
	return c.Patch(ctx, ms, client.RawPatch("application/merge-patch+json", patch))
}

// timeToCandidate changes the image of ModelServer i and times until its candidate Deployment
// exists.
func timeToCandidate(ctx context.Context, c client.Client, i int) (time.Duration, error) {
	key := client.ObjectKey{Namespace: scaleNamespace, Name: fmt.Sprintf("ms-%04d", i)}
	var candidate string
	began := time.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ms := &v1alpha1.ModelServer{}
		if err := c.Get(ctx, key, ms); err != nil {
			return err
		}
		candidate = ms.DeploymentName(ms.Status.Stable.Color.Other())
		ms.Spec.Template.Spec.Containers[0].Image = scaleImageV2
		began = time.Now()
		return c.Update(ctx, ms)
	})
	if err != nil {
		return 0, err
	}
	for time.Since(began) < time.Minute {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: scaleNamespace, Name: candidate}, d); err == nil && d.Spec.Template.Spec.Containers[0].Image == scaleImageV2 {
			return time.Since(began), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("no candidate Deployment %s a minute after the template change", candidate)
}

func printScale(f scaleFigures) {
	fmt.Printf("\n== %d ModelServers, %d pods\n", f.size, f.pods)
	fmt.Printf("time to steady state (all Healthy after the first create): %s\n", f.steady.Round(time.Second))
	fmt.Printf("reconcile latency (controller_runtime_reconcile_time_seconds, %.0f reconciles): p50 %s, p99 %s\n", f.reconciles, f.p50, f.p99)
	fmt.Printf("API requests per minute at steady state, by verb: %s\n", orNone(scalebench.Verbs(f.requestsPerMin)))
	fmt.Printf("writes per no-change pass: %.2f (%.0f passes after touching every ModelServer)\n", f.writesPerNoChange, f.noChangePasses)
	fmt.Printf("Prometheus queries per %s interval: %.1f\n", signalInterval, f.queriesPerInterval)
	fmt.Printf("controller RSS %.0f MiB, CPU %.2f cores at steady state\n", f.rssMiB, f.cpuCores)
	fmt.Printf("template change to candidate Deployment: %s\n", durations(f.candidateCreated))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n/a"
	}
	parts := make([]string, 0, len(ds))
	for _, d := range ds {
		parts = append(parts, d.Round(time.Millisecond).String())
	}
	return strings.Join(parts, ", ")
}

func printScaleSummary(rs []scaleFigures) {
	fmt.Println()
	for _, f := range rs {
		total := 0.0
		for _, v := range f.requestsPerMin {
			total += v
		}
		worst := time.Duration(0)
		for _, d := range f.candidateCreated {
			worst = max(worst, d)
		}
		fmt.Printf("size=%d pods=%d steady_s=%.0f reconcile_p50=%q reconcile_p99=%q api_requests_per_min=%.0f writes_per_nochange_pass=%.2f prom_queries_per_interval=%.1f rss_mib=%.0f cpu_cores=%.2f candidate_created_max_ms=%d\n",
			f.size, f.pods, f.steady.Seconds(), f.p50, f.p99, total, f.writesPerNoChange, f.queriesPerInterval, f.rssMiB, f.cpuCores, worst.Milliseconds())
	}
	if len(rs) >= 2 {
		a, b := rs[0], rs[len(rs)-1]
		fmt.Printf("growth %d->%d ModelServers: RSS x%.2f, Prometheus queries per interval x%.2f, steady-state time x%.2f\n",
			a.size, b.size, b.rssMiB/max(a.rssMiB, 1), b.queriesPerInterval/max(a.queriesPerInterval, 0.1), b.steady.Seconds()/max(a.steady.Seconds(), 1))
	}
}
