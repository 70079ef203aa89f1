package rollout

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	revA = "rev-a"
	revB = "rev-b"
	revC = "rev-c"
)

type msOption func(*v1alpha1.ModelServer)

// newModelServer is a ModelServer at generation 4 with API defaults left zero (Next applies them),
// but for loadMatching None: the step weights as written, which the tests assert
// (withLoadMatching("") leaves the default, StablePods).
func newModelServer(opts ...msOption) *v1alpha1.ModelServer {
	ms := &v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "ns", Generation: 4}}
	ms.Spec.Rollout.LoadMatching = v1alpha1.LoadMatchingNone
	for _, o := range opts {
		o(ms)
	}
	return ms
}

func withSteps(s ...int32) msOption {
	return func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Steps = s }
}
func withStepDuration(d time.Duration) msOption {
	return func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.StepDuration = v1alpha1.Duration{Duration: d} }
}
func withInterval(d time.Duration) msOption {
	return func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Analysis.Interval = v1alpha1.Duration{Duration: d} }
}
func withFailureLimit(n int32) msOption {
	return func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.FailureLimit = n }
}
func withAutoPromote(b bool) msOption {
	return func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.AutoPromote = ptr.To(b) }
}
func withInconclusiveRollbackAfter(d time.Duration) msOption {
	return func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Inconclusive.RollbackAfter = &v1alpha1.Duration{Duration: d}
	}
}
func withPaused(p bool) msOption { return func(ms *v1alpha1.ModelServer) { ms.Spec.Paused = p } }
func withStatus(opts ...statusOption) msOption {
	return func(ms *v1alpha1.ModelServer) {
		for _, o := range opts {
			o(&ms.Status)
		}
	}
}

type statusOption func(*v1alpha1.ModelServerStatus)

func mt(t time.Time) *metav1.Time { x := metav1.NewTime(t); return &x }

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
		// Sized long ago: the candidate has run at its planned size (see MeasureDue).
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
func measured(at time.Time, verdicts ...v1alpha1.Verdict) statusOption {
	return func(st *v1alpha1.ModelServerStatus) {
		st.Rollout.LastMeasuredAt = mt(at)
		st.Rollout.Analysis = results(at, verdicts...)
	}
}
func failures(n int32) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.Rollout.Failures = n }
}
func inconclusiveSince(t time.Time) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.Rollout.InconclusiveSince = mt(t) }
}

// keptWarmUntil sets status.rollout.keepWarmUntil: the previous stable color after a promotion.
func keptWarmUntil(t time.Time) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.Rollout.KeepWarmUntil = mt(t) }
}

// inspectedUntil sets status.rollout.inspectUntil: an aborted or abandoned revision.
func inspectedUntil(t time.Time) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.Rollout.InspectUntil = mt(t) }
}

// drainingUntil sets status.rollout.drainUntil: a candidate whose weight went down.
func drainingUntil(t time.Time) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.Rollout.DrainUntil = mt(t) }
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

func results(at time.Time, verdicts ...v1alpha1.Verdict) []v1alpha1.MetricResult {
	var rs []v1alpha1.MetricResult
	for i, v := range verdicts {
		r := v1alpha1.MetricResult{Name: []string{"ttft-p95", "error-ratio", "itl-p95"}[i%3], Verdict: v, At: metav1.NewTime(at)}
		switch v {
		case v1alpha1.VerdictFail:
			r.Candidate, r.Bound, r.Message = "0.9", "<= 0.5", "above bound"
		case v1alpha1.VerdictInconclusive:
			r.Message = "too few samples: 3 < 50"
		default:
			r.Candidate, r.Bound = "0.3", "<= 0.5"
		}
		rs = append(rs, r)
	}
	return rs
}

type obsOption func(*Observation)

// newObs is an observation of the spec's revision rev with a desired total.
func newObs(rev string, total int32, opts ...obsOption) Observation {
	o := Observation{Revision: rev, Image: "img:" + rev, DesiredReplicas: total, Colors: map[v1alpha1.Color]ColorObservation{}}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// deploy: the color runs rev with replicas, ready of them Ready (and available), all updated and warm.
func deploy(c v1alpha1.Color, rev string, replicas, ready int32) obsOption {
	return func(o *Observation) {
		o.Colors[c] = ColorObservation{Exists: true, Revision: rev, Image: "img:" + rev, Replicas: replicas, ReadyReplicas: ready, AvailableReplicas: ready, UpdatedReplicas: replicas, Warm: true}
	}
}
func cold(c v1alpha1.Color) obsOption {
	return func(o *Observation) { co := o.Colors[c]; co.Warm = false; o.Colors[c] = co }
}

// endpoints: the color's Service's EndpointSlices list n ready endpoints.
func endpoints(c v1alpha1.Color, n int32) obsOption {
	return func(o *Observation) {
		co := o.Colors[c]
		co.EndpointsObserved, co.ReadyEndpoints = true, n
		o.Colors[c] = co
	}
}
func updated(c v1alpha1.Color, n int32) obsOption {
	return func(o *Observation) { co := o.Colors[c]; co.UpdatedReplicas = n; o.Colors[c] = co }
}
func measurement(at time.Time, verdicts ...v1alpha1.Verdict) obsOption {
	return func(o *Observation) { o.Measurement = &Measurement{At: at, Results: results(at, verdicts...)} }
}
func emptyMeasurement(at time.Time) obsOption {
	return func(o *Observation) { o.Measurement = &Measurement{At: at} }
}
func op(x Operation) obsOption { return func(o *Observation) { o.Operation = x } }

func cond(st v1alpha1.ModelServerStatus, typ string) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, typ)
}

func hasEvent(d Decision, reason string) bool {
	for _, e := range d.Events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

func unreadySince(t time.Time) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.Candidate.UnreadySince = mt(t) }
}
func weights(stable, candidate int32) statusOption {
	return func(st *v1alpha1.ModelServerStatus) {
		st.Weights = v1alpha1.Weights{Stable: stable, Candidate: candidate}
	}
}
func condition(typ, status, reason string) statusOption {
	return func(st *v1alpha1.ModelServerStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason})
	}
}
func routeStatus(s metav1.ConditionStatus) obsOption {
	return func(o *Observation) { o.RouteAccepted = s }
}
func routeRejected(reason string) obsOption {
	return func(o *Observation) {
		o.RouteAccepted = metav1.ConditionFalse
		o.RouteMessage = "parent gw did not accept the HTTPRoute: " + reason + ": listener mismatch"
	}
}

// stale: the color's Deployment status lags its spec (just scaled): no counts this pass.
func stale(c v1alpha1.Color) obsOption {
	return func(o *Observation) {
		co := o.Colors[c]
		co.Stale, co.ReadyReplicas, co.AvailableReplicas, co.UpdatedReplicas = true, 0, 0, 0
		o.Colors[c] = co
	}
}
func candidateReady(n int32) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.Candidate.ReadyReplicas = n }
}

func withLoadMatching(l v1alpha1.LoadMatching) msOption {
	return func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.LoadMatching = l }
}
