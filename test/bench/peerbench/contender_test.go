package peerbench

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/modelship/modelship/internal/autoscale"
)

// The SLO contender autoscales on the scenario's SLO with nothing to tune: no metric of its
// own, where the other modelship contenders target GPU utilization or token work, and the API's
// scale-down window (what a ModelServer stating only its SLO gets; KEDA's HPA has the same).
func TestTheSLOContenderAutoscalesOnTheScenariosSLOAlone(t *testing.T) {
	slo := SLO{TTFT: 2 * time.Second, ITL: 100 * time.Millisecond}
	k := Modelship{SLO: &slo}
	if k.Name() != "modelship-slo" {
		t.Fatalf("name %q, want modelship-slo", k.Name())
	}
	ms := k.ModelServer("ns", "img", true)
	a := ms.Spec.Autoscaling
	if a == nil || a.SLO == nil {
		t.Fatalf("spec.autoscaling %+v: want an SLO", a)
	}
	if a.SLO.TTFTP95 == nil || a.SLO.TTFTP95.Duration != slo.TTFT || a.SLO.ITLP95 == nil || a.SLO.ITLP95.Duration != slo.ITL {
		t.Errorf("slo %+v, want ttftP95 %s itlP95 %s", a.SLO, slo.TTFT, slo.ITL)
	}
	if len(a.Metrics) != 0 {
		t.Errorf("metrics %+v: the SLO contender tunes no metric", a.Metrics)
	}
	if d := a.Behavior.ScaleDown; d != nil && d.StabilizationWindow != nil && d.StabilizationWindow.Duration != autoscale.DefaultScaleDownWindow {
		t.Errorf("scale-down window %s, want the API's default %s", d.StabilizationWindow.Duration, autoscale.DefaultScaleDownWindow)
	}
	if ptr.Deref(a.MinReplicas, 0) != MinReplicas || a.MaxReplicas != MaxReplicas {
		t.Errorf("bounds [%d, %d], want the scenario's [%d, %d]", ptr.Deref(a.MinReplicas, 0), a.MaxReplicas, MinReplicas, MaxReplicas)
	}
	gpu := Modelship{}.ModelServer("ns", "img", true).Spec.Autoscaling
	if gpu.SLO != nil || len(gpu.Metrics) != 1 || gpu.Metrics[0].GPUUtilization == nil {
		t.Errorf("the modelship contender's autoscaling %+v, want GPU utilization alone", gpu)
	}
	if fixed := k.ModelServer("ns", "img", false); fixed.Spec.Autoscaling != nil || ptr.Deref(fixed.Spec.Replicas, 0) != RolloutReplicas {
		t.Errorf("not autoscaled: %+v replicas %d, want none and %d", fixed.Spec.Autoscaling, ptr.Deref(fixed.Spec.Replicas, 0), RolloutReplicas)
	}
}

// TestTheRolloutsTellTheScrapeIntervalAndMinStepWhenGiven: -scrape-interval, -min-step and
// -step-duration set the rollouts' spec.rollout.analysis.scrapeInterval, minStepDuration (at
// most stepDuration) and stepDuration, and nothing else: the
// autoscaling scenario's ModelServer and a contender without them keep the controller's
// defaults.
func TestTheRolloutsTellTheScrapeIntervalAndMinStepWhenGiven(t *testing.T) {
	k := Modelship{ScrapeInterval: time.Second, MinStep: 10 * time.Second}
	r := k.ModelServer("ns", "img", false).Spec.Rollout
	if r.Analysis.ScrapeInterval == nil || r.Analysis.ScrapeInterval.Duration != time.Second {
		t.Errorf("rollouts' scrapeInterval %v, want 1s", r.Analysis.ScrapeInterval)
	}
	if r.MinStepDuration == nil || r.MinStepDuration.Duration != 10*time.Second {
		t.Errorf("rollouts' minStepDuration %v, want 10s", r.MinStepDuration)
	}
	if r.StepDuration.Duration != 20*time.Second {
		t.Errorf("rollouts' stepDuration %v, want the stack's 20s", r.StepDuration)
	}
	f := Modelship{MinStep: 15 * time.Second, StepDuration: 10 * time.Second}.ModelServer("ns", "img", false).Spec.Rollout
	if f.StepDuration.Duration != 10*time.Second || f.MinStepDuration == nil || f.MinStepDuration.Duration != 10*time.Second {
		t.Errorf("-step-duration 10s -min-step 15s: stepDuration %v minStepDuration %v, want 10s and 10s (at most stepDuration)", f.StepDuration, f.MinStepDuration)
	}
	if a := (Modelship{StepDuration: 10 * time.Second}).ModelServer("ns", "img", true).Spec.Rollout; a.StepDuration.Duration != 20*time.Second {
		t.Errorf("the autoscaling scenario's stepDuration %v: want the stack's", a.StepDuration)
	}
	if a := k.ModelServer("ns", "img", true).Spec.Rollout; a.Analysis.ScrapeInterval != nil || a.MinStepDuration != nil {
		t.Errorf("the autoscaling scenario's rollout spec %+v: want the controller's defaults", a)
	}
	if d := (Modelship{}).ModelServer("ns", "img", false).Spec.Rollout; d.Analysis.ScrapeInterval != nil || d.MinStepDuration != nil {
		t.Errorf("without the flags: %+v, want the controller's defaults", d)
	}
	s := Modelship{SLO: &SLO{TTFT: time.Second}, ScaleScrapeInterval: 2 * time.Second}
	if a := s.ModelServer("ns", "img", true).Spec.Rollout.Analysis.ScrapeInterval; a == nil || a.Duration != 2*time.Second {
		t.Errorf("the autoscaling scenario's scrapeInterval %v, want 2s (-scale-scrape-interval)", a)
	}
	if r := s.ModelServer("ns", "img", false).Spec.Rollout.Analysis.ScrapeInterval; r != nil {
		t.Errorf("the rollouts' scrapeInterval %v: -scale-scrape-interval is the autoscaling scenario's", r)
	}
}
