package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// partialOf answers as f does, with a partial-response warning on every answer.
func partialOf(f func(string) promAnswer) func(string) promAnswer {
	return func(q string) promAnswer {
		a := f(q)
		a.partial = true
		return a
	}
}

// A rollout measured on partial answers (a Thanos store did not answer) holds its step: the
// answers look healthy, but half the data is no data, so the candidate is not promoted on them;
// MetricsAvailable says why. The same answers complete promote it.
func TestRolloutHoldsItsStepOnPartialAnswersAndPromotesOnCompleteOnes(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "partial")
	good := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy}
	tr, _ := startServing(t, ms, good)
	playDeployments(t, ns)
	prometheus.set(ns, partialOf(vllmAnswers(ms.Name, good)))

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	tr.waitCandidateWeight(t, 20)

	var held *v1alpha1.ModelServer
	eventually(t, 20*time.Second, "MetricsAvailable False naming the partial answer", func() error {
		held = getMS(t, ms)
		c := condition(held, v1alpha1.ConditionMetricsAvailable)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonMetricsUnavailable || !strings.Contains(c.Message, "partial response") {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	weights, step := tr.current(), held.Status.Step
	consistently(t, holdFor, "holds its step on partial answers", func() error {
		st := getMS(t, ms).Status
		if w := tr.current(); w != weights || st.Step != step || st.Phase != v1alpha1.PhaseProgressing {
			return fmt.Errorf("weights %s step %d phase %s; held at %s step %d", w, st.Step, st.Phase, weights, step)
		}
		return nil
	})

	prometheus.set(ns, vllmAnswers(ms.Name, good))
	waitPromoted(t, ms, v1alpha1.Green, v2)
}
