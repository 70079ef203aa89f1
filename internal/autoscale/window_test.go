package autoscale

import (
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// A scale-down stabilization window of an hour covers the hour even when the recommendation
// changes every pass: ten replicas recommended once, then 2 and 3 in turn every 15 s (200
// changes in 50 minutes, twice what the status may keep), still hold ten replicas 50 minutes
// later, and the status keeps a handful of recommendations, not a hundred.
func TestAnHourLongWindowHoldsItsHighRecommendationThroughAChangeEvery15s(t *testing.T) {
	spec := newSpec(1, 20, withWaiting(1), withScaleDown(time.Hour, ""))
	var prev *v1alpha1.AutoscalingStatus
	current := int32(10)
	step := func(i int, waiting float64) Output {
		out := Decide(Input{Spec: spec, Current: current, Ready: current, Previous: prev,
			Observations: []Observation{obs(MetricRequestsWaiting, waiting, current)}}, t0.Add(time.Duration(i)*15*time.Second))
		st := out.Status
		prev, current = &st, out.Desired
		return out
	}
	step(0, 10)
	for i := 1; i <= 200; i++ { // 50 minutes
		out := step(i, float64(2+i%2))
		if out.Desired != 10 {
			t.Fatalf("after %s: desired %d, want 10 held by the recommendation of %s ago within the 1h window (status keeps %d recommendations)",
				time.Duration(i)*15*time.Second, out.Desired, time.Duration(i)*15*time.Second, len(out.Status.Recommendations))
		}
	}
	if n := len(prev.Recommendations); n > 4 {
		t.Errorf("after 50 minutes: %d recommendations kept, want the window's extremes only", n)
	}
	// Once the hour has passed since ten was last recommended, the window lets go.
	for i := 201; i <= 245; i++ {
		step(i, float64(2+i%2))
	}
	if current >= 10 {
		t.Errorf("an hour after the high recommendation: %d replicas, want the window to have let go of 10", current)
	}
}
