package routing

import (
	"testing"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func withHeaderRoute(ms *v1alpha1.ModelServer) *v1alpha1.ModelServer {
	ms.Spec.Rollout.HeaderRoute = &v1alpha1.HeaderRouteSpec{Name: "x-canary", Value: "always"}
	return ms
}

// headerRuleOf returns ms's header rule in route, or nil.
func headerRuleOf(r *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer) *gatewayv1.HTTPRouteRule {
	for i := range r.Spec.Rules {
		if isHeaderRule(r.Spec.Rules[i], ms) {
			return &r.Spec.Rules[i]
		}
	}
	return nil
}

// checkHeaderRule fails unless rule sends only to color's backend of kind and every match
// carries the exact header match.
func checkHeaderRule(t *testing.T, rule *gatewayv1.HTTPRouteRule, ms *v1alpha1.ModelServer, color v1alpha1.Color, kind v1alpha1.BackendKind) {
	t.Helper()
	if rule == nil {
		t.Fatal("no header rule")
	}
	if len(rule.BackendRefs) != 1 {
		t.Fatalf("header rule has %d backendRefs, want the candidate's only", len(rule.BackendRefs))
	}
	c, k, ours := ownedRef(ms, rule.BackendRefs[0].BackendObjectReference)
	if !ours || c != color || k != kind || ptr.Deref(rule.BackendRefs[0].Weight, 1) < 1 {
		t.Errorf("header rule sends to %s %s (ours %t, weight %v), want %s %s", k, c, ours, rule.BackendRefs[0].Weight, kind, color)
	}
	for _, m := range rule.Matches {
		n := 0
		for _, h := range m.Headers {
			if h.Name == "x-canary" {
				n++
				if h.Value != "always" || ptr.Deref(h.Type, "") != gatewayv1.HeaderMatchExact {
					t.Errorf("header match %+v, want x-canary: always, Exact", h)
				}
			}
		}
		if n != 1 {
			t.Errorf("match %+v has %d x-canary header matches, want 1", m, n)
		}
	}
}

func TestOwnedRouteHasTheHeaderRuleOnlyWhileOn(t *testing.T) {
	ms := withHeaderRoute(newModelServer())
	ms.Spec.Gateway.Matches = []gatewayv1.HTTPRouteMatch{
		{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/v1")}},
		{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchExact), Value: ptr.To("/health")}, Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-Canary", Value: "no"}}},
	}
	b := Direct(ms, weights(100, 0))
	b.Header = v1alpha1.Green
	r := OwnedRoute(ms, b)
	if len(r.Spec.Rules) != 2 {
		t.Fatalf("%d rules, want the header rule and the weighted rule", len(r.Spec.Rules))
	}
	hr := headerRuleOf(r, ms)
	checkHeaderRule(t, hr, ms, v1alpha1.Green, v1alpha1.BackendService)
	if len(hr.Matches) != 2 || *hr.Matches[0].Path.Value != "/v1" || *hr.Matches[1].Path.Value != "/health" || len(hr.Matches[1].Headers) != 1 {
		t.Errorf("header rule matches %+v, want the spec's paths with the header added (the spec's own x-canary match replaced)", hr.Matches)
	}
	weighted := r.Spec.Rules[1]
	if len(weighted.Matches) != 2 || *weighted.Matches[0].Path.Value != "/v1" || len(weighted.Matches[0].Headers) != 0 || weighted.Matches[1].Headers[0].Value != "no" {
		t.Errorf("weighted rule matches %+v, want the spec's, untouched", weighted.Matches)
	}
	if w := Weights(r, ms); w[v1alpha1.Blue] != 100 || w[v1alpha1.Green] != 0 {
		t.Errorf("weights read %v, want the weighted rule's 100/0", w)
	}
	if got := Carrier(r, ms); got != v1alpha1.BackendService {
		t.Errorf("carrier %s", got)
	}

	b.Header = ""
	if r := OwnedRoute(ms, b); len(r.Spec.Rules) != 1 || headerRuleOf(r, ms) != nil {
		t.Errorf("with the header route off the route has rules %+v, want the weighted one only", r.Spec.Rules)
	}
	b.Header = v1alpha1.Green
	if r := OwnedRoute(newModelServer(), b); len(r.Spec.Rules) != 1 {
		t.Errorf("without spec.rollout.headerRoute the route has %d rules, want 1", len(r.Spec.Rules))
	}
}

func TestHeaderRuleSendsToTheCarrierKind(t *testing.T) {
	ms := withHeaderRoute(newModelServer())
	ms.Spec.Gateway.Backend = v1alpha1.BackendInferencePool
	b := Direct(ms, weights(80, 20))
	b.Header = v1alpha1.Blue
	checkHeaderRule(t, headerRuleOf(OwnedRoute(ms, b), ms), ms, v1alpha1.Blue, v1alpha1.BackendInferencePool)
	// While the backend kind changes, the kind that carries the traffic is the header's too.
	b = Backends{Weights: weights(80, 20), Carrier: v1alpha1.BackendService, Pending: v1alpha1.BackendInferencePool, Header: v1alpha1.Blue}
	checkHeaderRule(t, headerRuleOf(OwnedRoute(ms, b), ms), ms, v1alpha1.Blue, v1alpha1.BackendService)
}

func TestUserRouteGetsTheHeaderRuleAndLosesItWithoutOtherChanges(t *testing.T) {
	ms := withHeaderRoute(newModelServer())
	llm := ptr.To(gatewayv1.SectionName("llm"))
	r := userRoute()
	r.Spec.Rules[1].Matches = []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/llm")}}}
	before := r.DeepCopy()
	b := Direct(ms, weights(100, 0))
	b.Header = v1alpha1.Green
	if changed, err := SetBackendWeights(r, ms, llm, b); err != nil || !changed {
		t.Fatalf("changed %t err %v", changed, err)
	}
	if len(r.Spec.Rules) != 3 || !isHeaderRule(r.Spec.Rules[2], ms) {
		t.Fatalf("rules %+v; want the user's two and the header rule at the end", r.Spec.Rules)
	}
	hr := &r.Spec.Rules[2]
	checkHeaderRule(t, hr, ms, v1alpha1.Green, v1alpha1.BackendService)
	if len(hr.Matches) != 1 || *hr.Matches[0].Path.Value != "/llm" || len(hr.Filters) != 1 || hr.Filters[0].RequestHeaderModifier == nil {
		t.Errorf("header rule %+v; want the llm rule's path and filter", hr)
	}
	if r.Spec.Rules[0].Name == nil || *r.Spec.Rules[0].Name != "docs" || len(r.Spec.Rules[0].BackendRefs) != 1 {
		t.Errorf("the docs rule changed: %+v", r.Spec.Rules[0])
	}
	if w := Weights(r, ms); w[v1alpha1.Blue] != 100 || w[v1alpha1.Green] != 0 {
		t.Errorf("weights %v", w)
	}

	// A second pass with the same decision changes nothing; a later step keeps the rule.
	if changed, _ := SetBackendWeights(r, ms, llm, b); changed {
		t.Error("a second pass changed the route")
	}
	b.Weights = weights(50, 50)
	if _, err := SetBackendWeights(r, ms, llm, b); err != nil || headerRuleOf(r, ms) == nil {
		t.Fatalf("err %v; header rule %v", err, headerRuleOf(r, ms))
	}
	// Without a rule name, the rule that holds our backends is the weighted one, not the header rule.
	if _, err := SetBackendWeights(r, ms, nil, b); err != nil {
		t.Fatal(err)
	}
	if n := len(headerRuleOf(r, ms).BackendRefs); n != 1 {
		t.Errorf("header rule got %d backendRefs when no rule is named, want 1", n)
	}

	// Off: the header rule goes, the user's rules are as before (our weighted refs aside).
	b.Header = ""
	if changed, err := SetBackendWeights(r, ms, llm, b); err != nil || !changed {
		t.Fatalf("changed %t err %v", changed, err)
	}
	if len(r.Spec.Rules) != 2 || headerRuleOf(r, ms) != nil {
		t.Fatalf("rules %+v after the header route ended", r.Spec.Rules)
	}
	if RemoveBackends(r, ms); len(r.Spec.Rules) != 2 || len(r.Spec.Rules[1].BackendRefs) != len(before.Spec.Rules[1].BackendRefs) {
		t.Errorf("after removing our backends the route is %+v, want %+v", r.Spec.Rules, before.Spec.Rules)
	}

	// RemoveBackends also takes a header rule away.
	b.Header = v1alpha1.Green
	if _, err := SetBackendWeights(r, ms, llm, b); err != nil {
		t.Fatal(err)
	}
	if !RemoveBackends(r, ms) || headerRuleOf(r, ms) != nil || len(r.Spec.Rules) != 2 {
		t.Errorf("RemoveBackends left %+v", r.Spec.Rules)
	}
}
