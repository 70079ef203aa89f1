// Package capacity decides how many more replicas of a GPU model server the cluster can hold:
// free GPUs on the nodes the pod template may land on, and the namespace's GPU quota. It is
// pure: the controller lists nodes, pods and ResourceQuotas and passes them in.
//
// What it does not know: a node autoscaler (cluster-autoscaler, Karpenter) can add nodes, so
// on such clusters the capacity limit should be skipped (pass -1 to the autoscaler) and only
// the quota kept. Device plugins other than nvidia.com/gpu, MIG slices, DRA claims and the
// scheduler's other predicates (ports, volumes, pod (anti-)affinity, topology spread) are not
// modelled: the result is an upper bound on what the scheduler can place.
package capacity

import (
	"fmt"
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

const (
	// GPUResource is NVIDIA's device-plugin resource name.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
	// QuotaRequestsGPU is the ResourceQuota key for GPU requests (the one Kubernetes accepts for
	// extended resources).
	QuotaRequestsGPU corev1.ResourceName = "requests.nvidia.com/gpu"
)

// Unlimited is MaxAdditional when nothing bounds the count: the template asks for no GPU, or
// no node matches it and no GPU quota binds.
const Unlimited int32 = -1

// FitInput is what Fit needs, all listed by the controller.
type FitInput struct {
	// Template is the ModelServer's pod template (GPUs per replica, node selection, tolerations).
	Template corev1.PodTemplateSpec
	// Namespace and ModelServer identify the ModelServer's own pods (label
	// serving.modelship.dev/modelserver=ModelServer in Namespace).
	Namespace   string
	ModelServer string
	// Replicas is the total count the ModelServer asks for now (both colors' spec.replicas).
	// Replicas that have no pod yet will take capacity and quota before any new one.
	Replicas int32
	// Nodes of the cluster (Fit filters those the template may land on).
	Nodes []corev1.Node
	// Pods that may use GPUs: every pod bound to a node (any namespace) and the ModelServer's
	// own pods. Terminal pods (Succeeded, Failed) are ignored.
	Pods []corev1.Pod
	// Quotas are the ResourceQuotas of Namespace. Scopes are not evaluated: every quota with a
	// GPU key counts (conservative).
	Quotas []corev1.ResourceQuota
	// Want is how many more replicas the caller would like, for Limited and Message. 0 asks
	// only for MaxAdditional.
	Want int32
}

// FitResult says how many more replicas fit and, when that is fewer than wanted, why.
type FitResult struct {
	// MaxAdditional is how many replicas can be added beyond FitInput.Replicas; Unlimited (-1)
	// when the template asks for no GPU.
	MaxAdditional int32
	// Limited is true when MaxAdditional < Want.
	Limited bool
	// Reason is the binding constraint: v1alpha1.ReasonGPUQuotaLimited or
	// v1alpha1.ReasonGPUCapacityLimited ("" when Unlimited).
	Reason string
	// Message explains the limit for Want, e.g. "needs 4 GPUs for 2 more replicas, 2 free on
	// matching nodes"; empty when not Limited.
	Message string
	// GPUsPerReplica is the template's GPU request per pod.
	GPUsPerReplica int64
	// FreeGPUs is the binding constraint's GPUs left for new replicas: free GPUs on matching
	// nodes, or left in the tightest quota, after the replicas that have no pod or no node yet.
	FreeGPUs int64
	// MatchingNodes is the number of schedulable nodes the template may land on.
	MatchingNodes int
	// Quota names the tightest GPU quota, when Reason is GPUQuotaLimited.
	Quota string
}

// MessageFor explains, for want more replicas, what is missing; empty when they fit.
func (r FitResult) MessageFor(want int32) string {
	if r.MaxAdditional == Unlimited || want <= r.MaxAdditional {
		return ""
	}
	msg := fmt.Sprintf("needs %d %s for %d more %s, %d free", int64(want)*r.GPUsPerReplica, plural(int32(int64(want)*r.GPUsPerReplica), "GPU"), want, plural(want, "replica"), max(r.FreeGPUs, 0))
	switch r.Reason {
	case v1alpha1.ReasonGPUQuotaLimited:
		msg += fmt.Sprintf(" in quota %s", r.Quota)
	default:
		msg += " on matching nodes"
		if fit := r.FreeGPUs / max(r.GPUsPerReplica, 1); int64(r.MaxAdditional) < fit {
			msg += fmt.Sprintf(" but only %d more fit on one node each", r.MaxAdditional)
		}
	}
	return msg
}

// Fit computes how many more replicas of the template the cluster can hold.
//
// Own pods are counted once: an own pod bound to a node uses that node's GPUs like any pod; an
// own pod not yet bound (Pending, no nodeName) and a replica with no pod yet are already part
// of FitInput.Replicas, so they reserve one slot each out of the free capacity before any
// additional replica (they are not counted as used on a node, nor added again). For quota, an
// existing pod (bound or not) is already charged in status.used; only replicas without a pod
// are reserved.
func Fit(in FitInput) FitResult {
	return FitCluster(NewCluster(in.Nodes, in.Pods), in)
}

// Cluster is what every ModelServer's fit reads alike: the nodes and the GPUs the pods bound
// to each already hold. The controller builds it once per interval and shares it (a cluster of
// 10,000 pods is not walked per ModelServer); it is read-only once built.
type Cluster struct {
	// Nodes of the cluster.
	Nodes []corev1.Node
	// UsedOn is the GPUs held on each node by the pods bound to it (terminal pods excluded).
	UsedOn map[string]int64
	// ByModelServer is the part of UsedOn held by each ModelServer's pods (namespace/name),
	// so that a fit replaces its own, possibly stale, share with its pods as they are now.
	ByModelServer map[string]map[string]int64
}

// NewCluster sums the GPUs each node's bound pods hold.
func NewCluster(nodes []corev1.Node, pods []corev1.Pod) *Cluster {
	c := &Cluster{Nodes: nodes, UsedOn: map[string]int64{}, ByModelServer: map[string]map[string]int64{}}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		g := PodGPUs(&p.Spec)
		c.UsedOn[p.Spec.NodeName] += g
		if ms := p.Labels[v1alpha1.LabelModelServer]; ms != "" {
			k := p.Namespace + "/" + ms
			if c.ByModelServer[k] == nil {
				c.ByModelServer[k] = map[string]int64{}
			}
			c.ByModelServer[k][p.Spec.NodeName] += g
		}
	}
	return c
}

// FitCluster is Fit over a shared Cluster, which may be older than in.Pods: in.Nodes are
// ignored and in.Pods need only be the ModelServer's own pods (others are skipped). The
// ModelServer's own GPUs are counted from in.Pods, not from the Cluster, so that its pods
// created or bound since the Cluster was built are never counted as free.
func FitCluster(c *Cluster, in FitInput) FitResult {
	gpr := PodGPUs(&in.Template.Spec)
	res := FitResult{MaxAdditional: Unlimited, GPUsPerReplica: gpr}
	if gpr <= 0 {
		return res
	}

	// Own pods: how many exist (not being deleted), how many wait for a node, and the GPUs
	// they hold on each node now.
	var ownAlive, ownUnbound int32
	ownOn := map[string]int64{}
	for i := range in.Pods {
		p := &in.Pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		own := p.Namespace == in.Namespace && in.ModelServer != "" && p.Labels[v1alpha1.LabelModelServer] == in.ModelServer
		if own && p.Spec.NodeName != "" {
			ownOn[p.Spec.NodeName] += PodGPUs(&p.Spec)
		}
		if own && p.DeletionTimestamp == nil {
			ownAlive++
			if p.Spec.NodeName == "" {
				ownUnbound++
			}
		}
	}
	notCreated := max(in.Replicas-ownAlive, 0)

	// Node capacity: slots of whole replicas on each matching node.
	var slots, free int64
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if !Schedulable(&in.Template.Spec, n) {
			continue
		}
		q, ok := n.Status.Allocatable[GPUResource]
		if !ok || q.Value() <= 0 {
			continue
		}
		res.MatchingNodes++
		used := c.UsedOn[n.Name] - c.ByModelServer[in.Namespace+"/"+in.ModelServer][n.Name] + ownOn[n.Name]
		f := max(q.Value()-used, 0)
		free += f
		slots += f / gpr
	}
	if res.MatchingNodes > 0 {
		reserved := int64(ownUnbound + notCreated)
		res.MaxAdditional = clampInt32(max(slots-reserved, 0))
		res.Reason = v1alpha1.ReasonGPUCapacityLimited
		res.FreeGPUs = max(free-reserved*gpr, 0)
	}
	// Else no schedulable node matches the template at all: nodes come on demand here
	// (cluster-autoscaler, Karpenter), so their free GPUs are unknown rather than zero, and only
	// the quotas limit.

	// Quota: the tightest GPU quota of the namespace.
	for i := range in.Quotas {
		q := &in.Quotas[i]
		for _, key := range []corev1.ResourceName{QuotaRequestsGPU, GPUResource} {
			hard, ok := q.Status.Hard[key]
			if !ok {
				hard, ok = q.Spec.Hard[key]
			}
			if !ok {
				continue
			}
			used := q.Status.Used[key]
			left := max(hard.Value()-used.Value()-int64(notCreated)*gpr, 0)
			if n := clampInt32(left / gpr); res.MaxAdditional == Unlimited || n < res.MaxAdditional {
				res.MaxAdditional = n
				res.Reason = v1alpha1.ReasonGPUQuotaLimited
				res.FreeGPUs = left
				res.Quota = fmt.Sprintf("%s (%s)", q.Name, key)
			}
		}
	}

	if res.MaxAdditional != Unlimited && in.Want > res.MaxAdditional {
		res.Limited = true
		res.Message = res.MessageFor(in.Want)
	}
	return res
}

// PodGPUs is the pod's effective nvidia.com/gpu request, as the scheduler counts it: the larger
// of the app containers plus restartable (sidecar) init containers, and the largest regular
// init container. A container's request is its requests entry, or its limits entry when
// requests has none (Kubernetes defaults requests to limits for extended resources).
func PodGPUs(spec *corev1.PodSpec) int64 {
	var sum, initMax, sidecars int64
	for i := range spec.Containers {
		sum += containerGPUs(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		g := containerGPUs(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars += g
			continue
		}
		initMax = max(initMax, sidecars+g)
	}
	return max(sum+sidecars, initMax)
}

func containerGPUs(c *corev1.Container) int64 {
	if q, ok := c.Resources.Requests[GPUResource]; ok {
		return q.Value()
	}
	if q, ok := c.Resources.Limits[GPUResource]; ok {
		return q.Value()
	}
	return 0
}

// Schedulable reports whether a pod with spec may land on node as far as node selection goes:
// the node is Ready (when it reports the condition) and schedulable (or the pod tolerates
// node.kubernetes.io/unschedulable), its labels match spec.nodeSelector and the required node
// affinity, and the pod tolerates every NoSchedule and NoExecute taint.
func Schedulable(spec *corev1.PodSpec, node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return false
		}
	}
	if node.Spec.Unschedulable && !tolerates(spec.Tolerations, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return false
	}
	for k, v := range spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if !matchesAnyTerm(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, node) {
			return false
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerates(spec.Tolerations, t) {
			return false
		}
	}
	return true
}

// matchesAnyTerm ORs the terms; a term ANDs its expressions and fields; an empty term matches
// nothing (as in Kubernetes).
func matchesAnyTerm(terms []corev1.NodeSelectorTerm, node *corev1.Node) bool {
	for _, t := range terms {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue
		}
		ok := true
		for _, r := range t.MatchExpressions {
			v, has := node.Labels[r.Key]
			if !matchRequirement(r, v, has) {
				ok = false
				break
			}
		}
		for _, r := range t.MatchFields {
			if !ok {
				break
			}
			if r.Key != "metadata.name" || !matchRequirement(r, node.Name, true) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func matchRequirement(r corev1.NodeSelectorRequirement, v string, has bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !has || !contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		got, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return got > want
		}
		return got < want
	}
	return false
}

// tolerates reports whether any toleration tolerates the taint (key, value and effect; an
// empty effect tolerates every effect; Exists with an empty key tolerates every taint).
func tolerates(tols []corev1.Toleration, t corev1.Taint) bool {
	for _, tol := range tols {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Key != "" && tol.Key != t.Key {
			continue
		}
		switch tol.Operator {
		case corev1.TolerationOpExists:
			return true
		case corev1.TolerationOpEqual, "":
			if tol.Key != "" && tol.Value == t.Value {
				return true
			}
		}
	}
	return false
}

func contains(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

func clampInt32(v int64) int32 {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(v)
}

func plural(n int32, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
