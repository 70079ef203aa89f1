package routing

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The Gateway API Inference Extension's InferencePool (inference.networking.k8s.io/v1), with the
// API types of its module (sigs.k8s.io/gateway-api-inference-extension).
const (
	InferenceGroup = inferencev1.GroupName
	PoolKind       = "InferencePool"
)

// PoolGVK is the InferencePool's group, version and kind.
var PoolGVK = schema.GroupVersion{Group: inferencev1.GroupVersion.Group, Version: inferencev1.GroupVersion.Version}.WithKind(PoolKind)

// NewPool is an empty InferencePool object to read into.
func NewPool() *inferencev1.InferencePool {
	return &inferencev1.InferencePool{TypeMeta: metav1.TypeMeta{APIVersion: PoolGVK.GroupVersion().String(), Kind: PoolKind}}
}

// InferencePool is color c's pool: it selects the color's pods (the ModelServer's and the
// color's labels), sends to their port, and names the user's endpoint picker ("{color}" in its
// name replaced by c).
func InferencePool(ms *v1alpha1.ModelServer, c v1alpha1.Color, port int32) *inferencev1.InferencePool {
	pool := NewPool()
	pool.Name, pool.Namespace, pool.Labels = ms.PoolName(c), ms.Namespace, ms.ColorLabels(c)
	selector := map[inferencev1.LabelKey]inferencev1.LabelValue{}
	for k, v := range ms.ColorLabels(c) {
		selector[inferencev1.LabelKey(k)] = inferencev1.LabelValue(v)
	}
	pool.Spec = inferencev1.InferencePoolSpec{
		Selector:    inferencev1.LabelSelector{MatchLabels: selector},
		TargetPorts: []inferencev1.Port{{Number: inferencev1.PortNumber(port)}},
	}
	if p := ms.Spec.Gateway.InferencePool; p != nil {
		ref := p.EndpointPickerRef
		epp := &inferencev1.EndpointPickerRef{
			Name:        inferencev1.ObjectName(strings.ReplaceAll(ref.Name, "{color}", string(c))),
			Kind:        inferencev1.Kind(ref.Kind),
			FailureMode: inferencev1.EndpointPickerFailureMode(ref.FailureMode),
		}
		if ref.Group != "" {
			epp.Group = ptr.To(inferencev1.Group(ref.Group))
		}
		if ref.Port != nil {
			epp.Port = &inferencev1.Port{Number: inferencev1.PortNumber(*ref.Port)}
		}
		pool.Spec.EndpointPickerRef = epp
		pool.Spec.AppProtocol = inferencev1.AppProtocol(p.AppProtocol)
	}
	return pool
}

// WithPools folds the InferencePools' acceptance into the route's RouteAccepted condition. A pool
// that a Gateway reports Accepted or ResolvedRefs False makes it False; so does a pool that is
// missing or that no Gateway has reported on while the route is accepted (a conformant Gateway
// reports on every pool its routes use): the rollout does not move traffic onto a pool its
// Gateway has not accepted. A nil entry in pools is a pool that does not exist yet.
func WithPools(route metav1.Condition, pools map[v1alpha1.Color]*inferencev1.InferencePool) metav1.Condition {
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
		answered := false
		for _, p := range pool.Status.Parents {
			for _, cond := range p.Conditions {
				if cond.Type != string(inferencev1.InferencePoolConditionAccepted) && cond.Type != string(inferencev1.InferencePoolConditionResolvedRefs) {
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
