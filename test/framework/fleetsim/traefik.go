package fleetsim

// Argo Rollouts' canary in make bench-peers routes through a TraefikService: the HTTPRoute
// names it as its backendRef, and Argo moves the weights of the stable and canary Services in
// its spec.weighted.services. Playing the Gateway, the simulator follows that reference as
// Traefik does (both its providers on), and tells the Rollout's ReplicaSets apart by their pod
// template hash.

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TraefikService's group and kind, as an HTTPRoute backendRef names them.
const (
	TraefikGroup = "traefik.io"
	TraefikKind  = "TraefikService"
)

// LabelPeerRevision is the label Argo Rollouts puts on the pods of each of a Rollout's
// ReplicaSets (and into its stable and canary Services' selectors): a peer's pod carrying it is
// in group <app>-<hash>, so that the stable and the canary pods are told apart.
const LabelPeerRevision = "rollouts-pod-template-hash"

var traefikServiceListGVK = schema.GroupVersionKind{Group: TraefikGroup, Version: "v1alpha1", Kind: TraefikKind + "List"}

// peerGroup is the group of a peer's pod (by its labels) or of the pods a Service selects (by
// its selector): the LabelPeerGroup value, followed by -<hash> when LabelPeerRevision is there.
func peerGroup(labels map[string]string) string {
	g := labels[LabelPeerGroup]
	if g == "" {
		return ""
	}
	if h := labels[LabelPeerRevision]; h != "" {
		return g + "-" + h
	}
	return g
}

// WeightedService is one entry of a TraefikService's spec.weighted.services that names a
// Kubernetes Service.
type WeightedService struct {
	Name   string
	Weight int32
}

// listTraefikServices reads the weighted services of every TraefikService; none when the CRD is
// not installed.
func listTraefikServices(ctx context.Context, c client.Client) (map[types.NamespacedName][]WeightedService, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(traefikServiceListGVK)
	if err := c.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing TraefikServices: %w", err)
	}
	out := map[types.NamespacedName][]WeightedService{}
	for i := range list.Items {
		out[types.NamespacedName{Namespace: list.Items[i].GetNamespace(), Name: list.Items[i].GetName()}] = WeightedServices(&list.Items[i])
	}
	return out, nil
}

// WeightedServices reads a TraefikService's spec.weighted.services that are Kubernetes Services
// (kind Service or none) in its namespace; an entry without weight weighs 1, as in Traefik.
func WeightedServices(u *unstructured.Unstructured) []WeightedService {
	raw, _, _ := unstructured.NestedSlice(u.Object, "spec", "weighted", "services")
	var out []WeightedService
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		if kind, _, _ := unstructured.NestedString(m, "kind"); kind != "" && kind != "Service" {
			continue
		}
		if ns, _, _ := unstructured.NestedString(m, "namespace"); ns != "" && ns != u.GetNamespace() {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "name")
		w := int64(1)
		switch v := m["weight"].(type) {
		case int64:
			w = v
		case float64:
			w = int64(v)
		}
		out = append(out, WeightedService{Name: name, Weight: int32(w)})
	}
	return out
}

// ExpandTraefikServices returns route with each backendRef to a known TraefikService replaced
// by backendRefs to its weighted Services, so that RouteWeights reads the split Traefik makes:
// a rule's backends are first picked by their weights, then the TraefikService picks among its
// services by theirs. The weights are scaled to integers: every backendRef of a rule is
// multiplied by the product of the rule's TraefikService weight sums, a TraefikService's service
// by the product of the others'. A TraefikService whose weights are all 0 contributes nothing.
// route itself is not changed; a route without TraefikService backendRefs comes back as is.
func ExpandTraefikServices(route *gatewayv1.HTTPRoute, services map[types.NamespacedName][]WeightedService) *gatewayv1.HTTPRoute {
	isTraefik := func(ref gatewayv1.HTTPBackendRef) bool {
		return ref.Group != nil && string(*ref.Group) == TraefikGroup && ref.Kind != nil && string(*ref.Kind) == TraefikKind
	}
	found := false
	for _, rule := range route.Spec.Rules {
		for _, ref := range rule.BackendRefs {
			found = found || isTraefik(ref)
		}
	}
	if !found {
		return route
	}
	out := route.DeepCopy()
	for i, rule := range out.Spec.Rules {
		sums := map[int]int64{}
		product := int64(1)
		for j, ref := range rule.BackendRefs {
			if !isTraefik(ref) {
				continue
			}
			var sum int64
			for _, s := range services[refKey(route.Namespace, ref)] {
				sum += int64(s.Weight)
			}
			sums[j] = sum
			if sum > 0 {
				product *= sum
			}
		}
		var refs []gatewayv1.HTTPBackendRef
		for j, ref := range rule.BackendRefs {
			w := int64(ptr.Deref(ref.Weight, 1))
			if !isTraefik(ref) {
				ref.Weight = ptr.To(int32(w * product))
				refs = append(refs, ref)
				continue
			}
			if sums[j] == 0 {
				continue
			}
			ns := gatewayv1.Namespace(refKey(route.Namespace, ref).Namespace)
			for _, s := range services[refKey(route.Namespace, ref)] {
				refs = append(refs, gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(s.Name), Namespace: &ns},
					Weight:                 ptr.To(int32(w * int64(s.Weight) * product / sums[j])),
				}})
			}
		}
		out.Spec.Rules[i].BackendRefs = refs
	}
	return out
}

// refKey is the namespaced name a backendRef names, in the route's namespace by default.
func refKey(routeNamespace string, ref gatewayv1.HTTPBackendRef) types.NamespacedName {
	ns := routeNamespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	return types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
}
