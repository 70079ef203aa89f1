package rollout

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Drains: a candidate that leaves (rolled back, aborted or superseded) gives its weight back only
// as fast as the stable color's Ready pods carry it, and keeps its pods while the route drains.

// drainSuperseded keeps a candidate that a spec change superseded serving the part of its
// weight that the stable color's Ready pods cannot carry yet (in swap mode the stable color was
// shrunk to its share), sized for just that, while the stable color grows back to its total.
// Once its weight is 0 its pods stay for RollbackDrain (status.rollout.drainUntil), as a
// rolled-back candidate's do: the Gateway applies the route after the pass that wrote it, and
// requests in flight finish, before the new revision replaces the pods or the color scales to
// zero. It
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
	st.Rollout.InconclusiveSince = nil // the superseded rollout's analysis is over
	if m.drain > 0 {
		c.Replicas = need(m.total, m.drain)
		m.plans[c.Color] = ColorPlan{Revision: c.Revision, Replicas: c.Replicas}
		m.holdFor(v1alpha1.ReasonSuperseding, fmt.Sprintf("rollout of %s superseded by %s: %s keeps %d%% until %s's Ready pods carry all traffic", c.Revision, m.obs.Revision, c.Revision, m.drain, st.Stable.Color))
		m.wakeAt(m.now.Add(WarmupPollInterval))
	} else {
		m.holdFor(v1alpha1.ReasonSuperseding, fmt.Sprintf("rollout of %s superseded by %s: all traffic on %s; %s's pods drain until %s", c.Revision, m.obs.Revision, st.Stable.Color, c.Revision, st.Rollout.DrainUntil.UTC().Format(time.RFC3339)))
	}
	m.planStable()
	st.Phase = v1alpha1.PhaseProgressing
	if !hasReason(m.ms.Status, v1alpha1.ConditionReconciling, v1alpha1.ReasonSuperseding) {
		m.event(corev1.EventTypeNormal, EventSuperseded, "%s", m.held.message)
	}
	m.keepOp = m.obs.Operation == OpPromote || m.obs.Operation == OpPromoteFull
	return true
}

// rolledBackDraining: the candidate was rolled back or aborted and still drains: weight on it,
// or its status.rollout.drainUntil not over. A new revision then supersedes it as it would a
// live candidate instead of taking its color at once: the Gateway applies the route after the
// pass that wrote it, and the pods still get requests meanwhile. A candidate that is only kept
// for inspection (status.rollout.inspectUntil) gives its color up at once.
func (m *machine) rolledBackDraining() bool {
	if m.inProgress() {
		return false
	}
	return m.ms.Status.Weights.Candidate > 0 || ahead(m.st.Rollout.DrainUntil, m.now)
}

// drainPods keeps a superseded candidate whose weight is 0 at its pods until
// status.rollout.drainUntil, set to RollbackDrain from the pass its weight went to 0, and
// reports whether it does.
func (m *machine) drainPods(c *v1alpha1.ColorStatus) bool {
	ro := &m.st.Rollout
	if m.ms.Status.Weights.Candidate > 0 {
		m.drainUntil(m.now.Add(RollbackDrain))
	}
	du := ro.DrainUntil
	if du == nil {
		return false
	}
	if !m.now.Before(du.Time) {
		ro.DrainUntil = nil
		return false
	}
	o, ok := m.colorObs(c.Color, c.Revision)
	if !ok {
		ro.DrainUntil = nil
		return false
	}
	// Never more than the total (no double GPUs), should the total have shrunk meanwhile.
	c.Replicas = min(o.Replicas, max(m.total, 1))
	m.plans[c.Color] = ColorPlan{Revision: c.Revision, Replicas: c.Replicas}
	m.wakeAt(du.Time)
	return true
}

// holdRolledBack: the spec still asks for a revision that was rolled back or aborted.
func (m *machine) holdRolledBack() {
	st := m.st
	if m.obs.Operation != OpNone {
		m.event(corev1.EventTypeNormal, EventOperationIgnored, "%s ignored: revision %s was already rolled back; change the spec to retry", m.obs.Operation, st.Rollout.RolledBackRevision)
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
	reason, msg := v1alpha1.ReasonRolledBack, "revision "+st.Rollout.RolledBackRevision+" was rolled back"
	for _, h := range st.History {
		if h.Revision == st.Rollout.RolledBackRevision && (h.Outcome == v1alpha1.OutcomeRolledBack || h.Outcome == v1alpha1.OutcomeAborted) {
			if h.Outcome == v1alpha1.OutcomeAborted {
				reason = v1alpha1.ReasonAborted
			}
			msg = fmt.Sprintf("revision %s %s: %s", h.Revision, strings.ToLower(string(h.Outcome)), h.Reason)
			break
		}
	}
	m.holdFor(reason, msg)
	st.Phase = v1alpha1.PhaseRolledBack
}

// drainUntil keeps the idle color's pods at least until t (status.rollout.drainUntil, see
// planIdle): a candidate whose weight goes down this pass (rolled back, aborted, superseded, or
// abandoned by an instant rollback) keeps its pods for RollbackDrain after it, while the
// Gateway applies the change and requests in flight finish, also when drainWeight held weight
// on it past its first drainUntil.
func (m *machine) drainUntil(t time.Time) {
	if du := m.st.Rollout.DrainUntil; du == nil || du.Time.Before(t) {
		m.st.Rollout.DrainUntil = m.timeP(t)
	}
}

// drainWeight is the weight a rolled-back or aborted candidate keeps this pass: the part of
// its last weight that the stable color's Ready pods cannot carry yet and its own Ready pods
// can. It only shrinks, and is 0 once the stable color carries everything, or at a total of 0.
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
	if m.total <= 0 || m.stableGrowthRefused() {
		// Scaled to zero, the stable color is asked for no pod: none is coming to wait for.
		return 0
	}
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

// stableGrowthRefused: the stable color's Deployment has asked for fewer pods than the total
// for DrainRefusedAfter (status.stable.shortSince): its scale-up was refused (a webhook that is
// down, a quota), so no pod is on its way for a drain to wait for. The drain then ends and the
// stable color's Ready pods take all traffic: a risk-reducing action never waits on a failure
// of its own.
func (m *machine) stableGrowthRefused() bool {
	s := m.st.Stable
	o, ok := m.colorObs(s.Color, s.Revision)
	return ok && o.Replicas < m.total && s.ShortSince != nil && !m.now.Before(s.ShortSince.Add(DrainRefusedAfter))
}
