package plan

// The status file: every condition of a ModelServer is set here, and nowhere else. The rollout
// machine reports (rollout.Report) and the autoscaler decides (autoscale.Output); the plan turns
// them, with what the pass observed, into Ready, Reconciling, Stalled, Progressing, Degraded,
// MetricsAvailable, RouteAccepted and ScalingLimited. What only the apply learns (a refused
// apply, a route that could not be written) and a spec the controller will not act on are added
// by Finish and Stall.

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/rollout"
)

// RolloutConditions sets Ready, Reconciling, Stalled, Progressing and Degraded on st, the
// status the rollout machine computed, from its report.
func RolloutConditions(st *v1alpha1.ModelServerStatus, f rollout.Report) {
	setReadyCondition(st, f)
	setReconcilingCondition(st, f)
	setStalledCondition(st, f)
	setProgressingCondition(st, f)
	setDegradedCondition(st, f)
}

// observedStatus adds the observation's part of the status to st, the decision's status:
// replica totals, selector, RouteAccepted, MetricsAvailable (from the measurement and the
// autoscaler), Ready False while load waits at zero replicas, and ScalingLimited.
func observedStatus(ms *v1alpha1.ModelServer, st *v1alpha1.ModelServerStatus, obs Observation, d rollout.Decision, scale *autoscale.Output) {
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		setCondition(st, ms.Generation, t, s, reason, msg)
	}
	st.ObservedGeneration = ms.Generation
	st.Revision = obs.Rollout.Revision
	st.Selector = labels.SelectorFromSet(ms.SelectorLabels()).String()
	st.Replicas, st.ReadyReplicas = 0, 0
	for c, plan := range d.Plans {
		st.Replicas += plan.Replicas
		st.ReadyReplicas += obs.Rollout.Colors[c].ReadyReplicas
	}
	meta.SetStatusCondition(&st.Conditions, obs.Accepted)
	if m := obs.Rollout.Measurement; m != nil {
		status, reason, msg := metav1.ConditionTrue, v1alpha1.ReasonMetricsOK, "the last measurement had data for every metric"
		for _, res := range m.Results {
			if res.Verdict == v1alpha1.VerdictInconclusive {
				status, reason, msg = metav1.ConditionFalse, v1alpha1.ReasonMetricsUnavailable, "analysis "+res.Name+": "+res.Message
				break
			}
		}
		set(v1alpha1.ConditionMetricsAvailable, status, reason, msg)
	}
	s := scale
	if s == nil {
		return
	}
	if !s.MetricsAvailable {
		set(v1alpha1.ConditionMetricsAvailable, metav1.ConditionFalse, v1alpha1.ReasonMetricsUnavailable, "autoscaling: "+s.MetricsMessage)
	} else if obs.Rollout.Measurement == nil {
		set(v1alpha1.ConditionMetricsAvailable, metav1.ConditionTrue, v1alpha1.ReasonMetricsOK, "autoscaling signals have data")
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); s.Unserved != "" && c != nil && c.Status == metav1.ConditionTrue {
		// "0/0 available" is not ready while requests may wait with no pod to serve them.
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNoReplicaForLoad, s.Unserved)
	}
	var conflicts []string
	if obs.Autoscaling != nil {
		conflicts = obs.Autoscaling.Conflicts
	}
	switch {
	case len(conflicts) > 0:
		set(v1alpha1.ConditionScalingLimited, metav1.ConditionTrue, v1alpha1.ReasonConflictingAutoscale,
			fmt.Sprintf("%s also scale this ModelServer's Deployments; remove them: modelship owns replicas", strings.Join(conflicts, ", ")))
	case s.Limited:
		set(v1alpha1.ConditionScalingLimited, metav1.ConditionTrue, s.LimitedReason, s.LimitedMessage)
	default:
		set(v1alpha1.ConditionScalingLimited, metav1.ConditionFalse, v1alpha1.ReasonWithinBounds, "the desired count fits the bounds and the GPUs")
	}
}

// Notes are what the apply learnt after the plan, and why the user's spec waits.
type Notes struct {
	// RouteWritten: the route carries the decision's weights.
	RouteWritten bool
	// ApplyErr is what an apply refused (nil: all of it was applied).
	ApplyErr error
	// Invalid is the Stalled message while the pass acts on the last valid spec, InvalidReason
	// its reason.
	Invalid       string
	InvalidReason string
}

// Finish adds to ms.Status, the planned status, what the apply learnt: the weights are the
// route's when it could not be written, an apply that failed sets Reconciling ApplyFailed, and a
// spec that waits sets Stalled (InvalidSpec or InvalidTemplate). observedGeneration moves only
// when the pass acted on the user's spec and applied all of it. before is the ModelServer as
// the pass found it.
func Finish(ms, before *v1alpha1.ModelServer, n Notes) {
	st := &ms.Status
	if !n.RouteWritten {
		st.Weights = before.Status.Weights
	}
	if n.ApplyErr != nil {
		st.ObservedGeneration = before.Status.ObservedGeneration
		setCondition(st, ms.Generation, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonApplyFailed, n.ApplyErr.Error())
	}
	if n.Invalid != "" {
		// kstatus Failed (Stalled True, Reconciling False: never both True), even while what
		// serves goes on from the last valid spec: the user's spec needs a person.
		st.ObservedGeneration = before.Status.ObservedGeneration
		Stall(ms, n.InvalidReason, n.Invalid)
	}
}

// Stall marks the ModelServer Stalled for reason: not Ready, not Reconciling, until a person
// changes something.
func Stall(ms *v1alpha1.ModelServer, reason, msg string) {
	st := &ms.Status
	setCondition(st, ms.Generation, v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	setCondition(st, ms.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	setCondition(st, ms.Generation, v1alpha1.ConditionReconciling, metav1.ConditionFalse, reason, msg)
}

func setCondition(st *v1alpha1.ModelServerStatus, generation int64, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation})
}

func setRolloutCondition(st *v1alpha1.ModelServerStatus, f rollout.Report, typ string, ok bool, reason, message string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: message, ObservedGeneration: f.Generation})
}

func heldReason(f rollout.Report) string {
	if f.HoldReason != v1alpha1.ReasonAborted {
		return v1alpha1.ReasonRolledBack
	}
	return f.HoldReason
}

// heldMessage is the message of a hold for reason ("" when the pass holds for another).
func heldMessage(f rollout.Report, reasons ...string) string {
	for _, r := range reasons {
		if f.HoldReason == r {
			return f.HoldMessage
		}
	}
	return ""
}

func rolledBackMessage(f rollout.Report) string {
	return heldMessage(f, v1alpha1.ReasonRolledBack, v1alpha1.ReasonAborted)
}

// rolloutHold returns the reason and message of a rollout held by a person or a rollback.
func rolloutHold(st *v1alpha1.ModelServerStatus, f rollout.Report) (reason, message string, held bool) {
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
func progressReason(st *v1alpha1.ModelServerStatus, f rollout.Report) (reason, message string) {
	reason, message = progressReasonOf(st, f)
	if f.StableDead {
		message += fmt.Sprintf("; stable %s serves nothing: the candidate carries what its Ready, warm pods carry (%d%%) and is judged on absolute bounds only", st.Stable.Revision, st.Weights.Candidate)
	}
	return reason, message
}

func progressReasonOf(st *v1alpha1.ModelServerStatus, f rollout.Report) (reason, message string) {
	c := st.Candidate
	switch {
	case f.HoldReason == v1alpha1.ReasonSuperseding, f.HoldReason == v1alpha1.ReasonRouteNotAccepted, f.HoldReason == v1alpha1.ReasonGateHeld, f.HoldReason == v1alpha1.ReasonMirrorUnsupported:
		return f.HoldReason, f.HoldMessage
	case c.UnreadySince != nil:
		return v1alpha1.ReasonCandidateUnready, fmt.Sprintf("candidate %s on %s has %d Ready, below its step %d's need since %s: weight capped at %d%%; rolled back at %s unless they return",
			c.Revision, c.Color, c.ReadyReplicas, st.Rollout.Step, c.UnreadySince.UTC().Format("15:04:05"), st.Weights.Candidate, f.UnreadyDeadline.UTC().Format("15:04:05"))
	case st.Rollout.Step == 0 && st.Rollout.Shadow != nil && st.Rollout.Shadow.PassedAt == nil:
		return v1alpha1.ReasonAnalyzing, fmt.Sprintf("shadow phase: %d%% of the requests mirrored to candidate %s on %s since %s (no user request served by it)",
			st.Rollout.Shadow.Percent, c.Revision, c.Color, st.Rollout.Shadow.StartedAt.UTC().Format("15:04:05"))
	case st.Rollout.Step == 0:
		return v1alpha1.ReasonWarmingUp, fmt.Sprintf("candidate %s on %s warming up: %d/%d Ready, warm: %t", c.Revision, c.Color, c.ReadyReplicas, c.Replicas, c.Warm)
	case st.Rollout.InconclusiveSince != nil:
		return v1alpha1.ReasonInconclusive, fmt.Sprintf("step %d (candidate %d%%) holds on inconclusive analysis since %s", st.Rollout.Step, st.Weights.Candidate, st.Rollout.InconclusiveSince.UTC().Format("15:04:05"))
	default:
		return v1alpha1.ReasonAnalyzing, fmt.Sprintf("step %d (candidate %s %d%%) under analysis", st.Rollout.Step, c.Revision, st.Weights.Candidate)
	}
}

func availability(f rollout.Report) string {
	return fmt.Sprintf("%d/%d available", f.StableAvailable, f.Total)
}

// setReadyCondition: True when the spec's revision serves all traffic and has all desired
// replicas available (kstatus Current; with 0 desired, at once).
func setReadyCondition(st *v1alpha1.ModelServerStatus, f rollout.Report) {
	if reason, msg, held := rolloutHold(st, f); held {
		setRolloutCondition(st, f, v1alpha1.ConditionReady, false, reason, msg)
		return
	}
	switch {
	case st.Stable == nil || st.Stable.Revision != f.SpecRevision || st.Weights.Stable != 100:
		setRolloutCondition(st, f, v1alpha1.ConditionReady, false, v1alpha1.ReasonRolloutInProgress, fmt.Sprintf("revision %s does not serve all traffic yet", f.SpecRevision))
	case f.HoldReason == v1alpha1.ReasonSuperseding:
		// A spec returned to the stable revision: it serves all traffic, but the superseded
		// candidate's pods are still draining (phase Progressing, not done yet).
		setRolloutCondition(st, f, v1alpha1.ConditionReady, false, v1alpha1.ReasonRolloutInProgress, f.HoldMessage)
	case f.StableAvailable < f.Total:
		setRolloutCondition(st, f, v1alpha1.ConditionReady, false, v1alpha1.ReasonDeploymentsNotReady, fmt.Sprintf("revision %s on %s: %s", f.SpecRevision, st.Stable.Color, availability(f)))
	default:
		setRolloutCondition(st, f, v1alpha1.ConditionReady, true, v1alpha1.ReasonAvailable, fmt.Sprintf("revision %s on %s serves all traffic: %s", f.SpecRevision, st.Stable.Color, availability(f)))
	}
}

// setReconcilingCondition: True while work is in progress: the first revision coming up, a
// rollout moving, pods coming up. False on a deliberate hold (paused, awaiting promotion),
// after a rollback and on a rollout stalled on inconclusive analysis (Stalled says why).
func setReconcilingCondition(st *v1alpha1.ModelServerStatus, f rollout.Report) {
	if reason, msg, held := rolloutHold(st, f); held {
		setRolloutCondition(st, f, v1alpha1.ConditionReconciling, false, reason, msg)
		return
	}
	switch {
	case st.Phase == v1alpha1.PhaseProgressing && st.Candidate != nil && f.Stall != "":
		setRolloutCondition(st, f, v1alpha1.ConditionReconciling, false, f.StallReason, f.Stall)
	case st.Phase == v1alpha1.PhaseProgressing && st.Candidate != nil:
		reason, msg := progressReason(st, f)
		setRolloutCondition(st, f, v1alpha1.ConditionReconciling, true, reason, msg)
	case f.StableAvailable < f.Total:
		setRolloutCondition(st, f, v1alpha1.ConditionReconciling, true, v1alpha1.ReasonDeploymentsNotReady, fmt.Sprintf("%s: %s", st.Stable.Color, availability(f)))
	default:
		setRolloutCondition(st, f, v1alpha1.ConditionReconciling, false, v1alpha1.ReasonReconciled, "")
	}
}

// setStalledCondition: True in phase RolledBack (retrying will not help until the spec
// changes) and on a rollout that has held on inconclusive analysis for
// DefaultInconclusiveReportAfter (reason AnalysisInconclusive: it cannot move without data or a
// person). The controller sets it for an invalid spec on its own.
func setStalledCondition(st *v1alpha1.ModelServerStatus, f rollout.Report) {
	if st.Phase == v1alpha1.PhaseRolledBack {
		setRolloutCondition(st, f, v1alpha1.ConditionStalled, true, heldReason(f), rolledBackMessage(f))
		return
	}
	if f.Stall != "" {
		setRolloutCondition(st, f, v1alpha1.ConditionStalled, true, f.StallReason, f.Stall)
		return
	}
	setRolloutCondition(st, f, v1alpha1.ConditionStalled, false, v1alpha1.ReasonReconciled, "")
}

// setProgressingCondition: True while a rollout (or the first revision) moves forward; False
// when it is held (paused, awaiting promotion, rolled back) or done.
func setProgressingCondition(st *v1alpha1.ModelServerStatus, f rollout.Report) {
	if reason, msg, held := rolloutHold(st, f); held {
		setRolloutCondition(st, f, v1alpha1.ConditionProgressing, false, reason, msg)
		return
	}
	switch {
	case st.Phase == v1alpha1.PhaseProgressing && st.Candidate != nil && f.Stall != "":
		setRolloutCondition(st, f, v1alpha1.ConditionProgressing, false, f.StallReason, f.Stall)
	case st.Phase == v1alpha1.PhaseProgressing && st.Candidate != nil && (f.HoldReason == v1alpha1.ReasonRouteNotAccepted || f.HoldReason == v1alpha1.ReasonGateHeld || f.HoldReason == v1alpha1.ReasonMirrorUnsupported):
		setRolloutCondition(st, f, v1alpha1.ConditionProgressing, false, f.HoldReason, f.HoldMessage)
	case st.Phase == v1alpha1.PhaseProgressing && st.Candidate != nil:
		reason, msg := progressReason(st, f)
		setRolloutCondition(st, f, v1alpha1.ConditionProgressing, true, reason, msg)
	case st.Phase == v1alpha1.PhasePending:
		setRolloutCondition(st, f, v1alpha1.ConditionProgressing, true, v1alpha1.ReasonDeploymentsNotReady, fmt.Sprintf("first revision %s coming up: %s", f.SpecRevision, availability(f)))
	case len(st.History) > 0 && st.History[0].Outcome == v1alpha1.OutcomePromoted && st.Stable != nil && st.History[0].Revision == st.Stable.Revision:
		setRolloutCondition(st, f, v1alpha1.ConditionProgressing, false, v1alpha1.ReasonPromoted, fmt.Sprintf("revision %s promoted: %s", st.Stable.Revision, st.History[0].Reason))
	default:
		setRolloutCondition(st, f, v1alpha1.ConditionProgressing, false, v1alpha1.ReasonReconciled, "no rollout in progress")
	}
}

// setDegradedCondition: True when the stable color, which served before, has no Ready pod of
// more than zero desired. Fewer than desired but some Ready is scaling, not degradation.
func setDegradedCondition(st *v1alpha1.ModelServerStatus, f rollout.Report) {
	if f.Total > 0 && f.StableReady == 0 && f.WasServing && st.Stable != nil {
		setRolloutCondition(st, f, v1alpha1.ConditionDegraded, true, v1alpha1.ReasonDeploymentsNotReady, fmt.Sprintf("stable %s (%s) has 0/%d Ready replicas", st.Stable.Color, st.Stable.Revision, f.Total))
		return
	}
	setRolloutCondition(st, f, v1alpha1.ConditionDegraded, false, v1alpha1.ReasonAvailable, fmt.Sprintf("%d/%d Ready", f.StableReady, f.Total))
}

// PhaseConditions returns the Ready, Reconciling and Stalled conditions set in phase, with
// generation as their observedGeneration, per the table of package health's doc (the contract
// with kstatus, Argo CD and `kubectl modelship wait`), as fixtures for the tests of readers; the
// sequence tests hold the machine to it. An unknown phase gets nil.
func PhaseConditions(phase v1alpha1.Phase, generation int64) []metav1.Condition {
	type cond struct {
		status         metav1.ConditionStatus
		reason, detail string
	}
	const t, f = metav1.ConditionTrue, metav1.ConditionFalse
	const coming, inRollout, paused, awaiting, noneAvailable = "the first revision is coming up", "the candidate does not serve all traffic yet",
		"the rollout is paused (spec.paused)", "the rollout waits for a promotion", "no available replicas"
	// Ready, Reconciling, Stalled.
	table := map[v1alpha1.Phase][3]cond{
		v1alpha1.PhasePending:           {{f, v1alpha1.ReasonDeploymentsNotReady, coming}, {t, v1alpha1.ReasonDeploymentsNotReady, coming}, {f, v1alpha1.ReasonReconciled, ""}},
		v1alpha1.PhaseProgressing:       {{f, v1alpha1.ReasonRolloutInProgress, inRollout}, {t, v1alpha1.ReasonRolloutInProgress, "rollout in progress"}, {f, v1alpha1.ReasonReconciled, ""}},
		v1alpha1.PhasePaused:            {{f, v1alpha1.ReasonPaused, paused}, {f, v1alpha1.ReasonPaused, paused}, {f, v1alpha1.ReasonPaused, ""}},
		v1alpha1.PhaseAwaitingPromotion: {{f, v1alpha1.ReasonAwaitingPromotion, awaiting}, {f, v1alpha1.ReasonAwaitingPromotion, awaiting}, {f, v1alpha1.ReasonAwaitingPromotion, ""}},
		v1alpha1.PhaseHealthy:           {{t, v1alpha1.ReasonAvailable, "the spec's revision serves all traffic"}, {f, v1alpha1.ReasonReconciled, ""}, {f, v1alpha1.ReasonReconciled, ""}},
		v1alpha1.PhaseRolledBack: {{f, v1alpha1.ReasonRolledBack, "the spec's revision was rolled back"}, {f, v1alpha1.ReasonRolledBack, ""},
			{t, v1alpha1.ReasonRolledBack, "the spec's revision was rolled back; change the spec to roll out again"}},
		v1alpha1.PhaseDegraded: {{f, v1alpha1.ReasonDeploymentsNotReady, noneAvailable}, {t, v1alpha1.ReasonDeploymentsNotReady, noneAvailable}, {f, v1alpha1.ReasonReconciled, ""}},
	}
	row, ok := table[phase]
	if !ok {
		return nil
	}
	out := make([]metav1.Condition, 0, len(row))
	for i, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled} {
		out = append(out, metav1.Condition{Type: typ, Status: row[i].status, Reason: row[i].reason, Message: row[i].detail, ObservedGeneration: generation})
	}
	return out
}

// StalledProgressing returns the Ready, Reconciling and Stalled conditions of a rollout in phase
// Progressing that has held on inconclusive analysis past the stall deadline (the "Progressing,
// stalled" row of package health's table), with generation as their observedGeneration.
func StalledProgressing(generation int64) []metav1.Condition {
	c := func(t string, s metav1.ConditionStatus, msg string) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: v1alpha1.ReasonAnalysisInconclusive, Message: msg, ObservedGeneration: generation}
	}
	return []metav1.Condition{
		c(v1alpha1.ConditionReady, metav1.ConditionFalse, "the candidate does not serve all traffic yet"),
		c(v1alpha1.ConditionReconciling, metav1.ConditionFalse, "analysis has been inconclusive for too long"),
		c(v1alpha1.ConditionStalled, metav1.ConditionTrue, "analysis has been inconclusive for too long"),
	}
}
