package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// answerRoute plays a Gateway controller: it writes the route's Accepted condition for the
// route's current generation (a Gateway answers each generation of the route).
func answerRoute(ns, name string, accepted metav1.ConditionStatus, reason string) error {
	r, err := getRoute(ns, name)
	if err != nil {
		return err
	}
	r.Status.Parents = []gatewayv1.RouteParentStatus{{
		ParentRef: r.Spec.ParentRefs[0], ControllerName: "example.com/gateway",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: accepted, Reason: reason, Message: "listener " + reason, ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now()}},
	}}
	return k8s.Status().Update(context.Background(), r)
}

func TestRolloutHoldsWhileAGatewayRejectsTheRouteAndResumesWhenAccepted(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "rejected")
	good := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy}
	tr, _ := startServing(t, ms, good)
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	tr.waitCandidateWeight(t, 20)

	// The Gateway rejects the route: the rollout holds where it is and says why.
	var held *v1alpha1.ModelServer
	eventually(t, 20*time.Second, "Progressing False with reason RouteNotAccepted", func() error {
		if err := answerRoute(ns, ms.RouteName(), metav1.ConditionFalse, "NotAllowedByListeners"); err != nil {
			return err
		}
		held = getMS(t, ms)
		c := condition(held, v1alpha1.ConditionProgressing)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonRouteNotAccepted || !strings.Contains(c.Message, "NotAllowedByListeners") {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	if held.Status.Phase != v1alpha1.PhaseProgressing || held.Status.Stable.Revision == v2 {
		t.Fatalf("held in phase %s with stable %s; want a rollout in progress", held.Status.Phase, held.Status.Stable.Revision)
	}
	if ra := condition(held, v1alpha1.ConditionRouteAccepted); ra == nil || ra.Status != metav1.ConditionFalse {
		t.Errorf("RouteAccepted %+v; want False", ra)
	}
	weights, step := tr.current(), held.Status.Rollout.Step
	consistently(t, holdFor, "holds its step while the route is rejected", func() error {
		st := getMS(t, ms).Status
		if w := tr.current(); w != weights || st.Rollout.Step != step || st.Phase != v1alpha1.PhaseProgressing {
			return fmt.Errorf("weights %s step %d phase %s; held at %s step %d", w, st.Rollout.Step, st.Phase, weights, step)
		}
		return nil
	})
	waitEvent(t, ms, "Warning", "RouteNotAccepted")

	// The Gateway accepts it: the rollout goes on and promotes.
	eventually(t, 10*time.Second, "route accepted", func() error {
		return answerRoute(ns, ms.RouteName(), metav1.ConditionTrue, "Accepted")
	})
	waitPromoted(t, ms, v1alpha1.Green, v2)
	onlyForward(t, tr.history())
}

// answerResolvedRefs plays a Gateway that accepted the route but did not resolve a backend, as
// Traefik v3.6.12 reports a backend Service without EndpointSlices: Accepted True, ResolvedRefs
// False (BackendNotFound) naming the backend, for the route's current generation.
func answerResolvedRefs(ns, name, backend string, resolved metav1.ConditionStatus) error {
	r, err := getRoute(ns, name)
	if err != nil {
		return err
	}
	rr := metav1.Condition{Type: "ResolvedRefs", Status: resolved, Reason: "ResolvedRefs", Message: "All references resolved", ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now()}
	if resolved == metav1.ConditionFalse {
		rr.Reason, rr.Message = "BackendNotFound", fmt.Sprintf("Cannot load HTTPBackendRef %s/%s: endpointslices not found", ns, backend)
	}
	r.Status.Parents = []gatewayv1.RouteParentStatus{{
		ParentRef: r.Spec.ParentRefs[0], ControllerName: "traefik.io/gateway-controller",
		Conditions: []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "accepted", ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now()},
			rr,
		},
	}}
	return k8s.Status().Update(context.Background(), r)
}

func TestRolloutHoldsWhileAGatewayCannotResolveABackendAndAnAbortStillActs(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "unresolved")
	good := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy}
	tr, _ := startServing(t, ms, good)
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	tr.waitCandidateWeight(t, 20)

	// The Gateway accepts the route but finds no EndpointSlice for green's Service: the
	// rollout holds where it is, RouteAccepted says BackendNotResolved and names the Service.
	green := ms.ServiceName(v1alpha1.Green)
	var held *v1alpha1.ModelServer
	eventually(t, 20*time.Second, "RouteAccepted False with reason BackendNotResolved", func() error {
		if err := answerResolvedRefs(ns, ms.RouteName(), green, metav1.ConditionFalse); err != nil {
			return err
		}
		held = getMS(t, ms)
		ra := condition(held, v1alpha1.ConditionRouteAccepted)
		if ra == nil || ra.Status != metav1.ConditionFalse || ra.Reason != v1alpha1.ReasonBackendNotResolved || !strings.Contains(ra.Message, ns+"/"+green) {
			return fmt.Errorf("RouteAccepted %+v", ra)
		}
		if c := condition(held, v1alpha1.ConditionProgressing); c == nil || c.Reason != v1alpha1.ReasonRouteNotAccepted || !strings.Contains(c.Message, "BackendNotFound") {
			return fmt.Errorf("Progressing %+v", c)
		}
		return nil
	})
	weights, step := tr.current(), held.Status.Rollout.Step
	consistently(t, holdFor, "no weight goes up while a backend is not resolved", func() error {
		st := getMS(t, ms).Status
		if w := tr.current(); w != weights || st.Rollout.Step != step || st.Phase != v1alpha1.PhaseProgressing {
			return fmt.Errorf("weights %s step %d phase %s; held at %s step %d", w, st.Rollout.Step, st.Phase, weights, step)
		}
		return nil
	})

	// An abort does not wait for the Gateway: green's weight goes to 0 at once.
	abort(t, ms, v2)
	tr.waitWeights(t, "100/0")
	eventually(t, 20*time.Second, "aborted", func() error {
		if got := getMS(t, ms); got.Status.Phase != v1alpha1.PhaseRolledBack || got.Status.Rollout.RolledBackRevision != v2 {
			return fmt.Errorf("phase %s rolledBack %q", got.Status.Phase, got.Status.Rollout.RolledBackRevision)
		}
		return nil
	})
}

func TestRolloutResumesOnceTheGatewayResolvesTheBackend(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "resolves")
	good := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy}
	tr, _ := startServing(t, ms, good)
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	tr.waitCandidateWeight(t, 20)
	green := ms.ServiceName(v1alpha1.Green)
	eventually(t, 20*time.Second, "held on BackendNotResolved", func() error {
		if err := answerResolvedRefs(ns, ms.RouteName(), green, metav1.ConditionFalse); err != nil {
			return err
		}
		if ra := condition(getMS(t, ms), v1alpha1.ConditionRouteAccepted); ra == nil || ra.Reason != v1alpha1.ReasonBackendNotResolved {
			return fmt.Errorf("RouteAccepted %+v", ra)
		}
		return nil
	})
	eventually(t, 10*time.Second, "backend resolved", func() error {
		return answerResolvedRefs(ns, ms.RouteName(), green, metav1.ConditionTrue)
	})
	waitPromoted(t, ms, v1alpha1.Green, v2)
	onlyForward(t, tr.history())
}

// writeEndpointSlice plays the EndpointSlice controller for color c's Service (envtest runs
// none): one slice, labelled as the controller labels it (the Service's labels and its name),
// listing n endpoints on addresses of the benchmarking range, ready as given.
func writeEndpointSlice(t *testing.T, ms *v1alpha1.ModelServer, c v1alpha1.Color, n int, ready bool) {
	t.Helper()
	labels := ms.ColorLabels(c)
	labels[discoveryv1.LabelServiceName] = ms.ServiceName(c)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ms.Namespace, Name: ms.ServiceName(c) + "-slice", Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8000))}},
	}
	for i := range n {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("198.18.200.%d", i+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ms.Namespace, Name: fmt.Sprintf("%s-%d", ms.DeploymentName(c), i)},
		})
	}
	eventually(t, 10*time.Second, "write the EndpointSlice of "+string(c), func() error {
		old := &discoveryv1.EndpointSlice{}
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(slice), old)
		if apierrors.IsNotFound(err) {
			return k8s.Create(context.Background(), slice)
		}
		if err != nil {
			return err
		}
		slice.ResourceVersion = old.ResourceVersion
		return k8s.Update(context.Background(), slice)
	})
}

func TestRolloutGivesNoWeightToACandidateWhoseEndpointSlicesListNoReadyEndpoint(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "endpoints")
	good := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy}
	tr, _ := startServing(t, ms, good)
	// Green's pods will report Ready (playDeployments) but its Service's endpoints are not ready
	// (as when a readiness the Gateway sees lags, or the pods' addresses are not routable):
	// Traefik would answer green's share with HTTP 503.
	writeEndpointSlice(t, ms, v1alpha1.Green, 2, false)
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	eventually(t, 20*time.Second, "green's Deployment Ready", func() error {
		d, err := getDeployment(ns, ms.DeploymentName(v1alpha1.Green))
		if err != nil || d.Status.ReadyReplicas == 0 {
			return fmt.Errorf("green Deployment %v", err)
		}
		return nil
	})
	consistently(t, holdFor, "green gets no weight while its endpoints are not ready", func() error {
		if w := tr.current(); w != "100/0" {
			return fmt.Errorf("route weights %s; so far %v", w, tr.history())
		}
		return nil
	})

	// The endpoints turn ready: the rollout goes on and promotes.
	writeEndpointSlice(t, ms, v1alpha1.Green, 2, true)
	waitPromoted(t, ms, v1alpha1.Green, v2)
	onlyForward(t, tr.history())
}
