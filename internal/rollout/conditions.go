package rollout

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// facts are what the conditions are derived from besides the status Next computed.
type facts struct {
	generation      int64
	specRevision    string
	total           int32
	stableReady     int32
	stableAvailable int32
	// wasServing: the stable color had Ready pods before (so 0 now is a degradation).
	wasServing bool
	// hold is why the pass held the rollout (see hold): RolledBack or Aborted explain phase
	// RolledBack, Superseding a superseded or abandoned candidate that still drains,
	// RouteNotAccepted a route that a Gateway did not accept.
	hold hold
	// stableDead: the stable color serves nothing; a live candidate carries what its warm pods
	// carry and is judged on absolute bounds only.
	stableDead bool
	// stall explains a rollout stalled ("" when it is not): on inconclusive analysis, or with
	// no room for the candidate's next step (stallReason says which).
	stall       string
	stallReason string
	// unreadyDeadline is when a candidate below its step's need is rolled back (zero: not below).
	unreadyDeadline time.Time
}

func setCondition(st *v1alpha1.ModelServerStatus, f facts, typ string, ok bool, reason, message string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: message, ObservedGeneration: f.generation})
}

func heldReason(f facts) string {
	if f.hold.reason != v1alpha1.ReasonAborted {
		return v1alpha1.ReasonRolledBack
	}
	return f.hold.reason
}

// heldMessage is the message of a hold for reason ("" when the pass holds for another).
func heldMessage(f facts, reasons ...string) string {
	for _, r := range reasons {
		if f.hold.reason == r {
			return f.hold.message
		}
	}
	return ""
}

func rolledBackMessage(f facts) string {
	return heldMessage(f, v1alpha1.ReasonRolledBack, v1alpha1.ReasonAborted)
}

// rolloutHold returns the reason and message of a rollout held by a person or a rollback.
func rolloutHold(st *v1alpha1.ModelServerStatus, f facts) (reason, message string, held bool) {
	switch st.Phase {
	case v1alpha1.PhasePaused:
		return v1alpha1.ReasonPaused, fmt.Sprintf("rollout of %s paused at step %d", candidateRevision(st), st.Rollout.Step), true
	case v1alpha1.PhaseAwaitingPromotion:
		return v1alpha1.ReasonAwaitingPromotion, fmt.Sprintf("rollout of %s awaits promotion (annotate %s=%s)", candidateRevision(st), v1alpha1.AnnotationPromote, candidateRevision(st)), true
	case v1alpha1.PhaseRolledBack:
		return heldReason(f), rolledBackMessage(f), true
	}
	return "", "", false
}

func candidateRevision(st *v1alpha1.ModelServerStatus) string {
	if st.Candidate == nil {
		return ""
	}
	return st.Candidate.Revision
}

// progressReason is the reason of a live, moving rollout: warming, analysing, or holding on
// inconclusive analysis.
func progressReason(st *v1alpha1.ModelServerStatus, f facts) (reason, message string) {
	reason, message = progressReasonOf(st, f)
	if f.stableDead {
		message += fmt.Sprintf("; stable %s serves nothing: the candidate carries what its Ready, warm pods carry (%d%%) and is judged on absolute bounds only", st.Stable.Revision, st.Weights.Candidate)
	}
	return reason, message
}

func progressReasonOf(st *v1alpha1.ModelServerStatus, f facts) (reason, message string) {
	c := st.Candidate
	switch {
	case f.hold.reason == v1alpha1.ReasonSuperseding, f.hold.reason == v1alpha1.ReasonRouteNotAccepted, f.hold.reason == v1alpha1.ReasonGateHeld:
		return f.hold.reason, f.hold.message
	case c.UnreadySince != nil:
		return v1alpha1.ReasonCandidateUnready, fmt.Sprintf("candidate %s on %s has %d Ready, below its step %d's need since %s: weight capped at %d%%; rolled back at %s unless they return",
			c.Revision, c.Color, c.ReadyReplicas, st.Rollout.Step, c.UnreadySince.UTC().Format("15:04:05"), st.Weights.Candidate, f.unreadyDeadline.UTC().Format("15:04:05"))
	case st.Rollout.Step == 0:
		return v1alpha1.ReasonWarmingUp, fmt.Sprintf("candidate %s on %s warming up: %d/%d Ready, warm: %t", c.Revision, c.Color, c.ReadyReplicas, c.Replicas, c.Warm)
	case st.Rollout.InconclusiveSince != nil:
		return v1alpha1.ReasonInconclusive, fmt.Sprintf("step %d (candidate %d%%) holds on inconclusive analysis since %s", st.Rollout.Step, st.Weights.Candidate, st.Rollout.InconclusiveSince.UTC().Format("15:04:05"))
	default:
		return v1alpha1.ReasonAnalyzing, fmt.Sprintf("step %d (candidate %s %d%%) under analysis", st.Rollout.Step, c.Revision, st.Weights.Candidate)
	}
}

func availability(f facts) string {
	return fmt.Sprintf("%d/%d available", f.stableAvailable, f.total)
}

// setReadyCondition: True when the spec's revision serves all traffic and has all desired
// replicas available (kstatus Current; with 0 desired, at once).
func setReadyCondition(st *v1alpha1.ModelServerStatus, f facts) {
	if reason, msg, held := rolloutHold(st, f); held {
		setCondition(st, f, v1alpha1.ConditionReady, false, reason, msg)
		return
	}
	switch {
	case st.Stable == nil || st.Stable.Revision != f.specRevision || st.Weights.Stable != 100:
		setCondition(st, f, v1alpha1.ConditionReady, false, v1alpha1.ReasonRolloutInProgress, fmt.Sprintf("revision %s does not serve all traffic yet", f.specRevision))
	case f.hold.reason == v1alpha1.ReasonSuperseding:
		// A spec returned to the stable revision: it serves all traffic, but the superseded
		// candidate's pods are still draining (phase Progressing, not done yet).
		setCondition(st, f, v1alpha1.ConditionReady, false, v1alpha1.ReasonRolloutInProgress, f.hold.message)
	case f.stableAvailable < f.total:
		setCondition(st, f, v1alpha1.ConditionReady, false, v1alpha1.ReasonDeploymentsNotReady, fmt.Sprintf("revision %s on %s: %s", f.specRevision, st.Stable.Color, availability(f)))
	default:
		setCondition(st, f, v1alpha1.ConditionReady, true, v1alpha1.ReasonAvailable, fmt.Sprintf("revision %s on %s serves all traffic: %s", f.specRevision, st.Stable.Color, availability(f)))
	}
}

// setReconcilingCondition: True while work is in progress: the first revision coming up, a
// rollout moving, pods coming up. False on a deliberate hold (paused, awaiting promotion),
// after a rollback and on a rollout stalled on inconclusive analysis (Stalled says why).
func setReconcilingCondition(st *v1alpha1.ModelServerStatus, f facts) {
	if reason, msg, held := rolloutHold(st, f); held {
		setCondition(st, f, v1alpha1.ConditionReconciling, false, reason, msg)
		return
	}
	switch {
	case st.Phase == v1alpha1.PhaseProgressing && st.Candidate != nil && f.stall != "":
		setCondition(st, f, v1alpha1.ConditionReconciling, false, f.stallReason, f.stall)
	case st.Phase == v1alpha1.PhaseProgressing && st.Candidate != nil:
		reason, msg := progressReason(st, f)
		setCondition(st, f, v1alpha1.ConditionReconciling, true, reason, msg)
	case f.stableAvailable < f.total:
		setCondition(st, f, v1alpha1.ConditionReconciling, true, v1alpha1.ReasonDeploymentsNotReady, fmt.Sprintf("%s: %s", st.Stable.Color, availability(f)))
	default:
		setCondition(st, f, v1alpha1.ConditionReconciling, false, v1alpha1.ReasonReconciled, "")
	}
}

// setStalledCondition: True in phase RolledBack (retrying will not help until the spec
// changes) and on a rollout that has held on inconclusive analysis for
// DefaultInconclusiveReportAfter (reason AnalysisInconclusive: it cannot move without data or a
// person). The controller sets it for an invalid spec on its own.
func setStalledCondition(st *v1alpha1.ModelServerStatus, f facts) {
	if st.Phase == v1alpha1.PhaseRolledBack {
		setCondition(st, f, v1alpha1.ConditionStalled, true, heldReason(f), rolledBackMessage(f))
		return
	}
	if f.stall != "" {
		setCondition(st, f, v1alpha1.ConditionStalled, true, f.stallReason, f.stall)
		return
	}
	setCondition(st, f, v1alpha1.ConditionStalled, false, v1alpha1.ReasonReconciled, "")
}

// setProgressingCondition: True while a rollout (or the first revision) moves forward; False
// when it is held (paused, awaiting promotion, rolled back) or done.
func setProgressingCondition(st *v1alpha1.ModelServerStatus, f facts) {
	if reason, msg, held := rolloutHold(st, f); held {
		setCondition(st, f, v1alpha1.ConditionProgressing, false, reason, msg)
		return
	}
	switch {
	case st.Phase == v1alpha1.PhaseProgressing && st.Candidate != nil && f.stall != "":
		setCondition(st, f, v1alpha1.ConditionProgressing, false, f.stallReason, f.stall)
	case st.Phase == v1alpha1.PhaseProgressing && st.Candidate != nil && (f.hold.reason == v1alpha1.ReasonRouteNotAccepted || f.hold.reason == v1alpha1.ReasonGateHeld):
		setCondition(st, f, v1alpha1.ConditionProgressing, false, f.hold.reason, f.hold.message)
	case st.Phase == v1alpha1.PhaseProgressing && st.Candidate != nil:
		reason, msg := progressReason(st, f)
		setCondition(st, f, v1alpha1.ConditionProgressing, true, reason, msg)
	case st.Phase == v1alpha1.PhasePending:
		setCondition(st, f, v1alpha1.ConditionProgressing, true, v1alpha1.ReasonDeploymentsNotReady, fmt.Sprintf("first revision %s coming up: %s", f.specRevision, availability(f)))
	case len(st.History) > 0 && st.History[0].Outcome == v1alpha1.OutcomePromoted && st.Stable != nil && st.History[0].Revision == st.Stable.Revision:
		setCondition(st, f, v1alpha1.ConditionProgressing, false, v1alpha1.ReasonPromoted, fmt.Sprintf("revision %s promoted: %s", st.Stable.Revision, st.History[0].Reason))
	default:
		setCondition(st, f, v1alpha1.ConditionProgressing, false, v1alpha1.ReasonReconciled, "no rollout in progress")
	}
}

// setDegradedCondition: True when the stable color, which served before, has no Ready pod of
// more than zero desired. Fewer than desired but some Ready is scaling, not degradation.
func setDegradedCondition(st *v1alpha1.ModelServerStatus, f facts) {
	if f.total > 0 && f.stableReady == 0 && f.wasServing && st.Stable != nil {
		setCondition(st, f, v1alpha1.ConditionDegraded, true, v1alpha1.ReasonDeploymentsNotReady, fmt.Sprintf("stable %s (%s) has 0/%d Ready replicas", st.Stable.Color, st.Stable.Revision, f.total))
		return
	}
	setCondition(st, f, v1alpha1.ConditionDegraded, false, v1alpha1.ReasonAvailable, fmt.Sprintf("%d/%d Ready", f.stableReady, f.total))
}
