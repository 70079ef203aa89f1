package rollout_test

import (
	"github.com/modelship/modelship/internal/plan"
	"github.com/modelship/modelship/internal/rollout"
)

// The rollout machine's tests read conditions, which the plan sets from the machine's report.
func init() {
	rollout.SetConditions(plan.RolloutConditions, plan.PhaseConditions, plan.StalledProgressing)
}
