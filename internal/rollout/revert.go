package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Instant rollback: the spec back on the revision the idle color still runs warm.

// revertsToWarm: the spec asks for the revision that the idle color still runs within its
// keep window (status.rollout.keepWarmUntil, set by a promotion), with Ready pods, and that
// revision's last outcome was a promotion, or it has none (the first revision): it served all
// traffic before.
// An aborted or superseded revision kept on the idle color is rolled out step by step. Moving back to it is an instant
// rollback: no steps, no analysis, no pod restarted or created for it.
func (m *machine) revertsToWarm() bool {
	st := m.st
	if m.inProgress() || st.Candidate != nil || !ahead(st.Rollout.KeepWarmUntil, m.now) {
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
// drainWeight) and its pods for the scale-down delay, for inspection, as after an abort
// (status.rollout.inspectUntil), and at least RollbackDrain after its weight last went down
// (status.rollout.drainUntil). The history records the abandoned revision as rolled back.
func (m *machine) revert() {
	st := m.st
	old := *st.Stable
	last := m.ms.Status.Weights.Stable // what the abandoned revision carried before this pass
	// The spec's template is the revision's, so its image is the revision's too.
	st.Stable = &v1alpha1.ColorStatus{Color: old.Color.Other(), Revision: m.obs.Revision, Image: m.obs.Image}
	st.Rollout.KeepWarmUntil = nil // the warm color serves again
	st.Rollout.InspectUntil = m.timeP(m.now.Add(m.pol.scaleDownDelay))
	st.Rollout.DrainUntil = m.timeP(m.now.Add(RollbackDrain)) // its weight goes down now
	m.record(&old, v1alpha1.OutcomeRolledBack, fmt.Sprintf("rolled back to %s, still warm on %s: all traffic moved at once (no steps, no analysis)", m.obs.Revision, st.Stable.Color))
	m.clearRollout()
	m.planStable()
	st.Candidate = &v1alpha1.ColorStatus{Color: old.Color, Revision: old.Revision, Image: old.Image}
	st.Rollout.RolledBackRevision = old.Revision
	m.drain = m.drainOf(st.Candidate, last)
	m.event(corev1.EventTypeNormal, EventRevertedToWarm, "rolled back to %s on %s, which was still warm: %d%% of the traffic moved at once; %s (%s) on %s keeps %d%% and its pods until %s",
		st.Stable.Revision, st.Stable.Color, 100-m.drain, old.Revision, old.Image, old.Color, m.drain, maxTime(st.Rollout.InspectUntil.Time, st.Rollout.DrainUntil.Time).UTC().Format(time.RFC3339))
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
	if c == nil || m.inProgress() || c.Revision != st.Rollout.RolledBackRevision || m.ms.Status.Weights.Candidate == 0 {
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
	m.holdFor(v1alpha1.ReasonSuperseding, fmt.Sprintf("spec back on %s (%s): %s keeps %d%% until %s's Ready pods carry all traffic", st.Stable.Revision, st.Stable.Color, c.Revision, m.drain, st.Stable.Color))
	m.wakeAt(m.now.Add(WarmupPollInterval))
	st.Phase = v1alpha1.PhaseProgressing
}

// settleReverted ends an instant rollback: no candidate, the abandoned color kept at its pods
// until status.rollout.inspectUntil and drainUntil (see planIdle).
func (m *machine) settleReverted() {
	st := m.st
	st.Candidate = nil
	st.Rollout.RolledBackRevision = ""
	m.planStable()
	m.planIdle(st.Stable.Color.Other())
	st.Phase = m.steadyPhase()
}
