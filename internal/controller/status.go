package controller

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/rollout"
)

// Status: what the controller adds to the rollout machine's status (replica totals, selector,
// the conditions MetricsAvailable, RouteAccepted, ScalingLimited and its own Stalled reasons),
// and the one status write of a pass.

// statusNotes are what a pass learnt besides its decision: whether the route carries the
// decision's weights, what an apply refused, and why the user's spec waits.
type statusNotes struct {
	routeWritten  bool
	applyErr      error
	invalid       string // the Stalled message while the pass acts on the last valid spec
	invalidReason string
}

// completeStatus adds what the controller knows beyond the state machine to the decision's
// status in ms.Status: totals, selector, MetricsAvailable, RouteAccepted, ScalingLimited, an
// apply that failed (Reconciling ApplyFailed) and a spec that waits (Stalled InvalidSpec or
// InvalidTemplate). observedGeneration moves only when the pass acted on the user's spec and
// applied all of it; the weights are the route's when it could not be written.
func (r *ModelServerReconciler) completeStatus(ms, before *v1alpha1.ModelServer, obs observed, d rollout.Decision, n statusNotes) {
	st := &ms.Status
	r.addObserved(ms, obs, d)
	if !n.routeWritten {
		st.Weights = before.Status.Weights
	}
	if n.applyErr != nil {
		st.ObservedGeneration = before.Status.ObservedGeneration
		setCondition(ms, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonApplyFailed, n.applyErr.Error())
	}
	if n.invalid != "" {
		// kstatus Failed (Stalled True, Reconciling False: never both True), even while what
		// serves goes on from the last valid spec: the user's spec needs a person.
		st.ObservedGeneration = before.Status.ObservedGeneration
		stall(ms, n.invalidReason, n.invalid)
	}
}

// addObserved adds the observation's part of the status.
func (r *ModelServerReconciler) addObserved(ms *v1alpha1.ModelServer, obs observed, d rollout.Decision) {
	st := &ms.Status
	st.ObservedGeneration = ms.Generation
	st.Revision = obs.Revision
	st.Selector = labels.SelectorFromSet(ms.SelectorLabels()).String()
	st.Replicas, st.ReadyReplicas = 0, 0
	for c, plan := range d.Plans {
		st.Replicas += plan.Replicas
		st.ReadyReplicas += obs.Colors[c].ReadyReplicas
	}
	meta.SetStatusCondition(&st.Conditions, obs.accepted)
	if m := obs.Measurement; m != nil {
		status, reason, msg := metav1.ConditionTrue, v1alpha1.ReasonMetricsOK, "the last measurement had data for every metric"
		for _, res := range m.Results {
			if res.Verdict == v1alpha1.VerdictInconclusive {
				status, reason, msg = metav1.ConditionFalse, v1alpha1.ReasonMetricsUnavailable, "analysis "+res.Name+": "+res.Message
				break
			}
		}
		setCondition(ms, v1alpha1.ConditionMetricsAvailable, status, reason, msg)
	}
	if s := obs.scale; s != nil {
		if !s.MetricsAvailable {
			setCondition(ms, v1alpha1.ConditionMetricsAvailable, metav1.ConditionFalse, v1alpha1.ReasonMetricsUnavailable, "autoscaling: "+s.MetricsMessage)
		} else if obs.Measurement == nil {
			setCondition(ms, v1alpha1.ConditionMetricsAvailable, metav1.ConditionTrue, v1alpha1.ReasonMetricsOK, "autoscaling signals have data")
		}
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); s.Unserved != "" && c != nil && c.Status == metav1.ConditionTrue {
			// "0/0 available" is not ready while requests may wait with no pod to serve them.
			setCondition(ms, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNoReplicaForLoad, s.Unserved)
		}
		switch {
		case len(obs.conflicts) > 0:
			setCondition(ms, v1alpha1.ConditionScalingLimited, metav1.ConditionTrue, v1alpha1.ReasonConflictingAutoscale,
				fmt.Sprintf("%s also scale this ModelServer's Deployments; remove them: modelship owns replicas", strings.Join(obs.conflicts, ", ")))
		case s.Limited:
			setCondition(ms, v1alpha1.ConditionScalingLimited, metav1.ConditionTrue, s.LimitedReason, s.LimitedMessage)
		default:
			setCondition(ms, v1alpha1.ConditionScalingLimited, metav1.ConditionFalse, v1alpha1.ReasonWithinBounds, "the desired count fits the bounds and the GPUs")
		}
	}
}

// stall marks the ModelServer Stalled for reason: not Ready, not Reconciling, until a person
// changes something.
func stall(ms *v1alpha1.ModelServer, reason, msg string) {
	setCondition(ms, v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	setCondition(ms, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	setCondition(ms, v1alpha1.ConditionReconciling, metav1.ConditionFalse, reason, msg)
}

func setCondition(ms *v1alpha1.ModelServer, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&ms.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: ms.Generation})
}

func (r *ModelServerReconciler) writeStatus(ctx context.Context, before, ms *v1alpha1.ModelServer) error {
	if equality.Semantic.DeepEqual(before.Status, ms.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, ms, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	r.fresh.wrote(client.ObjectKeyFromObject(ms), ms.UID, ms.ResourceVersion)
	return nil
}
