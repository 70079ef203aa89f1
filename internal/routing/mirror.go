package routing

import (
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The shadow phase's mirror (spec.rollout.shadow): the weighted rule mirrors a share of its
// requests to the candidate's Service, by the Gateway API RequestMirror filter, or, for Traefik,
// by sending the rule to a TraefikService whose mirroring service answers from the stable
// color's Service and mirrors to the candidate's.

// Mirror is the mirror the weighted rule carries: to color's Service, percent of the requests,
// as via says.
type Mirror struct {
	Color   v1alpha1.Color
	Stable  v1alpha1.Color
	Percent int32
	Via     v1alpha1.ShadowMirror
}

// Features a GatewayClass lists in status.supportedFeatures when its Gateways honour the
// RequestMirror filter, and its percent.
const (
	FeatureRequestMirror           = "HTTPRouteRequestMirror"
	FeatureRequestPercentageMirror = "HTTPRouteRequestPercentageMirror"
)

// TraefikServiceGVK is Traefik's TraefikService (its kubernetescrd provider).
var TraefikServiceGVK = schema.GroupVersionKind{Group: "traefik.io", Version: "v1alpha1", Kind: "TraefikService"}

// MirrorFeatures are the GatewayClass features a RequestMirror of percent needs.
func MirrorFeatures(percent int32) []string {
	if percent < 100 {
		return []string{FeatureRequestMirror, FeatureRequestPercentageMirror}
	}
	return []string{FeatureRequestMirror}
}

// mirrorFilter is the RequestMirror filter to m's color's Service.
func mirrorFilter(ms *v1alpha1.ModelServer, m *Mirror) gatewayv1.HTTPRouteFilter {
	f := gatewayv1.HTTPRouteFilter{
		Type: gatewayv1.HTTPRouteFilterRequestMirror,
		RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: gatewayv1.BackendObjectReference{
			Group: ptr.To(gatewayv1.Group("")),
			Kind:  ptr.To(gatewayv1.Kind("Service")),
			Name:  gatewayv1.ObjectName(ms.ServiceName(m.Color)),
			Port:  ptr.To(ms.Spec.Port),
		}},
	}
	if m.Percent < 100 {
		f.RequestMirror.Percent = ptr.To(m.Percent)
	}
	return f
}

// isOurMirror reports whether f is a RequestMirror filter to one of ms's Services.
func isOurMirror(f gatewayv1.HTTPRouteFilter, ms *v1alpha1.ModelServer) bool {
	if f.Type != gatewayv1.HTTPRouteFilterRequestMirror || f.RequestMirror == nil {
		return false
	}
	_, kind, ours := ownedRef(ms, f.RequestMirror.BackendRef)
	return ours && kind == v1alpha1.BackendService
}

// withoutOurMirror is filters less ms's RequestMirror filters (a copy).
func withoutOurMirror(filters []gatewayv1.HTTPRouteFilter, ms *v1alpha1.ModelServer) []gatewayv1.HTTPRouteFilter {
	var out []gatewayv1.HTTPRouteFilter
	for _, f := range filters {
		if !isOurMirror(f, ms) {
			out = append(out, *f.DeepCopy())
		}
	}
	return out
}

// setMirrorFilter makes ms's RequestMirror filter in rule what m asks (m nil or another way of
// mirroring: none). It reports whether the rule changed.
func setMirrorFilter(rule *gatewayv1.HTTPRouteRule, ms *v1alpha1.ModelServer, m *Mirror) bool {
	want := withoutOurMirror(rule.Filters, ms)
	if m != nil && m.Via == v1alpha1.ShadowMirrorRequestMirror {
		want = append(want, mirrorFilter(ms, m))
	}
	if slices.EqualFunc(want, rule.Filters, func(a, b gatewayv1.HTTPRouteFilter) bool { return apiequality.Semantic.DeepEqual(a, b) }) {
		return false
	}
	rule.Filters = want
	return true
}

// isShadowRef reports whether ref is ms's shadow TraefikService.
func isShadowRef(ref gatewayv1.BackendObjectReference, ms *v1alpha1.ModelServer) bool {
	return ptr.Deref(ref.Group, "") == gatewayv1.Group(TraefikServiceGVK.Group) && ptr.Deref(ref.Kind, "") == gatewayv1.Kind(TraefikServiceGVK.Kind) &&
		string(ref.Name) == ms.ShadowServiceName() && (ref.Namespace == nil || string(*ref.Namespace) == ms.Namespace)
}

// shadowRef is the backendRef to ms's shadow TraefikService, which carries all of the rule's
// traffic while it is there (ms's other refs are at 0).
func shadowRef(ms *v1alpha1.ModelServer) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{
			Group: ptr.To(gatewayv1.Group(TraefikServiceGVK.Group)),
			Kind:  ptr.To(gatewayv1.Kind(TraefikServiceGVK.Kind)),
			Name:  gatewayv1.ObjectName(ms.ShadowServiceName()),
		},
		Weight: ptr.To(int32(100)),
	}}
}

// viaTraefik reports whether b mirrors through the shadow TraefikService.
func (b Backends) viaTraefik() bool {
	return b.Mirror != nil && b.Mirror.Via == v1alpha1.ShadowMirrorTraefikService
}

// ShadowService is the TraefikService of m (Via TraefikService): a mirroring service that
// answers every request from the stable color's Service and mirrors m.Percent of them (bodies
// included) to the candidate's, whose answers Traefik discards.
func ShadowService(ms *v1alpha1.ModelServer, m Mirror) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(TraefikServiceGVK)
	u.SetNamespace(ms.Namespace)
	u.SetName(ms.ShadowServiceName())
	u.SetLabels(ms.SelectorLabels())
	port := int64(ms.Spec.Port)
	u.Object["spec"] = map[string]any{
		"mirroring": map[string]any{
			"name": ms.ServiceName(m.Stable),
			"port": port,
			"mirrors": []any{map[string]any{
				"name":    ms.ServiceName(m.Color),
				"port":    port,
				"percent": int64(m.Percent),
			}},
		},
	}
	return u
}

// ShadowServiceOwnedBy reports whether u is ms's shadow TraefikService (by name and controller).
func ShadowServiceOwnedBy(u *unstructured.Unstructured, ms *v1alpha1.ModelServer) bool {
	if u.GetName() != ms.ShadowServiceName() || u.GetNamespace() != ms.Namespace {
		return false
	}
	ref := metav1.GetControllerOf(u)
	return ref != nil && ref.UID == ms.UID
}
