// Package fleetsim connects the fleet model (test/framework/fleet) to a Kubernetes API server: it maps
// ModelServers' pods to simulated replicas and serves the simulated pods' metrics and warm-up
// checks over HTTP. Either it plays the Gateway (it reads HTTPRoute weights, splits the trace's
// requests by them and accepts the routes), or a real Gateway does (Config.Gateway): then every
// pod is served on its own podIP and port (PodServers, OpenAI-compatible endpoints) and the
// trace's requests are sent as HTTP requests to the Gateway (LoadGenerator). Every address it
// binds or dials is in 127.0.0.0/8 or 198.18.0.0/15 (GuardedListen, GuardedTransport).
package fleetsim

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/fleet"
)

// ControllerName is the Gateway controller name the simulator writes into HTTPRoute status.
const ControllerName gatewayv1.GatewayController = "modelship.dev/fleet-sim"

// GPUResource is the extended resource of NVIDIA GPUs.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// ProfileRule gives a performance profile to the pods whose revision equals Match or whose image
// contains it.
type ProfileRule struct {
	// Match is a revision, or a substring of the model-server image.
	Match string
	// Profile applied to the matching pods.
	Profile fleet.Profile
}

// ParseProfile parses "revision=<rev or image substring>:latency=2.0,errors=0.1,after=90" (each
// key optional; after, in seconds, delays the profile until the pod has been Ready that long;
// the substring may contain colons, as image tags do).
func ParseProfile(s string) (ProfileRule, error) {
	// The revision may be an image substring with a tag ("vllm-openai:v0.9"): the keys start
	// after the first colon that is followed by a known key.
	head, tail := s, ""
	for i := range len(s) {
		if s[i] == ':' && (strings.HasPrefix(s[i+1:], "latency=") || strings.HasPrefix(s[i+1:], "errors=") || strings.HasPrefix(s[i+1:], "after=")) {
			head, tail = s[:i], s[i+1:]
			break
		}
	}
	match, ok := strings.CutPrefix(strings.TrimSpace(head), "revision=")
	if !ok || match == "" {
		return ProfileRule{}, fmt.Errorf("profile %q: want revision=<revision or image substring>:latency=<x>,errors=<p>", s)
	}
	if i := strings.LastIndex(match, ":"); tail == "" && i >= 0 && strings.Contains(match[i+1:], "=") {
		return ProfileRule{}, fmt.Errorf("profile %q: unknown key in %q (latency, errors, after)", s, match[i+1:])
	}
	rule := ProfileRule{Match: match, Profile: fleet.Profile{LatencyMultiplier: 1}}
	if strings.TrimSpace(tail) == "" {
		return rule, nil
	}
	for _, kv := range strings.Split(tail, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return ProfileRule{}, fmt.Errorf("profile %q: %q is not key=value", s, kv)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return ProfileRule{}, fmt.Errorf("profile %q: %s: %w", s, k, err)
		}
		switch strings.TrimSpace(k) {
		case "latency":
			if f <= 0 {
				return ProfileRule{}, fmt.Errorf("profile %q: latency %v must be positive", s, f)
			}
			rule.Profile.LatencyMultiplier = f
		case "errors":
			if f < 0 || f > 1 {
				return ProfileRule{}, fmt.Errorf("profile %q: errors %v must be a probability in 0..1", s, f)
			}
			rule.Profile.ErrorProbability = f
		case "after":
			if f < 0 {
				return ProfileRule{}, fmt.Errorf("profile %q: after %v must be seconds >= 0", s, f)
			}
			rule.Profile.After = time.Duration(f * float64(time.Second))
		default:
			return ProfileRule{}, fmt.Errorf("profile %q: unknown key %q (latency, errors, after)", s, k)
		}
	}
	return rule, nil
}

// MatchProfile returns the profile of the first rule matching the revision (exactly) or the image
// (as a substring), or the neutral profile.
func MatchProfile(rules []ProfileRule, revision, image string) fleet.Profile {
	for _, r := range rules {
		if r.Match == revision || strings.Contains(image, r.Match) {
			return r.Profile
		}
	}
	return fleet.Profile{LatencyMultiplier: 1}
}

// PodOptions say how pods become replicas.
type PodOptions struct {
	// ColdStart is the model load delay after a pod's containers become ready.
	ColdStart time.Duration
	// Capacity of every replica.
	Capacity fleet.Capacity
	// Profiles by revision or image.
	Profiles []ProfileRule
}

// LabelPeerServer marks the pods of a model server that modelship does not run (a peer's
// workload in make bench-peers: a Deployment scaled by KEDA's HPA, or a Flagger canary): the
// simulator serves them as the replicas of the model server named by the label's value, grouped
// by their LabelPeerGroup label (Flagger's primary and canary Deployments differ by it), with
// LabelPeerRevision's value appended when present (an Argo Rollout's ReplicaSets), in place of a
// color. Routes reach them through Services that select that group.
const (
	LabelPeerServer = "bench.modelship.dev/server"
	LabelPeerGroup  = "app"
)

// serverAndColor is the model server and color (or group) a pod serves, "" when it is neither a
// ModelServer's pod nor a peer's.
func serverAndColor(pod *corev1.Pod) (string, string) {
	if ms, color := pod.Labels[v1alpha1.LabelModelServer], pod.Labels[v1alpha1.LabelColor]; ms != "" && color != "" {
		return ms, color
	}
	if ms, group := pod.Labels[LabelPeerServer], peerGroup(pod.Labels); ms != "" && group != "" {
		return ms, group
	}
	return "", ""
}

// PodToReplica maps a model server's pod to a fleet pod: a ModelServer's (by its ModelServer
// and color labels) or a peer's (LabelPeerServer and LabelPeerGroup). ok is false for other
// pods, pods not yet on a node, and finished ones. now stands in for a Ready condition without
// a transition time.
func PodToReplica(pod *corev1.Pod, opts PodOptions, now time.Time) (fleet.Pod, bool) {
	ms, color := serverAndColor(pod)
	if ms == "" || color == "" || pod.Spec.NodeName == "" ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return fleet.Pod{}, false
	}
	container, gpus := modelContainer(pod)
	p := fleet.Pod{
		Namespace:   pod.Namespace,
		Name:        pod.Name,
		UID:         string(pod.UID),
		ModelServer: ms,
		Color:       color,
		Revision:    pod.Labels[v1alpha1.LabelRevision],
		Node:        pod.Spec.NodeName,
		GPUs:        gpus,
		Terminating: pod.DeletionTimestamp != nil,
		LoadDelay:   opts.ColdStart,
		Capacity:    opts.Capacity,
		ModelName:   ms,
	}
	if container != nil {
		p.Container = container.Name
		if name := servedModelName(container); name != "" {
			p.ModelName = name
		}
		p.Profile = MatchProfile(opts.Profiles, p.Revision, container.Image)
	} else {
		p.Profile = MatchProfile(opts.Profiles, p.Revision, "")
	}
	// The model loads from when the containers are ready (ContainersReady); the pod takes
	// traffic once Ready, which a readiness gate (modelship's warm-up gate) can hold until the
	// model is loaded. A pod without a ContainersReady condition loads from Ready.
	var containersReady, ready *corev1.PodCondition
	for i := range pod.Status.Conditions {
		switch c := &pod.Status.Conditions[i]; c.Type {
		case corev1.ContainersReady:
			containersReady = c
		case corev1.PodReady:
			ready = c
		}
	}
	p.Ready = ready != nil && ready.Status == corev1.ConditionTrue
	if containersReady == nil {
		containersReady = ready
	}
	if containersReady != nil && containersReady.Status == corev1.ConditionTrue {
		p.ReadySince = containersReady.LastTransitionTime.Time
		if p.ReadySince.IsZero() {
			p.ReadySince = now
		}
	}
	return p, true
}

// modelContainer is the container holding GPUs (else the first) and the pod's GPU count.
func modelContainer(pod *corev1.Pod) (*corev1.Container, int) {
	var found *corev1.Container
	gpus := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		q, ok := c.Resources.Limits[GPUResource]
		if !ok {
			q, ok = c.Resources.Requests[GPUResource]
		}
		if ok && q.Value() > 0 {
			gpus += int(q.Value())
			if found == nil {
				found = c
			}
		}
	}
	if found == nil && len(pod.Spec.Containers) > 0 {
		found = &pod.Spec.Containers[0]
	}
	return found, gpus
}

// servedModelName reads vLLM's --served-model-name, else --model, else `vllm serve <model>`.
func servedModelName(c *corev1.Container) string {
	args := append(append([]string(nil), c.Command...), c.Args...)
	var model, positional string
	for i, a := range args {
		for _, flag := range []string{"--served-model-name", "--model"} {
			var v string
			if val, ok := strings.CutPrefix(a, flag+"="); ok {
				v = val
			} else if a == flag && i+1 < len(args) {
				v = args[i+1]
			}
			if v == "" {
				continue
			}
			if flag == "--served-model-name" {
				return v
			}
			model = v
		}
		if a == "serve" && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			positional = args[i+1]
		}
	}
	if model != "" {
		return model
	}
	return positional
}

// PoolTarget is the pods an InferencePool selects, as the fleet groups them: one color of one
// ModelServer.
type PoolTarget struct {
	ModelServer types.NamespacedName
	Color       string
}

// PoolTargetOf resolves an InferencePool's spec.selector.matchLabels to the pods it selects: a
// selector on a ModelServer's label and a color label selects that color's pods. ok is false
// for a selector the fleet cannot map (its pods are grouped by ModelServer and color).
func PoolTargetOf(namespace string, matchLabels map[string]string) (PoolTarget, bool) {
	ms, color := matchLabels[v1alpha1.LabelModelServer], matchLabels[v1alpha1.LabelColor]
	if ms == "" || color == "" {
		return PoolTarget{}, false
	}
	return PoolTarget{ModelServer: types.NamespacedName{Namespace: namespace, Name: ms}, Color: color}, true
}

// RouteWeights reads an HTTPRoute's backendRef weights for each ModelServer it routes to. A
// backendRef counts when it names a color's Service of a known ModelServer (v1alpha1.ServiceNameOf), an
// InferencePool of pools (whose selector picks one color's pods), or a Service of services (a
// peer's, whose selector picks one group of a peer's pods), in the backend's namespace (the
// route's by default). The first rule that references a ModelServer gives its weights; a
// backendRef without a weight weighs 1, as in the Gateway API.
func RouteWeights(route *gatewayv1.HTTPRoute, modelServers map[types.NamespacedName]bool, pools, services map[types.NamespacedName]PoolTarget) map[types.NamespacedName]map[string]int32 {
	out := map[types.NamespacedName]map[string]int32{}
	for _, rule := range route.Spec.Rules {
		inRule := map[types.NamespacedName]map[string]int32{}
		add := func(key types.NamespacedName, color string, ref gatewayv1.HTTPBackendRef) {
			w := int32(1)
			if ref.Weight != nil {
				w = *ref.Weight
			}
			if inRule[key] == nil {
				inRule[key] = map[string]int32{}
			}
			inRule[key][color] += w
		}
		for _, ref := range rule.BackendRefs {
			ns := route.Namespace
			if ref.Namespace != nil {
				ns = string(*ref.Namespace)
			}
			if isPoolRef(ref.BackendObjectReference) {
				if t, ok := pools[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}]; ok && modelServers[t.ModelServer] {
					add(t.ModelServer, t.Color, ref)
				}
				continue
			}
			if ref.Group != nil && *ref.Group != "" && *ref.Group != "core" {
				continue
			}
			if ref.Kind != nil && *ref.Kind != "Service" {
				continue
			}
			if t, ok := services[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}]; ok {
				add(t.ModelServer, t.Color, ref)
				continue
			}
			if key, color, ok := modelServerOfService(ns, string(ref.Name), modelServers); ok {
				add(key, string(color), ref)
			}
		}
		for k, ws := range inRule {
			if _, seen := out[k]; !seen {
				out[k] = ws
			}
		}
	}
	return out
}

// modelServerOfService finds the known ModelServer and color whose Service is named name (see
// v1alpha1.ServiceNameOf): <modelserver>-<color>, or for a name a Service cannot take, a name
// derived from it, found by deriving the names of the namespace's ModelServers.
func modelServerOfService(ns, name string, modelServers map[types.NamespacedName]bool) (types.NamespacedName, v1alpha1.Color, bool) {
	for _, color := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		ms, ok := strings.CutSuffix(name, "-"+string(color))
		key := types.NamespacedName{Namespace: ns, Name: ms}
		if ok && modelServers[key] && v1alpha1.ServiceNameOf(ms, color) == name {
			return key, color, true
		}
	}
	for key := range modelServers {
		if key.Namespace != ns {
			continue
		}
		for _, color := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
			if v1alpha1.ServiceNameOf(key.Name, color) == name {
				return key, color, true
			}
		}
	}
	return types.NamespacedName{}, "", false
}

func isPoolRef(ref gatewayv1.BackendObjectReference) bool {
	return ref.Group != nil && string(*ref.Group) == PoolGroup && ref.Kind != nil && string(*ref.Kind) == PoolKind
}

// RouteStatus returns the route's status with one entry per parentRef for ControllerName, with
// Accepted and ResolvedRefs True at the route's generation; entries of other controllers are
// kept first, stale entries of ours (for parentRefs that are gone) dropped. changed is false when the
// route's status already says so (transition times are kept when nothing changes).
func RouteStatus(route *gatewayv1.HTTPRoute, now metav1.Time) (gatewayv1.HTTPRouteStatus, bool) {
	var parents []gatewayv1.RouteParentStatus
	for _, p := range route.Status.Parents {
		if p.ControllerName != ControllerName {
			parents = append(parents, *p.DeepCopy())
		}
	}
	for _, ref := range route.Spec.ParentRefs {
		entry := gatewayv1.RouteParentStatus{ParentRef: *ref.DeepCopy(), ControllerName: ControllerName}
		for _, old := range route.Status.Parents {
			if old.ControllerName == ControllerName && reflect.DeepEqual(old.ParentRef, ref) {
				entry.Conditions = append([]metav1.Condition(nil), old.Conditions...)
			}
		}
		meta.SetStatusCondition(&entry.Conditions, metav1.Condition{
			Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionTrue,
			Reason: string(gatewayv1.RouteReasonAccepted), Message: "Accepted by the modelship fleet simulator",
			ObservedGeneration: route.Generation, LastTransitionTime: now,
		})
		meta.SetStatusCondition(&entry.Conditions, metav1.Condition{
			Type: string(gatewayv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue,
			Reason: string(gatewayv1.RouteReasonResolvedRefs), Message: "All references resolved",
			ObservedGeneration: route.Generation, LastTransitionTime: now,
		})
		parents = append(parents, entry)
	}
	st := gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: parents}}
	if len(parents) == 0 && len(route.Status.Parents) == 0 {
		return st, false
	}
	return st, !apiequality.Semantic.DeepEqual(route.Status.Parents, parents)
}
