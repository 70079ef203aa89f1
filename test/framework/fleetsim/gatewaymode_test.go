package fleetsim

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func freePort(t *testing.T, ip string) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}

func withIP(ip string) podOpt { return func(p *corev1.Pod) { p.Status.PodIP = ip } }

// With a real Gateway the syncer sets no weights and writes no status, reads where the
// requests go, and serves each pod on its podIP and its ModelServer's port.
func TestSyncWithARealGatewayServesPodsAndOnlyReadsTargets(t *testing.T) {
	ctx := context.Background()
	port := freePort(t, "127.0.0.21")
	ms := modelServer("ns", "llm")
	ms.Spec.Port = port
	route := newRoute([]gatewayv1.HTTPBackendRef{backend("llm-blue", ptr.To[int32](80)), backend("llm-green", ptr.To[int32](20))})
	route.Spec.Hostnames = []gatewayv1.Hostname{"*.example.com"}
	route.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{
		Path:    &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/llm/")},
		Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-Tenant", Value: "a"}},
	}}
	peerPort := freePort(t, "127.0.0.23")
	peer := newK8sPod("peer-1", ready(now.Add(-time.Hour)), withIP("127.0.0.23"), withLabels(v1alpha1.LabelModelServer, "", v1alpha1.LabelColor, "",
		LabelPeerServer, "chat", LabelPeerGroup, "chat-primary"), func(p *corev1.Pod) {
		p.Spec.Containers[1].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: peerPort}}
	})
	s, c := newSyncer(t, ms, route, peer,
		newK8sPod("llm-blue-1", ready(now.Add(-time.Hour)), withIP("127.0.0.21")),
		newK8sPod("llm-green-1", ready(now.Add(-time.Hour)), withIP("127.0.0.22"), withLabels(v1alpha1.LabelColor, "green")),
		newK8sPod("llm-blue-2", ready(now.Add(-time.Hour))), // no IP yet
	)
	s.RealGateway = true
	s.Servers = &PodServers{Fleet: s.Fleet, Log: logr.Discard()}
	defer s.Servers.Close()
	routed, err := s.Sync(ctx)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	llm := types.NamespacedName{Namespace: "ns", Name: "llm"}
	if len(routed) != 1 || routed[0] != llm {
		t.Fatalf("routed %v", routed)
	}
	if w := s.Fleet.Weights("ns", "llm"); w != nil {
		t.Errorf("weights %v set in the fleet: the real Gateway routes", w)
	}
	var got gatewayv1.HTTPRoute
	if err := c.Get(ctx, client.ObjectKeyFromObject(route), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Parents) != 0 {
		t.Errorf("route status written: %+v", got.Status)
	}
	targets := s.Targets()
	want := Target{ModelServer: llm, Route: types.NamespacedName{Namespace: "ns", Name: "route"}, Host: "sim.example.com",
		Path: "/llm/v1/completions", Headers: map[string]string{"X-Tenant": "a"}, Model: "llm"}
	if len(targets) != 1 || targets[0].Host != want.Host || targets[0].Path != want.Path || targets[0].Headers["X-Tenant"] != "a" ||
		targets[0].Route != want.Route || targets[0].Model != "llm" || targets[0].ModelServer != llm {
		t.Errorf("targets %+v, want %+v", targets, want)
	}
	p := strconv.Itoa(int(port))
	addrs := s.Servers.Addresses()
	if len(addrs) != 3 || addrs["ns/llm-blue-1"] != "127.0.0.21:"+p || addrs["ns/llm-green-1"] != "127.0.0.22:"+p ||
		addrs["ns/peer-1"] != "127.0.0.23:"+strconv.Itoa(int(peerPort)) {
		t.Errorf("pod servers at %v, want the ModelServer's pods on port %s and the peer's on its containerPort %d", addrs, p, peerPort)
	}
	if r := do(t, "GET", "http://127.0.0.21:"+p+"/health", ""); r.code != 200 || r.header.Get(HeaderPod) != "ns/llm-blue-1" {
		t.Errorf("GET /health of llm-blue-1: %d %v", r.code, r.header)
	}

	// The pod goes: its server closes.
	if err := c.Delete(ctx, newK8sPod("llm-blue-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Servers.Addresses()["ns/llm-blue-1"]; ok {
		t.Error("the deleted pod is still served")
	}
}

func TestRouteTargetPaths(t *testing.T) {
	for prefix, want := range map[string]string{
		"/": "/v1/completions", "/v1": "/v1/completions", "/v1/": "/v1/completions", "/v1/completions": "/v1/completions",
		"/v1/chat": "/v1/chat/completions", "/llm": "/llm/v1/completions", "/llm/": "/llm/v1/completions", "/v1x": "/v1x/v1/completions",
	} {
		if got := prefixedPath(prefix); got != want {
			t.Errorf("PathPrefix %s: %s, want %s", prefix, got, want)
		}
	}
}

func TestRouteTargets(t *testing.T) {
	known := map[types.NamespacedName]bool{{Namespace: "ns", Name: "llm"}: true, {Namespace: "ns", Name: "chat"}: true}
	route := newRoute(
		[]gatewayv1.HTTPBackendRef{backend("llm-blue", ptr.To[int32](0)), backend("llm-green", ptr.To[int32](0))},
		[]gatewayv1.HTTPBackendRef{backend("chat-blue", nil)},
		[]gatewayv1.HTTPBackendRef{backend("llm-blue", nil)},
	)
	route.Spec.Rules[1].Matches = []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchExact), Value: ptr.To("/chat/v1/chat/completions")}}}
	got := RouteTargets(route, known, nil, nil)
	if len(got) != 2 {
		t.Fatalf("targets %v", got)
	}
	if llm := got[types.NamespacedName{Namespace: "ns", Name: "llm"}]; llm.Path != "/v1/completions" || llm.Host != "" {
		t.Errorf("llm (weights 0 still routed by its first rule, no match): %+v", llm)
	}
	if chat := got[types.NamespacedName{Namespace: "ns", Name: "chat"}]; chat.Path != "/chat/v1/chat/completions" {
		t.Errorf("chat (an Exact match): %+v", chat)
	}
}

// The header rule of spec.rollout.headerRoute, which modelship puts before the weighted rule,
// is not where the users' requests go: they carry no header and follow the weights.
func TestRouteTargetsLeaveTheHeaderRuleToTesters(t *testing.T) {
	llm := types.NamespacedName{Namespace: "ns", Name: "llm"}
	route := newRoute(
		[]gatewayv1.HTTPBackendRef{backend("llm-green", nil)},
		[]gatewayv1.HTTPBackendRef{backend("llm-blue", ptr.To[int32](100)), backend("llm-green", ptr.To[int32](0))},
	)
	name := gatewayv1.SectionName((&v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Name: "llm"}}).HeaderRuleName())
	route.Spec.Rules[0].Name = &name
	route.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x-canary", Value: "always"}}}}
	got := RouteTargets(route, map[types.NamespacedName]bool{llm: true}, nil, nil)
	if tg, ok := got[llm]; !ok || len(tg.Headers) != 0 {
		t.Errorf("llm's target %+v (found %t); want the weighted rule's, with no header", tg, ok)
	}
}
