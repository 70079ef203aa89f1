// Package plan is the decision of one reconcile pass: from the ModelServer and what the pass
// observed, it composes the autoscaler (package autoscale) and the rollout state machine
// (package rollout) and sets every status condition (status.go, the only place that does). It
// is pure: no client, no goroutine, the clock a parameter.
//
// The seam between the two decisions is explicit and one-way: the autoscaler's decision
// (autoscale.Output.Desired) is an input of the rollout pass (rollout.Observation.DesiredReplicas),
// and the rollout's sizing (rollout.PodsFor: how many pods both colors run for a total) is given
// to the autoscaler as a function value (autoscale.Input.PodsFor), so that a GPU clamp counts
// the pods a rollout adds. Neither package imports the other.
package plan

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/capacity"
	"github.com/modelship/modelship/internal/rollout"
)

// Observation is everything one pass read, as plain values: the controller's observe fills it
// and changes nothing else.
type Observation struct {
	// Rollout is what the rollout machine needs: both colors' Deployments, the route's
	// acceptance, a measurement, a person's operation. Its DesiredReplicas and Capacity are the
	// plan's to set.
	Rollout rollout.Observation
	// Route is the HTTPRoute that carries the weights (nil: none yet), for the apply.
	Route *gatewayv1.HTTPRoute
	// Accepted is the RouteAccepted condition: the route's and its InferencePools' acceptance.
	Accepted metav1.Condition
	// Cold is true when a pod whose containers are ready has not passed its warm-up check yet.
	Cold bool
	// Autoscaling is what the autoscaler reads; nil when the ModelServer is not autoscaled, or
	// its spec is held (the desired count then stays the last decision's).
	Autoscaling *Signals
	// Capacity is the cluster's room for the ModelServer's GPUs; nil when its pods need none,
	// or nothing asks (no autoscaling, no rollout).
	Capacity *CapacityView
}

// Signals is what the autoscaler observed of one ModelServer.
type Signals struct {
	// Observations are the spec metrics' values (see autoscale.Input).
	Observations []autoscale.Observation
	// RequestsWaiting, TTFTP95 and ITLP95 feed capacity learning (see autoscale.Input), the
	// latencies and Load (the token work) spec.autoscaling.slo, RequestsRunning its batch guard
	// and KVCacheUsage its KV guard.
	RequestsWaiting autoscale.Observation
	RequestsRunning autoscale.Observation
	KVCacheUsage    autoscale.Observation
	TTFTP95, ITLP95 autoscale.Observation
	Load            autoscale.Observation
	// Served is the requests finished per second, for spec.autoscaling.slo's fast path.
	Served autoscale.Observation
	// Ready and Starting count the pods of both colors: Ready ones, and those not Ready yet.
	Ready, Starting int32
	// ReadyOverWindow is the Ready pods averaged over the serving window (autoscale.Input's).
	ReadyOverWindow float64
	// BothColorsReady is true when both colors have Ready pods.
	BothColorsReady bool
	// Conflicts name HPAs and ScaledObjects that scale the ModelServer's Deployments too.
	Conflicts []string
}

// CapacityView is the cluster as a capacity check sees it: the nodes and the GPUs their pods
// hold, the namespace's quotas, and the ModelServer's own pods.
type CapacityView struct {
	Cluster *capacity.Cluster
	Quotas  []corev1.ResourceQuota
	Own     []corev1.Pod
}

// Result is the plan of one pass.
type Result struct {
	// Decision is the rollout machine's: each color's plan, the route weights, its events.
	Decision rollout.Decision
	// Scale is the autoscaler's decision; nil when it did not decide this pass.
	Scale *autoscale.Output
	// Status is the next status, every condition set but what only the apply learns (Finish).
	Status v1alpha1.ModelServerStatus
	// RequeueAfter is when to look again: the soonest of the rollout's and the autoscaler's
	// next looks, and the warm-up poll while a pod still loads.
	RequeueAfter time.Duration
}

// Plan decides one pass: the autoscaler first (when Observation.Autoscaling is set), then the
// rollout machine for its count (Compose). It does not modify ms or obs.
func Plan(ms *v1alpha1.ModelServer, obs Observation, now time.Time) Result {
	var scale *autoscale.Output
	if ms.Spec.Autoscaling != nil && obs.Autoscaling != nil {
		// The autoscaler sizes totals as the rollout would run them, without a person's
		// request of this pass (as it always did).
		sizing := obs.Rollout
		sizing.DesiredReplicas, sizing.Capacity, sizing.Operation = DesiredReplicas(ms), 0, rollout.OpNone
		out := Autoscale(ms, *obs.Autoscaling, obs.Capacity, rollout.PodsFor(ms, sizing, now), now)
		scale = &out
	}
	return Compose(ms, obs, scale, now)
}

// Compose runs the rollout machine for the autoscaler's decision scale (nil: the count is the
// spec's, or the last decision's), and completes the status: the autoscaling status, the
// conditions, the totals. It does not modify ms, obs or scale.
func Compose(ms *v1alpha1.ModelServer, obs Observation, scale *autoscale.Output, now time.Time) Result {
	o := obs.Rollout
	o.DesiredReplicas = DesiredReplicas(ms)
	if scale != nil {
		o.DesiredReplicas = scale.Desired
	}
	o.Capacity = rolloutCapacity(ms, o, obs.Capacity)
	d := rollout.Next(ms, o, now)
	st := *d.Status.DeepCopy()
	if scale != nil {
		as := *scale.Status.DeepCopy()
		st.Autoscaling = &as
	}
	RolloutConditions(&st, d.Report)
	obs.Rollout = o
	observedStatus(ms, &st, obs, d, scale)
	return Result{Decision: d, Scale: scale, Status: st, RequeueAfter: requeueAfter(obs, d, scale)}
}

// Autoscale is the autoscaler's decision of the total replica count, on the signals observed,
// with the cluster's room counted in pods of podsFor (how many pods both colors run for a
// total; nil: the total itself).
func Autoscale(ms *v1alpha1.ModelServer, sig Signals, view *CapacityView, podsFor func(int32) int32, now time.Time) autoscale.Output {
	spec := *ms.Spec.Autoscaling
	if podsFor == nil {
		podsFor = func(total int32) int32 { return total }
	}
	var revision string
	if ms.Status.Stable != nil {
		revision = ms.Status.Stable.Revision
	}
	current := DesiredReplicas(ms)
	fit := fitFor(ms, view, podsFor(current), podsFor(max(spec.MaxReplicas, current))-podsFor(current))
	return autoscale.Decide(autoscale.Input{
		Spec: spec, Current: current, Ready: sig.Ready, ReadyOverWindow: sig.ReadyOverWindow, Starting: sig.Starting,
		Observations: sig.Observations, RequestsWaiting: sig.RequestsWaiting, TTFTP95: sig.TTFTP95, ITLP95: sig.ITLP95,
		RequestsRunning: sig.RequestsRunning, BatchLimit: autoscale.BatchLimitOf(ms.Spec.Template.Spec), KVCacheUsage: sig.KVCacheUsage,
		Load: sig.Load, Served: sig.Served, ServingWindow: autoscale.ServingWindowOf(ms), Revision: revision, BothColorsReady: sig.BothColorsReady, Previous: ms.Status.Autoscaling, Capacity: fit, PodsFor: podsFor,
	}, now)
}

// DesiredReplicas is the total the ModelServer runs before this pass's autoscaling: spec.replicas,
// or the last autoscaling decision within the bounds.
func DesiredReplicas(ms *v1alpha1.ModelServer) int32 {
	n := int32(1)
	if ms.Spec.Replicas != nil {
		n = *ms.Spec.Replicas
	}
	if a := ms.Spec.Autoscaling; a != nil {
		if s := ms.Status.Autoscaling; s != nil {
			n = s.DesiredReplicas
		}
		n = max(a.Min(), min(a.MaxReplicas, n))
	}
	return n
}

// rolloutCapacity is how many pods of the ModelServer the cluster holds, for a rollout, which
// needs room for both colors (swap mode when they do not fit); 0 when unknown or unlimited, or
// no rollout runs.
func rolloutCapacity(ms *v1alpha1.ModelServer, o rollout.Observation, view *CapacityView) int32 {
	st := ms.Status.Stable
	if st == nil || (st.Revision == o.Revision && ms.Status.Candidate == nil) {
		return 0
	}
	var current int32
	for _, c := range o.Colors {
		current += c.Replicas
	}
	if fit := fitFor(ms, view, current, o.DesiredReplicas); fit != nil && fit.Limited {
		return current + fit.MaxAdditional
	}
	return 0
}

// fitFor says how many more pods fit the GPUs of matching nodes and the namespace quota, beyond
// the pods both colors run now (current) and wanting want more; nil when the pods need no GPU
// or nothing more is wanted. Where no node matches the template, only the quota limits (see
// capacity.FitCluster).
func fitFor(ms *v1alpha1.ModelServer, view *CapacityView, current, want int32) *capacity.FitResult {
	if view == nil || capacity.PodGPUs(&ms.Spec.Template.Spec) == 0 || want <= 0 {
		return nil
	}
	fit := capacity.FitCluster(view.Cluster, capacity.FitInput{
		Template: ms.Spec.Template, Namespace: ms.Namespace, ModelServer: ms.Name, Replicas: current,
		Pods: view.Own, Quotas: view.Quotas, Want: want,
	})
	return &fit
}

// requeueAfter is the soonest of the rollout's and the autoscaler's next looks, and the warm-up
// poll while a pod still loads.
func requeueAfter(obs Observation, d rollout.Decision, s *autoscale.Output) time.Duration {
	requeue := d.RequeueAfter
	if s != nil && (requeue == 0 || (s.RequeueAfter > 0 && s.RequeueAfter < requeue)) {
		requeue = s.RequeueAfter
	}
	if obs.Cold && (requeue == 0 || rollout.WarmupPollInterval < requeue) {
		requeue = rollout.WarmupPollInterval // a pod still loading is probed again
	}
	return requeue
}
