package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
