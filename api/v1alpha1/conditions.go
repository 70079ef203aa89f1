package v1alpha1

// Condition types. Ready, Reconciling and Stalled follow kstatus so that kubectl wait, Flux and
// Argo CD read a ModelServer's health without a plug-in.
const (
	// ConditionReady is True when the spec's revision serves all traffic and is available.
	ConditionReady = "Ready"
	// ConditionReconciling is True while work is in progress (a rollout, replicas coming up).
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when retrying will not help (the revision was rolled back, the
	// template cannot run) until the spec changes, or when a rollout has held on inconclusive
	// analysis for spec.rollout.inconclusive.reportAfter (reason AnalysisInconclusive; it clears when a
	// verdict returns).
	ConditionStalled = "Stalled"
	// ConditionProgressing is True while a rollout moves forward; False when it is held.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the stable color, which had Ready pods, has none left while
	// replicas are asked for (scaling up or a first rollout is not Degraded: Ready False says so).
	ConditionDegraded = "Degraded"
	// ConditionMetricsAvailable is False when Prometheus could not give a verdict or a proposal.
	ConditionMetricsAvailable = "MetricsAvailable"
	// ConditionRouteAccepted mirrors the HTTPRoute's Accepted condition from its Gateways;
	// Unknown while no Gateway controller has answered.
	ConditionRouteAccepted = "RouteAccepted"
	// ConditionScalingLimited is True when the desired count is clamped (bounds, GPU quota or
	// capacity), judged on the highest recommendation the scale-down stabilization window still
	// holds, or when a conflicting autoscaler targets the Deployments.
	ConditionScalingLimited = "ScalingLimited"
)

// Condition reasons (UpperCamelCase, one place).
const (
	ReasonAvailable           = "Available"
	ReasonDeploymentsNotReady = "DeploymentsNotReady"
	ReasonRolloutInProgress   = "RolloutInProgress"
	ReasonWarmingUp           = "WarmingUp"
	ReasonAnalyzing           = "Analyzing"
	ReasonInconclusive        = "Inconclusive"
	ReasonPaused              = "Paused"
	ReasonAwaitingPromotion   = "AwaitingPromotion"
	ReasonPromoted            = "Promoted"
	ReasonRolledBack          = "RolledBack"
	ReasonAborted             = "Aborted"
	ReasonProgressDeadline    = "ProgressDeadlineExceeded"
	ReasonInvalidSpec         = "InvalidSpec"
	// ReasonInvalidTemplate (Stalled) says that the API server refuses a Deployment of the
	// spec's template (found by a dry run when the template changes): the message names the
	// fields; nothing is applied, and the Deployments that serve keep their template, until the
	// template is fixed.
	ReasonInvalidTemplate      = "InvalidTemplate"
	ReasonMetricsOK            = "MetricsOK"
	ReasonMetricsUnavailable   = "MetricsUnavailable"
	ReasonNoGatewayAnswer      = "NoGatewayAnswer"
	ReasonAccepted             = "Accepted"
	ReasonNotAccepted          = "NotAccepted"
	ReasonWithinBounds         = "WithinBounds"
	ReasonGPUCapacityLimited   = "GPUCapacityLimited"
	ReasonGPUQuotaLimited      = "GPUQuotaLimited"
	ReasonBoundsLimited        = "BoundsLimited"
	ReasonConflictingAutoscale = "ConflictingAutoscaler"
	ReasonApplyFailed          = "ApplyFailed"
	ReasonReconciled           = "Reconciled"
	// ReasonAnalysisInconclusive (Stalled True, Reconciling False) says that a rollout has held
	// on inconclusive analysis past the stall deadline; the message says why and hints at the cause.
	ReasonAnalysisInconclusive = "AnalysisInconclusive"
	// ReasonNoRoomForCandidate (Stalled True, Reconciling False) says that in swap mode the
	// cluster cannot hold the candidate's pods for its next step beside the pods the stable
	// color's traffic share needs: the rollout holds at its step (analysis goes on, a failure
	// still rolls back) until GPUs are freed, the replicas lowered or the steps changed.
	ReasonNoRoomForCandidate = "NoRoomForCandidate"
	// ReasonCandidateUnready (Reconciling, Progressing) says that the candidate lost Ready,
	// warm pods it needs for its step's weight; its weight is capped to what the rest carry.
	ReasonCandidateUnready = "CandidateUnready"
	// ReasonRouteNotAccepted (Progressing False) says that the rollout holds because a Gateway
	// did not accept the HTTPRoute: it neither advances nor promotes until it is accepted.
	ReasonRouteNotAccepted = "RouteNotAccepted"
	// ReasonGateHeld (Progressing False) says that a rollout gate (spec.rollout.gates) has not
	// answered 2xx at this step: the rollout holds until it does; the message names the gate
	// and its last answer.
	ReasonGateHeld = "GateHeld"
	// ReasonMirrorUnsupported (Progressing False) says that spec.rollout.shadow asks for a
	// shadow phase that the Gateway cannot run as asked (its GatewayClass does not list
	// RequestMirror among its supported features, no Gateway has reported on the route yet, or
	// the TraefikService API is not served): the rollout holds at step 0, with no user request
	// on the candidate, until it can, or spec.rollout.shadow is removed.
	ReasonMirrorUnsupported = "MirrorUnsupported"
	// ReasonGateFailed is the rollback's reason when a gate failed more than
	// spec.rollout.gateFailureLimit calls in a row.
	ReasonGateFailed = "GateFailed"
	// ReasonSuperseding (Reconciling, Progressing) says that a candidate superseded by a spec
	// change still serves what the stable color cannot carry yet; the new revision starts once
	// the stable color carries all traffic.
	ReasonSuperseding = "Superseding"
	// ReasonNameConflict means: an object that modelship would make (a color's Deployment or
	// Service, or the HTTPRoute it owns) already exists and is not controlled by this
	// ModelServer, or the HTTPRoute named by spec.gateway.routeRef is controlled by another
	// object (another ModelServer's owned route); modelship does not take it over and touches
	// nothing until it is renamed or removed, or routeRef names another route.
	ReasonNameConflict = "NameConflict"
	// ReasonRouteMoved (an event) says that the place spec.gateway puts the backendRefs in (the
	// owned HTTPRoute, a routeRef or its ruleName) changed and, the new place carrying the
	// traffic, modelship deleted its owned HTTPRoute or removed its backendRefs from the old place.
	ReasonRouteMoved = "RouteMoved"
	// ReasonBackendSwitched (an event) says that after a change of spec.gateway.backend the route
	// now sends the traffic to the new backends (InferencePools once a Gateway accepted them and
	// the colors that carry traffic have Ready pods; Services at once) and no longer names the old.
	ReasonBackendSwitched = "BackendSwitched"
	// ReasonPoolNotAccepted (RouteAccepted False) says that a Gateway accepted the HTTPRoute but
	// has not accepted (or resolved) one of the ModelServer's InferencePools: the rollout holds.
	ReasonPoolNotAccepted = "PoolNotAccepted"
	// ReasonBackendNotResolved (RouteAccepted False) says that a Gateway accepted the HTTPRoute
	// but reports ResolvedRefs False for it (a backend Service without EndpointSlices, or missing:
	// that backend's share of requests fails, HTTP 500 on Traefik); the message names the
	// ModelServer's backend the Gateway names. The rollout holds: no weight goes up until the
	// Gateway resolves the backends; weight down, abort and rollback still act.
	ReasonBackendNotResolved = "BackendNotResolved"
	// ReasonInferencePoolAPIMissing (Stalled) says that spec.gateway.backend is InferencePool but
	// the cluster does not serve inference.networking.k8s.io/v1 InferencePools: install the
	// Gateway API Inference Extension's CRD; nothing is applied until then.
	ReasonInferencePoolAPIMissing = "InferencePoolAPIMissing"
	// ReasonNoReplicaForLoad (Ready False) says that the autoscaler holds 0 replicas while a
	// metric that sees load without pods reads above 0 (requests wait with no pod to serve
	// them: scale-up held by the GPUs, a quota or a policy), or while none of those metrics has
	// data, so that nothing shows no request waits. At 0 replicas a ModelServer is Ready only
	// when such a metric reads 0.
	ReasonNoReplicaForLoad = "NoReplicaForLoad"
)

// The warm-up readiness gate: when spec.rollout.warmup is set, each color's pods carry the
// readiness gate PodConditionWarm, and the controller sets that pod condition True once the pod's
// warm-up check passes. A pod is Ready (in its Service's endpoints, counted in its Deployment's
// readyReplicas) only when its containers are ready and the condition is True, so no pod gets
// traffic before its warm-up check passes.
const (
	// PodConditionWarm is the pod condition type of the warm-up readiness gate.
	PodConditionWarm = "serving.modelship.dev/warm"
	// ReasonWarmupPassed (PodConditionWarm True): the pod answered the warm-up check.
	ReasonWarmupPassed = "WarmupPassed"
	// ReasonWarmupNotAsked (PodConditionWarm True): the pod carries the gate, but the
	// ModelServer no longer asks for a warm-up check (spec.rollout.warmup was removed).
	ReasonWarmupNotAsked = "WarmupNotAsked"
	// ReasonContainersNotReady (PodConditionWarm False): the pod's containers stopped being ready
	// (a restart reloads the model); the warm-up check runs again once they are ready.
	ReasonContainersNotReady = "ContainersNotReady"
)

// Labels and annotations on the objects modelship makes.
const (
	// LabelModelServer names the ModelServer on its Deployments, Services and pods.
	LabelModelServer = "serving.modelship.dev/modelserver"
	// LabelColor is blue or green.
	LabelColor = "serving.modelship.dev/color"
	// LabelRevision is the template hash a pod runs.
	LabelRevision = "serving.modelship.dev/revision"
	// AnnotationPort on a color's Deployment is the spec.port its template was applied with:
	// the port its pods listen on, which that color's Service targets (the stable color keeps
	// its port until its pods are replaced).
	AnnotationPort = "serving.modelship.dev/port"
	// FieldOwner is the server-side apply field manager of the controller.
	FieldOwner = "modelship"
)

// Operation annotations: what an SRE or a pipeline asks of a rollout with plain kubectl
// (`kubectl annotate ms NAME serving.modelship.dev/promote=<revision>`). Each names the
// revision it is meant for, so a stale request never acts on a newer rollout.
const (
	// AnnotationPromote advances the rollout named by the value to its next step.
	AnnotationPromote = "serving.modelship.dev/promote"
	// AnnotationPromoteFull skips the remaining steps of the rollout named by the value.
	AnnotationPromoteFull = "serving.modelship.dev/promote-full"
	// AnnotationAbort sends all traffic back to stable for the rollout named by the value,
	// keeping the candidate for inspection.
	AnnotationAbort = "serving.modelship.dev/abort"
)
