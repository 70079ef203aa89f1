//go:build e2e

package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelship/modelship/internal/testenv"
	"github.com/modelship/modelship/test/framework/gateway"
)

// Ports inside the test's own network namespace (fresh: all free).
const (
	argoWebPort   = 8000 // Traefik's entry point and the Gateway's listener
	argoAdminPort = 8082
	argoHealthz   = 8090
	argoMetrics   = 8091
)

// Run with: make test-argo (or, after hack/peers.sh argo-rollouts and hack/traefik.sh,
// KUBEBUILDER_ASSETS=... go test -tags e2e ./test/bench/peers/ -run TestArgoRolloutsCanaryThroughTraefik -v
// as root). About a minute.
//
// TestArgoRolloutsCanaryThroughTraefik runs the real Argo Rollouts controller and Traefik (both
// providers: Gateway API and CRD) against a real kube-apiserver in a network namespace of the
// test's own. The test plays kube-controller-manager and the kubelets: it marks the
// ReplicaSets Argo creates available and writes the stable and canary Services'
// EndpointSlices with pod addresses (198.18.200.x) served by processes that answer with their
// ReplicaSet's image; a stand-in Prometheus answers the AnalysisTemplate's queries with a
// constant. Given a Rollout with two steps (20 %, 60 %) routed through a TraefikService that an
// HTTPRoute names, when the image changes, then the TraefikService weights move step by step,
// Traefik splits requests by them, and the Rollout reaches Healthy with all traffic on the new
// pods; when the next image's analysis fails, the rollout aborts and traffic returns to the
// stable pods.
func TestArgoRolloutsCanaryThroughTraefik(t *testing.T) {
	traefik, err := gateway.FindBinary()
	if err != nil {
		t.Skip(err.Error())
	}
	if ok, why := ArgoBuilt(); !ok {
		t.Skip(why)
	}
	if ok, why := testenv.Available(); !ok {
		t.Skip(why)
	}
	if !gateway.RunInNetns(t) {
		return
	}
	// From here on: inside the test's own network namespace.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	apiserver, err := gateway.NetnsAPIServer(t.TempDir(), os.Getenv("KUBEBUILDER_ASSETS"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_ASSET_KUBE_APISERVER", apiserver)
	env, cfg, err := testenv.Start(ArgoCRDDirs()...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := gateway.WriteKubeconfig(kubeconfig, cfg); err != nil {
		t.Fatal(err)
	}

	prom := newFakePrometheus(t)
	const ns, name = "argo", "llm"
	canary := ArgoCanary{
		Name: name, Namespace: ns, Replicas: 2,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{AppLabel: name, ServerLabel: name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "vllm:v1",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: ModelServerPort}}}}},
		},
		GatewayName: "gw", GatewayNamespace: ns,
		StepWeights: []int{20, 60}, StepPause: 8 * time.Second,
		PrometheusURL: prom.url,
		Metrics: []ArgoMetric{{Name: "e2e-p95-ratio", SuccessCondition: "result[0] <= 1.2",
			Query: ArgoQuantileRatioQuery(name, "vllm:e2e_request_latency_seconds", 0.95)}},
		Interval: 2 * time.Second, FailureLimit: 1, StartingStep: 1,
	}
	create := func(obj client.Object) {
		t.Helper()
		// Strict: a field the CRDs of Argo Rollouts v1.10.1 or Traefik v3.6.12 do not know fails.
		if err := c.Create(ctx, obj, client.FieldValidation("Strict")); err != nil {
			t.Fatalf("creating %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(gateway.Class("traefik"))
	create(gateway.Gateway(ns, "gw", "traefik", argoWebPort))
	objs, err := canary.Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		create(o)
	}

	cluster := &fakeCluster{t: t, c: c, ns: ns, servers: map[string]*http.Server{}}
	clusterDone := make(chan struct{})
	go func() { defer close(clusterDone); cluster.run(ctx, canary.StableService(), canary.CanaryService()) }()
	defer func() { cancel(); <-clusterDone }()

	tr, err := gateway.Start(ctx, gateway.Options{Binary: traefik, Kubeconfig: kubeconfig, Dir: dir,
		WebPort: argoWebPort, AdminPort: argoAdminPort, KubernetesCRD: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Stop() }()
	argo, err := StartArgoRollouts(ctx, ArgoOptions{Kubeconfig: kubeconfig, Dir: dir, HealthzPort: argoHealthz, MetricsPort: argoMetrics})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = argo.Stop()
		if t.Failed() {
			for _, p := range []string{argo.LogPath(), tr.LogPath} {
				if b, err := os.ReadFile(p); err == nil {
					t.Logf("--- %s ---\n%s", p, lastLines(string(b), 40))
				}
			}
		}
	}()
	t.Logf("FIGURE: argo_rollouts_ready=%s", argo.Ready.Round(time.Millisecond))

	// The HTTPRoute's backendRef to a TraefikService resolves in Traefik v3.6.12.
	if err := gateway.WaitGatewayProgrammed(ctx, c, ns, "gw", time.Minute); err != nil {
		t.Fatal(err)
	}
	route, err := gateway.WaitRoute(ctx, c, ns, name, time.Minute, map[string]metav1.ConditionStatus{
		string(gatewayv1.RouteConditionAccepted): metav1.ConditionTrue, string(gatewayv1.RouteConditionResolvedRefs): metav1.ConditionTrue,
	})
	if err != nil {
		t.Fatal(err)
	}
	rr := gateway.RouteCondition(route, string(gatewayv1.RouteConditionResolvedRefs))
	t.Logf("HTTPRoute -> TraefikService %s/%s: ResolvedRefs %s (%s)", ns, name, rr.Status, rr.Reason)

	// The first revision: stable at once, no steps.
	healthy := func(step string, timeout time.Duration) RolloutState {
		t.Helper()
		var s RolloutState
		if err := gateway.WaitFor(ctx, timeout, func(ctx context.Context) error {
			var err error
			if s, err = GetRolloutState(ctx, c, ns, name); err != nil {
				return err
			}
			if !s.Promoted() {
				return fmt.Errorf("rollout %s", s)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return s
	}
	first := healthy("first revision", time.Minute)
	p := &splitProber{c: &http.Client{Timeout: 2 * time.Second, Transport: gateway.Transport()}, url: tr.WebURL}
	if err := gateway.WaitFor(ctx, 30*time.Second, func(ctx context.Context) error {
		if got := p.get(ctx); got != "vllm:v1" {
			return fmt.Errorf("GET / through Traefik: %s", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A good release: the weights move 0 -> 20 -> 60 -> 0, Traefik follows them.
	began := time.Now()
	if err := SetRolloutImage(ctx, c, ns, name, "vllm:v2"); err != nil {
		t.Fatal(err)
	}
	var weights []int
	measured := map[int]float64{}
	var final RolloutState
	if err := gateway.WaitFor(ctx, 2*time.Minute, func(ctx context.Context) error {
		ws, err := TraefikWeights(ctx, c, ns, name)
		if err != nil {
			return err
		}
		w := ws[canary.CanaryService()]
		if len(weights) == 0 || weights[len(weights)-1] != w {
			weights = append(weights, w)
			t.Logf("+%5.1fs TraefikService %s=%d %s=%d", time.Since(began).Seconds(), canary.StableService(), ws[canary.StableService()], canary.CanaryService(), w)
		}
		if _, done := measured[w]; !done && slices.Contains(canary.StepWeights, w) {
			// The split at this step, counted at the data plane: from the weight's write to the
			// canary's first answer (at the first step), then 500 requests from 2 s into the
			// step's 8 s pause (Traefik rebuilds its configuration on each change it watches).
			seen := time.Now()
			first := p.until(ctx, "vllm:v2", 3*time.Second)
			time.Sleep(time.Until(seen.Add(2 * time.Second)))
			got, ok := p.count(ctx, 500, 4*time.Second)
			share := 100 * float64(got["vllm:v2"]) / float64(max(1, sum(got)))
			t.Logf("FIGURE: argo_split_weight_%d canary_share=%.1f%% first_canary_answer=%s answers=%v", w, share, first, got)
			if ok {
				measured[w] = share
			}
		}
		if final, err = GetRolloutState(ctx, c, ns, name); err != nil {
			return err
		}
		if !final.Promoted() || final.CurrentPodHash == first.CurrentPodHash || w != 0 {
			return fmt.Errorf("rollout %s, canary weight %d", final, w)
		}
		return nil
	}); err != nil {
		t.Fatalf("good release: %v (weights so far %v)", err, weights)
	}
	t.Logf("FIGURE: argo_good_release_promoted=%s (2 steps of 8 s)", time.Since(began).Round(100*time.Millisecond))
	// At the end Argo gives the canary 100 while it moves the stable Service to the new pods,
	// then 0 (our polling may miss the 100).
	if !slices.Equal(weights, []int{0, 20, 60, 0}) && !slices.Equal(weights, []int{0, 20, 60, 100, 0}) {
		t.Errorf("canary weights in the TraefikService = %v, want 0 20 60 (100) 0", weights)
	}
	if len(measured) != len(canary.StepWeights) {
		t.Errorf("the split was measured at weights %v only, want every step's", measured)
	}
	for w, share := range measured {
		if d := share - float64(w); d > 8 || d < -8 {
			t.Errorf("at weight %d the canary served %.1f%% of the requests through Traefik", w, share)
		}
	}
	// Argo switched the stable Service to the new pods and set the canary weight to 0 in one
	// pass; Traefik applies the weight and the Service's endpoints as each arrives, so for a
	// moment the old pods answer again (they stay up for scaleDownDelaySeconds, 30 s).
	if d, other := p.settle(ctx, "vllm:v2", 200, 10*time.Second); d < 0 {
		t.Errorf("after the promotion Traefik does not serve vllm:v2 alone within 10s (last answers %v)", other)
	} else {
		t.Logf("FIGURE: argo_promoted_to_data_plane_settled=%s other_answers_meanwhile=%v", d, other)
	}
	// The analysis was asked about the canary's and the stable's pods by their hashes.
	if q := prom.lastQuery(); !strings.Contains(q, `pod=~"llm-`+final.CurrentPodHash+`-`) || !strings.Contains(q, `pod=~"llm-`+first.CurrentPodHash+`-`) || !strings.Contains(q, `namespace="argo"`) {
		t.Errorf("the analysis' last query does not name the canary (%s) and stable (%s) pods: %s", final.CurrentPodHash, first.CurrentPodHash, q)
	}

	// A bad release: the analysis fails, Argo aborts, the canary's weight goes back to 0.
	prom.set("5")
	began = time.Now()
	if err := SetRolloutImage(ctx, c, ns, name, "vllm:v3"); err != nil {
		t.Fatal(err)
	}
	var aborted RolloutState
	weights = nil
	if err := gateway.WaitFor(ctx, 2*time.Minute, func(ctx context.Context) error {
		ws, err := TraefikWeights(ctx, c, ns, name)
		if err != nil {
			return err
		}
		if w := ws[canary.CanaryService()]; len(weights) == 0 || weights[len(weights)-1] != w {
			weights = append(weights, w)
		}
		if aborted, err = GetRolloutState(ctx, c, ns, name); err != nil {
			return err
		}
		if !aborted.Abort || aborted.Phase != RolloutDegraded || ws[canary.CanaryService()] != 0 {
			return fmt.Errorf("rollout %s, canary weight %d", aborted, ws[canary.CanaryService()])
		}
		return nil
	}); err != nil {
		t.Fatalf("bad release: %v", err)
	}
	t.Logf("FIGURE: argo_bad_release_aborted=%s (weights %v): %s", time.Since(began).Round(100*time.Millisecond), weights, aborted.Message)
	if aborted.StableRS != final.CurrentPodHash {
		t.Errorf("after the abort the stable ReplicaSet is %s, want %s", aborted.StableRS, final.CurrentPodHash)
	}
	if d, other := p.settle(ctx, "vllm:v2", 200, 10*time.Second); d < 0 {
		t.Errorf("after the abort Traefik does not serve vllm:v2 alone within 10s (last answers %v)", other)
	} else {
		t.Logf("FIGURE: argo_aborted_to_data_plane_settled=%s other_answers_meanwhile=%v", d, other)
	}
	select {
	case <-argo.Exited():
		t.Fatal("the Argo Rollouts controller exited during the test")
	case <-tr.Exited():
		t.Fatal("traefik exited during the test")
	default:
	}
}

// fakePrometheus answers /api/v1/query with a one-sample vector of its current value.
type fakePrometheus struct {
	url   string
	mu    sync.Mutex
	value string
	query string
}

func newFakePrometheus(t *testing.T) *fakePrometheus {
	t.Helper()
	f := &fakePrometheus{value: "1"}
	l, err := net.Listen("tcp", "127.0.0.1:0") //nolint:noctx // a test server
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f.mu.Lock()
		f.query = r.Form.Get("query")
		v := f.value
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{
			"resultType": "vector",
			"result":     []any{map[string]any{"metric": map[string]any{}, "value": []any{float64(time.Now().Unix()), v}}},
		}})
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	f.url = "http://" + l.Addr().String()
	return f
}

func (f *fakePrometheus) set(v string) { f.mu.Lock(); f.value = v; f.mu.Unlock() }

func (f *fakePrometheus) lastQuery() string { f.mu.Lock(); defer f.mu.Unlock(); return f.query }

// fakeCluster plays kube-controller-manager and the kubelets for the Rollout's ReplicaSets:
// every ReplicaSet is available at its spec's size at once, each of its pods is an address of
// 198.18.200.0/24 served by a process answering with the ReplicaSet's image, and each Service
// of services has an EndpointSlice with the addresses of the ReplicaSet its selector's pod
// template hash picks.
type fakeCluster struct {
	t       *testing.T
	c       client.Client
	ns      string
	mu      sync.Mutex
	next    int
	addrs   map[string][]string // ReplicaSet -> its pods' addresses
	servers map[string]*http.Server
}

func (f *fakeCluster) run(ctx context.Context, services ...string) {
	f.addrs = map[string][]string{}
	defer func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, s := range f.servers {
			_ = s.Close()
		}
	}()
	for ctx.Err() == nil {
		if err := f.sync(ctx, services); err != nil && ctx.Err() == nil {
			f.t.Logf("fake cluster: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (f *fakeCluster) sync(ctx context.Context, services []string) error {
	var rss appsv1.ReplicaSetList
	if err := f.c.List(ctx, &rss, client.InNamespace(f.ns)); err != nil {
		return err
	}
	byHash := map[string][]string{}
	for i := range rss.Items {
		rs := &rss.Items[i]
		n := int(ptr.Deref(rs.Spec.Replicas, 1))
		addrs := f.pods(rs.Name, rs.Spec.Template.Spec.Containers[0].Image, n)
		byHash[rs.Labels[PodTemplateHashLabel]] = addrs
		st := rs.Status
		want := appsv1.ReplicaSetStatus{Replicas: int32(n), FullyLabeledReplicas: int32(n), ReadyReplicas: int32(n),
			AvailableReplicas: int32(n), ObservedGeneration: rs.Generation}
		if st.Replicas != want.Replicas || st.ReadyReplicas != want.ReadyReplicas || st.AvailableReplicas != want.AvailableReplicas ||
			st.ObservedGeneration != want.ObservedGeneration {
			rs.Status = want
			if err := f.c.Status().Update(ctx, rs); err != nil && !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	for _, name := range services {
		var svc corev1.Service
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &svc); err != nil {
			return err
		}
		addrs := byHash[svc.Spec.Selector[PodTemplateHashLabel]]
		if svc.Spec.Selector[PodTemplateHashLabel] == "" {
			addrs = nil
		}
		want := gateway.EndpointSlice(f.ns, name, ModelServerPort, true, addrs...)
		var cur discoveryv1.EndpointSlice
		err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &cur)
		switch {
		case apierrors.IsNotFound(err):
			if err := f.c.Create(ctx, want); err != nil {
				return err
			}
		case err != nil:
			return err
		case !sameEndpoints(cur.Endpoints, want.Endpoints):
			cur.Endpoints = want.Endpoints
			if err := f.c.Update(ctx, &cur); err != nil && !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	return nil
}

func sameEndpoints(a, b []discoveryv1.Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i].Addresses, b[i].Addresses) {
			return false
		}
	}
	return true
}

// pods returns the addresses of ReplicaSet rs's n pods, serving image on each.
func (f *fakeCluster) pods(rs, image string, n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.addrs[rs]) < n {
		f.next++
		addr := gateway.PodAddress(f.next).String()
		l, err := net.Listen("tcp", net.JoinHostPort(addr, fmt.Sprint(ModelServerPort))) //nolint:noctx // a test server
		if err != nil {
			f.t.Errorf("serving pod address %s (routed on lo in the test's namespace): %v", addr, err)
			return f.addrs[rs]
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, image)
		})}
		go func() { _ = srv.Serve(l) }()
		f.servers[addr] = srv
		f.addrs[rs] = append(f.addrs[rs], addr)
	}
	return f.addrs[rs][:n]
}

// splitProber sends requests through Traefik and reads which image answered.
type splitProber struct {
	c   *http.Client
	url string
}

func (p *splitProber) get(ctx context.Context) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/", nil)
	resp, err := p.c.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	return string(b)
}

// count sends n requests (stopping at within) and counts the answers; ok is false when fewer
// than n could be sent.
func (p *splitProber) count(ctx context.Context, n int, within time.Duration) (map[string]int, bool) {
	t0 := time.Now()
	got := map[string]int{}
	for range n {
		if time.Since(t0) > within {
			return got, false
		}
		got[p.get(ctx)]++
	}
	return got, true
}

// until sends requests until what answers and returns how long it took, -1 after within.
func (p *splitProber) until(ctx context.Context, what string, within time.Duration) time.Duration {
	t0 := time.Now()
	for time.Since(t0) < within {
		if p.get(ctx) == what {
			return time.Since(t0).Round(time.Millisecond)
		}
	}
	return -1
}

// settle sends requests until n in a row are answered by what, and returns how long it took
// until the first of them and the other answers seen before; -1 after within.
func (p *splitProber) settle(ctx context.Context, what string, n int, within time.Duration) (time.Duration, map[string]int) {
	t0 := time.Now()
	other := map[string]int{}
	streak := 0
	var began time.Time
	for time.Since(t0) < within {
		sent := time.Now()
		got := p.get(ctx)
		if got != what {
			other[got]++
			streak = 0
			continue
		}
		if streak == 0 {
			began = sent
		}
		if streak++; streak == n {
			return began.Sub(t0).Round(time.Millisecond), other
		}
	}
	return -1, other
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
