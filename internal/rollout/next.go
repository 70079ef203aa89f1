package rollout

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
	// DefaultInconclusiveStall; it is reported Stalled.
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
//     (status.scaleDownAt) for RollbackDrain after its weight last went down, in swap mode only
//     where there is room beside the stable color's total. In swap mode
//     an aborted candidate keeps its pods for inspection only where there is room beside the
//     stable color's total; its GPUs are freed at once when the stable color needs them.
//     A candidate superseded by a spec change drains the same way (phase Progressing, reason
//     Superseding; measurements are ignored), and once its weight is 0 keeps its pods for
//     RollbackDrain, before the new revision takes its color or, the spec back on the stable
//     revision, the color scales to zero. A new revision supersedes a rolled-back candidate
//     that still drains the same way; an aborted one kept for inspection gives its color up.
//   - A route that a Gateway rejected (Observation.RouteAccepted False) holds the rollout: no
//     step, no promotion, not even by request (the request is kept); deadlines and aborts
//     still act. Unknown (no Gateway answered) does not hold.
//   - Analysis inconclusive for spec.rollout.inconclusiveStall (DefaultInconclusiveStall)
//     keeps phase Progressing but reports
//     Stalled True (reason AnalysisInconclusive) and Reconciling False, with the metric's
//     message and a hint; nothing is promoted or rolled back by it. Only
//     spec.rollout.inconclusiveDeadline, the user's opt-in, rolls back.
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

// markSized records when the candidate can be measured (see MeasureDue): when it reached its
// planned size, all Ready and warm, or earlier, when its warm pods already carry its weight at
// no more per pod than the stable color's Ready pods carry theirs. Pods added for the next step
// that are Ready but still loading their model serve nothing, and a window measured while too
// few serve would judge the candidate on overloaded pods (2x the stable pods' load at 50% with
// half its pods loading).
func (m *machine) markSized() {
	c := m.st.Candidate
	if c == nil {
		return
	}
	p, ok := m.plans[c.Color]
	planned := ok && p.Revision == c.Revision && c.ReadyReplicas >= p.Replicas && c.Warm
	if !planned && !m.servesAtStableLoad(c) {
		c.SizedSince = nil
		return
	}
	if c.SizedSince == nil {
		c.SizedSince = m.timeP(m.now)
	}
}

// servesAtStableLoad: the candidate holds weight, and its warm pods carry it at no more per
// pod than the stable color's Ready pods carry the rest.
func (m *machine) servesAtStableLoad(c *v1alpha1.ColorStatus) bool {
	w := m.servedWeight()
	o, ok := m.colorObs(c.Color, c.Revision)
	if !ok || w <= 0 || w >= 100 || o.Stale || o.WarmPods <= 0 {
		return false
	}
	s := m.st.Stable
	stable := m.servingReady(s.Color, s.Revision)
	return stable > 0 && int64(w)*int64(stable) <= int64(100-w)*int64(min(o.WarmPods, o.ReadyReplicas))
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

	plans        map[v1alpha1.Color]ColorPlan
	events       []Event
	wake         []time.Time // instants at which to look again
	keepOp       bool
	promotedNow  bool
	heldReason   string
	heldMessage  string
	candidateHas bool // the candidate color is part of the rollout this pass (plans/weights)
	// drain is the weight a rolled-back or aborted candidate keeps this pass (see drainWeight).
	drain int32
	// routeHeld explains why a non-accepted route holds the rollout ("" when it does not).
	routeHeld string
	// superseding explains a superseded candidate still draining (see drainSuperseded).
	superseding string
	// noRoom explains a swap-mode rollout whose next step does not fit (see planCandidate).
	noRoom string
}

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
	case spec == st.RolledBackRevision:
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

// drainSuperseded keeps a candidate that a spec change superseded serving the part of its
// weight that the stable color's Ready pods cannot carry yet (in swap mode the stable color was
// shrunk to its share), sized for just that, while the stable color grows back to its total.
// Once its weight is 0 its pods stay for RollbackDrain (status.scaleDownAt), as a rolled-back
// candidate's do: the Gateway applies the route after the pass that wrote it, and requests in
// flight finish, before the new revision replaces the pods or the color scales to zero. It
// returns false, and the superseding revision (or the stable revision the spec returned to)
// takes over, after that; at once when the candidate never had weight.
func (m *machine) drainSuperseded() bool {
	st := m.st
	c := st.Candidate
	if c == nil || c.Revision == m.obs.Revision {
		return false
	}
	// A live candidate, or a rolled-back one still draining when a new revision (not the stable
	// one) arrives.
	if !m.inProgress() && (m.obs.Revision == st.Stable.Revision || !m.rolledBackDraining()) {
		return false
	}
	c.ReadyReplicas = m.readyOf(c.Color, c.Revision)
	m.drain = m.drainWeight()
	if m.drain == 0 && !m.drainPods(c) {
		return false
	}
	c.UnreadySince = nil
	st.InconclusiveSince = nil // the superseded rollout's analysis is over
	if m.drain > 0 {
		c.Replicas = need(m.total, m.drain)
		m.plans[c.Color] = ColorPlan{Revision: c.Revision, Replicas: c.Replicas}
		m.superseding = fmt.Sprintf("rollout of %s superseded by %s: %s keeps %d%% until %s's Ready pods carry all traffic", c.Revision, m.obs.Revision, c.Revision, m.drain, st.Stable.Color)
		m.wakeAt(m.now.Add(WarmupPollInterval))
	} else {
		m.superseding = fmt.Sprintf("rollout of %s superseded by %s: all traffic on %s; %s's pods drain until %s", c.Revision, m.obs.Revision, st.Stable.Color, c.Revision, st.ScaleDownAt.UTC().Format(time.RFC3339))
	}
	m.planStable()
	st.Phase = v1alpha1.PhaseProgressing
	if !hasReason(m.ms.Status, v1alpha1.ConditionReconciling, v1alpha1.ReasonSuperseding) {
		m.event(corev1.EventTypeNormal, EventSuperseded, "%s", m.superseding)
	}
	m.keepOp = m.obs.Operation == OpPromote || m.obs.Operation == OpPromoteFull
	return true
}

// rolledBackDraining: the candidate was rolled back and still drains (weight on it, or its
// RollbackDrain not over). A new revision then supersedes it as it would a live candidate
// instead of taking its color at once: the Gateway applies the route after the pass that wrote
// it, and the pods still get requests meanwhile. A candidate kept only for inspection
// (aborted: no weight, scaleDownAt further than RollbackDrain) gives its color up at once.
func (m *machine) rolledBackDraining() bool {
	sd := m.st.ScaleDownAt
	if m.inProgress() || sd == nil || !m.now.Before(sd.Time) {
		return false
	}
	return m.ms.Status.Weights.Candidate > 0 || sd.Sub(m.now) <= RollbackDrain
}

// drainPods keeps a superseded candidate whose weight is 0 at its pods until
// status.scaleDownAt, set to RollbackDrain from the pass its weight went to 0, and reports
// whether it does.
func (m *machine) drainPods(c *v1alpha1.ColorStatus) bool {
	st := m.st
	if m.ms.Status.Weights.Candidate > 0 {
		m.drainUntil(m.now.Add(RollbackDrain))
	}
	sd := st.ScaleDownAt
	if sd == nil {
		return false
	}
	if !m.now.Before(sd.Time) {
		st.ScaleDownAt = nil
		return false
	}
	o, ok := m.colorObs(c.Color, c.Revision)
	if !ok {
		st.ScaleDownAt = nil
		return false
	}
	// Never more than the total (no double GPUs), should the total have shrunk meanwhile.
	c.Replicas = min(o.Replicas, max(m.total, 1))
	m.plans[c.Color] = ColorPlan{Revision: c.Revision, Replicas: c.Replicas}
	m.wakeAt(sd.Time)
	return true
}

// revertsToWarm: the spec asks for the revision that the idle color still runs within its
// keep window (status.scaleDownAt after a promotion), with Ready pods, and that revision's last
// outcome was a promotion, or it has none (the first revision): it served all traffic before.
// An aborted or superseded revision kept on the idle color is rolled out step by step. Moving back to it is an instant
// rollback: no steps, no analysis, no pod restarted or created for it.
func (m *machine) revertsToWarm() bool {
	st := m.st
	if m.inProgress() || st.Candidate != nil || st.ScaleDownAt == nil || !m.now.Before(st.ScaleDownAt.Time) {
		return false
	}
	idle := st.Stable.Color.Other()
	if o, ok := m.colorObs(idle, m.obs.Revision); !ok || o.Replicas == 0 || m.servingReady(idle, m.obs.Revision) == 0 {
		return false
	}
	for _, h := range st.History {
		if h.Revision == m.obs.Revision {
			return h.Outcome == v1alpha1.OutcomePromoted
		}
	}
	// No record: the first revision, which served before any rollout.
	return true
}

// revert makes the warm idle color stable again at once (see revertsToWarm). Its Ready pods
// take all the traffic they carry in this pass; the abandoned revision keeps the rest (see
// drainWeight) and then its pods for the scale-down delay, for inspection, as after an abort.
// The history records the abandoned revision as rolled back.
func (m *machine) revert() {
	st := m.st
	old := *st.Stable
	last := m.ms.Status.Weights.Stable // what the abandoned revision carried before this pass
	st.Stable = &v1alpha1.ColorStatus{Color: old.Color.Other(), Revision: m.obs.Revision, Image: m.obs.Image}
	for _, h := range st.History {
		if h.Revision == m.obs.Revision {
			if h.Image != "" {
				st.Stable.Image = h.Image
			}
			break
		}
	}
	st.ScaleDownAt = m.timeP(m.now.Add(max(m.pol.scaleDownDelay, RollbackDrain)))
	m.record(&old, v1alpha1.OutcomeRolledBack, fmt.Sprintf("rolled back to %s, still warm on %s: all traffic moved at once (no steps, no analysis)", m.obs.Revision, st.Stable.Color))
	m.clearRollout()
	m.planStable()
	st.Candidate = &v1alpha1.ColorStatus{Color: old.Color, Revision: old.Revision, Image: old.Image}
	st.RolledBackRevision = old.Revision
	m.drain = m.drainOf(st.Candidate, last)
	m.event(corev1.EventTypeNormal, EventRevertedToWarm, "rolled back to %s on %s, which was still warm: %d%% of the traffic moved at once; %s (%s) on %s keeps %d%% and its pods until %s",
		st.Stable.Revision, st.Stable.Color, 100-m.drain, old.Revision, old.Image, old.Color, m.drain, st.ScaleDownAt.UTC().Format(time.RFC3339))
	if m.drain == 0 {
		m.settleReverted()
		return
	}
	m.keepReverted()
}

// drainReverted keeps a rolled-back revision that still carries weight when the spec is on the
// stable revision (an instant rollback's abandoned revision, see revert, or a rolled-back
// candidate whose spec was reverted while it drained) serving what the stable color's Ready
// pods cannot carry yet (reason Superseding). It returns false, and the ModelServer is steady,
// once the stable color carries all traffic.
func (m *machine) drainReverted() bool {
	st := m.st
	c := st.Candidate
	if c == nil || m.inProgress() || c.Revision != st.RolledBackRevision || m.ms.Status.Weights.Candidate == 0 {
		return false
	}
	m.drain = m.drainWeight()
	if m.drain == 0 {
		m.drainUntil(m.now.Add(RollbackDrain))
		return false
	}
	m.keepReverted()
	return true
}

// keepReverted plans a pass of an instant rollback whose abandoned revision still carries
// m.drain: the stable color at the total, the abandoned one at its pods, phase Progressing.
func (m *machine) keepReverted() {
	st := m.st
	c := st.Candidate
	m.planStable()
	c.ReadyReplicas = m.readyOf(c.Color, c.Revision)
	if o, ok := m.colorObs(c.Color, c.Revision); ok {
		c.Replicas = max(o.Replicas, need(m.total, m.drain))
		m.plans[c.Color] = ColorPlan{Revision: c.Revision, Replicas: c.Replicas}
	}
	m.superseding = fmt.Sprintf("spec back on %s (%s): %s keeps %d%% until %s's Ready pods carry all traffic", st.Stable.Revision, st.Stable.Color, c.Revision, m.drain, st.Stable.Color)
	m.wakeAt(m.now.Add(WarmupPollInterval))
	st.Phase = v1alpha1.PhaseProgressing
}

// settleReverted ends an instant rollback: no candidate, the abandoned color kept at its pods
// until status.scaleDownAt (see planIdle).
func (m *machine) settleReverted() {
	st := m.st
	st.Candidate = nil
	st.RolledBackRevision = ""
	m.planStable()
	m.planIdle(st.Stable.Color.Other())
	st.Phase = m.steadyPhase()
}

// neverServed is true while the first revision has not become available and has no Ready pod
// now: nothing serves that a rollout would protect.
func (m *machine) neverServed() bool {
	if m.prevPhase != "" && m.prevPhase != v1alpha1.PhasePending {
		return false
	}
	s := m.st.Stable
	return m.readyOf(s.Color, s.Revision) == 0
}

// inProgress is true when the status' candidate is a live rollout (not one kept for display
// after a rollback or an abort).
func (m *machine) inProgress() bool {
	c := m.st.Candidate
	return c != nil && c.Revision != m.st.RolledBackRevision
}

// replaceStable puts the spec's revision on the stable color of a ModelServer that never served.
func (m *machine) replaceStable() {
	st := m.st
	old := st.Stable.Revision
	st.Stable.Revision, st.Stable.Image = m.obs.Revision, m.obs.Image
	m.event(corev1.EventTypeNormal, EventStableReplaced, "revision %s replaces %s on %s before it ever served", m.obs.Revision, old, st.Stable.Color)
}

// steady: the spec's revision is the stable revision; no rollout.
func (m *machine) steady() {
	st := m.st
	if c := st.Candidate; c != nil {
		if m.inProgress() {
			m.record(c, v1alpha1.OutcomeSuperseded, fmt.Sprintf("spec returned to stable revision %s", st.Stable.Revision))
			m.event(corev1.EventTypeNormal, EventSuperseded, "rollout of %s on %s superseded: spec returned to stable revision %s; all traffic on %s", c.Revision, c.Color, st.Stable.Revision, st.Stable.Color)
		}
		st.Candidate = nil
	}
	if m.obs.Operation != OpNone {
		m.event(corev1.EventTypeNormal, EventOperationIgnored, "%s ignored: no rollout in progress", m.obs.Operation)
	}
	st.RolledBackRevision = ""
	m.clearRollout()
	m.planStable()
	m.planIdle(st.Stable.Color.Other())
	st.Phase = m.steadyPhase()
}

// steadyPhase is the phase without a rollout, from the stable color's pods.
func (m *machine) steadyPhase() v1alpha1.Phase {
	ready, avail := m.stableCounts()
	switch {
	case avail >= m.total:
		return v1alpha1.PhaseHealthy
	case ready == 0 && m.wasServing():
		return v1alpha1.PhaseDegraded
	case ready == 0 || m.prevPhase == "" || m.prevPhase == v1alpha1.PhasePending:
		return v1alpha1.PhasePending
	default:
		return v1alpha1.PhaseHealthy
	}
}

// wasServing: the stable color had Ready pods in the last pass (or was already Degraded), or
// has just been promoted (promotion needs Ready pods).
func (m *machine) wasServing() bool {
	if m.promotedNow || m.prevPhase == v1alpha1.PhaseDegraded {
		return true
	}
	p := m.prevStable
	if p == nil || p.Color != m.st.Stable.Color || p.Revision != m.st.Stable.Revision {
		return false
	}
	// Degraded stays so during a rollout too (phase Progressing), until the stable color has
	// Ready pods again.
	return p.ReadyReplicas > 0 || meta.IsStatusConditionTrue(m.ms.Status.Conditions, v1alpha1.ConditionDegraded)
}

// holdRolledBack: the spec still asks for a revision that was rolled back or aborted.
func (m *machine) holdRolledBack() {
	st := m.st
	if m.obs.Operation != OpNone {
		m.event(corev1.EventTypeNormal, EventOperationIgnored, "%s ignored: revision %s was already rolled back; change the spec to retry", m.obs.Operation, st.RolledBackRevision)
	}
	m.clearRollout()
	m.planStable()
	if st.Candidate != nil {
		m.drain = m.drainWeight()
		if m.drain < m.ms.Status.Weights.Candidate {
			m.drainUntil(m.now.Add(RollbackDrain))
		}
	}
	plan := m.planIdle(st.Stable.Color.Other())
	if c := st.Candidate; c != nil {
		c.ReadyReplicas = m.readyOf(c.Color, c.Revision)
		c.Warm = m.warmOf(c.Color, c.Revision)
		c.UnreadySince = nil
		c.SizedSince = nil
		if m.obs.Capacity > 0 && plan > 0 {
			// Swap mode: a candidate kept for inspection (aborted) or draining (rolled back)
			// keeps pods only where there is room beside the stable color's total; the stable
			// color needs the rest now.
			plan = min(plan, max(m.obs.Capacity-m.total, 0))
		}
		if m.drain > 0 {
			plan = max(plan, need(m.total, m.drain))
			m.wakeAt(m.now.Add(WarmupPollInterval))
		}
		if o, ok := m.colorObs(c.Color, c.Revision); ok {
			m.plans[c.Color] = ColorPlan{Revision: o.Revision, Replicas: plan}
		}
		c.Replicas = plan
	}
	m.heldReason, m.heldMessage = v1alpha1.ReasonRolledBack, "revision "+st.RolledBackRevision+" was rolled back"
	for _, h := range st.History {
		if h.Revision == st.RolledBackRevision && (h.Outcome == v1alpha1.OutcomeRolledBack || h.Outcome == v1alpha1.OutcomeAborted) {
			if h.Outcome == v1alpha1.OutcomeAborted {
				m.heldReason = v1alpha1.ReasonAborted
			}
			m.heldMessage = fmt.Sprintf("revision %s %s: %s", h.Revision, strings.ToLower(string(h.Outcome)), h.Reason)
			break
		}
	}
	st.Phase = v1alpha1.PhaseRolledBack
}

// drainUntil keeps the idle color's pods at least until t (ScaleDownAt, see planIdle): a
// rolled-back or aborted candidate whose weight goes down this pass keeps its pods for
// RollbackDrain after it, while the Gateway applies the change and requests in flight finish,
// also when drainWeight held weight on it past its first ScaleDownAt.
func (m *machine) drainUntil(t time.Time) {
	if sd := m.st.ScaleDownAt; sd == nil || sd.Time.Before(t) {
		m.st.ScaleDownAt = m.timeP(t)
	}
}

// drainWeight is the weight a rolled-back or aborted candidate keeps this pass: the part of
// its last weight that the stable color's Ready pods cannot carry yet and its own Ready pods
// can. It only shrinks, and is 0 once the stable color carries everything.
func (m *machine) drainWeight() int32 {
	c, prev := m.st.Candidate, m.ms.Status.Candidate
	if c == nil || prev == nil || prev.Color != c.Color || prev.Revision != c.Revision {
		return 0
	}
	return m.drainOf(c, m.ms.Status.Weights.Candidate)
}

// drainOf is the weight a color that leaves (c, which carried last in the last pass) keeps
// this pass: see drainWeight.
func (m *machine) drainOf(c *v1alpha1.ColorStatus, last int32) int32 {
	s := m.st.Stable
	stableReady := m.servingReady(s.Color, s.Revision)
	overflow := 100 - carries(m.total, stableReady)
	d := max(0, min(last, m.carryOf(c), overflow))
	// Swap mode: the stable color grows back on the GPUs the candidate frees as it shrinks.
	// When the drain would keep every pod the candidate has and no GPU is free, the stable
	// color's next pod waits for one of the candidate's, and the drain would wait for that pod
	// forever: the candidate gives one pod's worth back now, and the stable color's Ready pods
	// carry it until their new pod is Ready.
	if co, ok := m.colorObs(c.Color, c.Revision); ok && d > 0 && m.obs.Capacity > 0 && stableReady < m.total &&
		need(m.total, d) >= co.Replicas && m.obs.Capacity-stableReady-co.Replicas <= 0 {
		d = min(d, carries(m.total, co.Replicas-1))
	}
	return d
}

// carryOf is what the candidate's Ready pods carry (see carries). Warm-up gates only a
// weight increase: once a color serves, its Service spreads the traffic over all its Ready
// pods, so Ready pods, warm or still warming, are what it carries (pods added for the next
// step are Ready before they are warm).
func (m *machine) carryOf(c *v1alpha1.ColorStatus) int32 {
	return carries(m.total, m.servingReady(c.Color, c.Revision))
}

// servedWeight is the candidate's route weight this pass: a live candidate's step weight
// (raised by loadMatched) capped to what its Ready pods carry, or a rolled-back candidate's
// drain.
func (m *machine) servedWeight() int32 {
	if m.candidateHas && m.st.Candidate != nil {
		w := min(m.loadMatched(m.candidateWeight()), m.carryOf(m.st.Candidate))
		if m.stableServesNothing() {
			dead := m.warmCarryOf(m.st.Candidate)
			if m.ms.Spec.Paused {
				// A paused rollout's weight does not grow.
				dead = min(dead, m.ms.Status.Weights.Candidate)
			}
			w = max(w, dead)
		}
		return w
	}
	return m.drain
}

// stableServesNothing: the stable color has no Ready pod of more than zero desired (it is
// Degraded, or never came up). A live candidate, a fix shipped to a dead revision, then carries
// what its Ready, warm pods carry, whatever its step (every request routed to the stable color
// fails), is sized for all traffic, and is judged on absolute bounds only: there is nothing to
// compare it with (see the controller's measurement).
func (m *machine) stableServesNothing() bool {
	s := m.st.Stable
	if m.total <= 0 || s == nil || m.servingReady(s.Color, s.Revision) > 0 {
		return false
	}
	// It served and lost its pods; coming up (from zero, or the first time) is not dead.
	if p := m.prevStable; p == nil || p.Replicas <= 0 {
		return false
	}
	return m.wasServing()
}

// warmCarryOf is what the candidate's Ready pods that passed the warm-up check carry.
func (m *machine) warmCarryOf(c *v1alpha1.ColorStatus) int32 {
	o, ok := m.colorObs(c.Color, c.Revision)
	if !ok || o.Stale {
		return min(m.ms.Status.Weights.Candidate, m.carryOf(c))
	}
	warm := o.WarmPods
	if o.Warm {
		warm = o.ReadyReplicas // every Ready pod passed
	}
	return carries(m.total, min(warm, o.ReadyReplicas))
}

// loadMatched is step weight w under spec.rollout.loadMatching StablePods: raised to the
// candidate's share of both colors' Ready pods, the candidate's counted up to what w needs
// (pods started early for the next step do not raise this one), so that each candidate pod
// carries what a stable pod carries; never above the next step's weight. Else w.
func (m *machine) loadMatched(w int32) int32 {
	if !m.pol.matchStablePods || w <= 0 || w >= 100 {
		return w
	}
	c, s := m.st.Candidate, m.st.Stable
	nc := min(m.servingReady(c.Color, c.Revision), m.candidateNeed(w))
	ns := m.servingReady(s.Color, s.Revision)
	if nc <= 0 || ns <= 0 {
		return w
	}
	next := int32(100)
	if m.st.Step >= 1 {
		next = m.nextStepWeight()
	}
	share := min(int32(int64(nc)*100/int64(nc+ns)), next)
	if m.ms.Spec.Paused {
		// A paused rollout's weight does not grow, also when the stable color loses pods.
		share = min(share, m.ms.Status.Weights.Candidate)
	}
	return max(w, share)
}

// trackUnready keeps ColorStatus.UnreadySince: set when the candidate went below what its
// step's weight needs, cleared when it carries it again.
func (m *machine) trackUnready() {
	c := m.st.Candidate
	w := m.candidateWeight()
	if w == 0 || m.carryOf(c) >= w {
		c.UnreadySince = nil
		return
	}
	if c.UnreadySince == nil {
		c.UnreadySince = m.timeP(m.now)
		m.event(corev1.EventTypeWarning, EventCandidateUnready, "candidate %s has %d Ready pods, %d needed for its %d%% step: weight capped at %d%%; rolled back after %s unless they return",
			c.Revision, c.ReadyReplicas, need(m.total, w), w, m.carryOf(c), m.pol.progressDeadline)
	}
}

// routeHolds reports whether a route that a Gateway did not accept holds the rollout, and
// then records why (a pass with an accepted or unanswered route does not hold).
func (m *machine) routeHolds() bool {
	if m.obs.RouteAccepted != metav1.ConditionFalse {
		return false
	}
	if m.routeHeld == "" {
		m.routeHeld = fmt.Sprintf("rollout of %s holds at step %d: the HTTPRoute is not accepted: %s", m.st.Candidate.Revision, m.st.Step, m.obs.RouteMessage)
		if m.ms.Status.Phase != v1alpha1.PhaseProgressing || !hasReason(m.ms.Status, v1alpha1.ConditionProgressing, v1alpha1.ReasonRouteNotAccepted) {
			m.event(corev1.EventTypeWarning, EventRouteNotAccepted, "%s", m.routeHeld)
		}
	}
	m.wakeAt(m.now.Add(m.pol.interval))
	return true
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

// startRollout makes the spec's revision the candidate, on the color that is not stable.
func (m *machine) startRollout() {
	st := m.st
	if c := st.Candidate; c != nil && m.inProgress() {
		m.record(c, v1alpha1.OutcomeSuperseded, fmt.Sprintf("superseded by revision %s", m.obs.Revision))
		m.event(corev1.EventTypeNormal, EventSuperseded, "rollout of %s superseded by %s; all traffic back on %s", c.Revision, m.obs.Revision, st.Stable.Color)
	}
	st.Candidate = &v1alpha1.ColorStatus{Color: st.Stable.Color.Other(), Revision: m.obs.Revision, Image: m.obs.Image}
	st.Step, st.StepWeight = 0, 0
	st.StepStartedAt = m.timeP(m.now)
	st.Failures = 0
	st.Analysis = nil
	st.InconclusiveSince = nil
	st.RolledBackRevision = ""
	st.ScaleDownAt = nil
	m.event(corev1.EventTypeNormal, EventRolloutStarted, "rolling out %s (%s) on %s over steps %s; stable %s on %s", m.obs.Revision, m.obs.Image, st.Candidate.Color, stepsString(m.pol.steps), st.Stable.Revision, st.Stable.Color)
}

// progress runs a live rollout: ops, pause, analysis, deadlines, then the step rules.
func (m *machine) progress() {
	st := m.st
	c := st.Candidate
	steps := m.pol.steps
	// Steps edited mid-rollout never move the weight backwards: the candidate holds its step's
	// weight and goes on to the first step above it (see heldWeight).
	if st.Step >= 1 {
		st.StepWeight = m.heldWeight()
		st.Step = int32(max(m.nextStepIndex(), 1))
	}
	m.planStable()
	m.candidateHas = true
	c.ReadyReplicas = m.readyOf(c.Color, c.Revision)
	c.Warm = m.warmOf(c.Color, c.Revision)
	m.trackUnready()
	next := m.nextStepWeight() // the weight the candidate gets next; 100 means promotion
	m.planCandidate(next)

	if m.obs.Operation == OpAbort {
		m.rollback(v1alpha1.OutcomeAborted, fmt.Sprintf("aborted at step %d/%d (candidate weight %d%%)", st.Step, len(steps), st.Weights.Candidate))
		return
	}
	// A candidate that holds traffic is judged also while a person holds the rollout (paused,
	// awaiting promotion), as Argo Rollouts' background analysis does: a failure beyond the
	// failure limit rolls it back, paused or not.
	awaiting := m.prevPhase == v1alpha1.PhaseAwaitingPromotion
	if st.Step >= 1 && m.obs.Measurement != nil {
		held := ""
		switch {
		case m.ms.Spec.Paused:
			held = " while paused"
		case awaiting:
			held = " while awaiting promotion"
		}
		if m.judge(*m.obs.Measurement, held) {
			return
		}
	}
	if m.ms.Spec.Paused {
		if m.prevPhase != v1alpha1.PhasePaused {
			m.event(corev1.EventTypeNormal, EventPaused, "rollout of %s paused at step %d/%d (candidate weight %d%%)", c.Revision, st.Step, len(steps), m.candidateWeight())
		}
		m.keepOp = m.obs.Operation == OpPromote || m.obs.Operation == OpPromoteFull
		st.Phase = v1alpha1.PhasePaused
		return
	}
	st.Phase = v1alpha1.PhaseProgressing
	if m.prevPhase == v1alpha1.PhasePaused {
		st.StepStartedAt = m.timeP(m.now)
		m.event(corev1.EventTypeNormal, EventResumed, "rollout of %s resumed at step %d/%d; step timer restarted", c.Revision, st.Step, len(steps))
	}
	if st.Step >= 1 && st.InconclusiveSince != nil && m.pol.inconclusiveDeadline > 0 && !awaiting {
		at := st.InconclusiveSince.Add(m.pol.inconclusiveDeadline)
		if !m.now.Before(at) {
			m.rollback(v1alpha1.OutcomeRolledBack, fmt.Sprintf("analysis inconclusive for %s (deadline %s): %s", m.now.Sub(st.InconclusiveSince.Time), m.pol.inconclusiveDeadline, firstMessage(st.Analysis, v1alpha1.VerdictInconclusive)))
			return
		}
		m.wakeAt(at)
	}
	if u := c.UnreadySince; u != nil {
		at := u.Add(m.pol.progressDeadline)
		if !m.now.Before(at) {
			w := m.candidateWeight()
			m.rollback(v1alpha1.OutcomeRolledBack, fmt.Sprintf("%s: candidate %s had %d/%d Ready replicas for its %d%% step since %s (%s)", v1alpha1.ReasonProgressDeadline, c.Revision, c.ReadyReplicas, need(m.total, w), w, u.UTC().Format(time.RFC3339), m.pol.progressDeadline))
			return
		}
		m.wakeAt(at)
		m.wakeAt(m.now.Add(WarmupPollInterval))
	}
	if st.Step >= 1 && st.InconclusiveSince != nil && !awaiting {
		if at := st.InconclusiveSince.Add(m.pol.inconclusiveStall); m.now.Before(at) {
			m.wakeAt(at)
		}
	}

	switch m.obs.Operation {
	case OpPromoteFull:
		m.planCandidate(100)
		if m.routeHolds() {
			m.keepOp = true
			return
		}
		if m.readyFor(100) {
			m.promote("promoted by request (PromoteFull)")
		} else {
			m.keepOp = true
			m.wakeAt(m.now.Add(WarmupPollInterval))
		}
		return
	case OpPromote:
		if m.readyFor(next) {
			m.advance(next, "by request (Promote)")
		} else {
			m.keepOp = true
			m.wakeAt(m.now.Add(WarmupPollInterval))
		}
		return
	}

	if awaiting {
		// autoPromote turned on promotes on a passing measurement taken after the change (a
		// measurement job carries the spec's generation: one started before is dropped).
		if m.pol.autoPromote && m.passedNow() && m.readyFor(next) && !m.routeHolds() {
			m.promote("promoted: autoPromote enabled while awaiting promotion, and a measurement taken since passed")
			return
		}
		if m.pol.autoPromote {
			m.wakeAt(m.now.Add(m.pol.interval))
		}
		st.Phase = v1alpha1.PhaseAwaitingPromotion
		return
	}

	started := st.StepStartedAt.Time
	if st.Step == 0 {
		if m.readyFor(next) {
			m.advance(next, fmt.Sprintf("candidate %d/%d Ready and warm", c.ReadyReplicas, need(m.total, next)))
			return
		}
		deadline := started.Add(m.pol.progressDeadline)
		if !m.now.Before(deadline) {
			m.rollback(v1alpha1.OutcomeRolledBack, fmt.Sprintf("%s: candidate %s had %d/%d Ready replicas (warm: %t) after %s", v1alpha1.ReasonProgressDeadline, c.Revision, c.ReadyReplicas, need(m.total, next), c.Warm, m.pol.progressDeadline))
			return
		}
		m.wakeAt(deadline)
		m.wakeAt(m.now.Add(WarmupPollInterval))
		return
	}

	stepEnd := started.Add(m.pol.stepDuration)
	if m.now.Before(stepEnd) {
		m.wakeAt(stepEnd)
		return
	}
	if !m.measuredPassInStep() {
		return // the next measurement is the wake-up; a Fail or Inconclusive holds
	}
	if !m.readyFor(next) {
		deadline := stepEnd.Add(m.pol.progressDeadline)
		if !m.now.Before(deadline) {
			m.rollback(v1alpha1.OutcomeRolledBack, fmt.Sprintf("%s: candidate %s had %d/%d Ready replicas (warm: %t) for weight %d%% after %s", v1alpha1.ReasonProgressDeadline, c.Revision, c.ReadyReplicas, need(m.total, next), c.Warm, next, m.pol.progressDeadline))
			return
		}
		m.wakeAt(deadline)
		m.wakeAt(m.now.Add(WarmupPollInterval))
		return
	}
	m.advance(next, fmt.Sprintf("analysis passed over %s", m.pol.stepDuration))
}

// measuredPassInStep: the last measurement was taken in the current step and passed (a
// measurement without results, when no metric is configured, passes). A measurement taken at
// the step's start is the one that advanced to it, so it belongs to the previous step.
func (m *machine) measuredPassInStep() bool {
	st := m.st
	if st.LastMeasuredAt == nil || st.StepStartedAt == nil || !st.LastMeasuredAt.After(st.StepStartedAt.Time) {
		return false
	}
	v, _ := verdictOf(st.Analysis)
	return v == v1alpha1.VerdictPass
}

// passedNow: this pass brought a measurement, and it passed.
func (m *machine) passedNow() bool {
	if m.obs.Measurement == nil {
		return false
	}
	v, _ := verdictOf(m.obs.Measurement.Results)
	return v == v1alpha1.VerdictPass
}

// judge records a measurement; it returns true when it rolled the rollout back. held says
// how a person holds the rollout (" while paused"), for the rollback's reason.
func (m *machine) judge(meas Measurement, held string) bool {
	st := m.st
	at := meas.At
	if at.IsZero() {
		at = m.now
	}
	st.LastMeasuredAt = m.timeP(at)
	st.Analysis = append([]v1alpha1.MetricResult(nil), meas.Results...)
	v, r := verdictOf(meas.Results)
	switch v {
	case v1alpha1.VerdictFail:
		st.Failures++
		st.InconclusiveSince = nil
		reason := describe(r)
		if st.Failures > m.pol.failureLimit {
			m.rollback(v1alpha1.OutcomeRolledBack, fmt.Sprintf("analysis failed %d time(s)%s, limit %d: %s", st.Failures, held, m.pol.failureLimit, reason))
			return true
		}
		m.event(corev1.EventTypeWarning, EventAnalysisFailed, "measurement %d of %d tolerated failed: %s", st.Failures, m.pol.failureLimit, reason)
	case v1alpha1.VerdictInconclusive:
		if st.InconclusiveSince == nil {
			st.InconclusiveSince = m.timeP(m.now)
			m.event(corev1.EventTypeNormal, EventAnalysisInconclusive, "holding step %d: %s", st.Step, describe(r))
		}
	default:
		st.InconclusiveSince = nil
	}
	return false
}

// advance gives the candidate the weight of the next step, or promotes it when that is 100.
// A route that a Gateway did not accept holds it (a request is then kept).
func (m *machine) advance(next int32, why string) {
	st := m.st
	if m.routeHolds() {
		m.keepOp = m.obs.Operation == OpPromote || m.obs.Operation == OpPromoteFull
		return
	}
	if next >= 100 {
		if !m.pol.autoPromote && m.obs.Operation != OpPromote && m.obs.Operation != OpPromoteFull {
			if m.prevPhase != v1alpha1.PhaseAwaitingPromotion {
				m.event(corev1.EventTypeNormal, EventAwaitingPromotion, "rollout of %s awaits promotion at step %d/%d (%s); annotate %s=%s to promote", st.Candidate.Revision, st.Step, len(m.pol.steps), why, v1alpha1.AnnotationPromote, st.Candidate.Revision)
			}
			st.Phase = v1alpha1.PhaseAwaitingPromotion
			return
		}
		m.promote(fmt.Sprintf("promoted after step %d/%d: %s", st.Step, len(m.pol.steps), why))
		return
	}
	st.Step = int32(m.nextStepIndex()) + 1
	st.StepWeight = next
	st.StepStartedAt = m.timeP(m.now)
	st.InconclusiveSince = nil
	m.planCandidate(m.nextStepWeight())
	shown, weight := next, fmt.Sprintf("%d%%", next)
	if w := m.servedWeight(); w > next {
		// loadMatching: the route gets the raised weight.
		shown, weight = w, fmt.Sprintf("%d%% (step %d%% raised to a stable pod's load)", w, next)
	}
	m.event(corev1.EventTypeNormal, EventStepAdvanced, "step %d/%d: %s (%s) %s, %s %d%% (%s)", st.Step, len(m.pol.steps), st.Candidate.Color, st.Candidate.Revision, weight, st.Stable.Color, 100-shown, why)
	m.wakeAt(m.now.Add(m.pol.stepDuration))
}

// promote makes the candidate stable; the previous stable color stays warm until ScaleDownAt.
func (m *machine) promote(why string) {
	st := m.st
	c := st.Candidate
	old := st.Stable
	swapped := m.swap(100)
	if swapped {
		why += fmt.Sprintf("; swap mode (the cluster holds %d pods): %s scales down at once", m.obs.Capacity, old.Color)
	}
	m.record(c, v1alpha1.OutcomePromoted, why)
	st.Stable = &v1alpha1.ColorStatus{Color: c.Color, Revision: c.Revision, Image: c.Image, ReadyReplicas: c.ReadyReplicas, Warm: c.Warm}
	st.Candidate = nil
	st.ScaleDownAt = m.timeP(m.now.Add(m.pol.scaleDownDelay))
	if swapped {
		// Swap mode: the GPUs of the old color are needed by the new stable color now.
		st.ScaleDownAt = m.timeP(m.now)
	}
	m.promotedNow = true
	m.candidateHas = false
	m.event(corev1.EventTypeNormal, EventPromoted, "%s (%s) promoted on %s; %s (%s) kept warm until %s", c.Revision, c.Image, c.Color, old.Revision, old.Color, st.ScaleDownAt.UTC().Format(time.RFC3339))
	m.clearRollout()
	m.planStable()
	m.planIdle(old.Color)
	st.Phase = m.steadyPhase()
}

// rollback sends all traffic to stable and keeps the candidate in status, at its replicas until
// ScaleDownAt: the scale-down delay for inspection (Aborted), or RollbackDrain (RolledBack) so
// that requests a Gateway still routes to it while it applies the new weights, and those in
// flight, do not meet terminating pods. A candidate that never had weight (rolled back in its
// warm-up) has nothing to drain and scales to zero at once. holdRolledBack plans it; in swap
// mode the stable color's need for the GPUs wins over both.
func (m *machine) rollback(outcome v1alpha1.Outcome, reason string) {
	st := m.st
	c := st.Candidate
	served := st.Step >= 1 || m.ms.Status.Weights.Candidate > 0
	m.record(c, outcome, reason)
	st.RolledBackRevision = c.Revision
	switch {
	case outcome == v1alpha1.OutcomeAborted:
		st.ScaleDownAt = m.timeP(m.now.Add(m.pol.scaleDownDelay))
		m.event(corev1.EventTypeWarning, EventAborted, "rollout of %s aborted; all traffic on %s (%s), candidate kept until %s", c.Revision, st.Stable.Color, st.Stable.Revision, st.ScaleDownAt.UTC().Format(time.RFC3339))
	case served:
		st.ScaleDownAt = m.timeP(m.now.Add(RollbackDrain))
		m.event(corev1.EventTypeWarning, EventRolledBack, "rollout of %s rolled back; all traffic on %s (%s), candidate drained until %s: %s", c.Revision, st.Stable.Color, st.Stable.Revision, st.ScaleDownAt.UTC().Format(time.RFC3339), reason)
	default:
		st.ScaleDownAt = nil
		m.event(corev1.EventTypeWarning, EventRolledBack, "rollout of %s rolled back; all traffic on %s (%s): %s", c.Revision, st.Stable.Color, st.Stable.Revision, reason)
	}
	m.candidateHas = false
	m.holdRolledBack()
}

// clearRollout resets the per-rollout fields when no rollout is live.
func (m *machine) clearRollout() {
	st := m.st
	st.Step, st.StepWeight = 0, 0
	st.StepStartedAt = nil
	st.InconclusiveSince = nil
	st.Failures = 0
}

// planStable asks the stable color for the whole total: it must be able to take all traffic
// back at any time.
func (m *machine) planStable() {
	s := m.st.Stable
	s.Replicas = m.total
	s.ReadyReplicas = m.readyOf(s.Color, s.Revision)
	m.plans[s.Color] = ColorPlan{Revision: s.Revision, Replicas: m.total}
}

// planCandidate sizes the candidate for the weight it is about to get, and in swap mode
// shrinks the stable color to make room for it.
//
// In swap mode the candidate's pods for the next weight may not fit beside those the stable
// color's current share needs (with few pods the rounding up of both overlaps: a total of 3
// at 75/25 needs 3 stable pods, and 50% needs 2 candidate pods, 5 in a cluster of 4). Then
// the candidate is sized for what fits (at least what its current weight needs), so that its
// analysis goes on and a failure still rolls it back, and the rollout holds at its step,
// reported Stalled (NoRoomForCandidate), instead of waiting forever on a Pending pod.
func (m *machine) planCandidate(weight int32) {
	c := m.st.Candidate
	if m.stableServesNothing() {
		weight = 100 // it is to carry everything the dead stable color cannot
	}
	c.Replicas = m.candidateNeed(weight)
	if m.swap(weight) {
		if room := m.obs.Capacity - m.stableShare(); room < c.Replicas {
			cw := m.candidateWeight()
			m.noRoom = fmt.Sprintf("no room for step %d of %s: %d%% needs %d candidate pods beside the %d that the stable color's %d%% needs, and the cluster holds %d of this ModelServer's pods; it holds at %d%% (analysis goes on; a failure rolls back) until GPUs are freed, spec.replicas is lowered or the steps fit (promote-full swaps the colors now)",
				m.st.Step+1, c.Revision, weight, c.Replicas, m.stableShare(), 100-cw, m.obs.Capacity, cw)
			c.Replicas = max(room, need(m.total, cw))
		}
		m.planStableSwap(weight)
	} else {
		m.planStable()
	}
	m.plans[c.Color] = ColorPlan{Revision: c.Revision, Replicas: c.Replicas}
}

// swap reports whether the stable color at full size and the candidate sized for weight do
// not fit the cluster together (swap mode).
func (m *machine) swap(weight int32) bool {
	return m.obs.Capacity > 0 && m.total+need(m.total, weight) > m.obs.Capacity
}

// stableShare is what the stable color needs for the traffic it carries now.
func (m *machine) stableShare() int32 {
	return need(m.total, 100-m.candidateWeight())
}

// candidateNeed is how many Ready candidate pods the weight needs. In swap mode the promotion
// needs only what fits beside the stable color's current share: the rest comes up on the new
// stable color once the old one scales down.
func (m *machine) candidateNeed(weight int32) int32 {
	n := need(m.total, weight)
	if weight == 100 && m.swap(weight) {
		n = max(1, min(n, m.obs.Capacity-m.stableShare()))
	}
	return n
}

// planStableSwap shrinks the stable color in swap mode to what fits beside the candidate, but
// never below what its current traffic share needs.
func (m *machine) planStableSwap(next int32) {
	s := m.st.Stable
	n := min(m.total, max(m.stableShare(), m.obs.Capacity-m.candidateNeed(next)))
	s.Replicas = n
	m.plans[s.Color] = ColorPlan{Revision: s.Revision, Replicas: n}
}

// planIdle plans the color that serves no traffic: kept at its replicas until ScaleDownAt
// (instant rollback after a promotion, inspection after an abort), else scaled to zero. It
// returns the planned replicas.
func (m *machine) planIdle(color v1alpha1.Color) int32 {
	delete(m.plans, color)
	o, ok := m.obs.Colors[color]
	if sd := m.st.ScaleDownAt; sd != nil {
		if m.now.Before(sd.Time) {
			if ok && o.Exists {
				m.plans[color] = ColorPlan{Revision: o.Revision, Replicas: o.Replicas}
				m.wakeAt(sd.Time)
				return o.Replicas
			}
			m.wakeAt(sd.Time)
			return 0
		}
		m.st.ScaleDownAt = nil
	}
	if ok && o.Exists {
		m.plans[color] = ColorPlan{Revision: o.Revision, Replicas: 0}
	}
	return 0
}

// colorObs returns the observation of a color when its Deployment runs revision rev.
func (m *machine) colorObs(color v1alpha1.Color, rev string) (ColorObservation, bool) {
	o, ok := m.obs.Colors[color]
	if !ok || !o.Exists || o.Revision != rev {
		return ColorObservation{}, false
	}
	return o, true
}

// readyOf counts the Ready pods of revision rev on a color, conservatively: while the
// Deployment still replaces pods of another template (UpdatedReplicas < Replicas), those old
// pods may be the Ready ones, so they are subtracted.
func (m *machine) readyOf(color v1alpha1.Color, rev string) int32 {
	o, ok := m.colorObs(color, rev)
	if !ok {
		return 0
	}
	if o.Stale {
		return m.lastReady(color, rev)
	}
	old := max(o.Replicas-o.UpdatedReplicas, 0)
	return min(max(o.ReadyReplicas-old, 0), o.UpdatedReplicas)
}

// lastReady is the Ready count the last pass recorded for a color running rev (0 if none).
func (m *machine) lastReady(color v1alpha1.Color, rev string) int32 {
	for _, c := range []*v1alpha1.ColorStatus{m.ms.Status.Stable, m.ms.Status.Candidate} {
		if c != nil && c.Color == color && c.Revision == rev {
			return c.ReadyReplicas
		}
	}
	return 0
}

// servingReady is how many Ready pods a color's Service spreads its traffic over, for the
// weight cap: all the Deployment's Ready pods (unlike readyOf, pods still being replaced serve
// too), or the last pass's count while the Deployment's status is stale.
func (m *machine) servingReady(color v1alpha1.Color, rev string) int32 {
	o, ok := m.colorObs(color, rev)
	switch {
	case !ok:
		return 0
	case o.Stale:
		return m.lastReady(color, rev)
	}
	return o.ReadyReplicas
}

func (m *machine) availableOf(color v1alpha1.Color, rev string) int32 {
	o, ok := m.colorObs(color, rev)
	if !ok {
		return 0
	}
	old := max(o.Replicas-o.UpdatedReplicas, 0)
	return min(max(o.AvailableReplicas-old, 0), o.UpdatedReplicas)
}

func (m *machine) warmOf(color v1alpha1.Color, rev string) bool {
	o, ok := m.colorObs(color, rev)
	return ok && o.Warm
}

// stableCounts are the stable color's Ready and Available pods of the stable revision.
func (m *machine) stableCounts() (ready, avail int32) {
	s := m.st.Stable
	return m.readyOf(s.Color, s.Revision), m.availableOf(s.Color, s.Revision)
}

// readyFor: the candidate has enough Ready, warm pods of its revision to take weight percent.
func (m *machine) readyFor(weight int32) bool {
	c := m.st.Candidate
	return c.Warm && c.ReadyReplicas >= m.candidateNeed(weight)
}

// candidateWeight is the weight the candidate holds at its current step.
func (m *machine) candidateWeight() int32 {
	if !m.candidateHas || m.st.Candidate == nil || m.st.Step < 1 {
		return 0
	}
	return m.heldWeight()
}

// heldWeight is the weight of the step the candidate holds: status.stepWeight, or for a status
// written before that field, spec.rollout.steps[step-1] (the last step before 100 when the
// steps are shorter now; the route's last weight when only 100 is left). 0 before the first
// step.
func (m *machine) heldWeight() int32 {
	st, steps := m.st, m.pol.steps
	switch {
	case st.Step < 1:
		return 0
	case st.StepWeight > 0:
		return st.StepWeight
	}
	if len(steps) == 1 {
		return min(m.ms.Status.Weights.Candidate, 99)
	}
	return steps[min(int(st.Step), len(steps)-1)-1]
}

// nextStepIndex is the index in spec.rollout.steps of the first weight above the held one (the
// step the rollout goes to next; the last one, 100, is the promotion).
func (m *machine) nextStepIndex() int {
	h := m.heldWeight()
	for i, s := range m.pol.steps {
		if s > h {
			return i
		}
	}
	return len(m.pol.steps) - 1
}

// nextStepWeight is the weight the candidate gets next; 100 means promotion.
func (m *machine) nextStepWeight() int32 { return m.pol.steps[m.nextStepIndex()] }

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

// decision finishes the pass: weights, conditions, requeue.
func (m *machine) decision() Decision {
	st := m.st
	cw := m.servedWeight()
	st.Weights = v1alpha1.Weights{Stable: 100 - cw, Candidate: cw}
	weights := map[v1alpha1.Color]int32{st.Stable.Color: 100 - cw, st.Stable.Color.Other(): cw}

	if judgedPhase(st.Phase) && st.Step >= 1 && m.superseding == "" {
		if t, ok := nextMeasureAt(st, m.pol); ok {
			m.wakeAt(maxTime(t, m.now.Add(time.Second)))
		} else if st.Candidate != nil && st.Candidate.SizedSince == nil {
			// The candidate is still growing to its planned size: look again soon.
			m.wakeAt(m.now.Add(WarmupPollInterval))
		}
	}
	ready, avail := m.stableCounts()
	f := facts{
		generation:      m.ms.Generation,
		specRevision:    m.obs.Revision,
		total:           m.total,
		stableReady:     ready,
		stableAvailable: avail,
		wasServing:      m.wasServing(),
		heldReason:      m.heldReason,
		heldMessage:     m.heldMessage,
		routeHeld:       m.routeHeld,
		superseding:     m.superseding,
		stableDead:      m.candidateHas && m.stableServesNothing(),
		stall:           m.inconclusiveStall(),
		stallReason:     v1alpha1.ReasonAnalysisInconclusive,
	}
	if m.noRoom != "" && st.Phase == v1alpha1.PhaseProgressing && m.candidateHas {
		f.stall, f.stallReason = m.noRoom, v1alpha1.ReasonNoRoomForCandidate
	}
	if c := st.Candidate; c != nil && c.UnreadySince != nil {
		f.unreadyDeadline = c.UnreadySince.Add(m.pol.progressDeadline)
	}
	if f.stall != "" && !hasReason(m.ms.Status, v1alpha1.ConditionStalled, f.stallReason) {
		ev := EventAnalysisStalled
		if f.stallReason == v1alpha1.ReasonNoRoomForCandidate {
			ev = EventNoRoomForCandidate
		}
		m.event(corev1.EventTypeWarning, ev, "%s", f.stall)
	}
	setReadyCondition(st, f)
	setReconcilingCondition(st, f)
	setStalledCondition(st, f)
	setProgressingCondition(st, f)
	setDegradedCondition(st, f)

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
		Events:        m.events,
		RequeueAfter:  requeue,
		KeepOperation: m.keepOp,
	}
}

// inconclusiveStall explains a live rollout that has held on inconclusive analysis for
// spec.rollout.inconclusiveStall ("" otherwise): the metric's message, a hint at the cause, and what
// will happen.
func (m *machine) inconclusiveStall() string {
	st := m.st
	if st.Phase != v1alpha1.PhaseProgressing || st.Step < 1 || st.InconclusiveSince == nil {
		return ""
	}
	held := m.now.Sub(st.InconclusiveSince.Time)
	if held < m.pol.inconclusiveStall {
		return ""
	}
	msg := firstMessage(st.Analysis, v1alpha1.VerdictInconclusive)
	then := "it will neither promote nor roll back by itself: fix the metrics, promote, or abort (spec.rollout.inconclusiveDeadline rolls back after a deadline)"
	if m.pol.inconclusiveDeadline > 0 {
		then = fmt.Sprintf("spec.rollout.inconclusiveDeadline rolls it back at %s", st.InconclusiveSince.Add(m.pol.inconclusiveDeadline).UTC().Format(time.RFC3339))
	}
	// The message names the instant, not the time held, so that it does not change every pass.
	return fmt.Sprintf("analysis of %s inconclusive since %s (over %s) at step %d: %s (%s); %s", st.Candidate.Revision, st.InconclusiveSince.UTC().Format(time.RFC3339), m.pol.inconclusiveStall, st.Step, msg, inconclusiveHint(msg), then)
}

// inconclusiveHint guesses the cause of an inconclusive result from its message.
func inconclusiveHint(msg string) string {
	l := strings.ToLower(msg)
	switch {
	case strings.Contains(l, "too few samples"):
		return "the candidate receives too little traffic at this weight for analysis.minSamples"
	case strings.Contains(l, "no data"), strings.Contains(l, "no samples"), strings.Contains(l, "empty"), strings.Contains(l, "nan"):
		return "no samples in the window: the scrape interval may exceed the window, or the pods are not scraped"
	case strings.Contains(l, "stable"):
		return "the stable color has no value to compare with"
	case strings.Contains(l, "unreachable"), strings.Contains(l, "connection"), strings.Contains(l, "timeout"), strings.Contains(l, "deadline"):
		return "Prometheus did not answer: check the analysis' Prometheus address"
	case strings.Contains(l, "no measurement"):
		return "no measurement was taken"
	default:
		return "the metrics gave no verdict"
	}
}

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
