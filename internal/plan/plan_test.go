package plan

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/capacity"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/revision"
	"github.com/modelship/modelship/internal/rollout"
)

// modelServer is an autoscaled ModelServer (1 to 10 replicas, one GPU each) whose blue color
// serves its first revision with 2 replicas, the last autoscaling decision being 2.
func modelServer() *v1alpha1.ModelServer {
	ms := &v1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llm", Generation: 3},
		Spec: v1alpha1.ModelServerSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "server", Image: "vllm:a",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{capacity.GPUResource: resource.MustParse("1")}},
			}}}},
			Rollout: v1alpha1.RolloutSpec{Steps: []int32{50, 100}},
			Autoscaling: &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 10, Metrics: []v1alpha1.AutoscalingMetric{
				{Prometheus: &v1alpha1.PrometheusMetric{Query: "load", Target: resource.MustParse("1")}},
			}},
		},
	}
	rev := revision.Of(&ms.Spec.Template)
	ms.Status = v1alpha1.ModelServerStatus{
		Phase:       v1alpha1.PhaseHealthy,
		Revision:    rev,
		Stable:      &v1alpha1.ColorStatus{Color: v1alpha1.Blue, Revision: rev, Image: "vllm:a", Replicas: 2, ReadyReplicas: 2},
		Weights:     v1alpha1.Weights{Stable: 100},
		Autoscaling: &v1alpha1.AutoscalingStatus{DesiredReplicas: 2},
	}
	return ms
}

// observation is what a pass reads of ms: its colors' Deployments as the status says.
func observation(ms *v1alpha1.ModelServer) Observation {
	o := Observation{Rollout: rollout.Observation{
		Revision: revision.Of(&ms.Spec.Template), Image: ms.Spec.Template.Spec.Containers[0].Image,
		Colors: map[v1alpha1.Color]rollout.ColorObservation{},
	}}
	for _, c := range []*v1alpha1.ColorStatus{ms.Status.Stable, ms.Status.Candidate} {
		if c != nil {
			o.Rollout.Colors[c.Color] = rollout.ColorObservation{Exists: true, Revision: c.Revision, Image: c.Image, Replicas: c.Replicas,
				ReadyReplicas: c.ReadyReplicas, AvailableReplicas: c.ReadyReplicas, UpdatedReplicas: c.ReadyReplicas, Warm: true, WarmPods: c.ReadyReplicas}
		}
	}
	return o
}

// withoutTransitionTimes drops what SetStatusCondition takes from the wall clock.
func withoutTransitionTimes(st v1alpha1.ModelServerStatus) v1alpha1.ModelServerStatus {
	st = *st.DeepCopy()
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return st
}

// The autoscaler's decision is the rollout pass's input: the colors are planned for its count,
// the status carries it, and the same inputs give the same plan.
func TestComposeRunsTheRolloutForTheAutoscalersDecision(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		scale *autoscale.Output
		want  int32
	}{
		{"scaled up to the autoscaler's 5", &autoscale.Output{Desired: 5, Status: v1alpha1.AutoscalingStatus{DesiredReplicas: 5}}, 5},
		{"scaled down to the autoscaler's 1", &autoscale.Output{Desired: 1, Status: v1alpha1.AutoscalingStatus{DesiredReplicas: 1}}, 1},
		{"without a decision, the last one's 2", nil, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := modelServer()
			seen := ms.DeepCopy()
			obs := observation(ms)
			p := Compose(ms, obs, tc.scale, now)
			if got := p.Decision.Plans[v1alpha1.Blue].Replicas; got != tc.want {
				t.Errorf("blue planned for %d replicas, want %d", got, tc.want)
			}
			if p.Status.Replicas != tc.want || p.Status.Autoscaling == nil || p.Status.Autoscaling.DesiredReplicas != tc.want {
				t.Errorf("status replicas %d, autoscaling %+v; want %d", p.Status.Replicas, p.Status.Autoscaling, tc.want)
			}
			if c := cond(p.Status, v1alpha1.ConditionReady); c == nil || c.ObservedGeneration != ms.Generation {
				t.Errorf("Ready = %+v, want it set for generation %d", c, ms.Generation)
			}
			again := Compose(ms, obs, tc.scale, now)
			if !equality.Semantic.DeepEqual(withoutTransitionTimes(p.Status), withoutTransitionTimes(again.Status)) || !equality.Semantic.DeepEqual(p.Decision.Plans, again.Decision.Plans) {
				t.Errorf("the same inputs planned twice differ:\n%+v\n%+v", p.Status, again.Status)
			}
			if !equality.Semantic.DeepEqual(ms, seen) {
				t.Error("Compose changed the ModelServer")
			}
		})
	}
}

// During a rollout one more replica of the total costs more than one pod (the candidate is
// sized beside the stable color): the plan hands the rollout's sizing to the autoscaler, so
// its GPU clamp counts both colors' pods, and then plans the rollout for what it decided.
func TestPlanCountsTheRolloutsPodsInTheGPUClamp(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ms := modelServer()
	ms.Spec.Template.Spec.Containers[0].Image = "vllm:b" // a new revision: a rollout to green
	seen := ms.DeepCopy()
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{capacity.GPUResource: resource.MustParse("8")}}}
	obs := observation(ms)
	obs.Capacity = &CapacityView{Cluster: capacity.NewCluster([]corev1.Node{node}, nil)}
	obs.Autoscaling = &Signals{
		Observations:    []autoscale.Observation{{Metric: autoscale.MetricPrometheus, Status: metrics.OK, Value: 100}},
		RequestsWaiting: autoscale.Observation{Metric: autoscale.MetricRequestsWaiting, Status: metrics.NoData},
		Ready:           2,
	}

	p := Plan(ms, obs, now)
	if p.Scale == nil {
		t.Fatal("the autoscaler did not decide")
	}
	sizing := obs.Rollout
	sizing.DesiredReplicas = 2
	bySizing := Autoscale(ms, *obs.Autoscaling, obs.Capacity, rollout.PodsFor(ms, sizing, now), now)
	byTotal := Autoscale(ms, *obs.Autoscaling, obs.Capacity, nil, now)
	if p.Scale.Desired != bySizing.Desired {
		t.Errorf("plan decided %d replicas, the autoscaler with the rollout's sizing %d", p.Scale.Desired, bySizing.Desired)
	}
	t.Logf("FIGURE/plan_clamp_desired_by_sizing=%d by_total=%d", bySizing.Desired, byTotal.Desired)
	if bySizing.Desired >= byTotal.Desired {
		t.Errorf("with the rollout's pods counted the clamp allows %d replicas, counting the total only %d: want fewer", bySizing.Desired, byTotal.Desired)
	}
	var pods int32
	for _, c := range p.Decision.Plans {
		pods += c.Replicas
	}
	if pods > 8 {
		t.Errorf("the colors are planned for %d pods of one GPU on a node of 8: %+v", pods, p.Decision.Plans)
	}
	if p.Status.Autoscaling.DesiredReplicas != p.Scale.Desired {
		t.Errorf("status.autoscaling.desiredReplicas %d, want the decision's %d", p.Status.Autoscaling.DesiredReplicas, p.Scale.Desired)
	}
	if !equality.Semantic.DeepEqual(ms, seen) {
		t.Error("Plan changed the ModelServer")
	}
}

// A namespace's GPU quota caps the autoscaler even where no node matches the template: nodes
// come on demand there (or the shared capacity view predates the node), so their free GPUs are
// unknown and clamp nothing, but the quota is known. Before, a used-up quota let the count
// grow whenever no node matched, and its pods were then refused at creation.
func TestAGPUQuotaCapsTheCountWhereNoNodeMatches(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ms := modelServer() // 2 replicas of one GPU; the load asks for 6
	sig := Signals{
		Observations:    []autoscale.Observation{{Metric: autoscale.MetricPrometheus, Status: metrics.OK, Value: 6}},
		RequestsWaiting: autoscale.Observation{Metric: autoscale.MetricRequestsWaiting, Status: metrics.NoData},
		Ready:           2,
	}
	quota := func(hard, used int64) corev1.ResourceQuota {
		return corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "gpus"},
			Status: corev1.ResourceQuotaStatus{
				Hard: corev1.ResourceList{capacity.QuotaRequestsGPU: *resource.NewQuantity(hard, resource.DecimalSI)},
				Used: corev1.ResourceList{capacity.QuotaRequestsGPU: *resource.NewQuantity(used, resource.DecimalSI)},
			},
		}
	}
	noNode := capacity.NewCluster(nil, nil)
	for _, tc := range []struct {
		name        string
		quotas      []corev1.ResourceQuota
		want        int32
		wantLimited string
	}{
		{"no quota: unknown nodes limit nothing", nil, 6, ""},
		{"the quota used up by the 2 replicas", []corev1.ResourceQuota{quota(2, 2)}, 2, v1alpha1.ReasonGPUQuotaLimited},
		{"room for 2 more in the quota", []corev1.ResourceQuota{quota(6, 2)}, 4, v1alpha1.ReasonGPUQuotaLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := Autoscale(ms, sig, &CapacityView{Cluster: noNode, Quotas: tc.quotas}, nil, now)
			if out.Desired != tc.want {
				t.Errorf("desired %d, want %d (%s)", out.Desired, tc.want, out.LimitedMessage)
			}
			if got := map[bool]string{true: out.LimitedReason}[out.Limited]; got != tc.wantLimited {
				t.Errorf("limited %q (%s), want %q", got, out.LimitedMessage, tc.wantLimited)
			}
		})
	}
}
