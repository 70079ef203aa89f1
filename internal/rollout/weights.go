package rollout

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Weights: what the candidate gets on the route this pass, from its step, its Ready pods and
// load matching.

// carryOf is what the candidate's Ready pods carry (see carries): its Service spreads the
// traffic over all of them. With spec.rollout.warmup a pod is Ready only once its warm-up check
// passed (the controller's readiness gate); a Deployment created before that gate existed may
// still have Ready pods that are warming, until its next revision.
func (m *machine) carryOf(c *v1alpha1.ColorStatus) int32 {
	return carries(m.total, m.servingReady(c.Color, c.Revision))
}

// servedWeight is the candidate's route weight this pass: a live candidate's step weight
// (raised by loadMatched) capped to what its Ready pods carry, to what those that passed the
// warm-up check carry, and to its share of both colors' serving pods (parityCap), or a
// rolled-back candidate's drain.
func (m *machine) servedWeight() int32 {
	if m.candidateLive() {
		c := m.st.Candidate
		w := min(m.loadMatched(m.candidateWeight()), m.carryOf(c), carries(m.total, m.warmServing(c)), m.parityCap())
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

// parityCap is the largest weight at which each of the candidate's warm, serving pods carries
// no more than each of the stable color's serving pods: its share of both colors' serving
// pods, floor(100 nc / (nc + ns)). A candidate pod that carries more than a stable pod queues
// more, and its latencies are then judged against a lighter-loaded stable color (the cause of
// false rollbacks on bursty traffic): the weight follows the warm pods, down when pods are lost
// or still load the model, up to the step's weight as they warm. 100 (no cap) when the stable
// color serves nothing (see stableServesNothing).
func (m *machine) parityCap() int32 {
	c, s := m.st.Candidate, m.st.Stable
	ns := m.servingReady(s.Color, s.Revision)
	if ns <= 0 {
		return 100
	}
	nc := m.warmServing(c)
	return int32(int64(nc) * 100 / int64(nc+ns))
}

// warmServing is how many of the candidate's pods serve: Ready and past the warm-up check (a
// pod that is Ready while it still loads its model serves nothing), or the last pass's Ready
// count while the Deployment's status is stale; never more than the ready endpoints of its
// EndpointSlices, when it has any.
func (m *machine) warmServing(c *v1alpha1.ColorStatus) int32 {
	o, ok := m.colorObs(c.Color, c.Revision)
	if !ok {
		return 0
	}
	var n int32
	switch {
	case o.Stale:
		n = m.lastReady(c.Color, c.Revision)
	case o.Warm:
		n = o.ReadyReplicas
	default:
		n = min(o.WarmPods, o.ReadyReplicas)
	}
	if o.EndpointsObserved {
		n = min(n, o.ReadyEndpoints)
	}
	return n
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
	n := min(warm, o.ReadyReplicas)
	if o.EndpointsObserved {
		n = min(n, o.ReadyEndpoints)
	}
	return carries(m.total, n)
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
	if m.st.Rollout.Step >= 1 {
		next = m.nextStepWeight()
	}
	share := min(int32(int64(nc)*100/int64(nc+ns)), next)
	if m.ms.Spec.Paused {
		// A paused rollout's weight does not grow, also when the stable color loses pods.
		share = min(share, m.ms.Status.Weights.Candidate)
	}
	return max(w, share)
}

// trackUnready keeps ColorStatus.UnreadySince: set when the candidate's Ready, warm pods went
// below what its step's weight needs, cleared when they carry it again.
func (m *machine) trackUnready() {
	c := m.st.Candidate
	w := m.candidateWeight()
	if w == 0 || min(m.carryOf(c), carries(m.total, m.warmServing(c))) >= w {
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
	msg := fmt.Sprintf("rollout of %s holds at step %d: the HTTPRoute is not accepted: %s", m.st.Candidate.Revision, m.st.Rollout.Step, m.obs.RouteMessage)
	if !m.heldFor(v1alpha1.ReasonRouteNotAccepted) && m.holdFor(v1alpha1.ReasonRouteNotAccepted, msg) {
		if m.ms.Status.Phase != v1alpha1.PhaseProgressing || !hasReason(m.ms.Status, v1alpha1.ConditionProgressing, v1alpha1.ReasonRouteNotAccepted) {
			m.event(corev1.EventTypeWarning, EventRouteNotAccepted, "%s", msg)
		}
	}
	m.wakeAt(m.now.Add(m.pol.interval))
	return true
}

// candidateWeight is the weight the candidate holds at its current step.
func (m *machine) candidateWeight() int32 {
	if !m.candidateLive() || m.st.Rollout.Step < 1 {
		return 0
	}
	return m.heldWeight()
}

// heldWeight is the weight of the step the candidate holds: status.rollout.stepWeight, or for a status
// written before that field, spec.rollout.steps[step-1] (the last step before 100 when the
// steps are shorter now; the route's last weight when only 100 is left). 0 before the first
// step.
func (m *machine) heldWeight() int32 {
	return heldStepWeight(m.st.Rollout, m.pol.steps, m.ms.Status.Weights.Candidate)
}

// heldStepWeight is heldWeight on a rollout status r, the steps (validSteps) and the route's
// last candidate weight.
func heldStepWeight(r v1alpha1.RolloutStatus, steps []int32, routeWeight int32) int32 {
	switch {
	case r.Step < 1:
		return 0
	case r.StepWeight > 0:
		return r.StepWeight
	}
	if len(steps) == 1 {
		return min(routeWeight, 99)
	}
	return steps[min(int(r.Step), len(steps)-1)-1]
}

// nextStepIndex is the index in spec.rollout.steps of the first weight above the held one (the
// step the rollout goes to next; the last one, 100, is the promotion).
func (m *machine) nextStepIndex() int { return nextStepIndexAfter(m.heldWeight(), m.pol.steps) }

// nextStepIndexAfter is the index in steps of the first weight above held (the last one when
// none is).
func nextStepIndexAfter(held int32, steps []int32) int {
	for i, s := range steps {
		if s > held {
			return i
		}
	}
	return len(steps) - 1
}

// nextStepWeight is the weight the candidate gets next; 100 means promotion.
func (m *machine) nextStepWeight() int32 { return m.pol.steps[m.nextStepIndex()] }
