package rollout

import (
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// TestLoadMatching pins spec.rollout.loadMatching: with StablePods a step's weight is raised to
// the candidate's share of both colors' Ready pods (its own counted up to what the step
// needs), at most the next step's weight and what its Ready pods carry; unset is StablePods
// (the API's default); with None the step's weight is sent as written.
func TestLoadMatching(t *testing.T) {
	cases := []struct {
		name           string
		matching       v1alpha1.LoadMatching
		total, step    int32
		stableReady    int32
		candReady      int32
		wantCandWeight int32
	}{
		{"unset is StablePods: one candidate pod beside 6 stable pods gets a seventh", "", 6, 1, 6, 1, 14},
		{"None sends the step's weight", v1alpha1.LoadMatchingNone, 6, 1, 6, 1, 10},
		{"one candidate pod beside 6 stable pods gets a seventh of the traffic", v1alpha1.LoadMatchingStablePods, 6, 1, 6, 1, 14},
		{"pods started early for the next step do not raise this one", v1alpha1.LoadMatchingStablePods, 6, 1, 6, 2, 14},
		{"a step whose pods would carry more than a stable pod is held to their share", v1alpha1.LoadMatchingStablePods, 6, 3, 6, 3, 33},
		{"without load matching too, a step is held to the share of serving pods", v1alpha1.LoadMatchingNone, 6, 3, 6, 3, 33},
		{"a step that rounds to the stable pods' load keeps its weight", v1alpha1.LoadMatchingStablePods, 6, 2, 6, 2, 25},
		{"never above the next step's weight", v1alpha1.LoadMatchingStablePods, 2, 1, 2, 1, 25},
		{"never above what the candidate's Ready pods carry", v1alpha1.LoadMatchingStablePods, 6, 1, 4, 1, 16},
		{"the last step before 100 is raised up to the share, below 100", v1alpha1.LoadMatchingStablePods, 3, 3, 1, 2, 66},
	}
	steps := []int32{10, 25, 50, 100}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := newModelServer(withSteps(steps...), withLoadMatching(tc.matching), withStatus(
				phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, tc.stableReady),
				inRollout(revB, tc.step, t0.Add(-5*time.Second), steps[tc.step-1])))
			obs := newObs(revB, tc.total, deploy(blue, revA, tc.total, tc.stableReady), deploy(green, revB, tc.candReady, tc.candReady))
			d := next(ms, obs, t0)
			if d.Status.Rollout.Step != tc.step {
				t.Fatalf("step = %d, want %d (the case must hold its step)", d.Status.Rollout.Step, tc.step)
			}
			if got := d.Status.Weights; got.Candidate != tc.wantCandWeight || got.Stable != 100-tc.wantCandWeight {
				t.Errorf("weights = %+v, want candidate %d", got, tc.wantCandWeight)
			}
			if got := d.Weights[green]; got != tc.wantCandWeight {
				t.Errorf("route weight of the candidate = %d, want %d", got, tc.wantCandWeight)
			}
		})
	}
}

// TestLoadMatchingHoldsWhilePaused: a paused rollout's raised weight does not grow when the
// stable color loses a pod (the share of one candidate pod beside 5 stable ones is 16%).
func TestLoadMatchingHoldsWhilePaused(t *testing.T) {
	ms := newModelServer(withSteps(10, 25, 50, 100), withLoadMatching(v1alpha1.LoadMatchingStablePods), withPaused(true), withStatus(
		phase(v1alpha1.PhasePaused), stableOn(blue, revA, 6), inRollout(revB, 1, t0.Add(-time.Hour), 14)))
	d := next(ms, newObs(revB, 6, deploy(blue, revA, 6, 5), deploy(green, revB, 1, 1)), t0)
	if d.Status.Phase != v1alpha1.PhasePaused || d.Status.Rollout.Step != 1 {
		t.Fatalf("phase %s step %d, want Paused at step 1", d.Status.Phase, d.Status.Rollout.Step)
	}
	if d.Status.Weights.Candidate != 14 {
		t.Errorf("candidate weight = %d, want 14 (held while paused)", d.Status.Weights.Candidate)
	}
	ms.Spec.Paused = false
	ms.Status.Phase = v1alpha1.PhaseProgressing
	if d := next(ms, newObs(revB, 6, deploy(blue, revA, 6, 5), deploy(green, revB, 1, 1)), t0); d.Status.Weights.Candidate != 16 {
		t.Errorf("resumed: candidate weight = %d, want 16", d.Status.Weights.Candidate)
	}
}

// TestLoadMatchingEventSaysTheRaisedWeight: the step's event gives the weight the route gets.
func TestLoadMatchingEventSaysTheRaisedWeight(t *testing.T) {
	ms := newModelServer(withSteps(10, 25, 50, 100), withLoadMatching(v1alpha1.LoadMatchingStablePods), withStatus(
		phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 6), inRollout(revB, 0, t0.Add(-time.Minute), 0)))
	d := next(ms, newObs(revB, 6, deploy(blue, revA, 6, 6), deploy(green, revB, 1, 1)), t0)
	if d.Status.Rollout.Step != 1 || d.Status.Weights.Candidate != 14 {
		t.Fatalf("step %d weights %+v, want step 1 at 14%%", d.Status.Rollout.Step, d.Status.Weights)
	}
	for _, e := range d.Events {
		if e.Reason == EventStepAdvanced {
			if want := "green (rev-b) 14% (step 10% raised to a stable pod's load), blue 86%"; !strings.Contains(e.Message, want) {
				t.Errorf("event %q, want it to say %q", e.Message, want)
			}
			return
		}
	}
	t.Errorf("no %s event in %+v", EventStepAdvanced, d.Events)
}

// TestWeightsFollowWarmPods: no candidate pod carries more than a stable pod. The weight
// follows the candidate's warm (serving) pods down while pods load or are lost, and back up to
// the step's weight as they warm; the candidate is sized to carry its next step at a stable
// pod's load, so that the step's weight is reached once those pods are warm.
func TestWeightsFollowWarmPods(t *testing.T) {
	steps := withSteps(10, 25, 50, 100)
	at50 := newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 8), inRollout(revB, 3, t0.Add(-30*time.Second), 50)))
	for _, tc := range []struct {
		name       string
		warm       int32 // of 8 Ready candidate pods
		wantWeight int32
	}{
		{"all 8 warm: the step's 50%", 8, 50},
		{"4 warm, 4 Ready but loading their model: their share, 4 of 12 serving pods", 4, 33},
		{"1 warm: 1 of 9", 1, 11},
		{"none warm: nothing", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []obsOption{deploy(blue, revA, 8, 8), deploy(green, revB, 8, 8)}
			if tc.warm < 8 {
				opts = append(opts, cold(green), warmPods(green, tc.warm))
			}
			d := next(at50, newObs(revB, 8, opts...), t0)
			if got := d.Weights[green]; got != tc.wantWeight {
				t.Errorf("candidate weight %d, want %d", got, tc.wantWeight)
			}
			// Each candidate pod carries at most what a stable pod carries.
			if tc.warm > 0 && int64(d.Weights[green])*8 > int64(d.Weights[blue])*int64(tc.warm) {
				t.Errorf("weights %v: a candidate pod carries more than a stable pod", d.Weights)
			}
		})
	}
	// At 10% of 8 the candidate is sized for 25% at a stable pod's load: 3 pods (25/75 of 8),
	// not need(8, 25%) = 2; at 25%, for 50%: 8.
	for _, tc := range []struct {
		step, weight, want int32
	}{{1, 10, 3}, {2, 25, 8}} {
		ms := newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 8), inRollout(revB, tc.step, t0.Add(-30*time.Second), tc.weight)))
		d := next(ms, newObs(revB, 8, deploy(blue, revA, 8, 8), deploy(green, revB, 1, 1)), t0)
		if got := d.Plans[green].Replicas; got != tc.want {
			t.Errorf("at %d%%: candidate planned %d, want %d", tc.weight, got, tc.want)
		}
	}
	// Where the cluster has no room for them, what fits beside the stable total.
	ms := newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 8), inRollout(revB, 2, t0.Add(-30*time.Second), 25)))
	if got := next(ms, newObs(revB, 8, deploy(blue, revA, 8, 8), deploy(green, revB, 4, 4), withCapacity(13)), t0).Plans[green].Replicas; got != 5 {
		t.Errorf("with room for 13 pods: candidate planned %d for 50%%, want 5", got)
	}
}
