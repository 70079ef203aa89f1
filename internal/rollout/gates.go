package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Rollout gates (spec.rollout.gates): webhooks that must answer 2xx before the rollout moves on
// from its step. The controller calls the gates GatesDue names and passes their answers in
// Observation.GateResults; the machine keeps them in status.rollout.gates (per gate, for the
// current step) and holds a step's advance until every gate due there passed.

// GatesDue are the gates of ms to pass before the rollout leaves its current step (st's): at
// step 0 the ConfirmRollout gates and the PreStep gates (the first weight); before a step whose
// weight is 100 the ConfirmPromotion gates; before any other step the PreStep gates. None when
// no rollout of the spec's revision is live.
func GatesDue(ms *v1alpha1.ModelServer, st *v1alpha1.ModelServerStatus) []v1alpha1.RolloutGate {
	gates := ms.Spec.Rollout.Gates
	c := st.Candidate
	if len(gates) == 0 || c == nil || c.Revision != st.Revision || c.Revision == st.Rollout.RolledBackRevision {
		return nil
	}
	steps := policyOf(ms).steps
	step := st.Rollout.Step
	promotion := int(step) >= len(steps)-1
	var out []v1alpha1.RolloutGate
	for _, g := range gates {
		switch {
		case g.Type == v1alpha1.GateConfirmRollout && step == 0,
			g.Type == v1alpha1.GateConfirmPromotion && promotion,
			g.Type == v1alpha1.GatePreStep && !promotion:
			out = append(out, g)
		}
	}
	return out
}

// GateCallAt is when a gate whose status at the current step is gs may be called again: at once
// before any failure there, else one analysis interval after the last failure (a gate answering
// 503 is asked again every interval, not on every pass).
func GateCallAt(ms *v1alpha1.ModelServer, gs v1alpha1.GateStatus) time.Time {
	if gs.Failures == 0 || gs.LastFailureAt == nil {
		return time.Time{}
	}
	return gs.LastFailureAt.Add(policyOf(ms).interval)
}

// recordGates keeps in status the gates due at the current step, with the answers this pass
// brought: a pass resets the count of failures in a row, a failure adds one.
func (m *machine) recordGates() {
	st := m.st
	due := GatesDue(m.ms, st)
	if len(due) == 0 {
		st.Rollout.Gates = nil
		return
	}
	step := st.Rollout.Step
	out := make([]v1alpha1.GateStatus, 0, len(due))
	for _, g := range due {
		gs := v1alpha1.GateStatus{Name: g.Name, Step: step}
		if i := slices.IndexFunc(st.Rollout.Gates, func(x v1alpha1.GateStatus) bool { return x.Name == g.Name && x.Step == step }); i >= 0 {
			gs = st.Rollout.Gates[i]
		}
		for _, r := range m.obs.GateResults {
			if r.Name != g.Name || r.Step != step || gs.Passed {
				continue
			}
			if r.Passed {
				gs.Passed, gs.Failures, gs.Message, gs.LastFailureAt = true, 0, "", nil
			} else {
				gs.Failures++
				gs.Message = r.Message
				gs.LastFailureAt = m.timeP(m.now)
			}
		}
		out = append(out, gs)
	}
	st.Rollout.Gates = out
}

// gatesHold reports whether a gate due at this step has not passed: the rollout holds (reason
// GateHeld) and looks again after an analysis interval, or, past spec.rollout.gateFailureLimit
// failures in a row, is rolled back.
func (m *machine) gatesHold() bool {
	limit := m.ms.Spec.Rollout.GateFailureLimit
	var waiting []string
	for _, gs := range m.st.Rollout.Gates {
		if gs.Passed {
			continue
		}
		if limit > 0 && gs.Failures > limit {
			m.rollback(v1alpha1.OutcomeRolledBack, fmt.Sprintf("%s: gate %s failed %d calls in a row at step %d (limit %d): %s",
				v1alpha1.ReasonGateFailed, gs.Name, gs.Failures, gs.Step, limit, gs.Message))
			return true
		}
		msg := gs.Message
		if msg == "" {
			msg = "not answered yet"
		}
		waiting = append(waiting, fmt.Sprintf("%s (%d failed): %s", gs.Name, gs.Failures, msg))
	}
	if len(waiting) == 0 {
		return false
	}
	m.holdFor(v1alpha1.ReasonGateHeld, fmt.Sprintf("step %d holds until the gates answer 2xx: %s", m.st.Rollout.Step, strings.Join(waiting, "; ")))
	m.wakeAt(m.now.Add(m.pol.interval))
	return true
}
