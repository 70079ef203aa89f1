package rollout

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Sizing: how many pods each color runs for the weight it carries now and next, swap mode, and
// when the candidate counts as sized for analysis.

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

// planStable asks the stable color for the whole total: it must be able to take all traffic
// back at any time.
func (m *machine) planStable() {
	s := m.st.Stable
	s.Replicas = m.total
	s.ReadyReplicas = m.readyOf(s.Color, s.Revision)
	m.plans[s.Color] = ColorPlan{Revision: s.Revision, Replicas: m.total}
	m.markShort(s)
}

// markShort keeps status.stable.shortSince: set on the second pass in a row that plans the
// stable color at s.Replicas while its Deployment asks for fewer (on the first the write may
// just not have been seen yet), cleared once it asks for them.
func (m *machine) markShort(s *v1alpha1.ColorStatus) {
	o, ok := m.colorObs(s.Color, s.Revision)
	prev := m.prevStable
	switch {
	case !ok || o.Replicas >= s.Replicas:
		s.ShortSince = nil
	case s.ShortSince == nil && prev != nil && prev.Color == s.Color && prev.Revision == s.Revision && prev.Replicas == s.Replicas:
		s.ShortSince = m.timeP(m.now)
	}
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
			m.holdFor(v1alpha1.ReasonNoRoomForCandidate, fmt.Sprintf("no room for step %d of %s: %d%% needs %d candidate pods beside the %d that the stable color's %d%% needs, and the cluster holds %d of this ModelServer's pods; it holds at %d%% (analysis goes on; a failure rolls back) until GPUs are freed, spec.replicas is lowered or the steps fit (promote-full swaps the colors now)",
				m.st.Rollout.Step+1, c.Revision, weight, c.Replicas, m.stableShare(), 100-cw, m.obs.Capacity, cw))
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
//
// Below 100, where the cluster has room, it is also enough pods to carry the weight at no more
// per pod than the stable color's total carries the rest (parityNeed): 3 of a total of 8 at 25%,
// 8 at 50%, so that parityCap does not hold the weight below the step's. More candidate pods
// also give the analysis more samples per step. Where the cluster holds fewer, what fits
// beside the stable color's total (at least need); parityCap then holds the weight to the
// candidate's share.
func (m *machine) candidateNeed(weight int32) int32 {
	n := need(m.total, weight)
	if weight == 100 && m.swap(weight) {
		n = max(1, min(n, m.obs.Capacity-m.stableShare()))
	}
	if weight < 100 && !m.swap(weight) {
		// Never more than the stable color's total: a step above 50% is then held to 50%
		// (see parityCap) until the promotion.
		p := min(parityNeed(m.total, weight), m.total)
		if m.obs.Capacity > 0 {
			p = min(p, m.obs.Capacity-m.total)
		}
		n = max(n, p)
	}
	return n
}

// parityNeed is the fewest candidate pods that carry weight percent at no more per pod than
// stable pods carry the rest: ceil(stable x weight / (100 - weight)).
func parityNeed(stable, weight int32) int32 {
	if weight >= 100 || stable <= 0 || weight <= 0 {
		return 0
	}
	return int32((int64(stable)*int64(weight) + int64(100-weight) - 1) / int64(100-weight))
}

// planStableSwap shrinks the stable color in swap mode to what fits beside the candidate, but
// never below what its current traffic share needs.
func (m *machine) planStableSwap(next int32) {
	s := m.st.Stable
	n := min(m.total, max(m.stableShare(), m.obs.Capacity-m.candidateNeed(next)))
	s.Replicas = n
	m.plans[s.Color] = ColorPlan{Revision: s.Revision, Replicas: n}
	m.markShort(s)
}

// planIdle plans the color that serves no traffic: kept at its replicas while one of
// status.rollout's keepWarmUntil (instant rollback after a promotion), inspectUntil (after an
// abort or an instant rollback) and drainUntil (after its weight went down) is ahead, else
// scaled to zero. It returns the planned replicas.
func (m *machine) planIdle(color v1alpha1.Color) int32 {
	delete(m.plans, color)
	o, ok := m.obs.Colors[color]
	if until, kept := m.idleKeptUntil(); kept {
		m.wakeAt(until)
		if ok && o.Exists {
			m.plans[color] = ColorPlan{Revision: o.Revision, Replicas: o.Replicas}
			return o.Replicas
		}
		return 0
	}
	if ok && o.Exists {
		m.plans[color] = ColorPlan{Revision: o.Revision, Replicas: 0}
	}
	return 0
}

// idleKeptUntil clears the keep timers of status.rollout that have passed and returns the
// latest of the others: when the idle color scales to zero, false when none is ahead.
func (m *machine) idleKeptUntil() (time.Time, bool) {
	ro := &m.st.Rollout
	var until time.Time
	for _, t := range []**metav1.Time{&ro.KeepWarmUntil, &ro.InspectUntil, &ro.DrainUntil} {
		if *t == nil {
			continue
		}
		if !ahead(*t, m.now) {
			*t = nil
			continue
		}
		until = maxTime(until, (*t).Time)
	}
	return until, !until.IsZero()
}

// PodsFor returns how many pods both colors run for a total replica count: the replicas of the
// plans of a pass of the machine at that total, on obs otherwise. Outside a rollout it is the
// total; during one the candidate is sized for its next weight on top of the stable color's
// total, and after a promotion the previous color is kept warm. The autoscaler is given it as a
// function value (autoscale.Input.PodsFor) to count the pods a total costs; Next is pure, so
// asking it costs no I/O, and each total is computed once.
func PodsFor(ms *v1alpha1.ModelServer, obs Observation, now time.Time) func(int32) int32 {
	memo := map[int32]int32{}
	return func(total int32) int32 {
		if n, ok := memo[total]; ok {
			return n
		}
		o := obs
		o.DesiredReplicas = total
		var n int32
		for _, p := range Next(ms, o, now).Plans {
			n += p.Replicas
		}
		memo[total] = n
		return n
	}
}
