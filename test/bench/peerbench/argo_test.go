package peerbench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelship/modelship/test/bench/peers"
)

// The Argo Rollouts contender gets what the others get: the fixed-size workload with the
// ModelServer's pods, modelship's steps held as long as modelship holds one, and Flagger's
// checks at Flagger's interval and threshold.
func TestArgoCanaryMatchesTheOtherContenders(t *testing.T) {
	a := ArgoCanary("rollout-argo-rollouts", "vllm/vllm-openai:v0.10.0", "http://127.0.0.1:9090")
	ms := Modelship{}.ModelServer("ns", "vllm/vllm-openai:v0.10.0", false)
	f := FlaggerCanary("ns")
	if a.Replicas != *ms.Spec.Replicas {
		t.Errorf("replicas %d, modelship's %d", a.Replicas, *ms.Spec.Replicas)
	}
	var msSteps []int
	for _, s := range ms.Spec.Rollout.Steps {
		if s < 100 {
			msSteps = append(msSteps, int(s))
		}
	}
	if !slices.Equal(a.StepWeights, msSteps) || !slices.Equal(a.StepWeights, f.StepWeights) {
		t.Errorf("steps %v, modelship's %v, Flagger's %v", a.StepWeights, msSteps, f.StepWeights)
	}
	if a.StepPause != 20*time.Second {
		t.Errorf("pause %s, want modelship's 20s step", a.StepPause)
	}
	if a.Interval != f.Interval || a.FailureLimit != f.Threshold-1 {
		t.Errorf("interval %s failureLimit %d, Flagger's interval %s threshold %d", a.Interval, a.FailureLimit, f.Interval, f.Threshold)
	}
	if len(a.Metrics) != len(FlaggerChecks) {
		t.Fatalf("metrics %v", a.Metrics)
	}
	for i, m := range a.Metrics {
		if m.Name != FlaggerChecks[i].Name || !strings.Contains(m.Query, FlaggerChecks[i].Histogram+"_bucket") || m.SuccessCondition != "result[0] <= 1.2" {
			t.Errorf("metric %d = %+v", i, m)
		}
	}
	if got := a.Template.Labels; got[peers.AppLabel] != WorkloadName || got[peers.ServerLabel] != WorkloadName {
		t.Errorf("template labels %v: the simulator serves pods labelled app and %s", got, peers.ServerLabel)
	}
	if got, want := a.Template.Spec.Containers[0].Image, "vllm/vllm-openai:v0.10.0"; got != want {
		t.Errorf("image %s", got)
	}
	if a.Template.Spec.NodeSelector == nil && len(a.Template.Spec.Tolerations) == 0 {
		t.Error("the pod spec is not the ModelServer's (no node selector, no tolerations)")
	}
}
