package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The shadow phase (spec.rollout.shadow): at step 0, once the candidate has Ready, warm pods for
// the mirrored share, the Gateway mirrors that share of the live requests to it while every user
// is answered by the stable color; measurements judge it as at a step; a Fail beyond the failure
// limit rolls it back before any user request reached it, a pass after the shadow's duration
// goes on to the first weighted step.

// Event reasons of the shadow phase.
const (
	// EventShadowStarted: the Gateway was asked to mirror requests to the candidate.
	EventShadowStarted = "ShadowStarted"
	// EventShadowPassed: the shadow phase passed; the weighted steps follow.
	EventShadowPassed = "ShadowPassed"
)

// shadowing reports whether st's live candidate is in its shadow phase: at step 0, mirrored to
// since status.rollout.shadow.startedAt, not passed yet, and not rolled back or aborted.
func shadowing(st *v1alpha1.ModelServerStatus) bool {
	sh, c := st.Rollout.Shadow, st.Candidate
	return st.Rollout.Step == 0 && sh != nil && sh.PassedAt == nil &&
		c != nil && c.Revision != st.Rollout.RolledBackRevision
}

// judging reports whether st's rollout is judged in this phase: at a step, or in the shadow phase.
func judging(st *v1alpha1.ModelServerStatus) bool {
	return st.Rollout.Step >= 1 || shadowing(st)
}

// shadowDue: the live rollout still has a shadow phase to run or finish (asked, and not passed).
func (m *machine) shadowDue() bool {
	sh := m.st.Rollout.Shadow
	return m.pol.shadow != nil && m.st.Rollout.Step == 0 && (sh == nil || sh.PassedAt == nil)
}

// shadowNeed is how many candidate pods carry the mirrored share at no more per pod than the
// stable color's total carries all of it. Not more: pods that carry less than a stable pod
// would make the candidate look faster than it is.
func (m *machine) shadowNeed() int32 { return need(m.total, m.pol.shadow.percent) }

// planShadow sizes the candidate for the mirrored share; the stable color keeps its total (it
// answers every request). Where the cluster cannot hold both, the rollout holds (reported
// Stalled, reason NoRoomForCandidate) with the candidate at what fits.
func (m *machine) planShadow() {
	c := m.st.Candidate
	n := m.shadowNeed()
	if cp := m.obs.Capacity; cp > 0 && m.total+n > cp {
		m.holdFor(v1alpha1.ReasonNoRoomForCandidate, fmt.Sprintf("no room for the shadow phase of %s: mirroring %d%% needs %d candidate pods beside the stable color's %d, and the cluster holds %d of this ModelServer's pods; it holds at step 0 until GPUs are freed, spec.replicas is lowered or spec.rollout.shadow.percent fits",
			c.Revision, m.pol.shadow.percent, n, m.total, cp))
		n = max(cp-m.total, 0)
	}
	c.Replicas = n
	m.planStable()
	m.plans[c.Color] = ColorPlan{Revision: c.Revision, Replicas: n}
}

// readyForShadow: the candidate's Ready, warm pods (and ready endpoints) carry the mirrored share.
func (m *machine) readyForShadow() bool {
	c := m.st.Candidate
	n := m.shadowNeed()
	if c.Replicas < n || !c.Warm || c.ReadyReplicas < n {
		return false
	}
	o, ok := m.colorObs(c.Color, c.Revision)
	return !ok || !o.EndpointsObserved || o.ReadyEndpoints >= n
}

// shadowHolds runs the shadow phase at step 0; it returns true while the phase holds the rollout
// there (false: no shadow phase is due, or it passed in this pass and the first step follows).
// started is when step 0 began, for the progress deadline of a candidate that never warms.
func (m *machine) shadowHolds(started time.Time) bool {
	if !m.shadowDue() {
		return false
	}
	st := m.st
	c := st.Candidate // sized for the mirrored share by progress (planShadow)
	if !shadowing(st) {
		if !m.readyForShadow() {
			deadline := started.Add(m.pol.progressDeadline)
			if !m.now.Before(deadline) {
				m.rollback(v1alpha1.OutcomeRolledBack, fmt.Sprintf("%s: candidate %s had %d/%d Ready replicas (warm: %t) for its shadow phase after %s", v1alpha1.ReasonProgressDeadline, c.Revision, c.ReadyReplicas, m.shadowNeed(), c.Warm, m.pol.progressDeadline))
				return true
			}
			m.wakeAt(deadline)
			m.wakeAt(m.now.Add(WarmupPollInterval))
			return true
		}
		if m.routeHolds() {
			return true
		}
		if why := m.obs.MirrorUnsupported; why != "" {
			m.holdFor(v1alpha1.ReasonMirrorUnsupported, fmt.Sprintf("rollout of %s holds at step 0 before its shadow phase: %s", c.Revision, why))
			m.wakeAt(m.now.Add(m.pol.interval))
			return true
		}
		st.Rollout.Shadow = &v1alpha1.ShadowStatus{StartedAt: *m.timeP(m.now), Percent: m.pol.shadow.percent}
		st.Rollout.StepStartedAt = m.timeP(m.now)
		st.Rollout.InconclusiveSince = nil
		m.event(corev1.EventTypeNormal, EventShadowStarted, "shadow phase of %s on %s: %d%% of the requests mirrored to it for %s (its answers are discarded; users are answered by %s)", c.Revision, c.Color, m.pol.shadow.percent, m.pol.shadow.duration, st.Stable.Color)
		m.wakeAt(m.now.Add(m.pol.shadow.duration))
		return true
	}
	end := st.Rollout.Shadow.StartedAt.Add(m.pol.shadow.duration)
	if m.now.Before(end) {
		m.wakeAt(end)
		return true
	}
	if !m.measuredPassInStep() {
		return true // the next measurement is the wake-up; a Fail or Inconclusive holds
	}
	st.Rollout.Shadow.PassedAt = m.timeP(m.now)
	// Step 0 goes on: the candidate is sized for its first weight from now.
	st.Rollout.StepStartedAt = m.timeP(m.now)
	m.planCandidate(m.nextStepWeight())
	m.event(corev1.EventTypeNormal, EventShadowPassed, "shadow phase of %s passed after %s of %d%% mirrored requests; the weighted steps follow", c.Revision, m.now.Sub(st.Rollout.Shadow.StartedAt.Time).Round(time.Second), st.Rollout.Shadow.Percent)
	return false
}

// mirror is the shadow phase's mirror in this pass (see Decision.Mirror).
func (m *machine) mirror() *Mirror {
	if !m.candidateLive() || !shadowing(m.st) || m.heldFor(v1alpha1.ReasonSuperseding) {
		return nil
	}
	return &Mirror{Color: m.st.Candidate.Color, Percent: m.st.Rollout.Shadow.Percent}
}

// ShadowPending reports whether ms's shadow phase may still start or run in this pass: asked,
// and either the last status' rollout of the spec's revision is at step 0 and has not passed it,
// or a rollout of the spec's revision is about to start. Otherwise whether the Gateway can
// mirror is not needed (the controller does not look).
func ShadowPending(ms *v1alpha1.ModelServer, specRevision string) bool {
	st := &ms.Status
	if ms.Spec.Rollout.Shadow == nil {
		return false
	}
	if c := st.Candidate; c != nil && c.Revision == specRevision {
		return st.Rollout.Step == 0 && (st.Rollout.Shadow == nil || st.Rollout.Shadow.PassedAt == nil)
	}
	return st.Stable == nil || st.Stable.Revision != specRevision
}
