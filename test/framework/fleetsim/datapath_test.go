package fleetsim

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelship/modelship/internal/testenv"
	"github.com/modelship/modelship/test/framework/fleet"
	"github.com/modelship/modelship/test/framework/gateway"
)

// The whole data path, as issue #26 wants it: the simulator's load generator -> Traefik (a real
// Gateway API implementation) -> the Services' EndpointSlices -> each pod's own address, served
// by the simulator's pod servers, inside a network namespace of the test's own. Runs when
// TRAEFIK names the binary (`make test-gateway` sets it), as root.
func TestRunThroughTraefikToThePodsAddresses(t *testing.T) {
	bin := os.Getenv(gateway.BinaryEnv)
	if bin == "" {
		t.Skipf("%s is not set: `make gateway` builds Traefik once; run with %s=<binary> as root", gateway.BinaryEnv, gateway.BinaryEnv)
	}
	if ok, why := testenv.Available(); !ok {
		t.Skip(why)
	}
	if !gateway.RunInNetns(t) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	apiserver, err := gateway.NetnsAPIServer(t.TempDir(), os.Getenv("KUBEBUILDER_ASSETS"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_ASSET_KUBE_APISERVER", apiserver)
	env, restCfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(restCfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	const (
		ns       = "default"
		webPort  = 8000
		podPort  = 8080
		svcPort  = 80
		minCount = 1000
	)
	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	create(gateway.Class("traefik"))
	create(gateway.Gateway(ns, "gw", "traefik", webPort))
	addrs := map[string]string{"blue": gateway.PodAddress(1).String(), "green": gateway.PodAddress(2).String()}
	for _, color := range []string{"blue", "green"} {
		group := "llm-" + color
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: group + "-1", Labels: map[string]string{LabelPeerServer: "llm", LabelPeerGroup: group}},
			Spec: corev1.PodSpec{NodeName: "gpu-node-1", Containers: []corev1.Container{{Name: "vllm", Image: "vllm",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: podPort}}}}},
		}
		create(pod)
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: addrs[color], PodIPs: []corev1.PodIP{{IP: addrs[color]}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))}}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		// The Service selects the group (so the simulator knows whose it is); no EndpointSlice
		// controller runs here, the slice is written as kube-controller-manager would.
		create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: group},
			Spec: corev1.ServiceSpec{Selector: map[string]string{LabelPeerGroup: group}, Ports: []corev1.ServicePort{{
				Name: gateway.PortName, Port: svcPort, TargetPort: intstr.FromInt32(podPort), Protocol: corev1.ProtocolTCP}}}})
		create(gateway.EndpointSlice(ns, group, podPort, true, addrs[color]))
	}
	create(gateway.HTTPRoute(ns, "llm", "gw", "/", gateway.Backend{Service: "llm-blue", Port: svcPort, Weight: 90},
		gateway.Backend{Service: "llm-green", Port: svcPort, Weight: 10}))

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := gateway.WriteKubeconfig(kubeconfig, restCfg); err != nil {
		t.Fatal(err)
	}
	tr, err := gateway.Start(ctx, gateway.Options{Binary: bin, Kubeconfig: kubeconfig, Dir: dir, WebPort: webPort, AdminPort: 8082})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Stop() }()
	if _, err := gateway.WaitRoute(ctx, c, ns, "llm", time.Minute, map[string]metav1.ConditionStatus{
		string(gatewayv1.RouteConditionAccepted): metav1.ConditionTrue, string(gatewayv1.RouteConditionResolvedRefs): metav1.ConditionTrue,
	}); err != nil {
		t.Fatal(err)
	}

	trace := fleet.Trace{Start: time.Now()}
	for i := range 100 {
		trace.Requests = append(trace.Requests, fleet.TraceRequest{Offset: time.Duration(i) * 10 * time.Millisecond, ContextTokens: 30, GeneratedTokens: 12})
	}
	listen := "127.0.0.1:9400"
	cfg := Config{Trace: trace, Replay: fleet.ReplayOptions{Speed: 1}, Fleet: fleet.Config{Seed: 1, MaxTokens: 512},
		Listen: listen, SyncInterval: 200 * time.Millisecond, LogInterval: time.Second,
		Gateway: LoadOptions{URL: tr.WebURL, Stream: true, Timeout: 30 * time.Second}}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- Run(runCtx, restCfg, cfg, logr.Discard()) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	counts := func() map[string]uint64 {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+listen+"/loadgen/responses", nil)
		resp, err := (&http.Client{Transport: GuardedTransport(1)}).Do(req)
		if err != nil {
			return nil
		}
		defer func() { _ = resp.Body.Close() }()
		var list []ResponseCount
		_ = json.NewDecoder(resp.Body).Decode(&list)
		out := map[string]uint64{}
		for _, c := range list {
			out[c.Color+" "+c.Code] += c.Count
		}
		return out
	}
	// Every request sent is counted: after minCount answers the route goes, the simulator stops
	// sending (no target) and the requests in flight finish; the counts then hold still.
	sum := func(m map[string]uint64) (n uint64) {
		for _, v := range m {
			n += v
		}
		return n
	}
	var got map[string]uint64
	for ctx.Err() == nil {
		if got = counts(); sum(got) >= minCount {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t1, t2 := start, time.Now()
	var route gatewayv1.HTTPRoute
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llm"}, &route); err != nil {
		t.Fatal(err)
	}
	for _, p := range route.Status.Parents {
		if p.ControllerName == ControllerName {
			t.Errorf("the simulator wrote the route's status beside Traefik: %+v", p)
		}
	}
	before := counts() // what came while the route was there
	if err := c.Delete(ctx, &route); err != nil {
		t.Fatal(err)
	}
	for prev := uint64(0); ctx.Err() == nil; {
		time.Sleep(time.Second)
		if got = counts(); sum(got) == prev {
			break
		}
		prev = sum(got)
	}
	el := t2.Sub(t1)
	blue, green := got["llm-blue 200"], got["llm-green 200"]
	total := float64(blue + green)
	t.Logf("FIGURE: traefik_path answers=%v in %s from the simulator's start (%.0f req/s) blue=%.2f%% green=%.2f%%",
		got, el.Round(time.Millisecond), total/el.Seconds(), 100*float64(blue)/total, 100*float64(green)/total)
	for k, v := range before {
		if k != "llm-blue 200" && k != "llm-green 200" {
			t.Errorf("answers %q: %d (all: %v)", k, v, before)
		}
	}
	// Once the route is gone, Traefik answers 404 until the simulator's next read sees it gone.
	t.Logf("FIGURE: traefik_path answers_after_the_route_went=%d (404 until the simulator stops sending)", got[" 404"]-before[" 404"])
	if total < minCount {
		t.Fatalf("%v answers, want %d", got, minCount)
	}
	if share := 100 * float64(green) / total; share < 7 || share > 13 {
		t.Errorf("green served %.2f%% of the requests through a 90/10 route, want 10 within 3 points", share)
	}
	// Mean time to first token seen through Traefik (from sending to the first event) against
	// the pods' own (vLLM's histogram): what the data path adds.
	mreq, _ := http.NewRequestWithContext(ctx, "GET", "http://"+listen+"/metrics", nil)
	if mresp, err := (&http.Client{Transport: GuardedTransport(1)}).Do(mreq); err == nil {
		parser := expfmt.NewTextParser(model.LegacyValidation)
		families, err := parser.TextToMetricFamilies(mresp.Body)
		_ = mresp.Body.Close()
		mean := func(name string) float64 {
			var sum float64
			var n uint64
			for _, m := range families[name].GetMetric() {
				sum += m.GetHistogram().GetSampleSum()
				n += m.GetHistogram().GetSampleCount()
			}
			return sum / float64(max(n, 1))
		}
		if err == nil {
			t.Logf("FIGURE: traefik_path mean_ttft_through_gateway=%.1fms mean_ttft_at_pods=%.1fms",
				1000*mean(MetricLoadTTFT), 1000*mean(fleet.MetricTTFT))
		}
	}
}
