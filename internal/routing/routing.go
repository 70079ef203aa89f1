// Package routing decides the HTTPRoute of a ModelServer: the route modelship owns, or the
// backendRefs it manages inside a route a user owns, and what the route's status says about
// its acceptance by Gateways.
package routing

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Colors in the order their backendRefs appear.
var Colors = []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green}

// OwnedRoute is the HTTPRoute modelship owns for ms: its parentRefs and hostnames, one rule with
// its matches (everything when empty) and one backendRef per color with the given weights.
func OwnedRoute(ms *v1alpha1.ModelServer, weights map[v1alpha1.Color]int32) *gatewayv1.HTTPRoute {
	route := &gatewayv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: ms.RouteName(), Namespace: ms.Namespace, Labels: ms.SelectorLabels()},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: ms.Spec.Gateway.ParentRefs},
			Hostnames:       ms.Spec.Gateway.Hostnames,
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches:     ms.Spec.Gateway.Matches,
				BackendRefs: backendRefs(ms, weights),
			}},
		},
	}
	if len(route.Spec.Rules[0].Matches) == 0 {
		route.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
			Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/"),
		}}}
	}
	return route
}

func backendRefs(ms *v1alpha1.ModelServer, weights map[v1alpha1.Color]int32) []gatewayv1.HTTPBackendRef {
	refs := make([]gatewayv1.HTTPBackendRef, 0, len(Colors))
	for _, c := range Colors {
		refs = append(refs, backendRef(ms, c, weights[c]))
	}
	return refs
}

// backendRef is color c's backendRef: its Service and port, or its InferencePool (which
// carries its own target port).
func backendRef(ms *v1alpha1.ModelServer, c v1alpha1.Color, weight int32) gatewayv1.HTTPBackendRef {
	ref := gatewayv1.BackendObjectReference{
		Group: ptr.To(gatewayv1.Group("")),
		Kind:  ptr.To(gatewayv1.Kind("Service")),
		Name:  gatewayv1.ObjectName(ms.ServiceName(c)),
		Port:  ptr.To(ms.Spec.Port),
	}
	if ms.UsesInferencePools() {
		ref = gatewayv1.BackendObjectReference{
			Group: ptr.To(gatewayv1.Group(InferenceGroup)),
			Kind:  ptr.To(gatewayv1.Kind(PoolKind)),
			Name:  gatewayv1.ObjectName(ms.PoolName(c)),
		}
	}
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: ref, Weight: ptr.To(weight)}}
}

// refKind is what a backendRef points at: a Service, an InferencePool or something else.
func refKind(ref gatewayv1.BackendObjectReference) v1alpha1.BackendKind {
	group, kind := ptr.Deref(ref.Group, ""), ptr.Deref(ref.Kind, "Service")
	switch {
	case (group == "" || group == "core") && kind == "Service":
		return v1alpha1.BackendService
	case group == InferenceGroup && kind == PoolKind:
		return v1alpha1.BackendInferencePool
	}
	return ""
}

// ownedRef reports whether ref points at one of ms's Services or InferencePools (of either
// kind, so that a change of spec.gateway.backend replaces the old refs), at which color, and
// whether it is of the kind the spec asks for now.
func ownedRef(ms *v1alpha1.ModelServer, ref gatewayv1.BackendObjectReference) (c v1alpha1.Color, ours, current bool) {
	kind := refKind(ref)
	if kind == "" || (ref.Namespace != nil && string(*ref.Namespace) != ms.Namespace) {
		return "", false, false
	}
	want := v1alpha1.BackendService
	if ms.UsesInferencePools() {
		want = v1alpha1.BackendInferencePool
	}
	for _, c := range Colors {
		name := ms.ServiceName(c)
		if kind == v1alpha1.BackendInferencePool {
			name = ms.PoolName(c)
		}
		if string(ref.Name) == name {
			return c, true, kind == want
		}
	}
	return "", false, false
}

// isOurs reports whether ref is one of the backendRefs the spec asks for now, and its color.
func isOurs(ms *v1alpha1.ModelServer, ref gatewayv1.BackendObjectReference) (v1alpha1.Color, bool) {
	c, ours, current := ownedRef(ms, ref)
	return c, ours && current
}

// SetBackendWeights edits a user-owned route in place so that ms's two backendRefs carry the
// given weights, touching nothing else: other rules, matches, filters and other backends stay.
// The rule is the one named ruleName when set; else every rule that already references ms's
// Services; else the first rule. It reports whether the route changed.
func SetBackendWeights(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer, ruleName *gatewayv1.SectionName, weights map[v1alpha1.Color]int32) (bool, error) {
	if len(route.Spec.Rules) == 0 {
		return false, fmt.Errorf("HTTPRoute %s/%s has no rules to add the ModelServer's backends to", route.Namespace, route.Name)
	}
	var targets []int
	switch {
	case ruleName != nil:
		for i, r := range route.Spec.Rules {
			if r.Name != nil && *r.Name == *ruleName {
				targets = append(targets, i)
			}
		}
		if len(targets) == 0 {
			return false, fmt.Errorf("HTTPRoute %s/%s has no rule named %q (spec.gateway.routeRef.ruleName)", route.Namespace, route.Name, *ruleName)
		}
	default:
		for i, r := range route.Spec.Rules {
			for _, b := range r.BackendRefs {
				if _, ours, _ := ownedRef(ms, b.BackendObjectReference); ours {
					targets = append(targets, i)
					break
				}
			}
		}
		if len(targets) == 0 {
			targets = []int{0}
		}
	}
	changed := false
	for _, i := range targets {
		if setRuleWeights(&route.Spec.Rules[i], ms, weights) {
			changed = true
		}
	}
	return changed, nil
}

func setRuleWeights(rule *gatewayv1.HTTPRouteRule, ms *v1alpha1.ModelServer, weights map[v1alpha1.Color]int32) bool {
	changed := false
	// Refs of the other backend kind (spec.gateway.backend changed) leave the rule.
	kept := rule.BackendRefs[:0]
	for _, b := range rule.BackendRefs {
		if _, ours, current := ownedRef(ms, b.BackendObjectReference); ours && !current {
			changed = true
			continue
		}
		kept = append(kept, b)
	}
	rule.BackendRefs = kept
	seen := map[v1alpha1.Color]bool{}
	for i := range rule.BackendRefs {
		c, ok := isOurs(ms, rule.BackendRefs[i].BackendObjectReference)
		if !ok {
			continue
		}
		seen[c] = true
		if w := weights[c]; rule.BackendRefs[i].Weight == nil || *rule.BackendRefs[i].Weight != w {
			rule.BackendRefs[i].Weight = ptr.To(w)
			changed = true
		}
	}
	for _, c := range Colors {
		if !seen[c] {
			rule.BackendRefs = append(rule.BackendRefs, backendRef(ms, c, weights[c]))
			changed = true
		}
	}
	return changed
}

// Weights reads the weights of ms's backendRefs from a route (the first rule that has them).
// A backendRef without a weight counts as 1, as the Gateway API defines.
func Weights(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer) map[v1alpha1.Color]int32 {
	for _, r := range route.Spec.Rules {
		w := map[v1alpha1.Color]int32{}
		for _, b := range r.BackendRefs {
			if c, ok := isOurs(ms, b.BackendObjectReference); ok {
				w[c] = ptr.Deref(b.Weight, 1)
			}
		}
		if len(w) > 0 {
			return w
		}
	}
	return nil
}

// AcceptedCondition turns the route's status into the ModelServer's RouteAccepted condition:
// True when every parent that answered accepted the route, False (with the parent's message)
// when one did not, Unknown while no Gateway controller has answered for the current
// generation of the route.
func AcceptedCondition(route *gatewayv1.HTTPRoute, generation int64) metav1.Condition {
	cond := metav1.Condition{
		Type: v1alpha1.ConditionRouteAccepted, Status: metav1.ConditionUnknown,
		Reason: v1alpha1.ReasonNoGatewayAnswer, ObservedGeneration: generation,
		Message: "no Gateway controller has reported on the HTTPRoute yet",
	}
	if route == nil {
		cond.Message = "the HTTPRoute does not exist yet"
		return cond
	}
	answered, accepted := 0, 0
	for _, p := range route.Status.Parents {
		for _, c := range p.Conditions {
			if c.Type != string(gatewayv1.RouteConditionAccepted) || c.ObservedGeneration < route.Generation {
				continue
			}
			answered++
			if c.Status == metav1.ConditionTrue {
				accepted++
				continue
			}
			cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonNotAccepted
			cond.Message = fmt.Sprintf("parent %s did not accept the HTTPRoute: %s: %s", p.ParentRef.Name, c.Reason, c.Message)
			return cond
		}
	}
	if answered > 0 && accepted == answered {
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonAccepted
		cond.Message = fmt.Sprintf("accepted by %d parent(s)", accepted)
	}
	return cond
}

// RemoveBackends deletes ms's backendRefs from every rule of a user-owned route and reports
// whether the route changed.
func RemoveBackends(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer) bool {
	changed := false
	for i := range route.Spec.Rules {
		kept := route.Spec.Rules[i].BackendRefs[:0]
		for _, b := range route.Spec.Rules[i].BackendRefs {
			if _, ours, _ := ownedRef(ms, b.BackendObjectReference); ours {
				changed = true
				continue
			}
			kept = append(kept, b)
		}
		route.Spec.Rules[i].BackendRefs = kept
	}
	return changed
}
