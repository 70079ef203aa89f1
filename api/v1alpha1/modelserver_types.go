package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ModelServer serves one ML/LLM model on GPUs: a model server's pod template run as two
// Deployments (blue and green), routed through a Gateway API HTTPRoute, rolled out
// progressively on Prometheus latency and error metrics, and scaled on GPU and serving signals.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=ms;mss,categories=modelship
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Stable",type=string,JSONPath=`.status.stable.revision`
// +kubebuilder:printcolumn:name="Candidate",type=string,JSONPath=`.status.candidate.revision`
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.status.weights.candidate`,description="Percent of traffic on the candidate"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40",message="metadata.name must be at most 40 characters: pods are named <name>-<color>-<hash>-<suffix> and analysis tells colors apart by pod name"
type ModelServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the user asks for.
	// +required
	Spec ModelServerSpec `json:"spec"`

	// Status is what modelship observes and decides.
	// +optional
	Status ModelServerStatus `json:"status,omitempty,omitzero"`
}

// ModelServerList is a list of ModelServers.
//
// +kubebuilder:object:root=true
type ModelServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ModelServers.
	Items []ModelServer `json:"items"`
}

// ModelServerSpec is the desired state of a ModelServer.
type ModelServerSpec struct {
	// Template is the pod template of the model server, as in a Deployment: image, args, ports,
	// resources (nvidia.com/gpu), probes, volumes with model weights, node selection for a GPU
	// product, priority class. A change to the template makes a new revision and starts a rollout.
	// +required
	Template corev1.PodTemplateSpec `json:"template"`

	// Replicas is the number of model server pods when autoscaling is off. It is the target of
	// the /scale subresource. With autoscaling on, modelship decides the count (starting from this
	// one, clamped to the autoscaling bounds). Defaults to 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Port is the port the model server listens on (vLLM's default is 8000). Each color's
	// Service exposes it under the same number and the HTTPRoute sends traffic to it.
	// +kubebuilder:default=8000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// Gateway says how traffic reaches the model server through the Gateway API.
	// +required
	Gateway GatewaySpec `json:"gateway"`

	// Rollout is the progressive delivery policy applied when the template changes.
	// +kubebuilder:default={}
	// +optional
	Rollout RolloutSpec `json:"rollout,omitempty,omitzero"`

	// Autoscaling, when set, makes modelship own the replica count across both colors, from
	// Prometheus GPU utilization and serving signals. Leave it out to use spec.replicas.
	// +optional
	Autoscaling *AutoscalingSpec `json:"autoscaling,omitempty"`

	// Paused freezes an in-progress rollout: weights and steps stay where they are until it is
	// cleared. Serving and autoscaling go on.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// GatewaySpec routes traffic to the model server: either an HTTPRoute that modelship owns
// (parentRefs, hostnames, matches) or a reference to an existing HTTPRoute owned by the user, in
// which modelship edits only its own two backendRefs.
//
// +kubebuilder:validation:XValidation:rule="has(self.routeRef) != (has(self.parentRefs) && size(self.parentRefs) > 0)",message="exactly one of spec.gateway.parentRefs (a route modelship owns) or spec.gateway.routeRef (a route you own) must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.routeRef) || ((!has(self.hostnames) || size(self.hostnames) == 0) && (!has(self.matches) || size(self.matches) == 0))",message="spec.gateway.hostnames and spec.gateway.matches apply to a route modelship owns and must be empty with spec.gateway.routeRef"
type GatewaySpec struct {
	// ParentRefs are the Gateways (or their listeners) the owned HTTPRoute attaches to.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	ParentRefs []gatewayv1.ParentReference `json:"parentRefs,omitempty"`

	// Hostnames of the owned HTTPRoute.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Hostnames []gatewayv1.Hostname `json:"hostnames,omitempty"`

	// Matches of the owned HTTPRoute's single rule. Empty matches every request (path prefix /).
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	Matches []gatewayv1.HTTPRouteMatch `json:"matches,omitempty"`

	// RouteRef names an existing HTTPRoute in the ModelServer's namespace that the user owns.
	// modelship adds or updates only the backendRefs that point at its own Services, in the
	// rule given by RuleName (or every rule that already references them, or the first rule),
	// and leaves everything else (other rules, filters, other backends) alone.
	// +optional
	RouteRef *RouteReference `json:"routeRef,omitempty"`
}

// RouteReference names a user-owned HTTPRoute in the ModelServer's namespace.
type RouteReference struct {
	// Name of the HTTPRoute.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// RuleName, when set, selects the rule (by its name) whose backendRefs modelship manages.
	// +optional
	RuleName *gatewayv1.SectionName `json:"ruleName,omitempty"`
}

// RolloutSpec is the progressive delivery policy: the candidate is warmed, then receives the
// traffic weights of Steps one after the other, each held for StepDuration and judged by Analysis.
//
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || self.steps.all(i, i >= 1 && i <= 100)",message="spec.rollout.steps must each be between 1 and 100"
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || self.steps.isSorted()",message="spec.rollout.steps must be strictly increasing"
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || size(self.steps) == 0 || self.steps[size(self.steps) - 1] == 100",message="spec.rollout.steps must end at 100"
type RolloutSpec struct {
	// Steps are the candidate's traffic weights, in percent, one per step. Strictly increasing,
	// each 1..100, ending at 100.
	// +kubebuilder:default={10,25,50,100}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=set
	// +optional
	Steps []int32 `json:"steps,omitempty"`

	// StepDuration is how long each step is held while analysis runs. At least one analysis
	// interval; at least the passing verdict of the step's last measurement is needed to advance.
	// +kubebuilder:default="2m"
	// +optional
	StepDuration metav1.Duration `json:"stepDuration,omitempty"`

	// Warmup, when set, is a check the candidate's pods must pass (an HTTP GET answering 2xx)
	// after they are Ready and before the candidate gets any weight. Model servers such as vLLM
	// report healthy before the weights are loaded; /v1/models answers only once they are.
	// +optional
	Warmup *WarmupSpec `json:"warmup,omitempty"`

	// AutoPromote, when false, holds the rollout before its last step (phase AwaitingPromotion)
	// until someone promotes it. Defaults to true.
	// +kubebuilder:default=true
	// +optional
	AutoPromote *bool `json:"autoPromote,omitempty"`

	// ScaleDownDelay is how long the previous stable color stays at full size after a promotion,
	// so that a rollback within this window is instant (no model load). Then it scales to zero.
	// +kubebuilder:default="10m"
	// +optional
	ScaleDownDelay metav1.Duration `json:"scaleDownDelay,omitempty"`

	// FailureLimit is the number of failed measurements tolerated in a rollout; one more rolls
	// back. 0 rolls back on the first failed measurement.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	FailureLimit int32 `json:"failureLimit,omitempty"`

	// InconclusiveDeadline, when set, rolls back a rollout that has held on inconclusive
	// analysis (no metrics, too few samples) for this long. Unset: hold until data returns.
	// +optional
	InconclusiveDeadline *metav1.Duration `json:"inconclusiveDeadline,omitempty"`

	// ProgressDeadline is how long the candidate may take to become Ready and warm before the
	// rollout is rolled back (pods that cannot schedule, crash, or never load). Defaults to 30m.
	// +kubebuilder:default="30m"
	// +optional
	ProgressDeadline metav1.Duration `json:"progressDeadline,omitempty"`

	// Analysis says how each step is judged.
	// +kubebuilder:default={}
	// +optional
	Analysis AnalysisSpec `json:"analysis,omitempty,omitzero"`
}

// WarmupSpec is an HTTP check on each candidate pod.
type WarmupSpec struct {
	// Path of the HTTP GET, e.g. /v1/models.
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:default="/v1/models"
	// +optional
	Path string `json:"path,omitempty"`

	// Port of the HTTP GET; defaults to spec.port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`
}

// AnalysisPreset names a ready-made set of analysis metrics.
// +kubebuilder:validation:Enum=vllm;sglang;none
type AnalysisPreset string

const (
	// AnalysisPresetVLLM judges p95 time to first token, p95 inter-token latency and p95
	// end-to-end latency (each at most 1.2x the stable color's) and the error ratio (at most 5%)
	// from vLLM's metrics.
	AnalysisPresetVLLM AnalysisPreset = "vllm"
	// AnalysisPresetSGLang judges the same four metrics from SGLang's metrics (started with
	// --enable-metrics): p95 time to first token, inter-token latency and end-to-end latency
	// (each at most 1.2x the stable color's) and the error ratio (at most 5%).
	AnalysisPresetSGLang AnalysisPreset = "sglang"
	// AnalysisPresetNone uses only the metrics listed in spec.rollout.analysis.metrics.
	AnalysisPresetNone AnalysisPreset = "none"
)

// AnalysisSpec says how each rollout step is judged on Prometheus metrics.
type AnalysisSpec struct {
	// Preset adds ready-made metrics; a metric in Metrics with the same name replaces the
	// preset's. Defaults to vllm.
	// +kubebuilder:default=vllm
	// +optional
	Preset AnalysisPreset `json:"preset,omitempty"`

	// Interval between measurements within a step. Defaults to 30s.
	// +kubebuilder:default="30s"
	// +optional
	Interval metav1.Duration `json:"interval,omitempty"`

	// ScrapeInterval is how often Prometheus scrapes the model server's pods. Analysis windows
	// span at least four scrape intervals (and the measurement interval), so that every rate
	// has enough samples: at a 60s scrape interval the window is 4m. Defaults to the
	// controller's --prometheus-scrape-interval (1m, Prometheus's own default).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('10m')",message="spec.rollout.analysis.scrapeInterval must be between 1s and 10m"
	// +optional
	ScrapeInterval *metav1.Duration `json:"scrapeInterval,omitempty"`

	// MinSamples is the number of candidate requests (over the analysis window) below which a
	// measurement is inconclusive rather than judged. Defaults to 50.
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinSamples int32 `json:"minSamples,omitempty"`

	// SampleQuery is the PromQL template counting the requests a measurement is based on.
	// Defaults to the preset's (vLLM's request_success_total increase over the window).
	// +optional
	SampleQuery string `json:"sampleQuery,omitempty"`

	// Metrics are the metrics judged at every measurement, in addition to the preset's.
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=name
	// +optional
	Metrics []AnalysisMetric `json:"metrics,omitempty"`
}

// AnalysisMetric is one PromQL query judged against a bound.
//
// Queries are Go templates rendered with: .Namespace, .Name (the ModelServer), .Color,
// .Revision, .Pods (a regular expression matching the color's pods, for pod=~), .Window (the
// analysis window as a PromQL duration: the interval, at least four scrape intervals). Values are escaped for PromQL strings; an unknown key is an error.
//
// +kubebuilder:validation:XValidation:rule="has(self.max) || has(self.min) || has(self.maxRatioToStable)",message="an analysis metric needs at least one of max, min or maxRatioToStable"
type AnalysisMetric struct {
	// Name of the metric, unique in the list (e.g. ttft-p95).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`

	// Query is the PromQL template; it must return a single value for the rendered color.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +required
	Query string `json:"query"`

	// Max is an absolute upper bound for the candidate's value (e.g. 0.5 seconds).
	// +optional
	Max *resource.Quantity `json:"max,omitempty"`

	// Min is an absolute lower bound for the candidate's value (e.g. a success rate).
	// +optional
	Min *resource.Quantity `json:"min,omitempty"`

	// MaxRatioToStable bounds the candidate's value relative to the same query on the stable
	// color: candidate <= ratio * stable (e.g. 1.2 for "at most 20% worse").
	// +optional
	MaxRatioToStable *resource.Quantity `json:"maxRatioToStable,omitempty"`
}

// AutoscalingSpec makes modelship own the replica count across both colors.
//
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="spec.autoscaling.minReplicas must be less than or equal to spec.autoscaling.maxReplicas"
type AutoscalingSpec struct {
	// MinReplicas is the lower bound of the total replica count. Defaults to 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReplicas int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the upper bound of the total replica count.
	// +kubebuilder:validation:Minimum=1
	// +required
	MaxReplicas int32 `json:"maxReplicas"`

	// Interval between evaluations. Defaults to 15s.
	// +kubebuilder:default="15s"
	// +optional
	Interval metav1.Duration `json:"interval,omitempty"`

	// Tolerance is the relative distance from a target within which no scaling happens
	// (HPA's default, 0.1). Defaults to 0.1.
	// +kubebuilder:default="0.1"
	// +optional
	Tolerance *resource.Quantity `json:"tolerance,omitempty"`

	// Metrics each propose a replica count; the largest proposal wins. Defaults to GPU
	// utilization with a target of 70%.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Metrics []AutoscalingMetric `json:"metrics,omitempty"`

	// Behavior bounds how fast the count moves, with HPA's semantics and defaults.
	// +kubebuilder:default={}
	// +optional
	Behavior ScalingBehavior `json:"behavior,omitempty,omitzero"`
}

// AutoscalingMetric is one scaling signal. Exactly one field is set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.gpuUtilization), has(self.requestsWaiting), has(self.kvCacheUsage), has(self.prometheus), has(self.resource), has(self.external)].filter(x, x).size() == 1",message="exactly one of gpuUtilization, requestsWaiting, kvCacheUsage, prometheus, resource or external must be set in each spec.autoscaling.metrics item"
type AutoscalingMetric struct {
	// GPUUtilization targets the average GPU utilization of the pods, in percent, from NVIDIA's
	// DCGM exporter (DCGM_FI_DEV_GPU_UTIL).
	// +optional
	GPUUtilization *GPUUtilizationMetric `json:"gpuUtilization,omitempty"`

	// RequestsWaiting targets the requests queued per replica (vllm:num_requests_waiting;
	// SGLang: sglang:num_queue_reqs).
	// +optional
	RequestsWaiting *PerReplicaMetric `json:"requestsWaiting,omitempty"`

	// KVCacheUsage targets the average KV-cache use, 0..1 (vllm:kv_cache_usage_perc, formerly
	// vllm:gpu_cache_usage_perc; SGLang: sglang:token_usage).
	// +optional
	KVCacheUsage *AverageMetric `json:"kvCacheUsage,omitempty"`

	// Prometheus is any PromQL template (rendered as analysis queries are) returning the total
	// load; the proposal is ceil(value / targetPerReplica).
	// +optional
	Prometheus *PrometheusMetric `json:"prometheus,omitempty"`

	// Resource targets the average CPU or memory utilization of the pods from the resource
	// metrics API (metrics.k8s.io), relative to their requests.
	// +optional
	Resource *ResourceMetric `json:"resource,omitempty"`

	// External reads a metric from the external metrics API (external.metrics.k8s.io), as
	// served by prometheus-adapter or KEDA's metrics server; the proposal is
	// ceil(value / targetPerReplica).
	// +optional
	External *ExternalMetric `json:"external,omitempty"`
}

// GPUUtilizationMetric targets an average GPU utilization.
type GPUUtilizationMetric struct {
	// Target average GPU utilization in percent. Defaults to 70.
	// +kubebuilder:default=70
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Target int32 `json:"target,omitempty"`
}

// PerReplicaMetric targets a value per replica.
type PerReplicaMetric struct {
	// TargetPerReplica is the value one replica should carry.
	// +required
	TargetPerReplica resource.Quantity `json:"targetPerReplica"`
}

// AverageMetric targets an average over the pods.
type AverageMetric struct {
	// Target average value.
	// +required
	Target resource.Quantity `json:"target"`
}

// PrometheusMetric is a custom PromQL scaling signal.
type PrometheusMetric struct {
	// Query is the PromQL template returning the total load of the ModelServer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +required
	Query string `json:"query"`

	// TargetPerReplica is the load one replica should carry.
	// +required
	TargetPerReplica resource.Quantity `json:"targetPerReplica"`
}

// ResourceMetric targets a pod resource's average utilization.
type ResourceMetric struct {
	// Name of the resource.
	// +kubebuilder:validation:Enum=cpu;memory
	// +required
	Name corev1.ResourceName `json:"name"`

	// TargetAverageUtilization in percent of the pods' requests.
	// +kubebuilder:validation:Minimum=1
	// +required
	TargetAverageUtilization int32 `json:"targetAverageUtilization"`
}

// ExternalMetric reads the external metrics API.
type ExternalMetric struct {
	// MetricName as the external metrics API serves it.
	// +kubebuilder:validation:MinLength=1
	// +required
	MetricName string `json:"metricName"`

	// Selector narrows the metric's series.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// TargetPerReplica is the value one replica should carry.
	// +required
	TargetPerReplica resource.Quantity `json:"targetPerReplica"`
}

// ScalingBehavior bounds scaling in each direction.
type ScalingBehavior struct {
	// ScaleUp defaults to no stabilization and at most +100% or +4 pods per 15s, whichever is more.
	// +optional
	ScaleUp *ScalingRules `json:"scaleUp,omitempty"`

	// ScaleDown defaults to a 300s stabilization window and at most -100% per 15s.
	// +optional
	ScaleDown *ScalingRules `json:"scaleDown,omitempty"`
}

// ScalingPolicySelect chooses among several policies.
// +kubebuilder:validation:Enum=Max;Min;Disabled
type ScalingPolicySelect string

const (
	// SelectMax allows the largest change of the policies.
	SelectMax ScalingPolicySelect = "Max"
	// SelectMin allows the smallest change of the policies.
	SelectMin ScalingPolicySelect = "Min"
	// SelectDisabled forbids scaling in this direction.
	SelectDisabled ScalingPolicySelect = "Disabled"
)

// ScalingRules are HPA's scaling rules for one direction.
type ScalingRules struct {
	// StabilizationWindow: the count moves only as far as every recommendation of this window
	// allows (the highest of the window when scaling down, the lowest when scaling up).
	// +optional
	StabilizationWindow *metav1.Duration `json:"stabilizationWindow,omitempty"`

	// SelectPolicy chooses among Policies. Defaults to Max.
	// +optional
	SelectPolicy *ScalingPolicySelect `json:"selectPolicy,omitempty"`

	// Policies are rate limits: at most Value pods or percent per Period.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Policies []ScalingPolicy `json:"policies,omitempty"`
}

// ScalingPolicyType is the unit of a scaling policy.
// +kubebuilder:validation:Enum=Pods;Percent
type ScalingPolicyType string

const (
	// PodsScalingPolicy limits the change to a number of pods.
	PodsScalingPolicy ScalingPolicyType = "Pods"
	// PercentScalingPolicy limits the change to a percentage of the current count.
	PercentScalingPolicy ScalingPolicyType = "Percent"
)

// ScalingPolicy is one rate limit.
type ScalingPolicy struct {
	// Type is the unit of Value.
	// +required
	Type ScalingPolicyType `json:"type"`
	// Value is the largest change allowed in one Period.
	// +kubebuilder:validation:Minimum=1
	// +required
	Value int32 `json:"value"`
	// Period over which the change is counted.
	// +required
	Period metav1.Duration `json:"period"`
}
