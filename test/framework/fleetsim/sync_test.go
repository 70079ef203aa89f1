package fleetsim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/fleet"
)

func newSyncer(t *testing.T, objs ...client.Object) (*Syncer, client.Client) {
	t.Helper()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&gatewayv1.HTTPRoute{}).Build()
	return &Syncer{
		Client: c,
		Fleet:  fleet.New(fleet.Config{Seed: 1}, now),
		Pods:   PodOptions{ColdStart: 30 * time.Second},
		Now:    func() time.Time { return now },
	}, c
}

func modelServer(ns, name string) *v1alpha1.ModelServer {
	return &v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func TestSyncMirrorsPodsAndRoutes(t *testing.T) {
	ctx := context.Background()
	route := newRoute([]gatewayv1.HTTPBackendRef{backend("llm-blue", ptr.To[int32](80)), backend("llm-green", ptr.To[int32](20))})
	s, c := newSyncer(t,
		modelServer("ns", "llm"),
		newK8sPod("llm-blue-1", ready(now.Add(-time.Hour))),
		newK8sPod("llm-green-1", ready(now.Add(-10*time.Second)), withLabels(v1alpha1.LabelColor, "green")),
		newK8sPod("unrelated", withLabels(v1alpha1.LabelModelServer, "")),
		route,
	)
	routed, err := s.Sync(ctx)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if len(routed) != 1 || routed[0] != (types.NamespacedName{Namespace: "ns", Name: "llm"}) {
		t.Fatalf("routed %v, want ns/llm", routed)
	}
	if keys := s.Fleet.PodKeys(); strings.Join(keys, ",") != "ns/llm-blue-1,ns/llm-green-1" {
		t.Errorf("fleet pods %v", keys)
	}
	if w := s.Fleet.Weights("ns", "llm"); w["blue"] != 80 || w["green"] != 20 {
		t.Errorf("weights %v, want blue 80 green 20", w)
	}
	if loaded, _ := s.Fleet.Loaded("ns", "llm-green-1", now); loaded {
		t.Error("green pod Ready 10s ago counts as loaded with a 30s cold start")
	}

	var got gatewayv1.HTTPRoute
	if err := c.Get(ctx, client.ObjectKeyFromObject(route), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Parents) != 2 || got.Status.Parents[0].ControllerName != ControllerName {
		t.Fatalf("route status %+v", got.Status)
	}

	// The route moves all traffic to green and a pod goes away.
	got.Spec.Rules[0].BackendRefs[0].Weight = ptr.To[int32](0)
	got.Spec.Rules[0].BackendRefs[1].Weight = ptr.To[int32](100)
	if err := c.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, newK8sPod("llm-blue-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(ctx); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
	if w := s.Fleet.Weights("ns", "llm"); w["blue"] != 0 || w["green"] != 100 {
		t.Errorf("weights %v after the update, want green 100", w)
	}
	if keys := s.Fleet.PodKeys(); strings.Join(keys, ",") != "ns/llm-green-1" {
		t.Errorf("fleet pods %v after the deletion", keys)
	}

	// The route is deleted: the ModelServer is no longer routed.
	if err := c.Delete(ctx, &got); err != nil {
		t.Fatal(err)
	}
	routed, err = s.Sync(ctx)
	if err != nil || len(routed) != 0 || s.Fleet.Weights("ns", "llm") != nil {
		t.Errorf("after deleting the route: routed %v err %v weights %v", routed, err, s.Fleet.Weights("ns", "llm"))
	}
}

// A peer's workload (make bench-peers): Flagger's primary and canary Deployments' pods carry the
// peer label and differ by their app label; the route names Flagger's Services, which select by
// app. The fleet serves them as one model server whose groups are the colors.
func TestSyncServesAPeersPodsThroughTheServicesThatSelectThem(t *testing.T) {
	ctx := context.Background()
	peer := func(name, group string) *corev1.Pod {
		return newK8sPod(name, ready(now.Add(-time.Hour)), withLabels(v1alpha1.LabelModelServer, "", v1alpha1.LabelColor, "",
			v1alpha1.LabelRevision, "", LabelPeerServer, "llm", LabelPeerGroup, group))
	}
	service := func(name, group string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{LabelPeerGroup: group}}}
	}
	route := newRoute([]gatewayv1.HTTPBackendRef{backend("llm-primary", ptr.To[int32](90)), backend("llm-canary", ptr.To[int32](10)),
		backend("other", ptr.To[int32](5))})
	s, _ := newSyncer(t,
		peer("llm-primary-1", "llm-primary"), peer("llm-primary-2", "llm-primary"), peer("llm-1", "llm"),
		service("llm", "llm-primary"), service("llm-primary", "llm-primary"), service("llm-canary", "llm"),
		service("other", "nothing-runs-this"),
		newK8sPod("no-group", withLabels(v1alpha1.LabelModelServer, "", v1alpha1.LabelColor, "", LabelPeerServer, "llm")),
		route,
	)
	routed, err := s.Sync(ctx)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if len(routed) != 1 || routed[0] != (types.NamespacedName{Namespace: "ns", Name: "llm"}) {
		t.Fatalf("routed %v, want ns/llm", routed)
	}
	if keys := s.Fleet.PodKeys(); strings.Join(keys, ",") != "ns/llm-1,ns/llm-primary-1,ns/llm-primary-2" {
		t.Errorf("fleet pods %v, want the three grouped pods", keys)
	}
	if w := s.Fleet.Weights("ns", "llm"); len(w) != 2 || w["llm-primary"] != 90 || w["llm"] != 10 {
		t.Errorf("weights %v, want llm-primary 90 and llm 10", w)
	}
}

func TestSyncLeavesRoutesWithoutModelServersAlone(t *testing.T) {
	ctx := context.Background()
	route := newRoute([]gatewayv1.HTTPBackendRef{backend("llm-blue", ptr.To[int32](100))})
	s, c := newSyncer(t, route) // no ModelServer llm
	if _, err := s.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	var got gatewayv1.HTTPRoute
	if err := c.Get(ctx, client.ObjectKeyFromObject(route), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Parents) != 0 {
		t.Errorf("status written on a route of no ModelServer: %+v", got.Status)
	}
}

func TestHandlers(t *testing.T) {
	clock := now
	f := fleet.New(fleet.Config{Seed: 1}, now)
	p, _ := PodToReplica(newK8sPod("llm-blue-1", ready(now), withArgs("--served-model-name", "llama3")), PodOptions{ColdStart: 30 * time.Second}, now)
	f.SetPod(p)
	f.SetWeights("ns", "llm", map[string]int32{"blue": 100})
	h, err := NewHandler(f, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	t.Run("the warm-up check answers 503 while the model loads", func(t *testing.T) {
		if code, _ := get("/pods/ns/llm-blue-1/v1/models"); code != http.StatusServiceUnavailable {
			t.Errorf("code %d, want 503", code)
		}
	})
	t.Run("the warm-up check answers 404 for an unknown pod", func(t *testing.T) {
		if code, _ := get("/pods/ns/nope/v1/models"); code != http.StatusNotFound {
			t.Errorf("code %d, want 404", code)
		}
	})

	clock = now.Add(30 * time.Second)
	f.Advance(clock)
	f.Submit("ns", "llm", fleet.Request{Arrival: clock, ContextTokens: 64, GeneratedTokens: 4})
	f.Advance(clock.Add(time.Second))

	t.Run("the warm-up check answers 200 with the model list once loaded", func(t *testing.T) {
		code, body := get("/pods/ns/llm-blue-1/v1/models")
		if code != http.StatusOK {
			t.Fatalf("code %d, want 200", code)
		}
		var list struct {
			Data []struct{ ID string } `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Data) != 1 || list.Data[0].ID != "llama3" {
			t.Errorf("body %q (%v), want the model llama3", body, err)
		}
		if code, _ := get("/pods/ns/llm-blue-1/health"); code != http.StatusOK {
			t.Errorf("/health code %d, want 200", code)
		}
	})
	t.Run("/metrics has vLLM and DCGM series with namespace and pod labels", func(t *testing.T) {
		code, body := get("/metrics")
		if code != http.StatusOK {
			t.Fatalf("code %d", code)
		}
		for _, name := range []string{
			fleet.MetricRequestsRunning, fleet.MetricRequestsWaiting, fleet.MetricKVCacheUsage, fleet.MetricGPUCacheUsage,
			fleet.MetricTTFT + "_bucket", fleet.MetricITL + "_bucket", fleet.MetricE2E + "_bucket",
			fleet.MetricRequestSuccess, fleet.MetricPromptTokens, fleet.MetricGenerationTokens, fleet.MetricGPUUtil,
		} {
			found := false
			for _, line := range strings.Split(body, "\n") {
				if strings.HasPrefix(line, name+"{") && strings.Contains(line, `namespace="ns"`) && strings.Contains(line, `pod="llm-blue-1"`) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("no %s series for ns/llm-blue-1", name)
			}
		}
		if !strings.Contains(body, `vllm:request_success_total{finished_reason="stop",model_name="llama3",namespace="ns",pod="llm-blue-1"} 1`) {
			t.Errorf("the finished request is not counted:\n%s", body)
		}
	})
}
