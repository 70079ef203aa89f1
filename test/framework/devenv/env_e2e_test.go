//go:build e2e

package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelship/modelship/test/framework/gateway"
)

// Run with: go test -tags e2e ./test/framework/devenv/ -run TestEnv -v
// (after hack/controlplane.sh all and hack/prometheus.sh). DEVENV_E2E_CRD_DIRS (comma-separated)
// replaces config/crd/bases, to try CRDs regenerated elsewhere.
func TestEnv(t *testing.T) {
	// The environment runs only in a network namespace of its own: the test re-executes itself
	// there (needs root; skips without).
	if !gateway.RunInNetns(t) {
		return
	}
	if missing := MissingAssets(DefaultAssetsDir()); len(missing) > 0 {
		t.Skipf("control plane assets in %s lack %s: run hack/controlplane.sh all (make controlplane)", DefaultAssetsDir(), strings.Join(missing, ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// A test target for Prometheus, exporting a series with its own job label (honor_labels).
	metrics := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# TYPE devenv_probe gauge")
		fmt.Fprintln(w, `devenv_probe{job="fleet",pod="sim-0"} 42`)
	}), ReadHeaderTimeout: time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = metrics.Serve(ln) }()
	t.Cleanup(func() { _ = metrics.Close() })

	var crdDirs []string
	if d := os.Getenv("DEVENV_E2E_CRD_DIRS"); d != "" {
		crdDirs = strings.Split(d, ",")
	}
	began := time.Now()
	env, err := Start(ctx, Options{
		CRDDirs:                 crdDirs,
		Dir:                     t.TempDir(),
		GPUNodes:                2,
		GPUsPerNode:             8,
		WithPrometheus:          true,
		PrometheusScrapeTargets: []string{ln.Addr().String()},
		Logger:                  testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	release := env.StopOnSignals()
	defer release()
	stopped := false
	defer func() {
		if !stopped {
			env.Stop()
		}
	}()
	t.Logf("environment up in %s", time.Since(began).Round(time.Millisecond))
	for _, tm := range env.Timings() {
		t.Logf("  %-24s %s", tm.Part, tm.Took.Round(time.Millisecond))
	}

	cs := kubernetes.NewForConfigOrDie(env.RESTConfig())

	t.Run("the GPU nodes are Ready with their GPUs allocatable", func(t *testing.T) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 2 {
			t.Fatalf("%d kwok nodes, want 2", len(nodes.Items))
		}
		for _, n := range nodes.Items {
			gpus := n.Status.Allocatable[GPUResource]
			if !nodeReady(&n) || gpus.Value() != 8 || n.Labels[GPUProductLabel] != DefaultGPUProduct {
				t.Errorf("node %s: ready %v, %s %s, product %q", n.Name, nodeReady(&n), GPUResource, gpus.String(), n.Labels[GPUProductLabel])
			}
		}
		// Leases keep the nodes Ready for the node lifecycle controller, as kubelets do.
		poll(t, time.Minute, "a Lease per node", func() error {
			for _, n := range nodes.Items {
				if _, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.Name, metav1.GetOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
	})

	t.Run("the Gateway API, InferencePool and modelship CRDs and the demo Gateway are installed", func(t *testing.T) {
		dyn := dynamic.NewForConfigOrDie(env.RESTConfig())
		for _, name := range []string{"httproutes.gateway.networking.k8s.io", "gateways.gateway.networking.k8s.io", "inferencepools.inference.networking.k8s.io", "modelservers.serving.modelship.dev"} {
			if _, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("CRD %s: %v", name, err)
			}
		}
		gw, err := dyn.Resource(GatewayGVR).Namespace(DefaultGatewayNamespace).Get(ctx, DefaultGatewayName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Gateway: %v", err)
		}
		if cls := gw.Object["spec"].(map[string]any)["gatewayClassName"]; cls != DefaultGatewayClassName {
			t.Errorf("Gateway class %v, want %s", cls, DefaultGatewayClassName)
		}
	})

	t.Run("in the environment's own network namespace, pods get addresses of PodCIDR, EndpointSlices list them and Traefik serves them", func(t *testing.T) {
		testDataPath(t, ctx, env, cs)
	})

	t.Run("a Deployment of 3 pods with 2 GPUs each becomes Ready and a pod beyond capacity stays Unschedulable", func(t *testing.T) {
		ns := "gpu-capacity"
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		gpuPod := func(gpus int64) corev1.PodSpec {
			// No toleration: ExtendedResourceToleration adds the one for the GPU taint.
			return corev1.PodSpec{Containers: []corev1.Container{{
				Name: "server", Image: "vllm/vllm-openai:fake",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
					Limits:   corev1.ResourceList{GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
				},
			}}}
		}
		labels := map[string]string{"app": "llm"}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](3),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: gpuPod(2)},
			},
		}
		if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, 2*time.Minute, "Deployment llm has 3 ready replicas", func() error {
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, "llm", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Status.ReadyReplicas != 3 {
				return fmt.Errorf("%d/3 ready", d.Status.ReadyReplicas)
			}
			return nil
		})
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=llm"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Spec.NodeName, "gpu-node-") || !tolerates(p.Spec.Tolerations, GPUTaintKey) {
				t.Errorf("pod %s on node %q, tolerations %v", p.Name, p.Spec.NodeName, p.Spec.Tolerations)
			}
		}

		// Fill both nodes exactly (8 pods x 2 GPUs = 16), then one more pod does not fit.
		scale(t, ctx, cs, ns, "llm", 8)
		poll(t, 2*time.Minute, "Deployment llm has 8 ready replicas", func() error {
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, "llm", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Status.ReadyReplicas != 8 {
				return fmt.Errorf("%d/8 ready", d.Status.ReadyReplicas)
			}
			return nil
		})
		extra := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "one-too-many", Namespace: ns}, Spec: gpuPod(2)}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, extra, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, time.Minute, "pod one-too-many is Unschedulable for lack of GPUs", func() error {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "one-too-many", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					if !strings.Contains(c.Message, "Insufficient nvidia.com/gpu") {
						return fmt.Errorf("unschedulable for another reason: %s", c.Message)
					}
					return nil
				}
			}
			return fmt.Errorf("phase %s, node %q, conditions %v", p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
		})
		if p, err := cs.CoreV1().Pods(ns).Get(ctx, "one-too-many", metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodPending {
			t.Fatalf("pod one-too-many: phase %v, err %v; want Pending", p.Status.Phase, err)
		}

		// Freeing 2 GPUs lets it run: it was waiting for capacity, nothing else.
		scale(t, ctx, cs, ns, "llm", 7)
		poll(t, 2*time.Minute, "pod one-too-many Ready once GPUs are freed", func() error {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "one-too-many", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("phase %s, node %q", p.Status.Phase, p.Spec.NodeName)
		})
	})

	t.Run("Prometheus is ready and scrapes the test target keeping its labels", func(t *testing.T) {
		poll(t, time.Minute, "devenv_probe{job=\"fleet\"} scraped", func() error {
			return promHas(ctx, env.PrometheusURL(), `devenv_probe{job="fleet",pod="sim-0"}`, "42")
		})
	})

	t.Run("a killed Prometheus restarts on the same address with the same targets", func(t *testing.T) {
		prom := env.Process(PartPrometheus)
		old := prom.Pid()
		killedAt := time.Now()
		if err := prom.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := prom.Restart(); err != nil {
			t.Fatal(err)
		}
		if prom.Pid() == old {
			t.Fatal("same pid after restart")
		}
		poll(t, time.Minute, "Prometheus ready again", func() error {
			return httpGetOK(env.PrometheusURL()+"/-/ready", "", nil)(ctx)
		})
		// The samples from before the kill are still there: ask for a scrape after it.
		fresh := fmt.Sprintf(`up{job=%q} and (timestamp(up{job=%q}) > %d)`, PrometheusJob, PrometheusJob, killedAt.Unix()+1)
		poll(t, time.Minute, "a scrape after the restart", func() error {
			return promHas(ctx, env.PrometheusURL(), fresh, "1")
		})
	})

	t.Run("a part that crashes on its own is reported through Failed, one killed on purpose is not", func(t *testing.T) {
		select {
		case err := <-env.Failed():
			t.Fatalf("failure reported after Prometheus was killed and restarted on purpose: %v", err)
		default:
		}
		sched := env.Process(PartScheduler)
		if err := syscall.Kill(sched.Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-env.Failed():
			var exit *ExitError
			if !errors.As(err, &exit) || exit.Name != PartScheduler || !strings.Contains(err.Error(), "signal: killed") || exit.Tail == "" {
				t.Errorf("Failed() = %v, want kube-scheduler killed by a signal with its log", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the crash of kube-scheduler was not reported within 30s")
		}
		if err := sched.Restart(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Stop leaves no process behind", func(t *testing.T) {
		companion, err := env.StartProcess("companion", []string{"sh", "-c", "sleep 300 & wait"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var pids []int
		for _, p := range env.Processes() {
			if p.Pid() == 0 || !p.Running() {
				t.Errorf("%s is not running before Stop", p.Name())
			}
			pids = append(pids, p.Pid())
		}
		if len(pids) != 8 {
			t.Errorf("%d processes, want 8 (7 parts and the companion)", len(pids))
		}
		began := time.Now()
		env.Stop()
		stopped = true
		t.Logf("stopped in %s", time.Since(began).Round(time.Millisecond))
		for _, pid := range pids {
			if !pidGone(pid) {
				t.Errorf("pid %d still runs after Stop", pid)
			}
		}
		if companion.Running() {
			t.Error("companion still running")
		}
		if _, err := env.StartProcess("late", []string{"true"}, nil); err == nil {
			t.Error("StartProcess after Stop succeeded")
		}
	})
}

// testDataPath checks the network rule and the chain kwok readiness -> EndpointSlices ->
// Traefik -> the pod's address: the test runs in a namespace that is not the host's, kwok gives
// the pods addresses of PodCIDR (never its default 10.0.0.0/24), kube-controller-manager writes
// an EndpointSlice with them, and a request sent to the Gateway reaches a server this test runs
// on each pod's address; Prometheus has Traefik's per-Service series.
func testDataPath(t *testing.T, ctx context.Context, env *Env, cs kubernetes.Interface) {
	if err := gateway.CheckNetns(); err != nil {
		t.Fatal(err)
	}
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if parent := os.Getenv(gateway.NetnsEnv); parent == "" || parent == self {
		t.Fatalf("running in network namespace %s, the host's is %q: want one of the environment's own", self, parent)
	}
	t.Logf("network namespace %s (the host's: %s)", self, os.Getenv(gateway.NetnsEnv))
	pods := netip.MustParsePrefix(PodCIDR)
	if !netip.MustParsePrefix(gateway.BenchmarkRange).Overlaps(pods) || pods.Bits() < 15 {
		t.Fatalf("PodCIDR %s is not part of the benchmarking range %s", PodCIDR, gateway.BenchmarkRange)
	}

	const ns, app = "data-path", "echo"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": app}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				// No GPU: tolerate the GPU nodes' taint explicitly.
				Tolerations: []corev1.Toleration{{Key: GPUTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				Containers: []corev1.Container{{Name: "server", Image: "echo:fake",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}}},
			}},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := gateway.Service(ns, app, 80, 8000)
	svc.Spec.Selector = labels
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ips []string
	poll(t, 2*time.Minute, "2 Ready pods with addresses", func() error {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return err
		}
		ips = ips[:0]
		for _, p := range list.Items {
			if p.Status.PodIP != "" && podReady(&p) {
				ips = append(ips, p.Status.PodIP)
			}
		}
		if len(ips) != 2 {
			return fmt.Errorf("%d of 2 pods Ready with an address", len(ips))
		}
		return nil
	})
	for _, ip := range ips {
		a, err := netip.ParseAddr(ip)
		if err != nil || !pods.Contains(a) || !gateway.Allowed(a) {
			t.Fatalf("pod address %s is outside %s", ip, PodCIDR)
		}
	}
	t.Logf("pod addresses: %v", ips)
	poll(t, time.Minute, "an EndpointSlice of Service echo listing both pods, ready", func() error {
		list, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + app})
		if err != nil {
			return err
		}
		var ready []string
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready = append(ready, ep.Addresses...)
				}
			}
		}
		want := append([]string(nil), ips...)
		sort.Strings(ready)
		sort.Strings(want)
		if !reflect.DeepEqual(ready, want) {
			return fmt.Errorf("ready endpoints %v, want the pods' %v", ready, want)
		}
		return nil
	})
	// A server on each pod's address (possible here only: PodCIDR is routed on this lo).
	for _, ip := range ips {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "8000"))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprint(w, ip)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	route := gateway.HTTPRoute(ns, app, DefaultGatewayName, "/", gateway.Backend{Service: app, Port: 80, Weight: 1})
	route.Spec.ParentRefs[0].Namespace = ptr.To(gatewayv1.Namespace(DefaultGatewayNamespace))
	route.Spec.Hostnames = []gatewayv1.Hostname{"echo.local"}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(route)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("gateway.networking.k8s.io/v1")
	u.SetKind("HTTPRoute")
	dyn := dynamic.NewForConfigOrDie(env.RESTConfig())
	routes := schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	if _, err := dyn.Resource(routes).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: gateway.Transport()}
	served := map[string]int{}
	poll(t, time.Minute, "both pods served through the Gateway", func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.GatewayURL()+"/", nil)
		req.Host = "echo.local"
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		served[string(body)]++
		if len(served) < 2 {
			return fmt.Errorf("served by %v so far", served)
		}
		return nil
	})
	for who := range served {
		if !slices.Contains(ips, who) {
			t.Errorf("a request was served by %q, not one of the pods %v", who, ips)
		}
	}
	sel := fmt.Sprintf(`job=%q,service=~"%s-%s-.*"`, TraefikJob, ns, app)
	poll(t, time.Minute, "Traefik's per-Service series in Prometheus", func() error {
		if err := promHas(ctx, env.PrometheusURL(), fmt.Sprintf(`count(sum(traefik_service_requests_total{%s,code="200"}) >= 2)`, sel), "1"); err != nil {
			return err
		}
		return promHas(ctx, env.PrometheusURL(), fmt.Sprintf(`count(sum(traefik_service_request_duration_seconds_count{%s}) >= 2)`, sel), "1")
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func scale(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name string, replicas int32) {
	t.Helper()
	sc, err := cs.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = replicas
	if _, err := cs.AppsV1().Deployments(ns).UpdateScale(ctx, name, sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func tolerates(tols []corev1.Toleration, key string) bool {
	for _, t := range tols {
		if t.Key == key {
			return true
		}
	}
	return false
}

// poll retries check every 200 ms until it passes or timeout passes (timings are not assertions).
func poll(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// promHas queries Prometheus' HTTP API for an instant vector and wants one sample equal to want.
func promHas(ctx context.Context, base, query, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  []any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err
	}
	if body.Status != "success" || len(body.Data.Result) != 1 {
		return fmt.Errorf("query %s: status %s, %d series", query, body.Status, len(body.Data.Result))
	}
	if got := fmt.Sprint(body.Data.Result[0].Value[1]); got != want {
		return fmt.Errorf("query %s = %s, want %s", query, got, want)
	}
	return nil
}
