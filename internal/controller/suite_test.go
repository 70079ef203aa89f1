package controller

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/cmd/modelship-controller/manager"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/signals"
	"github.com/modelship/modelship/internal/testenv"
	"github.com/modelship/modelship/internal/warmup"
)

// The integration tests share one real kube-apiserver and etcd and one running controller;
// each test works in its own namespace.
var (
	cfg *rest.Config
	k8s client.Client
	// controllerCache is the running controller's informer cache: what its passes read.
	controllerCache client.Reader
	nsCounter       atomic.Int32
)

// signalInterval is how often the built-in autoscaling signals are fetched for all
// ModelServers: short, so that tests see a change of the test Prometheus' series quickly.
const signalInterval = 200 * time.Millisecond

func TestMain(m *testing.M) {
	if ok, why := testenv.Available(); !ok {
		fmt.Println("skipping controller integration tests:", why)
		os.Exit(m.Run())
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(testLog())))
	pools, err := testenv.InferencePoolCRDs()
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	// TraefikServices (spec.rollout.shadow.mirror TraefikService): a stand-in CRD of the same kind.
	env, c, err := testenv.Start(pools, filepath.Join("testdata", "traefikservice-crd.yaml"))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	cfg = c
	code := func() int {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		scheme := testenv.Scheme()
		k8s, err = client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			fmt.Println(err)
			return 1
		}
		// The running controller never sees manualNamespace: tests there call Reconcile themselves.
		// The product's cache options, without the manual namespace.
		cacheOpts := manager.CacheOptions()
		cacheOpts.DefaultNamespaces = map[string]cache.Config{
			cache.AllNamespaces: {FieldSelector: fields.OneTermNotEqualSelector("metadata.namespace", manualNamespace)}}
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: cacheOpts})
		if err != nil {
			fmt.Println(err)
			return 1
		}
		controllerCache = mgr.GetCache()
		prom := fakePrometheus()
		r := &ModelServerReconciler{
			Client: mgr.GetClient(), LiveReader: mgr.GetAPIReader(), Scheme: scheme, Recorder: mgr.GetEventRecorder("modelship"),
			Prometheus: prom, Prober: warmup.NewHTTPProber(time.Second, ""), Now: time.Now,
			// Analysis windows of four 100ms scrapes: the analysis interval (1s in the rollout
			// stories) decides. Custom queries must be scoped to their namespace.
			ScrapeInterval: 100 * time.Millisecond, QueryPolicy: metrics.QueryPolicyNamespaced, CapacityInterval: signalInterval,
			Signals:     signals.NewSnapshotCache(prom, signals.DefaultQueries(), signalInterval),
			MetricsAPIs: kubeMetrics,
			Notifier:    testNotifier(),
			// The gateway's series are those of Traefik's scrape target in namespace traefik.
			GatewayMetricsNamespace: "traefik",
		}
		if err := r.SetupWithManager(ctx, mgr); err != nil {
			fmt.Println(err)
			return 1
		}
		go func() {
			if err := mgr.Start(ctx); err != nil {
				fmt.Println("manager:", err)
			}
		}()
		return m.Run()
	}()
	if err := env.Stop(); err != nil {
		fmt.Println("stopping envtest:", err)
	}
	os.Exit(code)
}

func requireEnv(t *testing.T) {
	t.Helper()
	if cfg == nil {
		_, why := testenv.Available()
		t.Skip(why)
	}
}

// newNamespace creates a namespace of the test's own.
func newNamespace(t *testing.T) string {
	t.Helper()
	requireEnv(t)
	name := fmt.Sprintf("t%d-%d", nsCounter.Add(1), time.Now().UnixNano()%100000)
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return name
}

type msOption func(*v1alpha1.ModelServer)

// newModelServer builds a ModelServer for vLLM on one GPU, modified by options.
func newModelServer(ns, name string, opts ...msOption) *v1alpha1.ModelServer {
	ms := &v1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ModelServerSpec{
			Replicas: ptr.To(int32(2)),
			// The step weights as written, which the tests assert; unset is StablePods
			// (TestAdmissionDefaultsLoadMatchingToStablePods).
			Rollout: v1alpha1.RolloutSpec{LoadMatching: v1alpha1.LoadMatchingNone},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "vllm", Image: "vllm/vllm-openai:v0.10.2", Args: []string{"--model", "/models/llama"},
				Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": mustQuantity("1")}},
			}}}},
			Gateway: v1alpha1.GatewaySpec{
				ParentRefs: []gatewayv1.ParentReference{{Name: "inference-gateway", Namespace: ptr.To(gatewayv1.Namespace("gateway-system"))}},
				Hostnames:  []gatewayv1.Hostname{"llm.example.com"},
			},
		},
	}
	for _, o := range opts {
		o(ms)
	}
	return ms
}

// eventually polls cond until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: still not true after %s: %v", what, timeout, err)
}

func getMS(t *testing.T, ms *v1alpha1.ModelServer) *v1alpha1.ModelServer {
	t.Helper()
	got := &v1alpha1.ModelServer{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ms), got); err != nil {
		t.Fatalf("getting ModelServer: %v", err)
	}
	return got
}

// markReady plays the Deployment controller (envtest runs none): the Deployment reports all its
// replicas ready and available for its current generation.
func markReady(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, 10*time.Second, "mark "+name+" ready", func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, ReadyReplicas: n, AvailableReplicas: n, UpdatedReplicas: n}
		return k8s.Status().Update(context.Background(), d)
	})
}

func condition(ms *v1alpha1.ModelServer, t string) *metav1.Condition {
	for i := range ms.Status.Conditions {
		if ms.Status.Conditions[i].Type == t {
			return &ms.Status.Conditions[i]
		}
	}
	return nil
}

// testLog is where the controller logs during tests: a file in the temp folder (its path is
// printed), so that failures can be read without flooding the test output.
func testLog() io.Writer {
	f, err := os.CreateTemp("", "modelship-controller-test-*.log")
	if err != nil {
		return io.Discard
	}
	fmt.Println("controller log:", f.Name())
	return f
}

// updateMS changes the ModelServer's spec or metadata, retrying on conflicts with the
// controller's writes.
func updateMS(t *testing.T, ms *v1alpha1.ModelServer, mutate func(*v1alpha1.ModelServer)) {
	t.Helper()
	eventually(t, 10*time.Second, "update ModelServer", func() error {
		got := &v1alpha1.ModelServer{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ms), got); err != nil {
			return err
		}
		mutate(got)
		return k8s.Update(context.Background(), got)
	})
}

// createUserRoute creates the HTTPRoute "shared" that a user owns: a "docs" rule with its own
// backend and an "llm" rule with a header filter, for ModelServers that reference it.
func createUserRoute(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	legacy := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "legacy", Port: ptr.To(gatewayv1.PortNumber(80))}, Weight: ptr.To(int32(1))}}
	user := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Rules: []gatewayv1.HTTPRouteRule{
				{Name: ptr.To(gatewayv1.SectionName("docs")), Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/docs")}}}, BackendRefs: []gatewayv1.HTTPBackendRef{legacy}},
				{Name: ptr.To(gatewayv1.SectionName("llm")), Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Add: []gatewayv1.HTTPHeader{{Name: "x-team", Value: "ml"}}}}}},
			},
		},
	}
	if err := k8s.Create(ctx, user); err != nil {
		t.Fatalf("creating the user's route: %v", err)
	}
}
