package controller

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/plan"
	"github.com/modelship/modelship/internal/routing"
)

// Where a ModelServer's backendRefs live, and how they move when spec.gateway changes: the new
// place is written first, the old one (status.route) is cleared once the new one carries the
// traffic; a change of spec.gateway.backend keeps the old backends carrying until the new ones
// are ready.

// routeTarget is where the spec puts the backendRefs: the owned HTTPRoute, or the route (and
// rule) named by spec.gateway.routeRef.
func routeTarget(ms *v1alpha1.ModelServer) v1alpha1.RouteStatus {
	ref := ms.Spec.Gateway.RouteRef
	if ref == nil {
		return v1alpha1.RouteStatus{Name: ms.RouteName(), Owned: true}
	}
	return v1alpha1.RouteStatus{Name: ref.Name, RuleName: string(ptr.Deref(ref.RuleName, ""))}
}

func ruleNameOf(s v1alpha1.RouteStatus) *gatewayv1.SectionName {
	if s.RuleName == "" {
		return nil
	}
	return ptr.To(gatewayv1.SectionName(s.RuleName))
}

func describeRoute(ms *v1alpha1.ModelServer, s v1alpha1.RouteStatus) string {
	out := "HTTPRoute " + ms.Namespace + "/" + s.Name
	if s.RuleName != "" {
		out += " (rule " + s.RuleName + ")"
	}
	return out
}

// moveRoute runs before the decision: when status.route (where the backendRefs were last
// written) is not where the spec puts them, it clears the old place once the new one carries the
// traffic (its weights written, no Gateway refused it): the owned HTTPRoute is deleted, modelship's
// backendRefs are removed from a user's route (from the old rule only, when only the rule
// changed). Then it records the new place. Until then, and while a change of
// spec.gateway.backend waits for its new backends, the RouteAccepted message says so.
func (r *ModelServerReconciler) moveRoute(ctx context.Context, ms *v1alpha1.ModelServer, o *plan.Observation) error {
	var notes []string
	if b, why := r.backends(ctx, ms, o.Route, routing.Weights(routeOrEmpty(o.Route), ms)); b.Pending != "" {
		notes = append(notes, fmt.Sprintf("spec.gateway.backend is %s but the route keeps sending traffic to the %ss until %s", b.Pending, b.Carrier, why))
	}
	target := routeTarget(ms)
	prev := ms.Status.Route
	if prev == nil && !target.Owned {
		// Written before status.route existed: an owned HTTPRoute may be left from parentRefs.
		owned, err := r.ownedRoute(ctx, ms, ms.Name)
		if err != nil {
			return err
		}
		if owned != nil {
			prev = &v1alpha1.RouteStatus{Name: ms.Name, Owned: true}
		}
	}
	switch {
	case prev != nil && *prev == target:
	case !routing.Holds(o.Route, ms, ruleNameOf(target)) || o.Accepted.Status == metav1.ConditionFalse:
		if prev != nil {
			notes = append(notes, fmt.Sprintf("%s keeps the ModelServer's backendRefs until %s carries its traffic and is not refused by a Gateway",
				describeRoute(ms, *prev), describeRoute(ms, target)))
		}
	default:
		if prev != nil {
			if err := r.retireRoute(ctx, ms, *prev, target); err != nil {
				return err
			}
		}
		ms.Status.Route = &target
	}
	if len(notes) > 0 {
		o.Accepted.Message += "; " + strings.Join(notes, "; ")
		o.Rollout.RouteMessage = o.Accepted.Message
	}
	return nil
}

func routeOrEmpty(route *gatewayv1.HTTPRoute) *gatewayv1.HTTPRoute {
	if route == nil {
		return &gatewayv1.HTTPRoute{}
	}
	return route
}

// retireRoute clears prev, where the backendRefs were, now that target carries them: the owned
// HTTPRoute is deleted (when ms controls it and target is another route); a user's route loses
// modelship's backendRefs (all of them, or those outside target's rule when target is the same
// route with another rule).
func (r *ModelServerReconciler) retireRoute(ctx context.Context, ms *v1alpha1.ModelServer, prev, target v1alpha1.RouteStatus) error {
	log := ctrl.LoggerFrom(ctx)
	if prev.Owned {
		if prev.Name == target.Name {
			return nil // routeRef names the route modelship owned: it stays, as the user's
		}
		route, err := r.ownedRoute(ctx, ms, prev.Name)
		if err != nil || route == nil {
			return err
		}
		if err := r.Delete(ctx, route, client.Preconditions{UID: &route.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the HTTPRoute %s modelship owned: %w", prev.Name, err)
		}
		log.Info("Deleted the owned HTTPRoute: the backendRefs moved", "HTTPRoute", prev.Name, "to", describeRoute(ms, target))
		r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, v1alpha1.ReasonRouteMoved, "Move", "%s carries the traffic: deleted the HTTPRoute %s modelship owned",
			describeRoute(ms, target), prev.Name)
		return nil
	}
	var keep *gatewayv1.SectionName
	if prev.Name == target.Name && !target.Owned {
		if target.RuleName == "" {
			return nil // the rules that reference the backendRefs keep carrying them
		}
		keep = ruleNameOf(target)
	}
	removed, err := r.removeBackendsFrom(ctx, ms, prev.Name, keep)
	if err != nil || !removed {
		return err
	}
	log.Info("Removed the backendRefs from the route they moved out of", "HTTPRoute", prev.Name, "to", describeRoute(ms, target))
	r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, v1alpha1.ReasonRouteMoved, "Move", "%s carries the traffic: removed the ModelServer's backendRefs from %s",
		describeRoute(ms, target), describeRoute(ms, prev))
	return nil
}

// ownedRoute is the HTTPRoute name when ms controls it, nil when it is missing or not ms's.
func (r *ModelServerReconciler) ownedRoute(ctx context.Context, ms *v1alpha1.ModelServer, name string) (*gatewayv1.HTTPRoute, error) {
	route := &gatewayv1.HTTPRoute{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: name}, route)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting HTTPRoute %s: %w", name, err)
	}
	if !metav1.IsControlledBy(route, ms) {
		return nil, nil
	}
	return route, nil
}

// removeBackendsFrom removes modelship's backendRefs from the user's route name (from every
// rule, or from every rule but keep) and reports whether it changed the route.
func (r *ModelServerReconciler) removeBackendsFrom(ctx context.Context, ms *v1alpha1.ModelServer, name string, keep *gatewayv1.SectionName) (bool, error) {
	route := &gatewayv1.HTTPRoute{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: name}, route)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getting HTTPRoute %s: %w", name, err)
	}
	orig := route.DeepCopy()
	var removed bool
	if keep != nil {
		removed = routing.RemoveBackendsOutside(route, ms, *keep)
	} else {
		removed = routing.RemoveBackends(route, ms)
	}
	if !removed {
		return false, nil
	}
	if err := r.Patch(ctx, route, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(v1alpha1.FieldOwner)); err != nil {
		return false, fmt.Errorf("removing backends from HTTPRoute %s: %w", name, err)
	}
	return true, nil
}

// backends decides what the route's rule holds this pass. When spec.gateway.backend changed,
// the kind that carries the traffic in the route stays the carrier, with the new kind referenced
// at weight 0, until the new backends are ready; why says what they wait for. InferencePools are
// ready once both exist and a Gateway accepted them and resolved their endpoint pickers (the
// pools' status, as WithPools reads it) and every color that carries traffic has Ready pods;
// Services at once (they exist before the route is written and select the same pods).
func (r *ModelServerReconciler) backends(ctx context.Context, ms *v1alpha1.ModelServer, route *gatewayv1.HTTPRoute, weights map[v1alpha1.Color]int32) (b routing.Backends, why string) {
	direct := routing.Direct(ms, weights)
	carrier := routing.Carrier(route, ms)
	if carrier == direct.Carrier || direct.Carrier != v1alpha1.BackendInferencePool {
		return direct, ""
	}
	waiting := routing.Backends{Weights: weights, Carrier: carrier, Pending: direct.Carrier}
	if c := routing.WithPools(metav1.Condition{Status: metav1.ConditionTrue}, r.readPools(ctx, ms)); c.Status != metav1.ConditionTrue {
		return waiting, "both InferencePools are accepted: " + c.Message
	}
	for _, c := range routing.Colors {
		if weights[c] == 0 {
			continue
		}
		d := &appsv1.Deployment{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: ms.DeploymentName(c)}, d); err != nil || d.Status.ReadyReplicas == 0 {
			return waiting, fmt.Sprintf("the pods of color %s, which carries %d%% of the traffic, are Ready", c, weights[c])
		}
	}
	return direct, ""
}

// routeRefConflict says, as a sentence, why the HTTPRoute of spec.gateway.routeRef is not this
// ModelServer's to write into: another object controls it (another ModelServer's owned route, or
// anything else's), or the rule it would use already carries another ModelServer's backendRefs.
// Writing there would start a write fight, or send one model's requests to another. "" when the
// route is the user's and free (or ms's own, or missing: applyRoute says so).
func (r *ModelServerReconciler) routeRefConflict(ctx context.Context, ms *v1alpha1.ModelServer) (string, error) {
	ref := ms.Spec.Gateway.RouteRef
	if ref == nil {
		return "", nil
	}
	route := &gatewayv1.HTTPRoute{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: ref.Name}, route)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("getting HTTPRoute %s of spec.gateway.routeRef: %w", ref.Name, err)
	}
	subject := fmt.Sprintf("HTTPRoute %s/%s named by spec.gateway.routeRef", ms.Namespace, ref.Name)
	if owner := metav1.GetControllerOf(route); owner != nil && owner.UID != ms.UID {
		return fmt.Sprintf("%s is controlled by %s %s/%s: modelship writes nothing into it; name a route of your own.",
			subject, owner.Kind, ms.Namespace, owner.Name), nil
	}
	others, err := r.modelServersReferencing(ctx, ms.Namespace, ref.Name)
	if err != nil {
		return "", err
	}
	for i := range others {
		other := &others[i]
		if other.UID == ms.UID {
			continue
		}
		if routing.Shares(route, ms, other, ref.RuleName) {
			return fmt.Sprintf("%s already carries the backendRefs of ModelServer %s/%s in the rule this ModelServer would use: "+
				"modelship writes nothing into it; name another rule (routeRef.ruleName) or route.", subject, ms.Namespace, other.Name), nil
		}
	}
	return "", nil
}

// modelServersReferencing lists the ModelServers of the namespace whose spec.gateway.routeRef
// names the route: through the cache's index when there is one, else by listing them all.
func (r *ModelServerReconciler) modelServersReferencing(ctx context.Context, ns, route string) ([]v1alpha1.ModelServer, error) {
	var list v1alpha1.ModelServerList
	opts := []client.ListOption{client.InNamespace(ns)}
	if r.podIndex { // set with the other indexes, routeRefIndex among them
		opts = append(opts, client.MatchingFields{routeRefIndex: route})
	}
	if err := r.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing the ModelServers that reference HTTPRoute %s: %w", route, err)
	}
	out := list.Items[:0]
	for _, ms := range list.Items {
		if ref := ms.Spec.Gateway.RouteRef; ref != nil && ref.Name == route {
			out = append(out, ms)
		}
	}
	return out, nil
}
