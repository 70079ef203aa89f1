package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/capacity"
)

// The autoscaling tests run the real controller against the test Prometheus' grouped signal
// queries. envtest runs no Deployment controller, kubelet, scheduler or quota controller: the
// tests play them (runPods, gpuNode, the quota's status).

// poolLabel keeps a test's GPU nodes to its own ModelServers. Nodes are cluster-wide, so each
// test labels and taints its nodes with its namespace, and its template selects and tolerates
// them; other tests' templates neither match nor tolerate them.
const poolLabel = "test.modelship.dev/pool"

// scaleInterval is spec.autoscaling.interval in these tests.
const scaleInterval = 500 * time.Millisecond

// onPool makes the template land only on the nodes gpuNode made for pool.
func onPool(pool string) msOption {
	return func(ms *v1alpha1.ModelServer) {
		ms.Spec.Template.Spec.NodeSelector = map[string]string{poolLabel: pool}
		ms.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: poolLabel, Operator: corev1.TolerationOpEqual, Value: pool, Effect: corev1.TaintEffectNoSchedule}}
	}
}

// withAutoscaling turns autoscaling on between min and max on GPU utilization with a target,
// evaluated every scaleInterval, then applies opts.
func withAutoscaling(minReplicas, maxReplicas, gpuTarget int32, opts ...func(*v1alpha1.AutoscalingSpec)) msOption {
	return func(ms *v1alpha1.ModelServer) {
		a := &v1alpha1.AutoscalingSpec{
			MinReplicas: ptr.To(int32(minReplicas)), MaxReplicas: maxReplicas,
			Interval: v1alpha1.Duration{Duration: scaleInterval},
			Metrics:  []v1alpha1.AutoscalingMetric{{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: gpuTarget}}},
		}
		for _, o := range opts {
			o(a)
		}
		ms.Spec.Autoscaling = a
	}
}

// scaleDownWindow sets the scale-down stabilization window.
func scaleDownWindow(d time.Duration) func(*v1alpha1.AutoscalingSpec) {
	return func(a *v1alpha1.AutoscalingSpec) {
		a.Behavior.ScaleDown = &v1alpha1.ScalingRules{StabilizationWindow: &v1alpha1.Duration{Duration: d}}
	}
}

func withReplicas(n int32) msOption {
	return func(ms *v1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To(n) }
}

// gpuNode plays a GPU node joining the cluster (kubelet and node lifecycle controller): a Ready Node of pool with gpus nvidia.com/gpu
// allocatable, tainted so that only pool's templates land on it. It is deleted at the end.
func gpuNode(t *testing.T, pool string, gpus int64) string {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-" + pool, Labels: map[string]string{poolLabel: pool}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: poolLabel, Value: pool, Effect: corev1.TaintEffectNoSchedule}}},
	}
	if err := k8s.Create(ctx, n); err != nil {
		t.Fatalf("creating node: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	res := corev1.ResourceList{
		capacity.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI),
		corev1.ResourceCPU:   resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	n.Status = corev1.NodeStatus{
		Capacity: res, Allocatable: res,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
	}
	if err := k8s.Status().Update(ctx, n); err != nil {
		t.Fatalf("setting node allocatable: %v", err)
	}
	// Admission taints a new node not-ready; the node lifecycle controller lifts the taint once
	// the kubelet reports Ready.
	n.Spec.Taints = []corev1.Taint{{Key: poolLabel, Value: pool, Effect: corev1.TaintEffectNoSchedule}}
	if err := k8s.Update(ctx, n); err != nil {
		t.Fatalf("lifting the not-ready taint: %v", err)
	}
	// The controller's capacity check reads nodes from its cache, and a node it does not see
	// yet with its GPUs, untainted, is one that matches nothing: free GPUs unknown, nothing
	// clamped (nodes come on demand). Under a loaded machine the cache can lag by seconds.
	eventually(t, 20*time.Second, "node "+n.Name+" in the controller's cache", func() error {
		var seen corev1.Node
		if err := controllerCache.Get(ctx, client.ObjectKeyFromObject(n), &seen); err != nil {
			return err
		}
		if q := seen.Status.Allocatable[capacity.GPUResource]; q.Value() != gpus || len(seen.Spec.Taints) != 1 {
			return fmt.Errorf("cached node: allocatable %s GPUs, taints %v", q.String(), seen.Spec.Taints)
		}
		return nil
	})
	return n.Name
}

// gpuQuota plays the quota controller: it creates the namespace's ResourceQuota of hard GPUs
// with used of them counted in its status, and waits until the controller's cache holds it. A
// capacity check that does not see the quota yet clamps nothing, and a count it lets through
// stays: room is asked for the replicas the Deployment already has.
func gpuQuota(t *testing.T, ns string, hard, used int64) {
	t.Helper()
	ctx := context.Background()
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpus"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{capacity.QuotaRequestsGPU: *resource.NewQuantity(hard, resource.DecimalSI)}},
	}
	if err := k8s.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{capacity.QuotaRequestsGPU: *resource.NewQuantity(used, resource.DecimalSI)}}
	if err := k8s.Status().Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "quota "+ns+"/gpus in the controller's cache", func() error {
		var seen corev1.ResourceQuota
		if err := controllerCache.Get(ctx, client.ObjectKeyFromObject(q), &seen); err != nil {
			return err
		}
		if u := seen.Status.Used[capacity.QuotaRequestsGPU]; u.Value() != used || seen.Status.Hard == nil {
			return fmt.Errorf("cached quota: status %+v", seen.Status)
		}
		return nil
	})
}

// runPods plays the Deployment controller, the scheduler and the kubelet for one color: it
// creates n Pods of the color's Deployment (its pod template, labels and revision), bound to
// node (unbound when empty), marks them Running and Ready, and the Deployment ready. It returns
// the pod names.
func runPods(t *testing.T, ms *v1alpha1.ModelServer, c v1alpha1.Color, n int, node string) []string {
	t.Helper()
	names := createPods(t, ms, c, n, node, true)
	markReady(t, ms.Namespace, ms.DeploymentName(c))
	return names
}

// startPods creates n Pods of the color bound to node that are still loading their model
// (Running, not Ready).
func startPods(t *testing.T, ms *v1alpha1.ModelServer, c v1alpha1.Color, n int, node string) []string {
	t.Helper()
	return createPods(t, ms, c, n, node, false)
}

func createPods(t *testing.T, ms *v1alpha1.ModelServer, c v1alpha1.Color, n int, node string, ready bool) []string {
	t.Helper()
	ctx := context.Background()
	name := ms.DeploymentName(c)
	var rev string
	eventually(t, 20*time.Second, "Deployment "+name+" created", func() error {
		d, err := getDeployment(ms.Namespace, name)
		if err != nil {
			return err
		}
		rev = d.Labels[v1alpha1.LabelRevision]
		return nil
	})
	d, err := getDeployment(ms.Namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	base := len(podsOf(t, ms, c))
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ms.Namespace, Name: fmt.Sprintf("%s-%s-%d", name, rev, base+i),
				Labels: d.Spec.Template.Labels,
			},
			Spec: *d.Spec.Template.Spec.DeepCopy(),
		}
		p.Spec.NodeName = node
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatalf("creating pod: %v", err)
		}
		readiness := corev1.ConditionFalse
		if ready {
			readiness = corev1.ConditionTrue
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
			{Type: corev1.PodReady, Status: readiness, LastTransitionTime: metav1.Now()},
		}}
		if err := k8s.Status().Update(ctx, p); err != nil {
			t.Fatalf("setting pod status: %v", err)
		}
		names = append(names, p.Name)
	}
	return names
}

// podsOf lists the pods of a color.
func podsOf(t *testing.T, ms *v1alpha1.ModelServer, c v1alpha1.Color) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(ms.Namespace), client.MatchingLabels(ms.ColorLabels(c))); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// gpuLoad is the GPU utilization the test Prometheus reports (DCGM_FI_DEV_GPU_UTIL) for one
// namespace's pods: the same value on each, or no series at all.
type gpuLoad struct {
	mu    sync.Mutex
	pods  []string
	value float64
}

func newGPULoad(t *testing.T, ns string) *gpuLoad {
	l := &gpuLoad{}
	prometheus.setSeries(ns, l.series)
	t.Cleanup(func() { prometheus.setSeries(ns, nil) })
	return l
}

// set reports value for each of pods; no pods, no series.
func (l *gpuLoad) set(pods []string, value float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pods, l.value = pods, value
}

func (l *gpuLoad) setValue(value float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.value = value
}

func (l *gpuLoad) series(query string) []podSeries {
	if !strings.Contains(query, "DCGM_FI_DEV_GPU_UTIL") {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]podSeries, 0, len(l.pods))
	for _, p := range l.pods {
		out = append(out, podSeries{pod: p, value: l.value})
	}
	return out
}

func deploymentReplicas(t *testing.T, ns, name string) int32 {
	t.Helper()
	d, err := getDeployment(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(d.Spec.Replicas, 1)
}

// waitReplicas waits for the Deployment to be asked for n replicas.
func waitReplicas(t *testing.T, ns, name string, n int32) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("Deployment %s at %d replicas", name, n), func() error {
		d, err := getDeployment(ns, name)
		if err != nil {
			return err
		}
		if got := ptr.Deref(d.Spec.Replicas, 1); got != n {
			return fmt.Errorf("replicas %d", got)
		}
		return nil
	})
}

// holds checks for d that the Deployment stays at n replicas and check passes on the
// ModelServer (the only sleeps in these tests: something must not change).
func holds(t *testing.T, d time.Duration, ms *v1alpha1.ModelServer, n int32, check func(*v1alpha1.ModelServer) error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if got := deploymentReplicas(t, ms.Namespace, ms.DeploymentName(v1alpha1.Blue)); got != n {
			t.Fatalf("Deployment moved to %d replicas, want %d held", got, n)
		}
		got := getMS(t, ms)
		if a := got.Status.Autoscaling; a == nil || a.DesiredReplicas != n {
			t.Fatalf("desired replicas moved: %+v, want %d held", a, n)
		}
		if check != nil {
			if err := check(got); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// autoscaling returns the status' autoscaling or an error saying it is not there yet.
func autoscaling(ms *v1alpha1.ModelServer) (*v1alpha1.AutoscalingStatus, error) {
	if ms.Status.Autoscaling == nil {
		return nil, fmt.Errorf("no status.autoscaling yet")
	}
	return ms.Status.Autoscaling, nil
}

// proposal checks the first proposal: its value, target and proposed replicas.
func proposal(a *v1alpha1.AutoscalingStatus, value, target string, replicas int32) error {
	if len(a.Proposals) != 1 {
		return fmt.Errorf("proposals %+v", a.Proposals)
	}
	p := a.Proposals[0]
	if p.Metric != autoscale.MetricGPUUtilization || p.Value != value || p.Target != target || p.Replicas == nil || *p.Replicas != replicas {
		return fmt.Errorf("proposal %+v (replicas %v), want %s value %s target %s replicas %d", p, ptr.Deref(p.Replicas, -1), autoscale.MetricGPUUtilization, value, target, replicas)
	}
	return nil
}

// describe summarises the autoscaler's view for failure messages.
func describe(ms *v1alpha1.ModelServer) string {
	var b strings.Builder
	if a := ms.Status.Autoscaling; a != nil {
		for _, p := range a.Proposals {
			fmt.Fprintf(&b, "proposal %s value %q target %q replicas %d (%s); ", p.Metric, p.Value, p.Target, ptr.Deref(p.Replicas, -1), p.Message)
		}
	}
	for _, t := range []string{v1alpha1.ConditionMetricsAvailable, v1alpha1.ConditionScalingLimited} {
		if c := condition(ms, t); c != nil {
			fmt.Fprintf(&b, "%s %s %s: %s; ", t, c.Status, c.Reason, c.Message)
		}
	}
	return b.String()
}

func conditionIs(ms *v1alpha1.ModelServer, typ string, status metav1.ConditionStatus, reason string, msgParts ...string) error {
	c := condition(ms, typ)
	if c == nil || c.Status != status || c.Reason != reason {
		return fmt.Errorf("%s is %+v, want %s %s", typ, c, status, reason)
	}
	for _, p := range msgParts {
		if !strings.Contains(c.Message, p) {
			return fmt.Errorf("%s message %q does not say %q", typ, c.Message, p)
		}
	}
	return nil
}

// event finds an Event about ms with reason whose note contains note.
func event(ms *v1alpha1.ModelServer, reason, note string) error {
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ms.Namespace)); err != nil {
		return err
	}
	var seen []string
	for _, e := range list.Items {
		if e.Regarding.Kind != "ModelServer" || e.Regarding.Name != ms.Name {
			continue
		}
		if e.Reason == reason && strings.Contains(e.Note, note) {
			return nil
		}
		seen = append(seen, e.Reason+": "+e.Note)
	}
	return fmt.Errorf("no %s event saying %q among %q", reason, note, seen)
}

func TestScalesUpWhenGPUUtilizationIsAboveTarget(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	node := gpuNode(t, ns, 8)
	load := newGPULoad(t, ns)
	ms := newModelServer(ns, "up", onPool(ns), withReplicas(2), withAutoscaling(1, 5, 70))
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, ns, "up-blue", 2)

	// Given two Ready pods whose GPUs run at 95% against a target of 70%.
	pods := runPods(t, ms, v1alpha1.Blue, 2, node)
	load.set(pods, 95)

	// Then the autoscaler asks for ceil(2 * 95/70) = 3 and says why.
	eventually(t, 30*time.Second, "scaled up to 3 in status", func() error {
		got := getMS(t, ms)
		a, err := autoscaling(got)
		if err != nil {
			return err
		}
		if a.DesiredReplicas != 3 || a.LastScaleReason != "2 -> 3: gpuUtilization 95 > target 70" || a.LastScaleTime == nil {
			return fmt.Errorf("desired %d reason %q at %v; %s", a.DesiredReplicas, a.LastScaleReason, a.LastScaleTime, describe(got))
		}
		if err := proposal(a, "95", "70", 3); err != nil {
			return err
		}
		if err := conditionIs(got, v1alpha1.ConditionMetricsAvailable, metav1.ConditionTrue, v1alpha1.ReasonMetricsOK); err != nil {
			return err
		}
		return conditionIs(got, v1alpha1.ConditionScalingLimited, metav1.ConditionFalse, v1alpha1.ReasonWithinBounds)
	})
	waitReplicas(t, ns, "up-blue", 3)
	eventually(t, 20*time.Second, "ScaledUp event", func() error {
		return event(ms, autoscale.ReasonScaledUp, "2 -> 3 replicas: gpuUtilization 95 > target 70")
	})
	if got := getMS(t, ms); got.Status.Replicas != 3 {
		t.Errorf("status.replicas %d, want 3", got.Status.Replicas)
	}

	// While the third pod loads its model, the two Ready pods' load is what it will take over:
	// no cascade to 5 on the same 95%.
	holds(t, 2*time.Second, ms, 3, nil)
}

func TestScalesDownOnlyAfterTheStabilizationWindow(t *testing.T) {
	t.Parallel()
	const window = 3 * time.Second
	ns := newNamespace(t)
	ctx := context.Background()
	node := gpuNode(t, ns, 8)
	load := newGPULoad(t, ns)
	ms := newModelServer(ns, "down", onPool(ns), withReplicas(3), withAutoscaling(1, 5, 70, scaleDownWindow(window)))
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, ns, "down-blue", 3)

	// Given three pods on target.
	pods := runPods(t, ms, v1alpha1.Blue, 3, node)
	load.set(pods, 70)
	eventually(t, 30*time.Second, "on target at 3", func() error {
		a, err := autoscaling(getMS(t, ms))
		if err != nil {
			return err
		}
		if a.DesiredReplicas != 3 {
			return fmt.Errorf("desired %d", a.DesiredReplicas)
		}
		return proposal(a, "70", "70", 3)
	})

	// When utilization drops to 20%, the metric asks for ceil(3 * 20/70) = 1 at once...
	load.setValue(20)
	var lastHigh time.Time // newest recommendation of 3 seen in status
	heldSeen := false
	eventually(t, 30*time.Second, "scaled down to 1", func() error {
		a, err := autoscaling(getMS(t, ms))
		if err != nil {
			return err
		}
		for _, r := range a.Recommendations {
			if r.Replicas == 3 && r.At.After(lastHigh) {
				lastHigh = r.At.Time
			}
		}
		if a.DesiredReplicas == 3 && proposal(a, "20", "70", 1) == nil {
			heldSeen = true
		}
		if a.DesiredReplicas != 1 {
			return fmt.Errorf("desired %d", a.DesiredReplicas)
		}
		if a.LastScaleReason != "3 -> 1: gpuUtilization 20 < target 70" {
			return fmt.Errorf("reason %q", a.LastScaleReason)
		}
		return nil
	})
	// ...but the count holds until the last recommendation of 3 has left the window.
	if !heldSeen {
		t.Errorf("the scale-down was never held: no status with the proposal of 1 and 3 replicas desired")
	}
	a := getMS(t, ms).Status.Autoscaling
	if lastHigh.IsZero() {
		t.Fatalf("no recommendation of 3 was ever recorded")
	}
	if held := a.LastScaleTime.Sub(lastHigh); held < window {
		t.Errorf("scaled down %s after the last recommendation of 3, before the %s window", held, window)
	}
	waitReplicas(t, ns, "down-blue", 1)
	eventually(t, 20*time.Second, "ScaledDown event", func() error {
		return event(ms, autoscale.ReasonScaledDown, "3 -> 1 replicas: gpuUtilization 20 < target 70")
	})
}

// Not parallel: Prometheus going down fails the grouped signal queries of every ModelServer.
func TestHoldsReplicasWhilePrometheusIsDownOrEmptyOrPartial(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	node := gpuNode(t, ns, 8)
	load := newGPULoad(t, ns)
	ms := newModelServer(ns, "outage", onPool(ns), withReplicas(2), withAutoscaling(1, 5, 70, scaleDownWindow(0)))
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, ns, "outage-blue", 2)
	pods := runPods(t, ms, v1alpha1.Blue, 2, node)
	load.set(pods, 70)
	eventually(t, 30*time.Second, "on target with metrics", func() error {
		got := getMS(t, ms)
		a, err := autoscaling(got)
		if err != nil {
			return err
		}
		if err := proposal(a, "70", "70", 2); err != nil {
			return err
		}
		return conditionIs(got, v1alpha1.ConditionMetricsAvailable, metav1.ConditionTrue, v1alpha1.ReasonMetricsOK)
	})

	// A partial answer (a store of a Thanos Querier did not answer) of low utilization is no
	// data: the count holds, and MetricsAvailable names the warning.
	prometheus.setGroupedPartial(true)
	t.Cleanup(func() { prometheus.setGroupedPartial(false) })
	load.set(pods, 20)
	eventually(t, 30*time.Second, "MetricsAvailable False on a partial answer", func() error {
		return conditionIs(getMS(t, ms), v1alpha1.ConditionMetricsAvailable, metav1.ConditionFalse, v1alpha1.ReasonMetricsUnavailable,
			"no metric has data", "partial response", "holding 2 replicas")
	})
	holds(t, 4*scaleInterval, ms, 2, func(got *v1alpha1.ModelServer) error {
		if a := got.Status.Autoscaling; len(a.Proposals) != 1 || a.Proposals[0].Replicas != nil {
			return fmt.Errorf("a proposal on a partial answer: %+v", a.Proposals)
		}
		return nil
	})
	load.set(pods, 70) // on target again before the warning goes, so the count stays at 2
	prometheus.setGroupedPartial(false)

	// Prometheus answers 503: no metric, the count holds even with no scale-down window.
	prometheus.setGroupedDown(true)
	t.Cleanup(func() { prometheus.setGroupedDown(false) })
	noProposal := func(got *v1alpha1.ModelServer) error {
		if a := got.Status.Autoscaling; len(a.Proposals) != 1 || a.Proposals[0].Replicas != nil {
			return fmt.Errorf("a proposal without data: %+v", a.Proposals)
		}
		return nil
	}
	eventually(t, 30*time.Second, "MetricsAvailable False while Prometheus is down", func() error {
		got := getMS(t, ms)
		if err := conditionIs(got, v1alpha1.ConditionMetricsAvailable, metav1.ConditionFalse, v1alpha1.ReasonMetricsUnavailable,
			"no metric has data", "gpuUtilization", "test Prometheus is down", "holding 2 replicas"); err != nil {
			return err
		}
		return noProposal(got)
	})
	holds(t, 4*scaleInterval, ms, 2, noProposal)

	// Prometheus is back but has no series for the pods (exporter gone): still held.
	load.set(nil, 0)
	prometheus.setGroupedDown(false)
	eventually(t, 30*time.Second, "MetricsAvailable False on an empty answer", func() error {
		return conditionIs(getMS(t, ms), v1alpha1.ConditionMetricsAvailable, metav1.ConditionFalse, v1alpha1.ReasonMetricsUnavailable,
			"no series for any of 2 Ready pods", "holding 2 replicas")
	})
	holds(t, 4*scaleInterval, ms, 2, noProposal)

	// Data returns, low: with no window the count follows at once.
	load.set(pods, 20)
	eventually(t, 30*time.Second, "scaled down once data returns", func() error {
		got := getMS(t, ms)
		a, err := autoscaling(got)
		if err != nil {
			return err
		}
		if a.DesiredReplicas != 1 || a.LastScaleReason != "2 -> 1: gpuUtilization 20 < target 70" {
			return fmt.Errorf("desired %d reason %q", a.DesiredReplicas, a.LastScaleReason)
		}
		return conditionIs(got, v1alpha1.ConditionMetricsAvailable, metav1.ConditionTrue, v1alpha1.ReasonMetricsOK)
	})
	waitReplicas(t, ns, "outage-blue", 1)
}

func TestCapsScaleUpToTheGPUsLeft(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		gpus    int64 // allocatable on the pool's node
		quota   int64 // requests.nvidia.com/gpu hard; 0 for no quota
		reason  string
		message []string
	}{
		{
			name: "the namespace GPU quota leaves room for one more replica", gpus: 8, quota: 3,
			reason:  v1alpha1.ReasonGPUQuotaLimited,
			message: []string{"capped at 3 replicas", "quota gpus (requests.nvidia.com/gpu)"},
		},
		{
			name: "the matching nodes have one free GPU", gpus: 3,
			reason:  v1alpha1.ReasonGPUCapacityLimited,
			message: []string{"capped at 3 replicas", "free on matching nodes"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(t)
			ctx := context.Background()
			node := gpuNode(t, ns, tt.gpus)
			load := newGPULoad(t, ns)
			name := fmt.Sprintf("cap%d", i)
			// 100% against 50% asks for 4 replicas of one GPU each.
			ms := newModelServer(ns, name, onPool(ns), withReplicas(2), withAutoscaling(1, 6, 50))
			if err := k8s.Create(ctx, ms); err != nil {
				t.Fatal(err)
			}
			waitReplicas(t, ns, name+"-blue", 2)
			pods := runPods(t, ms, v1alpha1.Blue, 2, node)
			if tt.quota > 0 {
				// Playing the quota controller: the two running pods use 2 GPUs.
				gpuQuota(t, ns, tt.quota, 2)
			}
			load.set(pods, 100)

			// The first step is capped at what fits: one more replica, with the numbers.
			eventually(t, 30*time.Second, "capped at 3", func() error {
				got := getMS(t, ms)
				a, err := autoscaling(got)
				if err != nil {
					return err
				}
				if a.DesiredReplicas != 3 {
					return fmt.Errorf("desired %d; %s", a.DesiredReplicas, describe(got))
				}
				if !strings.HasPrefix(a.LastScaleReason, "2 -> 3: gpuUtilization 100 > target 50; capped at 3 replicas: needs 2 GPUs for 2 more replicas, 1 free") {
					return fmt.Errorf("reason %q", a.LastScaleReason)
				}
				return conditionIs(got, v1alpha1.ConditionScalingLimited, metav1.ConditionTrue, tt.reason, tt.message...)
			})
			waitReplicas(t, ns, name+"-blue", 3)
			// The metric still asks for 4; the GPUs do not allow it.
			holds(t, 4*scaleInterval, ms, 3, func(got *v1alpha1.ModelServer) error {
				return conditionIs(got, v1alpha1.ConditionScalingLimited, metav1.ConditionTrue, tt.reason, tt.message...)
			})
		})
	}
}

func TestReportsAConflictingHorizontalPodAutoscaler(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	load := newGPULoad(t, ns)
	ms := newModelServer(ns, "fight", withReplicas(2), withAutoscaling(1, 5, 70))
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	pods := runPods(t, ms, v1alpha1.Blue, 2, "")
	load.set(pods, 70)
	eventually(t, 30*time.Second, "within bounds", func() error {
		return conditionIs(getMS(t, ms), v1alpha1.ConditionScalingLimited, metav1.ConditionFalse, v1alpha1.ReasonWithinBounds)
	})

	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy-hpa"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "fight-blue"},
			MinReplicas:    ptr.To(int32(1)), MaxReplicas: 4,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(80))},
			}}},
		},
	}
	if err := k8s.Create(ctx, hpa); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "ScalingLimited names the HPA", func() error {
		return conditionIs(getMS(t, ms), v1alpha1.ConditionScalingLimited, metav1.ConditionTrue, v1alpha1.ReasonConflictingAutoscale, "HorizontalPodAutoscaler/legacy-hpa")
	})

	// Removing it clears the condition.
	if err := k8s.Delete(ctx, hpa); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "ScalingLimited cleared", func() error {
		return conditionIs(getMS(t, ms), v1alpha1.ConditionScalingLimited, metav1.ConditionFalse, v1alpha1.ReasonWithinBounds)
	})
}

func TestDuringARolloutTheAutoscaledTotalSizesBothColors(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	node := gpuNode(t, ns, 8)
	load := newGPULoad(t, ns)
	ms := newModelServer(ns, "split", onPool(ns), withReplicas(2), withAutoscaling(1, 6, 70), func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Steps = []int32{50, 100}
	})
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	pods := runPods(t, ms, v1alpha1.Blue, 2, node)
	load.set(pods, 70)
	eventually(t, 30*time.Second, "blue Healthy at 2", func() error {
		got := getMS(t, ms)
		if got.Status.Phase != v1alpha1.PhaseHealthy {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		a, err := autoscaling(got)
		if err != nil {
			return err
		}
		return proposal(a, "70", "70", 2)
	})

	// A new image starts a rollout: green is sized to carry its first weight, 50% of 2, at a
	// stable pod's load: as many pods as blue (the node has room).
	updateMS(t, ms, func(got *v1alpha1.ModelServer) {
		got.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:v0.11.0"
	})
	waitReplicas(t, ns, "split-green", 2)
	if n := deploymentReplicas(t, ns, "split-blue"); n != 2 {
		t.Fatalf("stable at %d replicas during the rollout, want 2", n)
	}

	// The stable pods get busy: the total goes to 3. Stable keeps the whole total (it must be
	// able to take all traffic back), the candidate is sized to carry 50% of it at a stable
	// pod's load.
	load.setValue(95)
	eventually(t, 30*time.Second, "total 3 split over both colors", func() error {
		got := getMS(t, ms)
		a, err := autoscaling(got)
		if err != nil {
			return err
		}
		if a.DesiredReplicas != 3 || a.LastScaleReason != "2 -> 3: gpuUtilization 95 > target 70" {
			return fmt.Errorf("desired %d reason %q; %s", a.DesiredReplicas, a.LastScaleReason, describe(got))
		}
		if s, c := got.Status.Stable, got.Status.Candidate; s == nil || c == nil || s.Color != v1alpha1.Blue || s.Replicas != 3 || c.Color != v1alpha1.Green || c.Replicas != 3 {
			return fmt.Errorf("stable %+v candidate %+v", s, c)
		}
		return nil
	})
	waitReplicas(t, ns, "split-blue", 3)
	waitReplicas(t, ns, "split-green", 3)
}

func TestDuringARolloutTheGPUCapCountsTheCandidatePods(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	node := gpuNode(t, ns, 4)
	load := newGPULoad(t, ns)
	ms := newModelServer(ns, "tight", onPool(ns), withReplicas(2), withAutoscaling(1, 6, 70), func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Steps = []int32{50, 100}
	})
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	pods := runPods(t, ms, v1alpha1.Blue, 2, node)
	load.set(pods, 70)
	eventually(t, 30*time.Second, "blue Healthy at 2", func() error {
		if got := getMS(t, ms); got.Status.Phase != v1alpha1.PhaseHealthy {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		return nil
	})
	updateMS(t, ms, func(got *v1alpha1.ModelServer) {
		got.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:v0.11.0"
	})
	// The candidate is sized to carry 50% at a stable pod's load: 2 pods, which fit beside the
	// stable color's 2 on the node's 4 GPUs.
	waitReplicas(t, ns, "tight-green", 2)
	// The candidate's pods are on the node, loading their model: the 4 GPUs are taken.
	startPods(t, ms, v1alpha1.Green, 2, node)

	// A total of 3 would run 3 stable pods beside candidate pods for 50% of 3: more GPUs than
	// the node has, none free. The total stays at 2 and the cap says so.
	load.setValue(95)
	eventually(t, 30*time.Second, "capped at 2", func() error {
		got := getMS(t, ms)
		a, err := autoscaling(got)
		if err != nil {
			return err
		}
		if err := proposal(a, "95", "70", 3); err != nil {
			return err
		}
		return conditionIs(got, v1alpha1.ConditionScalingLimited, metav1.ConditionTrue, v1alpha1.ReasonGPUCapacityLimited,
			"capped at 2 replicas", "needs 2 GPUs for 2 more replicas, 0 free on matching nodes")
	})
	holds(t, 4*scaleInterval, ms, 2, func(*v1alpha1.ModelServer) error {
		if n := deploymentReplicas(t, ns, "tight-green"); n != 2 {
			return fmt.Errorf("candidate at %d replicas, want 2", n)
		}
		return nil
	})
}
