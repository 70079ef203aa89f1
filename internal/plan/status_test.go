package plan

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/rollout"
)

type condCase struct {
	name string
	st   v1alpha1.ModelServerStatus
	f    rollout.Report
	want string // "True/Reason"
}

func statusOf(opts ...statusOption) v1alpha1.ModelServerStatus {
	var st v1alpha1.ModelServerStatus
	for _, o := range opts {
		o(&st)
	}
	return st
}

func serving(avail, total int32) rollout.Report {
	return rollout.Report{Generation: 7, SpecRevision: revA, Total: total, StableReady: avail, StableAvailable: avail, WasServing: true}
}

func runCondCases(t *testing.T, typ string, set func(*v1alpha1.ModelServerStatus, rollout.Report), cases []condCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st.DeepCopy()
			set(st, tc.f)
			c := cond(*st, typ)
			if c == nil {
				t.Fatalf("no %s condition", typ)
			}
			if got := string(c.Status) + "/" + c.Reason; got != tc.want {
				t.Errorf("%s = %s (%q), want %s", typ, got, c.Message, tc.want)
			}
			if c.ObservedGeneration != tc.f.Generation {
				t.Errorf("observedGeneration = %d, want %d", c.ObservedGeneration, tc.f.Generation)
			}
		})
	}
}

func TestSetReadyCondition(t *testing.T) {
	healthy := statusOf(phase(v1alpha1.PhaseHealthy), stableOn(blue, revA, 3))
	rolling := statusOf(stableOn(blue, revA, 3), inRollout(revB, 1, t0, 10))
	rolling.Phase = v1alpha1.PhaseProgressing
	fb := serving(3, 3)
	fb.SpecRevision = revB
	runCondCases(t, v1alpha1.ConditionReady, setReadyCondition, []condCase{
		{"is True when the spec's revision serves all traffic with every replica available", healthy, serving(3, 3), "True/Available"},
		{"is True with zero desired replicas", healthy, serving(0, 0), "True/Available"},
		{"is False while some replicas are not available", healthy, serving(2, 3), "False/DeploymentsNotReady"},
		{"is False while a candidate holds traffic", rolling, fb, "False/RolloutInProgress"},
		{"is False while paused", statusOf(stableOn(blue, revA, 3), inRollout(revB, 1, t0, 10), phase(v1alpha1.PhasePaused)), fb, "False/Paused"},
		{"is False while awaiting promotion", statusOf(stableOn(blue, revA, 3), inRollout(revB, 2, t0, 50), phase(v1alpha1.PhaseAwaitingPromotion)), fb, "False/AwaitingPromotion"},
		{"is False after a rollback, with the held reason", statusOf(stableOn(blue, revA, 3), rolledBack(revB, v1alpha1.OutcomeAborted, "x")), rollout.Report{Generation: 7, SpecRevision: revB, HoldReason: v1alpha1.ReasonAborted}, "False/Aborted"},
	})
}

func TestSetReconcilingCondition(t *testing.T) {
	warming := statusOf(stableOn(blue, revA, 3), inRollout(revB, 0, t0, 0))
	analysing := statusOf(stableOn(blue, revA, 3), inRollout(revB, 1, t0, 10))
	holding := statusOf(stableOn(blue, revA, 3), inRollout(revB, 1, t0, 10), inconclusiveSince(t0))
	runCondCases(t, v1alpha1.ConditionReconciling, setReconcilingCondition, []condCase{
		{"is True while the first revision comes up", statusOf(phase(v1alpha1.PhasePending), stableOn(blue, revA, 0)), serving(0, 3), "True/DeploymentsNotReady"},
		{"is True with reason WarmingUp while the candidate warms", warming, serving(3, 3), "True/WarmingUp"},
		{"is True with reason Analyzing while a step is judged", analysing, serving(3, 3), "True/Analyzing"},
		{"is True with reason Inconclusive while analysis holds on missing data", holding, serving(3, 3), "True/Inconclusive"},
		{"is True while a serving stable scales up", statusOf(phase(v1alpha1.PhaseHealthy), stableOn(blue, revA, 3)), serving(3, 5), "True/DeploymentsNotReady"},
		{"is False when all is done", statusOf(phase(v1alpha1.PhaseHealthy), stableOn(blue, revA, 3)), serving(3, 3), "False/Reconciled"},
		{"is False while paused: a human's hold is not work in progress", statusOf(stableOn(blue, revA, 3), inRollout(revB, 1, t0, 10), phase(v1alpha1.PhasePaused)), serving(3, 3), "False/Paused"},
		{"is False while awaiting promotion", statusOf(stableOn(blue, revA, 3), inRollout(revB, 2, t0, 50), phase(v1alpha1.PhaseAwaitingPromotion)), serving(3, 3), "False/AwaitingPromotion"},
		{"is False after a rollback", statusOf(stableOn(blue, revA, 3), rolledBack(revB, v1alpha1.OutcomeRolledBack, "x")), serving(3, 3), "False/RolledBack"},
	})
}

func TestSetStalledCondition(t *testing.T) {
	rb := statusOf(stableOn(blue, revA, 3), rolledBack(revB, v1alpha1.OutcomeRolledBack, "x"))
	fAborted := serving(3, 3)
	fAborted.HoldReason, fAborted.HoldMessage = v1alpha1.ReasonAborted, "aborted"
	runCondCases(t, v1alpha1.ConditionStalled, setStalledCondition, []condCase{
		{"is True with reason RolledBack after a rollback", rb, serving(3, 3), "True/RolledBack"},
		{"is True with reason Aborted after an abort", rb, fAborted, "True/Aborted"},
		{"is False during a rollout", statusOf(stableOn(blue, revA, 3), inRollout(revB, 1, t0, 10)), serving(3, 3), "False/Reconciled"},
		{"is False when the stable is degraded: the Deployment keeps trying", statusOf(phase(v1alpha1.PhaseDegraded), stableOn(blue, revA, 0)), serving(0, 3), "False/Reconciled"},
	})
}

func TestSetProgressingCondition(t *testing.T) {
	promoted := statusOf(phase(v1alpha1.PhaseHealthy), stableOn(green, revB, 3))
	promoted.History = []v1alpha1.RevisionRecord{{Revision: revB, Outcome: v1alpha1.OutcomePromoted, At: metav1.NewTime(t0)}}
	runCondCases(t, v1alpha1.ConditionProgressing, setProgressingCondition, []condCase{
		{"is True while a step is analysed", statusOf(stableOn(blue, revA, 3), inRollout(revB, 1, t0, 10)), serving(3, 3), "True/Analyzing"},
		{"is True while the first revision comes up", statusOf(phase(v1alpha1.PhasePending), stableOn(blue, revA, 0)), serving(0, 3), "True/DeploymentsNotReady"},
		{"is False with reason Paused while paused", statusOf(stableOn(blue, revA, 3), inRollout(revB, 1, t0, 10), phase(v1alpha1.PhasePaused)), serving(3, 3), "False/Paused"},
		{"is False with reason Promoted after a promotion", promoted, serving(3, 3), "False/Promoted"},
		{"is False with reason Reconciled when no rollout ever ran", statusOf(phase(v1alpha1.PhaseHealthy), stableOn(blue, revA, 3)), serving(3, 3), "False/Reconciled"},
		{"is False with the held reason after a rollback", statusOf(stableOn(blue, revA, 3), rolledBack(revB, v1alpha1.OutcomeRolledBack, "x")), serving(3, 3), "False/RolledBack"},
	})
}

func TestSetDegradedCondition(t *testing.T) {
	st := statusOf(phase(v1alpha1.PhaseHealthy), stableOn(blue, revA, 3))
	notServed := serving(0, 3)
	notServed.WasServing = false
	runCondCases(t, v1alpha1.ConditionDegraded, setDegradedCondition, []condCase{
		{"is True when a stable that served has no Ready pod", st, serving(0, 3), "True/DeploymentsNotReady"},
		{"is False when some pods are Ready", st, serving(1, 3), "False/Available"},
		{"is False when nothing is desired", st, serving(0, 0), "False/Available"},
		{"is False before the stable ever served", st, notServed, "False/Available"},
	})
}

func TestConditionTransitionTimeKeptWhenStatusUnchanged(t *testing.T) {
	st := statusOf(phase(v1alpha1.PhaseHealthy), stableOn(blue, revA, 3))
	setReadyCondition(&st, serving(3, 3))
	old := metav1.NewTime(t0.Add(-time.Hour))
	st.Conditions[0].LastTransitionTime = old
	setReadyCondition(&st, serving(3, 3))
	if c := cond(st, v1alpha1.ConditionReady); !c.LastTransitionTime.Equal(&old) {
		t.Errorf("lastTransitionTime = %v, want unchanged %v", c.LastTransitionTime, old)
	}
}

// "0/0 available" is Ready only while a metric that sees load without pods reads 0: with load
// and no pod, or with no such reading at all, Ready is False naming why, so that kubectl wait
// and Argo CD do not read a ModelServer that serves nobody as healthy. Pure: no API server.
func TestReadyAtZeroReplicasOnlyWhenNoLoadIsObserved(t *testing.T) {
	cases := []struct {
		name     string
		unserved string
		want     metav1.ConditionStatus
	}{
		{"idle at zero is Ready", "", metav1.ConditionTrue},
		{"load with no pod is not Ready", "0 replicas while prometheus reads 12: load with no pod to serve it", metav1.ConditionFalse},
		{"no reading at zero is not Ready", "0 replicas and no metric that sees load without pods has data (prometheus: NoData no data): nothing shows that no request waits", metav1.ConditionFalse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := &v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "zero"}}
			ms.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAvailable, Message: "revision r on blue serves all traffic: 0/0 available"}}
			obs := Observation{Accepted: metav1.Condition{Type: v1alpha1.ConditionRouteAccepted, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonNoGatewayAnswer}}
			scale := &autoscale.Output{MetricsAvailable: true, LimitedReason: v1alpha1.ReasonWithinBounds, Unserved: tc.unserved}
			observedStatus(ms, &ms.Status, obs, rollout.Decision{}, scale)
			c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil || c.Status != tc.want {
				t.Fatalf("Ready = %+v, want %s", c, tc.want)
			}
			if tc.want == metav1.ConditionFalse && (c.Reason != v1alpha1.ReasonNoReplicaForLoad || c.Message != tc.unserved) {
				t.Errorf("Ready = %s %q, want reason %s with the autoscaler's message", c.Reason, c.Message, v1alpha1.ReasonNoReplicaForLoad)
			}
		})
	}
}

// Builders of statuses, as the rollout machine leaves them.

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	revA  = "rev-a"
	revB  = "rev-b"
	blue  = v1alpha1.Blue
	green = v1alpha1.Green
)

type statusOption func(*v1alpha1.ModelServerStatus)

func mt(t time.Time) *metav1.Time { x := metav1.NewTime(t); return &x }

func cond(st v1alpha1.ModelServerStatus, typ string) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, typ)
}

func phase(p v1alpha1.Phase) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.Phase = p }
}

func stableOn(c v1alpha1.Color, rev string, ready int32) statusOption {
	return func(st *v1alpha1.ModelServerStatus) {
		st.Stable = &v1alpha1.ColorStatus{Color: c, Revision: rev, Image: "img:" + rev, Replicas: ready, ReadyReplicas: ready}
		st.Revision = rev
		st.Weights = v1alpha1.Weights{Stable: 100}
	}
}

// inRollout is a live rollout of rev on the color that is not stable, at step with weights.
func inRollout(rev string, step int32, startedAt time.Time, candWeight int32) statusOption {
	return func(st *v1alpha1.ModelServerStatus) {
		st.Candidate = &v1alpha1.ColorStatus{Color: st.Stable.Color.Other(), Revision: rev, Image: "img:" + rev, SizedSince: mt(startedAt.Add(-time.Hour))}
		st.Revision = rev
		st.Rollout.Step = step
		st.Rollout.StepStartedAt = mt(startedAt)
		st.Weights = v1alpha1.Weights{Stable: 100 - candWeight, Candidate: candWeight}
		if st.Phase == "" || st.Phase == v1alpha1.PhaseHealthy {
			st.Phase = v1alpha1.PhaseProgressing
		}
	}
}

func inconclusiveSince(t time.Time) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.Rollout.InconclusiveSince = mt(t) }
}

func rolledBack(rev string, outcome v1alpha1.Outcome, reason string) statusOption {
	return func(st *v1alpha1.ModelServerStatus) {
		st.Candidate = &v1alpha1.ColorStatus{Color: st.Stable.Color.Other(), Revision: rev, Image: "img:" + rev}
		st.Rollout.RolledBackRevision = rev
		st.Revision = rev
		st.Phase = v1alpha1.PhaseRolledBack
		st.History = append([]v1alpha1.RevisionRecord{{Revision: rev, Outcome: outcome, Reason: reason, At: metav1.NewTime(t0)}}, st.History...)
	}
}
