package peers

// Argo Rollouts' objects for a model-server canary routed by its built-in Traefik router, and
// how to read what Argo Rollouts does with them.
//
// What Argo Rollouts v1.10.1 does with a Rollout whose strategy is canary with
// trafficRouting.traefik (read from its source, module github.com/argoproj/argo-rollouts@v1.10.1):
//
//   - The Rollout owns its ReplicaSets (<name>-<pod-template-hash>); there is no Deployment.
//     It adds the label rollouts-pod-template-hash to each ReplicaSet's pods and to the
//     selectors of spec.strategy.canary.stableService and canaryService (Services we create,
//     selecting the pods by app=<name>), so that each Service selects one ReplicaSet's pods
//     (rollout/service.go).
//   - Its Traefik router writes only the weights of the TraefikService named
//     weightedTraefikServiceName (traefik.io/v1alpha1): spec.weighted.services[] entry
//     canaryService gets the canary weight, stableService 100 minus it
//     (rollout/trafficrouting/traefik/traefik.go SetWeight). It verifies nothing at the Gateway.
//     The HTTPRoute (ours) names that TraefikService as its one backendRef and never changes:
//     Traefik's kubernetesgateway provider resolves it to the kubernetescrd provider's weighted
//     service (both providers on).
//   - Steps: setWeight sets the weight once the canary ReplicaSet has the replicas the weight
//     asks for (by default ceil(weight% of spec.replicas), the stable keeps all of its);
//     pause{duration} waits on the clock. Steps advance on time alone: a background analysis
//     (spec.strategy.canary.analysis) does not hold them, it only aborts the rollout when its
//     AnalysisRun fails (a metric with more than failureLimit failed measurements, or more than
//     consecutiveErrorLimit, 4 by default, errors in a row, e.g. Prometheus down).
//   - An abort sets the canary weight to 0 at once, status.abort and phase Degraded, and scales
//     the canary ReplicaSet down after abortScaleDownDelaySeconds (30 s). A new pod template
//     starts a new rollout and clears the abort. After the last step it promotes: the stable
//     Service's selector moves to the new hash, the weight goes back to 0 (all traffic on the
//     stable Service, now the new pods), and the old ReplicaSet is scaled down after
//     scaleDownDelaySeconds (30 s). Phase Healthy, status.stableRS = status.currentPodHash.
//   - The Prometheus provider runs a metric's query every interval and evaluates
//     successCondition on result (the samples' values): NaN or a value out of bounds is a
//     failed measurement, an error (Prometheus down) an errored one, an empty result an error
//     of the condition.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Argo Rollouts' API and the Traefik object its router writes.
var (
	RolloutGVK          = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"}
	AnalysisTemplateGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "AnalysisTemplate"}
	AnalysisRunGVK      = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "AnalysisRun"}
	TraefikServiceGVK   = schema.GroupVersionKind{Group: "traefik.io", Version: "v1alpha1", Kind: "TraefikService"}
)

// Rollout phases (status.phase) Argo Rollouts sets.
const (
	RolloutHealthy     = "Healthy"
	RolloutProgressing = "Progressing"
	RolloutPaused      = "Paused"
	RolloutDegraded    = "Degraded"
)

// PodTemplateHashLabel is the label Argo Rollouts adds to a ReplicaSet's pods and to the
// stable and canary Services' selectors.
const PodTemplateHashLabel = "rollouts-pod-template-hash"

// Arguments of the AnalysisTemplate, filled by the Rollout: the pod template hashes of the
// canary (the latest) and the stable ReplicaSet, and the namespace.
const (
	ArgCanaryHash = "canary-hash"
	ArgStableHash = "stable-hash"
	ArgNamespace  = "namespace"
)

// ArgoMetric is one metric of the AnalysisTemplate.
type ArgoMetric struct {
	// Name names the metric in the AnalysisRun.
	Name string
	// Query is the PromQL query; {{args.canary-hash}}, {{args.stable-hash}} and
	// {{args.namespace}} are rendered by Argo Rollouts.
	Query string
	// SuccessCondition is evaluated on result, the query's sample values (e.g. result[0] <= 1.2).
	SuccessCondition string
}

// ArgoCanary describes an Argo Rollouts canary of a model server routed through a
// TraefikService.
type ArgoCanary struct {
	// Name and Namespace of the Rollout; the Services are <name>-stable and <name>-canary, the
	// TraefikService and the HTTPRoute <name>, the AnalysisTemplate <name>-analysis.
	Name, Namespace string
	// Replicas of the Rollout.
	Replicas int32
	// Template is the pod template; its labels must hold AppLabel=<name>, the Rollout's
	// selector and the Services'.
	Template corev1.PodTemplateSpec
	// GatewayName and GatewayNamespace are the Gateway the HTTPRoute attaches to.
	GatewayName, GatewayNamespace string
	// Hostname, if set, is the HTTPRoute's only hostname; PathPrefix its path ("/" if empty).
	Hostname, PathPrefix string
	// StepWeights are the canary's traffic steps in percent, each followed by a pause of
	// StepPause; after the last pause Argo Rollouts promotes.
	StepWeights []int
	StepPause   time.Duration
	// PrometheusURL is the Prometheus provider's address.
	PrometheusURL string
	// Metrics are the background analysis' metrics; none: no analysis.
	Metrics []ArgoMetric
	// Interval is each metric's measurement interval.
	Interval time.Duration
	// InitialDelay delays a metric's first measurement (Flagger's first check comes one
	// interval after the first weight); 0 leaves none.
	InitialDelay time.Duration
	// FailureLimit is each metric's failureLimit: more failed measurements fail the analysis
	// and abort the rollout (Flagger's threshold minus 1).
	FailureLimit int
	// StartingStep is the step index from which the background analysis runs (1: once the
	// first weight is set).
	StartingStep int
}

// StableService is the Service name Argo Rollouts points at the stable ReplicaSet.
func (a ArgoCanary) StableService() string { return a.Name + "-stable" }

// CanaryService is the Service name Argo Rollouts points at the canary ReplicaSet.
func (a ArgoCanary) CanaryService() string { return a.Name + "-canary" }

// AnalysisTemplateName is the AnalysisTemplate's name.
func (a ArgoCanary) AnalysisTemplateName() string { return a.Name + "-analysis" }

// Services are the stable and canary Services: ClusterIP on ModelServerPort (port named
// http, as Traefik matches EndpointSlice ports by name), selecting AppLabel=<name>; Argo
// Rollouts adds PodTemplateHashLabel to their selectors.
func (a ArgoCanary) Services() []*corev1.Service {
	var out []*corev1.Service
	for _, n := range []string{a.StableService(), a.CanaryService()} {
		out = append(out, &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: n},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{AppLabel: a.Name},
				Ports: []corev1.ServicePort{{Name: "http", Port: ModelServerPort,
					TargetPort: intstr.FromInt32(ModelServerPort), Protocol: corev1.ProtocolTCP}},
			},
		})
	}
	return out
}

// TraefikService is the weighted TraefikService Argo Rollouts moves: stable 100, canary 0.
func (a ArgoCanary) TraefikService() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": a.Name, "namespace": a.Namespace},
		"spec": map[string]any{"weighted": map[string]any{"services": []any{
			map[string]any{"name": a.StableService(), "port": int64(ModelServerPort), "weight": int64(100)},
			map[string]any{"name": a.CanaryService(), "port": int64(ModelServerPort), "weight": int64(0)},
		}}},
	}}
	u.SetGroupVersionKind(TraefikServiceGVK)
	return u
}

// HTTPRoute attaches to the Gateway and sends everything to the TraefikService (one
// backendRef of group traefik.io, kind TraefikService, without weight or port).
func (a ArgoCanary) HTTPRoute() *gatewayv1.HTTPRoute {
	path := a.PathPrefix
	if path == "" {
		path = "/"
	}
	r := &gatewayv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
				Name: gatewayv1.ObjectName(a.GatewayName), Namespace: ptr.To(gatewayv1.Namespace(a.GatewayNamespace)),
			}}},
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
					Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(path)}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{
						Group: ptr.To(gatewayv1.Group(TraefikServiceGVK.Group)),
						Kind:  ptr.To(gatewayv1.Kind(TraefikServiceGVK.Kind)),
						Name:  gatewayv1.ObjectName(a.Name),
					},
				}}},
			}},
		},
	}
	if a.Hostname != "" {
		r.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(a.Hostname)}
	}
	return r
}

// AnalysisTemplate holds the Metrics on the Prometheus provider, each measured every Interval
// after InitialDelay, failing the analysis after more than FailureLimit failed measurements
// (consecutiveErrorLimit, inconclusiveLimit and count left to Argo Rollouts: 4, 0, unbounded
// for a background analysis).
func (a ArgoCanary) AnalysisTemplate() *unstructured.Unstructured {
	metrics := make([]any, 0, len(a.Metrics))
	for _, m := range a.Metrics {
		mm := map[string]any{
			"name":             m.Name,
			"interval":         a.Interval.String(),
			"successCondition": m.SuccessCondition,
			"failureLimit":     int64(a.FailureLimit),
			"provider": map[string]any{"prometheus": map[string]any{
				"address": a.PrometheusURL, "query": m.Query,
			}},
		}
		if a.InitialDelay > 0 {
			mm["initialDelay"] = a.InitialDelay.String()
		}
		metrics = append(metrics, mm)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": a.AnalysisTemplateName(), "namespace": a.Namespace},
		"spec": map[string]any{
			"args": []any{
				map[string]any{"name": ArgCanaryHash}, map[string]any{"name": ArgStableHash}, map[string]any{"name": ArgNamespace},
			},
			"metrics": metrics,
		},
	}}
	u.SetGroupVersionKind(AnalysisTemplateGVK)
	return u
}

// Rollout is the Rollout: Replicas of Template selected by AppLabel=<name>, canary strategy
// with the stable and canary Services, the Traefik router on the TraefikService, a
// setWeight and a pause per step, and a background analysis from StartingStep on the
// AnalysisTemplate (its hash arguments from the canary and stable ReplicaSets).
func (a ArgoCanary) Rollout() (*unstructured.Unstructured, error) {
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a.Template.DeepCopy())
	if err != nil {
		return nil, fmt.Errorf("rollout %s: pod template: %w", a.Name, err)
	}
	unstructured.RemoveNestedField(tmpl, "metadata", "creationTimestamp")
	steps := make([]any, 0, 2*len(a.StepWeights))
	for _, w := range a.StepWeights {
		steps = append(steps, map[string]any{"setWeight": int64(w)})
		steps = append(steps, map[string]any{"pause": map[string]any{"duration": a.StepPause.String()}})
	}
	canary := map[string]any{
		"canaryService": a.CanaryService(),
		"stableService": a.StableService(),
		"trafficRouting": map[string]any{
			"traefik": map[string]any{"weightedTraefikServiceName": a.Name},
		},
		"steps": steps,
	}
	if len(a.Metrics) > 0 {
		canary["analysis"] = map[string]any{
			"templates":    []any{map[string]any{"templateName": a.AnalysisTemplateName()}},
			"startingStep": int64(a.StartingStep),
			"args": []any{
				map[string]any{"name": ArgCanaryHash, "valueFrom": map[string]any{"podTemplateHashValue": "Latest"}},
				map[string]any{"name": ArgStableHash, "valueFrom": map[string]any{"podTemplateHashValue": "Stable"}},
				map[string]any{"name": ArgNamespace, "value": a.Namespace},
			},
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": a.Name, "namespace": a.Namespace},
		"spec": map[string]any{
			"replicas": int64(a.Replicas),
			"selector": map[string]any{"matchLabels": map[string]any{AppLabel: a.Name}},
			"template": tmpl,
			"strategy": map[string]any{"canary": canary},
		},
	}}
	u.SetGroupVersionKind(RolloutGVK)
	return u, nil
}

// Objects are everything Deploy creates, in creation order: the Services, the TraefikService,
// the HTTPRoute, the AnalysisTemplate (with Metrics) and the Rollout last.
func (a ArgoCanary) Objects() ([]client.Object, error) {
	var out []client.Object
	for _, s := range a.Services() {
		out = append(out, s)
	}
	out = append(out, a.TraefikService(), a.HTTPRoute())
	if len(a.Metrics) > 0 {
		out = append(out, a.AnalysisTemplate())
	}
	r, err := a.Rollout()
	if err != nil {
		return nil, err
	}
	return append(out, r), nil
}

// ArgoPodRegex is a PromQL regex on the pod label matching the pods of Rollout name's
// ReplicaSet whose pod template hash is hash (<name>-<hash>-<suffix>).
func ArgoPodRegex(name, hash string) string {
	return name + "-" + hash + "-[0-9a-zA-Z]+"
}

// ArgoQuantileRatioQuery is QuantileRatioQuery for an Argo Rollout: the canary's q-quantile of
// histogram over the stable's over the last minute, the pods told apart by the hash arguments.
func ArgoQuantileRatioQuery(name, histogram string, q float64) string {
	one := func(hashArg string) string {
		return fmt.Sprintf(`histogram_quantile(%g, sum by (le) (rate(%s_bucket{namespace="{{args.%s}}",pod=~"%s"}[1m])))`,
			q, histogram, ArgNamespace, ArgoPodRegex(name, "{{args."+hashArg+"}}"))
	}
	return one(ArgCanaryHash) + " / " + one(ArgStableHash)
}

// RolloutState is what Argo Rollouts reports about a Rollout.
type RolloutState struct {
	Phase, Message string
	// Abort is status.abort; AbortedAt when it was set.
	Abort     bool
	AbortedAt time.Time
	// CurrentPodHash is the pod template hash of spec.template; StableRS the stable one's.
	CurrentPodHash, StableRS string
	// CurrentStepIndex is the step the rollout is at (-1 when absent).
	CurrentStepIndex int
	// Weight is status.canary.weights.canary.weight, the canary weight Argo last set.
	Weight int
	// Observed is whether the status speaks of the Rollout's current generation.
	Observed bool
	// Image is the image of spec.template's first container.
	Image string
}

// Promoted reports whether the rollout is done: the current template is the stable one and
// the Rollout is Healthy.
func (s RolloutState) Promoted() bool {
	return s.Observed && s.Phase == RolloutHealthy && !s.Abort && s.CurrentPodHash != "" && s.StableRS == s.CurrentPodHash
}

// String is a compact line: phase, step, weight, abort.
func (s RolloutState) String() string {
	out := fmt.Sprintf("%s step=%d weight=%d stable=%s current=%s", s.Phase, s.CurrentStepIndex, s.Weight, s.StableRS, s.CurrentPodHash)
	if s.Abort {
		out += " aborted"
	}
	if !s.Observed {
		out += " (status of an older generation)"
	}
	return out
}

// GetRolloutState reads a Rollout's status.
func GetRolloutState(ctx context.Context, c client.Reader, namespace, name string) (RolloutState, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(RolloutGVK)
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, u); err != nil {
		return RolloutState{}, err
	}
	return rolloutState(u), nil
}

// rolloutState reads the state out of a Rollout object.
func rolloutState(u *unstructured.Unstructured) RolloutState {
	var s RolloutState
	s.Phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	s.Message, _, _ = unstructured.NestedString(u.Object, "status", "message")
	s.Abort, _, _ = unstructured.NestedBool(u.Object, "status", "abort")
	if t, _, _ := unstructured.NestedString(u.Object, "status", "abortedAt"); t != "" {
		s.AbortedAt, _ = time.Parse(time.RFC3339, t)
	}
	s.CurrentPodHash, _, _ = unstructured.NestedString(u.Object, "status", "currentPodHash")
	s.StableRS, _, _ = unstructured.NestedString(u.Object, "status", "stableRS")
	s.CurrentStepIndex = -1
	if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "currentStepIndex"); ok {
		s.CurrentStepIndex = nestedInt(u.Object, "status", "currentStepIndex")
	}
	s.Weight = nestedInt(u.Object, "status", "canary", "weights", "canary", "weight")
	// Argo Rollouts keeps the observed generation as a string.
	og, _, _ := unstructured.NestedString(u.Object, "status", "observedGeneration")
	s.Observed = og == strconv.FormatInt(u.GetGeneration(), 10)
	if cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers"); len(cs) > 0 {
		if c, ok := cs[0].(map[string]any); ok {
			s.Image, _, _ = unstructured.NestedString(c, "image")
		}
	}
	return s
}

// TraefikWeights reads the weights of TraefikService name by Service name.
func TraefikWeights(ctx context.Context, c client.Reader, namespace, name string) (map[string]int, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(TraefikServiceGVK)
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, u); err != nil {
		return nil, err
	}
	return traefikWeights(u), nil
}

// traefikWeights reads spec.weighted.services of a TraefikService; a service without weight
// weighs 1, as in Traefik.
func traefikWeights(u *unstructured.Unstructured) map[string]int {
	services, _, _ := unstructured.NestedSlice(u.Object, "spec", "weighted", "services")
	out := map[string]int{}
	for _, s := range services {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "name")
		w := 1
		if _, ok, _ := unstructured.NestedFieldNoCopy(m, "weight"); ok {
			w = nestedInt(m, "weight")
		}
		out[name] += w
	}
	return out
}

// SetRolloutImage changes the image of a Rollout's first container, which starts a rollout.
func SetRolloutImage(ctx context.Context, c client.Client, namespace, name, image string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(RolloutGVK)
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, u); err != nil {
		return err
	}
	patch := client.MergeFrom(u.DeepCopy())
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		return fmt.Errorf("rollout %s/%s has no container", namespace, name)
	}
	c0, _ := cs[0].(map[string]any)
	c0["image"] = image
	if err := unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers"); err != nil {
		return err
	}
	return c.Patch(ctx, u, patch)
}
