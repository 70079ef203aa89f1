package rollout

import (
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func withHeaderRoute() msOption {
	return func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.HeaderRoute = &v1alpha1.HeaderRouteSpec{Name: "x-canary", Value: "always"}
	}
}

// The header route is on from the moment the candidate has a Ready, warm pod until the rollout
// ends (promotion, abort, rollback, supersession), and only when the spec asks for it.
func TestHeaderRouteFollowsTheLiveWarmCandidate(t *testing.T) {
	now := t0.Add(time.Hour)
	cases := []struct {
		name string
		ms   *v1alpha1.ModelServer
		obs  Observation
		want v1alpha1.Color
	}{
		{
			name: "is off without spec.rollout.headerRoute",
			ms:   newModelServer(withStatus(stableOn(v1alpha1.Blue, revA, 2), inRollout(revB, 1, now.Add(-time.Second), 10))),
			obs:  newObs(revB, 2, deploy(v1alpha1.Blue, revA, 2, 2), deploy(v1alpha1.Green, revB, 1, 1)),
		},
		{
			name: "is off in steady state",
			ms:   newModelServer(withHeaderRoute(), withStatus(stableOn(v1alpha1.Blue, revA, 2), phase(v1alpha1.PhaseHealthy))),
			obs:  newObs(revA, 2, deploy(v1alpha1.Blue, revA, 2, 2)),
		},
		{
			name: "is off at step 0 while the candidate has no Ready pod",
			ms:   newModelServer(withHeaderRoute(), withPaused(true), withStatus(stableOn(v1alpha1.Blue, revA, 2), inRollout(revB, 0, now.Add(-time.Second), 0))),
			obs:  newObs(revB, 2, deploy(v1alpha1.Blue, revA, 2, 2), deploy(v1alpha1.Green, revB, 1, 0)),
		},
		{
			name: "is off at step 0 while the candidate's Ready pods are not warm",
			ms:   newModelServer(withHeaderRoute(), withPaused(true), withStatus(stableOn(v1alpha1.Blue, revA, 2), inRollout(revB, 0, now.Add(-time.Second), 0))),
			obs:  newObs(revB, 2, deploy(v1alpha1.Blue, revA, 2, 2), deploy(v1alpha1.Green, revB, 1, 1), cold(v1alpha1.Green)),
		},
		{
			name: "is on at step 0 (weight 0) once the candidate has a Ready, warm pod",
			ms:   newModelServer(withHeaderRoute(), withPaused(true), withStatus(stableOn(v1alpha1.Blue, revA, 2), inRollout(revB, 0, now.Add(-time.Second), 0))),
			obs:  newObs(revB, 2, deploy(v1alpha1.Blue, revA, 2, 2), deploy(v1alpha1.Green, revB, 1, 1)),
			want: v1alpha1.Green,
		},
		{
			name: "is on at a later step",
			ms:   newModelServer(withHeaderRoute(), withStatus(stableOn(v1alpha1.Blue, revA, 2), inRollout(revB, 2, now.Add(-time.Second), 25))),
			obs:  newObs(revB, 2, deploy(v1alpha1.Blue, revA, 2, 2), deploy(v1alpha1.Green, revB, 1, 1)),
			want: v1alpha1.Green,
		},
		{
			name: "goes to the candidate's color when blue is the candidate",
			ms:   newModelServer(withHeaderRoute(), withStatus(stableOn(v1alpha1.Green, revA, 2), inRollout(revB, 1, now.Add(-time.Second), 10))),
			obs:  newObs(revB, 2, deploy(v1alpha1.Green, revA, 2, 2), deploy(v1alpha1.Blue, revB, 1, 1)),
			want: v1alpha1.Blue,
		},
		{
			name: "is off once the candidate is promoted",
			ms:   newModelServer(withHeaderRoute(), withStatus(stableOn(v1alpha1.Blue, revA, 2), inRollout(revB, 1, now.Add(-time.Second), 10))),
			obs:  newObs(revB, 2, deploy(v1alpha1.Blue, revA, 2, 2), deploy(v1alpha1.Green, revB, 2, 2), op(OpPromoteFull)),
		},
		{
			name: "is off once the rollout is aborted",
			ms:   newModelServer(withHeaderRoute(), withStatus(stableOn(v1alpha1.Blue, revA, 2), inRollout(revB, 1, now.Add(-time.Second), 10))),
			obs:  newObs(revB, 2, deploy(v1alpha1.Blue, revA, 2, 2), deploy(v1alpha1.Green, revB, 1, 1), op(OpAbort)),
		},
		{
			name: "is off once analysis rolled the candidate back",
			ms: newModelServer(withHeaderRoute(), withFailureLimit(0), withInterval(time.Second),
				withStatus(stableOn(v1alpha1.Blue, revA, 2), inRollout(revB, 1, now.Add(-time.Second), 10))),
			obs: newObs(revB, 2, deploy(v1alpha1.Blue, revA, 2, 2), deploy(v1alpha1.Green, revB, 1, 1), measurement(now, v1alpha1.VerdictFail)),
		},
		{
			name: "stays off while a rolled-back candidate drains",
			ms: newModelServer(withHeaderRoute(), withStatus(stableOn(v1alpha1.Blue, revA, 2), rolledBack(revB, v1alpha1.OutcomeRolledBack, "ttft"),
				drainingUntil(now.Add(time.Minute)))),
			obs: newObs(revB, 2, deploy(v1alpha1.Blue, revA, 2, 2), deploy(v1alpha1.Green, revB, 1, 1)),
		},
		{
			name: "is off for a candidate superseded by a newer spec",
			ms:   newModelServer(withHeaderRoute(), withStatus(stableOn(v1alpha1.Blue, revA, 2), inRollout(revB, 1, now.Add(-time.Second), 10))),
			obs:  newObs(revC, 2, deploy(v1alpha1.Blue, revA, 2, 2), deploy(v1alpha1.Green, revB, 1, 1)),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Next(tc.ms, tc.obs, now)
			if d.HeaderRoute != tc.want {
				t.Errorf("header route to %q, want %q (phase %s, step %d, weights %+v)", d.HeaderRoute, tc.want, d.Status.Phase, d.Status.Rollout.Step, d.Weights)
			}
		})
	}
}
