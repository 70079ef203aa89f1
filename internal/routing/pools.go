package routing

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The Gateway API Inference Extension's InferencePool (inference.networking.k8s.io/v1). Its Go
// module is not a dependency: modelship writes the few fields it sets as unstructured objects.
const (
	InferenceGroup = "inference.networking.k8s.io"
	PoolKind       = "InferencePool"
)

// PoolGVK is the InferencePool's group, version and kind.
var PoolGVK = schema.GroupVersionKind{Group: InferenceGroup, Version: "v1", Kind: PoolKind}

// NewPool is an empty InferencePool object to read into.
func NewPool() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(PoolGVK)
	return u
}

// InferencePool is color c's pool: it selects the color's pods (the ModelServer's and the
// color's labels), sends to their port, and names the user's endpoint picker ("{color}" in its
// name replaced by c).
func InferencePool(ms *v1alpha1.ModelServer, c v1alpha1.Color, port int32) *unstructured.Unstructured {
	u := NewPool()
	u.SetName(ms.PoolName(c))
	u.SetNamespace(ms.Namespace)
	u.SetLabels(ms.ColorLabels(c))
	selector := map[string]any{}
	for k, v := range ms.ColorLabels(c) {
		selector[k] = v
	}
	spec := map[string]any{
		"selector":    map[string]any{"matchLabels": selector},
		"targetPorts": []any{map[string]any{"number": int64(port)}},
	}
	if p := ms.Spec.Gateway.InferencePool; p != nil {
		ref := p.EndpointPickerRef
		epp := map[string]any{"name": strings.ReplaceAll(ref.Name, "{color}", string(c))}
		if ref.Group != "" {
			epp["group"] = ref.Group
		}
		if ref.Kind != "" {
			epp["kind"] = ref.Kind
		}
		if ref.Port != nil {
			epp["port"] = map[string]any{"number": int64(*ref.Port)}
		}
		if ref.FailureMode != "" {
			epp["failureMode"] = ref.FailureMode
		}
		spec["endpointPickerRef"] = epp
		if p.AppProtocol != "" {
			spec["appProtocol"] = p.AppProtocol
		}
	}
	u.Object["spec"] = spec
	return u
}

// poolParent is one Gateway's report on a pool: its conditions.
type poolParent struct {
	ParentRef struct {
		Name string `json:"name"`
	} `json:"parentRef"`
	Conditions []metav1.Condition `json:"conditions"`
}

// poolParents reads status.parents of an InferencePool.
func poolParents(pool *unstructured.Unstructured) ([]poolParent, error) {
	raw, found, err := unstructured.NestedSlice(pool.Object, "status", "parents")
	if err != nil || !found {
		return nil, err
	}
	out := make([]poolParent, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("status.parents holds a %T", r)
		}
		var p poolParent
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// WithPools folds the InferencePools' acceptance into the route's RouteAccepted condition. A pool
// that a Gateway reports Accepted or ResolvedRefs False makes it False; so does a pool that is
// missing or that no Gateway has reported on while the route is accepted (a conformant Gateway
// reports on every pool its routes use): the rollout does not move traffic onto a pool its
// Gateway has not accepted. A nil entry in pools is a pool that does not exist yet.
func WithPools(route metav1.Condition, pools map[v1alpha1.Color]*unstructured.Unstructured) metav1.Condition {
	if route.Status == metav1.ConditionFalse {
		return route
	}
	notAccepted := func(msg string) metav1.Condition {
		out := route
		out.Status, out.Reason, out.Message = metav1.ConditionFalse, v1alpha1.ReasonPoolNotAccepted, msg
		return out
	}
	var waiting []string
	for _, c := range Colors {
		pool := pools[c]
		if pool == nil {
			if route.Status == metav1.ConditionTrue {
				return notAccepted(fmt.Sprintf("InferencePool of color %s does not exist yet", c))
			}
			continue
		}
		parents, err := poolParents(pool)
		if err != nil {
			return notAccepted(fmt.Sprintf("InferencePool %s has a status modelship cannot read: %v", pool.GetName(), err))
		}
		answered := false
		for _, p := range parents {
			for _, cond := range p.Conditions {
				if cond.Type != "Accepted" && cond.Type != "ResolvedRefs" {
					continue
				}
				answered = true
				if cond.Status != metav1.ConditionTrue {
					return notAccepted(fmt.Sprintf("parent %s reports InferencePool %s %s=%s: %s: %s",
						p.ParentRef.Name, pool.GetName(), cond.Type, cond.Status, cond.Reason, cond.Message))
				}
			}
		}
		if !answered {
			waiting = append(waiting, pool.GetName())
		}
	}
	if len(waiting) > 0 && route.Status == metav1.ConditionTrue {
		return notAccepted(fmt.Sprintf("no Gateway has accepted InferencePool %s yet", strings.Join(waiting, ", ")))
	}
	if route.Status == metav1.ConditionTrue {
		route.Message += " and both InferencePools accepted"
	}
	return route
}
