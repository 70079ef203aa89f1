package fleetsim

import (
	"context"
	"encoding/json"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The InferencePool API the simulated Gateway serves (inference.networking.k8s.io/v1). The
// simulator is a Gateway, not modelship: it reads pools as unstructured objects on its own.
const (
	PoolGroup = "inference.networking.k8s.io"
	PoolKind  = "InferencePool"
)

var poolListGVK = schema.GroupVersionKind{Group: PoolGroup, Version: "v1", Kind: PoolKind + "List"}

// listPools reads the InferencePools and what each selects. A cluster without the API has none.
func listPools(ctx context.Context, c client.Client) ([]unstructured.Unstructured, map[types.NamespacedName]PoolTarget, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(poolListGVK)
	if err := c.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	targets := map[types.NamespacedName]PoolTarget{}
	for _, p := range list.Items {
		sel, _, _ := unstructured.NestedStringMap(p.Object, "spec", "selector", "matchLabels")
		if t, ok := PoolTargetOf(p.GetNamespace(), sel); ok {
			targets[types.NamespacedName{Namespace: p.GetNamespace(), Name: p.GetName()}] = t
		}
	}
	return list.Items, targets, nil
}

// PoolParents is the status.parents a Gateway writes on a pool its routes use: for each Gateway
// (parentRef) of those routes, Accepted and ResolvedRefs True (ResolvedRefs False when the
// simulator cannot map the pool's selector to pods). Entries of other controllers are kept.
func PoolParents(pool *unstructured.Unstructured, gateways []gatewayv1.ParentReference, resolvable bool, now metav1.Time) []any {
	raw, _, _ := unstructured.NestedSlice(pool.Object, "status", "parents")
	var out []any
	old := map[string][]metav1.Condition{}
	for _, r := range raw {
		m, _ := r.(map[string]any)
		name, _, _ := unstructured.NestedString(m, "parentRef", "name")
		if ctrl, _, _ := unstructured.NestedString(m, "controllerName"); ctrl != string(ControllerName) {
			out = append(out, r)
			continue
		}
		var conds []metav1.Condition
		if cs, ok := m["conditions"].([]any); ok {
			for _, c := range cs {
				cm, _ := c.(map[string]any)
				var cond metav1.Condition
				_ = runtime.DefaultUnstructuredConverter.FromUnstructured(cm, &cond)
				conds = append(conds, cond)
			}
		}
		old[name] = conds
	}
	resolved, reason, msg := metav1.ConditionTrue, "ResolvedRefs", "the simulator resolves the pool to its ModelServer color's pods"
	if !resolvable {
		resolved, reason, msg = metav1.ConditionFalse, "InvalidSelector", "the simulator maps pools by the ModelServer and color labels only"
	}
	for _, g := range gateways {
		conds := old[string(g.Name)]
		meta.SetStatusCondition(&conds, metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted",
			Message: "Accepted by the modelship fleet simulator", ObservedGeneration: pool.GetGeneration(), LastTransitionTime: now})
		meta.SetStatusCondition(&conds, metav1.Condition{Type: "ResolvedRefs", Status: resolved, Reason: reason, Message: msg,
			ObservedGeneration: pool.GetGeneration(), LastTransitionTime: now})
		cs := make([]any, 0, len(conds))
		for _, c := range conds {
			cs = append(cs, map[string]any{"type": c.Type, "status": string(c.Status), "reason": c.Reason, "message": c.Message,
				"observedGeneration": c.ObservedGeneration, "lastTransitionTime": c.LastTransitionTime.UTC().Format("2006-01-02T15:04:05Z")})
		}
		ref := map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": string(g.Name)}
		if g.Namespace != nil {
			ref["namespace"] = string(*g.Namespace)
		} else {
			ref["namespace"] = pool.GetNamespace()
		}
		out = append(out, map[string]any{"parentRef": ref, "controllerName": string(ControllerName), "conditions": cs})
	}
	return out
}

// syncPools writes each pool's status as the Gateway of the routes that use it; it returns the
// errors of the writes.
func (s *Syncer) syncPools(ctx context.Context, pools []unstructured.Unstructured, targets map[types.NamespacedName]PoolTarget,
	routes []gatewayv1.HTTPRoute, now metav1.Time) []error {
	gateways := map[types.NamespacedName][]gatewayv1.ParentReference{}
	for _, route := range routes {
		for _, rule := range route.Spec.Rules {
			for _, ref := range rule.BackendRefs {
				if !isPoolRef(ref.BackendObjectReference) {
					continue
				}
				ns := route.Namespace
				if ref.Namespace != nil {
					ns = string(*ref.Namespace)
				}
				k := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
				for _, p := range route.Spec.ParentRefs {
					if !containsParent(gateways[k], p) {
						gateways[k] = append(gateways[k], p)
					}
				}
			}
		}
	}
	var errs []error
	for i := range pools {
		p := &pools[i]
		k := types.NamespacedName{Namespace: p.GetNamespace(), Name: p.GetName()}
		gws, used := gateways[k]
		if !used {
			continue
		}
		_, resolvable := targets[k]
		parents := PoolParents(p, gws, resolvable, now)
		old, _, _ := unstructured.NestedSlice(p.Object, "status", "parents")
		if sameParents(old, parents) {
			continue
		}
		updated := p.DeepCopy()
		if err := unstructured.SetNestedSlice(updated.Object, parents, "status", "parents"); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := s.Client.Status().Update(ctx, updated); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func containsParent(list []gatewayv1.ParentReference, p gatewayv1.ParentReference) bool {
	for _, q := range list {
		if reflect.DeepEqual(q, p) {
			return true
		}
	}
	return false
}

// sameParents compares two status.parents ignoring transition times.
func sameParents(a, b []any) bool {
	strip := func(list []any) []any {
		out := make([]any, 0, len(list))
		for _, e := range list {
			m, _ := e.(map[string]any)
			c := runtime.DeepCopyJSON(m)
			if cs, ok := c["conditions"].([]any); ok {
				for _, x := range cs {
					if cm, ok := x.(map[string]any); ok {
						delete(cm, "lastTransitionTime")
					}
				}
			}
			out = append(out, c)
		}
		return out
	}
	ja, errA := json.Marshal(strip(a))
	jb, errB := json.Marshal(strip(b))
	return errA == nil && errB == nil && string(ja) == string(jb)
}
