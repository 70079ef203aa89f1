package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/routing"
)

// The shadow phase stories (spec.rollout.shadow): the candidate is judged on mirrored requests
// before any user request is routed to it; the Gateway is asked to mirror only where it can.

func withShadow(mirror v1alpha1.ShadowMirror) msOption {
	return func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Shadow = &v1alpha1.ShadowSpec{Percent: 100, Duration: v1alpha1.Duration{Duration: 2e9}, Mirror: mirror}
	}
}

// mirrorTo is the Service the route's weighted rule mirrors to ("" for none).
func mirrorTo(r *gatewayv1.HTTPRoute) string {
	for _, rule := range r.Spec.Rules {
		for _, f := range rule.Filters {
			if f.Type == gatewayv1.HTTPRouteFilterRequestMirror && f.RequestMirror != nil {
				return string(f.RequestMirror.BackendRef.Name)
			}
		}
	}
	return ""
}

// shadowRefWeight is the weight of the route's backendRef to the shadow TraefikService (-1: none).
func shadowRefWeight(r *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer) int32 {
	for _, rule := range r.Spec.Rules {
		for _, b := range rule.BackendRefs {
			if ptr.Deref(b.Kind, "") == "TraefikService" && string(b.Name) == ms.ShadowServiceName() {
				return ptr.Deref(b.Weight, 1)
			}
		}
	}
	return -1
}

func progressing(t *testing.T, ms *v1alpha1.ModelServer) *metav1.Condition {
	return meta.FindStatusCondition(getMS(t, ms).Status.Conditions, v1alpha1.ConditionProgressing)
}

// A Gateway that has not said it mirrors is never given the filter: the rollout holds at step 0
// (Progressing False, MirrorUnsupported) with no weight on the candidate. Once its GatewayClass
// lists HTTPRouteRequestMirror, the route mirrors to the candidate, whose 3x slower time to first
// token is caught in the shadow phase: it is rolled back, no route version ever gave it weight,
// and the mirror goes with it.
func TestShadowPhaseWaitsForAMirroringGatewayThenRollsBackASlowCandidateUnseen(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "shadow", withShadow(""))
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: slowBuild})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	eventually(t, rolloutTimeout, "held: no Gateway said it mirrors", func() error {
		c := progressing(t, ms)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonMirrorUnsupported || !strings.Contains(c.Message, "no Gateway has reported") {
			return fmt.Errorf("Progressing %+v", c)
		}
		return nil
	})
	// A Gateway of a controller whose class does not list the feature: still held, and named.
	controller := "example.com/gateway"
	gc := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "mirror-" + ns}, Spec: gatewayv1.GatewayClassSpec{ControllerName: gatewayv1.GatewayController(controller)}}
	if err := k8s.Create(context.Background(), gc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), gc) })
	if err := answerRoute(ns, ms.RouteName(), metav1.ConditionTrue, "Accepted"); err != nil {
		t.Fatal(err)
	}
	eventually(t, rolloutTimeout, "held: the class does not list the feature", func() error {
		c := progressing(t, ms)
		if c == nil || c.Reason != v1alpha1.ReasonMirrorUnsupported || !strings.Contains(c.Message, "does not list HTTPRouteRequestMirror") {
			return fmt.Errorf("Progressing %+v", c)
		}
		return nil
	})
	for _, r := range tr.all() {
		if to := mirrorTo(r); to != "" {
			t.Fatalf("route version %s mirrors to %s before the Gateway said it can", r.ResourceVersion, to)
		}
	}

	gc.Status.SupportedFeatures = []gatewayv1.SupportedFeature{{Name: routing.FeatureRequestMirror}}
	if err := k8s.Status().Update(context.Background(), gc); err != nil {
		t.Fatal(err)
	}
	waitRolledBack(t, ms, v2, "decode-per-token")
	eventually(t, rolloutTimeout, "mirror gone after the rollback", func() error {
		r, err := getRoute(ns, ms.RouteName())
		if err != nil {
			return err
		}
		if to := mirrorTo(r); to != "" {
			return fmt.Errorf("still mirrors to %s", to)
		}
		return nil
	})
	mirrored := false
	for _, r := range tr.all() {
		if w := weightsOf(r, ms); w != "100/0" {
			t.Errorf("route version %s has weights %s: the candidate got user requests", r.ResourceVersion, w)
		}
		if mirrorTo(r) == ms.ServiceName(v1alpha1.Green) {
			mirrored = true
		}
	}
	if !mirrored {
		t.Error("no version of the route mirrored to the candidate's Service")
	}
}

// Through Traefik the shadow phase sends the rule to a TraefikService that answers from the
// stable color and mirrors to the candidate; a good candidate passes and goes on to the steps,
// and the TraefikService and its backendRef go once the shadow phase has passed.
func TestShadowPhaseThroughATraefikServiceGoesOnToTheSteps(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "tshadow", withShadow(v1alpha1.ShadowMirrorTraefikService))
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	waitCandidate(t, ms, imageV2)
	eventually(t, rolloutTimeout, "the TraefikService mirrors blue to green", func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(routing.TraefikServiceGVK)
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: ms.ShadowServiceName()}, u); err != nil {
			return err
		}
		name, _, _ := unstructured.NestedString(u.Object, "spec", "mirroring", "name")
		mirrors, _, _ := unstructured.NestedSlice(u.Object, "spec", "mirroring", "mirrors")
		if name != ms.ServiceName(v1alpha1.Blue) || len(mirrors) != 1 || mirrors[0].(map[string]any)["name"] != ms.ServiceName(v1alpha1.Green) {
			return fmt.Errorf("mirroring %v", u.Object["spec"])
		}
		return nil
	})
	tr.waitCandidateWeight(t, 20)
	sawShadow := false
	for _, r := range tr.all() {
		if shadowRefWeight(r, ms) == 100 {
			sawShadow = true
			if w := weightsOf(r, ms); w != "0/0" {
				t.Errorf("route version %s sends to the TraefikService with the colors at %s, want 0/0", r.ResourceVersion, w)
			}
		}
	}
	if !sawShadow {
		t.Fatal("no route version sent the rule to the shadow TraefikService")
	}
	eventually(t, rolloutTimeout, "TraefikService and its backendRef gone after the shadow phase", func() error {
		r, err := getRoute(ns, ms.RouteName())
		if err != nil {
			return err
		}
		if w := shadowRefWeight(r, ms); w >= 0 {
			return fmt.Errorf("backendRef to the TraefikService still there (weight %d)", w)
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(routing.TraefikServiceGVK)
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: ms.ShadowServiceName()}, u); err == nil {
			return fmt.Errorf("TraefikService %s still exists", u.GetName())
		}
		return nil
	})
}
