package fleetsim

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/fleet"
)

func traefikRef(name string, weight *int32) gatewayv1.HTTPBackendRef {
	return backend(name, weight, func(b *gatewayv1.HTTPBackendRef) {
		b.Group = ptr.To(gatewayv1.Group(TraefikGroup))
		b.Kind = ptr.To(gatewayv1.Kind(TraefikKind))
		b.Port = nil
	})
}

func weightsOf(r *gatewayv1.HTTPRoute) map[string]int32 {
	out := map[string]int32{}
	for _, rule := range r.Spec.Rules {
		for _, ref := range rule.BackendRefs {
			out[string(ref.Name)] += ptr.Deref(ref.Weight, 1)
		}
	}
	return out
}

func TestExpandTraefikServices(t *testing.T) {
	services := map[types.NamespacedName][]WeightedService{
		{Namespace: "ns", Name: "llm"}:   {{"llm-stable", 80}, {"llm-canary", 20}},
		{Namespace: "ns", Name: "zero"}:  {{"a", 0}, {"b", 0}},
		{Namespace: "ns", Name: "three"}: {{"x", 1}, {"y", 2}},
	}
	for _, tt := range []struct {
		name string
		refs []gatewayv1.HTTPBackendRef
		want map[string]int32
	}{
		{"a route's only backend, a TraefikService, gives its services' weights",
			[]gatewayv1.HTTPBackendRef{traefikRef("llm", nil)}, map[string]int32{"llm-stable": 80, "llm-canary": 20}},
		{"a TraefikService beside a Service shares the rule by their weights, then by its own",
			[]gatewayv1.HTTPBackendRef{traefikRef("three", ptr.To[int32](1)), backend("web", ptr.To[int32](1))},
			map[string]int32{"x": 1, "y": 2, "web": 3}},
		{"a TraefikService whose weights are all 0 and an unknown one serve nothing",
			[]gatewayv1.HTTPBackendRef{traefikRef("zero", nil), traefikRef("missing", nil), backend("web", nil)},
			map[string]int32{"web": 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			route := newRoute(tt.refs)
			before := route.DeepCopy()
			got := weightsOf(ExpandTraefikServices(route, services))
			if len(got) != len(tt.want) {
				t.Fatalf("weights %v, want %v", got, tt.want)
			}
			for k, w := range tt.want {
				if got[k] != w {
					t.Fatalf("weights %v, want %v", got, tt.want)
				}
			}
			if !reflect.DeepEqual(route, before) {
				t.Error("the route passed in was changed")
			}
		})
	}
	plain := newRoute([]gatewayv1.HTTPBackendRef{backend("llm-blue", nil)})
	if ExpandTraefikServices(plain, services) != plain {
		t.Error("a route without TraefikService backendRefs is copied")
	}
}

func TestWeightedServices(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "llm", "namespace": "ns"},
		"spec": map[string]any{"weighted": map[string]any{"services": []any{
			map[string]any{"name": "llm-stable", "port": int64(8000), "weight": int64(90)},
			map[string]any{"name": "llm-canary", "port": int64(8000), "weight": float64(10)},
			map[string]any{"name": "no-weight", "kind": "Service"},
			map[string]any{"name": "nested", "kind": "TraefikService", "weight": int64(5)},
			map[string]any{"name": "elsewhere", "namespace": "other", "weight": int64(5)},
		}}},
	}}
	got := WeightedServices(u)
	want := []WeightedService{{"llm-stable", 90}, {"llm-canary", 10}, {"no-weight", 1}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// An Argo Rollout's workload (make bench-peers): the stable and canary ReplicaSets' pods differ
// by their pod template hash, the stable and canary Services select by app and hash, and the
// route names the TraefikService whose weights Argo Rollouts moves. The fleet serves the pods
// as one model server whose groups are <app>-<hash>, split by the TraefikService's weights.
func TestSyncServesAnArgoRolloutThroughItsTraefikService(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	tsGVK := schema.GroupVersionKind{Group: TraefikGroup, Version: "v1alpha1", Kind: TraefikKind}
	mapper := meta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.AllKnownTypes() {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	mapper.Add(tsGVK, meta.RESTScopeNamespace)
	ts := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "llm", "namespace": "ns"},
		"spec": map[string]any{"weighted": map[string]any{"services": []any{
			map[string]any{"name": "llm-stable", "port": int64(8000), "weight": int64(75)},
			map[string]any{"name": "llm-canary", "port": int64(8000), "weight": int64(25)},
		}}},
	}}
	ts.SetGroupVersionKind(tsGVK)
	pod := func(name, hash string) *corev1.Pod {
		return newK8sPod(name, ready(now.Add(-time.Hour)), withLabels(v1alpha1.LabelModelServer, "", v1alpha1.LabelColor, "",
			v1alpha1.LabelRevision, "", LabelPeerServer, "llm", LabelPeerGroup, "llm", LabelPeerRevision, hash))
	}
	service := func(name string, selector map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ServiceSpec{Selector: selector}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(
		pod("llm-aaa-1", "aaa"), pod("llm-aaa-2", "aaa"), pod("llm-bbb-1", "bbb"),
		service("llm-stable", map[string]string{LabelPeerGroup: "llm", LabelPeerRevision: "aaa"}),
		service("llm-canary", map[string]string{LabelPeerGroup: "llm", LabelPeerRevision: "bbb"}),
		ts, newRoute([]gatewayv1.HTTPBackendRef{traefikRef("llm", nil)}),
	).WithStatusSubresource(&gatewayv1.HTTPRoute{}).Build()
	s := &Syncer{Client: c, Fleet: fleet.New(fleet.Config{Seed: 1}, now), Pods: PodOptions{ColdStart: 30 * time.Second},
		Now: func() time.Time { return now }}
	routed, err := s.Sync(ctx)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if len(routed) != 1 || routed[0] != (types.NamespacedName{Namespace: "ns", Name: "llm"}) {
		t.Fatalf("routed %v, want ns/llm", routed)
	}
	if keys := s.Fleet.PodKeys(); strings.Join(keys, ",") != "ns/llm-aaa-1,ns/llm-aaa-2,ns/llm-bbb-1" {
		t.Errorf("fleet pods %v", keys)
	}
	if w := s.Fleet.Weights("ns", "llm"); len(w) != 2 || w["llm-aaa"] != 75 || w["llm-bbb"] != 25 {
		t.Errorf("weights %v, want llm-aaa 75 and llm-bbb 25", w)
	}
}
