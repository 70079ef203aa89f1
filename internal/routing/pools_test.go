package routing

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func poolModelServer() *v1alpha1.ModelServer {
	ms := newModelServer()
	ms.Spec.Gateway.Backend = v1alpha1.BackendInferencePool
	ms.Spec.Gateway.InferencePool = &v1alpha1.InferencePoolSpec{EndpointPickerRef: v1alpha1.EndpointPickerRef{
		Name: "llama-{color}-epp", Port: ptr.To(int32(9002)), FailureMode: "FailOpen"}}
	return ms
}

func TestPoolsSelectTheirColorAndNameTheirPicker(t *testing.T) {
	ms := poolModelServer()
	p := InferencePool(ms, v1alpha1.Green, 8000)
	if p.GetName() != "llama-green" || p.GetNamespace() != "ml" || p.GroupVersionKind() != PoolGVK {
		t.Fatalf("pool %s/%s %v", p.GetNamespace(), p.GetName(), p.GroupVersionKind())
	}
	sel, _, _ := unstructured.NestedStringMap(p.Object, "spec", "selector", "matchLabels")
	if sel[v1alpha1.LabelModelServer] != "llama" || sel[v1alpha1.LabelColor] != "green" || len(sel) != 2 {
		t.Errorf("selector %v, want the ModelServer's and green's labels", sel)
	}
	ports, _, _ := unstructured.NestedSlice(p.Object, "spec", "targetPorts")
	if len(ports) != 1 || ports[0].(map[string]any)["number"] != int64(8000) {
		t.Errorf("targetPorts %v, want 8000", ports)
	}
	epp, _, _ := unstructured.NestedMap(p.Object, "spec", "endpointPickerRef")
	if epp["name"] != "llama-green-epp" || epp["failureMode"] != "FailOpen" || epp["port"].(map[string]any)["number"] != int64(9002) {
		t.Errorf("endpointPickerRef %v", epp)
	}
}

func TestRouteOnPoolsPointsAtInferencePoolsWithoutPorts(t *testing.T) {
	ms := poolModelServer()
	r := OwnedRoute(ms, weights(100, 0))
	for i, b := range r.Spec.Rules[0].BackendRefs {
		if *b.Group != InferenceGroup || *b.Kind != PoolKind || string(b.Name) != ms.PoolName(Colors[i]) || b.Port != nil {
			t.Errorf("backendRef %d = %+v, want InferencePool %s without a port", i, b.BackendObjectReference, ms.PoolName(Colors[i]))
		}
	}
	if w := Weights(r, ms); w[v1alpha1.Blue] != 100 || w[v1alpha1.Green] != 0 {
		t.Errorf("weights %v", w)
	}
}

func TestSwitchingToPoolsReplacesTheServiceRefsInAUserRoute(t *testing.T) {
	svc := newModelServer()
	route := userRoute()
	if _, err := SetBackendWeights(route, svc, nil, weights(100, 0)); err != nil {
		t.Fatal(err)
	}
	pools := poolModelServer()
	changed, err := SetBackendWeights(route, pools, nil, weights(100, 0))
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	var ours, other int
	for _, rule := range route.Spec.Rules {
		for _, b := range rule.BackendRefs {
			switch refKind(b.BackendObjectReference) {
			case v1alpha1.BackendInferencePool:
				ours++
			case v1alpha1.BackendService:
				if _, mine, _ := ownedRef(pools, b.BackendObjectReference); mine {
					t.Errorf("a Service ref of the ModelServer stayed: %s", b.Name)
				} else {
					other++
				}
			}
		}
	}
	if ours != 2 || other == 0 {
		t.Errorf("want 2 pool refs and the user's own backends kept; got %d pool refs, %d others", ours, other)
	}
	if !RemoveBackends(route, pools) {
		t.Error("RemoveBackends found no pool refs to remove")
	}
}

func pool(name string, conds ...metav1.Condition) *unstructured.Unstructured {
	p := NewPool()
	p.SetName(name)
	if len(conds) > 0 {
		cs := make([]any, 0, len(conds))
		for _, c := range conds {
			cs = append(cs, map[string]any{"type": c.Type, "status": string(c.Status), "reason": c.Reason, "message": c.Message})
		}
		p.Object["status"] = map[string]any{"parents": []any{map[string]any{"parentRef": map[string]any{"name": "gw"}, "conditions": cs}}}
	}
	return p
}

func TestPoolsJoinTheRouteAcceptance(t *testing.T) {
	accepted := AcceptedCondition(&gatewayv1.HTTPRoute{Status: gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{{
		ParentRef: gatewayv1.ParentReference{Name: "gw"}, Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue}}}}}}}, 1)
	unanswered := AcceptedCondition(&gatewayv1.HTTPRoute{}, 1)
	ok := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue}
	resolvedNo := metav1.Condition{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "InvalidExtensionRef", Message: "no Service llama-green-epp"}
	cases := []struct {
		name   string
		route  metav1.Condition
		pools  map[v1alpha1.Color]*unstructured.Unstructured
		status metav1.ConditionStatus
	}{
		{"both pools accepted", accepted, map[v1alpha1.Color]*unstructured.Unstructured{v1alpha1.Blue: pool("b", ok), v1alpha1.Green: pool("g", ok)}, metav1.ConditionTrue},
		{"a pool's refs unresolved", accepted, map[v1alpha1.Color]*unstructured.Unstructured{v1alpha1.Blue: pool("b", ok), v1alpha1.Green: pool("g", ok, resolvedNo)}, metav1.ConditionFalse},
		{"a pool nobody reported on", accepted, map[v1alpha1.Color]*unstructured.Unstructured{v1alpha1.Blue: pool("b", ok), v1alpha1.Green: pool("g")}, metav1.ConditionFalse},
		{"a pool missing", accepted, map[v1alpha1.Color]*unstructured.Unstructured{v1alpha1.Blue: pool("b", ok)}, metav1.ConditionFalse},
		{"no Gateway at all", unanswered, map[v1alpha1.Color]*unstructured.Unstructured{v1alpha1.Blue: pool("b"), v1alpha1.Green: pool("g")}, metav1.ConditionUnknown},
	}
	for _, c := range cases {
		got := WithPools(c.route, c.pools)
		if got.Status != c.status {
			t.Errorf("%s: %s (%s: %s), want %s", c.name, got.Status, got.Reason, got.Message, c.status)
		}
		if got.Status == metav1.ConditionFalse && got.Reason != v1alpha1.ReasonPoolNotAccepted {
			t.Errorf("%s: reason %s", c.name, got.Reason)
		}
	}
}
