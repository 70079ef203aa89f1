package rollout

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Event reasons, UpperCamelCase, kept in one place.
const (
	// EventRolloutStarted: a new revision became the candidate.
	EventRolloutStarted = "RolloutStarted"
	// EventStepAdvanced: the candidate received the next step's weight.
	EventStepAdvanced = "StepAdvanced"
	// EventAwaitingPromotion: the rollout holds before its last step for a human.
	EventAwaitingPromotion = "AwaitingPromotion"
	// EventPromoted: the candidate became stable.
	EventPromoted = "Promoted"
	// EventRolledBack: analysis or a deadline sent all traffic back to stable.
	EventRolledBack = "RolledBack"
	// EventAborted: a person sent all traffic back to stable.
	EventAborted = "Aborted"
	// EventSuperseded: a newer spec replaced the candidate during its rollout.
	EventSuperseded = "Superseded"
	// EventPaused: spec.paused froze the rollout.
	EventPaused = "Paused"
	// EventResumed: spec.paused was cleared; the current step's timer restarted.
	EventResumed = "Resumed"
	// EventAnalysisFailed: a measurement failed (counted against the failure limit).
	EventAnalysisFailed = "AnalysisFailed"
	// EventAnalysisInconclusive: analysis started holding on inconclusive measurements.
	EventAnalysisInconclusive = "AnalysisInconclusive"
	// EventRevertedToWarm: the spec went back to the revision the idle color still runs warm;
	// traffic moved to it at once (an instant rollback), the abandoned revision drains.
	EventRevertedToWarm = "RevertedToWarm"
	// EventOperationIgnored: an operation came for a rollout that already ended.
	EventOperationIgnored = "OperationIgnored"
	// EventStableReplaced: the spec changed before the first revision ever served, so the new
	// revision replaced it directly (there was nothing to protect with a progressive rollout).
	EventStableReplaced = "StableReplaced"
	// EventCandidateUnready: the candidate went below the Ready, warm pods its step's weight
	// needs; its weight is capped to what the rest carry.
	EventCandidateUnready = "CandidateUnready"
	// EventRouteNotAccepted: the rollout holds because a Gateway did not accept the HTTPRoute.
	EventRouteNotAccepted = "RouteNotAccepted"
	// EventAnalysisStalled: the rollout has held on inconclusive analysis past
	// DefaultInconclusiveReportAfter; it is reported Stalled.
	EventAnalysisStalled = "AnalysisStalled"
	// EventNoRoomForCandidate: in swap mode the candidate's next step does not fit beside the
	// stable color's share; the rollout holds (reported Stalled).
	EventNoRoomForCandidate = "NoRoomForCandidate"
)

// Next is one pass of the blue/green state machine. It does not modify ms: it starts from a
// deep copy of ms.Status and returns the complete next status together with each color's plan,
// the route weights, the events and when to look again.
//
// Choices where the API leaves room (see also the package tests, which pin each of them):
//   - A first revision is Pending until its AvailableReplicas reach the desired total, then
//     Healthy; a desired total of 0 is Healthy at once with no pods. If the spec changes while
//     the first revision has never served and has no Ready pod, the new revision replaces it
//     directly: a progressive rollout against a stable that serves nothing would protect nothing.
//   - Degraded (phase in steady state, condition always) means the stable color has no Ready
//     pod of more than zero desired after it had served; scaling up, or up from zero, is not
//     degradation (Ready False and Reconciling True say it).
//   - A rollout waiting for a human (Paused, AwaitingPromotion) is not work in progress:
//     Reconciling is False there, as in Argo CD's "Suspended", so that kubectl wait and Flux
//     do not time out on a deliberate hold; Ready stays False and Progressing False says why.
//   - Candidate readiness counts only pods of the candidate's revision: a Deployment still
//     replacing the other revision's pods is counted conservatively (see candidateReady).
//   - Deadlines fire at or after their instant, so that a requeue at the instant acts.
//   - Operations: Abort acts at once (also while paused). Promote and PromoteFull still need
//     the candidate Ready and warm for the weight they give; until then the candidate is sized
//     for it and Decision.KeepOperation asks the controller to keep the request. While paused
//     they wait too. An operation on a rollout that has ended is ignored (an event says so).
//   - A failed analysis that exceeds the failure limit in the same pass as a Promote wins:
//     rollback before promotion.
//   - Weights never exceed what a color's Ready pods carry (see carries: the largest w with
//     need(total, w) <= Ready): a live candidate gets min(its step's weight, what its Ready
//     pods carry), the stable color the rest. The candidate never gets more than its
//     step, even when the stable color lost pods: an unproven revision does not absorb the
//     stable color's overflow, so when neither color can carry its share, stable is preferred.
//     A candidate below its step's need gets ColorStatus.UnreadySince and is rolled back
//     (ProgressDeadlineExceeded) once that is older than the progress deadline (not while
//     paused: a paused rollout is rolled back on resume if the deadline passed meanwhile).
//   - A rolled-back or aborted candidate gives its weight back only as fast as the stable
//     color's Ready pods can carry it (in swap mode the stable color was shrunk to its share):
//     it keeps min(its last weight, what it carries, what stable cannot carry yet), sized for
//     exactly that, so that the stable color grows back in step as it shrinks. Its pods stay
//     (status.rollout.drainUntil) for RollbackDrain after its weight last went down, in swap
//     mode only where there is room beside the stable color's total. In swap mode
//     an aborted candidate keeps its pods for inspection (status.rollout.inspectUntil) only where
//     there is room beside the stable color's total; its GPUs are freed at once when the stable
//     color needs them.
//     A candidate superseded by a spec change drains the same way (phase Progressing, reason
//     Superseding; measurements are ignored), and once its weight is 0 keeps its pods for
//     RollbackDrain, before the new revision takes its color or, the spec back on the stable
//     revision, the color scales to zero. A new revision supersedes a rolled-back or aborted
//     candidate that still drains (weight on it, or drainUntil ahead) the same way; one only
//     kept for inspection gives its color up.
//   - A route that a Gateway rejected (Observation.RouteAccepted False) holds the rollout: no
//     step, no promotion, not even by request (the request is kept); deadlines and aborts
//     still act. Unknown (no Gateway answered) does not hold.
//   - Analysis inconclusive for spec.rollout.inconclusive.reportAfter (DefaultInconclusiveReportAfter)
//     keeps phase Progressing but reports
//     Stalled True (reason AnalysisInconclusive) and Reconciling False, with the metric's
//     message and a hint; nothing is promoted or rolled back by it. Only
//     spec.rollout.inconclusive.rollbackAfter, the user's opt-in, rolls back.
func Next(ms *v1alpha1.ModelServer, obs Observation, now time.Time) Decision {
	m := &machine{
		ms:        ms,
		obs:       obs,
		now:       now,
		pol:       policyOf(ms),
		st:        ms.Status.DeepCopy(),
		total:     max(obs.DesiredReplicas, 0),
		prevPhase: ms.Status.Phase,
		plans:     map[v1alpha1.Color]ColorPlan{},
	}
	if ms.Status.Stable != nil {
		prev := *ms.Status.Stable
		m.prevStable = &prev
	}
	m.run()
	m.markSized()
	return m.decision()
}

// machine holds one pass.
type machine struct {
	ms         *v1alpha1.ModelServer
	obs        Observation
	now        time.Time
	pol        policy
	st         *v1alpha1.ModelServerStatus
	total      int32
	prevPhase  v1alpha1.Phase
	prevStable *v1alpha1.ColorStatus

	plans       map[v1alpha1.Color]ColorPlan
	events      []Event
	wake        []time.Time // instants at which to look again
	keepOp      bool
	promotedNow bool
	// drain is the weight a rolled-back or aborted candidate keeps this pass (see drainWeight).
	drain int32
	// held is why the rollout does not move as its steps say in this pass (see hold).
	held hold
}

// hold is why a pass does not move the rollout as its steps say, as the conditions report it: a
// Reason constant and its message; the zero value holds nothing. A pass sets it where it
// decides (holdFor), and of two reasons in one pass the stronger one is kept, in holdRank's
// order: the rollout rolled back or aborted (phase RolledBack), no room for the candidate's
// next step (Stalled), a superseded or abandoned candidate still draining, a route that a
// Gateway did not accept.
type hold struct {
	reason  string
	message string
}

// holdRank orders the holds, the strongest first.
var holdRank = map[string]int{
	v1alpha1.ReasonRolledBack:         4,
	v1alpha1.ReasonAborted:            4,
	v1alpha1.ReasonNoRoomForCandidate: 3,
	v1alpha1.ReasonSuperseding:        2,
	v1alpha1.ReasonRouteNotAccepted:   1,
	v1alpha1.ReasonGateHeld:           1,
	v1alpha1.ReasonMirrorUnsupported:  1,
}

// holdFor records a hold for this pass unless a stronger one is already recorded; it reports
// whether the pass now holds for reason.
func (m *machine) holdFor(reason, message string) bool {
	if holdRank[reason] < holdRank[m.held.reason] {
		return false
	}
	m.held = hold{reason: reason, message: message}
	return true
}

// candidateLive: the status' candidate is the live rollout of the spec's revision in this pass
// (part of the plans and weights), not one superseded, rolled back, aborted or promoted.
func (m *machine) candidateLive() bool {
	c := m.st.Candidate
	return c != nil && c.Revision == m.obs.Revision && m.inProgress()
}

// headerRoute is the color spec.rollout.headerRoute sends to (see Decision.HeaderRoute): the
// live candidate's, once it has a Ready, warm pod; a candidate superseded and draining is not
// live, nor is one rolled back or aborted, and a promoted one is no longer the candidate.
func (m *machine) headerRoute() v1alpha1.Color {
	c := m.st.Candidate
	if m.ms.Spec.Rollout.HeaderRoute == nil || !m.candidateLive() || m.heldFor(v1alpha1.ReasonSuperseding) {
		return ""
	}
	if !c.Warm || c.ReadyReplicas < 1 {
		return ""
	}
	return c.Color
}

// heldFor reports whether this pass holds for reason.
func (m *machine) heldFor(reason string) bool { return m.held.reason == reason }

func (m *machine) run() {
	st := m.st
	st.Revision = m.obs.Revision
	if st.Stable == nil {
		st.Stable = &v1alpha1.ColorStatus{Color: v1alpha1.Blue, Revision: m.obs.Revision, Image: m.obs.Image}
	}
	spec := m.obs.Revision
	switch {
	case spec == st.Stable.Revision:
		if m.drainSuperseded() || m.drainReverted() {
			return
		}
		m.steady()
	case m.revertsToWarm():
		m.revert()
	case m.neverServed():
		m.replaceStable()
		m.steady()
	case spec == st.Rollout.RolledBackRevision:
		m.holdRolledBack()
	default:
		if st.Candidate == nil || st.Candidate.Revision != spec {
			if m.drainSuperseded() {
				return
			}
			m.startRollout()
		}
		m.progress()
	}
}

// decision finishes the pass: weights, the report the conditions are derived from, requeue.
func (m *machine) decision() Decision {
	st := m.st
	cw := m.servedWeight()
	st.Weights = v1alpha1.Weights{Stable: 100 - cw, Candidate: cw}
	weights := map[v1alpha1.Color]int32{st.Stable.Color: 100 - cw, st.Stable.Color.Other(): cw}

	if judgedPhase(st.Phase) && judging(st) && !m.heldFor(v1alpha1.ReasonSuperseding) {
		if t, ok := nextMeasureAt(st, m.pol); ok {
			m.wakeAt(maxTime(t, m.now.Add(time.Second)))
		} else if st.Candidate != nil && st.Candidate.SizedSince == nil {
			// The candidate is still growing to its planned size: look again soon.
			m.wakeAt(m.now.Add(WarmupPollInterval))
		}
	}
	ready, avail := m.stableCounts()
	r := Report{
		Generation:      m.ms.Generation,
		SpecRevision:    m.obs.Revision,
		Total:           m.total,
		StableReady:     ready,
		StableAvailable: avail,
		WasServing:      m.wasServing(),
		HoldReason:      m.held.reason,
		HoldMessage:     m.held.message,
		StableDead:      m.candidateLive() && m.stableServesNothing(),
		Stall:           m.inconclusiveStalled(),
		StallReason:     v1alpha1.ReasonAnalysisInconclusive,
	}
	if m.heldFor(v1alpha1.ReasonNoRoomForCandidate) {
		r.HoldReason, r.HoldMessage = "", "" // reported as a stall, when it still applies
		if st.Phase == v1alpha1.PhaseProgressing && m.candidateLive() {
			r.Stall, r.StallReason = m.held.message, v1alpha1.ReasonNoRoomForCandidate
		}
	}
	if c := st.Candidate; c != nil && c.UnreadySince != nil {
		r.UnreadyDeadline = c.UnreadySince.Add(m.pol.progressDeadline)
	}
	if r.Stall != "" && !hasReason(m.ms.Status, v1alpha1.ConditionStalled, r.StallReason) {
		ev := EventAnalysisStalled
		if r.StallReason == v1alpha1.ReasonNoRoomForCandidate {
			ev = EventNoRoomForCandidate
		}
		m.event(corev1.EventTypeWarning, ev, "%s", r.Stall)
	}

	var requeue time.Duration
	for _, t := range m.wake {
		if d := t.Sub(m.now); d > 0 && (requeue == 0 || d < requeue) {
			requeue = d
		}
	}
	return Decision{
		Status:        *st,
		Plans:         m.plans,
		Weights:       weights,
		HeaderRoute:   m.headerRoute(),
		Mirror:        m.mirror(),
		Events:        m.events,
		RequeueAfter:  requeue,
		KeepOperation: m.keepOp,
		Report:        r,
	}
}

func (m *machine) record(c *v1alpha1.ColorStatus, outcome v1alpha1.Outcome, reason string) {
	r := v1alpha1.RevisionRecord{Revision: c.Revision, Image: c.Image, Outcome: outcome, Reason: reason, At: metav1.NewTime(m.now)}
	h := append([]v1alpha1.RevisionRecord{r}, m.st.History...)
	if len(h) > historyLimit {
		h = h[:historyLimit]
	}
	m.st.History = h
}

func (m *machine) event(typ, reason, format string, args ...any) {
	m.events = append(m.events, Event{Type: typ, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (m *machine) wakeAt(t time.Time) { m.wake = append(m.wake, t) }

func (m *machine) timeP(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}

// ahead reports whether t is set and after now (a deadline at now has passed).
func ahead(t *metav1.Time, now time.Time) bool { return t != nil && now.Before(t.Time) }

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func stepsString(steps []int32) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ",")
}

// hasReason reports whether a condition of st has the reason.
func hasReason(st v1alpha1.ModelServerStatus, typ, reason string) bool {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Reason == reason
		}
	}
	return false
}
