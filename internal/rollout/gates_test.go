package rollout

import (
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func withGates(gates ...v1alpha1.RolloutGate) msOption {
	return func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Gates = gates }
}

func gate(name string, typ v1alpha1.GateType) v1alpha1.RolloutGate {
	return v1alpha1.RolloutGate{Name: name, Type: typ, URLSecretRef: v1alpha1.SecretKeyRef{Name: "s", Key: "k"}}
}

func gateResults(rs ...GateResult) obsOption {
	return func(o *Observation) { o.GateResults = rs }
}

func TestGatesDueAtEachPoint(t *testing.T) {
	ms := newModelServer(withSteps(20, 50, 100), withGates(gate("approve", v1alpha1.GateConfirmRollout), gate("load", v1alpha1.GatePreStep), gate("final", v1alpha1.GateConfirmPromotion)))
	names := func(step int32) string {
		st := &v1alpha1.ModelServerStatus{Revision: revB, Candidate: &v1alpha1.ColorStatus{Revision: revB}}
		st.Rollout.Step = step
		var out []string
		for _, g := range GatesDue(ms, st) {
			out = append(out, g.Name)
		}
		return strings.Join(out, ",")
	}
	for step, want := range map[int32]string{0: "approve,load", 1: "load", 2: "final"} {
		if got := names(step); got != want {
			t.Errorf("step %d: gates due %q, want %q", step, got, want)
		}
	}
	st := &v1alpha1.ModelServerStatus{Revision: revB, Candidate: &v1alpha1.ColorStatus{Revision: revB}}
	st.Rollout.RolledBackRevision = revB
	if g := GatesDue(ms, st); len(g) != 0 {
		t.Errorf("gates due for a rolled-back candidate: %v", g)
	}
}

func TestAGateHoldsStepZeroUntilItPasses(t *testing.T) {
	now := t0.Add(time.Hour)
	base := func(opts ...statusOption) *v1alpha1.ModelServer {
		return newModelServer(withSteps(20, 50, 100), withGates(gate("approve", v1alpha1.GateConfirmRollout)),
			withStatus(append([]statusOption{stableOn(v1alpha1.Blue, revA, 2), inRollout(revB, 0, now.Add(-time.Second), 0)}, opts...)...))
	}
	ready := []obsOption{deploy(v1alpha1.Blue, revA, 2, 2), deploy(v1alpha1.Green, revB, 1, 1)}

	// Not answered yet: held at step 0, weight 0, Progressing False GateHeld.
	d := Next(base(), newObs(revB, 2, ready...), now)
	if d.Status.Rollout.Step != 0 || d.Weights[v1alpha1.Green] != 0 {
		t.Fatalf("step %d weights %v; want held at step 0", d.Status.Rollout.Step, d.Weights)
	}
	if r := d.Report; r.HoldReason != v1alpha1.ReasonGateHeld || !strings.Contains(r.HoldMessage, "approve") {
		t.Errorf("hold %q %q; want GateHeld naming the gate (Progressing False, as the plan sets it)", r.HoldReason, r.HoldMessage)
	}
	if d.RequeueAfter <= 0 {
		t.Error("a held gate must be looked at again")
	}

	// A 503: still held, one failure recorded with the answer.
	d = Next(base(), newObs(revB, 2, append(ready, gateResults(GateResult{Name: "approve", Step: 0, Message: "answered 503"}))...), now)
	if d.Status.Rollout.Step != 0 || len(d.Status.Rollout.Gates) != 1 || d.Status.Rollout.Gates[0].Failures != 1 {
		t.Fatalf("step %d gates %+v; want held with 1 failure", d.Status.Rollout.Step, d.Status.Rollout.Gates)
	}
	if r := d.Report; !strings.Contains(r.HoldMessage, "503") {
		t.Errorf("hold message %q; want the gate's answer", r.HoldMessage)
	}

	// A 2xx: the first step.
	d = Next(base(), newObs(revB, 2, append(ready, gateResults(GateResult{Name: "approve", Step: 0, Passed: true}))...), now)
	if d.Status.Rollout.Step != 1 || d.Weights[v1alpha1.Green] != 20 {
		t.Errorf("step %d weights %v; want step 1 at 20%% once the gate passed", d.Status.Rollout.Step, d.Weights)
	}

	// Past the failure limit: rolled back.
	ms := base(func(st *v1alpha1.ModelServerStatus) {
		st.Rollout.Gates = []v1alpha1.GateStatus{{Name: "approve", Step: 0, Failures: 2, Message: "answered 503"}}
	})
	ms.Spec.Rollout.GateFailureLimit = 2
	d = Next(ms, newObs(revB, 2, append(ready, gateResults(GateResult{Name: "approve", Step: 0, Message: "answered 503"}))...), now)
	if d.Status.Phase != v1alpha1.PhaseRolledBack || !strings.Contains(d.Status.History[0].Reason, v1alpha1.ReasonGateFailed) {
		t.Errorf("phase %s history %+v; want rolled back for GateFailed", d.Status.Phase, d.Status.History)
	}

	// A person's promotion does not wait for the gate.
	d = Next(base(), newObs(revB, 2, append(ready, op(OpPromote))...), now)
	if d.Status.Rollout.Step != 1 {
		t.Errorf("step %d after Promote; want 1", d.Status.Rollout.Step)
	}
}
