package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/routing"
)

// InferencePools of the Gateway API Inference Extension (spec.gateway.backend InferencePool).
//
// +kubebuilder:rbac:groups=inference.networking.k8s.io,resources=inferencepools,verbs=get;list;watch;create;update;patch;delete

// apiServed reports whether the cluster serves a kind (InferencePools, KEDA's ScaledObjects).
func apiServed(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking up the %s API: %w", gvk.Kind, err)
	}
	return true, nil
}

// poolAPIMissing says why a ModelServer that asks for InferencePools cannot have them: the API
// was not served when the controller started (so it does not watch pools). "" when it can.
func (r *ModelServerReconciler) poolAPIMissing(ms *v1alpha1.ModelServer) string {
	if !ms.UsesInferencePools() || r.InferencePools {
		return ""
	}
	return "spec.gateway.backend is InferencePool but the cluster does not serve inference.networking.k8s.io/v1 " +
		"InferencePools: install the Gateway API Inference Extension's CRD, then restart the controller"
}

// applyPools applies both colors' InferencePools when the spec asks for them.
func (r *ModelServerReconciler) applyPools(ctx context.Context, ms *v1alpha1.ModelServer, ports map[v1alpha1.Color]int32) error {
	if !ms.UsesInferencePools() {
		return nil
	}
	for _, c := range routing.Colors {
		if err := r.applyObject(ctx, ms, routing.InferencePool(ms, c, ports[c])); err != nil {
			return err
		}
	}
	return nil
}

// prunePools deletes the pools this ModelServer controls once it no longer routes to them
// (spec.gateway.backend back to Service); it runs after the route was written, and waits while
// a route modelship writes (the spec's, or the one status.route recorded) still sends traffic to
// them as last read (the route's update brings the next pass).
func (r *ModelServerReconciler) prunePools(ctx context.Context, ms *v1alpha1.ModelServer) error {
	if ms.UsesInferencePools() || !r.InferencePools {
		return nil
	}
	names := []string{ms.RouteName()}
	if prev := ms.Status.Route; prev != nil && prev.Name != ms.RouteName() {
		names = append(names, prev.Name)
	}
	for _, name := range names {
		route := &gatewayv1.HTTPRoute{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: name}, route); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("getting HTTPRoute %s: %w", name, err)
		} else if err == nil && routing.Carrier(route, ms) == v1alpha1.BackendInferencePool && routing.Holds(route, ms, nil) {
			return nil
		}
	}
	for c, pool := range r.readPools(ctx, ms) {
		if !metav1.IsControlledBy(pool, ms) {
			continue
		}
		if err := r.Delete(ctx, pool); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting InferencePool %s of color %s: %w", pool.GetName(), c, err)
		}
	}
	return nil
}

// readPools reads both colors' InferencePools from the cache; a missing pool is a nil entry.
func (r *ModelServerReconciler) readPools(ctx context.Context, ms *v1alpha1.ModelServer) map[v1alpha1.Color]*inferencev1.InferencePool {
	out := map[v1alpha1.Color]*inferencev1.InferencePool{}
	if !r.InferencePools {
		return out
	}
	for _, c := range routing.Colors {
		pool := routing.NewPool()
		// Missing or unreadable counts as absent: the rollout holds on it, it does not guess.
		if err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: ms.PoolName(c)}, pool); err == nil {
			out[c] = pool
		}
	}
	return out
}
