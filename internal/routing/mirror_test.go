package routing

import (
	"testing"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func mirrorsOf(rule gatewayv1.HTTPRouteRule) []gatewayv1.HTTPRequestMirrorFilter {
	var out []gatewayv1.HTTPRequestMirrorFilter
	for _, f := range rule.Filters {
		if f.Type == gatewayv1.HTTPRouteFilterRequestMirror {
			out = append(out, *f.RequestMirror)
		}
	}
	return out
}

// The owned route's weighted rule mirrors to the candidate's Service while the shadow phase
// runs (with its percent below 100), and only then; the header rule never copies the mirror.
func TestOwnedRouteMirrorsToTheCandidateOnlyInTheShadowPhase(t *testing.T) {
	ms := withHeaderRoute(newModelServer())
	m := &Mirror{Color: v1alpha1.Green, Stable: v1alpha1.Blue, Percent: 30, Via: v1alpha1.ShadowMirrorRequestMirror}
	r := OwnedRoute(ms, Backends{Weights: weights(100, 0), Carrier: v1alpha1.BackendService, Header: v1alpha1.Green, Mirror: m})
	weighted := r.Spec.Rules[len(r.Spec.Rules)-1]
	got := mirrorsOf(weighted)
	if len(got) != 1 || string(got[0].BackendRef.Name) != "llama-green" || ptr.Deref(got[0].BackendRef.Port, 0) != 8000 || ptr.Deref(got[0].Percent, 0) != 30 {
		t.Fatalf("weighted rule mirrors %+v, want llama-green:8000 at 30%%", got)
	}
	if h := headerRuleOf(r, ms); h == nil || len(mirrorsOf(*h)) != 0 {
		t.Errorf("header rule %+v: want one, without the mirror", h)
	}
	if w := Weights(r, ms); w[v1alpha1.Blue] != 100 || w[v1alpha1.Green] != 0 {
		t.Errorf("weights %v, want the stable color's 100 untouched by the mirror", w)
	}
	m.Percent = 100
	r = OwnedRoute(ms, Backends{Weights: weights(100, 0), Carrier: v1alpha1.BackendService, Mirror: m})
	if got := mirrorsOf(r.Spec.Rules[0]); len(got) != 1 || got[0].Percent != nil {
		t.Errorf("100%% mirror %+v, want one without a percent (the whole of the requests)", got)
	}
	r = OwnedRoute(ms, Backends{Weights: weights(100, 0), Carrier: v1alpha1.BackendService})
	if got := mirrorsOf(r.Spec.Rules[0]); len(got) != 0 {
		t.Errorf("mirror %+v without a shadow phase", got)
	}
}

// Through Traefik the rule's traffic goes to the shadow TraefikService (the colors' refs at 0,
// still named so that the route keeps resolving them) while the shadow phase runs.
func TestOwnedRouteSendsToTheShadowTraefikService(t *testing.T) {
	ms := newModelServer()
	m := &Mirror{Color: v1alpha1.Green, Stable: v1alpha1.Blue, Percent: 100, Via: v1alpha1.ShadowMirrorTraefikService}
	r := OwnedRoute(ms, Backends{Weights: weights(100, 0), Carrier: v1alpha1.BackendService, Mirror: m})
	refs := r.Spec.Rules[0].BackendRefs
	if len(refs) != 3 || !isShadowRef(refs[2].BackendObjectReference, ms) || ptr.Deref(refs[2].Weight, 0) != 100 {
		t.Fatalf("backendRefs %+v, want both colors and the shadow TraefikService at 100", refs)
	}
	if ptr.Deref(refs[0].Weight, 1) != 0 || ptr.Deref(refs[1].Weight, 1) != 0 {
		t.Errorf("colors' weights %v/%v while the TraefikService carries the rule, want 0/0", refs[0].Weight, refs[1].Weight)
	}
	if len(mirrorsOf(r.Spec.Rules[0])) != 0 {
		t.Errorf("a RequestMirror filter through Traefik (which answers 500 to every request of such a rule)")
	}
	if !Holds(r, ms, nil) {
		t.Errorf("the route does not hold the ModelServer's traffic while its TraefikService carries it")
	}
	spec := ShadowService(ms, *m).Object["spec"].(map[string]any)["mirroring"].(map[string]any)
	mirrors := spec["mirrors"].([]any)
	if spec["name"] != "llama-blue" || spec["port"] != int64(8000) || len(mirrors) != 1 || mirrors[0].(map[string]any)["name"] != "llama-green" || mirrors[0].(map[string]any)["percent"] != int64(100) {
		t.Errorf("TraefikService mirroring %v, want llama-blue answering and llama-green mirrored at 100", spec)
	}
}

// In a user's route the mirror filter (or the TraefikService ref) comes and goes with the shadow
// phase, and the user's own filters and backends stay.
func TestUserRouteGainsAndLosesTheMirror(t *testing.T) {
	ms := newModelServer()
	route := userRoute()
	own := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "x-team", Value: "ml"}}}}
	route.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{own}
	steady := Backends{Weights: weights(100, 0), Carrier: v1alpha1.BackendService}
	if _, err := SetBackendWeights(route, ms, nil, steady); err != nil {
		t.Fatal(err)
	}
	shadow := steady
	shadow.Mirror = &Mirror{Color: v1alpha1.Green, Stable: v1alpha1.Blue, Percent: 50, Via: v1alpha1.ShadowMirrorRequestMirror}
	if changed, err := SetBackendWeights(route, ms, nil, shadow); err != nil || !changed {
		t.Fatalf("adding the mirror: changed %t, %v", changed, err)
	}
	if got := mirrorsOf(route.Spec.Rules[0]); len(got) != 1 || len(route.Spec.Rules[0].Filters) != 2 {
		t.Fatalf("filters %+v, want the user's and the mirror", route.Spec.Rules[0].Filters)
	}
	if changed, _ := SetBackendWeights(route, ms, nil, shadow); changed {
		t.Errorf("the same mirror written again changed the route")
	}
	shadow.Mirror.Via = v1alpha1.ShadowMirrorTraefikService
	if changed, _ := SetBackendWeights(route, ms, nil, shadow); !changed || len(mirrorsOf(route.Spec.Rules[0])) != 0 {
		t.Fatalf("switching to the TraefikService: changed %t, filters %+v", changed, route.Spec.Rules[0].Filters)
	}
	n := 0
	for _, ref := range route.Spec.Rules[0].BackendRefs {
		if isShadowRef(ref.BackendObjectReference, ms) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d shadow TraefikService refs, want 1: %+v", n, route.Spec.Rules[0].BackendRefs)
	}
	if changed, _ := SetBackendWeights(route, ms, nil, shadow); changed {
		t.Errorf("the same TraefikService ref written again changed the route")
	}
	if changed, _ := SetBackendWeights(route, ms, nil, steady); !changed {
		t.Fatal("ending the shadow phase did not change the route")
	}
	rule := route.Spec.Rules[0]
	if len(rule.Filters) != 1 || rule.Filters[0].Type != own.Type {
		t.Errorf("filters after the shadow phase %+v, want the user's only", rule.Filters)
	}
	for _, ref := range rule.BackendRefs {
		if isShadowRef(ref.BackendObjectReference, ms) {
			t.Errorf("the shadow TraefikService ref is left after the shadow phase")
		}
	}
	if w := Weights(route, ms); w[v1alpha1.Blue] != 100 {
		t.Errorf("weights %v after the shadow phase, want blue 100", w)
	}
}
