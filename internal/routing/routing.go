// Package routing decides the HTTPRoute of a ModelServer: the route modelship owns, or the
// backendRefs it manages inside a route a user owns, and what the route's status says about
// its acceptance by Gateways.
package routing

import (
	"fmt"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Colors in the order their backendRefs appear.
var Colors = []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green}

// Backends is what a rule holds of a ModelServer's backendRefs: one per color of the Carrier
// kind, with the color's weight, and, while spec.gateway.backend changed and the new backends
// are not ready to carry traffic, one per color of the Pending kind (the spec's) at weight 0.
// Referenced at weight 0, they take no traffic but Gateways resolve them and report on them (an
// InferencePool's status lists the Gateways of the routes that use it), so that they are known
// to work before the traffic moves. Pending is empty once the Carrier is the spec's kind.
type Backends struct {
	Weights map[v1alpha1.Color]int32
	Carrier v1alpha1.BackendKind
	Pending v1alpha1.BackendKind
	// Header is the color that the header rule of spec.rollout.headerRoute sends to (a backendRef
	// of the Carrier kind); "" means no header rule: the route has none, and one left is removed.
	Header v1alpha1.Color
	// Mirror is the shadow phase's mirror (see Mirror); nil: none, and one left is removed.
	Mirror *Mirror
}

// Direct is Backends that carry the weights on the kind the spec asks for.
func Direct(ms *v1alpha1.ModelServer, weights map[v1alpha1.Color]int32) Backends {
	return Backends{Weights: weights, Carrier: SpecKind(ms)}
}

// SpecKind is the backend kind spec.gateway.backend asks for (Service by default).
func SpecKind(ms *v1alpha1.ModelServer) v1alpha1.BackendKind {
	if ms.UsesInferencePools() {
		return v1alpha1.BackendInferencePool
	}
	return v1alpha1.BackendService
}

// OwnedRoute is the HTTPRoute modelship owns for ms: its parentRefs and hostnames, one rule with
// its matches (everything when empty) and ms's backendRefs as b says, and, while b.Header is
// set, the header rule before it (see HeaderRule).
func OwnedRoute(ms *v1alpha1.ModelServer, b Backends) *gatewayv1.HTTPRoute {
	route := &gatewayv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: ms.RouteName(), Namespace: ms.Namespace, Labels: ms.SelectorLabels()},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: ms.Spec.Gateway.ParentRefs},
			Hostnames:       ms.Spec.Gateway.Hostnames,
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches:     ms.Spec.Gateway.Matches,
				BackendRefs: backendRefs(ms, b),
			}},
		},
	}
	if len(route.Spec.Rules[0].Matches) == 0 {
		route.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{matchAll()}
	}
	setMirrorFilter(&route.Spec.Rules[0], ms, b.Mirror)
	if hr, ok := HeaderRule(ms, route.Spec.Rules[0], b); ok {
		route.Spec.Rules = append([]gatewayv1.HTTPRouteRule{hr}, route.Spec.Rules...)
	}
	return route
}

// matchAll is the match of a rule without matches: every path.
func matchAll() gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")}}
}

// HeaderRule is the rule spec.rollout.headerRoute adds while b.Header is set (ok false
// otherwise): named ms.HeaderRuleName(), with each match of the weighted rule (its path,
// method, headers and query parameters; every path when it has none) and the header match
// added to it, the weighted rule's filters, and one backendRef, b.Header's Service or
// InferencePool (of the kind that carries the traffic). A rule with more header matches is more
// specific, so a Gateway sends the requests that carry the header to it rather than to the
// weighted rule, whose matches stay as they are for every other request.
func HeaderRule(ms *v1alpha1.ModelServer, weighted gatewayv1.HTTPRouteRule, b Backends) (gatewayv1.HTTPRouteRule, bool) {
	hr := ms.Spec.Rollout.HeaderRoute
	if hr == nil || b.Header == "" {
		return gatewayv1.HTTPRouteRule{}, false
	}
	header := gatewayv1.HTTPHeaderMatch{Type: ptr.To(gatewayv1.HeaderMatchExact), Name: hr.Name, Value: hr.Value}
	src := weighted.Matches
	if len(src) == 0 {
		src = []gatewayv1.HTTPRouteMatch{matchAll()}
	}
	matches := make([]gatewayv1.HTTPRouteMatch, 0, len(src))
	for _, m := range src {
		m = *m.DeepCopy()
		// A Gateway reads only the first match of a header name: one of the same name goes.
		kept := m.Headers[:0]
		for _, h := range m.Headers {
			if !strings.EqualFold(string(h.Name), string(hr.Name)) {
				kept = append(kept, h)
			}
		}
		m.Headers = append(kept, header)
		matches = append(matches, m)
	}
	// The shadow phase's mirror stays on the weighted rule: the header's requests reach the
	// candidate itself.
	filters := withoutOurMirror(weighted.Filters, ms)
	return gatewayv1.HTTPRouteRule{
		Name:        ptr.To(gatewayv1.SectionName(ms.HeaderRuleName())),
		Matches:     matches,
		Filters:     filters,
		BackendRefs: []gatewayv1.HTTPBackendRef{backendRef(ms, b.Header, b.Carrier, 1)},
	}, true
}

// isHeaderRule reports whether rule is ms's header rule (by its name).
func isHeaderRule(rule gatewayv1.HTTPRouteRule, ms *v1alpha1.ModelServer) bool {
	return rule.Name != nil && string(*rule.Name) == ms.HeaderRuleName()
}

// carried is color c's weight on its backendRef of the Carrier kind: its weight, or 0 while the
// shadow TraefikService carries the rule's traffic.
func (b Backends) carried(c v1alpha1.Color) int32 {
	if b.viaTraefik() {
		return 0
	}
	return b.Weights[c]
}

func backendRefs(ms *v1alpha1.ModelServer, b Backends) []gatewayv1.HTTPBackendRef {
	refs := make([]gatewayv1.HTTPBackendRef, 0, 2*len(Colors)+1)
	for _, c := range Colors {
		refs = append(refs, backendRef(ms, c, b.Carrier, b.carried(c)))
	}
	if b.viaTraefik() {
		refs = append(refs, shadowRef(ms))
	}
	if b.Pending != "" && b.Pending != b.Carrier {
		for _, c := range Colors {
			refs = append(refs, backendRef(ms, c, b.Pending, 0))
		}
	}
	return refs
}

// backendRef is color c's backendRef of the given kind: its Service and port, or its
// InferencePool (which carries its own target port).
func backendRef(ms *v1alpha1.ModelServer, c v1alpha1.Color, kind v1alpha1.BackendKind, weight int32) gatewayv1.HTTPBackendRef {
	ref := gatewayv1.BackendObjectReference{
		Group: ptr.To(gatewayv1.Group("")),
		Kind:  ptr.To(gatewayv1.Kind("Service")),
		Name:  gatewayv1.ObjectName(ms.ServiceName(c)),
		Port:  ptr.To(ms.Spec.Port),
	}
	if kind == v1alpha1.BackendInferencePool {
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
// kind, so that a change of spec.gateway.backend finds the old refs), at which color, and
// of which kind.
func ownedRef(ms *v1alpha1.ModelServer, ref gatewayv1.BackendObjectReference) (c v1alpha1.Color, kind v1alpha1.BackendKind, ours bool) {
	kind = refKind(ref)
	if kind == "" || (ref.Namespace != nil && string(*ref.Namespace) != ms.Namespace) {
		return "", "", false
	}
	for _, c := range Colors {
		name := ms.ServiceName(c)
		if kind == v1alpha1.BackendInferencePool {
			name = ms.PoolName(c)
		}
		if string(ref.Name) == name {
			return c, kind, true
		}
	}
	return "", "", false
}

// hasOurs reports whether a rule references any of ms's Services or InferencePools.
func hasOurs(rule gatewayv1.HTTPRouteRule, ms *v1alpha1.ModelServer) bool {
	if isHeaderRule(rule, ms) {
		return false
	}
	for _, b := range rule.BackendRefs {
		if _, _, ours := ownedRef(ms, b.BackendObjectReference); ours {
			return true
		}
	}
	return false
}

// targetRules are the indexes of the rules of a user-owned route that hold ms's backendRefs:
// the ones named ruleName when set; else every rule that already references ms's backends;
// else the first rule.
func targetRules(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer, ruleName *gatewayv1.SectionName) ([]int, error) {
	if len(route.Spec.Rules) == 0 {
		return nil, fmt.Errorf("HTTPRoute %s/%s has no rules to add the ModelServer's backends to", route.Namespace, route.Name)
	}
	var targets []int
	if ruleName != nil {
		for i, r := range route.Spec.Rules {
			if r.Name != nil && *r.Name == *ruleName && !isHeaderRule(r, ms) {
				targets = append(targets, i)
			}
		}
		if len(targets) == 0 {
			return nil, fmt.Errorf("HTTPRoute %s/%s has no rule named %q (spec.gateway.routeRef.ruleName)", route.Namespace, route.Name, *ruleName)
		}
		return targets, nil
	}
	for i, r := range route.Spec.Rules {
		if hasOurs(r, ms) {
			targets = append(targets, i)
		}
	}
	if len(targets) == 0 {
		for i, r := range route.Spec.Rules {
			if !isHeaderRule(r, ms) {
				return []int{i}, nil
			}
		}
		return nil, fmt.Errorf("HTTPRoute %s/%s has no rules to add the ModelServer's backends to", route.Namespace, route.Name)
	}
	return targets, nil
}

// SetBackendWeights edits a user-owned route in place so that ms's backendRefs are as b says,
// touching nothing else: other rules, matches, filters and other backends stay. The rule is the
// one named ruleName when set; else every rule that already references ms's backends; else the
// first rule. ms's header rule (see HeaderRule, from the matches of those rules and the first
// one's filters) is added at the end of the rules while b.Header is set, kept up to date, and
// removed otherwise. It reports whether the route changed.
func SetBackendWeights(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer, ruleName *gatewayv1.SectionName, b Backends) (bool, error) {
	targets, err := targetRules(route, ms, ruleName)
	if err != nil {
		return false, err
	}
	changed := false
	for _, i := range targets {
		if setRuleWeights(&route.Spec.Rules[i], ms, b) {
			changed = true
		}
		if setMirrorFilter(&route.Spec.Rules[i], ms, b.Mirror) {
			changed = true
		}
	}
	weighted := gatewayv1.HTTPRouteRule{Filters: route.Spec.Rules[targets[0]].Filters}
	for _, i := range targets {
		m := route.Spec.Rules[i].Matches
		if len(m) == 0 {
			m = []gatewayv1.HTTPRouteMatch{matchAll()}
		}
		weighted.Matches = append(weighted.Matches, m...)
	}
	if setHeaderRule(route, ms, weighted, b) {
		changed = true
	}
	return changed, nil
}

// setHeaderRule makes ms's header rule in a user's route what HeaderRule says: added at the end,
// replaced where it differs, or removed. It reports whether the route changed.
func setHeaderRule(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer, weighted gatewayv1.HTTPRouteRule, b Backends) bool {
	want, on := HeaderRule(ms, weighted, b)
	at := slices.IndexFunc(route.Spec.Rules, func(r gatewayv1.HTTPRouteRule) bool { return isHeaderRule(r, ms) })
	switch {
	case !on && at < 0:
		return false
	case !on:
		route.Spec.Rules = slices.Delete(route.Spec.Rules, at, at+1)
	case at < 0:
		route.Spec.Rules = append(route.Spec.Rules, want)
	case apiequality.Semantic.DeepEqual(route.Spec.Rules[at], want):
		return false
	default:
		// Fields a Gateway API server defaults (a match's type) are written as HeaderRule has
		// them, so a rule read back equals the one written.
		route.Spec.Rules[at] = want
	}
	return true
}

func setRuleWeights(rule *gatewayv1.HTTPRouteRule, ms *v1alpha1.ModelServer, b Backends) bool {
	changed := false
	pending := b.Pending != "" && b.Pending != b.Carrier
	// Refs of a kind the rule no longer holds (spec.gateway.backend changed) leave the rule.
	kept := rule.BackendRefs[:0]
	shadow := false
	for _, ref := range rule.BackendRefs {
		if _, kind, ours := ownedRef(ms, ref.BackendObjectReference); ours && kind != b.Carrier && (!pending || kind != b.Pending) {
			changed = true
			continue
		}
		if isShadowRef(ref.BackendObjectReference, ms) {
			if !b.viaTraefik() || shadow {
				changed = true
				continue
			}
			shadow = true
			if ptr.Deref(ref.Weight, 1) != 100 {
				ref.Weight = ptr.To(int32(100))
				changed = true
			}
		}
		kept = append(kept, ref)
	}
	rule.BackendRefs = kept
	seen := map[v1alpha1.BackendKind]map[v1alpha1.Color]bool{b.Carrier: {}, b.Pending: {}}
	for i := range rule.BackendRefs {
		c, kind, ours := ownedRef(ms, rule.BackendRefs[i].BackendObjectReference)
		if !ours {
			continue
		}
		seen[kind][c] = true
		w := int32(0)
		if kind == b.Carrier {
			w = b.carried(c)
		}
		if rule.BackendRefs[i].Weight == nil || *rule.BackendRefs[i].Weight != w {
			rule.BackendRefs[i].Weight = ptr.To(w)
			changed = true
		}
	}
	for _, want := range backendRefs(ms, b) {
		if isShadowRef(want.BackendObjectReference, ms) {
			if !shadow {
				rule.BackendRefs = append(rule.BackendRefs, want)
				changed = true
			}
			continue
		}
		c, kind, _ := ownedRef(ms, want.BackendObjectReference)
		if !seen[kind][c] {
			rule.BackendRefs = append(rule.BackendRefs, want)
			changed = true
		}
	}
	return changed
}

// Carrier is the kind of ms's backendRefs that carries its traffic in route: the spec's kind,
// unless only refs of the other kind carry weight (spec.gateway.backend changed and the route
// still sends the traffic to the old backends). A route that holds none carries the spec's.
func Carrier(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer) v1alpha1.BackendKind {
	spec := SpecKind(ms)
	if route == nil {
		return spec
	}
	var other v1alpha1.BackendKind
	for _, r := range route.Spec.Rules {
		if isHeaderRule(r, ms) {
			continue
		}
		for _, b := range r.BackendRefs {
			_, kind, ours := ownedRef(ms, b.BackendObjectReference)
			if !ours || ptr.Deref(b.Weight, 1) == 0 {
				continue
			}
			if kind == spec {
				return spec
			}
			other = kind
		}
	}
	if other != "" {
		return other
	}
	return spec
}

// Holds reports whether route carries ms's traffic: ms's backendRefs (of either kind) with a
// weight above 0 in the rule named ruleName, or in any rule when ruleName is nil.
func Holds(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer, ruleName *gatewayv1.SectionName) bool {
	if route == nil {
		return false
	}
	for _, r := range route.Spec.Rules {
		if (ruleName != nil && (r.Name == nil || *r.Name != *ruleName)) || isHeaderRule(r, ms) {
			continue
		}
		for _, b := range r.BackendRefs {
			_, _, ours := ownedRef(ms, b.BackendObjectReference)
			if (ours || isShadowRef(b.BackendObjectReference, ms)) && ptr.Deref(b.Weight, 1) > 0 {
				return true
			}
		}
	}
	return false
}

// Shares reports whether the rules of a user-owned route that ms would write into (ruleName, as
// SetBackendWeights picks them) already carry other's backendRefs while they carry none of ms's:
// both ModelServers would send their requests into one rule.
func Shares(route *gatewayv1.HTTPRoute, ms, other *v1alpha1.ModelServer, ruleName *gatewayv1.SectionName) bool {
	targets, err := targetRules(route, ms, ruleName)
	if err != nil {
		return false
	}
	for _, i := range targets {
		if hasOurs(route.Spec.Rules[i], ms) {
			return false
		}
	}
	for _, i := range targets {
		if hasOurs(route.Spec.Rules[i], other) {
			return true
		}
	}
	return false
}

// Weights reads the weights of ms's backendRefs from a route (the first rule that has them),
// per color, whatever their kind (refs of a pending kind weigh 0). A backendRef without a
// weight counts as 1, as the Gateway API defines.
func Weights(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer) map[v1alpha1.Color]int32 {
	for _, r := range route.Spec.Rules {
		if isHeaderRule(r, ms) {
			continue
		}
		w := map[v1alpha1.Color]int32{}
		for _, b := range r.BackendRefs {
			if c, _, ours := ownedRef(ms, b.BackendObjectReference); ours {
				w[c] += ptr.Deref(b.Weight, 1)
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

// WithResolvedRefs folds the route's ResolvedRefs into its RouteAccepted condition: when a
// Gateway the route names in spec.parentRefs accepted the route's current generation but reports
// ResolvedRefs False for it (a backend Service without EndpointSlices or missing: Traefik
// v3.6.12 says BackendNotFound and answers that backend's share with HTTP 500), the condition
// turns False with reason BackendNotResolved, naming the ModelServer's backends the Gateway's
// message names. The rollout then holds (no weight goes up); a False or Unknown condition is
// returned as it is. ResolvedRefs is route-wide in the Gateway API: an unresolved backend of
// another owner in a shared route holds too, its message says which.
func WithResolvedRefs(accepted metav1.Condition, route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer) metav1.Condition {
	if accepted.Status != metav1.ConditionTrue || route == nil {
		return accepted
	}
	for _, p := range route.Status.Parents {
		if !namedParent(route, p.ParentRef) {
			continue
		}
		for _, c := range p.Conditions {
			if c.Type != string(gatewayv1.RouteConditionResolvedRefs) || c.ObservedGeneration < route.Generation || c.Status != metav1.ConditionFalse {
				continue
			}
			which := "a backend the Gateway names in its message"
			if names := namedBackends(ms, c.Message); len(names) > 0 {
				which = "backend " + strings.Join(names, ", ")
			}
			out := accepted
			out.Status, out.Reason = metav1.ConditionFalse, v1alpha1.ReasonBackendNotResolved
			out.Message = fmt.Sprintf("parent %s accepted the HTTPRoute but did not resolve %s (ResolvedRefs False: %s: %s): no weight goes up until it does",
				p.ParentRef.Name, which, c.Reason, c.Message)
			return out
		}
	}
	return accepted
}

// namedParent reports whether ref (from the route's status) is one of the parents in the
// route's spec.parentRefs, with the Gateway API's defaults (group gateway.networking.k8s.io,
// kind Gateway, the route's namespace): a status entry of a parent the route no longer names
// is stale.
func namedParent(route *gatewayv1.HTTPRoute, ref gatewayv1.ParentReference) bool {
	norm := func(r gatewayv1.ParentReference) string {
		return fmt.Sprintf("%s/%s/%s/%s/%s/%d", ptr.Deref(r.Group, gatewayv1.GroupName), ptr.Deref(r.Kind, "Gateway"),
			ptr.Deref(r.Namespace, gatewayv1.Namespace(route.Namespace)), r.Name, ptr.Deref(r.SectionName, ""), ptr.Deref(r.Port, 0))
	}
	for _, want := range route.Spec.ParentRefs {
		if norm(want) == norm(ref) {
			return true
		}
	}
	return false
}

// namedBackends are the names ("namespace/name") of ms's Services and InferencePools that a
// Gateway's message mentions, as a whole name (llama-blue is not named by llama-blue-epp).
func namedBackends(ms *v1alpha1.ModelServer, msg string) []string {
	var out []string
	for _, c := range Colors {
		for _, name := range []string{ms.ServiceName(c), ms.PoolName(c)} {
			if mentions(msg, name) && !slices.Contains(out, ms.Namespace+"/"+name) {
				out = append(out, ms.Namespace+"/"+name)
			}
		}
	}
	return out
}

// mentions reports whether name occurs in msg not as part of a longer DNS name.
func mentions(msg, name string) bool {
	part := func(b byte) bool {
		return b == '-' || ('a' <= b && b <= 'z') || ('0' <= b && b <= '9')
	}
	for i := 0; ; {
		j := strings.Index(msg[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		if (start == 0 || !part(msg[start-1])) && (end == len(msg) || !part(msg[end])) {
			return true
		}
		i = start + 1
	}
}

// RemoveBackends deletes ms's backendRefs from every rule of a user-owned route, and ms's
// header rule, and reports whether the route changed.
func RemoveBackends(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer) bool {
	return removeBackends(route, ms, nil)
}

// RemoveBackendsOutside deletes ms's backendRefs from every rule of a user-owned route but the
// ones named keep (spec.gateway.routeRef.ruleName changed) and reports whether the route changed.
func RemoveBackendsOutside(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer, keep gatewayv1.SectionName) bool {
	return removeBackends(route, ms, &keep)
}

func removeBackends(route *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer, keep *gatewayv1.SectionName) bool {
	changed := false
	if keep == nil {
		if at := slices.IndexFunc(route.Spec.Rules, func(r gatewayv1.HTTPRouteRule) bool { return isHeaderRule(r, ms) }); at >= 0 {
			route.Spec.Rules = slices.Delete(route.Spec.Rules, at, at+1)
			changed = true
		}
	}
	for i := range route.Spec.Rules {
		rule := &route.Spec.Rules[i]
		if keep != nil && rule.Name != nil && *rule.Name == *keep {
			continue
		}
		kept := rule.BackendRefs[:0]
		for _, b := range rule.BackendRefs {
			if _, _, ours := ownedRef(ms, b.BackendObjectReference); ours {
				changed = true
				continue
			}
			kept = append(kept, b)
		}
		rule.BackendRefs = kept
	}
	return changed
}
