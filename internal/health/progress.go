package health

import (
	"fmt"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// InProgress reports whether a rollout is under way: the phases in which promote and abort act.
func InProgress(ms *v1alpha1.ModelServer) bool {
	switch ms.Status.Phase {
	case v1alpha1.PhaseProgressing, v1alpha1.PhasePaused, v1alpha1.PhaseAwaitingPromotion:
		return ms.Status.Candidate != nil && ms.Status.Candidate.Revision != ""
	}
	return false
}

// Steps is the candidate's weight at each step of the rollout (spec.rollout.steps or its default).
func Steps(ms *v1alpha1.ModelServer) []int32 {
	if len(ms.Spec.Rollout.Steps) > 0 {
		return ms.Spec.Rollout.Steps
	}
	return v1alpha1.DefaultSteps
}

// StepText is "step k of n (w%)", "warming up (step 0 of n)" or "" when no rollout is in progress.
func StepText(ms *v1alpha1.ModelServer) string {
	if !InProgress(ms) {
		return ""
	}
	s := Steps(ms)
	k := ms.Status.Rollout.Step
	if k <= 0 {
		return fmt.Sprintf("warming up (step 0 of %d)", len(s))
	}
	if int(k) <= len(s) {
		w := ms.Status.Rollout.StepWeight // steps edited mid-rollout never lower the held weight
		if w == 0 {
			w = s[k-1]
		}
		return fmt.Sprintf("step %d of %d (%d%%)", k, len(s), w)
	}
	return fmt.Sprintf("step %d of %d", k, len(s))
}
