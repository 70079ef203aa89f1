package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

const (
	blue  = v1alpha1.Blue
	green = v1alpha1.Green
	pass  = v1alpha1.VerdictPass
	fail  = v1alpha1.VerdictFail
	inc   = v1alpha1.VerdictInconclusive
)

type want struct {
	phase   v1alpha1.Phase
	weights map[v1alpha1.Color]int32 // nil: not checked
	plans   map[v1alpha1.Color]ColorPlan
	step    *int32
	requeue *time.Duration
	events  []string          // reasons that must be among the events
	noEvent []string          // reasons that must not be
	conds   map[string]string // condition type -> "True/Reason"
	keepOp  bool
	check   func(t *testing.T, d Decision)
}

func i32(v int32) *int32                    { return &v }
func dur(d time.Duration) *time.Duration    { return &d }
func w(b, g int32) map[v1alpha1.Color]int32 { return map[v1alpha1.Color]int32{blue: b, green: g} }

func TestNext(t *testing.T) {
	steps := withSteps(10, 50, 100)
	healthyA := withStatus(phase(v1alpha1.PhaseHealthy), stableOn(blue, revA, 4))
	cases := []struct {
		name string
		ms   *v1alpha1.ModelServer
		obs  Observation
		now  time.Time
		want want
	}{
		// First revision.
		{
			name: "the first pass puts the first revision on blue with all traffic and is Pending until available",
			ms:   newModelServer(),
			obs:  newObs(revA, 3),
			now:  t0,
			want: want{
				phase: v1alpha1.PhasePending, weights: w(100, 0),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 3}},
				conds: map[string]string{"Ready": "False/DeploymentsNotReady", "Reconciling": "True/DeploymentsNotReady", "Stalled": "False/Reconciled", "Degraded": "False/Available", "Progressing": "True/DeploymentsNotReady"},
				check: func(t *testing.T, d Decision) {
					if d.Status.Stable == nil || d.Status.Stable.Color != blue || d.Status.Stable.Revision != revA || d.Status.Stable.Image != "img:"+revA {
						t.Errorf("stable = %+v, want blue %s", d.Status.Stable, revA)
					}
				},
			},
		},
		{
			name: "the first revision stays Pending while only some replicas are available",
			ms:   newModelServer(withStatus(phase(v1alpha1.PhasePending), stableOn(blue, revA, 0))),
			obs:  newObs(revA, 3, deploy(blue, revA, 3, 2)),
			now:  t0,
			want: want{phase: v1alpha1.PhasePending, conds: map[string]string{"Ready": "False/DeploymentsNotReady", "Degraded": "False/Available"}},
		},
		{
			name: "the first revision becomes Healthy and Ready once blue has all replicas available",
			ms:   newModelServer(withStatus(phase(v1alpha1.PhasePending), stableOn(blue, revA, 0))),
			obs:  newObs(revA, 3, deploy(blue, revA, 3, 3)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseHealthy, weights: w(100, 0), requeue: dur(0), conds: map[string]string{"Ready": "True/Available", "Reconciling": "False/Reconciled", "Progressing": "False/Reconciled"}},
		},
		{
			name: "a desired total of zero is Healthy at once with no pods",
			ms:   newModelServer(),
			obs:  newObs(revA, 0),
			now:  t0,
			want: want{phase: v1alpha1.PhaseHealthy, plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 0}}, conds: map[string]string{"Ready": "True/Available"}},
		},
		{
			name: "a template change before the first revision ever served replaces it on blue without a rollout",
			ms:   newModelServer(withStatus(phase(v1alpha1.PhasePending), stableOn(blue, revA, 0))),
			obs:  newObs(revB, 2, deploy(blue, revA, 2, 0)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhasePending, weights: w(100, 0), events: []string{EventStableReplaced},
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revB, Replicas: 2}},
				check: func(t *testing.T, d Decision) {
					if d.Status.Candidate != nil || d.Status.Stable.Revision != revB {
						t.Errorf("stable %+v candidate %+v, want stable %s and no candidate", d.Status.Stable, d.Status.Candidate, revB)
					}
				},
			},
		},
		{
			name: "a template change while the first revision already has Ready pods starts a rollout",
			ms:   newModelServer(withStatus(phase(v1alpha1.PhasePending), stableOn(blue, revA, 0))),
			obs:  newObs(revB, 2, deploy(blue, revA, 2, 1)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, weights: w(100, 0), events: []string{EventRolloutStarted}, noEvent: []string{EventStableReplaced}},
		},
		// Steady state.
		{
			name: "a stable that served and lost every Ready pod is Degraded",
			ms:   newModelServer(healthyA),
			obs:  newObs(revA, 4, deploy(blue, revA, 4, 0)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseDegraded, conds: map[string]string{"Degraded": "True/DeploymentsNotReady", "Ready": "False/DeploymentsNotReady", "Reconciling": "True/DeploymentsNotReady"}},
		},
		{
			name: "scaling up from zero is Pending, not Degraded",
			ms:   newModelServer(withStatus(phase(v1alpha1.PhaseHealthy), stableOn(blue, revA, 0))),
			obs:  newObs(revA, 2, deploy(blue, revA, 2, 0)),
			now:  t0,
			want: want{phase: v1alpha1.PhasePending, conds: map[string]string{"Degraded": "False/Available"}},
		},
		{
			name: "scaling up a serving stable stays Healthy but not Ready while pods come up",
			ms:   newModelServer(healthyA),
			obs:  newObs(revA, 6, deploy(blue, revA, 6, 4)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseHealthy, conds: map[string]string{"Ready": "False/DeploymentsNotReady", "Reconciling": "True/DeploymentsNotReady", "Degraded": "False/Available"}},
		},
		{
			name: "the previous stable is kept warm at its replicas until keepWarmUntil, which is the requeue",
			ms:   newModelServer(withStatus(phase(v1alpha1.PhaseHealthy), stableOn(green, revB, 4), keptWarmUntil(t0.Add(3*time.Minute)))),
			obs:  newObs(revB, 4, deploy(green, revB, 4, 4), deploy(blue, revA, 4, 4)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseHealthy, weights: w(0, 100), requeue: dur(3 * time.Minute),
				plans: map[v1alpha1.Color]ColorPlan{green: {Revision: revB, Replicas: 4}, blue: {Revision: revA, Replicas: 4}},
			},
		},
		{
			name: "the previous stable scales to zero at keepWarmUntil, which is then cleared",
			ms:   newModelServer(withStatus(phase(v1alpha1.PhaseHealthy), stableOn(green, revB, 4), keptWarmUntil(t0))),
			obs:  newObs(revB, 4, deploy(green, revB, 4, 4), deploy(blue, revA, 4, 4)),
			now:  t0,
			want: want{
				requeue: dur(0),
				plans:   map[v1alpha1.Color]ColorPlan{green: {Revision: revB, Replicas: 4}, blue: {Revision: revA, Replicas: 0}},
				check: func(t *testing.T, d Decision) {
					if d.Status.Rollout.KeepWarmUntil != nil {
						t.Errorf("keepWarmUntil = %v, want cleared", d.Status.Rollout.KeepWarmUntil)
					}
				},
			},
		},
		{
			name: "a spec reverted to the stable revision mid-rollout sends all traffic to stable and keeps the candidate's pods while the route drains",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Minute), 50))),
			obs:  newObs(revA, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), events: []string{EventSuperseded}, requeue: dur(RollbackDrain),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 4}},
				conds: map[string]string{"Reconciling": "True/Superseding"},
				check: func(t *testing.T, d Decision) {
					if du := d.Status.Rollout.DrainUntil; du == nil || !du.Time.Equal(t0.Add(RollbackDrain)) {
						t.Errorf("drainUntil = %v, want %v", du, t0.Add(RollbackDrain))
					}
				},
			},
		},
		{
			name: "a spec reverted to the stable revision scales the superseded candidate down once its drain is over",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Minute), 0),
				drainingUntil(t0), condition("Reconciling", "True", v1alpha1.ReasonSuperseding))),
			obs: newObs(revA, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseHealthy, weights: w(100, 0), step: i32(0), events: []string{EventSuperseded},
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 0}},
				check: func(t *testing.T, d Decision) {
					if d.Status.Candidate != nil {
						t.Errorf("candidate = %+v, want cleared", d.Status.Candidate)
					}
					if h := d.Status.History; len(h) == 0 || h[0].Revision != revB || h[0].Outcome != v1alpha1.OutcomeSuperseded {
						t.Errorf("history = %+v, want %s Superseded first", h, revB)
					}
					if d.Status.Rollout.DrainUntil != nil {
						t.Errorf("drainUntil = %v, want cleared", d.Status.Rollout.DrainUntil)
					}
				},
			},
		},
		{
			name: "a candidate superseded before it had weight gives way at once",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-time.Minute), 0))),
			obs:  newObs(revC, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 1, 1)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), step: i32(0), events: []string{EventSuperseded, EventRolloutStarted},
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revC, Replicas: 1}},
			},
		},
		// A new rollout.
		{
			name: "a new revision starts a rollout on the other color, warming with no weight",
			ms:   newModelServer(steps, healthyA),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), step: i32(0), requeue: dur(WarmupPollInterval),
				plans:  map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 1}},
				events: []string{EventRolloutStarted},
				conds:  map[string]string{"Reconciling": "True/WarmingUp", "Progressing": "True/WarmingUp", "Ready": "False/RolloutInProgress", "Stalled": "False/Reconciled"},
				check: func(t *testing.T, d Decision) {
					c := d.Status.Candidate
					if c == nil || c.Color != green || c.Revision != revB || c.Image != "img:"+revB {
						t.Fatalf("candidate = %+v, want green %s", c, revB)
					}
					if !d.Status.Rollout.StepStartedAt.Time.Equal(t0) {
						t.Errorf("StepStartedAt = %v, want %v", d.Status.Rollout.StepStartedAt, t0)
					}
				},
			},
		},
		{
			name: "a newer revision mid-rollout sends all traffic to stable and waits while the superseded candidate's route drains",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Minute), 50), failures(1), measured(t0.Add(-10*time.Second), fail))),
			obs:  newObs(revC, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), events: []string{EventSuperseded}, noEvent: []string{EventRolloutStarted}, requeue: dur(RollbackDrain),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 2}},
				conds: map[string]string{"Reconciling": "True/Superseding"},
			},
		},
		{
			name: "a newer revision restarts at warm-up with a clean slate once the superseded candidate has drained",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Minute), 0), failures(1),
				measured(t0.Add(-10*time.Second), fail), drainingUntil(t0.Add(-time.Second)), condition("Reconciling", "True", v1alpha1.ReasonSuperseding))),
			obs: newObs(revC, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), step: i32(0), events: []string{EventSuperseded, EventRolloutStarted},
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revC, Replicas: 1}},
				check: func(t *testing.T, d Decision) {
					if d.Status.Candidate.Revision != revC || d.Status.Rollout.Failures != 0 || d.Status.Rollout.Analysis != nil {
						t.Errorf("candidate %s failures %d analysis %v, want %s with a clean slate", d.Status.Candidate.Revision, d.Status.Rollout.Failures, d.Status.Rollout.Analysis, revC)
					}
					if d.Status.History[0].Revision != revB || d.Status.History[0].Outcome != v1alpha1.OutcomeSuperseded {
						t.Errorf("history[0] = %+v, want %s Superseded", d.Status.History[0], revB)
					}
					if d.Status.Rollout.DrainUntil != nil {
						t.Errorf("drainUntil = %v, want cleared", d.Status.Rollout.DrainUntil)
					}
				},
			},
		},
		{
			name: "a new revision after a rolled back one clears RolledBackRevision",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeRolledBack, "ttft"))),
			obs:  newObs(revC, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 0, 0)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, noEvent: []string{EventSuperseded},
				conds: map[string]string{"Stalled": "False/Reconciled"},
				check: func(t *testing.T, d Decision) {
					if d.Status.Rollout.RolledBackRevision != "" || d.Status.Candidate.Revision != revC {
						t.Errorf("rolledBack %q candidate %s, want cleared and %s", d.Status.Rollout.RolledBackRevision, d.Status.Candidate.Revision, revC)
					}
				},
			},
		},
		// Warm-up (step 0).
		{
			name: "the warm-up advances to step 1 once the candidate is Ready and warm for the first weight",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-time.Minute), 0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 1, 1)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(90, 10), step: i32(1), events: []string{EventStepAdvanced},
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 4}},
				conds: map[string]string{"Reconciling": "True/Analyzing"},
				check: func(t *testing.T, d Decision) {
					if !d.Status.Rollout.StepStartedAt.Time.Equal(t0) {
						t.Errorf("StepStartedAt = %v, want now", d.Status.Rollout.StepStartedAt)
					}
					if d.Status.Weights != (v1alpha1.Weights{Stable: 90, Candidate: 10}) {
						t.Errorf("status weights = %+v", d.Status.Weights)
					}
				},
			},
		},
		{
			name: "the warm-up does not advance while the Ready pods have not passed the warm-up check",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-time.Minute), 0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 1, 1), cold(green)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, weights: w(100, 0), step: i32(0), requeue: dur(WarmupPollInterval), conds: map[string]string{"Reconciling": "True/WarmingUp"}},
		},
		{
			name: "the warm-up does not advance while the candidate's EndpointSlices list no ready endpoint, whatever its Ready pods",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-time.Minute), 0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 1, 1), endpoints(green, 0)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, weights: w(100, 0), step: i32(0), noEvent: []string{EventStepAdvanced}},
		},
		{
			name: "the warm-up advances once the candidate's EndpointSlices list a ready endpoint",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-time.Minute), 0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 1, 1), endpoints(green, 1)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, weights: w(90, 10), step: i32(1), events: []string{EventStepAdvanced}},
		},
		{
			name: "a candidate whose endpoints stop being ready loses its weight at once, though its pods report Ready",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Minute), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), endpoints(green, 0)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, weights: w(100, 0), step: i32(1), events: []string{EventCandidateUnready}},
		},
		{
			name: "the warm-up does not count Ready pods of the template being replaced",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-time.Minute), 0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 3), updated(green, 1)),
			now:  t0,
			want: want{step: i32(0), weights: w(100, 0)},
		},
		{
			name: "the warm-up does not count pods of a Deployment still running another revision",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-time.Minute), 0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revC, 4, 4)),
			now:  t0,
			want: want{step: i32(0), weights: w(100, 0)},
		},
		{
			name: "the progress deadline rolls back a candidate that never becomes Ready, at once to zero: it never had weight to drain",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-30*time.Minute), 0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 1, 0)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), events: []string{EventRolledBack}, requeue: dur(0),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 0}},
				conds: map[string]string{"Stalled": "True/RolledBack", "Ready": "False/RolledBack", "Reconciling": "False/RolledBack", "Progressing": "False/RolledBack"},
				check: func(t *testing.T, d Decision) {
					if !strings.Contains(d.Status.History[0].Reason, v1alpha1.ReasonProgressDeadline) {
						t.Errorf("history reason %q, want it to name %s", d.Status.History[0].Reason, v1alpha1.ReasonProgressDeadline)
					}
					if ro := d.Status.Rollout; ro.DrainUntil != nil || ro.InspectUntil != nil {
						t.Errorf("drainUntil %v inspectUntil %v, want none: the candidate never had traffic", ro.DrainUntil, ro.InspectUntil)
					}
				},
			},
		},
		{
			name: "the warm-up requeues at the progress deadline when it is nearer than the poll",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-30*time.Minute+2*time.Second), 0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, requeue: dur(2 * time.Second)},
		},
		{
			name: "a single step of 100 warms the candidate to the full total and then promotes at once",
			ms:   newModelServer(withSteps(100), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-time.Minute), 0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseHealthy, weights: w(0, 100), events: []string{EventPromoted}},
		},
		{
			name: "a single step of 100 sizes the warming candidate for the full total",
			ms:   newModelServer(withSteps(100), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-time.Minute), 0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 3)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, weights: w(100, 0), plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 4}}},
		},
		// Held steps.
		{
			name: "a step is held until its duration has elapsed even with passing analysis",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Minute), 10), measured(t0.Add(-30*time.Second), pass))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, weights: w(90, 10), step: i32(1), requeue: dur(time.Minute)}, // the step's window (opened 1m after its start) spans 4m then
		},
		{
			name: "a step advances after its duration with a passing measurement taken in the step",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-2*time.Minute), 10), measured(t0.Add(-30*time.Second), pass))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(50, 50), step: i32(2), events: []string{EventStepAdvanced},
				plans:   map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 4}},
				requeue: dur(2 * time.Minute), // the step's end; its window opens 1m after the switch and is first read 4m later
			},
		},
		{
			name: "a step does not advance on a passing measurement taken before the step started",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-2*time.Minute), 10), measured(t0.Add(-3*time.Minute), pass))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4)),
			now:  t0,
			want: want{step: i32(1), weights: w(90, 10), requeue: dur(2 * time.Minute)},
		},
		{
			name: "a measurement without results (no metric configured) passes",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-2*time.Minute), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), emptyMeasurement(t0)),
			now:  t0,
			want: want{step: i32(2), weights: w(50, 50)},
		},
		{
			name: "a step does not advance until the candidate is Ready for the next weight, and polls meanwhile",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-2*time.Minute), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 3), measurement(t0, pass)),
			now:  t0,
			want: want{step: i32(1), weights: w(90, 10), requeue: dur(WarmupPollInterval), plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 4}}},
		},
		{
			name: "a candidate that cannot grow for its next weight is rolled back after the progress deadline",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-32*time.Minute), 10), measured(t0.Add(-time.Second), pass))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 1)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseRolledBack, weights: w(100, 0)},
		},
		{
			name: "a failed measurement within the failure limit holds the step and is counted",
			ms:   newModelServer(steps, withFailureLimit(1), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-2*time.Minute), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass, fail)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, step: i32(1), weights: w(90, 10), events: []string{EventAnalysisFailed}, requeue: dur(2 * time.Minute),
				check: func(t *testing.T, d Decision) {
					if d.Status.Rollout.Failures != 1 || !d.Status.Rollout.LastMeasuredAt.Time.Equal(t0) || len(d.Status.Rollout.Analysis) != 2 {
						t.Errorf("failures %d lastMeasured %v analysis %d, want 1, now, 2", d.Status.Rollout.Failures, d.Status.Rollout.LastMeasuredAt, len(d.Status.Rollout.Analysis))
					}
				},
			},
		},
		{
			name: "a failed measurement beyond the failure limit rolls back with the metric, value and bound in the reason",
			ms:   newModelServer(steps, withFailureLimit(1), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Minute), 50), failures(1))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, fail)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), step: i32(0), events: []string{EventRolledBack}, requeue: dur(RollbackDrain),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 4}},
				conds: map[string]string{"Stalled": "True/RolledBack", "Ready": "False/RolledBack", "Reconciling": "False/RolledBack"},
				check: func(t *testing.T, d Decision) {
					st := d.Status
					if st.Rollout.RolledBackRevision != revB || st.Candidate == nil || st.Candidate.Replicas != 4 {
						t.Errorf("rolledBack %q candidate %+v, want %s kept at its 4 replicas while it drains", st.Rollout.RolledBackRevision, st.Candidate, revB)
					}
					r := st.History[0]
					if r.Outcome != v1alpha1.OutcomeRolledBack || !strings.Contains(r.Reason, "ttft-p95 = 0.9") || !strings.Contains(r.Reason, "<= 0.5") {
						t.Errorf("history[0] = %+v, want RolledBack naming metric, value and bound", r)
					}
					if msg := cond(st, "Stalled").Message; !strings.Contains(msg, "ttft-p95") {
						t.Errorf("Stalled message %q, want the metric", msg)
					}
				},
			},
		},
		{
			name: "a rollback moves all weight to stable at once but keeps the candidate at its replicas for RollbackDrain, then looks again",
			ms:   newModelServer(steps, withFailureLimit(0), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Minute), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, fail)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), events: []string{EventRolledBack}, requeue: dur(RollbackDrain),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 2}},
				check: func(t *testing.T, d Decision) {
					st := d.Status
					if st.Rollout.DrainUntil == nil || !st.Rollout.DrainUntil.Time.Equal(t0.Add(RollbackDrain)) || st.Rollout.InspectUntil != nil {
						t.Errorf("drainUntil = %v inspectUntil %v, want now+%s and none", st.Rollout.DrainUntil, st.Rollout.InspectUntil, RollbackDrain)
					}
					if st.Weights != (v1alpha1.Weights{Stable: 100}) || st.Candidate.Replicas != 2 {
						t.Errorf("weights %+v candidate %+v, want all on stable and the candidate at 2 replicas", st.Weights, st.Candidate)
					}
					for _, e := range d.Events {
						if e.Reason == EventRolledBack && !strings.Contains(e.Message, "candidate drained until 2026-03-01T12:00:15Z") {
							t.Errorf("RolledBack event %q does not say until when the candidate drains", e.Message)
						}
					}
				},
			},
		},
		{
			name: "a failure limit of zero rolls back on the first failed measurement",
			ms:   newModelServer(steps, withFailureLimit(0), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Minute), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, fail)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseRolledBack, weights: w(100, 0)},
		},
		{
			name: "an inconclusive measurement holds the step and records since when",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-5*time.Minute), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, pass, inc)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, step: i32(1), weights: w(90, 10), events: []string{EventAnalysisInconclusive},
				conds: map[string]string{"Reconciling": "True/Inconclusive", "Progressing": "True/Inconclusive"},
				check: func(t *testing.T, d Decision) {
					if d.Status.Rollout.InconclusiveSince == nil || !d.Status.Rollout.InconclusiveSince.Time.Equal(t0) || d.Status.Rollout.Failures != 0 {
						t.Errorf("InconclusiveSince %v failures %d, want now and 0", d.Status.Rollout.InconclusiveSince, d.Status.Rollout.Failures)
					}
				},
			},
		},
		{
			name: "a later inconclusive measurement keeps the first InconclusiveSince and never rolls back without a deadline",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-5*time.Hour), 10), inconclusiveSince(t0.Add(-4*time.Hour)))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, inc)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, step: i32(1), noEvent: []string{EventAnalysisInconclusive},
				check: func(t *testing.T, d Decision) {
					if !d.Status.Rollout.InconclusiveSince.Time.Equal(t0.Add(-4 * time.Hour)) {
						t.Errorf("InconclusiveSince = %v, want unchanged", d.Status.Rollout.InconclusiveSince)
					}
				},
			},
		},
		{
			name: "holding on inconclusive analysis past inconclusive.rollbackAfter rolls back",
			ms:   newModelServer(steps, withInconclusiveRollbackAfter(10*time.Minute), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Hour), 10), inconclusiveSince(t0.Add(-10*time.Minute)), measured(t0.Add(-20*time.Second), inc))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0),
				check: func(t *testing.T, d Decision) {
					if !strings.Contains(d.Status.History[0].Reason, "inconclusive") {
						t.Errorf("reason %q, want inconclusive", d.Status.History[0].Reason)
					}
				},
			},
		},
		{
			name: "holding on inconclusive analysis requeues at the inconclusive deadline",
			ms:   newModelServer(steps, withInconclusiveRollbackAfter(10*time.Minute), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Hour), 10), inconclusiveSince(t0.Add(-10*time.Minute+3*time.Second)), measured(t0, inc))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, requeue: dur(3 * time.Second)},
		},
		{
			name: "a passing measurement clears InconclusiveSince",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Minute), 10), inconclusiveSince(t0.Add(-time.Minute)))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, pass)),
			now:  t0,
			want: want{check: func(t *testing.T, d Decision) {
				if d.Status.Rollout.InconclusiveSince != nil {
					t.Errorf("InconclusiveSince = %v, want cleared", d.Status.Rollout.InconclusiveSince)
				}
			}},
		},
		{
			name: "the last held step promotes: the candidate color becomes stable and the old stable stays warm until keepWarmUntil",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-2*time.Minute), 50))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseHealthy, weights: w(0, 100), step: i32(0), events: []string{EventPromoted}, requeue: dur(DefaultScaleDownDelay),
				plans: map[v1alpha1.Color]ColorPlan{green: {Revision: revB, Replicas: 4}, blue: {Revision: revA, Replicas: 4}},
				conds: map[string]string{"Ready": "True/Available", "Reconciling": "False/Reconciled", "Progressing": "False/Promoted", "Degraded": "False/Available"},
				check: func(t *testing.T, d Decision) {
					st := d.Status
					if st.Stable.Color != green || st.Stable.Revision != revB || st.Candidate != nil {
						t.Errorf("stable %+v candidate %+v, want green %s and none", st.Stable, st.Candidate, revB)
					}
					if st.Rollout.KeepWarmUntil == nil || !st.Rollout.KeepWarmUntil.Time.Equal(t0.Add(DefaultScaleDownDelay)) {
						t.Errorf("keepWarmUntil = %v, want now+10m", st.Rollout.KeepWarmUntil)
					}
					if st.History[0].Outcome != v1alpha1.OutcomePromoted || st.History[0].Revision != revB {
						t.Errorf("history[0] = %+v, want %s Promoted", st.History[0], revB)
					}
					if st.Weights != (v1alpha1.Weights{Stable: 100}) {
						t.Errorf("status weights = %+v, want all on stable", st.Weights)
					}
				},
			},
		},
		{
			name: "with autoPromote false the rollout waits for a human before the last step",
			ms:   newModelServer(steps, withAutoPromote(false), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-2*time.Minute), 50))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseAwaitingPromotion, weights: w(50, 50), step: i32(2), events: []string{EventAwaitingPromotion}, requeue: dur(3 * time.Minute),
				conds: map[string]string{"Reconciling": "False/AwaitingPromotion", "Progressing": "False/AwaitingPromotion", "Ready": "False/AwaitingPromotion", "Stalled": "False/Reconciled"},
			},
		},
		{
			name: "awaiting promotion, a passing measurement holds with no event until someone promotes",
			ms:   newModelServer(steps, withAutoPromote(false), withStatus(phase(v1alpha1.PhaseAwaitingPromotion), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Hour), 50))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseAwaitingPromotion, weights: w(50, 50), requeue: dur(DefaultAnalysisInterval), check: func(t *testing.T, d Decision) {
				if len(d.Events) != 0 || d.Status.Rollout.Failures != 0 || d.Status.Rollout.LastMeasuredAt == nil {
					t.Errorf("events %v failures %d lastMeasured %v, want none, 0, the measurement recorded", d.Events, d.Status.Rollout.Failures, d.Status.Rollout.LastMeasuredAt)
				}
			}},
		},
		{
			name: "awaiting promotion, a candidate that degrades is still judged and rolled back past the failure limit",
			ms:   newModelServer(steps, withAutoPromote(false), withStatus(phase(v1alpha1.PhaseAwaitingPromotion), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Hour), 50))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, fail)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), events: []string{EventRolledBack}, check: func(t *testing.T, d Decision) {
				if h := d.Status.History; len(h) == 0 || !strings.Contains(h[0].Reason, "while awaiting promotion") {
					t.Errorf("history %+v, want the rollback's reason to say it happened while awaiting promotion", h)
				}
			}},
		},
		{
			name: "autoPromote turned on while awaiting promotion does not promote without a measurement taken since",
			ms:   newModelServer(steps, withAutoPromote(true), withStatus(phase(v1alpha1.PhaseAwaitingPromotion), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Hour), 50), measured(t0.Add(-10*time.Minute), pass))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseAwaitingPromotion, weights: w(50, 50), noEvent: []string{EventPromoted}},
		},
		{
			name: "autoPromote turned on while awaiting promotion promotes on a passing measurement taken since",
			ms:   newModelServer(steps, withAutoPromote(true), withStatus(phase(v1alpha1.PhaseAwaitingPromotion), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Hour), 50), measured(t0.Add(-10*time.Minute), pass))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseHealthy, weights: w(0, 100), events: []string{EventPromoted}},
		},
		{
			name: "a Promote request while awaiting promotion promotes",
			ms:   newModelServer(steps, withAutoPromote(false), withStatus(phase(v1alpha1.PhaseAwaitingPromotion), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Hour), 50))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), op(OpPromote)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseHealthy, weights: w(0, 100), events: []string{EventPromoted}},
		},
		// Operations.
		{
			name: "a Promote request advances one step now, ignoring the step timer and analysis",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Second), 10), measured(t0, fail), failures(1))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), op(OpPromote)),
			now:  t0,
			want: want{step: i32(2), weights: w(50, 50), keepOp: false},
		},
		{
			name: "a Promote request waits, sized and kept, until the candidate is Ready for the next weight",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Second), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 3), op(OpPromote)),
			now:  t0,
			want: want{step: i32(1), weights: w(90, 10), keepOp: true, requeue: dur(WarmupPollInterval), plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 4}}},
		},
		{
			name: "a PromoteFull request promotes now from any step",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Second), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), op(OpPromoteFull)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseHealthy, weights: w(0, 100), events: []string{EventPromoted}, keepOp: false},
		},
		{
			name: "a PromoteFull request sizes the candidate for all traffic and is kept until it is Ready",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Second), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), op(OpPromoteFull)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, weights: w(90, 10), keepOp: true, plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 4}}},
		},
		{
			name: "an Abort request sends all traffic to stable at once and keeps the candidate at its replicas until the scale-down delay",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Second), 50))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), op(OpAbort)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), events: []string{EventAborted}, requeue: dur(DefaultScaleDownDelay),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 4}},
				conds: map[string]string{"Stalled": "True/Aborted", "Ready": "False/Aborted"},
				check: func(t *testing.T, d Decision) {
					if d.Status.History[0].Outcome != v1alpha1.OutcomeAborted || d.Status.Rollout.RolledBackRevision != revB {
						t.Errorf("history[0] %+v rolledBack %q, want Aborted %s", d.Status.History[0], d.Status.Rollout.RolledBackRevision, revB)
					}
					if iu := d.Status.Rollout.InspectUntil; iu == nil || !iu.Time.Equal(t0.Add(DefaultScaleDownDelay)) {
						t.Errorf("inspectUntil = %v, want now+%s (the scale-down delay)", iu, DefaultScaleDownDelay)
					}
					// Its 50% went to stable in this pass: the route drains as after a rollback.
					if du := d.Status.Rollout.DrainUntil; du == nil || !du.Time.Equal(t0.Add(RollbackDrain)) {
						t.Errorf("drainUntil = %v, want now+%s", du, RollbackDrain)
					}
				},
			},
		},
		{
			name: "an Abort request acts while the rollout is paused",
			ms:   newModelServer(steps, withPaused(true), withStatus(phase(v1alpha1.PhasePaused), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Second), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), op(OpAbort)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseRolledBack, weights: w(100, 0)},
		},
		// Rolled back hold.
		{
			name: "a rolled back revision stays RolledBack while the spec asks for it, without retrying",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeRolledBack, "ttft-p95 = 0.9"))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 0, 0)),
			now:  t0.Add(time.Hour),
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), requeue: dur(0),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 0}},
				conds: map[string]string{"Stalled": "True/RolledBack", "Ready": "False/RolledBack", "Reconciling": "False/RolledBack"},
				check: func(t *testing.T, d Decision) {
					if len(d.Events) != 0 || d.Status.Candidate == nil || d.Status.Candidate.Revision != revB {
						t.Errorf("events %v candidate %+v, want no events and %s kept", d.Events, d.Status.Candidate, revB)
					}
					if msg := cond(d.Status, "Stalled").Message; !strings.Contains(msg, "ttft-p95 = 0.9") {
						t.Errorf("Stalled message %q, want the rollback reason", msg)
					}
				},
			},
		},
		{
			name: "a rolled back candidate keeps its replicas without weight until drainUntil, which is the requeue",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeRolledBack, "ttft"), drainingUntil(t0.Add(5*time.Second)))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), requeue: dur(5 * time.Second),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 2}},
				conds: map[string]string{"Stalled": "True/RolledBack"},
			},
		},
		{
			name: "a rolled back candidate scales to zero once its drain is over, and drainUntil is cleared",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeRolledBack, "ttft"), drainingUntil(t0.Add(-time.Second)))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), requeue: dur(0),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 0}},
				check: func(t *testing.T, d Decision) {
					if d.Status.Rollout.DrainUntil != nil || d.Status.Candidate == nil || d.Status.Candidate.Replicas != 0 {
						t.Errorf("drainUntil %v candidate %+v, want cleared and the candidate at 0", d.Status.Rollout.DrainUntil, d.Status.Candidate)
					}
				},
			},
		},
		{
			name: "a new revision during a rollback's drain waits for it before taking the candidate's color",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeRolledBack, "ttft"), drainingUntil(t0.Add(10*time.Second)))),
			obs:  newObs(revC, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), events: []string{EventSuperseded}, noEvent: []string{EventRolloutStarted}, requeue: dur(10 * time.Second),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 2}},
				conds: map[string]string{"Reconciling": "True/Superseding"},
			},
		},
		{
			name: "a new revision after a rollback's drain starts its rollout on the candidate color",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeRolledBack, "ttft"), drainingUntil(t0.Add(-time.Second)),
				condition("Reconciling", "True", v1alpha1.ReasonSuperseding))),
			obs: newObs(revC, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), step: i32(0), events: []string{EventRolloutStarted}, requeue: dur(WarmupPollInterval),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revC, Replicas: 1}},
				check: func(t *testing.T, d Decision) {
					if d.Status.Rollout.DrainUntil != nil || d.Status.Rollout.RolledBackRevision != "" || d.Status.Candidate.Revision != revC {
						t.Errorf("drainUntil %v rolledBack %q candidate %+v, want cleared, cleared and %s", d.Status.Rollout.DrainUntil, d.Status.Rollout.RolledBackRevision, d.Status.Candidate, revC)
					}
				},
			},
		},
		{
			name: "a new revision waits for a rolled back candidate that still carries weight the stable color cannot take, even past its drainUntil",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeRolledBack, "ttft"),
				weights(75, 25), drainingUntil(t0.Add(-time.Second)))),
			obs: newObs(revC, 4, deploy(blue, revA, 4, 3), deploy(green, revB, 2, 2)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(75, 25), events: []string{EventSuperseded}, noEvent: []string{EventRolloutStarted}, requeue: dur(WarmupPollInterval),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 1}},
				conds: map[string]string{"Reconciling": "True/Superseding"},
			},
		},
		{
			name: "a live candidate whose status lost the rollout's memory (written before status.rollout) starts its step again instead of failing",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0, 25),
				func(st *v1alpha1.ModelServerStatus) { st.Rollout = v1alpha1.RolloutStatus{} })),
			obs: newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 1, 0)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), step: i32(0), requeue: dur(WarmupPollInterval),
				check: func(t *testing.T, d Decision) {
					if s := d.Status.Rollout.StepStartedAt; s == nil || !s.Time.Equal(t0) {
						t.Errorf("stepStartedAt = %v, want now", s)
					}
				},
			},
		},
		{
			name: "an aborted candidate kept for inspection gives its color to a new revision at once",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeAborted, "aborted"), inspectedUntil(t0.Add(10*time.Minute)))),
			obs:  newObs(revC, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), step: i32(0), events: []string{EventRolloutStarted},
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revC, Replicas: 1}},
			},
		},
		{
			name: "an aborted candidate gives its color to a new revision at once also when its inspection ends soon: the time left says nothing about a drain",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeAborted, "aborted"), inspectedUntil(t0.Add(10*time.Second)))),
			obs:  newObs(revC, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), step: i32(0), events: []string{EventRolloutStarted},
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revC, Replicas: 1}},
			},
		},
		{
			name: "an aborted candidate whose weight went to stable moments ago drains before a new revision takes its color",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeAborted, "aborted"),
				inspectedUntil(t0.Add(10*time.Minute)), drainingUntil(t0.Add(10*time.Second)))),
			obs: newObs(revC, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), events: []string{EventSuperseded}, noEvent: []string{EventRolloutStarted}, requeue: dur(10 * time.Second),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 2}},
				conds: map[string]string{"Reconciling": "True/Superseding"},
			},
		},
		{
			name: "a spec returned to the stable revision during a rollback's drain still drains the candidate until drainUntil",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeRolledBack, "ttft"), drainingUntil(t0.Add(10*time.Second)))),
			obs:  newObs(revA, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseHealthy, weights: w(100, 0), requeue: dur(10 * time.Second),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 2}},
			},
		},
		{
			name: "an aborted revision keeps its candidate until inspectUntil, then scales it to zero",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeAborted, "aborted"), inspectedUntil(t0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 0}},
				conds: map[string]string{"Stalled": "True/Aborted"},
			},
		},
		{
			name: "an operation on a rolled back revision is ignored and not kept",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseRolledBack), stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeRolledBack, "x"))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), op(OpPromoteFull)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), events: []string{EventOperationIgnored}, keepOp: false},
		},
		// Pause.
		{
			name: "a paused rollout freezes weights and step, and keeps judging what holds traffic",
			ms:   newModelServer(steps, withPaused(true), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Hour), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass, pass)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhasePaused, step: i32(1), weights: w(90, 10), events: []string{EventPaused}, noEvent: []string{EventStepAdvanced}, requeue: dur(DefaultAnalysisInterval),
				conds: map[string]string{"Progressing": "False/Paused", "Reconciling": "False/Paused", "Ready": "False/Paused"},
				check: func(t *testing.T, d Decision) {
					if d.Status.Rollout.LastMeasuredAt == nil {
						t.Errorf("lastMeasured %v, want the measurement recorded", d.Status.Rollout.LastMeasuredAt)
					}
				},
			},
		},
		{
			name: "a paused rollout whose candidate fails past the failure limit is rolled back, and the reason says it was paused",
			ms:   newModelServer(steps, withPaused(true), withStatus(phase(v1alpha1.PhasePaused), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Hour), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, fail, fail)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), events: []string{EventRolledBack},
				check: func(t *testing.T, d Decision) {
					if h := d.Status.History; len(h) == 0 || h[0].Outcome != v1alpha1.OutcomeRolledBack || !strings.Contains(h[0].Reason, "while paused") {
						t.Errorf("history %+v, want RolledBack while paused", h)
					}
				},
			},
		},
		{
			name: "a Promote request waits while the rollout is paused",
			ms:   newModelServer(steps, withPaused(true), withStatus(phase(v1alpha1.PhasePaused), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Hour), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), op(OpPromote)),
			now:  t0,
			want: want{phase: v1alpha1.PhasePaused, step: i32(1), keepOp: true, noEvent: []string{EventPaused}},
		},
		{
			name: "resuming a paused rollout restarts the current step's timer",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhasePaused), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Hour), 10), measured(t0.Add(-time.Hour+time.Minute), pass))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, step: i32(1), weights: w(90, 10), events: []string{EventResumed}, requeue: dur(2 * time.Minute),
				check: func(t *testing.T, d Decision) {
					if !d.Status.Rollout.StepStartedAt.Time.Equal(t0) {
						t.Errorf("StepStartedAt = %v, want now", d.Status.Rollout.StepStartedAt)
					}
				},
			},
		},
		// Weights capped by what Ready pods carry.
		{
			name: "a candidate that loses pods keeps only the weight its Ready pods carry and records since when",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-30*time.Second), 50))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 1)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, step: i32(2), weights: w(80, 20), events: []string{EventCandidateUnready}, requeue: dur(WarmupPollInterval),
				conds: map[string]string{"Reconciling": "True/CandidateUnready", "Progressing": "True/CandidateUnready", "Stalled": "False/Reconciled"},
				check: func(t *testing.T, d Decision) {
					if u := d.Status.Candidate.UnreadySince; u == nil || !u.Time.Equal(t0) {
						t.Errorf("unreadySince = %v, want now", u)
					}
					if d.Status.Weights != (v1alpha1.Weights{Stable: 80, Candidate: 20}) {
						t.Errorf("status weights %+v, want 80/20: capped to the share of serving pods, 1 of 5", d.Status.Weights)
					}
				},
			},
		},
		{
			name: "a candidate that loses all its pods at step 2 with no passing measurement sends all traffic to stable at once",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-5*time.Minute), 50), measured(t0.Add(-10*time.Second), inc))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 0)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, step: i32(2), weights: w(100, 0), events: []string{EventCandidateUnready}},
		},
		{
			name: "a candidate below its step is not rolled back before the progress deadline from the loss, and keeps looking",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Hour), 50),
				unreadySince(t0.Add(-DefaultProgressDeadline+time.Second)))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 0)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, weights: w(100, 0), requeue: dur(time.Second), noEvent: []string{EventCandidateUnready, EventRolledBack}},
		},
		{
			name: "a candidate below its step for the progress deadline since the loss is rolled back with reason ProgressDeadlineExceeded",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Hour), 50),
				unreadySince(t0.Add(-DefaultProgressDeadline)))),
			obs: newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 0)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), events: []string{EventRolledBack},
				check: func(t *testing.T, d Decision) {
					if r := d.Status.History[0]; r.Outcome != v1alpha1.OutcomeRolledBack || !strings.Contains(r.Reason, v1alpha1.ReasonProgressDeadline) || !strings.Contains(r.Reason, "0/2 Ready") {
						t.Errorf("history[0] = %+v, want RolledBack with %s and 0/2 Ready", r, v1alpha1.ReasonProgressDeadline)
					}
					if d.Status.Candidate.UnreadySince != nil {
						t.Errorf("unreadySince kept after the rollback: %v", d.Status.Candidate.UnreadySince)
					}
				},
			},
		},
		{
			name: "a candidate whose pods return gets its step's weight back and clears unreadySince",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-5*time.Minute), 50),
				unreadySince(t0.Add(-time.Minute)))),
			obs: newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(50, 50), conds: map[string]string{"Reconciling": "True/Analyzing"},
				check: func(t *testing.T, d Decision) {
					if d.Status.Candidate.UnreadySince != nil {
						t.Errorf("unreadySince = %v, want cleared", d.Status.Candidate.UnreadySince)
					}
				},
			},
		},
		{
			name: "a Deployment whose status lags its spec (just scaled) keeps the last Ready count: no weight dip, no unready mark",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-30*time.Second), 50), candidateReady(4))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 0), stale(green)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(50, 50), noEvent: []string{EventCandidateUnready},
				check: func(t *testing.T, d Decision) {
					if c := d.Status.Candidate; c.UnreadySince != nil || c.ReadyReplicas != 4 {
						t.Errorf("candidate %+v, want 4 Ready kept and no unreadySince", c)
					}
				},
			},
		},
		{
			name: "a stable color that lost pods does not push more than its step onto the candidate",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-30*time.Second), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 1), deploy(green, revB, 4, 4)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, step: i32(1), weights: w(90, 10)},
		},
		{
			name: "when neither color carries its share, stable is preferred and the candidate keeps only what it carries",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-30*time.Second), 50))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 1), deploy(green, revB, 4, 1)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, weights: w(75, 25)},
		},
		{
			name: "a paused candidate that loses pods has its weight capped but is not rolled back while paused",
			ms: newModelServer(steps, withPaused(true), withStatus(phase(v1alpha1.PhasePaused), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-time.Hour), 50),
				unreadySince(t0.Add(-2*DefaultProgressDeadline)))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 0)),
			now:  t0,
			want: want{phase: v1alpha1.PhasePaused, step: i32(2), weights: w(100, 0)},
		},
		// Swap mode: weight back to stable in step with its Ready pods.
		{
			name: "a rollback in swap mode leaves on the candidate the weight the shrunk stable color cannot carry yet",
			ms: newModelServer(withSteps(25, 50, 100), withFailureLimit(0), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 12),
				inRollout(revB, 2, t0.Add(-time.Minute), 50))),
			obs: newObs(revB, 12, deploy(blue, revA, 6, 6), deploy(green, revB, 10, 10), withCapacity(16), measurement(t0, fail)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(50, 50), events: []string{EventRolledBack}, requeue: dur(WarmupPollInterval),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 12}, green: {Revision: revB, Replicas: 6}},
				conds: map[string]string{"Stalled": "True/RolledBack", "Ready": "False/RolledBack"},
			},
		},
		{
			name: "a rolled-back candidate shrinks in step as the stable color's Ready pods grow back, draining only where there is room beside the stable total",
			ms: newModelServer(withSteps(25, 50, 100), withStatus(stableOn(blue, revA, 12), rolledBack(revB, v1alpha1.OutcomeRolledBack, "error-ratio"),
				weights(50, 50))),
			obs: newObs(revB, 12, deploy(blue, revA, 12, 9), deploy(green, revB, 6, 6), withCapacity(16)),
			now: t0.Add(time.Minute),
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(75, 25),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 12}, green: {Revision: revB, Replicas: 4}},
				check: func(t *testing.T, d Decision) {
					if du := d.Status.Rollout.DrainUntil; du == nil || !du.Time.Equal(t0.Add(time.Minute+RollbackDrain)) {
						t.Errorf("drainUntil = %v, want RollbackDrain after the weight went down", du)
					}
				},
			},
		},
		{
			name: "a rolled-back candidate never gets back weight it gave up",
			ms: newModelServer(withSteps(25, 50, 100), withStatus(stableOn(blue, revA, 12), rolledBack(revB, v1alpha1.OutcomeRolledBack, "error-ratio"),
				weights(75, 25))),
			obs:  newObs(revB, 12, deploy(blue, revA, 12, 3), deploy(green, revB, 12, 12), withCapacity(16)),
			now:  t0.Add(time.Minute),
			want: want{phase: v1alpha1.PhaseRolledBack, weights: w(75, 25)},
		},
		{
			name: "a rolled-back candidate gives up all weight once the stable color carries everything, and drains for RollbackDrain from then",
			ms: newModelServer(withSteps(25, 50, 100), withStatus(stableOn(blue, revA, 12), rolledBack(revB, v1alpha1.OutcomeRolledBack, "error-ratio"),
				weights(75, 25))),
			obs: newObs(revB, 12, deploy(blue, revA, 12, 12), deploy(green, revB, 3, 3), withCapacity(16)),
			now: t0.Add(time.Minute),
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), requeue: dur(RollbackDrain),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 12}, green: {Revision: revB, Replicas: 3}},
			},
		},
		{
			name: "a rolled-back candidate without weight gives up its pods at the end of its drain",
			ms: newModelServer(withSteps(25, 50, 100), withStatus(stableOn(blue, revA, 12), rolledBack(revB, v1alpha1.OutcomeRolledBack, "error-ratio"),
				weights(100, 0), drainingUntil(t0.Add(time.Minute)))),
			obs: newObs(revB, 12, deploy(blue, revA, 12, 12), deploy(green, revB, 3, 3), withCapacity(16)),
			now: t0.Add(time.Minute),
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), requeue: dur(0),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 12}, green: {Revision: revB, Replicas: 0}},
			},
		},
		{
			name: "a stable color that lost pods holds weight on a rolled-back candidate past its drain; when it carries everything again the candidate drains anew",
			ms:   newModelServer(steps, withStatus(stableOn(blue, revA, 4), rolledBack(revB, v1alpha1.OutcomeRolledBack, "ttft"), weights(90, 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now:  t0.Add(time.Minute),
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), requeue: dur(RollbackDrain),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 4}, green: {Revision: revB, Replicas: 2}},
			},
		},
		{
			name: "an abort in swap mode frees the candidate's GPUs at once, keeping pods only for its remaining weight or where there is room",
			ms: newModelServer(withSteps(25, 50, 100), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 12),
				inRollout(revB, 2, t0.Add(-time.Minute), 50))),
			obs: newObs(revB, 12, deploy(blue, revA, 6, 6), deploy(green, revB, 10, 10), withCapacity(16), op(OpAbort)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(50, 50), events: []string{EventAborted},
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 12}, green: {Revision: revB, Replicas: 6}},
			},
		},
		{
			name: "an aborted candidate in swap mode keeps for inspection only the pods that fit beside the stable total",
			ms: newModelServer(withSteps(25, 50, 100), withStatus(stableOn(blue, revA, 12), rolledBack(revB, v1alpha1.OutcomeAborted, "aborted"),
				weights(100, 0), inspectedUntil(t0.Add(time.Hour)))),
			obs: newObs(revB, 12, deploy(blue, revA, 12, 12), deploy(green, revB, 6, 6), withCapacity(16)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseRolledBack, weights: w(100, 0),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 12}, green: {Revision: revB, Replicas: 4}},
			},
		},
		{
			name: "a superseded candidate in swap mode keeps what the shrunk stable color cannot carry yet, and the new revision waits",
			ms: newModelServer(withSteps(25, 50, 100), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 12),
				inRollout(revB, 2, t0.Add(-time.Minute), 50))),
			obs: newObs(revC, 12, deploy(blue, revA, 6, 6), deploy(green, revB, 10, 10), withCapacity(16)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(50, 50), events: []string{EventSuperseded}, noEvent: []string{EventRolloutStarted}, requeue: dur(WarmupPollInterval),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 12}, green: {Revision: revB, Replicas: 6}},
				conds: map[string]string{"Reconciling": "True/Superseding", "Stalled": "False/Reconciled"},
				check: func(t *testing.T, d Decision) {
					if c := d.Status.Candidate; c.Revision != revB {
						t.Errorf("candidate %s, want %s still draining", c.Revision, revB)
					}
				},
			},
		},
		{
			name: "a superseded candidate in swap mode keeps its pods for the route's drain once the stable color carries all traffic",
			ms: newModelServer(withSteps(25, 50, 100), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 12),
				inRollout(revB, 2, t0.Add(-time.Minute), 50), weights(75, 25), condition("Reconciling", "True", v1alpha1.ReasonSuperseding))),
			obs: newObs(revC, 12, deploy(blue, revA, 12, 12), deploy(green, revB, 3, 3), withCapacity(16)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(100, 0), noEvent: []string{EventRolloutStarted}, requeue: dur(RollbackDrain),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 12}, green: {Revision: revB, Replicas: 3}},
				check: func(t *testing.T, d Decision) {
					if du := d.Status.Rollout.DrainUntil; du == nil || !du.Time.Equal(t0.Add(RollbackDrain)) {
						t.Errorf("drainUntil = %v, want %v", du, t0.Add(RollbackDrain))
					}
				},
			},
		},
		{
			name: "a spec returned to the stable revision in swap mode drains the candidate in step too",
			ms: newModelServer(withSteps(25, 50, 100), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 12),
				inRollout(revB, 2, t0.Add(-time.Minute), 50))),
			obs: newObs(revA, 12, deploy(blue, revA, 9, 9), deploy(green, revB, 10, 10), withCapacity(16)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, weights: w(75, 25),
				plans: map[v1alpha1.Color]ColorPlan{blue: {Revision: revA, Replicas: 12}, green: {Revision: revB, Replicas: 3}},
			},
		},
		// Route acceptance.
		{
			name: "a route that a Gateway did not accept holds the step even after a passing measurement, and says why",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-2*time.Minute), 10), measured(t0.Add(-30*time.Second), pass))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass), routeRejected("NotAllowedByListeners")),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, step: i32(1), weights: w(90, 10), events: []string{EventRouteNotAccepted}, noEvent: []string{EventStepAdvanced},
				conds: map[string]string{"Progressing": "False/RouteNotAccepted", "Reconciling": "True/RouteNotAccepted", "Stalled": "False/Reconciled"},
				check: func(t *testing.T, d Decision) {
					if msg := cond(d.Status, "Progressing").Message; !strings.Contains(msg, "NotAllowedByListeners") || !strings.Contains(msg, "not accepted") {
						t.Errorf("Progressing message %q, want the route's reason", msg)
					}
				},
			},
		},
		{
			name: "a warm candidate does not get its first step while the route is not accepted",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 0, t0.Add(-time.Minute), 0))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 1, 1), routeRejected("NoMatchingParent")),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, step: i32(0), weights: w(100, 0), conds: map[string]string{"Progressing": "False/RouteNotAccepted"}},
		},
		{
			name: "the last held step does not promote while the route is not accepted",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 2, t0.Add(-2*time.Minute), 50), measured(t0.Add(-30*time.Second), pass))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass), routeRejected("x")),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, step: i32(2), weights: w(50, 50), noEvent: []string{EventPromoted}},
		},
		{
			name: "a PromoteFull request is kept, not carried out, while the route is not accepted",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Second), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), op(OpPromoteFull), routeRejected("x")),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, step: i32(1), keepOp: true, noEvent: []string{EventPromoted}},
		},
		{
			name: "a Promote request is kept, not carried out, while the route is not accepted",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Second), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), op(OpPromote), routeRejected("x")),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, step: i32(1), keepOp: true, noEvent: []string{EventStepAdvanced}},
		},
		{
			name: "an Abort request acts while the route is not accepted",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Second), 10))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), op(OpAbort), routeRejected("x")),
			now:  t0,
			want: want{phase: v1alpha1.PhaseRolledBack, weights: w(100, 0), events: []string{EventAborted}},
		},
		{
			name: "a route no Gateway has answered yet (Unknown) does not hold the rollout",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-2*time.Minute), 10), measured(t0.Add(-30*time.Second), pass))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass), routeStatus("Unknown")),
			now:  t0,
			want: want{step: i32(2), weights: w(50, 50), events: []string{EventStepAdvanced}},
		},
		{
			name: "a route accepted again lets the held step advance",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-2*time.Minute), 10), measured(t0.Add(-30*time.Second), pass),
				condition("Progressing", "False", v1alpha1.ReasonRouteNotAccepted))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass), routeStatus("True")),
			now:  t0,
			want: want{step: i32(2), weights: w(50, 50), events: []string{EventStepAdvanced}, noEvent: []string{EventRouteNotAccepted}},
		},
		{
			name: "a route still not accepted repeats no event",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-2*time.Minute), 10), measured(t0.Add(-30*time.Second), pass),
				condition("Progressing", "False", v1alpha1.ReasonRouteNotAccepted))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 4, 4), measurement(t0, pass), routeRejected("x")),
			now:  t0,
			want: want{step: i32(1), conds: map[string]string{"Progressing": "False/RouteNotAccepted"}, noEvent: []string{EventRouteNotAccepted}},
		},
		// Inconclusive for too long.
		{
			name: "analysis inconclusive past the stall deadline reports Stalled with the metric's message and a hint, and neither promotes nor rolls back",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Hour), 10), inconclusiveSince(t0.Add(-DefaultInconclusiveReportAfter)))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, inc)),
			now:  t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, step: i32(1), weights: w(90, 10), events: []string{EventAnalysisStalled}, noEvent: []string{EventRolledBack},
				conds: map[string]string{"Stalled": "True/AnalysisInconclusive", "Reconciling": "False/AnalysisInconclusive", "Progressing": "False/AnalysisInconclusive", "Ready": "False/RolloutInProgress"},
				check: func(t *testing.T, d Decision) {
					msg := cond(d.Status, "Stalled").Message
					for _, part := range []string{"inconclusive since 2026-03-01T11:50:00Z (over 10m0s)", "too few samples: 3 < 50", "too little traffic", "neither promote nor roll back"} {
						if !strings.Contains(msg, part) {
							t.Errorf("Stalled message %q does not say %q", msg, part)
						}
					}
				},
			},
		},
		{
			name: "analysis inconclusive just short of the stall deadline is not Stalled and looks again at the deadline",
			ms:   newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Hour), 10), inconclusiveSince(t0.Add(-DefaultInconclusiveReportAfter+3*time.Second)))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, inc)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, requeue: dur(3 * time.Second), conds: map[string]string{"Stalled": "False/Reconciled", "Reconciling": "True/Inconclusive"}},
		},
		{
			name: "a configured inconclusive.reportAfter reports Stalled after it rather than the default",
			ms: newModelServer(steps, func(ms *v1alpha1.ModelServer) {
				ms.Spec.Rollout.Inconclusive.ReportAfter = v1alpha1.Duration{Duration: 3 * time.Minute}
			},
				withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Hour), 10), inconclusiveSince(t0.Add(-3*time.Minute)))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, inc)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, conds: map[string]string{"Stalled": "True/AnalysisInconclusive", "Reconciling": "False/AnalysisInconclusive"}},
		},
		{
			name: "a stalled rollout with an inconclusive.rollbackAfter says when that deadline rolls it back",
			ms: newModelServer(steps, withInconclusiveRollbackAfter(30*time.Minute), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Hour), 10),
				inconclusiveSince(t0.Add(-12*time.Minute)), measured(t0.Add(-10*time.Second), inc))),
			obs: newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now: t0,
			want: want{
				phase: v1alpha1.PhaseProgressing, conds: map[string]string{"Stalled": "True/AnalysisInconclusive"},
				check: func(t *testing.T, d Decision) {
					if msg := cond(d.Status, "Stalled").Message; !strings.Contains(msg, "inconclusive.rollbackAfter rolls it back at 2026-03-01T12:18:00Z") {
						t.Errorf("Stalled message %q, want the rollback instant", msg)
					}
				},
			},
		},
		{
			name: "a stall on inconclusive analysis clears when a verdict returns",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Minute), 10), inconclusiveSince(t0.Add(-time.Hour)),
				condition("Stalled", "True", v1alpha1.ReasonAnalysisInconclusive))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, pass)),
			now:  t0,
			want: want{phase: v1alpha1.PhaseProgressing, conds: map[string]string{"Stalled": "False/Reconciled", "Reconciling": "True/Analyzing"}, noEvent: []string{EventAnalysisStalled}},
		},
		{
			name: "a stalled rollout repeats no event",
			ms: newModelServer(steps, withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Hour), 10), inconclusiveSince(t0.Add(-time.Hour)),
				measured(t0.Add(-10*time.Second), inc), condition("Stalled", "True", v1alpha1.ReasonAnalysisInconclusive))),
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2)),
			now:  t0,
			want: want{conds: map[string]string{"Stalled": "True/AnalysisInconclusive"}, noEvent: []string{EventAnalysisStalled}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.ms.DeepCopy()
			d := next(tc.ms, tc.obs, tc.now)
			if !equality.Semantic.DeepEqual(before, tc.ms) {
				t.Fatalf("Next modified its input")
			}
			checkWant(t, d, tc.want)
			checkAlways(t, tc.ms, d)
		})
	}
}

func checkWant(t *testing.T, d Decision, wt want) {
	t.Helper()
	if wt.phase != "" && d.Status.Phase != wt.phase {
		t.Errorf("phase = %s, want %s", d.Status.Phase, wt.phase)
	}
	if wt.weights != nil && fmt.Sprint(d.Weights) != fmt.Sprint(wt.weights) {
		t.Errorf("weights = %v, want %v", d.Weights, wt.weights)
	}
	if wt.plans != nil && fmt.Sprint(d.Plans) != fmt.Sprint(wt.plans) {
		t.Errorf("plans = %v, want %v", d.Plans, wt.plans)
	}
	if wt.step != nil && d.Status.Rollout.Step != *wt.step {
		t.Errorf("step = %d, want %d", d.Status.Rollout.Step, *wt.step)
	}
	if wt.requeue != nil && d.RequeueAfter != *wt.requeue {
		t.Errorf("requeueAfter = %s, want %s", d.RequeueAfter, *wt.requeue)
	}
	for _, r := range wt.events {
		if !hasEvent(d, r) {
			t.Errorf("no %s event among %v", r, d.Events)
		}
	}
	for _, r := range wt.noEvent {
		if hasEvent(d, r) {
			t.Errorf("unexpected %s event among %v", r, d.Events)
		}
	}
	for typ, sr := range wt.conds {
		c := cond(d.Status, typ)
		if c == nil {
			t.Errorf("no %s condition", typ)
			continue
		}
		if got := string(c.Status) + "/" + c.Reason; got != sr {
			t.Errorf("%s = %s (%s), want %s", typ, got, c.Message, sr)
		}
	}
	if d.KeepOperation != wt.keepOp {
		t.Errorf("keepOperation = %t, want %t", d.KeepOperation, wt.keepOp)
	}
	if wt.check != nil {
		wt.check(t, d)
	}
}

// checkAlways holds for every decision.
func checkAlways(t *testing.T, ms *v1alpha1.ModelServer, d Decision) {
	t.Helper()
	st := d.Status
	if st.Stable == nil {
		t.Fatalf("no stable color")
	}
	sum := int32(0)
	for _, v := range d.Weights {
		sum += v
	}
	if sum != 100 || len(d.Weights) != 2 {
		t.Errorf("weights %v do not split 100 over two colors", d.Weights)
	}
	if d.Weights[st.Stable.Color] != st.Weights.Stable || st.Weights.Stable+st.Weights.Candidate != 100 {
		t.Errorf("status weights %+v do not mirror %v", st.Weights, d.Weights)
	}
	if st.Candidate != nil && st.Candidate.Color == st.Stable.Color {
		t.Errorf("candidate and stable share color %s", st.Stable.Color)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != ms.Generation {
			t.Errorf("condition %s observedGeneration %d, want %d", c.Type, c.ObservedGeneration, ms.Generation)
		}
	}
	if len(st.History) > historyLimit {
		t.Errorf("history holds %d records", len(st.History))
	}
	if d.RequeueAfter < 0 {
		t.Errorf("negative requeue %s", d.RequeueAfter)
	}
}

func TestHistoryKeepsTheTenNewestRecordsNewestFirst(t *testing.T) {
	ms := newModelServer(withSteps(10, 100), withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 2), inRollout(revB, 1, t0.Add(-5*time.Minute), 10)))
	for i := range 10 {
		ms.Status.History = append(ms.Status.History, v1alpha1.RevisionRecord{Revision: fmt.Sprintf("old-%d", i), Outcome: v1alpha1.OutcomePromoted})
	}
	d := next(ms, newObs(revB, 2, deploy(blue, revA, 2, 2), deploy(green, revB, 2, 2), measurement(t0, pass)), t0)
	h := d.Status.History
	if len(h) != historyLimit || h[0].Revision != revB || h[0].Outcome != v1alpha1.OutcomePromoted || h[1].Revision != "old-0" || h[9].Revision != "old-8" {
		t.Errorf("history = %+v, want %s Promoted first then old-0..old-8", h, revB)
	}
	if len(ms.Status.History) != 10 || ms.Status.History[0].Revision != "old-0" {
		t.Errorf("input history modified: %+v", ms.Status.History)
	}
}
