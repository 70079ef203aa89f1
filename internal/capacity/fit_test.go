package capacity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func gpus(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }

type nodeOpt func(*corev1.Node)

func newNode(name string, gpu int64, opts ...nodeOpt) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	n.Status.Allocatable = corev1.ResourceList{GPUResource: gpus(gpu)}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func withLabel(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }
func withTaint(k, v string, e corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Value: v, Effect: e}) }
}
func cordoned() nodeOpt { return func(n *corev1.Node) { n.Spec.Unschedulable = true } }
func notReady() nodeOpt {
	return func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
}

type tmplOpt func(*corev1.PodSpec)

func newTemplate(gpuPerContainer ...int64) corev1.PodTemplateSpec {
	var t corev1.PodTemplateSpec
	for i, g := range gpuPerContainer {
		c := corev1.Container{Name: "c" + string(rune('0'+i))}
		if g > 0 {
			c.Resources.Limits = corev1.ResourceList{GPUResource: gpus(g)}
		}
		t.Spec.Containers = append(t.Spec.Containers, c)
	}
	return t
}

func with(t corev1.PodTemplateSpec, opts ...tmplOpt) corev1.PodTemplateSpec {
	for _, o := range opts {
		o(&t.Spec)
	}
	return t
}

func nodeSelector(k, v string) tmplOpt {
	return func(s *corev1.PodSpec) {
		if s.NodeSelector == nil {
			s.NodeSelector = map[string]string{}
		}
		s.NodeSelector[k] = v
	}
}

func requiredAffinity(terms ...corev1.NodeSelectorTerm) tmplOpt {
	return func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

func term(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func req(k string, op corev1.NodeSelectorOperator, vs ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: k, Operator: op, Values: vs}
}

func toleration(k string, op corev1.TolerationOperator, v string, e corev1.TaintEffect) tmplOpt {
	return func(s *corev1.PodSpec) {
		s.Tolerations = append(s.Tolerations, corev1.Toleration{Key: k, Operator: op, Value: v, Effect: e})
	}
}

type podOpt func(*corev1.Pod)

func newPod(ns, name, node string, gpu int64, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}}}
	p.Spec.NodeName = node
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: gpus(gpu)}}}}
	p.Status.Phase = corev1.PodRunning
	if node == "" {
		p.Status.Phase = corev1.PodPending
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func own(p *corev1.Pod) { p.Labels[v1alpha1.LabelModelServer] = "llama" }
func phase(ph corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}
func deleting(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }

func quota(name string, key corev1.ResourceName, hard, used int64) corev1.ResourceQuota {
	return corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name},
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{key: gpus(hard)},
			Used: corev1.ResourceList{key: gpus(used)},
		},
	}
}

func TestFit(t *testing.T) {
	gpuNode := withLabel("gpu", "a100")
	cases := []struct {
		name        string
		in          FitInput
		wantMax     int32
		wantLimited bool
		wantReason  string
		wantMessage string
	}{
		{
			name:    "a template without GPUs is never limited",
			in:      FitInput{Template: newTemplate(0), Nodes: []corev1.Node{newNode("n1", 0)}, Want: 10},
			wantMax: Unlimited,
		},
		{
			name:    "counts whole replicas per node, not GPUs summed across nodes",
			in:      FitInput{Template: newTemplate(2), Nodes: []corev1.Node{newNode("n1", 3), newNode("n2", 3)}, Want: 2},
			wantMax: 2,
		},
		{
			name:        "fragmented free GPUs do not fit a replica and the message says so",
			in:          FitInput{Template: newTemplate(2), Nodes: []corev1.Node{newNode("n1", 1), newNode("n2", 1), newNode("n3", 1)}, Want: 1},
			wantMax:     0,
			wantLimited: true,
			wantReason:  v1alpha1.ReasonGPUCapacityLimited,
			wantMessage: "needs 2 GPUs for 1 more replica, 3 free on matching nodes but only 0 more fit on one node each",
		},
		{
			name: "sums GPUs over containers and subtracts GPUs used by other pods on the node",
			in: FitInput{
				Template: newTemplate(1, 1), Namespace: "ml", ModelServer: "llama",
				Nodes: []corev1.Node{newNode("n1", 8), newNode("n2", 8)},
				Pods:  []corev1.Pod{newPod("other", "x", "n1", 6), newPod("other", "y", "n2", 4)},
				Want:  2,
			},
			wantMax: 3,
		},
		{
			name: "says how many GPUs are missing for the wanted replicas",
			in: FitInput{
				Template: newTemplate(2), Namespace: "ml", ModelServer: "llama",
				Nodes: []corev1.Node{newNode("n1", 4)},
				Pods:  []corev1.Pod{newPod("other", "x", "n1", 2)},
				Want:  2,
			},
			wantMax:     1,
			wantLimited: true,
			wantReason:  v1alpha1.ReasonGPUCapacityLimited,
			wantMessage: "needs 4 GPUs for 2 more replicas, 2 free on matching nodes",
		},
		{
			name: "ignores terminal pods and pods bound to nodes that do not match",
			in: FitInput{
				Template: with(newTemplate(1), nodeSelector("gpu", "a100")),
				Nodes:    []corev1.Node{newNode("n1", 4, gpuNode), newNode("n2", 4)},
				Pods: []corev1.Pod{
					newPod("a", "done", "n1", 4, phase(corev1.PodSucceeded)),
					newPod("a", "failed", "n1", 4, phase(corev1.PodFailed)),
					newPod("a", "elsewhere", "n2", 4),
				},
			},
			wantMax: 4,
		},
		{
			name:    "a nodeSelector keeps only nodes with the label and value",
			in:      FitInput{Template: with(newTemplate(1), nodeSelector("gpu", "a100")), Nodes: []corev1.Node{newNode("n1", 4, gpuNode), newNode("n2", 4, withLabel("gpu", "t4")), newNode("n3", 4)}},
			wantMax: 4,
		},
		{
			name: "required node affinity ORs terms and ANDs expressions (In, NotIn, Exists, DoesNotExist)",
			in: FitInput{
				Template: with(newTemplate(1), requiredAffinity(
					term(req("gpu", corev1.NodeSelectorOpIn, "a100", "h100"), req("spot", corev1.NodeSelectorOpDoesNotExist)),
					term(req("pool", corev1.NodeSelectorOpExists), req("zone", corev1.NodeSelectorOpNotIn, "z9")),
				)),
				Nodes: []corev1.Node{
					newNode("a100", 1, withLabel("gpu", "a100")),                               // term 1
					newNode("h100spot", 2, withLabel("gpu", "h100"), withLabel("spot", "yes")), // no
					newNode("t4", 4, withLabel("gpu", "t4")),                                   // no
					newNode("pool", 8, withLabel("pool", "p"), withLabel("zone", "z1")),        // term 2
					newNode("poolz9", 16, withLabel("pool", "p"), withLabel("zone", "z9")),     // no
				},
			},
			wantMax: 9,
		},
		{
			// No node matches: nodes come on demand (cluster-autoscaler, Karpenter), their free
			// GPUs are unknown, not zero.
			name:    "an empty affinity term matches no node, and unknown nodes limit nothing",
			in:      FitInput{Template: with(newTemplate(1), requiredAffinity(corev1.NodeSelectorTerm{})), Nodes: []corev1.Node{newNode("n1", 4)}, Want: 1},
			wantMax: Unlimited,
		},
		{
			name: "with no node matching, a used-up GPU quota still limits",
			in: FitInput{
				Template: newTemplate(1), Namespace: "ml",
				Quotas: []corev1.ResourceQuota{quota("gpus", QuotaRequestsGPU, 0, 0)}, Want: 1,
			},
			wantMax: 0, wantLimited: true, wantReason: v1alpha1.ReasonGPUQuotaLimited,
			wantMessage: "needs 1 GPU for 1 more replica, 0 free in quota gpus (requests.nvidia.com/gpu)",
		},
		{
			name: "with no node matching, a GPU quota with room limits to its room",
			in: FitInput{
				Template: newTemplate(2), Namespace: "ml", Nodes: []corev1.Node{newNode("cpu-only", 0)},
				Quotas: []corev1.ResourceQuota{quota("gpus", QuotaRequestsGPU, 8, 2)}, Want: 5,
			},
			wantMax: 3, wantLimited: true, wantReason: v1alpha1.ReasonGPUQuotaLimited,
			wantMessage: "needs 10 GPUs for 5 more replicas, 6 free in quota gpus (requests.nvidia.com/gpu)",
		},
		{
			name: "NoSchedule and NoExecute taints need a toleration, PreferNoSchedule does not",
			in: FitInput{
				Template: newTemplate(1),
				Nodes: []corev1.Node{
					newNode("gputaint", 1, withTaint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)),
					newNode("exec", 2, withTaint("maint", "", corev1.TaintEffectNoExecute)),
					newNode("prefer", 4, withTaint("cheap", "", corev1.TaintEffectPreferNoSchedule)),
				},
			},
			wantMax: 4,
		},
		{
			name: "tolerations with Equal and Exists open tainted nodes",
			in: FitInput{
				Template: with(newTemplate(1),
					toleration("nvidia.com/gpu", corev1.TolerationOpEqual, "present", corev1.TaintEffectNoSchedule),
					toleration("maint", corev1.TolerationOpExists, "", "")),
				Nodes: []corev1.Node{
					newNode("gputaint", 1, withTaint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)),
					newNode("wrongvalue", 8, withTaint("nvidia.com/gpu", "other", corev1.TaintEffectNoSchedule)),
					newNode("exec", 2, withTaint("maint", "x", corev1.TaintEffectNoExecute)),
				},
			},
			wantMax: 3,
		},
		{
			name: "cordoned and NotReady nodes give no capacity",
			in: FitInput{
				Template: newTemplate(1),
				Nodes:    []corev1.Node{newNode("ok", 1), newNode("cordoned", 2, cordoned()), newNode("down", 4, notReady())},
			},
			wantMax: 1,
		},
		{
			name: "own pods bound to a node count as used once",
			in: FitInput{
				Template: newTemplate(2), Namespace: "ml", ModelServer: "llama", Replicas: 2,
				Nodes: []corev1.Node{newNode("n1", 8)},
				Pods:  []corev1.Pod{newPod("ml", "llama-1", "n1", 2, own), newPod("ml", "llama-2", "n1", 2, own)},
			},
			wantMax: 2,
		},
		{
			name: "own Pending pods reserve a slot instead of being added again",
			in: FitInput{
				Template: newTemplate(2), Namespace: "ml", ModelServer: "llama", Replicas: 3,
				Nodes: []corev1.Node{newNode("n1", 8)},
				Pods: []corev1.Pod{
					newPod("ml", "llama-1", "n1", 2, own),
					newPod("ml", "llama-2", "", 2, own),
					newPod("ml", "llama-3", "", 2, own),
				},
				Want: 2,
			},
			// 6 free on n1 = 3 slots, 2 taken by the Pending own pods.
			wantMax: 1, wantLimited: true, wantReason: v1alpha1.ReasonGPUCapacityLimited,
			wantMessage: "needs 4 GPUs for 2 more replicas, 2 free on matching nodes",
		},
		{
			name: "replicas asked for but without a pod yet reserve a slot, deleting pods do not count as alive",
			in: FitInput{
				Template: newTemplate(2), Namespace: "ml", ModelServer: "llama", Replicas: 3,
				Nodes: []corev1.Node{newNode("n1", 8)},
				Pods:  []corev1.Pod{newPod("ml", "llama-1", "n1", 2, own), newPod("ml", "old", "n1", 2, own, deleting)},
			},
			// 4 free = 2 slots; 2 replicas have no pod yet.
			wantMax: 0,
		},
		{
			name: "Pending pods of other workloads do not take capacity",
			in: FitInput{
				Template: newTemplate(1), Namespace: "ml", ModelServer: "llama",
				Nodes: []corev1.Node{newNode("n1", 2)},
				Pods:  []corev1.Pod{newPod("ml", "other", "", 2)},
			},
			wantMax: 2,
		},
		{
			name: "a GPU quota tighter than the nodes limits by quota",
			in: FitInput{
				Template: newTemplate(2), Namespace: "ml", ModelServer: "llama", Replicas: 1,
				Nodes:  []corev1.Node{newNode("n1", 16)},
				Pods:   []corev1.Pod{newPod("ml", "llama-1", "n1", 2, own)},
				Quotas: []corev1.ResourceQuota{quota("gpu", QuotaRequestsGPU, 6, 2)},
				Want:   3,
			},
			wantMax: 2, wantLimited: true, wantReason: v1alpha1.ReasonGPUQuotaLimited,
			wantMessage: "needs 6 GPUs for 3 more replicas, 4 free in quota gpu (requests.nvidia.com/gpu)",
		},
		{
			name: "quota counts replicas without a pod yet but not Pending pods already charged",
			in: FitInput{
				Template: newTemplate(1), Namespace: "ml", ModelServer: "llama", Replicas: 3,
				Nodes:  []corev1.Node{newNode("n1", 16)},
				Pods:   []corev1.Pod{newPod("ml", "llama-1", "", 1, own)},
				Quotas: []corev1.ResourceQuota{quota("gpu", GPUResource, 5, 1)},
			},
			// 4 left in quota, 2 replicas without a pod: 2 more.
			wantMax: 2,
		},
		{
			name: "the tightest of several quotas wins",
			in: FitInput{
				Template: newTemplate(1), Namespace: "ml",
				Nodes:  []corev1.Node{newNode("n1", 16)},
				Quotas: []corev1.ResourceQuota{quota("a", QuotaRequestsGPU, 10, 0), quota("b", GPUResource, 3, 2), quota("cpu", corev1.ResourceCPU, 1, 1)},
				Want:   2,
			},
			wantMax: 1, wantLimited: true, wantReason: v1alpha1.ReasonGPUQuotaLimited,
			wantMessage: "needs 2 GPUs for 2 more replicas, 1 free in quota b (nvidia.com/gpu)",
		},
		{
			name: "a quota already over its hard limit allows nothing",
			in: FitInput{
				Template: newTemplate(1), Namespace: "ml",
				Nodes:  []corev1.Node{newNode("n1", 16)},
				Quotas: []corev1.ResourceQuota{quota("gpu", QuotaRequestsGPU, 2, 3)},
			},
			wantMax: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Fit(tc.in)
			if got.MaxAdditional != tc.wantMax {
				t.Errorf("MaxAdditional = %d, want %d (%+v)", got.MaxAdditional, tc.wantMax, got)
			}
			if got.Limited != tc.wantLimited {
				t.Errorf("Limited = %v, want %v", got.Limited, tc.wantLimited)
			}
			if tc.wantLimited && got.Reason != tc.wantReason {
				t.Errorf("Reason = %q, want %q", got.Reason, tc.wantReason)
			}
			if got.Message != tc.wantMessage {
				t.Errorf("Message = %q, want %q", got.Message, tc.wantMessage)
			}
			// The shared cluster snapshot, built from every pod once, with only the
			// ModelServer's own pods passed per fit, decides the same.
			own := FitInput(tc.in)
			own.Nodes, own.Pods = nil, nil
			for _, p := range tc.in.Pods {
				if p.Namespace == tc.in.Namespace && p.Labels[v1alpha1.LabelModelServer] == tc.in.ModelServer {
					own.Pods = append(own.Pods, p)
				}
			}
			if shared := FitCluster(NewCluster(tc.in.Nodes, tc.in.Pods), own); shared != got {
				t.Errorf("FitCluster = %+v, Fit = %+v", shared, got)
			}
		})
	}
}

func TestPodGPUs(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	cases := []struct {
		name string
		spec corev1.PodSpec
		want int64
	}{
		{"reads limits when requests are absent", newTemplate(2, 1).Spec, 3},
		{"prefers requests over limits", corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{GPUResource: gpus(1)}, Limits: corev1.ResourceList{GPUResource: gpus(1)}}}}}, 1},
		{"a regular init container larger than the app containers sets the request", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: gpus(4)}}}},
			Containers:     newTemplate(1).Spec.Containers}, 4},
		{"sidecar init containers add to the app containers", corev1.PodSpec{
			InitContainers: []corev1.Container{{RestartPolicy: &always, Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: gpus(1)}}}},
			Containers:     newTemplate(2).Spec.Containers}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodGPUs(&tc.spec); got != tc.want {
				t.Errorf("PodGPUs = %d, want %d", got, tc.want)
			}
		})
	}
}

// A shared Cluster may be older than the ModelServer's own pods: those created and bound since
// it was built hold GPUs that must not be counted as free again (the e2e GPU story scaled past
// what fits when they were), and its own pods deleted since free theirs.
func TestFitClusterCountsTheModelServersOwnPodsAsTheyAreNow(t *testing.T) {
	nodes := []corev1.Node{newNode("n1", 8), newNode("n2", 8)}
	in := FitInput{Template: newTemplate(4), Namespace: "ml", ModelServer: "llama", Want: 8}
	// Built when one own pod ran on n1, beside another tenant's 4 GPUs on n2.
	stale := NewCluster(nodes, []corev1.Pod{newPod("ml", "a", "n1", 4, own), newPod("other", "x", "n2", 4)})

	in.Replicas, in.Pods = 3, []corev1.Pod{newPod("ml", "a", "n1", 4, own), newPod("ml", "b", "n1", 4, own), newPod("ml", "c", "n2", 4, own)}
	if got := FitCluster(stale, in); got.MaxAdditional != 0 {
		t.Errorf("with 3 own pods bound since: MaxAdditional = %d, want 0 (n1 full, n2 full)", got.MaxAdditional)
	}
	in.Replicas, in.Pods = 0, nil
	if got := FitCluster(stale, in); got.MaxAdditional != 3 {
		t.Errorf("with the own pod gone since: MaxAdditional = %d, want 3 (n1 free, n2 half)", got.MaxAdditional)
	}
}
