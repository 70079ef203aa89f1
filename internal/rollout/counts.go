package rollout

import (
	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Pod counts as the observation gives them, per color and revision.

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
// too), or the last pass's count while the Deployment's status is stale; never more than the
// ready endpoints of the color's EndpointSlices, when it has any (what a Gateway routes to).
func (m *machine) servingReady(color v1alpha1.Color, rev string) int32 {
	o, ok := m.colorObs(color, rev)
	if !ok {
		return 0
	}
	n := o.ReadyReplicas
	if o.Stale {
		n = m.lastReady(color, rev)
	}
	if o.EndpointsObserved {
		n = min(n, o.ReadyEndpoints)
	}
	return n
}

// endpointsFor: the candidate's EndpointSlices (when it has any) list enough ready endpoints for
// weight percent.
func (m *machine) endpointsFor(weight int32) bool {
	c := m.st.Candidate
	o, ok := m.colorObs(c.Color, c.Revision)
	return !ok || !o.EndpointsObserved || o.ReadyEndpoints >= m.candidateNeed(weight)
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

// readyFor: the candidate has enough Ready, warm pods of its revision, and ready endpoints, to
// take weight percent.
func (m *machine) readyFor(weight int32) bool {
	c := m.st.Candidate
	return c.Warm && c.ReadyReplicas >= m.candidateNeed(weight) && m.endpointsFor(weight)
}
