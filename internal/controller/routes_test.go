package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/routing"
)

// ruleRefs lists the backendRefs of a route's rule as "kind name weight".
func ruleRefs(rule gatewayv1.HTTPRouteRule) []string {
	out := []string{}
	for _, b := range rule.BackendRefs {
		out = append(out, fmt.Sprintf("%s %s %d", ptr.Deref(b.Kind, "Service"), b.Name, ptr.Deref(b.Weight, 1)))
	}
	return out
}

// ruleOf is the rule of a route with the given name.
func ruleOf(r *gatewayv1.HTTPRoute, name string) gatewayv1.HTTPRouteRule {
	for _, rule := range r.Spec.Rules {
		if ptr.Deref(rule.Name, "") == gatewayv1.SectionName(name) {
			return rule
		}
	}
	return gatewayv1.HTTPRouteRule{}
}

// routeIs waits until the route's rule holds exactly the backendRefs want ("kind name weight").
func routeIs(t *testing.T, ns, route, rule string, want ...string) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("HTTPRoute %s rule %q holds %v", route, rule, want), func() error {
		r, err := getRoute(ns, route)
		if err != nil {
			return err
		}
		got := ruleRefs(ruleOf(r, rule))
		if rule == "" {
			got = ruleRefs(r.Spec.Rules[0])
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("holds %v", got)
		}
		return nil
	})
}

// routeRecorded waits until status.route says where the backendRefs are.
func routeRecorded(t *testing.T, ms *v1alpha1.ModelServer, want v1alpha1.RouteStatus) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("status.route %+v", want), func() error {
		if got := getMS(t, ms).Status.Route; got == nil || *got != want {
			return fmt.Errorf("status.route %+v", got)
		}
		return nil
	})
}

func TestMovingTheBackendRefsBetweenRoutesAndRulesLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	createUserRoute(t, ns)
	other := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Rules:           []gatewayv1.HTTPRouteRule{{Name: ptr.To(gatewayv1.SectionName("llm"))}},
		},
	}
	if err := k8s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	ms := newModelServer(ns, "mover")
	startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: healthy})
	playDeployments(t, ns)
	ours := []string{"Service mover-blue 100", "Service mover-green 0"}
	routeIs(t, ns, "mover", "", ours...)

	// parentRefs -> routeRef: the user's rule gets the weights, then the owned route goes.
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway = v1alpha1.GatewaySpec{RouteRef: &v1alpha1.RouteReference{Name: "shared", RuleName: ptr.To(gatewayv1.SectionName("llm"))}}
	})
	routeIs(t, ns, "shared", "llm", ours...)
	eventually(t, 20*time.Second, "the owned HTTPRoute deleted", func() error {
		if _, err := getRoute(ns, "mover"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the owned HTTPRoute is still there (%v)", err)
		}
		return nil
	})
	routeRecorded(t, ms, v1alpha1.RouteStatus{Name: "shared", RuleName: "llm"})
	waitEvent(t, ms, corev1.EventTypeNormal, v1alpha1.ReasonRouteMoved)

	// ruleName llm -> docs: the docs rule gets them beside the user's backend, the llm rule loses them.
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway.RouteRef.RuleName = ptr.To(gatewayv1.SectionName("docs"))
	})
	routeIs(t, ns, "shared", "docs", append([]string{"Service legacy 1"}, ours...)...)
	routeIs(t, ns, "shared", "llm")
	routeRecorded(t, ms, v1alpha1.RouteStatus{Name: "shared", RuleName: "docs"})

	// routeRef shared -> other: shared is back to what the user wrote.
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway.RouteRef = &v1alpha1.RouteReference{Name: "other"}
	})
	routeIs(t, ns, "other", "llm", ours...)
	routeIs(t, ns, "shared", "docs", "Service legacy 1")
	routeIs(t, ns, "shared", "llm")
	routeRecorded(t, ms, v1alpha1.RouteStatus{Name: "other"})

	// routeRef -> parentRefs: the owned route is back and the user's route loses the refs.
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway = newModelServer(ns, ms.Name).Spec.Gateway
	})
	routeIs(t, ns, "mover", "", ours...)
	routeIs(t, ns, "other", "llm")
	routeRecorded(t, ms, v1alpha1.RouteStatus{Name: "mover", Owned: true})
	r, err := getRoute(ns, "mover")
	if err != nil {
		t.Fatal(err)
	}
	if err := ownedBy(r, getMS(t, ms)); err != nil {
		t.Error(err)
	}
}

func TestSwitchingToInferencePoolsKeepsTheServicesCarryingUntilAGatewayAcceptedThePools(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "switch")
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: healthy})
	playDeployments(t, ns)

	updateMS(t, ms, onPools)
	// The pools are made and named at weight 0 (so that a Gateway reports on them); the
	// Services keep the traffic, and RouteAccepted says why.
	routeIs(t, ns, "switch", "", "Service switch-blue 100", "Service switch-green 0", "InferencePool switch-blue 0", "InferencePool switch-green 0")
	eventually(t, 20*time.Second, "RouteAccepted names the wait", func() error {
		got := getMS(t, ms)
		c := condition(got, v1alpha1.ConditionRouteAccepted)
		if c == nil || c.ObservedGeneration != got.Generation || !strings.Contains(c.Message, "keeps sending traffic to the Services until both InferencePools are accepted") {
			return fmt.Errorf("RouteAccepted %+v (generation %d)", c, got.Generation)
		}
		return nil
	})
	for _, c := range routing.Colors {
		if _, err := getPool(ns, ms.PoolName(c)); err != nil {
			t.Fatalf("pool %s: %v", ms.PoolName(c), err)
		}
	}
	carried := func(r *gatewayv1.HTTPRoute) bool {
		for _, b := range r.Spec.Rules[0].BackendRefs {
			if ptr.Deref(b.Kind, "") == routing.PoolKind && ptr.Deref(b.Weight, 1) > 0 {
				return true
			}
		}
		return false
	}
	before := tr.all()

	// A Gateway accepts both pools and resolves their endpoint pickers: the route switches.
	eventually(t, 20*time.Second, "the Gateway's answers", func() error {
		for _, c := range routing.Colors {
			if err := answerPool(ns, ms.PoolName(c), metav1.ConditionTrue, "ResolvedRefs"); err != nil {
				return err
			}
		}
		return nil
	})
	routeIs(t, ns, "switch", "", "InferencePool switch-blue 100", "InferencePool switch-green 0")
	waitEvent(t, ms, corev1.EventTypeNormal, v1alpha1.ReasonBackendSwitched)
	for _, r := range before {
		if carried(r) {
			t.Errorf("route version %s sent traffic to a pool before a Gateway accepted it: %v", r.ResourceVersion, ruleRefs(r.Spec.Rules[0]))
		}
	}
	if h := tr.history(); slices.ContainsFunc(h, func(w string) bool { return w != "100/0" }) {
		t.Errorf("the route's weights went %v through the switch; want 100/0 throughout", h)
	}

	// Back to Services: they switch in at once, and the pools go once the route no longer names them.
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway.Backend, ms.Spec.Gateway.InferencePool = v1alpha1.BackendService, nil
	})
	routeIs(t, ns, "switch", "", "Service switch-blue 100", "Service switch-green 0")
	eventually(t, 20*time.Second, "pools deleted", func() error {
		for _, c := range routing.Colors {
			if _, err := getPool(ns, ms.PoolName(c)); !apierrors.IsNotFound(err) {
				return fmt.Errorf("pool %s: %v", ms.PoolName(c), err)
			}
		}
		return nil
	})
}

func TestARouteRefToARouteAnotherModelServerControlsIsRefusedWithoutAWrite(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	owner := newModelServer(ns, "owner")
	if err := k8s.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	routeIs(t, ns, "owner", "", "Service owner-blue 100", "Service owner-green 0")

	intruder := newModelServer(ns, "intruder", func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway = v1alpha1.GatewaySpec{RouteRef: &v1alpha1.RouteReference{Name: "owner"}}
	})
	if err := k8s.Create(ctx, intruder); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "Stalled NameConflict naming the owner", func() error {
		c := condition(getMS(t, intruder), v1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonNameConflict {
			return fmt.Errorf("Stalled %+v", c)
		}
		if !strings.Contains(c.Message, "HTTPRoute "+ns+"/owner") || !strings.Contains(c.Message, "ModelServer "+ns+"/owner") {
			return fmt.Errorf("the message does not name the route and its owner: %q", c.Message)
		}
		return nil
	})
	// The refusing pass wrote nothing: no backendRef of the intruder in the route, no Deployment.
	routeIs(t, ns, "owner", "", "Service owner-blue 100", "Service owner-green 0")
	r, err := getRoute(ns, "owner")
	if err != nil {
		t.Fatal(err)
	}
	if w := routing.Weights(r, intruder); w != nil {
		t.Errorf("the intruder's weights are in the other ModelServer's route: %v", w)
	}
	if _, err := getDeployment(ns, intruder.DeploymentName(v1alpha1.Blue)); !apierrors.IsNotFound(err) {
		t.Errorf("a refused ModelServer got a Deployment (%v)", err)
	}
	waitEvent(t, intruder, corev1.EventTypeWarning, v1alpha1.ReasonNameConflict)
}

func TestARouteRefToARuleAnotherModelServerAlreadyUsesIsRefused(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	createUserRoute(t, ns)
	onShared := func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway = v1alpha1.GatewaySpec{RouteRef: &v1alpha1.RouteReference{Name: "shared", RuleName: ptr.To(gatewayv1.SectionName("llm"))}}
	}
	first := newModelServer(ns, "first", onShared)
	if err := k8s.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	routeIs(t, ns, "shared", "llm", "Service first-blue 100", "Service first-green 0")

	second := newModelServer(ns, "second", onShared)
	if err := k8s.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "Stalled NameConflict naming the first ModelServer", func() error {
		c := condition(getMS(t, second), v1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonNameConflict || !strings.Contains(c.Message, "ModelServer "+ns+"/first") {
			return fmt.Errorf("Stalled %+v", c)
		}
		return nil
	})
	routeIs(t, ns, "shared", "llm", "Service first-blue 100", "Service first-green 0")

	// Another rule is free: the second ModelServer goes there.
	updateMS(t, second, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway.RouteRef.RuleName = ptr.To(gatewayv1.SectionName("docs"))
	})
	routeIs(t, ns, "shared", "docs", "Service legacy 1", "Service second-blue 100", "Service second-green 0")
	eventually(t, 20*time.Second, "no longer Stalled", func() error {
		if c := condition(getMS(t, second), v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("Stalled %+v", c)
		}
		return nil
	})
}

func TestTheOwnedRouteStaysWhileAGatewayRefusesTheRouteTheBackendRefsMovedTo(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{})
	ctx := context.Background()
	stamp := time.Now().UnixNano() % 1e6
	ms := newModelServer(manualNamespace, fmt.Sprintf("held-%d", stamp))
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	pass(t, r, ms)
	markReady(t, ms.Namespace, ms.DeploymentName(v1alpha1.Blue))
	pass(t, r, ms)
	owned := ms.Name
	if _, err := getRoute(ms.Namespace, owned); err != nil {
		t.Fatalf("the owned HTTPRoute: %v", err)
	}
	shared := fmt.Sprintf("shared-%d", stamp)
	if err := k8s.Create(ctx, &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ms.Namespace, Name: shared},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Rules:           []gatewayv1.HTTPRouteRule{{Name: ptr.To(gatewayv1.SectionName("llm"))}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway = v1alpha1.GatewaySpec{RouteRef: &v1alpha1.RouteReference{Name: shared}}
	})
	pass(t, r, ms) // writes the backendRefs into the user's route
	routeIs(t, ms.Namespace, shared, "llm", fmt.Sprintf("Service %s-blue 100", ms.Name), fmt.Sprintf("Service %s-green 0", ms.Name))

	// A Gateway refuses the route they moved to: the owned route keeps serving, and RouteAccepted says so.
	if err := answerRoute(ms.Namespace, shared, metav1.ConditionFalse, "NotAllowedByListeners"); err != nil {
		t.Fatal(err)
	}
	pass(t, r, ms)
	if _, err := getRoute(ms.Namespace, owned); err != nil {
		t.Fatalf("the owned HTTPRoute went while the route the backendRefs moved to is refused: %v", err)
	}
	got := getMS(t, ms)
	if c := condition(got, v1alpha1.ConditionRouteAccepted); c == nil || c.Status != metav1.ConditionFalse ||
		!strings.Contains(c.Message, "HTTPRoute "+ms.Namespace+"/"+owned+" keeps the ModelServer's backendRefs") {
		t.Errorf("RouteAccepted %+v; want False naming the owned route that keeps the backendRefs", c)
	}
	if rs := got.Status.Route; rs == nil || *rs != (v1alpha1.RouteStatus{Name: owned, Owned: true}) {
		t.Errorf("status.route %+v; want the owned route until the move is done", rs)
	}

	// Accepted: the owned route goes.
	if err := answerRoute(ms.Namespace, shared, metav1.ConditionTrue, "Accepted"); err != nil {
		t.Fatal(err)
	}
	pass(t, r, ms)
	if _, err := getRoute(ms.Namespace, owned); !apierrors.IsNotFound(err) {
		t.Errorf("the owned HTTPRoute is still there once the route the backendRefs moved to is accepted (%v)", err)
	}
	if rs := getMS(t, ms).Status.Route; rs == nil || *rs != (v1alpha1.RouteStatus{Name: shared}) {
		t.Errorf("status.route %+v; want %s", rs, shared)
	}
}

func TestASwitchToInferencePoolsAlsoWaitsForReadyPodsOfTheColorsWithTraffic(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{})
	r.InferencePools, r.cacheReader = true, r.Client // a cluster that serves InferencePools
	ctx := context.Background()
	ms := newModelServer(manualNamespace, fmt.Sprintf("unready-%d", time.Now().UnixNano()%1e6))
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	pass(t, r, ms)
	markReady(t, ms.Namespace, ms.DeploymentName(v1alpha1.Blue))
	pass(t, r, ms)
	services := []string{fmt.Sprintf("Service %s-blue 100", ms.Name), fmt.Sprintf("Service %s-green 0", ms.Name)}
	routeIs(t, ms.Namespace, ms.Name, "", services...)

	updateMS(t, ms, onPools)
	pass(t, r, ms)
	waiting := append(slices.Clone(services), fmt.Sprintf("InferencePool %s-blue 0", ms.Name), fmt.Sprintf("InferencePool %s-green 0", ms.Name))
	routeIs(t, ms.Namespace, ms.Name, "", waiting...)
	// A Gateway accepts both pools, but blue, which carries the traffic, has no Ready pod.
	for _, c := range routing.Colors {
		if err := answerPool(ms.Namespace, ms.PoolName(c), metav1.ConditionTrue, "ResolvedRefs"); err != nil {
			t.Fatal(err)
		}
	}
	d, err := getDeployment(ms.Namespace, ms.DeploymentName(v1alpha1.Blue))
	if err != nil {
		t.Fatal(err)
	}
	d.Status.ReadyReplicas, d.Status.AvailableReplicas = 0, 0
	if err := k8s.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	pass(t, r, ms)
	routeIs(t, ms.Namespace, ms.Name, "", waiting...)
	if c := condition(getMS(t, ms), v1alpha1.ConditionRouteAccepted); c == nil || !strings.Contains(c.Message, "the pods of color blue, which carries 100% of the traffic, are Ready") {
		t.Errorf("RouteAccepted %+v; want the wait for blue's Ready pods", c)
	}

	markReady(t, ms.Namespace, ms.DeploymentName(v1alpha1.Blue))
	pass(t, r, ms)
	routeIs(t, ms.Namespace, ms.Name, "", fmt.Sprintf("InferencePool %s-blue 100", ms.Name), fmt.Sprintf("InferencePool %s-green 0", ms.Name))
}

func TestDeletingAModelServerMidMoveTakesItsBackendRefsOutOfBothRoutes(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{})
	ctx := context.Background()
	stamp := time.Now().UnixNano() % 1e6
	routes := []string{fmt.Sprintf("from-%d", stamp), fmt.Sprintf("to-%d", stamp)}
	for _, name := range routes {
		if err := k8s.Create(ctx, &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: manualNamespace, Name: name},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
				Rules:           []gatewayv1.HTTPRouteRule{{Name: ptr.To(gatewayv1.SectionName("llm"))}},
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
	ms := newModelServer(manualNamespace, fmt.Sprintf("gone-%d", stamp), func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway = v1alpha1.GatewaySpec{RouteRef: &v1alpha1.RouteReference{Name: routes[0]}}
	})
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	pass(t, r, ms)
	pass(t, r, ms)
	ours := []string{fmt.Sprintf("Service %s-blue 100", ms.Name), fmt.Sprintf("Service %s-green 0", ms.Name)}
	routeIs(t, manualNamespace, routes[0], "llm", ours...)
	routeRecorded(t, ms, v1alpha1.RouteStatus{Name: routes[0]})

	// The move has written the new route but not yet cleared the old one when the ModelServer goes.
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) { ms.Spec.Gateway.RouteRef.Name = routes[1] })
	pass(t, r, ms)
	routeIs(t, manualNamespace, routes[1], "llm", ours...)
	routeIs(t, manualNamespace, routes[0], "llm", ours...)
	if err := k8s.Delete(ctx, getMS(t, ms)); err != nil {
		t.Fatal(err)
	}
	pass(t, r, ms)
	for _, name := range routes {
		routeIs(t, manualNamespace, name, "llm")
	}
}
