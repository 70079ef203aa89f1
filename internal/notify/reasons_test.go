package notify

import (
	"testing"

	"github.com/modelship/modelship/internal/rollout"
)

// Every transition of a rollout that a person or a CD tool waits for is notified, the shadow
// phase's included; the per-measurement noise is not.
func TestReasonsAreTheRolloutsTransitions(t *testing.T) {
	for _, r := range []string{
		rollout.EventRolloutStarted, rollout.EventShadowStarted, rollout.EventShadowPassed, rollout.EventStepAdvanced,
		rollout.EventPaused, rollout.EventAwaitingPromotion, rollout.EventPromoted, rollout.EventRolledBack,
		rollout.EventAborted, rollout.EventAnalysisStalled, rollout.EventNoRoomForCandidate,
	} {
		if !Reasons[r] {
			t.Errorf("rollout event %s is not notified", r)
		}
	}
	for _, r := range []string{rollout.EventAnalysisFailed, rollout.EventCandidateUnready, rollout.EventAnalysisInconclusive} {
		if Reasons[r] {
			t.Errorf("event %s is notified: it is per-measurement noise, not a transition", r)
		}
	}
}
