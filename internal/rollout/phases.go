package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The phases of a ModelServer: the first revision, steady state, a rollout that starts,
// progresses step by step, and is promoted or rolled back.

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
	return c != nil && c.Revision != m.st.Rollout.RolledBackRevision
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
	st.Rollout.RolledBackRevision = ""
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

// startRollout makes the spec's revision the candidate, on the color that is not stable.
func (m *machine) startRollout() {
	st := m.st
	if c := st.Candidate; c != nil && m.inProgress() {
		m.record(c, v1alpha1.OutcomeSuperseded, fmt.Sprintf("superseded by revision %s", m.obs.Revision))
		m.event(corev1.EventTypeNormal, EventSuperseded, "rollout of %s superseded by %s; all traffic back on %s", c.Revision, m.obs.Revision, st.Stable.Color)
	}
	st.Candidate = &v1alpha1.ColorStatus{Color: st.Stable.Color.Other(), Revision: m.obs.Revision, Image: m.obs.Image}
	st.Rollout.Step, st.Rollout.StepWeight = 0, 0
	st.Rollout.StepStartedAt = m.timeP(m.now)
	st.Rollout.Failures = 0
	st.Rollout.Analysis = nil
	st.Rollout.Gates = nil
	st.Rollout.Shadow = nil
	st.Rollout.InconclusiveSince = nil
	st.Rollout.RolledBackRevision = ""
	st.Rollout.KeepWarmUntil, st.Rollout.InspectUntil, st.Rollout.DrainUntil = nil, nil, nil
	m.event(corev1.EventTypeNormal, EventRolloutStarted, "rolling out %s (%s) on %s over steps %s; stable %s on %s", m.obs.Revision, m.obs.Image, st.Candidate.Color, stepsString(m.pol.steps), st.Stable.Revision, st.Stable.Color)
}

// progress runs a live rollout: ops, pause, analysis, deadlines, then the step rules.
func (m *machine) progress() {
	st := m.st
	c := st.Candidate
	steps := m.pol.steps
	if st.Rollout.StepStartedAt == nil {
		// A live candidate without the rollout's memory: a status written before it moved under
		// status.rollout, or edited by hand. Its step (0 then: the warm-up) starts again now.
		st.Rollout.StepStartedAt = m.timeP(m.now)
	}
	// Steps edited mid-rollout never move the weight backwards: the candidate holds its step's
	// weight and goes on to the first step above it (see heldWeight).
	if st.Rollout.Step >= 1 {
		st.Rollout.StepWeight = m.heldWeight()
		st.Rollout.Step = int32(max(m.nextStepIndex(), 1))
	}
	m.planStable()
	c.ReadyReplicas = m.readyOf(c.Color, c.Revision)
	c.Warm = m.warmOf(c.Color, c.Revision)
	m.recordGates()
	m.trackUnready()
	next := m.nextStepWeight() // the weight the candidate gets next; 100 means promotion
	m.planCandidate(next)
	if m.shadowDue() {
		m.planShadow()
	}

	if m.obs.Operation == OpAbort {
		m.rollback(v1alpha1.OutcomeAborted, fmt.Sprintf("aborted at step %d/%d (candidate weight %d%%)", st.Rollout.Step, len(steps), st.Weights.Candidate))
		return
	}
	// A candidate that holds traffic is judged also while a person holds the rollout (paused,
	// awaiting promotion), as Argo Rollouts' background analysis does: a failure beyond the
	// failure limit rolls it back, paused or not.
	awaiting := m.prevPhase == v1alpha1.PhaseAwaitingPromotion
	if judging(st) && m.obs.Measurement != nil {
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
			m.event(corev1.EventTypeNormal, EventPaused, "rollout of %s paused at step %d/%d (candidate weight %d%%)", c.Revision, st.Rollout.Step, len(steps), m.candidateWeight())
		}
		m.keepOp = m.obs.Operation == OpPromote || m.obs.Operation == OpPromoteFull
		st.Phase = v1alpha1.PhasePaused
		return
	}
	st.Phase = v1alpha1.PhaseProgressing
	if m.prevPhase == v1alpha1.PhasePaused {
		st.Rollout.StepStartedAt = m.timeP(m.now)
		m.event(corev1.EventTypeNormal, EventResumed, "rollout of %s resumed at step %d/%d; step timer restarted", c.Revision, st.Rollout.Step, len(steps))
	}
	if judging(st) && st.Rollout.InconclusiveSince != nil && m.pol.inconclusiveRollback > 0 && !awaiting {
		at := st.Rollout.InconclusiveSince.Add(m.pol.inconclusiveRollback)
		if !m.now.Before(at) {
			m.rollback(v1alpha1.OutcomeRolledBack, fmt.Sprintf("analysis inconclusive for %s (deadline %s): %s", m.now.Sub(st.Rollout.InconclusiveSince.Time), m.pol.inconclusiveRollback, firstMessage(st.Rollout.Analysis, v1alpha1.VerdictInconclusive)))
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
	if judging(st) && st.Rollout.InconclusiveSince != nil && !awaiting {
		if at := st.Rollout.InconclusiveSince.Add(m.pol.inconclusiveReport); m.now.Before(at) {
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

	started := st.Rollout.StepStartedAt.Time
	if st.Rollout.Step == 0 {
		if m.shadowHolds(started) {
			return
		}
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
		if m.pol.minStepDuration > 0 {
			// spec.rollout.minStepDuration: a confident pass ends the step early.
			if early := started.Add(m.pol.minStepDuration); m.now.Before(early) {
				m.wakeAt(early)
			} else if m.confidentPassInStep() && m.readyFor(next) {
				m.advance(next, fmt.Sprintf("analysis passed with confidence after %s (minStepDuration %s, stepDuration %s)", m.now.Sub(started).Round(time.Second), m.pol.minStepDuration, m.pol.stepDuration))
				return
			}
		}
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

// advance gives the candidate the weight of the next step, or promotes it when that is 100.
// A route that a Gateway did not accept holds it (a request is then kept).
func (m *machine) advance(next int32, why string) {
	st := m.st
	if m.routeHolds() {
		m.keepOp = m.obs.Operation == OpPromote || m.obs.Operation == OpPromoteFull
		return
	}
	if m.obs.Operation == OpNone && m.gatesHold() {
		return // a person's request does not wait for gates
	}
	if next >= 100 {
		if !m.pol.autoPromote && m.obs.Operation != OpPromote && m.obs.Operation != OpPromoteFull {
			if m.prevPhase != v1alpha1.PhaseAwaitingPromotion {
				m.event(corev1.EventTypeNormal, EventAwaitingPromotion, "rollout of %s awaits promotion at step %d/%d (%s); annotate %s=%s to promote", st.Candidate.Revision, st.Rollout.Step, len(m.pol.steps), why, v1alpha1.AnnotationPromote, st.Candidate.Revision)
			}
			st.Phase = v1alpha1.PhaseAwaitingPromotion
			return
		}
		m.promote(fmt.Sprintf("promoted after step %d/%d: %s", st.Rollout.Step, len(m.pol.steps), why))
		return
	}
	st.Rollout.Step = int32(m.nextStepIndex()) + 1
	st.Rollout.StepWeight = next
	st.Rollout.StepStartedAt = m.timeP(m.now)
	st.Rollout.InconclusiveSince = nil
	m.planCandidate(m.nextStepWeight())
	shown, weight := next, fmt.Sprintf("%d%%", next)
	if w := m.servedWeight(); w > next {
		// loadMatching: the route gets the raised weight.
		shown, weight = w, fmt.Sprintf("%d%% (step %d%% raised to a stable pod's load)", w, next)
	}
	m.event(corev1.EventTypeNormal, EventStepAdvanced, "step %d/%d: %s (%s) %s, %s %d%% (%s)", st.Rollout.Step, len(m.pol.steps), st.Candidate.Color, st.Candidate.Revision, weight, st.Stable.Color, 100-shown, why)
	m.wakeAt(m.now.Add(m.pol.stepDuration))
}

// promote makes the candidate stable; the previous stable color stays warm until
// status.rollout.keepWarmUntil.
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
	st.Rollout.KeepWarmUntil = m.timeP(m.now.Add(m.pol.scaleDownDelay))
	st.Rollout.InspectUntil, st.Rollout.DrainUntil = nil, nil
	if swapped {
		// Swap mode: the GPUs of the old color are needed by the new stable color now.
		st.Rollout.KeepWarmUntil = m.timeP(m.now)
	}
	m.promotedNow = true
	m.event(corev1.EventTypeNormal, EventPromoted, "%s (%s) promoted on %s; %s (%s) kept warm until %s", c.Revision, c.Image, c.Color, old.Revision, old.Color, st.Rollout.KeepWarmUntil.UTC().Format(time.RFC3339))
	m.clearRollout()
	m.planStable()
	m.planIdle(old.Color)
	st.Phase = m.steadyPhase()
}

// rollback sends all traffic to stable and keeps the candidate in status, at its replicas for
// the scale-down delay for inspection (Aborted, status.rollout.inspectUntil), or for
// RollbackDrain (RolledBack, status.rollout.drainUntil) so that requests a Gateway still routes
// to it while it applies the new weights, and those in flight, do not meet terminating pods.
// An aborted candidate whose weight goes down drains as well (see holdRolledBack). A candidate that never had weight (rolled back in its
// warm-up) has nothing to drain and scales to zero at once. holdRolledBack plans it; in swap
// mode the stable color's need for the GPUs wins over both.
func (m *machine) rollback(outcome v1alpha1.Outcome, reason string) {
	st := m.st
	c := st.Candidate
	served := st.Rollout.Step >= 1 || m.ms.Status.Weights.Candidate > 0
	m.record(c, outcome, reason)
	st.Rollout.RolledBackRevision = c.Revision
	st.Rollout.Gates = nil
	st.Rollout.KeepWarmUntil, st.Rollout.InspectUntil, st.Rollout.DrainUntil = nil, nil, nil
	switch {
	case outcome == v1alpha1.OutcomeAborted:
		st.Rollout.InspectUntil = m.timeP(m.now.Add(m.pol.scaleDownDelay))
		m.event(corev1.EventTypeWarning, EventAborted, "rollout of %s aborted; all traffic on %s (%s), candidate kept until %s", c.Revision, st.Stable.Color, st.Stable.Revision, st.Rollout.InspectUntil.UTC().Format(time.RFC3339))
	case served:
		st.Rollout.DrainUntil = m.timeP(m.now.Add(RollbackDrain))
		m.event(corev1.EventTypeWarning, EventRolledBack, "rollout of %s rolled back; all traffic on %s (%s), candidate drained until %s: %s", c.Revision, st.Stable.Color, st.Stable.Revision, st.Rollout.DrainUntil.UTC().Format(time.RFC3339), reason)
	default:
		m.event(corev1.EventTypeWarning, EventRolledBack, "rollout of %s rolled back; all traffic on %s (%s): %s", c.Revision, st.Stable.Color, st.Stable.Revision, reason)
	}
	m.holdRolledBack()
}

// clearRollout resets the per-rollout fields when no rollout is live.
func (m *machine) clearRollout() {
	st := m.st
	st.Rollout.Step, st.Rollout.StepWeight = 0, 0
	st.Rollout.StepStartedAt = nil
	st.Rollout.InconclusiveSince = nil
	st.Rollout.Failures = 0
	st.Rollout.Gates = nil
	st.Rollout.Shadow = nil
}
