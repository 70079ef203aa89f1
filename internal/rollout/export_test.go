package rollout

import (
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// conditions sets the conditions of a status from the machine's report: the plan's status file
// does it (plan.RolloutConditions), installed by conditions_hook_test.go, an external test
// that can import package plan (which imports this one).
var conditions func(*v1alpha1.ModelServerStatus, Report)

// SetConditions installs the condition setter the tests read conditions through.
func SetConditions(f func(*v1alpha1.ModelServerStatus, Report)) { conditions = f }

// next is a pass as the controller's plan runs it: Next, then the conditions the plan derives
// from its report (the tests read them, and the next pass reads the last one's).
func next(ms *v1alpha1.ModelServer, obs Observation, now time.Time) Decision {
	d := Next(ms, obs, now)
	conditions(&d.Status, d.Report)
	return d
}
