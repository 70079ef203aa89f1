package rollout

import (
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// conditions sets the conditions of a status from the machine's report: the plan's status file
// does it (plan.RolloutConditions), installed by conditions_hook_test.go, an external test
// that can import package plan (which imports this one).
var conditions func(*v1alpha1.ModelServerStatus, Report)

// phaseConditions and stalledProgressing are the conditions package health's table gives each
// phase (plan.PhaseConditions, plan.StalledProgressing), which the sequence tests hold the
// machine to.
var (
	phaseConditions    func(v1alpha1.Phase, int64) []metav1.Condition
	stalledProgressing func(int64) []metav1.Condition
)

// SetConditions installs the plan's condition setter and its table of conditions per phase.
func SetConditions(set func(*v1alpha1.ModelServerStatus, Report), table func(v1alpha1.Phase, int64) []metav1.Condition, stalled func(int64) []metav1.Condition) {
	conditions, phaseConditions, stalledProgressing = set, table, stalled
}

// next is a pass as the controller's plan runs it: Next, then the conditions the plan derives
// from its report (the tests read them, and the next pass reads the last one's).
func next(ms *v1alpha1.ModelServer, obs Observation, now time.Time) Decision {
	d := Next(ms, obs, now)
	conditions(&d.Status, d.Report)
	return d
}
