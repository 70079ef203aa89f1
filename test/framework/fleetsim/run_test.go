package fleetsim

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelship/modelship/internal/testenv"
	"github.com/modelship/modelship/test/framework/fleet"
)

// standInGateway is a Gateway on 127.0.0.1 that sends requests to the backends in turn (as a
// route of equal weights would).
func standInGateway(t *testing.T, backends ...string) string {
	t.Helper()
	var n atomic.Int64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			u, _ := url.Parse("http://" + backends[int(n.Add(1))%len(backends)])
			r.SetURL(u)
		},
		Transport: GuardedTransport(64),
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	ln, err := GuardedListen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// Run with a Gateway: the simulator serves a peer's two groups of pods on their podIPs, sends
// the trace to the Gateway, counts the answers per group, and leaves the route's status alone.
func TestRunSendsTheTraceThroughAGatewayToThePodsAddresses(t *testing.T) {
	if ok, why := testenv.Available(); !ok {
		t.Skip(why)
	}
	env, restCfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(restCfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int32{"primary": freePort(t, "127.0.0.41"), "canary": freePort(t, "127.0.0.42")}
	ips := map[string]string{"primary": "127.0.0.41", "canary": "127.0.0.42"}
	for _, group := range []string{"primary", "canary"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "llm-" + group + "-1",
				Labels: map[string]string{LabelPeerServer: "llm", LabelPeerGroup: "llm-" + group}},
			Spec: corev1.PodSpec{NodeName: "gpu-node-1", Containers: []corev1.Container{{Name: "vllm", Image: "vllm",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: ports[group]}}}}},
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		past := metav1.NewTime(time.Now().Add(-time.Minute))
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ips[group], PodIPs: []corev1.PodIP{{IP: ips[group]}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: past}}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatalf("pod status: %v", err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "llm-" + group},
			Spec: corev1.ServiceSpec{Selector: map[string]string{LabelPeerGroup: "llm-" + group},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		if err := c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "llm"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{
				{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "llm-primary", Port: ptr.To[gatewayv1.PortNumber](80)}, Weight: ptr.To[int32](50)}},
				{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "llm-canary", Port: ptr.To[gatewayv1.PortNumber](80)}, Weight: ptr.To[int32](50)}},
			}}},
		}}
	if err := c.Create(ctx, route); err != nil {
		t.Fatal(err)
	}

	gw := standInGateway(t, "127.0.0.41:"+strconv.Itoa(int(ports["primary"])), "127.0.0.42:"+strconv.Itoa(int(ports["canary"])))
	trace := fleet.Trace{Start: time.Now()}
	for i := range 100 {
		trace.Requests = append(trace.Requests, fleet.TraceRequest{Offset: time.Duration(i) * 20 * time.Millisecond, ContextTokens: 200, GeneratedTokens: 8})
	}
	listen := freePort(t, "127.0.0.1")
	cfg := Config{Trace: trace, Replay: fleet.ReplayOptions{Speed: 1}, Fleet: fleet.Config{Seed: 1, MaxTokens: 512},
		Listen: "127.0.0.1:" + strconv.Itoa(int(listen)), SyncInterval: 200 * time.Millisecond, LogInterval: time.Second,
		Gateway: LoadOptions{URL: gw, Stream: true, Timeout: 30 * time.Second}}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, restCfg, cfg, logr.Discard()) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	counts := func() map[string]uint64 {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(int(listen)))+"/loadgen/responses", nil)
		resp, err := (&http.Client{Transport: GuardedTransport(1)}).Do(req)
		if err != nil {
			return nil
		}
		defer func() { _ = resp.Body.Close() }()
		var list []ResponseCount
		_ = json.NewDecoder(resp.Body).Decode(&list)
		out := map[string]uint64{}
		for _, c := range list {
			out[c.Namespace+"/"+c.ModelServer+" "+c.Color+" "+c.Code] += c.Count
		}
		return out
	}
	var got map[string]uint64
	t0 := time.Now()
	defer func() { t.Logf("FIGURE: run_gateway_answers=%v after=%s", got, time.Since(t0).Round(time.Millisecond)) }()
	for ctx.Err() == nil {
		got = counts()
		if got["default/llm llm-primary 200"] >= 20 && got["default/llm llm-canary 200"] >= 20 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for k := range got {
		if k != "default/llm llm-primary 200" && k != "default/llm llm-canary 200" {
			t.Errorf("unexpected answers %s: %d (all: %v)", k, got[k], got)
		}
	}
	if got["default/llm llm-primary 200"] < 20 || got["default/llm llm-canary 200"] < 20 {
		t.Fatalf("answers through the Gateway %v, want 20 or more 200s of each group", got)
	}
	// The Gateway's answers are also where the stories and the peer bench read them.
	mreq, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:"+strconv.Itoa(int(listen))+"/metrics", nil)
	mresp, err := (&http.Client{Transport: GuardedTransport(1)}).Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	_ = mresp.Body.Close()
	for _, group := range []string{"llm-primary", "llm-canary"} {
		want := fleet.MetricGatewayResponses + `{code="200",color="` + group + `",modelserver="llm",namespace="default"}`
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	var r gatewayv1.HTTPRoute
	if err := c.Get(ctx, client.ObjectKeyFromObject(route), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Status.Parents) != 0 {
		t.Errorf("the simulator wrote the route's status with a real Gateway: %+v", r.Status)
	}
}
