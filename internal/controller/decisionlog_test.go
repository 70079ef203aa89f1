package controller

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/plan"
	"github.com/modelship/modelship/internal/rollout"
)

// capture returns a logger that records each line.
func capture() (logr.Logger, *[]string) {
	var lines []string
	return funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{}), &lines
}

func TestLogDecisions(t *testing.T) {
	serving := v1alpha1.ModelServerStatus{
		Phase: v1alpha1.PhaseProgressing, Rollout: v1alpha1.RolloutStatus{Step: 1}, Weights: v1alpha1.Weights{Stable: 80, Candidate: 20},
		Stable:      &v1alpha1.ColorStatus{Color: v1alpha1.Blue, Revision: "r1"},
		Candidate:   &v1alpha1.ColorStatus{Color: v1alpha1.Green, Revision: "r2"},
		Autoscaling: &v1alpha1.AutoscalingStatus{DesiredReplicas: 3},
	}
	advanced := *serving.DeepCopy()
	advanced.Rollout.Step, advanced.Weights = 2, v1alpha1.Weights{Stable: 50, Candidate: 50}
	scaled := *serving.DeepCopy()
	scaled.Autoscaling.DesiredReplicas = 5
	// observed is a pass's rollout observation and the autoscaler's decision.
	type observed struct {
		rollout.Observation
		scale *autoscale.Output
	}
	obs := observed{Observation: rollout.Observation{Colors: map[v1alpha1.Color]rollout.ColorObservation{
		v1alpha1.Blue: {Exists: true, Replicas: 2, ReadyReplicas: 2}, v1alpha1.Green: {Exists: true, Replicas: 1, ReadyReplicas: 1},
	}}}
	measured := obs
	measured.Measurement = &rollout.Measurement{Results: []v1alpha1.MetricResult{{Name: "ttft", Verdict: v1alpha1.VerdictPass, Candidate: "0.31", Stable: "0.30", Bound: "<= 0.36"}}}
	withScale := func(o observed, desired int32) observed {
		o.scale = &autoscale.Output{Desired: desired, MetricsAvailable: true, Status: v1alpha1.AutoscalingStatus{
			DesiredReplicas: desired, LastScaleReason: "3 -> 5: gpuUtilization 91 > target 70",
			Proposals: []v1alpha1.Proposal{{Metric: "gpuUtilization", Value: "91", Target: "70", Replicas: ptr.To(desired)}, {Metric: "kvCacheUsage", Target: "0.8", Message: "no data"}},
		}}
		return o
	}
	step := rollout.Decision{Events: []rollout.Event{{Reason: "StepAdvanced", Message: "candidate weight 20% -> 50%"}}}
	spec := &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 8}
	cases := []struct {
		name          string
		before, after v1alpha1.ModelServerStatus
		obs           observed
		d             rollout.Decision
		want          []string // one entry per line, each a list of fragments the line holds
	}{
		{name: "logs nothing when a pass changes and measures nothing", before: serving, after: serving, obs: withScale(obs, 3)},
		{name: "logs a measurement that changes nothing, with its analysis",
			before: serving, after: serving, obs: withScale(measured, 3),
			want: []string{`"msg"="Rollout measured" "phase"="Progressing" "step"="1" "weights"="80/20" "failures"=0 "analysis"="ttft=Pass (candidate 0.31, stable 0.30, bound <= 0.36)"`}},
		{name: "logs a step change once with its reason, weights, ready counts and measurement",
			before: serving, after: advanced, obs: measured, d: step,
			want: []string{`"msg"="Rollout decision" "phase"="Progressing" "step"="1 -> 2" "weights"="80/20 -> 50/50" "stable"="blue@r1" "candidate"="green@r2" "ready"="blue 2/2 green 1/1" "reason"="StepAdvanced: candidate weight 20% -> 50%" "analysis"="ttft=Pass (candidate 0.31, stable 0.30, bound <= 0.36)"`}},
		{name: "logs a scaling change once with signals, current, desired and bounds",
			before: serving, after: scaled, obs: withScale(obs, 5),
			want: []string{`"msg"="Scaling decision" "current"=3 "desired"=5 "min"=1 "max"=8 "signals"="gpuUtilization=91 (target 70) -> 5; kvCacheUsage=no data (target 0.8): no data" "previousDesired"=3 "reason"="3 -> 5: gpuUtilization 91 > target 70"`}},
		{name: "logs both when a pass changes the rollout and the scale",
			before: serving, after: advanced, obs: withScale(obs, 5), d: step,
			want: []string{`"msg"="Rollout decision"`, `"msg"="Scaling decision"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log, lines := capture()
			logDecisions(log, &c.before, &c.after, c.obs.Observation, plan.Result{Decision: c.d, Scale: c.obs.scale}, spec)
			if len(*lines) != len(c.want) {
				t.Fatalf("%d lines, want %d:\n%s", len(*lines), len(c.want), strings.Join(*lines, "\n"))
			}
			for i, w := range c.want {
				if !strings.Contains((*lines)[i], w) {
					t.Errorf("line %d\n  %s\ndoes not hold\n  %s", i, (*lines)[i], w)
				}
			}
		})
	}
}
