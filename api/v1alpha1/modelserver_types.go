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
//
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.autoscaling.metrics) || !self.autoscaling.metrics.exists(m, has(m.endpointPicker)) || (has(self.gateway.backend) && self.gateway.backend == 'InferencePool')",message="spec.autoscaling.metrics[*].endpointPicker reads the InferencePools' endpoint picker and needs spec.gateway.backend InferencePool"
// +kubebuilder:validation:XValidation:rule="(has(self.gateway.backend) && self.gateway.backend == 'InferencePool') || !has(self.rollout) || !has(self.rollout.analysis) || !has(self.rollout.analysis.metrics) || !self.rollout.analysis.metrics.exists(m, m.query.matches('[{][{]-?[[:space:]]*[.]Pool[[:space:]]*-?[}][}]') || (has(m.histogram) && m.histogram.bucketQuery.matches('[{][{]-?[[:space:]]*[.]Pool[[:space:]]*-?[}][}]')))",message="spec.rollout.analysis.metrics[*].query and histogram.bucketQuery may use {{.Pool}}, the color's InferencePool, only with spec.gateway.backend InferencePool",fieldPath=".rollout.analysis.metrics"
// +kubebuilder:validation:XValidation:rule="(has(self.gateway.backend) && self.gateway.backend == 'InferencePool') || !has(self.rollout) || !has(self.rollout.analysis) || !has(self.rollout.analysis.sampleQuery) || !self.rollout.analysis.sampleQuery.matches('[{][{]-?[[:space:]]*[.]Pool[[:space:]]*-?[}][}]')",message="spec.rollout.analysis.sampleQuery may use {{.Pool}}, the color's InferencePool, only with spec.gateway.backend InferencePool",fieldPath=".rollout.analysis.sampleQuery"
// +kubebuilder:validation:XValidation:rule="(has(self.gateway.backend) && self.gateway.backend == 'InferencePool') || !has(self.autoscaling) || !has(self.autoscaling.metrics) || !self.autoscaling.metrics.exists(m, has(m.prometheus) && m.prometheus.query.matches('[{][{]-?[[:space:]]*[.]Pool[[:space:]]*-?[}][}]'))",message="spec.autoscaling.metrics[*].prometheus.query may use {{.Pool}}, the color's InferencePool, only with spec.gateway.backend InferencePool",fieldPath=".autoscaling.metrics"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.analysis) || !has(self.rollout.analysis.gateway) || !has(self.gateway.backend) || self.gateway.backend == 'Service'",message="spec.rollout.analysis.gateway counts the requests of each color's Service at the gateway and needs spec.gateway.backend Service: Traefik does not route to InferencePools",fieldPath=".rollout.analysis.gateway"
// +kubebuilder:validation:XValidation:rule="(has(self.port) && self.port != 8000) || !has(self.template.spec) || !has(self.template.spec.containers) || size(self.template.spec.containers) > 16 || size([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].filter(i, i < size(self.template.spec.containers) && has(self.template.spec.containers[i].ports) && size(self.template.spec.containers[i].ports) > 0)) != 1 || size(self.template.spec.containers[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].filter(i, i < size(self.template.spec.containers) && has(self.template.spec.containers[i].ports) && size(self.template.spec.containers[i].ports) > 0)[0]].ports) > 8 || [0, 1, 2, 3, 4, 5, 6, 7].exists(j, j < size(self.template.spec.containers[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].filter(i, i < size(self.template.spec.containers) && has(self.template.spec.containers[i].ports) && size(self.template.spec.containers[i].ports) > 0)[0]].ports) && self.template.spec.containers[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].filter(i, i < size(self.template.spec.containers) && has(self.template.spec.containers[i].ports) && size(self.template.spec.containers[i].ports) > 0)[0]].ports[j].containerPort == 8000)",messageExpression="'spec.port is 8000 (the default), but the only container that declares ports declares containerPort %d and not 8000: set spec.port to %d, the port the model server listens on, or declare containerPort 8000'.format([self.template.spec.containers[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].filter(i, i < size(self.template.spec.containers) && has(self.template.spec.containers[i].ports) && size(self.template.spec.containers[i].ports) > 0)[0]].ports[0].containerPort, self.template.spec.containers[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].filter(i, i < size(self.template.spec.containers) && has(self.template.spec.containers[i].ports) && size(self.template.spec.containers[i].ports) > 0)[0]].ports[0].containerPort])",fieldPath=".port"
type ModelServerSpec struct {
	// Template is the pod template of the model server, as in a Deployment: image, args, ports,
	// resources (nvidia.com/gpu), probes, volumes with model weights, node selection for a GPU
	// product, priority class. A change to the template makes a new revision and starts a rollout.
	// The pods run under Deployments, so restartPolicy is Always (or left out) and there is no
	// activeDeadlineSeconds. GPUs (nvidia.com/gpu, amd.com/gpu, gpu.intel.com/i915,
	// gpu.intel.com/xe, habana.ai/gaudi, google.com/tpu, aws.amazon.com/neuron) are whole numbers
	// from 0 to 16 written like 1 or "8", and a GPU request, when given, equals the limit.
	// Container names are DNS-1123 labels and every container has an image. The labels
	// serving.modelship.dev/modelserver, /color and /revision are modelship's, set on the pods.
	// Admission checks the GPUs and images of the first 16 containers and the names of the first
	// 8 containers and init containers (CEL cost bounds); the controller checks the GPUs of
	// every container and init container, and the labels, and reports Stalled with reason
	// InvalidSpec. Admission reads a GPU count as written: 1.0 is refused, write 1. What else a
	// Deployment would refuse, the controller finds with a dry run of the Deployment whenever the
	// template changes, and reports Stalled with reason InvalidTemplate and the API server's
	// message, applying nothing (the Deployments that serve keep their template).
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && has(self.spec.containers) && size(self.spec.containers) > 0",message="spec.template.spec.containers must list at least one container (the model server)",fieldPath=".spec.containers"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.restartPolicy) || self.spec.restartPolicy == 'Always'",message="spec.template.spec.restartPolicy must be Always or left out: the model server runs under a Deployment, which restarts its pods",fieldPath=".spec.restartPolicy"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.activeDeadlineSeconds)",message="spec.template.spec.activeDeadlineSeconds must be left out: a model server runs until it is replaced, and a Deployment refuses a deadline",fieldPath=".spec.activeDeadlineSeconds"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].all(i, i >= size(self.spec.containers) || !has(self.spec.containers[i].resources) || !has(self.spec.containers[i].resources.limits) || ['nvidia.com/gpu', 'amd.com/gpu', 'gpu.intel.com/i915', 'gpu.intel.com/xe', 'habana.ai/gaudi', 'google.com/tpu', 'aws.amazon.com/neuron'].all(g, !self.spec.containers[i].resources.limits[?g].hasValue() || self.spec.containers[i].resources.limits[g] in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] || self.spec.containers[i].resources.limits[g] in ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16']))",message="spec.template.spec.containers[*].resources.limits: a GPU count (nvidia.com/gpu and the like) must be a whole number from 0 to 16, such as 1 or 8: a pod cannot have part of a GPU",fieldPath=".spec.containers"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].all(i, i >= size(self.spec.containers) || !has(self.spec.containers[i].resources) || !has(self.spec.containers[i].resources.requests) || ['nvidia.com/gpu', 'amd.com/gpu', 'gpu.intel.com/i915', 'gpu.intel.com/xe', 'habana.ai/gaudi', 'google.com/tpu', 'aws.amazon.com/neuron'].all(g, !self.spec.containers[i].resources.requests[?g].hasValue() || (has(self.spec.containers[i].resources.limits) && self.spec.containers[i].resources.limits[?g].hasValue() && [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16].exists(n, [self.spec.containers[i].resources.requests[g], self.spec.containers[i].resources.limits[g]].all(v, v in [n] || v in [string(n)])))))",message="spec.template.spec.containers[*].resources.requests: a GPU request (nvidia.com/gpu and the like) must equal the container's GPU limit, which must be set: GPUs are neither shared nor overcommitted",fieldPath=".spec.containers"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || [0, 1, 2, 3, 4, 5, 6, 7].all(i, i >= size(self.spec.containers) || (size(self.spec.containers[i].name) <= 63 && self.spec.containers[i].name.matches('^[-a-z0-9]+$') && !self.spec.containers[i].name.startsWith('-') && !self.spec.containers[i].name.endsWith('-')))",message="spec.template.spec.containers[*].name must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters, such as vllm",fieldPath=".spec.containers"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.initContainers) || [0, 1, 2, 3, 4, 5, 6, 7].all(i, i >= size(self.spec.initContainers) || (size(self.spec.initContainers[i].name) <= 63 && self.spec.initContainers[i].name.matches('^[-a-z0-9]+$') && !self.spec.initContainers[i].name.startsWith('-') && !self.spec.initContainers[i].name.endsWith('-')))",message="spec.template.spec.initContainers[*].name must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters, such as fetch-weights",fieldPath=".spec.initContainers"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].all(i, i >= size(self.spec.containers) || (has(self.spec.containers[i].image) && size(self.spec.containers[i].image) > 0))",message="spec.template.spec.containers[*].image must be set, such as vllm/vllm-openai:v0.10.2: a Deployment refuses a container without an image",fieldPath=".spec.containers"
	// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.labels) || !['serving.modelship.dev/modelserver', 'serving.modelship.dev/color', 'serving.modelship.dev/revision'].exists(k, k in self.metadata.labels)",message="spec.template.metadata.labels must not set serving.modelship.dev/modelserver, serving.modelship.dev/color or serving.modelship.dev/revision: modelship puts them on the pods to tell its ModelServers, colors and revisions apart",fieldPath=".metadata.labels"
	// +required
	Template corev1.PodTemplateSpec `json:"template"`

	// Replicas is the number of model server pods when autoscaling is off. It is the target of
	// the /scale subresource. With autoscaling on, modelship decides the count (starting from this
	// one, clamped to the autoscaling bounds). Defaults to 1; at most 10000.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Port is the port the model server listens on (vLLM's default is 8000). Each color's
	// Service exposes it under the same number and the HTTPRoute sends traffic to it; each
	// Service targets the port its own color's template was applied with, so a change reaches
	// the stable color only when its pods are replaced. Left at 8000 while the only container
	// that declares ports declares other ones, it is refused, naming the port to set.
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

	// Notifications are webhooks that the ModelServer's rollout events (RolloutStarted,
	// StepAdvanced, Paused, AwaitingPromotion, Promoted, RolledBack, Aborted, AnalysisStalled,
	// NoRoomForCandidate) and scaling limits (ScalingLimited) are posted to as JSON, with a
	// Slack-compatible "text" field, besides the cluster-wide URLs of the controller's
	// --notify-url. Each URL is read from a Secret in the ModelServer's namespace, so that a URL
	// holding a token is not in the spec. Delivery is retried with backoff; each event is sent
	// once per target (its "id" lets a receiver drop a repeat after a controller restart).
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	Notifications []NotificationTarget `json:"notifications,omitempty"`
}

// NotificationTarget is one webhook of spec.notifications.
type NotificationTarget struct {
	// Name of the target, unique in the list (in logs and events).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// URLSecretRef names the key of a Secret in the ModelServer's namespace whose value is the
	// webhook's http or https URL. Only that URL is called; a redirect is not followed.
	// +required
	URLSecretRef SecretKeyRef `json:"urlSecretRef"`
}

// SecretKeyRef names one key of a Secret in the ModelServer's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Key in the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`
}

// GatewaySpec routes traffic to the model server: either an HTTPRoute that modelship owns
// (parentRefs, hostnames, matches) or a reference to an existing HTTPRoute owned by the user, in
// which modelship edits only its own two backendRefs.
//
// +kubebuilder:validation:XValidation:rule="has(self.routeRef) != (has(self.parentRefs) && size(self.parentRefs) > 0)",message="exactly one of spec.gateway.parentRefs (a route modelship owns) or spec.gateway.routeRef (a route you own) must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.routeRef) || ((!has(self.hostnames) || size(self.hostnames) == 0) && (!has(self.matches) || size(self.matches) == 0))",message="spec.gateway.hostnames and spec.gateway.matches apply to a route modelship owns and must be empty with spec.gateway.routeRef"
//
// +kubebuilder:validation:XValidation:rule="!has(self.backend) || self.backend != 'InferencePool' || has(self.inferencePool)",message="spec.gateway.inferencePool (its endpointPickerRef) is required when spec.gateway.backend is InferencePool"
// +kubebuilder:validation:XValidation:rule="!has(self.inferencePool) || (has(self.backend) && self.backend == 'InferencePool')",message="spec.gateway.inferencePool is set but spec.gateway.backend is not InferencePool"
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

	// Backend is what the route's two weighted backendRefs point at: Service (default), one
	// Service per color, or InferencePool, one Gateway API Inference Extension InferencePool
	// (inference.networking.k8s.io/v1) per color, whose endpoint picker chooses the pod.
	// +kubebuilder:validation:Enum=Service;InferencePool
	// +optional
	Backend BackendKind `json:"backend,omitempty"`

	// InferencePool configures the two pools when Backend is InferencePool.
	// +optional
	InferencePool *InferencePoolSpec `json:"inferencePool,omitempty"`
}

// BackendKind is the kind of object a ModelServer's backendRefs point at.
type BackendKind string

const (
	// BackendService routes to one Service per color.
	BackendService BackendKind = "Service"
	// BackendInferencePool routes to one InferencePool per color.
	BackendInferencePool BackendKind = "InferencePool"
)

// InferencePoolSpec is what modelship writes into each color's InferencePool besides the
// selector (the ModelServer's and the color's labels) and the target port (spec.port).
type InferencePoolSpec struct {
	// EndpointPickerRef is the endpoint picker extension (EPP) the pools use; the user runs it.
	// The text "{color}" in its name is replaced by the pool's color (blue or green), for the
	// usual setup of one endpoint picker per pool.
	// +required
	EndpointPickerRef EndpointPickerRef `json:"endpointPickerRef"`

	// AppProtocol of the model server's port: http (default) or kubernetes.io/h2c.
	// +kubebuilder:validation:Enum=http;kubernetes.io/h2c
	// +optional
	AppProtocol string `json:"appProtocol,omitempty"`
}

// EndpointPickerRef names the endpoint picker of an InferencePool (its endpointPickerRef).
//
// +kubebuilder:validation:XValidation:rule="(has(self.kind) && self.kind != 'Service') || has(self.port)",message="spec.gateway.inferencePool.endpointPickerRef.port is required when the endpoint picker is a Service"
type EndpointPickerRef struct {
	// Group of the referent; empty (default) is the core API group.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Group string `json:"group,omitempty"`

	// Kind of the referent; Service by default.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Kind string `json:"kind,omitempty"`

	// Name of the referent, in the ModelServer's namespace; "{color}" is replaced by blue or green.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Port of the endpoint picker's gRPC service; required when Kind is Service.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`

	// FailureMode when the endpoint picker does not answer: FailClose (default upstream) drops
	// the request, FailOpen sends it to a pod the Gateway picks.
	// +kubebuilder:validation:Enum=FailOpen;FailClose
	// +optional
	FailureMode string `json:"failureMode,omitempty"`
}

// RouteReference names a user-owned HTTPRoute in the ModelServer's namespace.
type RouteReference struct {
	// Name of the HTTPRoute.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`

	// RuleName, when set, selects the rule (by its name) whose backendRefs modelship manages.
	// +optional
	RuleName *gatewayv1.SectionName `json:"ruleName,omitempty"`
}

// DefaultSteps is spec.rollout.steps' default, as its +kubebuilder:default marker writes it, for
// objects read before defaulting (one copy for the controller, the plugin and the dashboard).
var DefaultSteps = []int32{10, 25, 50, 100}

// RolloutSpec is the progressive delivery policy: the candidate is warmed, then receives the
// traffic weights of Steps one after the other, each held for StepDuration and judged by Analysis.
//
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || self.steps.all(i, i >= 1 && i <= 100)",message="spec.rollout.steps must each be between 1 and 100"
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || self.steps.isSorted()",message="spec.rollout.steps must be strictly increasing"
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || size(self.steps) == 0 || self.steps[size(self.steps) - 1] == 100",message="spec.rollout.steps must end at 100"
// +kubebuilder:validation:XValidation:rule="!has(self.minStepDuration) || !has(self.stepDuration) || !self.minStepDuration.matches('^(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+$') || !self.stepDuration.matches('^(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+$') || duration(self.minStepDuration) <= duration(self.stepDuration)",message="spec.rollout.minStepDuration must be at most spec.rollout.stepDuration",fieldPath=".minStepDuration"
// +kubebuilder:validation:XValidation:rule="!has(self.stepDuration) || !has(self.analysis) || !has(self.analysis.interval) || !self.stepDuration.matches('^(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+$') || !self.analysis.interval.matches('^(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+$') || duration(self.stepDuration) >= duration(self.analysis.interval)",message="spec.rollout.stepDuration must be at least spec.rollout.analysis.interval: every step is judged on at least one measurement",fieldPath=".stepDuration"
type RolloutSpec struct {
	// Steps are the candidate's traffic weights, in percent, one per step. Strictly increasing,
	// each 1..100, ending at 100.
	// +kubebuilder:default={10,25,50,100}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=set
	// +optional
	Steps []int32 `json:"steps,omitempty"`

	// LoadMatching says what a step's weight gives each candidate pod. In every mode a candidate
	// pod never carries more than a stable pod: the weight is at most the candidate's share of
	// both colors' serving (warm) pods, and the candidate is sized to carry its next step at a
	// stable pod's load where the cluster has room. StablePods (the default) raises a step's
	// weight where the candidate's Ready pods would otherwise each carry less than a stable pod:
	// to the candidate's share of both colors' Ready pods (the candidate's counted up to what its
	// step needs), never above the next step's weight. A total of 6 at a 10% step runs one
	// candidate pod beside 6 stable ones, which then gets 14% instead of 10% (two thirds of a
	// stable pod's load); a total of 2 gets 25% at 10%. A model server's time per token grows
	// with its batch, so a lightly loaded candidate looks faster than it is: StablePods compares
	// the colors at the same load per pod, at the cost of the larger share (the simulator's judge
	// matrix: a 1.25x slower build on 1.3x GPUs, its 4 candidate pods carrying a third of a
	// stable pod's load at 10%, was never caught with None and always with StablePods). None
	// sends each step's weight as written within the cap. status.weights shows the weight sent.
	// In either mode, a step at which each Ready candidate pod still carries less than 0.9x a
	// stable pod's load (one stable replica at a 25% step; pods started for the next step) only
	// moves the candidate on: a Fail still rolls back, and a relative read above its bound that
	// is far from significant does not hold it. The last step before the promotion holds such a
	// read, and is not ended early on a lighter candidate.
	// +kubebuilder:validation:Enum=None;StablePods
	// +kubebuilder:default=StablePods
	// +optional
	LoadMatching LoadMatching `json:"loadMatching,omitempty"`

	// StepDuration is how long each step is held while analysis runs. At least one analysis
	// interval; at least the passing verdict of the step's last measurement is needed to advance.
	// A positive duration such as 2m or 90s; defaults to 2m.
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s'))",message="spec.rollout.stepDuration must be a positive duration such as 2m or 90s (units h, m, s, ms)"
	// +optional
	StepDuration Duration `json:"stepDuration,omitempty,omitzero"`

	// MinStepDuration, when set, lets a step end before stepDuration once its analysis answers
	// with confidence: after at least this long at the step, a measurement in which every
	// metric passed, and every histogram and per-unit metric held relative to the stable color
	// passed its rank or per-pod test at the rollout's error budget (status.rollout.analysis
	// shows confident: true: the candidate is within its bound with the confidence a Fail
	// needs), advances the step at once (after the last, the candidate is promoted, or awaits a
	// person with autoPromote false). Clear regressions already end a step early (a Fail needs
	// no stepDuration). Unset, every step lasts stepDuration. At most stepDuration; a positive
	// duration such as 30s.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s'))",message="spec.rollout.minStepDuration must be a positive duration such as 30s or 1m (units h, m, s, ms)"
	// +optional
	MinStepDuration *Duration `json:"minStepDuration,omitempty"`

	// Warmup, when set, is a check every pod must pass (an HTTP GET answering 2xx) after its
	// containers are ready and before it gets any traffic. Model servers such as vLLM report
	// healthy before the weights are loaded; /v1/models answers only once they are. The pods of
	// both colors carry the readiness gate serving.modelship.dev/warm, which the controller sets
	// True once the pod passes: until then the pod is not Ready, not in its Service's endpoints
	// and not counted in its Deployment's readyReplicas (a candidate takes weight on warm pods
	// only; a pod added for the next step or by the autoscaler gets traffic once warm). A color's
	// pods get or lose the gate with its next revision: setting or removing this field does not
	// replace running pods (without it, the controller opens the gate of pods that carry it).
	// +optional
	Warmup *WarmupSpec `json:"warmup,omitempty"`

	// AutoPromote, when false, holds the rollout before its last step (phase AwaitingPromotion)
	// until someone promotes it. Defaults to true.
	// +kubebuilder:default=true
	// +optional
	AutoPromote *bool `json:"autoPromote,omitempty"`

	// ScaleDownDelay is how long the previous stable color stays at full size after a promotion,
	// so that a rollback within this window is instant: the spec back on that revision moves all
	// the traffic its Ready pods carry in one pass, with no steps, no analysis and no pod
	// restarted (the abandoned revision keeps its pods as long, for inspection). Then it scales
	// to zero. Also how long an aborted candidate keeps its pods.
	// A positive duration such as 10m; defaults to 10m.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s'))",message="spec.rollout.scaleDownDelay must be a positive duration such as 2m or 90s (units h, m, s, ms)"
	// +optional
	ScaleDownDelay Duration `json:"scaleDownDelay,omitempty,omitzero"`

	// FailureLimit is the number of failed measurements tolerated in a rollout; one more rolls
	// back. 0 (the default, as Argo Rollouts') rolls back on the first failed measurement: each
	// Fail is already taken at a threshold that an identical candidate crosses with probability
	// at most 1% over the whole rollout, so a second failed look only adds an analysis interval
	// of the slower candidate's traffic. Raise it to ride out failures the analysis cannot
	// tell from the version's (a noisy custom metric).
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	FailureLimit int32 `json:"failureLimit,omitempty"`

	// Inconclusive says what happens while a rollout holds on inconclusive analysis (no
	// metrics, too few samples): after reportAfter the ModelServer reports Stalled (reason
	// AnalysisInconclusive, with the metric's message and a hint at the cause); after
	// rollbackAfter, when set, the rollout is rolled back. Defaults to reporting after 10m and
	// never rolling back (the rollout holds until data returns).
	// +kubebuilder:default={}
	// +optional
	Inconclusive InconclusiveSpec `json:"inconclusive,omitempty,omitzero"`

	// ProgressDeadline is how long the candidate may take to become Ready and warm before the
	// rollout is rolled back (pods that cannot schedule, crash, or never load), and how long a
	// candidate that lost Ready pods its step needs may stay below (counted from the loss,
	// status.candidate.unreadySince). A positive duration; defaults to 30m.
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s'))",message="spec.rollout.progressDeadline must be a positive duration such as 2m or 90s (units h, m, s, ms)"
	// +optional
	ProgressDeadline Duration `json:"progressDeadline,omitempty,omitzero"`

	// Analysis says how each step is judged.
	// +kubebuilder:default={}
	// +optional
	Analysis AnalysisSpec `json:"analysis,omitempty,omitzero"`

	// HeaderRoute, when set, sends every request that carries this header with this value to
	// the candidate only, from the moment the candidate has Ready, warm pods (step 0, at weight
	// 0) until it is promoted, aborted or rolled back: testers, synthetic checks and internal
	// users reach it before and while the weights move. modelship adds an HTTPRoute rule of its
	// own (named modelship-<name>-header) to the route, owned or named by spec.gateway.routeRef,
	// with the weighted rule's matches, each with the header match added, and the candidate's
	// Service or InferencePool as its only backend; a rule with a header match is more specific
	// than the weighted rule, so the Gateway prefers it for the requests that carry the header.
	// Requests without the header follow the weights. The rule is removed when the rollout ends.
	// +optional
	HeaderRoute *HeaderRouteSpec `json:"headerRoute,omitempty"`

	// Gates are webhooks that must answer 2xx before the rollout moves (Flagger's
	// confirm-rollout, pre-rollout and confirm-promotion webhooks): a load test, an approval in
	// a CD tool. Each is POSTed a JSON body (id, namespace, modelServer, gate, type, revision,
	// step, weight) at the point its type names; a non-2xx answer, a redirect or a timeout
	// holds the rollout there (Progressing False, reason GateHeld, naming the gate and its
	// answer) and the gate is called again every analysis interval. Once it passed it is not
	// called again for that step. A person's promote or abort does not wait for gates.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	Gates []RolloutGate `json:"gates,omitempty"`

	// GateFailureLimit, when above 0, rolls the rollout back once one gate has failed more
	// than this many calls in a row at one step. 0 (the default) holds until the gate passes
	// (the progress of a held rollout is still bounded by nothing else: a person aborts it).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	GateFailureLimit int32 `json:"gateFailureLimit,omitempty"`

	// Shadow, when set, runs a shadow phase before the first weighted step: once the candidate
	// has Ready, warm pods for the mirrored share, the Gateway mirrors that share of the live
	// requests to it (the mirrored responses are discarded: users are answered by the stable
	// color only) and each measurement judges the candidate's own metrics against the stable
	// color's, as at any step. A Fail beyond spec.rollout.failureLimit rolls back with no user
	// request served by the candidate; a pass after spec.rollout.shadow.duration goes on to
	// the weighted steps. The mirrored requests are served twice (by both colors): the
	// candidate is sized for its share, like any step, and its GPUs are checked the same way.
	// Where the Gateway does not mirror (spec.rollout.shadow.mirror), the rollout holds at step
	// 0 with Progressing False, reason MirrorUnsupported, naming what is missing.
	// +optional
	Shadow *ShadowSpec `json:"shadow,omitempty"`
}

// ShadowMirror says how the Gateway is asked to mirror requests to the candidate.
// +kubebuilder:validation:Enum=RequestMirror;TraefikService
type ShadowMirror string

const (
	// ShadowMirrorRequestMirror adds the Gateway API RequestMirror filter (with its percent) to
	// the weighted rule. Only a Gateway whose GatewayClass lists the feature HTTPRouteRequestMirror
	// (and HTTPRouteRequestPercentageMirror below 100%) in status.supportedFeatures is asked:
	// a Gateway that does not implement the filter may answer every request of the rule with an
	// error (Traefik v3.6 answers 500).
	ShadowMirrorRequestMirror ShadowMirror = "RequestMirror"
	// ShadowMirrorTraefikService sends the weighted rule to a TraefikService (traefik.io/v1alpha1,
	// Traefik's kubernetescrd provider) named <name>-shadow that modelship writes: its mirroring
	// service answers from the stable color's Service and mirrors the share to the candidate's.
	// For Traefik, whose Gateway API provider has no RequestMirror filter. The TraefikService is
	// removed when the shadow phase ends.
	ShadowMirrorTraefikService ShadowMirror = "TraefikService"
)

// ShadowSpec is spec.rollout.shadow: the share of live requests mirrored to the candidate
// before it serves any user, and for how long.
type ShadowSpec struct {
	// Percent of the live requests mirrored to the candidate, 1 to 100; defaults to 100.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=100
	// +optional
	Percent int32 `json:"percent,omitempty"`

	// Duration of the shadow phase: the candidate goes on to the weighted steps on the first
	// passing measurement after it. A positive duration; defaults to 5m.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s'))",message="spec.rollout.shadow.duration must be a positive duration such as 2m or 90s (units h, m, s, ms)"
	// +optional
	Duration Duration `json:"duration,omitempty,omitzero"`

	// Mirror says how the Gateway is asked to mirror: RequestMirror (the Gateway API filter,
	// the default) or TraefikService (for Traefik). See ShadowMirror.
	// +kubebuilder:default=RequestMirror
	// +optional
	Mirror ShadowMirror `json:"mirror,omitempty"`
}

// GateType is when a rollout gate is called.
// +kubebuilder:validation:Enum=ConfirmRollout;PreStep;ConfirmPromotion
type GateType string

const (
	// GateConfirmRollout is called at step 0, before the candidate gets its first weight.
	GateConfirmRollout GateType = "ConfirmRollout"
	// GatePreStep is called before each step's weight, the first one included (not before the
	// promotion, which ConfirmPromotion gates).
	GatePreStep GateType = "PreStep"
	// GateConfirmPromotion is called before the candidate is promoted (it would get 100%).
	GateConfirmPromotion GateType = "ConfirmPromotion"
)

// RolloutGate is one webhook of spec.rollout.gates.
type RolloutGate struct {
	// Name of the gate, unique in the list (in the condition's message and in status).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// Type says when the gate is called: ConfirmRollout, PreStep or ConfirmPromotion.
	// +required
	Type GateType `json:"type"`

	// URLSecretRef names the key of a Secret in the ModelServer's namespace whose value is the
	// gate's http or https URL. Only that URL is called; a redirect is not followed.
	// +required
	URLSecretRef SecretKeyRef `json:"urlSecretRef"`
}

// HeaderRouteSpec is spec.rollout.headerRoute: the header (exact match) that sends a request
// to the candidate during a rollout.
type HeaderRouteSpec struct {
	// Name of the HTTP header, as the Gateway API's HTTPHeaderName (case-insensitive), e.g.
	// x-canary.
	// +required
	Name gatewayv1.HTTPHeaderName `json:"name"`

	// Value the header must have, matched exactly, e.g. always.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +required
	Value string `json:"value"`
}

// InconclusiveSpec is spec.rollout.inconclusive: how long a rollout may hold on inconclusive
// analysis before it is reported, and before it is rolled back.
type InconclusiveSpec struct {
	// ReportAfter is how long a rollout may hold on inconclusive analysis before the
	// ModelServer reports Stalled (reason AnalysisInconclusive). It only reports: nothing is
	// promoted or rolled back by it. A positive duration; defaults to 10m.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s'))",message="spec.rollout.inconclusive.reportAfter must be a positive duration such as 2m or 90s (units h, m, s, ms)"
	// +optional
	ReportAfter Duration `json:"reportAfter,omitempty,omitzero"`

	// RollbackAfter, when set, rolls back a rollout that has held on inconclusive analysis for
	// this long, a positive duration such as 15m. Unset (the default): hold until data returns.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s'))",message="spec.rollout.inconclusive.rollbackAfter must be a positive duration such as 2m or 90s (units h, m, s, ms)"
	// +optional
	RollbackAfter *Duration `json:"rollbackAfter,omitempty"`
}

// LoadMatching is spec.rollout.loadMatching.
type LoadMatching string

const (
	// LoadMatchingNone sends each step's weight as written (within the cap).
	LoadMatchingNone LoadMatching = "None"
	// LoadMatchingStablePods raises a step's weight to the candidate's share of Ready pods: the
	// default.
	LoadMatchingStablePods LoadMatching = "StablePods"
)

// WarmupSpec is an HTTP check on each pod before it gets traffic.
type WarmupSpec struct {
	// Path of the HTTP GET, e.g. /v1/models.
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=2048
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
	// AnalysisPresetVLLM judges from vLLM's metrics the p95 inter-token latency (at most 1.2x
	// the stable color's) and the decode seconds per decoded token (at most 1.1x, per pod, with
	// queueing left out), the error ratio (at most 5%) and the share of aborted requests (at
	// most 1.5x the stable color's). The p95
	// time to first token is held to spec.autoscaling.slo.ttftP95 when set; TTFT and
	// end-to-end latency are not compared with the stable color (they hold queueing, which
	// bursts make differ between two identical colors): bound them with a metric of their
	// name (ttft-p95, e2e-p95) and a max.
	AnalysisPresetVLLM AnalysisPreset = "vllm"
	// AnalysisPresetSGLang judges the same from SGLang's metrics (started with
	// --enable-metrics), without the abort share.
	AnalysisPresetSGLang AnalysisPreset = "sglang"
	// AnalysisPresetNone uses only the metrics listed in spec.rollout.analysis.metrics.
	AnalysisPresetNone AnalysisPreset = "none"
)

// GatewayMetricsSource names the Gateway implementation whose own Prometheus metrics modelship
// reads: the gateway's view of the requests, counted before they reach a pod.
// +kubebuilder:validation:Enum=Traefik
type GatewayMetricsSource string

const (
	// GatewayMetricsTraefik reads Traefik's metrics (v3, its kubernetesgateway provider, with
	// --metrics.prometheus.addServicesLabels and addRoutersLabels): per backend Service
	// traefik_service_requests_total{code,service="<namespace>-<service>-http-<port>@kubernetesgateway"},
	// and per HTTPRoute traefik_router_requests_total{router="httproute-<namespace>-<route>-gw-...@kubernetesgateway"}.
	// The controller reads the series of Traefik's own scrape target only: the namespace label
	// its series carry is the controller's --gateway-metrics-namespace.
	GatewayMetricsTraefik GatewayMetricsSource = "Traefik"
)

// AnalysisSpec says how each rollout step is judged on Prometheus metrics.
type AnalysisSpec struct {
	// Preset adds ready-made metrics; a metric in Metrics with the same name replaces the
	// preset's. Defaults to vllm.
	// +kubebuilder:default=vllm
	// +optional
	Preset AnalysisPreset `json:"preset,omitempty"`

	// Gateway adds the metric gateway-error-ratio, counted by the Gateway named here: the share
	// of the requests the gateway sent to the color's Service over the window that it answered
	// with a 5xx (the model server's errors and the gateway's own, such as 502 and 504, that the
	// model server never sees), at most 0.05. A metric named gateway-error-ratio in Metrics
	// replaces it. Only with spec.gateway.backend Service. A backend without ready endpoints
	// gets no weight (the weight cap counts the EndpointSlices' ready endpoints), so the 500 and
	// 503 Traefik answers for one are not judged here.
	// +optional
	Gateway GatewayMetricsSource `json:"gateway,omitempty"`

	// Interval between measurements within a step, a positive duration. Defaults to 30s.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s'))",message="spec.rollout.analysis.interval must be a positive duration such as 2m or 90s (units h, m, s, ms)"
	// +optional
	Interval Duration `json:"interval,omitempty,omitzero"`

	// ScrapeInterval is how often Prometheus scrapes the model server's pods. Analysis windows
	// span at least four scrape intervals (and the measurement interval), so that every rate
	// has enough samples: at a 60s scrape interval the window is 4m. Defaults to the
	// controller's --prometheus-scrape-interval (1m, Prometheus's own default).
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) >= duration('1s') && duration(self) <= duration('10m'))",message="spec.rollout.analysis.scrapeInterval must be a duration between 1s and 10m such as 30s or 1m"
	// +optional
	ScrapeInterval *Duration `json:"scrapeInterval,omitempty"`

	// MinSamples is the number of candidate requests (over the analysis window) below which a
	// measurement is inconclusive rather than judged. Defaults to 20: histogram metrics (the
	// presets' latencies) are judged with a test that accounts for the sample counts, so a
	// low count makes a measurement inconclusive rather than failed. A step's error budget is
	// spent from its first measurement with at least minSamples requests: the measurements
	// before it, which cannot fail, do not raise the threshold of those after.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MinSamples int32 `json:"minSamples,omitempty"`

	// SampleQuery is the PromQL template counting the requests a measurement is based on.
	// Defaults to the preset's (vLLM's request_success_total increase over the window). It is
	// rendered as the metrics' queries are.
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('[^[:space:]]')",message="spec.rollout.analysis.sampleQuery must not be blank"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{]|[{][^{]|[{]$|[{][{](-[[:space:]])?[[:space:]]*[.](Namespace|Name|Color|Revision|Pods|Pool|Window)[[:space:]]*([[:space:]]-)?[}][}])*$')",message="spec.rollout.analysis.sampleQuery may use only the template keys {{.Namespace}}, {{.Name}}, {{.Color}}, {{.Revision}}, {{.Pods}}, {{.Pool}} and {{.Window}}, each as {{.Key}}"
	// +optional
	SampleQuery string `json:"sampleQuery,omitempty"`

	// Metrics are the metrics judged at every measurement, in addition to the preset's.
	// Each maxRatioToStable is greater than 0 and each min at most its max, compared as
	// quantities (0.000 and 0Ki are zero). (The rules below take the items in ranges: each rule
	// has its own CEL cost budget, and a quantity costs by its length.)
	// +kubebuilder:validation:XValidation:rule="[0, 1, 2, 3, 4, 5, 6, 7, 8, 9].all(i, i >= size(self) || !has(self[i].maxRatioToStable) || (type(self[i].maxRatioToStable) == int ? self[i].maxRatioToStable > 0 : quantity(self[i].maxRatioToStable).isGreaterThan(quantity('0'))))",message="spec.rollout.analysis.metrics[*].maxRatioToStable must be greater than 0, such as 1.2 for at most 20% worse than the stable color"
	// +kubebuilder:validation:XValidation:rule="[10, 11, 12, 13, 14, 15, 16, 17, 18, 19].all(i, i >= size(self) || !has(self[i].maxRatioToStable) || (type(self[i].maxRatioToStable) == int ? self[i].maxRatioToStable > 0 : quantity(self[i].maxRatioToStable).isGreaterThan(quantity('0'))))",message="spec.rollout.analysis.metrics[*].maxRatioToStable must be greater than 0, such as 1.2 for at most 20% worse than the stable color"
	// +kubebuilder:validation:XValidation:rule="[0, 1, 2, 3, 4, 5, 6].all(i, i >= size(self) || !has(self[i].min) || !has(self[i].max) || !quantity(string(self[i].min)).isGreaterThan(quantity(string(self[i].max))))",message="spec.rollout.analysis.metrics[*].min must not be greater than max: no value could pass"
	// +kubebuilder:validation:XValidation:rule="[7, 8, 9, 10, 11, 12, 13].all(i, i >= size(self) || !has(self[i].min) || !has(self[i].max) || !quantity(string(self[i].min)).isGreaterThan(quantity(string(self[i].max))))",message="spec.rollout.analysis.metrics[*].min must not be greater than max: no value could pass"
	// +kubebuilder:validation:XValidation:rule="[14, 15, 16, 17, 18, 19].all(i, i >= size(self) || !has(self[i].min) || !has(self[i].max) || !quantity(string(self[i].min)).isGreaterThan(quantity(string(self[i].max))))",message="spec.rollout.analysis.metrics[*].min must not be greater than max: no value could pass"
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
// +kubebuilder:validation:XValidation:rule="!has(self.histogram) || !has(self.perUnit)",message="an analysis metric is read from a histogram or per unit, not both: set at most one of histogram and perUnit"
type AnalysisMetric struct {
	// Name of the metric, unique in the list (e.g. ttft-p95).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`

	// Query is the PromQL template; it must return a single value for the rendered color.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('[^[:space:]]')",message="spec.rollout.analysis.metrics[*].query must not be blank"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{]|[{][^{]|[{]$|[{][{](-[[:space:]])?[[:space:]]*[.](Namespace|Name|Color|Revision|Pods|Pool|Window)[[:space:]]*([[:space:]]-)?[}][}])*$')",message="spec.rollout.analysis.metrics[*].query may use only the template keys {{.Namespace}}, {{.Name}}, {{.Color}}, {{.Revision}}, {{.Pods}}, {{.Pool}} and {{.Window}}, each as {{.Key}}"
	// +required
	Query string `json:"query"`

	// Max is an absolute upper bound for the candidate's value (e.g. 0.5 seconds). At least Min
	// when both are set.
	// +optional
	Max *resource.Quantity `json:"max,omitempty"`

	// Min is an absolute lower bound for the candidate's value (e.g. a success rate).
	// +optional
	Min *resource.Quantity `json:"min,omitempty"`

	// MaxRatioToStable bounds the candidate's value relative to the same query on the stable
	// color: candidate <= ratio * stable (e.g. 1.2 for "at most 20% worse").
	// +optional
	MaxRatioToStable *resource.Quantity `json:"maxRatioToStable,omitempty"`

	// Histogram, when set, says the metric is a quantile of a Prometheus histogram and gives
	// its bucket counts; the metric is then judged from those counts and Query is not run (it
	// stays the metric's scalar form, for dashboards and people). MaxRatioToStable becomes a
	// statistical test that accounts for the number of requests of each color: a measurement
	// fails only when the candidate is, with 99% confidence, slower than ratio x stable, and
	// is inconclusive while the counts cannot tell. Max and Min bound the quantile as
	// interpolated from the buckets (as histogram_quantile does).
	// +optional
	Histogram *AnalysisHistogram `json:"histogram,omitempty"`

	// PerUnit, when set, says the metric is a mean per unit of work, a sum over a count summed
	// over the pods (e.g. decode seconds per decoded token), and gives the two per-pod queries;
	// the metric is then their quotient over each color's pods and Query is not run (it stays
	// the metric's scalar form, for dashboards and people). Such a mean leaves queueing out
	// where a latency percentile cannot, and no histogram bucket blurs it. MaxRatioToStable
	// becomes a statistical test with the pods as its units: a measurement fails only when the
	// candidate's mean is, at the rollout's error budget, above ratio x the stable color's,
	// reading how much the pods' own means vary (pooled over both colors' pods, so that a
	// candidate with a single pod is judged too); it is inconclusive while too few pods or
	// requests can tell. Max and Min bound the candidate's mean. Exclusive with histogram.
	// +optional
	PerUnit *AnalysisPerUnit `json:"perUnit,omitempty"`
}

// AnalysisPerUnit is a metric read as a mean per unit of work over each color's pods: the sum
// of the numerator over the sum of the denominator, both per pod.
type AnalysisPerUnit struct {
	// NumeratorQuery is the PromQL template of what is spent per pod over the analysis window,
	// one series per pod label; the same variables as Query. For example (vLLM's decode time):
	// sum by (pod) (increase(vllm:request_decode_time_seconds_sum{namespace="{{.Namespace}}",pod=~"{{.Pods}}"}[{{.Window}}]))
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('[^[:space:]]')",message="spec.rollout.analysis.metrics[*].perUnit.numeratorQuery must not be blank"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{]|[{][^{]|[{]$|[{][{](-[[:space:]])?[[:space:]]*[.](Namespace|Name|Color|Revision|Pods|Pool|Window)[[:space:]]*([[:space:]]-)?[}][}])*$')",message="spec.rollout.analysis.metrics[*].perUnit.numeratorQuery may use only the template keys {{.Namespace}}, {{.Name}}, {{.Color}}, {{.Revision}}, {{.Pods}}, {{.Pool}} and {{.Window}}, each as {{.Key}}"
	// +required
	NumeratorQuery string `json:"numeratorQuery"`

	// DenominatorQuery is the PromQL template of the units of work per pod over the analysis
	// window (tokens, requests), one series per pod label, matching NumeratorQuery's pods. For
	// example (vLLM's decoded tokens: generated tokens less each request's first, which
	// prefill produced):
	// sum by (pod) (increase(vllm:request_generation_tokens_sum{namespace="{{.Namespace}}",pod=~"{{.Pods}}"}[{{.Window}}])) - sum by (pod) (increase(vllm:request_generation_tokens_count{namespace="{{.Namespace}}",pod=~"{{.Pods}}"}[{{.Window}}]))
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('[^[:space:]]')",message="spec.rollout.analysis.metrics[*].perUnit.denominatorQuery must not be blank"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{]|[{][^{]|[{]$|[{][{](-[[:space:]])?[[:space:]]*[.](Namespace|Name|Color|Revision|Pods|Pool|Window)[[:space:]]*([[:space:]]-)?[}][}])*$')",message="spec.rollout.analysis.metrics[*].perUnit.denominatorQuery may use only the template keys {{.Namespace}}, {{.Name}}, {{.Color}}, {{.Revision}}, {{.Pods}}, {{.Pool}} and {{.Window}}, each as {{.Key}}"
	// +required
	DenominatorQuery string `json:"denominatorQuery"`
}

// AnalysisHistogram is a latency histogram a metric is read from.
type AnalysisHistogram struct {
	// BucketQuery is the PromQL template of the histogram's cumulative bucket counts over the
	// analysis window, one series per "le" label, including le="+Inf"; the same variables as
	// Query. For example:
	// sum by (le) (increase(vllm:e2e_request_latency_seconds_bucket{namespace="{{.Namespace}}",pod=~"{{.Pods}}"}[{{.Window}}]))
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('[^[:space:]]')",message="spec.rollout.analysis.metrics[*].histogram.bucketQuery must not be blank"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{]|[{][^{]|[{]$|[{][{](-[[:space:]])?[[:space:]]*[.](Namespace|Name|Color|Revision|Pods|Pool|Window)[[:space:]]*([[:space:]]-)?[}][}])*$')",message="spec.rollout.analysis.metrics[*].histogram.bucketQuery may use only the template keys {{.Namespace}}, {{.Name}}, {{.Color}}, {{.Revision}}, {{.Pods}}, {{.Pool}} and {{.Window}}, each as {{.Key}}"
	// +required
	BucketQuery string `json:"bucketQuery"`

	// Percentile is the quantile judged, in percent (95 for the p95). Defaults to 95.
	// +kubebuilder:default=95
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	// +optional
	Percentile int32 `json:"percentile,omitempty"`
}

// AutoscalingSpec makes modelship own the replica count across both colors.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="spec.autoscaling.minReplicas must be less than or equal to spec.autoscaling.maxReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas != 0 || (has(self.metrics) && self.metrics.exists(m, has(m.prometheus) || has(m.external) || has(m.gateway) || (has(m.endpointPicker) && m.endpointPicker.signal == 'RunningRequests')))",message="spec.autoscaling.minReplicas 0 needs a metric that sees load while no pod runs (prometheus, external, gateway, or endpointPicker with signal RunningRequests): the pod metrics (gpuUtilization, the default, requestsWaiting, kvCacheUsage, saturation, resource, endpointPicker QueueSize and PoolSaturation) have no data without pods, and the count would never come back from 0",fieldPath=".minReplicas"
type AutoscalingSpec struct {
	// MinReplicas is the lower bound of the total replica count. Defaults to 1; at most 10000.
	// 0 (scale to zero) needs a metric that sees load while no pod runs: a prometheus query (a
	// total that reads 0 when idle, e.g. the Gateway's request rate "or vector(0)"), an
	// external metric, or endpointPicker with signal RunningRequests. At 0 replicas the
	// ModelServer is Ready only while such a metric reads 0 (reason NoReplicaForLoad otherwise).
	// A pointer, as the HorizontalPodAutoscaler's: 0 is a value that a typed client can send
	// (an int with omitempty would drop it and the default would make it 1).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the upper bound of the total replica count, 1 to 10000.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +required
	MaxReplicas int32 `json:"maxReplicas"`

	// Interval between evaluations, a positive duration. Defaults to 15s.
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s'))",message="spec.autoscaling.interval must be a positive duration such as 2m or 90s (units h, m, s, ms)"
	// +optional
	Interval Duration `json:"interval,omitempty,omitzero"`

	// Tolerance is the relative distance from a target within which no scaling happens
	// (HPA's default, 0.1), a fraction: 0 <= tolerance < 1. Defaults to 0.1.
	// +kubebuilder:default="0.1"
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self == 0 : (isQuantity(self) && !quantity(self).isLessThan(quantity('0')) && quantity(self).isLessThan(quantity('1')))",message="spec.autoscaling.tolerance must be a fraction from 0 up to (not including) 1, such as 0.1 for 10%"
	// +optional
	Tolerance *resource.Quantity `json:"tolerance,omitempty"`

	// ProjectionHorizon is how far ahead a rising load is projected: set it to how long a new
	// replica takes to serve (scheduling, image pull and model load, often minutes for an LLM).
	// When set, a prometheus metric (a total) that is rising proposes the replicas for the
	// load projected this far ahead along its trend over the last 5
	// minutes (PromQL deriv), so that the replicas are serving when the load arrives; it never
	// projects a scale-down. The trend reads only samples taken once the load had been above zero
	// over a whole serving window (a rate over a window that traffic has not filled yet, on a
	// new ModelServer or a fleet back from idle, reads a flat load as a ramp), and none until
	// such samples span 2.5 minutes. A duration from 0s to 1h; unset or 0s projects nothing.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) >= duration('0s') && duration(self) <= duration('1h'))",message="spec.autoscaling.projectionHorizon must be a duration from 0s to 1h such as 3m or 90s (units h, m, s, ms)"
	// +optional
	ProjectionHorizon Duration `json:"projectionHorizon,omitempty,omitzero"`

	// SLO is the latency the replicas must hold: with it, modelship finds the capacity of one
	// replica itself, per revision, from the serving metrics (the token rates, the p95 latencies
	// and the queue of vLLM, or SGLang with the sglang analysis preset) and scales to hold
	// the SLO: no per-model target to tune. The capacity is lowered when a minute misses the SLO
	// (or its requests queue) and raised by cautious probing while the SLO holds with margin, is
	// kept in status.autoscaling.learnedCapacities, and a queue that builds up scales out at
	// once. Its proposal (named "slo") stands beside the metrics' proposals; with an SLO and no
	// metrics it is the only one (no GPU utilization default). Set projectionHorizon to the
	// cold start so that a rising load is met in time.
	// +optional
	SLO *LatencySLO `json:"slo,omitempty"`

	// Metrics each propose a replica count; the largest proposal wins. Defaults (when left out
	// or empty, and no slo is set) to GPU utilization with a target of 70%.
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
// Every signal has the same target shape: target is the value one replica should carry in the
// metric's own unit, as the metric reads: a whole percent for the utilizations (gpuUtilization,
// resource; an integer, checked by the schema at no CEL cost), a quantity otherwise: a fraction for kvCacheUsage and endpointPicker's PoolSaturation,
// requests for requestsWaiting and endpointPicker's QueueSize and RunningRequests, the query's
// unit for prometheus and external, requests per second for gateway. Average signals propose
// ceil(pods x average / target), total signals (prometheus, external, endpointPicker
// RunningRequests, gateway) ceil(total / target).
//
// +kubebuilder:validation:XValidation:rule="[has(self.gpuUtilization), has(self.requestsWaiting), has(self.kvCacheUsage), has(self.prometheus), has(self.resource), has(self.external), has(self.saturation), has(self.endpointPicker), has(self.gateway)].filter(x, x).size() == 1",message="exactly one of gpuUtilization, requestsWaiting, kvCacheUsage, prometheus, resource, external, saturation, endpointPicker or gateway must be set in each spec.autoscaling.metrics item"
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
	// load; the proposal is ceil(value / target).
	// +optional
	Prometheus *PrometheusMetric `json:"prometheus,omitempty"`

	// Resource targets the average CPU or memory utilization of the pods from the resource
	// metrics API (metrics.k8s.io), relative to their requests.
	// +optional
	Resource *ResourceMetric `json:"resource,omitempty"`

	// External reads a metric from the external metrics API (external.metrics.k8s.io), as
	// served by prometheus-adapter or KEDA's metrics server; the proposal is
	// ceil(value / target). Read only when the controller runs with
	// --query-policy=any: the API answers with the controller's credentials about any
	// namespace, and the default policies refuse the spec.
	// +optional
	External *ExternalMetric `json:"external,omitempty"`

	// Saturation scales on saturated replicas, as llm-d's workload variant autoscaler does: a
	// replica is saturated when its KV-cache use or its queue (the requestsWaiting and
	// kvCacheUsage signals) reaches a threshold. It asks for more replicas when the replicas
	// that are not saturated have, on average, less spare KV-cache or queue room than a
	// trigger (or when all are saturated), and for fewer only when none is saturated and the
	// load, spread over fewer replicas, still leaves that room.
	// +optional
	Saturation *SaturationMetric `json:"saturation,omitempty"`

	// EndpointPicker reads the InferencePool endpoint picker's own metrics (Gateway API
	// Inference Extension, llm-d) for the ModelServer's pools; only with spec.gateway.backend
	// InferencePool.
	// +optional
	EndpointPicker *EndpointPickerMetric `json:"endpointPicker,omitempty"`

	// Gateway targets the requests per second arriving at the ModelServer's HTTPRoute as the
	// Gateway counts them (its router, before any backend: the count exists with no pod, so it
	// scales from zero), per replica; the proposal is ceil(rate / target).
	// +optional
	Gateway *GatewayRequestsMetric `json:"gateway,omitempty"`
}

// GatewayRequestsMetric targets the request rate at the HTTPRoute, counted by the Gateway.
type GatewayRequestsMetric struct {
	// Source is the Gateway implementation whose metrics are read. Defaults to Traefik
	// (traefik_router_requests_total of the route's routers, over the last minute).
	// +kubebuilder:default=Traefik
	// +optional
	Source GatewayMetricsSource `json:"source,omitempty"`

	// Target is the requests per second one replica should carry, greater than 0.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : quantity(self).isGreaterThan(quantity('0'))",message="spec.autoscaling.metrics[*].gateway.target must be greater than 0, such as 5 (requests per second per replica)"
	// +required
	Target resource.Quantity `json:"target"`
}

// SaturationMetric are the thresholds of saturation-based scaling. The defaults are llm-d's
// published ones: saturated at 80% KV-cache or 5 queued requests, scale up when the spare room
// falls below 10% KV-cache or 3 requests.
//
// +kubebuilder:validation:XValidation:rule="!has(self.kvCacheThresholdPercent) || !has(self.kvSpareTriggerPercent) || self.kvSpareTriggerPercent < self.kvCacheThresholdPercent",message="spec.autoscaling.metrics[*].saturation.kvSpareTriggerPercent must be less than kvCacheThresholdPercent"
// +kubebuilder:validation:XValidation:rule="!has(self.queueLengthThreshold) || !has(self.queueSpareTrigger) || self.queueSpareTrigger < self.queueLengthThreshold",message="spec.autoscaling.metrics[*].saturation.queueSpareTrigger must be less than queueLengthThreshold"
type SaturationMetric struct {
	// KVCacheThresholdPercent: a replica whose KV-cache use reaches this percentage is
	// saturated, 1 to 100. Defaults to 80.
	// +kubebuilder:default=80
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	KVCacheThresholdPercent int32 `json:"kvCacheThresholdPercent,omitempty"`

	// QueueLengthThreshold: a replica with this many requests waiting is saturated, 1 to
	// 10000. Defaults to 5.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	QueueLengthThreshold int32 `json:"queueLengthThreshold,omitempty"`

	// KVSpareTriggerPercent: scale up when the replicas that are not saturated have on average
	// less KV-cache room than this below the threshold, in percentage points, from 0 to below
	// kvCacheThresholdPercent. Defaults to 10.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=99
	// +optional
	KVSpareTriggerPercent *int32 `json:"kvSpareTriggerPercent,omitempty"`

	// QueueSpareTrigger: scale up when the replicas that are not saturated have on average
	// room for fewer queued requests than this below the threshold, from 0 to below
	// queueLengthThreshold. Defaults to 3.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9999
	// +optional
	QueueSpareTrigger *int32 `json:"queueSpareTrigger,omitempty"`
}

// EndpointPickerSignal is one of the endpoint picker's metrics.
// +kubebuilder:validation:Enum=QueueSize;PoolSaturation;RunningRequests
type EndpointPickerSignal string

const (
	// EndpointPickerQueueSize is the pools' average number of requests queued per pod
	// (inference_pool_average_queue_size, llm_d_epp_average_queue_size), averaged over both
	// colors' pools by their Ready pods; target is the queue per pod.
	EndpointPickerQueueSize EndpointPickerSignal = "QueueSize"
	// EndpointPickerPoolSaturation is the flow controller's pool saturation, 0..1
	// (inference_extension_flow_control_pool_saturation, llm_d_epp_flow_control_pool_saturation),
	// averaged over both colors' pools by their Ready pods; target is a fraction.
	EndpointPickerPoolSaturation EndpointPickerSignal = "PoolSaturation"
	// EndpointPickerRunningRequests is an InferenceObjective's running requests
	// (inference_objective_running_requests, inference_model_running_requests or llm-d's
	// llm_d_epp_request_running for model_name = objective, summed over the endpoint pickers);
	// target is the requests per replica.
	EndpointPickerRunningRequests EndpointPickerSignal = "RunningRequests"
)

// EndpointPickerMetric targets one of the endpoint picker's metrics.
//
// +kubebuilder:validation:XValidation:rule="(self.signal == 'RunningRequests') == has(self.objective)",message="spec.autoscaling.metrics[*].endpointPicker.objective (the model name) is required with signal RunningRequests and only with it"
// +kubebuilder:validation:XValidation:rule="self.signal != 'PoolSaturation' || (type(self.target) == int ? self.target == 1 : !quantity(self.target).isGreaterThan(quantity('1')))",message="spec.autoscaling.metrics[*].endpointPicker.target must be a fraction greater than 0 and at most 1 with signal PoolSaturation, such as 0.8"
type EndpointPickerMetric struct {
	// Signal is the metric read: QueueSize, PoolSaturation or RunningRequests.
	// +required
	Signal EndpointPickerSignal `json:"signal"`

	// Target is the queue per pod (QueueSize), the saturation fraction (PoolSaturation, at
	// most 1) or the running requests per replica (RunningRequests), greater than 0.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : quantity(self).isGreaterThan(quantity('0'))",message="spec.autoscaling.metrics[*].endpointPicker.target must be greater than 0"
	// +required
	Target resource.Quantity `json:"target"`

	// Objective is the model name whose running requests are read (the model_name label,
	// as the InferenceObjective or the request names it); with signal RunningRequests only.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Objective string `json:"objective,omitempty"`
}

// GPUUtilizationMetric targets an average GPU utilization.
type GPUUtilizationMetric struct {
	// Target is the average GPU utilization per replica, in whole percent (DCGM's unit), from
	// 1 to 100, such as 70. Defaults to 70.
	// +kubebuilder:default=70
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Target int32 `json:"target,omitempty"`
}

// PerReplicaMetric targets a value per replica.
type PerReplicaMetric struct {
	// Target is the number of waiting requests one replica should carry, greater than 0.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : quantity(self).isGreaterThan(quantity('0'))",message="spec.autoscaling.metrics[*].requestsWaiting.target must be greater than 0, such as 2"
	// +required
	Target resource.Quantity `json:"target"`
}

// AverageMetric targets an average over the pods.
type AverageMetric struct {
	// Target is the average KV-cache use per replica, a fraction as the metric reads (vLLM's
	// unit), greater than 0 and at most 1 (0.8 for 80%).
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self == 1 : (quantity(self).isGreaterThan(quantity('0')) && !quantity(self).isGreaterThan(quantity('1')))",message="spec.autoscaling.metrics[*].kvCacheUsage.target must be a fraction greater than 0 and at most 1, such as 0.8 for 80%"
	// +required
	Target resource.Quantity `json:"target"`
}

// PrometheusMetric is a custom PromQL scaling signal.
type PrometheusMetric struct {
	// Query is the PromQL template returning the total load of the ModelServer, rendered with the
	// keys of analysis queries ({{.Namespace}}, {{.Name}}, {{.Color}}, {{.Revision}}, {{.Pods}},
	// {{.Window}}).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('[^[:space:]]')",message="spec.autoscaling.metrics[*].prometheus.query must not be blank"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{]|[{][^{]|[{]$|[{][{](-[[:space:]])?[[:space:]]*[.](Namespace|Name|Color|Revision|Pods|Pool|Window)[[:space:]]*([[:space:]]-)?[}][}])*$')",message="spec.autoscaling.metrics[*].prometheus.query may use only the template keys {{.Namespace}}, {{.Name}}, {{.Color}}, {{.Revision}}, {{.Pods}}, {{.Pool}} and {{.Window}}, each as {{.Key}}"
	// +required
	Query string `json:"query"`

	// Target is the load one replica should carry, in the query's unit, greater than 0.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : quantity(self).isGreaterThan(quantity('0'))",message="spec.autoscaling.metrics[*].prometheus.target must be greater than 0"
	// +required
	Target resource.Quantity `json:"target"`

	// LearnCapacity lowers the target when the replicas are seen beyond their capacity below
	// it: a minute whose p95 latency misses the SLO given here, or whose requests queue, at a
	// load per Ready replica under the capacity believed so far, shows that one replica carries
	// less (that load scaled by SLO / latency, or 90% of it on a queue alone, never below half).
	// The capacity starts at target / targetPercentOfCapacity and moves halfway to each such
	// bound (in status.autoscaling.learnedCapacities), and the target becomes
	// targetPercentOfCapacity of it. Nothing is learnt while pods start or while both colors have Ready pods. A query
	// written for faster GPUs, a longer context or a heavier model is thus corrected by what
	// the pods achieved. Learning only lowers the target; a promotion to another revision
	// starts again from the spec, as does removing learnCapacity.
	// +optional
	LearnCapacity *CapacityLearning `json:"learnCapacity,omitempty"`
}

// LatencySLO is a ModelServer's latency objective, each a p95 of the pods' own histograms over
// the serving window: the autoscaling interval, at least four scrape intervals (1m at the
// default 15s interval and a 15s scrape). At least one is set.
// +kubebuilder:validation:XValidation:rule="has(self.ttftP95) || has(self.itlP95)",message="spec.autoscaling.slo must set ttftP95, itlP95 or both"
type LatencySLO struct {
	// TTFTP95 is the p95 time to first token to hold (vllm:time_to_first_token_seconds;
	// SGLang's with the sglang analysis preset), from 10ms to 10m, such as 2s.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) >= duration('10ms') && duration(self) <= duration('10m'))",message="spec.autoscaling.slo.ttftP95 must be a duration from 10ms to 10m, such as 2s or 500ms"
	// +optional
	TTFTP95 *Duration `json:"ttftP95,omitempty"`

	// ITLP95 is the p95 inter-token latency to hold (vllm:inter_token_latency_seconds, formerly
	// vllm:time_per_output_token_seconds; SGLang's with the sglang analysis preset), from 1ms to
	// 10m, such as 100ms.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) >= duration('1ms') && duration(self) <= duration('10m'))",message="spec.autoscaling.slo.itlP95 must be a duration from 1ms to 10m, such as 100ms"
	// +optional
	ITLP95 *Duration `json:"itlP95,omitempty"`

	// BurstMemory is how long a burst is remembered: the load seen arriving in a burst
	// (requests queued faster than the Ready replicas served them) keeps the replicas that
	// carry it, fading by half every BurstMemory, since no pod asked for when the queue shows
	// serves before a spike of a minute or two is over; a burst whose load is still there a
	// cold start after it was seen is a level the fleet follows, and is forgotten. 0s turns the
	// memory off (each short spike is then met by the replicas of the minutes' average). A
	// duration from 0s to 24h; defaults to 30m.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) >= duration('0s') && duration(self) <= duration('24h'))",message="spec.autoscaling.slo.burstMemory must be a duration from 0s to 24h such as 30m (0s: off)"
	// +optional
	BurstMemory *Duration `json:"burstMemory,omitempty"`
}

// CapacityLearning says when the replicas are beyond their capacity and which share of it each
// replica should carry.
type CapacityLearning struct {
	// TargetPercentOfCapacity is the share of the learnt capacity each replica should carry
	// (the prometheus metric's target becomes this percent of it), 1 to 100: the headroom that
	// absorbs a rise while new replicas load. Defaults to 90.
	// +kubebuilder:default=90
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	TargetPercentOfCapacity *int32 `json:"targetPercentOfCapacity,omitempty"`

	// TimeToFirstTokenP95 is the latency SLO on time to first token: a p95 over the serving
	// window (the autoscaling interval, at least four scrape intervals) above it (vLLM's vllm:time_to_first_token_seconds, SGLang's with the sglang
	// analysis preset) shows the replicas beyond their capacity.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s') && duration(self) <= duration('10m'))",message="spec.autoscaling.metrics[*].prometheus.learnCapacity.timeToFirstTokenP95 must be a duration above 0s and at most 10m, such as 2s or 100ms"
	// +optional
	TimeToFirstTokenP95 *Duration `json:"timeToFirstTokenP95,omitempty"`

	// InterTokenLatencyP95 is the latency SLO on inter-token latency, as TimeToFirstTokenP95.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s') && duration(self) <= duration('10m'))",message="spec.autoscaling.metrics[*].prometheus.learnCapacity.interTokenLatencyP95 must be a duration above 0s and at most 10m, such as 2s or 100ms"
	// +optional
	InterTokenLatencyP95 *Duration `json:"interTokenLatencyP95,omitempty"`

	// SaturatedAtRequestsWaiting: the replicas are beyond their capacity when the requests
	// queued (vllm:num_requests_waiting; SGLang: sglang:num_queue_reqs) average at least this
	// many per Ready replica, 1 to 1000. Defaults to 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	SaturatedAtRequestsWaiting *int32 `json:"saturatedAtRequestsWaiting,omitempty"`
}

// ResourceMetric targets a pod resource's average utilization.
type ResourceMetric struct {
	// Name of the resource.
	// +kubebuilder:validation:Enum=cpu;memory
	// +required
	Name corev1.ResourceName `json:"name"`

	// Target is the average utilization per replica, in whole percent of the pods' requests
	// (HPA's unit), from 1 to 1000, such as 70.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +required
	Target int32 `json:"target"`
}

// ExternalMetric reads the external metrics API.
type ExternalMetric struct {
	// MetricName as the external metrics API serves it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	MetricName string `json:"metricName"`

	// Selector narrows the metric's series.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Target is the value one replica should carry, in the metric's unit, greater than 0.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : quantity(self).isGreaterThan(quantity('0'))",message="spec.autoscaling.metrics[*].external.target must be greater than 0"
	// +required
	Target resource.Quantity `json:"target"`
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
	// allows (the highest of the window when scaling down, the lowest when scaling up). From 0
	// (none) to 1h, as HPA's.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) >= duration('0s') && duration(self) <= duration('1h'))",message="spec.autoscaling.behavior.scaleUp/scaleDown.stabilizationWindow must be a duration from 0s to 1h, such as 5m or 300s"
	// +optional
	StabilizationWindow *Duration `json:"stabilizationWindow,omitempty"`

	// SelectPolicy chooses among Policies. Defaults to Max.
	// +optional
	SelectPolicy *ScalingPolicySelect `json:"selectPolicy,omitempty"`

	// Policies are rate limits: at most Value pods or percent per Period. Leave them out for the
	// defaults; an empty list is refused.
	// +kubebuilder:validation:MinItems=1
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
	// Value is the largest change allowed in one Period, 1 to 10000.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +required
	Value int32 `json:"value"`
	// Period over which the change is counted, more than 0s and at most 30m (HPA's bounds).
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || (duration(self) > duration('0s') && duration(self) <= duration('30m'))",message="spec.autoscaling.behavior.scaleUp/scaleDown.policies[*].period must be a positive duration of at most 30m, such as 15s or 1m"
	// +required
	Period Duration `json:"period"`
}
