package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// promotedBKeepingA: revision B was promoted on green 3 minutes ago; blue still runs A, warm,
// until the scale-down delay ends (in 7 minutes).
func promotedBKeepingA() msOption {
	return withStatus(phase(v1alpha1.PhaseHealthy), stableOn(green, revB, 7), keptWarmUntil(t0.Add(7*time.Minute)),
		func(st *v1alpha1.ModelServerStatus) {
			st.History = []v1alpha1.RevisionRecord{
				{Revision: revB, Image: "img:" + revB, Outcome: v1alpha1.OutcomePromoted, At: metav1.NewTime(t0.Add(-3 * time.Minute))},
				{Revision: revA, Image: "img:" + revA, Outcome: v1alpha1.OutcomePromoted, At: metav1.NewTime(t0.Add(-time.Hour))},
			}
		})
}

func TestRollbackToTheWarmPreviousRevisionIsInstant(t *testing.T) {
	cases := []struct {
		name string
		ms   *v1alpha1.ModelServer
		obs  Observation
		want want
	}{
		{
			name: "all traffic moves at once to the warm revision, none of its pods is scaled down, the abandoned one is kept for inspection and recorded as rolled back",
			ms:   newModelServer(promotedBKeepingA()),
			obs:  newObs(revA, 7, deploy(blue, revA, 7, 7), deploy(green, revB, 7, 7)),
			want: want{
				phase:   v1alpha1.PhaseHealthy,
				weights: w(100, 0),
				plans:   map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 7}, green: {Revision: revB, Replicas: 7}},
				events:  []string{EventRevertedToWarm},
				noEvent: []string{EventRolloutStarted, EventStepAdvanced},
				conds:   map[string]string{"Ready": "True/Available", "Progressing": "False/Reconciled"},
				check: func(t *testing.T, d Decision) {
					st := d.Status
					if st.Stable == nil || st.Stable.Color != blue || st.Stable.Revision != revA {
						t.Errorf("stable = %+v, want blue %s", st.Stable, revA)
					}
					if st.Candidate != nil || st.Rollout.Step != 0 {
						t.Errorf("candidate %+v, step %d: want none, 0", st.Candidate, st.Rollout.Step)
					}
					if len(st.History) == 0 || st.History[0].Revision != revB || st.History[0].Outcome != v1alpha1.OutcomeRolledBack {
						t.Errorf("history[0] = %+v, want %s RolledBack", st.History, revB)
					}
					if iu := st.Rollout.InspectUntil; iu == nil || !iu.Time.Equal(t0.Add(DefaultScaleDownDelay)) {
						t.Errorf("inspectUntil = %v, want the abandoned revision kept for the scale-down delay", iu)
					}
					if du := st.Rollout.DrainUntil; du == nil || !du.Time.Equal(t0.Add(RollbackDrain)) {
						t.Errorf("drainUntil = %v, want now+%s: its weight went to the warm color now", du, RollbackDrain)
					}
					if st.Rollout.KeepWarmUntil != nil {
						t.Errorf("keepWarmUntil = %v, want cleared: the warm color serves again", st.Rollout.KeepWarmUntil)
					}
				},
			},
		},
		{
			name: "with only part of the warm color Ready, it takes what its Ready pods carry and the abandoned revision drains the rest",
			ms:   newModelServer(promotedBKeepingA()),
			obs:  newObs(revA, 10, deploy(blue, revA, 7, 7), deploy(green, revB, 10, 10)),
			want: want{
				phase:   v1alpha1.PhaseProgressing,
				weights: w(70, 30),
				plans:   map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 10}, green: {Revision: revB, Replicas: 10}},
				events:  []string{EventRevertedToWarm},
				noEvent: []string{EventRolloutStarted},
				conds:   map[string]string{"Ready": "False/RolloutInProgress", "Reconciling": "True/Superseding"},
				check: func(t *testing.T, d Decision) {
					if d.Status.Stable.Revision != revA || d.Status.Candidate == nil || d.Status.Candidate.Revision != revB {
						t.Errorf("stable %+v candidate %+v: want A stable, B draining", d.Status.Stable, d.Status.Candidate)
					}
					if d.RequeueAfter == 0 || d.RequeueAfter > WarmupPollInterval {
						t.Errorf("requeue %s, want a look again soon", d.RequeueAfter)
					}
				},
			},
		},
		{
			name: "past the keep window the warm pods are gone: an ordinary progressive rollout",
			ms:   newModelServer(promotedBKeepingA()),
			obs:  newObs(revA, 7, deploy(blue, revA, 7, 7), deploy(green, revB, 7, 7)),
			want: want{phase: v1alpha1.PhaseProgressing, events: []string{EventRolloutStarted}, noEvent: []string{EventRevertedToWarm}},
		},
		{
			name: "a revision whose last outcome was not a promotion is rolled out progressively, even when warm",
			ms: newModelServer(promotedBKeepingA(), withStatus(func(st *v1alpha1.ModelServerStatus) {
				st.History[1].Outcome = v1alpha1.OutcomeSuperseded
			})),
			obs:  newObs(revA, 7, deploy(blue, revA, 7, 7), deploy(green, revB, 7, 7)),
			want: want{phase: v1alpha1.PhaseProgressing, events: []string{EventRolloutStarted}, noEvent: []string{EventRevertedToWarm}},
		},
		{
			name: "an idle color with no Ready pod is no warm revision",
			ms:   newModelServer(promotedBKeepingA()),
			obs:  newObs(revA, 7, deploy(blue, revA, 7, 0), deploy(green, revB, 7, 7)),
			want: want{phase: v1alpha1.PhaseProgressing, events: []string{EventRolloutStarted}, noEvent: []string{EventRevertedToWarm}},
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			if i == 2 {
				now = t0.Add(8 * time.Minute)
			}
			d := next(tc.ms, tc.obs, now)
			checkWant(t, d, tc.want)
		})
	}
}

// TestInstantRollbackDrainsThenSettles follows a partial instant rollback to its end, then a
// new apply of the abandoned revision, which is rolled out progressively (it was rolled back).
func TestInstantRollbackDrainsThenSettles(t *testing.T) {
	ms := newModelServer(promotedBKeepingA())
	d := next(ms, newObs(revA, 10, deploy(blue, revA, 7, 7), deploy(green, revB, 10, 10)), t0)
	ms.Status = d.Status
	if ms.Status.Weights.Candidate != 30 {
		t.Fatalf("weights %+v after the revert, want B draining 30", ms.Status.Weights)
	}

	// Blue's new pods come up: 9 of 10 carry 90.
	d = next(ms, newObs(revA, 10, deploy(blue, revA, 10, 9), deploy(green, revB, 10, 10)), t0.Add(5*time.Second))
	checkWant(t, d, want{phase: v1alpha1.PhaseProgressing, weights: w(90, 10), noEvent: []string{EventRolloutStarted, EventRevertedToWarm}})
	ms.Status = d.Status

	// All Ready: done; green keeps its pods until the scale-down delay.
	d = next(ms, newObs(revA, 10, deploy(blue, revA, 10, 10), deploy(green, revB, 10, 10)), t0.Add(10*time.Second))
	checkWant(t, d, want{
		phase: v1alpha1.PhaseHealthy, weights: w(100, 0),
		plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 10}, green: {Revision: revB, Replicas: 10}},
		conds: map[string]string{"Ready": "True/Available"},
	})
	if d.Status.Candidate != nil || d.Status.Rollout.RolledBackRevision != "" {
		t.Errorf("candidate %+v rolledBack %q: want none once drained", d.Status.Candidate, d.Status.Rollout.RolledBackRevision)
	}
	ms.Status = d.Status

	// B applied again: it was rolled back, so it is judged step by step, on the color that
	// still runs it.
	d = next(ms, newObs(revB, 10, deploy(blue, revA, 10, 10), deploy(green, revB, 10, 10)), t0.Add(time.Minute))
	checkWant(t, d, want{phase: v1alpha1.PhaseProgressing, events: []string{EventRolloutStarted}, noEvent: []string{EventRevertedToWarm}})
	if c := d.Status.Candidate; c == nil || c.Color != green || c.Revision != revB {
		t.Errorf("candidate %+v, want B on green", c)
	}
}

// TestEditedStepsNeverMoveTheWeightBackwards: steps edited mid-rollout keep the weight the
// candidate holds and go on to the first step above it.
func TestEditedStepsNeverMoveTheWeightBackwards(t *testing.T) {
	// At step 3 of 10,25,50,100: the candidate holds 50%.
	at50 := withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 3, t0.Add(-time.Minute), 50),
		func(st *v1alpha1.ModelServerStatus) { st.Rollout.StepWeight = 50 })
	obs := newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4))
	cases := []struct {
		name     string
		steps    []int32
		next     int32
		wantStep int32
	}{
		{"shortened to 10,100: holds 50%, promotion next", []int32{10, 100}, 100, 1},
		{"changed to 10,40,100: holds 50% (not 40), promotion next", []int32{10, 40, 100}, 100, 2},
		{"changed to 60,100: holds 50% (not 60 unjudged), 60 next", []int32{60, 100}, 60, 1},
		{"lengthened to 10,25,50,75,100: holds 50%, 75 next", []int32{10, 25, 50, 75, 100}, 75, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := next(newModelServer(withSteps(tc.steps...), at50), obs, t0)
			checkWant(t, d, want{phase: v1alpha1.PhaseProgressing, weights: w(50, 50), step: i32(tc.wantStep)})
			if d.Status.Rollout.StepWeight != 50 {
				t.Errorf("stepWeight = %d, want 50", d.Status.Rollout.StepWeight)
			}
			// A passing measurement after the step's time goes to the next step above 50.
			ms := newModelServer(withSteps(tc.steps...), withStepDuration(time.Minute), at50)
			ms.Status = d.Status
			ms.Status.Rollout.StepStartedAt = mt(t0.Add(-time.Hour))
			// The candidate runs the pods that carry 75% at a stable pod's load (12 beside 4).
			d = next(ms, newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 12, 12), measurement(t0.Add(time.Second), pass)), t0.Add(time.Second))
			got := d.Status.Weights.Candidate
			if tc.next == 100 {
				if d.Status.Phase != v1alpha1.PhaseHealthy {
					t.Errorf("phase %s weights %+v, want promoted", d.Status.Phase, d.Status.Weights)
				}
				return
			}
			if got != tc.next || d.Status.Rollout.StepWeight != tc.next {
				t.Errorf("after a pass: candidate weight %d stepWeight %d, want %d", got, d.Status.Rollout.StepWeight, tc.next)
			}
		})
	}
}

// TestAFixForADeadStableCarriesWhatItsWarmPodsCan: the stable color served and lost every pod
// (Degraded); a candidate shipped then carries what its Ready, warm pods carry, whatever its
// step, and is sized for all traffic.
func TestAFixForADeadStableCarriesWhatItsWarmPodsCan(t *testing.T) {
	dead := withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Second), 10),
		func(st *v1alpha1.ModelServerStatus) {
			st.Stable.ReadyReplicas = 0
			st.Conditions = append(st.Conditions, metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonDeploymentsNotReady})
		})
	d := next(newModelServer(withSteps(10, 50, 100), dead), newObs(revB, 4, deploy(blue, revA, 4, 0), deploy(green, revB, 3, 3)), t0)
	checkWant(t, d, want{
		phase: v1alpha1.PhaseProgressing, weights: w(25, 75), step: i32(1),
		plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 4}},
		conds: map[string]string{"Degraded": "True/DeploymentsNotReady"},
		check: func(t *testing.T, d Decision) {
			if c := cond(d.Status, v1alpha1.ConditionReconciling); c == nil || !strings.Contains(c.Message, "absolute bounds only") {
				t.Errorf("Reconciling %+v, want it to say the candidate is judged on absolute bounds only", c)
			}
		},
	})

	// A stable color coming up from zero is not dead: the step's weight holds.
	fromZero := withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 0), inRollout(revB, 1, t0.Add(-time.Second), 10),
		func(st *v1alpha1.ModelServerStatus) { st.Stable.Replicas = 0 })
	d = next(newModelServer(withSteps(10, 50, 100), fromZero), newObs(revB, 4, deploy(blue, revA, 4, 0), deploy(green, revB, 3, 3)), t0)
	checkWant(t, d, want{weights: w(90, 10)})
}
