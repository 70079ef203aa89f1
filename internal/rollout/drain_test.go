package rollout

import (
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// TestAnAbortDoesNotWaitForAStableScaleUpThatWasRefused: aborted at 50% of a total of 2, with
// the stable color shrunk to 1 pod, the candidate keeps the 50% that pod cannot carry while
// the stable color grows. When the stable Deployment's scale-up is refused (a webhook that is
// down), no pod is coming: DrainRefusedAfter after the second pass that sees it short
// (status.stable.shortSince), all traffic goes to the stable color's pod. While the stable
// Deployment asks for its pods, the drain waits for them.
func TestAnAbortDoesNotWaitForAStableScaleUpThatWasRefused(t *testing.T) {
	for _, refused := range []bool{true, false} {
		name := "scale-up accepted: the drain waits for the pods on their way"
		if refused {
			name = "scale-up refused: all traffic on stable after DrainRefusedAfter"
		}
		t.Run(name, func(t *testing.T) {
			ms := newModelServer(withSteps(50, 100),
				withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 1), inRollout(revB, 1, t0.Add(-time.Minute), 50)))
			stableAsks := int32(2)
			if refused {
				stableAsks = 1
			}
			const seen = 10 * time.Second // the second pass that sees the stable Deployment short
			for _, at := range []time.Duration{0, seen, seen + DrainRefusedAfter - time.Second, seen + DrainRefusedAfter, seen + 2*DrainRefusedAfter} {
				asks := stableAsks // what the stable Deployment asks for once the abort planned 2
				if at == 0 {
					asks = 1
				}
				obs := newObs(revB, 2, deploy(blue, revA, asks, 1), deploy(green, revB, 2, 2))
				if at == 0 {
					obs.Operation = OpAbort
				}
				d := next(ms, obs, t0.Add(at))
				if d.Status.Phase != v1alpha1.PhaseRolledBack || d.Status.History[0].Outcome != v1alpha1.OutcomeAborted {
					t.Fatalf("%s after the abort: phase %s history %+v, want RolledBack, Aborted", at, d.Status.Phase, d.Status.History)
				}
				if p := d.Plans[blue]; p.Replicas != 2 || p.Revision != revA {
					t.Errorf("%s after the abort: stable plan %+v, want %s×2", at, p, revA)
				}
				want := int32(50)
				if refused && at >= seen+DrainRefusedAfter {
					want = 0
				}
				if ss := d.Status.Stable.ShortSince; refused && at >= seen && (ss == nil || !ss.Time.Equal(t0.Add(seen))) || !refused && ss != nil {
					t.Errorf("%s after the abort (stable Deployment asks for %d): status.stable.shortSince %v", at, stableAsks, ss)
				}
				if got := d.Weights[green]; got != want {
					t.Errorf("%s after the abort (stable Deployment asks for %d): candidate weight %d, want %d", at, stableAsks, got, want)
				}
				ms.Status = d.Status
			}
		})
	}
}

// TestAnAbortAtATotalOfZeroGivesTheCandidatesWeightBack: scaled to zero (spec.replicas 0, or
// an autoscaler at its minimum of 0), the stable color is asked for no pod, so none is coming
// for a drain to wait for: an aborted candidate gives its weight back at once instead of
// serving on until a replica is wanted again (found by TestSequencesKeepInvariants: a
// rolled-back candidate held 25% for over 30 minutes at a total of 0).
func TestAnAbortAtATotalOfZeroGivesTheCandidatesWeightBack(t *testing.T) {
	ms := newModelServer(withSteps(25, 100),
		withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 0), inRollout(revB, 1, t0.Add(-time.Minute), 25)))
	obs := newObs(revB, 0, deploy(blue, revA, 0, 0), deploy(green, revB, 1, 1))
	obs.Operation = OpAbort
	d := next(ms, obs, t0)
	if d.Status.Phase != v1alpha1.PhaseRolledBack {
		t.Fatalf("phase %s after the abort, want RolledBack", d.Status.Phase)
	}
	if got := d.Weights[green]; got != 0 {
		t.Errorf("candidate weight %d at a total of 0 after the abort, want 0", got)
	}
}
