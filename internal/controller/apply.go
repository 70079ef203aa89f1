package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/rollout"
	"github.com/modelship/modelship/internal/routing"
	"github.com/modelship/modelship/internal/workload"
)

// apply makes the cluster match a decision, risk first. The route's weights, which carry an
// abort, a rollback or a weight cut to the Gateway, are written before anything that could be
// refused for reasons of its own (a webhook that refuses Deployments, a template the Deployment
// API rejects); each object is applied on its own and the errors are joined, so that one refused
// object (the candidate's Deployment) never stops another (the stable color's scaling, the
// route). Order: the Services and pools the route names, the route, the colors that grow or
// are created, then the colors whose pods go away (fewer replicas, or a new template that
// replaces them), so that traffic never points at pods that are going away. Those are applied
// only once the route was written: a color that gets a new template while the route still
// sends it traffic (a candidate superseded mid-rollout) keeps its pods until the route has
// moved the traffic off it. routeWritten says whether the route now has d.Weights.
func (r *ModelServerReconciler) apply(ctx context.Context, ms *v1alpha1.ModelServer, obs rollout.Observation, d rollout.Decision, route *gatewayv1.HTTPRoute) (routeWritten bool, err error) {
	var errs []error
	ports := map[v1alpha1.Color]int32{}
	for _, c := range routing.Colors {
		port, err := r.colorPort(ctx, ms, obs, d, c)
		if err != nil {
			errs = append(errs, err)
			port = ms.Spec.Port
		}
		ports[c] = port
		errs = append(errs, r.applyObject(ctx, ms, workload.Service(ms, c, port)))
	}
	errs = append(errs, r.applyPools(ctx, ms, ports))
	mirror := routeMirror(ms, d)
	if mirror != nil && mirror.Via == v1alpha1.ShadowMirrorTraefikService {
		// The TraefikService exists before the route sends to it.
		if err := r.applyShadowService(ctx, ms, mirror); err != nil {
			errs = append(errs, err)
			mirror = nil // the route keeps the weights alone: no user request meets a missing service
		}
	}
	if err := r.applyRoute(ctx, ms, d.Weights, d.HeaderRoute, mirror, route); err != nil {
		errs = append(errs, err)
	} else {
		routeWritten = true
		errs = append(errs, r.prunePools(ctx, ms))
		if mirror == nil || mirror.Via != v1alpha1.ShadowMirrorTraefikService {
			errs = append(errs, r.applyShadowService(ctx, ms, nil)) // gone from the route first
		}
	}
	var leaving []v1alpha1.Color
	for _, c := range routing.Colors {
		plan, ok := d.Plans[c]
		if !ok {
			continue
		}
		if o := obs.Colors[c]; o.Exists && (plan.Replicas < o.Replicas || o.Revision != plan.Revision) {
			leaving = append(leaving, c)
			continue
		}
		errs = append(errs, r.applyColor(ctx, ms, obs, c, plan))
	}
	if routeWritten {
		for _, c := range leaving {
			errs = append(errs, r.applyColor(ctx, ms, obs, c, d.Plans[c]))
		}
	}
	return routeWritten, errors.Join(errs...)
}

// colorPort is the port color c's pods listen on once this decision is applied: spec.port when
// the color gets the spec's template, otherwise the port its Deployment's template was applied
// with, so that a spec.port change never points the stable color's Service at a port its pods
// do not listen on.
func (r *ModelServerReconciler) colorPort(ctx context.Context, ms *v1alpha1.ModelServer, obs rollout.Observation, d rollout.Decision, c v1alpha1.Color) (int32, error) {
	if plan, ok := d.Plans[c]; !ok || plan.Revision == obs.Revision {
		return ms.Spec.Port, nil
	}
	dep := &appsv1.Deployment{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: ms.DeploymentName(c)}, dep); err != nil {
		if apierrors.IsNotFound(err) {
			return ms.Spec.Port, nil
		}
		return 0, fmt.Errorf("getting Deployment %s: %w", ms.DeploymentName(c), err)
	}
	return workload.DeploymentPort(dep, ms.Spec.Port), nil
}

// applyColor applies the spec template to a color that runs the spec's revision; a color that
// runs an older revision (the stable one during a rollout) keeps its template and only has its
// replicas set.
func (r *ModelServerReconciler) applyColor(ctx context.Context, ms *v1alpha1.ModelServer, obs rollout.Observation, c v1alpha1.Color, plan rollout.ColorPlan) error {
	if plan.Revision == obs.Revision {
		gate, err := r.warmGate(ctx, ms, obs.Colors[c], c, plan.Revision)
		if err != nil {
			return err
		}
		return r.applyObject(ctx, ms, workload.Deployment(ms, c, plan.Revision, plan.Replicas, gate))
	}
	o := obs.Colors[c]
	if !o.Exists {
		return fmt.Errorf("color %s should run revision %s but has no Deployment to keep it in", c, plan.Revision)
	}
	if o.Replicas == plan.Replicas {
		return nil
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ms.Namespace, Name: ms.DeploymentName(c)}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, plan.Replicas))
	if err := r.Patch(ctx, d, patch, client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
		return fmt.Errorf("scaling Deployment %s to %d: %w", d.Name, plan.Replicas, err)
	}
	return nil
}

// applyRoute writes the weights into the route: the owned HTTPRoute, or modelship's backendRefs
// in the user's route of spec.gateway.routeRef, with the header rule of spec.rollout.headerRoute
// to color header while it is set (routing.HeaderRule) and the shadow phase's mirror while it
// is set (routing.Mirror). After a change of spec.gateway.backend
// the old backends keep the traffic until the new ones are ready (see backends).
func (r *ModelServerReconciler) applyRoute(ctx context.Context, ms *v1alpha1.ModelServer, weights map[v1alpha1.Color]int32, header v1alpha1.Color, mirror *routing.Mirror, route *gatewayv1.HTTPRoute) error {
	b, _ := r.backends(ctx, ms, route, weights)
	b.Header, b.Mirror = header, mirror
	switched := route != nil && b.Pending == "" && routing.Carrier(route, ms) != b.Carrier
	if ref := ms.Spec.Gateway.RouteRef; ref != nil {
		if route == nil {
			return fmt.Errorf("HTTPRoute %s named by spec.gateway.routeRef does not exist", ref.Name)
		}
		orig := route.DeepCopy()
		changed, err := routing.SetBackendWeights(route, ms, ref.RuleName, b)
		if err != nil || !changed {
			return err
		}
		if err := r.Patch(ctx, route, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
			return fmt.Errorf("setting weights in HTTPRoute %s: %w", route.Name, err)
		}
	} else if err := r.applyObject(ctx, ms, routing.OwnedRoute(ms, b)); err != nil {
		return err
	}
	if switched {
		r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, v1alpha1.ReasonBackendSwitched, "Switch",
			"HTTPRoute %s sends the traffic to the %ss and no longer names the old backends", ms.RouteName(), b.Carrier)
	}
	return nil
}

// applyObject server-side applies an object that ms owns, with modelship's field owner.
func (r *ModelServerReconciler) applyObject(ctx context.Context, ms *v1alpha1.ModelServer, obj client.Object) error {
	if err := controllerutil.SetControllerReference(ms, obj, r.Scheme); err != nil {
		return fmt.Errorf("owner reference on %T %s: %w", obj, obj.GetName(), err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("converting %T %s: %w", obj, obj.GetName(), err)
	}
	delete(u, "status")
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u, "spec", "template", "metadata", "creationTimestamp")
	gvk, err := apiutil.GVKForObject(obj, r.Scheme)
	if err != nil {
		return fmt.Errorf("kind of %T %s: %w", obj, obj.GetName(), err)
	}
	k := appliedKey{gvk: gvk, key: client.ObjectKeyFromObject(obj)}
	hash, err := hashOf(u)
	if err != nil {
		return fmt.Errorf("hashing %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	rv := r.cachedVersion(ctx, gvk, k.key)
	if r.applied.unchanged(k, hash, rv) {
		return nil
	}
	if rv == "" {
		if err := r.notForeign(ctx, ms, gvk, k.key); err != nil {
			return err
		}
	}
	applied := &unstructured.Unstructured{Object: u}
	ac := client.ApplyConfigurationFromUnstructured(applied)
	if err := r.Apply(ctx, ac, client.FieldOwner(v1alpha1.FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	r.applied.record(k, hash, applied.GetResourceVersion())
	return nil
}

// notForeign checks, before modelship creates a child that its label-selected caches do not
// hold, that no object of another owner has that name: server-side apply with force would take
// it over. It returns a *nameConflictError naming the object when one does.
func (r *ModelServerReconciler) notForeign(ctx context.Context, ms *v1alpha1.ModelServer, gvk schema.GroupVersionKind, key types.NamespacedName) error {
	if r.LiveReader == nil {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := r.LiveReader.Get(ctx, key, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking %s %s before creating it: %w", gvk.Kind, key.Name, err)
	}
	if !metav1.IsControlledBy(u, ms) {
		return &nameConflictError{object: gvk.Kind + " " + key.String()}
	}
	return nil
}

// cachedVersion is the resourceVersion of the object in the informer cache, "" when it is not
// there (or its kind is not cached).
func (r *ModelServerReconciler) cachedVersion(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) string {
	o, err := r.Scheme.New(gvk)
	if err != nil {
		return ""
	}
	obj, ok := o.(client.Object)
	if !ok {
		return ""
	}
	if err := r.Get(ctx, key, obj); err != nil {
		return ""
	}
	return obj.GetResourceVersion()
}

// finalize removes modelship's backendRefs from a user-owned route, then the finalizer.
func (r *ModelServerReconciler) finalize(ctx context.Context, ms *v1alpha1.ModelServer) error {
	if !controllerutil.ContainsFinalizer(ms, cleanupFinalizer) {
		return nil
	}
	// The user's routes modelship wrote into: the spec's, and the one status.route recorded when
	// a move away from it was not finished.
	var users []string
	if ref := ms.Spec.Gateway.RouteRef; ref != nil {
		users = append(users, ref.Name)
	}
	if prev := ms.Status.Route; prev != nil && !prev.Owned && !slices.Contains(users, prev.Name) {
		users = append(users, prev.Name)
	}
	for _, name := range users {
		if _, err := r.removeBackendsFrom(ctx, ms, name, nil); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(ms, cleanupFinalizer)
	if err := r.Update(ctx, ms); err != nil {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}
