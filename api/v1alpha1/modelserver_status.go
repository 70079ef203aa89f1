package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is a ModelServer's state, for people. Machines read the conditions.
// +kubebuilder:validation:Enum=Pending;Progressing;Paused;AwaitingPromotion;Healthy;RolledBack;Degraded
type Phase string

const (
	// PhasePending means: the first revision is coming up; nothing serves yet.
	PhasePending Phase = "Pending"
	// PhaseProgressing means: a candidate revision is being warmed or receives a growing share of traffic.
	PhaseProgressing Phase = "Progressing"
	// PhasePaused means: a rollout is frozen by spec.paused.
	PhasePaused Phase = "Paused"
	// PhaseAwaitingPromotion means: the rollout holds before its last step for a human (autoPromote false).
	PhaseAwaitingPromotion Phase = "AwaitingPromotion"
	// PhaseHealthy means: the spec's revision serves all traffic and is available.
	PhaseHealthy Phase = "Healthy"
	// PhaseRolledBack means: the spec's revision failed and the stable revision serves all traffic.
	// It stays so until the spec changes.
	PhaseRolledBack Phase = "RolledBack"
	// PhaseDegraded means: the stable color had Ready pods and has none left.
	PhaseDegraded Phase = "Degraded"
)

// Color is one of the two Deployments of a ModelServer.
// +kubebuilder:validation:Enum=blue;green
type Color string

const (
	// Blue is the first color a ModelServer serves from.
	Blue Color = "blue"
	// Green is the other color.
	Green Color = "green"
)

// Other returns the other color.
func (c Color) Other() Color {
	if c == Green {
		return Blue
	}
	return Green
}

// Verdict is the outcome of one analysis measurement.
// +kubebuilder:validation:Enum=Pass;Fail;Inconclusive
type Verdict string

const (
	// VerdictPass means: the candidate is within the bound.
	VerdictPass Verdict = "Pass"
	// VerdictFail means: the candidate is outside the bound.
	VerdictFail Verdict = "Fail"
	// VerdictInconclusive means: no verdict is possible (Prometheus unreachable, no data, NaN, too
	// few samples). It never promotes and never rolls back.
	VerdictInconclusive Verdict = "Inconclusive"
)

// Outcome is how a revision's rollout ended.
// +kubebuilder:validation:Enum=Promoted;RolledBack;Aborted;Superseded
type Outcome string

const (
	// OutcomePromoted means: the revision became stable.
	OutcomePromoted Outcome = "Promoted"
	// OutcomeRolledBack means: analysis or a deadline rolled the revision back.
	OutcomeRolledBack Outcome = "RolledBack"
	// OutcomeAborted means: a person aborted the rollout.
	OutcomeAborted Outcome = "Aborted"
	// OutcomeSuperseded means: a newer template replaced the revision during its rollout.
	OutcomeSuperseded Outcome = "Superseded"
)

// ModelServerStatus is what modelship observes and decides.
type ModelServerStatus struct {
	// ObservedGeneration is the generation of the spec that the last successful pass acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase summarises the state for people; see the Phase values.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Revision is the revision (template hash) the spec asks for.
	// +optional
	Revision string `json:"revision,omitempty"`

	// Stable is the color that serves the stable revision.
	// +optional
	Stable *ColorStatus `json:"stable,omitempty"`

	// Candidate is the color that runs the revision being rolled out, if any (kept after a
	// rollback or abort, at zero replicas, to show what was rejected).
	// +optional
	Candidate *ColorStatus `json:"candidate,omitempty"`

	// Weights are the route's current traffic split in percent.
	// +optional
	Weights Weights `json:"weights,omitempty,omitzero"`

	// Rollout is the rollout's memory between passes: where the rollout stands, its analysis,
	// and how long the color that serves no traffic keeps its pods.
	// +optional
	Rollout RolloutStatus `json:"rollout,omitempty,omitzero"`

	// Replicas is the total number of model server pods across both colors (/scale).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the total number of Ready pods across both colors.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Selector selects all the ModelServer's pods, for the /scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// Autoscaling is the autoscaler's last decision.
	// +optional
	Autoscaling *AutoscalingStatus `json:"autoscaling,omitempty"`

	// History holds the last 10 revisions that left a rollout, newest first.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	History []RevisionRecord `json:"history,omitempty"`

	// Route is where the ModelServer's backendRefs were last written and carry its traffic: the
	// HTTPRoute modelship owns, or the route (and rule) named by spec.gateway.routeRef. When
	// spec.gateway moves them (parentRefs to routeRef and back, another routeRef or ruleName),
	// modelship writes them in the new place first and, once that place carries the weights and
	// no Gateway rejected it, deletes the owned HTTPRoute or removes its backendRefs from the
	// place recorded here, then records the new one. Nothing modelship wrote stays behind.
	// +optional
	Route *RouteStatus `json:"route,omitempty"`
	// Conditions follow kstatus (Ready, Reconciling, Stalled) plus Progressing, Degraded,
	// MetricsAvailable, RouteAccepted and ScalingLimited.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GateStatus is what a rollout gate answered at a step.
type GateStatus struct {
	// Name of the gate.
	Name string `json:"name"`
	// Step the answers are for.
	Step int32 `json:"step"`
	// Passed is true once the gate answered 2xx at this step.
	// +optional
	Passed bool `json:"passed,omitempty"`
	// Failures is how many calls in a row failed at this step.
	// +optional
	Failures int32 `json:"failures,omitempty"`
	// Message is the last failure.
	// +optional
	Message string `json:"message,omitempty"`
	// LastFailureAt is when the last failed call was recorded: the next call is made one
	// analysis interval later.
	// +optional
	LastFailureAt *metav1.Time `json:"lastFailureAt,omitempty"`
}

// ShadowStatus is the shadow phase of a rollout.
type ShadowStatus struct {
	// StartedAt is when the Gateway was asked to mirror requests to the candidate.
	StartedAt metav1.Time `json:"startedAt"`
	// Percent is the share of the requests mirrored, in percent.
	Percent int32 `json:"percent"`
	// PassedAt is when the shadow phase passed (the weighted steps follow).
	// +optional
	PassedAt *metav1.Time `json:"passedAt,omitempty"`
}

// RolloutStatus is the rollout state machine's memory between passes: the step it holds, its
// analysis, the revision it rolled back, the operation it last acted on, and until when the
// color that serves no traffic keeps its pods, one field per reason (keepWarmUntil,
// inspectUntil, drainUntil): it scales to zero once none of them is ahead.
type RolloutStatus struct {
	// Step is the 1-based index of the current rollout step in spec.rollout.steps; 0 before the
	// first step (candidate warming) and when no rollout is in progress.
	// +optional
	Step int32 `json:"step,omitempty"`

	// StepWeight is the candidate's weight at the current step, in percent, as set when the
	// step began (spec.rollout.steps[step-1] then). Steps edited mid-rollout never lower it:
	// the rollout holds this weight and goes on to the first step above it.
	// +optional
	StepWeight int32 `json:"stepWeight,omitempty"`

	// StepStartedAt is when the current step (or the warm-up) began.
	// +optional
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`

	// InconclusiveSince is when the rollout started holding on inconclusive analysis.
	// +optional
	InconclusiveSince *metav1.Time `json:"inconclusiveSince,omitempty"`

	// Failures is the number of failed measurements in the current rollout.
	// +optional
	Failures int32 `json:"failures,omitempty"`

	// Analysis is the last measurement of each analysis metric.
	// +listType=map
	// +listMapKey=name
	// +optional
	Analysis []MetricResult `json:"analysis,omitempty"`

	// LastMeasuredAt is when analysis last ran.
	// +optional
	LastMeasuredAt *metav1.Time `json:"lastMeasuredAt,omitempty"`

	// Gates is the outcome of the rollout gates called at the current step (spec.rollout.gates).
	// +listType=map
	// +listMapKey=name
	// +optional
	Gates []GateStatus `json:"gates,omitempty"`

	// Shadow is the shadow phase of the rollout (spec.rollout.shadow): when mirroring to the
	// candidate started and, once it passed, when. Unset before it starts and without one.
	// +optional
	Shadow *ShadowStatus `json:"shadow,omitempty"`

	// RolledBackRevision is the revision that was last rolled back or aborted. While the spec
	// still asks for it, modelship does not retry it.
	// +optional
	RolledBackRevision string `json:"rolledBackRevision,omitempty"`

	// HandledOperation is the last operation annotation (promote, promote-full, abort) that a
	// pass acted on, recorded in the same status write as its effect. The annotation is removed
	// only after that write; a pass that finds an annotation recorded here removes it without
	// acting again. Cleared once the annotation is gone.
	// +optional
	HandledOperation *HandledOperation `json:"handledOperation,omitempty"`

	// KeepWarmUntil is when the previous stable color, kept at its replicas after a promotion so
	// that the spec back on its revision is an instant rollback, scales to zero:
	// spec.rollout.scaleDownDelay after the promotion (at once in swap mode, whose GPUs the new
	// stable color needs).
	// +optional
	KeepWarmUntil *metav1.Time `json:"keepWarmUntil,omitempty"`

	// InspectUntil is when a revision kept for inspection scales to zero: a candidate a person
	// aborted, or the revision an instant rollback abandoned, keeps its pods without traffic for
	// spec.rollout.scaleDownDelay (in swap mode only where there is room beside the stable
	// color). A new revision takes its color at once.
	// +optional
	InspectUntil *metav1.Time `json:"inspectUntil,omitempty"`

	// DrainUntil is when a candidate that leaves the route (rolled back, aborted, superseded or
	// abandoned by an instant rollback) scales to zero: it keeps its pods for a short drain (15s)
	// after its weight last went down, while the Gateways apply the new weights and requests in
	// flight finish. Until then a new revision supersedes it (phase Progressing, reason
	// Superseding) instead of taking its color at once.
	// +optional
	DrainUntil *metav1.Time `json:"drainUntil,omitempty"`
}

// RouteStatus names the HTTPRoute (and rule) that holds a ModelServer's backendRefs.
type RouteStatus struct {
	// Name of the HTTPRoute, in the ModelServer's namespace.
	Name string `json:"name"`
	// Owned is true for the HTTPRoute modelship owns (spec.gateway.parentRefs), false for a
	// user's route named by spec.gateway.routeRef.
	// +optional
	Owned bool `json:"owned,omitempty"`
	// RuleName is the rule of a user's route that holds the backendRefs
	// (spec.gateway.routeRef.ruleName); empty when none was named.
	// +optional
	RuleName string `json:"ruleName,omitempty"`
}

// HandledOperation names an operation annotation and the value it had when a pass acted on it.
type HandledOperation struct {
	// Annotation is the annotation's key, e.g. serving.modelship.dev/abort.
	Annotation string `json:"annotation"`
	// Revision is the annotation's value: the candidate revision it named.
	Revision string `json:"revision"`
}

// ColorStatus describes one color's Deployment.
type ColorStatus struct {
	// Color of the Deployment.
	Color Color `json:"color"`
	// Revision running on it.
	Revision string `json:"revision"`
	// Image of its first container, for people.
	// +optional
	Image string `json:"image,omitempty"`
	// Replicas the Deployment is asked for.
	// +optional
	Replicas int32 `json:"replicas"`
	// ReadyReplicas the Deployment reports.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// Warm is true once the pods whose containers are ready all passed the warm-up check.
	// +optional
	Warm bool `json:"warm,omitempty"`
	// SizedSince is when the candidate last reached its planned replicas, all Ready and warm
	// (their model loaded). Analysis of a step waits for it (plus one window), so that a
	// candidate still loading the pods pre-scaled for its next weight, and so more loaded per
	// serving pod than the stable color, is not compared with it.
	// +optional
	SizedSince *metav1.Time `json:"sizedSince,omitempty"`
	// UnreadySince is when the candidate, holding a step's weight, last went below the Ready,
	// warm pods that weight needs. Its weight is capped meanwhile to what its Ready pods carry,
	// and once UnreadySince is older than spec.rollout.progressDeadline the rollout is rolled
	// back (reason ProgressDeadlineExceeded). Unset while the candidate carries its step.
	// +optional
	UnreadySince *metav1.Time `json:"unreadySince,omitempty"`
	// ShortSince is when the stable color's Deployment was seen, a second pass in a row, asking
	// for fewer replicas than planned: a scale-up the API server has not taken (refused by an
	// admission webhook that is down, or a quota). A leaving candidate's drain waits for the
	// stable color's pods on their way, but not for these: 30 s after ShortSince it gives all
	// traffic to the stable color's Ready pods. Unset once the Deployment asks for its plan.
	// +optional
	ShortSince *metav1.Time `json:"shortSince,omitempty"`
}

// Weights is the traffic split in percent; the two add up to 100.
type Weights struct {
	// Stable is the stable color's weight.
	Stable int32 `json:"stable"`
	// Candidate is the candidate color's weight.
	Candidate int32 `json:"candidate"`
}

// MetricResult is one analysis measurement.
type MetricResult struct {
	// Name of the metric.
	Name string `json:"name"`
	// Candidate is the candidate's value, if any.
	// +optional
	Candidate string `json:"candidate,omitempty"`
	// Stable is the stable color's value, for a relative bound.
	// +optional
	Stable string `json:"stable,omitempty"`
	// Bound is the limit the candidate was held to, e.g. "<= 0.35 (1.2x stable)".
	// +optional
	Bound string `json:"bound,omitempty"`
	// Verdict of the measurement.
	Verdict Verdict `json:"verdict"`
	// Confident is set for a histogram or per-unit metric held relative to the stable color
	// (a metric judged by a test): true on a Pass whose test passed at the rollout's error
	// budget (the mirror of a Fail: the candidate is within its bound with the confidence a
	// Fail needs), false otherwise. With spec.rollout.minStepDuration, a step whose every such
	// metric is confident, and every other metric passed, ends early.
	// +optional
	Confident *bool `json:"confident,omitempty"`
	// Message says why, for Fail and Inconclusive.
	// +optional
	Message string `json:"message,omitempty"`
	// At is when it was measured.
	At metav1.Time `json:"at"`
}

// AutoscalingStatus is the autoscaler's last decision.
type AutoscalingStatus struct {
	// DesiredReplicas is the total the autoscaler wants across both colors.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// Proposals are each metric's value and proposed count.
	// +listType=atomic
	// +optional
	Proposals []Proposal `json:"proposals,omitempty"`
	// Recommendations are recent unstabilized recommendations, kept for the stabilization
	// windows so that a controller restart does not forget them.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Recommendations []Recommendation `json:"recommendations,omitempty"`
	// Events are recent scaling changes, kept for the rate limits.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Events []ScaleEvent `json:"events,omitempty"`
	// LastScaleTime is when the count last changed.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`
	// LastScaleReason says why, e.g. "3 -> 5: gpuUtilization 91 > target 70".
	// +optional
	LastScaleReason string `json:"lastScaleReason,omitempty"`
	// LearnedCapacities are the capacities per replica learnt from the minutes beyond
	// capacity, one per metric with learnCapacity that has seen one, and the slo's (metric
	// "slo", learnt in both directions, in units of token work: see spec.autoscaling.slo).
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=metric
	// +optional
	LearnedCapacities []LearnedCapacity `json:"learnedCapacities,omitempty"`
	// Queue is the requests queued in the Ready pods at the last pass that saw a queue, for
	// spec.autoscaling.slo's fast path: the queue's growth since then, added to the requests
	// served per second, is the rate arriving; a queue that shrank is a backlog draining, whose
	// wait is no lesson for the learnt capacity. Kept two serving windows after the queue is
	// gone (the latencies measured are still the backlog's), then empty.
	// +optional
	Queue *QueueSample `json:"queue,omitempty"`
}

// QueueSample is the total of the requests queued in a ModelServer's Ready pods at one pass.
type QueueSample struct {
	// At is when it was read.
	At metav1.Time `json:"at"`
	// Requests is the total of the requests queued (vllm:num_requests_waiting summed).
	// +kubebuilder:validation:Minimum=0
	Requests int64 `json:"requests"`
	// Ready is the Ready replicas the queue was read on: a shrink measured across pods
	// coming Ready since is not the drain on the replicas that serve now.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Ready int32 `json:"ready,omitempty"`
}

// LearnedCapacity is the load one replica carries before its latency misses the SLO or its
// requests queue, in the metric's units.
type LearnedCapacity struct {
	// Metric names the metric, as in proposals.
	Metric string `json:"metric"`
	// PerReplica is the capacity: the moving average of the loads per Ready replica at which
	// the replicas were seen beyond capacity (each below the capacity before it), e.g. "0.71";
	// for the slo, also raised step by step while the SLO holds with margin.
	PerReplica string `json:"perReplica"`
	// Samples counts the observations it was learnt from.
	Samples int32 `json:"samples"`
	// Revision is the stable revision it was learnt on: a promotion to another revision (a new
	// model, image or arguments) starts again from the spec.
	// +optional
	Revision string `json:"revision,omitempty"`
	// LastSampleTime is when the latest one was taken.
	LastSampleTime metav1.Time `json:"lastSampleTime"`
	// Floor is, for the slo, the highest load per Ready replica seen holding the SLO, decayed
	// with time (halved every 30 minutes): a minute that misses the SLO lowers the capacity no
	// further than it, so one odd minute cannot ratchet the fleet up. Empty before the first
	// such minute, and for learnCapacity metrics.
	// +optional
	Floor string `json:"floor,omitempty"`
	// Ceiling is, for the slo, the lowest load per Ready replica seen missing the SLO, rising
	// with time (doubling every hour): probing does not raise the capacity above it. Empty
	// before the first miss, and for learnCapacity metrics.
	// +optional
	Ceiling string `json:"ceiling,omitempty"`
	// LatencyFloor is, for the slo, the low level of the worst p95 latency over its SLO seen with
	// each Ready replica carrying a light load (at most 0.7 lastMissLoad), e.g. "0.55": the part
	// of the latency a replica answers with at any load (a long prompt's own prefill). A lower
	// window sets it at once, one that held above it raises it a quarter of the way. Where it is
	// above a fifth of the SLO, a window holds with margin at up to half the headroom above it
	// (rather than 0.6 of the SLO), so that a workload whose latencies are high at any load
	// is not taken as one at the edge of capacity. Empty before such a window; it starts again
	// with a new revision.
	// +optional
	LatencyFloor string `json:"latencyFloor,omitempty"`
	// LastMissLoad is, for the slo, the load per Ready replica of the last window that missed
	// the SLO with no scale-up within two windows and a cold start before it (one measured
	// while new pods came up reads low): a window at 0.7 of it or less is at a light load, whose latencies are the
	// requests' own (see latencyFloor), and a tight one there does not lower the capacity.
	// +optional
	LastMissLoad string `json:"lastMissLoad,omitempty"`
	// BurstLoad is, for the slo, the highest load (token work) seen arriving in a burst
	// (requests queued faster than the Ready replicas served them: the fast path's arrival
	// rate), at BurstTime. The replicas that carry it at the learnt capacity are kept, the
	// load fading by half every spec.autoscaling.slo.burstMemory (30m): a burst seen is taken
	// to come again. Empty when none or the memory is off.
	// +optional
	BurstLoad string `json:"burstLoad,omitempty"`
	// BurstTime is when BurstLoad was seen.
	// +optional
	BurstTime *metav1.Time `json:"burstTime,omitempty"`
	// RequestWork is, for the slo, the token work per request served (the load over the
	// requests finished per second), averaged over the windows learnt from, e.g. "0.09": the
	// traffic's mix. A window that misses the SLO with requests half as heavy again or more
	// (a tenant with long prompts come in) learns as a first window does: the capacity, the
	// floor and the ceiling were proven on lighter requests. Empty before the first window.
	// +optional
	RequestWork string `json:"requestWork,omitempty"`
}

// Proposal is one metric's proposed replica count.
type Proposal struct {
	// Metric names the signal, e.g. gpuUtilization.
	Metric string `json:"metric"`
	// Value observed, empty when no data.
	// +optional
	Value string `json:"value,omitempty"`
	// Target of the metric.
	// +optional
	Target string `json:"target,omitempty"`
	// Replicas proposed; absent when the metric had no data.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Message says why there is no proposal.
	// +optional
	Message string `json:"message,omitempty"`
}

// Recommendation is one unstabilized recommendation.
type Recommendation struct {
	// At is when it was made.
	At metav1.Time `json:"at"`
	// Replicas recommended.
	Replicas int32 `json:"replicas"`
	// Metric names the proposal that made it, as in proposals; empty for the count recorded
	// on the first pass. A scale reason that follows a stabilization window names it.
	// +optional
	Metric string `json:"metric,omitempty"`
	// Queued says the slo made it while a queue was kept in status.autoscaling.queue (requests
	// queued in the Ready pods, a backlog draining, or the windows after it): a count for the
	// queue, not for the load, which the scale-down stabilization window stops holding once
	// no queue is kept and a window holds the SLO with margin.
	// +optional
	Queued bool `json:"queued,omitempty"`
}

// ScaleEvent is one change of the replica count.
type ScaleEvent struct {
	// At is when the count changed.
	At metav1.Time `json:"at"`
	// From is the count before.
	From int32 `json:"from"`
	// To is the count after.
	To int32 `json:"to"`
}

// RevisionRecord is one revision's rollout outcome.
type RevisionRecord struct {
	// Revision (template hash).
	Revision string `json:"revision"`
	// Image of its first container.
	// +optional
	Image string `json:"image,omitempty"`
	// Outcome of its rollout.
	Outcome Outcome `json:"outcome"`
	// Reason, e.g. the failed metric with value and bound.
	// +optional
	Reason string `json:"reason,omitempty"`
	// At is when the outcome happened.
	At metav1.Time `json:"at"`
}
