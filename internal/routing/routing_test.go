package routing

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func newModelServer() *v1alpha1.ModelServer {
	return &v1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: "ml"},
		Spec: v1alpha1.ModelServerSpec{Port: 8000, Gateway: v1alpha1.GatewaySpec{
			ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}},
			Hostnames:  []gatewayv1.Hostname{"llm.example.com"},
		}},
	}
}

func weights(blue, green int32) map[v1alpha1.Color]int32 {
	return map[v1alpha1.Color]int32{v1alpha1.Blue: blue, v1alpha1.Green: green}
}

func TestOwnedRouteSendsTrafficByWeightToBothColorServices(t *testing.T) {
	ms := newModelServer()
	r := OwnedRoute(ms, Direct(ms, weights(90, 10)))
	if r.Name != "llama" || r.Namespace != "ml" {
		t.Fatalf("route is %s/%s, want ml/llama", r.Namespace, r.Name)
	}
	if len(r.Spec.ParentRefs) != 1 || r.Spec.ParentRefs[0].Name != "gw" || r.Spec.Hostnames[0] != "llm.example.com" {
		t.Errorf("parentRefs/hostnames not copied: %+v %+v", r.Spec.ParentRefs, r.Spec.Hostnames)
	}
	if got := *r.Spec.Rules[0].Matches[0].Path.Value; got != "/" {
		t.Errorf("empty matches should match everything, got path %q", got)
	}
	got := Weights(r, ms)
	if got[v1alpha1.Blue] != 90 || got[v1alpha1.Green] != 10 {
		t.Errorf("weights = %v, want blue 90 green 10", got)
	}
	for _, b := range r.Spec.Rules[0].BackendRefs {
		if *b.Port != 8000 {
			t.Errorf("backend %s port %d, want 8000", b.Name, *b.Port)
		}
	}
}

func userRoute() *gatewayv1.HTTPRoute {
	other := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "legacy", Port: ptr.To(gatewayv1.PortNumber(80))}, Weight: ptr.To(int32(5))}}
	filter := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Add: []gatewayv1.HTTPHeader{{Name: "x-team", Value: "ml"}}}}
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "ml"},
		Spec: gatewayv1.HTTPRouteSpec{Rules: []gatewayv1.HTTPRouteRule{
			{Name: ptr.To(gatewayv1.SectionName("docs")), BackendRefs: []gatewayv1.HTTPBackendRef{other}},
			{Name: ptr.To(gatewayv1.SectionName("llm")), Filters: []gatewayv1.HTTPRouteFilter{filter}, BackendRefs: []gatewayv1.HTTPBackendRef{other}},
		}},
	}
}

func TestSetBackendWeights(t *testing.T) {
	ms := newModelServer()
	tests := []struct {
		name      string
		rule      *gatewayv1.SectionName
		prepare   func(*gatewayv1.HTTPRoute)
		wantRule  int
		wantError bool
	}{
		{name: "adds our backends to the named rule and leaves the other backend and filter alone", rule: ptr.To(gatewayv1.SectionName("llm")), wantRule: 1},
		{name: "adds our backends to the first rule when no rule is named or references us", wantRule: 0},
		{name: "updates the rule that already references our services", prepare: func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[1].BackendRefs = append(r.Spec.Rules[1].BackendRefs, backendRef(ms, v1alpha1.Blue, v1alpha1.BackendService, 100))
		}, wantRule: 1},
		{name: "fails with the field named when the rule name does not exist", rule: ptr.To(gatewayv1.SectionName("nope")), wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := userRoute()
			if tt.prepare != nil {
				tt.prepare(r)
			}
			changed, err := SetBackendWeights(r, ms, tt.rule, Direct(ms, weights(75, 25)))
			if tt.wantError {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil || !changed {
				t.Fatalf("changed=%v err=%v", changed, err)
			}
			rule := r.Spec.Rules[tt.wantRule]
			if rule.BackendRefs[0].Name != "legacy" || *rule.BackendRefs[0].Weight != 5 {
				t.Errorf("the user's backend changed: %+v", rule.BackendRefs[0])
			}
			if len(rule.BackendRefs) != 3 {
				t.Errorf("want the user's backend plus our two, got %d", len(rule.BackendRefs))
			}
			if w := Weights(&gatewayv1.HTTPRoute{Spec: gatewayv1.HTTPRouteSpec{Rules: []gatewayv1.HTTPRouteRule{rule}}}, ms); w[v1alpha1.Blue] != 75 || w[v1alpha1.Green] != 25 {
				t.Errorf("weights = %v", w)
			}
			if tt.wantRule == 1 && len(rule.Filters) != 1 {
				t.Errorf("the user's filter was lost")
			}
			other := r.Spec.Rules[1-tt.wantRule]
			if len(other.BackendRefs) != 1 {
				t.Errorf("the other rule changed: %+v", other.BackendRefs)
			}
			again, _ := SetBackendWeights(r, ms, tt.rule, Direct(ms, weights(75, 25)))
			if again {
				t.Errorf("setting the same weights twice reported a change")
			}
		})
	}
}

func TestAcceptedCondition(t *testing.T) {
	parent := func(status metav1.ConditionStatus, gen int64) gatewayv1.RouteParentStatus {
		return gatewayv1.RouteParentStatus{ParentRef: gatewayv1.ParentReference{Name: "gw"}, Conditions: []metav1.Condition{{
			Type: string(gatewayv1.RouteConditionAccepted), Status: status, ObservedGeneration: gen, Reason: "R", Message: "m",
		}}}
	}
	tests := []struct {
		name    string
		route   *gatewayv1.HTTPRoute
		want    metav1.ConditionStatus
		wantWhy string
	}{
		{"is unknown while the route does not exist", nil, metav1.ConditionUnknown, v1alpha1.ReasonNoGatewayAnswer},
		{"is unknown while no gateway has answered", &gatewayv1.HTTPRoute{}, metav1.ConditionUnknown, v1alpha1.ReasonNoGatewayAnswer},
		{"is true when every parent accepted the current generation", &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{parent(metav1.ConditionTrue, 2)}}}}, metav1.ConditionTrue, v1alpha1.ReasonAccepted},
		{"is unknown when the answer is for an older generation", &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Status: gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{parent(metav1.ConditionTrue, 2)}}}}, metav1.ConditionUnknown, v1alpha1.ReasonNoGatewayAnswer},
		{"is false when a parent refused", &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{parent(metav1.ConditionTrue, 1), parent(metav1.ConditionFalse, 1)}}}}, metav1.ConditionFalse, v1alpha1.ReasonNotAccepted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AcceptedCondition(tt.route, 7)
			if got.Status != tt.want || got.Reason != tt.wantWhy || got.ObservedGeneration != 7 {
				t.Errorf("got %s/%s gen %d, want %s/%s", got.Status, got.Reason, got.ObservedGeneration, tt.want, tt.wantWhy)
			}
		})
	}
}

func TestWithResolvedRefsHoldsOnAnAcceptedRouteWhoseBackendsAGatewayDidNotResolve(t *testing.T) {
	ms := newModelServer()
	green := ms.ServiceName(v1alpha1.Green)
	route := func(parent gatewayv1.ParentReference, gen int64, conds ...metav1.Condition) *gatewayv1.HTTPRoute {
		r := OwnedRoute(ms, Direct(ms, weights(90, 10)))
		r.Generation = 3
		for i := range conds {
			conds[i].ObservedGeneration = gen
		}
		r.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: parent, ControllerName: "traefik.io/gateway-controller", Conditions: conds}}
		return r
	}
	accepted := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}
	notFound := metav1.Condition{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "BackendNotFound",
		Message: "Cannot load HTTPBackendRef ml/" + green + ": endpointslices not found"}
	resolved := metav1.Condition{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs"}
	gw := gatewayv1.ParentReference{Name: "gw"}
	for _, tc := range []struct {
		name       string
		route      *gatewayv1.HTTPRoute
		wantStatus metav1.ConditionStatus
		wantReason string
		wantInMsg  string
	}{
		{name: "a Service backend without EndpointSlices (Traefik's BackendNotFound) holds, naming it",
			route: route(gw, 3, accepted, notFound), wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonBackendNotResolved, wantInMsg: "backend ml/" + green},
		{name: "resolved backends leave the route accepted",
			route: route(gw, 3, accepted, resolved), wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ReasonAccepted},
		{name: "a ResolvedRefs of an older generation of the route does not hold",
			route: route(gw, 2, accepted, notFound), wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ReasonNoGatewayAnswer},
		{name: "a stale report of a parent the route no longer names does not hold",
			route: route(gatewayv1.ParentReference{Name: "old-gw"}, 3, accepted, notFound), wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ReasonAccepted},
		{name: "an unresolved backend the message does not name holds, quoting the Gateway",
			route:      route(gw, 3, accepted, metav1.Condition{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "RefNotPermitted", Message: "no grant for other/x"}),
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonBackendNotResolved, wantInMsg: "RefNotPermitted: no grant for other/x"},
		{name: "a rejected route stays rejected",
			route:      route(gw, 3, metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "NotAllowedByListeners"}, notFound),
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonNotAccepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := WithResolvedRefs(AcceptedCondition(tc.route, 7), tc.route, ms)
			if got.Status != tc.wantStatus || got.Reason != tc.wantReason || !strings.Contains(got.Message, tc.wantInMsg) {
				t.Errorf("got %s/%s %q; want %s/%s containing %q", got.Status, got.Reason, got.Message, tc.wantStatus, tc.wantReason, tc.wantInMsg)
			}
		})
	}
}

func TestMentionsFindsWholeNamesOnly(t *testing.T) {
	for _, tc := range []struct {
		msg, name string
		want      bool
	}{
		{"Cannot load HTTPBackendRef ml/llama-blue: endpointslices not found", "llama-blue", true},
		{"service llama-blue-epp not found", "llama-blue", false},
		{"service x-llama-blue not found", "llama-blue", false},
		{"no Service llama-blue.", "llama-blue", true},
		{"llama-blue", "llama-blue", true},
	} {
		if got := mentions(tc.msg, tc.name); got != tc.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", tc.msg, tc.name, got, tc.want)
		}
	}
}
