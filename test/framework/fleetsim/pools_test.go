package fleetsim

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func poolRef(name string, weight int32) gatewayv1.HTTPBackendRef {
	return backend(name, ptr.To(weight), func(b *gatewayv1.HTTPBackendRef) {
		b.Group, b.Kind, b.Port = ptr.To(gatewayv1.Group(PoolGroup)), ptr.To(gatewayv1.Kind(PoolKind)), nil
	})
}

func TestRouteWeightsFollowInferencePoolsToTheColorTheySelect(t *testing.T) {
	llm := types.NamespacedName{Namespace: "ns", Name: "llm"}
	known := map[types.NamespacedName]bool{llm: true}
	blue, _ := PoolTargetOf("ns", map[string]string{v1alpha1.LabelModelServer: "llm", v1alpha1.LabelColor: "blue"})
	green, _ := PoolTargetOf("ns", map[string]string{v1alpha1.LabelModelServer: "llm", v1alpha1.LabelColor: "green"})
	pools := map[types.NamespacedName]PoolTarget{{Namespace: "ns", Name: "pool-a"}: blue, {Namespace: "ns", Name: "pool-b"}: green}
	got := RouteWeights(newRoute([]gatewayv1.HTTPBackendRef{poolRef("pool-a", 70), poolRef("pool-b", 30), poolRef("unknown-pool", 5)}), known, pools, nil)
	if w := got[llm]; len(got) != 1 || w["blue"] != 70 || w["green"] != 30 {
		t.Errorf("weights %v, want llm blue 70 green 30 (pools resolved by their selectors, unknown pools ignored)", got)
	}
	if _, ok := PoolTargetOf("ns", map[string]string{"app": "vllm"}); ok {
		t.Error("a selector without the ModelServer and color labels resolved to pods")
	}
}

func TestPoolStatusSaysAcceptedForEachGatewayOfItsRoutes(t *testing.T) {
	pool := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "llm-blue", "namespace": "ns", "generation": int64(3)}}}
	gw := gatewayv1.ParentReference{Name: "inference", Namespace: ptr.To(gatewayv1.Namespace("gw-system"))}
	now := metav1.NewTime(time.Unix(1700000000, 0))
	parents := PoolParents(pool, []gatewayv1.ParentReference{gw}, true, now)
	if len(parents) != 1 {
		t.Fatalf("parents %v", parents)
	}
	p := parents[0].(map[string]any)
	if ns, _, _ := unstructured.NestedString(p, "parentRef", "namespace"); ns != "gw-system" {
		t.Errorf("parentRef %v", p["parentRef"])
	}
	conds := p["conditions"].([]any)
	for _, c := range conds {
		cm := c.(map[string]any)
		if cm["status"] != "True" || cm["observedGeneration"] != int64(3) {
			t.Errorf("condition %v, want True at generation 3", cm)
		}
	}
	// Written back, the same answer is no change; an unresolvable selector is.
	_ = unstructured.SetNestedSlice(pool.Object, parents, "status", "parents")
	if again := PoolParents(pool, []gatewayv1.ParentReference{gw}, true, metav1.NewTime(now.Add(time.Minute))); !sameParents(parents, again) {
		t.Errorf("a second pass changed the status: %v", again)
	}
	if bad := PoolParents(pool, []gatewayv1.ParentReference{gw}, false, now); sameParents(parents, bad) {
		t.Error("an unresolvable pool got the same status as a resolved one")
	}
}
