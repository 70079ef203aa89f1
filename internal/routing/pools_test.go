package routing

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
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
	sel := p.Spec.Selector.MatchLabels
	if sel[v1alpha1.LabelModelServer] != "llama" || sel[v1alpha1.LabelColor] != "green" || len(sel) != 2 {
		t.Errorf("selector %v, want the ModelServer's and green's labels", sel)
	}
	if ports := p.Spec.TargetPorts; len(ports) != 1 || ports[0].Number != 8000 {
		t.Errorf("targetPorts %v, want 8000", ports)
	}
	epp := p.Spec.EndpointPickerRef
	if epp == nil || epp.Name != "llama-green-epp" || epp.FailureMode != inferencev1.EndpointPickerFailOpen || epp.Port == nil || epp.Port.Number != 9002 {
		t.Errorf("endpointPickerRef %+v", epp)
	}
	// Written as the API server stores it: the fields modelship sets, no others.
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(u, "spec")
	for k := range spec {
		if !slices.Contains([]string{"selector", "targetPorts", "endpointPickerRef"}, k) {
			t.Errorf("spec.%s written: %v", k, spec[k])
		}
	}
}

func TestRouteOnPoolsPointsAtInferencePoolsWithoutPorts(t *testing.T) {
	ms := poolModelServer()
	r := OwnedRoute(ms, Direct(ms, weights(100, 0)))
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
	if _, err := SetBackendWeights(route, svc, nil, Direct(svc, weights(100, 0))); err != nil {
		t.Fatal(err)
	}
	pools := poolModelServer()
	changed, err := SetBackendWeights(route, pools, nil, Direct(pools, weights(100, 0)))
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
				if _, _, mine := ownedRef(pools, b.BackendObjectReference); mine {
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

func pool(name string, conds ...metav1.Condition) *inferencev1.InferencePool {
	p := NewPool()
	p.Name = name
	if len(conds) > 0 {
		p.Status.Parents = []inferencev1.ParentStatus{{ParentRef: inferencev1.ParentReference{Name: "gw"}, Conditions: conds}}
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
		pools  map[v1alpha1.Color]*inferencev1.InferencePool
		status metav1.ConditionStatus
	}{
		{"both pools accepted", accepted, map[v1alpha1.Color]*inferencev1.InferencePool{v1alpha1.Blue: pool("b", ok), v1alpha1.Green: pool("g", ok)}, metav1.ConditionTrue},
		{"a pool's refs unresolved", accepted, map[v1alpha1.Color]*inferencev1.InferencePool{v1alpha1.Blue: pool("b", ok), v1alpha1.Green: pool("g", ok, resolvedNo)}, metav1.ConditionFalse},
		{"a pool nobody reported on", accepted, map[v1alpha1.Color]*inferencev1.InferencePool{v1alpha1.Blue: pool("b", ok), v1alpha1.Green: pool("g")}, metav1.ConditionFalse},
		{"a pool missing", accepted, map[v1alpha1.Color]*inferencev1.InferencePool{v1alpha1.Blue: pool("b", ok)}, metav1.ConditionFalse},
		{"no Gateway at all", unanswered, map[v1alpha1.Color]*inferencev1.InferencePool{v1alpha1.Blue: pool("b"), v1alpha1.Green: pool("g")}, metav1.ConditionUnknown},
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

// kinds lists a rule's backendRefs as "kind name weight".
func kinds(rule gatewayv1.HTTPRouteRule) []string {
	var out []string
	for _, b := range rule.BackendRefs {
		out = append(out, fmt.Sprintf("%s %s %d", ptr.Deref(b.Kind, "Service"), b.Name, ptr.Deref(b.Weight, 1)))
	}
	return out
}

func TestAChangeOfBackendKeepsTheOldRefsCarryingUntilTheNewOnesAreReady(t *testing.T) {
	svc, pools := newModelServer(), poolModelServer()
	tests := []struct {
		name        string
		route       func() *gatewayv1.HTTPRoute
		rule        int
		set         func(*gatewayv1.HTTPRoute, Backends) bool
		wantWaiting []string
		wantDone    []string
	}{
		{
			name:  "the owned route names the pools at weight 0 beside the Services, then only the pools",
			route: func() *gatewayv1.HTTPRoute { return OwnedRoute(svc, Direct(svc, weights(80, 20))) },
			set: func(r *gatewayv1.HTTPRoute, b Backends) bool {
				fresh := OwnedRoute(pools, b)
				changed := !equality(r.Spec.Rules[0], fresh.Spec.Rules[0])
				r.Spec = fresh.Spec
				return changed
			},
			wantWaiting: []string{"Service llama-blue 80", "Service llama-green 20", "InferencePool llama-blue 0", "InferencePool llama-green 0"},
			wantDone:    []string{"InferencePool llama-blue 80", "InferencePool llama-green 20"},
		},
		{
			name: "a user's route keeps its own backend and gets the pools at weight 0 beside the Services, then only the pools",
			route: func() *gatewayv1.HTTPRoute {
				r := userRoute()
				if _, err := SetBackendWeights(r, svc, ptr.To(gatewayv1.SectionName("llm")), Direct(svc, weights(80, 20))); err != nil {
					t.Fatal(err)
				}
				return r
			},
			rule: 1,
			set: func(r *gatewayv1.HTTPRoute, b Backends) bool {
				changed, err := SetBackendWeights(r, pools, ptr.To(gatewayv1.SectionName("llm")), b)
				if err != nil {
					t.Fatal(err)
				}
				return changed
			},
			wantWaiting: []string{"Service legacy 5", "Service llama-blue 80", "Service llama-green 20", "InferencePool llama-blue 0", "InferencePool llama-green 0"},
			wantDone:    []string{"Service legacy 5", "InferencePool llama-blue 80", "InferencePool llama-green 20"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.route()
			if got := Carrier(r, pools); got != v1alpha1.BackendService {
				t.Fatalf("before the switch the Services carry, Carrier says %s", got)
			}
			waiting := Backends{Weights: weights(80, 20), Carrier: v1alpha1.BackendService, Pending: v1alpha1.BackendInferencePool}
			if !tt.set(r, waiting) {
				t.Fatal("adding the pending pools reported no change")
			}
			if got := kinds(r.Spec.Rules[tt.rule]); !slices.Equal(got, tt.wantWaiting) {
				t.Errorf("while waiting the rule holds %v, want %v", got, tt.wantWaiting)
			}
			if got := Carrier(r, pools); got != v1alpha1.BackendService {
				t.Errorf("while waiting Carrier says %s, want the Services", got)
			}
			if w := Weights(r, pools); w[v1alpha1.Blue] != 80 || w[v1alpha1.Green] != 20 {
				t.Errorf("while waiting the weights read %v, want 80/20", w)
			}
			if tt.set(r, waiting) {
				t.Error("writing the same waiting rule twice reported a change")
			}
			if !tt.set(r, Direct(pools, weights(80, 20))) {
				t.Fatal("switching to the pools reported no change")
			}
			if got := kinds(r.Spec.Rules[tt.rule]); !slices.Equal(got, tt.wantDone) {
				t.Errorf("after the switch the rule holds %v, want %v", got, tt.wantDone)
			}
			if got := Carrier(r, pools); got != v1alpha1.BackendInferencePool {
				t.Errorf("after the switch Carrier says %s, want the pools", got)
			}
			// Back to Services: the pools carry until the caller switches.
			if got := Carrier(r, svc); got != v1alpha1.BackendInferencePool {
				t.Errorf("back to Services, Carrier says %s before the switch, want the pools", got)
			}
		})
	}
}

func equality(a, b gatewayv1.HTTPRouteRule) bool {
	return slices.Equal(kinds(a), kinds(b))
}

func TestHoldsAndRemovingFromOtherRules(t *testing.T) {
	ms := newModelServer()
	r := userRoute()
	llm, docs := ptr.To(gatewayv1.SectionName("llm")), ptr.To(gatewayv1.SectionName("docs"))
	if Holds(r, ms, nil) {
		t.Fatal("a route without our refs holds our traffic")
	}
	if _, err := SetBackendWeights(r, ms, docs, Direct(ms, weights(100, 0))); err != nil {
		t.Fatal(err)
	}
	if _, err := SetBackendWeights(r, ms, llm, Direct(ms, weights(100, 0))); err != nil {
		t.Fatal(err)
	}
	if !Holds(r, ms, llm) || !Holds(r, ms, docs) || !Holds(r, ms, nil) {
		t.Fatal("the rules with our refs do not hold our traffic")
	}
	if !RemoveBackendsOutside(r, ms, "llm") {
		t.Fatal("nothing removed from the docs rule")
	}
	if Holds(r, ms, docs) || !Holds(r, ms, llm) {
		t.Errorf("after removing outside llm: docs %v llm %v", kinds(r.Spec.Rules[0]), kinds(r.Spec.Rules[1]))
	}
	if got := kinds(r.Spec.Rules[0]); !slices.Equal(got, []string{"Service legacy 5"}) {
		t.Errorf("the docs rule holds %v, want only the user's backend", got)
	}
	if _, err := SetBackendWeights(r, ms, llm, Direct(ms, weights(0, 0))); err != nil {
		t.Fatal(err)
	}
	if Holds(r, ms, llm) {
		t.Error("refs at weight 0 hold traffic")
	}
}

func TestSharesFindsAnotherModelServerInTheRuleOnly(t *testing.T) {
	first, second := newModelServer(), newModelServer()
	second.Name = "mistral"
	llm, docs := ptr.To(gatewayv1.SectionName("llm")), ptr.To(gatewayv1.SectionName("docs"))
	r := userRoute()
	if _, err := SetBackendWeights(r, first, llm, Direct(first, weights(100, 0))); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ms   *v1alpha1.ModelServer
		rule *gatewayv1.SectionName
		want bool
	}{
		{"another ModelServer for the rule the first one holds", second, llm, true},
		{"another ModelServer for another rule", second, docs, false},
		{"another ModelServer without a rule name (the first rule)", second, nil, false},
		{"the first ModelServer itself", first, llm, false},
	}
	for _, c := range cases {
		other := first
		if c.ms == first {
			other = second
		}
		if got := Shares(r, c.ms, other, c.rule); got != c.want {
			t.Errorf("%s: Shares = %v, want %v", c.name, got, c.want)
		}
	}
	// Once both are in the rule (written before the check existed), neither is refused.
	if _, err := SetBackendWeights(r, second, llm, Direct(second, weights(100, 0))); err != nil {
		t.Fatal(err)
	}
	if Shares(r, second, first, llm) || Shares(r, first, second, llm) {
		t.Error("a rule both ModelServers already hold is reported for one of them")
	}
}
