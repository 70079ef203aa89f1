package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/rollout"
	"github.com/modelship/modelship/internal/routing"
)

// The shadow phase (spec.rollout.shadow) at the Gateway: whether it can mirror, and the
// TraefikService that mirrors through Traefik.
//
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gatewayclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=traefik.io,resources=traefikservices,verbs=get;list;watch;create;update;patch;delete

// shadowMirror is spec.rollout.shadow.mirror with its default.
func shadowMirror(ms *v1alpha1.ModelServer) v1alpha1.ShadowMirror {
	if sh := ms.Spec.Rollout.Shadow; sh != nil && sh.Mirror != "" {
		return sh.Mirror
	}
	return v1alpha1.ShadowMirrorRequestMirror
}

// mirrorUnsupported says why the Gateway cannot mirror to the candidate as spec.rollout.shadow
// asks ("" when it can, or when no shadow phase is asked): through a TraefikService, the cluster
// must serve them; with the RequestMirror filter, every GatewayClass whose controller reported
// on the route must list the features the filter needs. No report at all is not taken for a
// yes: a Gateway that does not implement the filter may fail every request of the rule.
func (r *ModelServerReconciler) mirrorUnsupported(ctx context.Context, ms *v1alpha1.ModelServer, route *gatewayv1.HTTPRoute) (string, error) {
	sh := ms.Spec.Rollout.Shadow
	if sh == nil {
		return "", nil
	}
	if shadowMirror(ms) == v1alpha1.ShadowMirrorTraefikService {
		if !r.traefikServices {
			return "spec.rollout.shadow.mirror is TraefikService but the cluster does not serve traefik.io/v1alpha1 TraefikServices: install Traefik's CRDs (and run Traefik with its kubernetescrd provider), then restart the controller", nil
		}
		return "", nil
	}
	if route == nil {
		return "the HTTPRoute does not exist yet", nil
	}
	var controllers []string
	for _, p := range route.Status.Parents {
		if c := string(p.ControllerName); c != "" && !slices.Contains(controllers, c) {
			controllers = append(controllers, c)
		}
	}
	if len(controllers) == 0 {
		return fmt.Sprintf("no Gateway has reported on HTTPRoute %s yet, so whether it honours the RequestMirror filter is unknown", route.Name), nil
	}
	var classes gatewayv1.GatewayClassList
	if err := r.List(ctx, &classes); err != nil {
		return "", fmt.Errorf("listing GatewayClasses: %w", err)
	}
	need := routing.MirrorFeatures(ms.Spec.Rollout.Shadow.Percent)
	var why []string
	for _, c := range controllers {
		found := false
		for _, gc := range classes.Items {
			if string(gc.Spec.ControllerName) != c {
				continue
			}
			found = true
			if missing := missingFeatures(gc, need); len(missing) > 0 {
				why = append(why, fmt.Sprintf("GatewayClass %s (controller %s) does not list %s in status.supportedFeatures", gc.Name, c, strings.Join(missing, ", ")))
			}
		}
		if !found {
			why = append(why, fmt.Sprintf("no GatewayClass of controller %s (which reported on the route) is readable", c))
		}
	}
	if len(why) == 0 {
		return "", nil
	}
	hint := ""
	if slices.Contains(controllers, "traefik.io/gateway-controller") {
		hint = "; Traefik mirrors through a TraefikService: set spec.rollout.shadow.mirror to TraefikService"
	}
	return strings.Join(why, "; ") + ": the RequestMirror filter is not honoured" + hint, nil
}

func missingFeatures(gc gatewayv1.GatewayClass, need []string) []string {
	var missing []string
	for _, f := range need {
		if !slices.ContainsFunc(gc.Status.SupportedFeatures, func(s gatewayv1.SupportedFeature) bool { return string(s.Name) == f }) {
			missing = append(missing, f)
		}
	}
	return missing
}

// routeMirror is the mirror the route carries for decision d (nil: none).
func routeMirror(ms *v1alpha1.ModelServer, d rollout.Decision) *routing.Mirror {
	if d.Mirror == nil || d.Status.Stable == nil {
		return nil
	}
	return &routing.Mirror{Color: d.Mirror.Color, Stable: d.Status.Stable.Color, Percent: d.Mirror.Percent, Via: shadowMirror(ms)}
}

// applyShadowService writes the shadow TraefikService while m mirrors through one, and deletes
// it (when ms controls it) otherwise. It reads it from the cache, and writes only a difference.
func (r *ModelServerReconciler) applyShadowService(ctx context.Context, ms *v1alpha1.ModelServer, m *routing.Mirror) error {
	if !r.traefikServices || (m == nil && ms.Spec.Rollout.Shadow == nil && ms.Status.Rollout.Shadow == nil) {
		return nil // nothing to write, and nothing left from a shadow phase
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(routing.TraefikServiceGVK)
	key := types.NamespacedName{Namespace: ms.Namespace, Name: ms.ShadowServiceName()}
	err := r.cacheReader.Get(ctx, key, cur)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting TraefikService %s: %w", key.Name, err)
	}
	exists := err == nil
	if m == nil || m.Via != v1alpha1.ShadowMirrorTraefikService {
		if !exists || !routing.ShadowServiceOwnedBy(cur, ms) {
			return nil
		}
		uid := cur.GetUID()
		if err := r.Delete(ctx, cur, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting TraefikService %s after the shadow phase: %w", key.Name, err)
		}
		return nil
	}
	want := routing.ShadowService(ms, *m)
	if exists && routing.ShadowServiceOwnedBy(cur, ms) && equalNested(cur.Object["spec"], want.Object["spec"]) {
		return nil
	}
	if exists && !routing.ShadowServiceOwnedBy(cur, ms) {
		return &nameConflictError{object: "TraefikService " + ms.Namespace + "/" + key.Name}
	}
	if err := controllerutil.SetControllerReference(ms, want, r.Scheme); err != nil {
		return fmt.Errorf("owner reference on TraefikService %s: %w", key.Name, err)
	}
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(want), client.FieldOwner(v1alpha1.FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying TraefikService %s: %w", key.Name, err)
	}
	return nil
}

// equalNested compares two unstructured values as JSON numbers do (an int64 read back from the
// API server equals the int64 written).
func equalNested(a, b any) bool {
	return apiequality.Semantic.DeepEqual(runtime.DeepCopyJSONValue(a), runtime.DeepCopyJSONValue(b))
}
