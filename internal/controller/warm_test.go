package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/workload"
)

// ownedPod creates pod name of color c as the ReplicaSet controller would: controlled by a
// ReplicaSet that the color's Deployment controls, from the Deployment's template. Its containers
// are ready; Ready waits on its readiness gates, as the kubelet's would.
func ownedPod(t *testing.T, ms *v1alpha1.ModelServer, c v1alpha1.Color, name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	d, err := getDeployment(ms.Namespace, ms.DeploymentName(c))
	if err != nil {
		t.Fatalf("getting the %s Deployment: %v", c, err)
	}
	rs := &appsv1.ReplicaSet{}
	rsKey := types.NamespacedName{Namespace: ms.Namespace, Name: d.Name + "-" + d.Labels[v1alpha1.LabelRevision]}
	if err := k8s.Get(ctx, rsKey, rs); apierrors.IsNotFound(err) {
		rs = &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: rsKey.Namespace, Name: rsKey.Name, Labels: d.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(0)), Selector: d.Spec.Selector, Template: d.Spec.Template},
		}
		if err := k8s.Create(ctx, rs); err != nil {
			t.Fatalf("creating ReplicaSet: %v", err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ms.Namespace, Name: name, Labels: d.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec: *d.Spec.Template.Spec.DeepCopy(),
	}
	for _, o := range opts {
		o(pod)
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	setContainersReady(t, pod, true)
	return pod
}

// setContainersReady plays the kubelet: ContainersReady as given, Ready when the containers are
// and every readiness gate's condition is True.
func setContainersReady(t *testing.T, pod *corev1.Pod, ready bool) {
	t.Helper()
	eventually(t, 10*time.Second, "set the containers of "+pod.Name+" ready", func() error {
		p := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		status := func(b bool) corev1.ConditionStatus {
			if b {
				return corev1.ConditionTrue
			}
			return corev1.ConditionFalse
		}
		gates := ready
		for _, g := range p.Spec.ReadinessGates {
			gates = gates && warmCondition(p) == corev1.ConditionTrue && g.ConditionType == v1alpha1.PodConditionWarm
		}
		conds := []corev1.PodCondition{{Type: corev1.ContainersReady, Status: status(ready)}, {Type: corev1.PodReady, Status: status(gates)}}
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.ContainersReady && c.Type != corev1.PodReady {
				conds = append(conds, c)
			}
		}
		// An address of the benchmarking range that only a namespace of the project's own
		// routes; the tests' probers are fakes and never dial it.
		p.Status.Phase, p.Status.PodIP, p.Status.Conditions = corev1.PodRunning, "198.18.200.1", conds
		return k8s.Status().Update(context.Background(), p)
	})
}

// warmCondition is the pod's warm-up condition ("" when it has none).
func warmCondition(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.PodConditionWarm {
			return c.Status
		}
	}
	return ""
}

func podWarmCondition(t *testing.T, pod *corev1.Pod) corev1.ConditionStatus {
	t.Helper()
	p := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), p); err != nil {
		t.Fatalf("getting pod %s: %v", pod.Name, err)
	}
	return warmCondition(p)
}

// TestWarmupGatesTrafficOnBothColors: with spec.rollout.warmup set, both colors' pods carry
// the warm-up readiness gate (not spec.template: the revision is the same as without it), and
// a pod whose containers are ready but whose warm-up check fails never gets the condition, so
// it is never Ready and gets no traffic; once its check passes the controller sets it True, on
// the stable color's pods as on the candidate's. A pod whose containers stop being ready has
// its gate closed again: a restart reloads the model.
func TestWarmupGatesTrafficOnBothColors(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{})
	loading := loadingProber{}
	r.Prober = loading
	ms := newModelServer(manualNamespace, fmt.Sprintf("gate-%d", time.Now().UnixNano()%1e6))
	ms.Spec.Rollout.Warmup = &v1alpha1.WarmupSpec{Path: "/v1/models"}
	rev := manualRollout(t, r, ms, 0)

	for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		d, err := getDeployment(manualNamespace, ms.DeploymentName(c))
		if err != nil {
			t.Fatal(err)
		}
		if !workload.WarmGated(&d.Spec.Template.Spec) {
			t.Fatalf("the %s Deployment's pods carry no warm-up gate: %+v", c, d.Spec.Template.Spec.ReadinessGates)
		}
	}
	got := getMS(t, ms)
	if len(got.Spec.Template.Spec.ReadinessGates) != 0 || got.Status.Revision != rev {
		t.Fatalf("the gate reached spec.template (%+v) or the revision changed (%s, want %s)", got.Spec.Template.Spec.ReadinessGates, got.Status.Revision, rev)
	}

	// A new stable pod (as the autoscaler's) and the candidate's pod, both still loading.
	stable := ownedPod(t, ms, v1alpha1.Blue, ms.Name+"-blue-new")
	cand := ownedPod(t, ms, v1alpha1.Green, ms.Name+"-green-1")
	markReady(t, manualNamespace, ms.DeploymentName(v1alpha1.Green))
	for range 3 {
		pass(t, r, ms)
	}
	for _, p := range []*corev1.Pod{stable, cand} {
		if s := podWarmCondition(t, p); s == corev1.ConditionTrue {
			t.Fatalf("pod %s failed its warm-up check but its gate is open", p.Name)
		}
	}
	if got := getMS(t, ms); got.Status.Candidate == nil || got.Status.Candidate.Warm || got.Status.Weights.Candidate != 0 {
		t.Fatalf("a cold candidate counted as warm: candidate %+v weights %+v", got.Status.Candidate, got.Status.Weights)
	}

	loading[stable.Name], loading[cand.Name] = true, true
	pass(t, r, ms)
	for _, p := range []*corev1.Pod{stable, cand} {
		if s := podWarmCondition(t, p); s != corev1.ConditionTrue {
			t.Fatalf("pod %s passed its warm-up check: condition %q, want True", p.Name, s)
		}
	}
	if got := getMS(t, ms); got.Status.Candidate == nil || !got.Status.Candidate.Warm {
		t.Fatalf("a warm candidate counted as cold: %+v", got.Status.Candidate)
	}

	setContainersReady(t, cand, false)
	pass(t, r, ms)
	if s := podWarmCondition(t, cand); s != corev1.ConditionFalse {
		t.Fatalf("the containers of %s stopped being ready: warm-up condition %q, want False", cand.Name, s)
	}
}

// slowProber answers each probe (warm) only when the test releases one; it counts the probes.
type slowProber struct {
	release chan struct{}
	started atomic.Int32
}

func (s *slowProber) Probe(ctx context.Context, _ *corev1.Pod, _ int32, _ string) error {
	s.started.Add(1)
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestASlowWarmupKeepsTheCandidateSized: warm-up probes that take longer than a pass waits for
// them (the background job's wait) never make a warm candidate look cold: a pod that passed is
// not probed again, so status.candidate.sizedSince, once set, stays while the probes would be
// slow, and the step is measured. The outcome is kept per pod for pods without the gate (made
// before it: see warmGate) as for pods whose gate records it.
func TestASlowWarmupKeepsTheCandidateSized(t *testing.T) {
	requireEnv(t)
	t.Run("a pod without the warm-up gate", func(t *testing.T) {
		slowWarmup(t, func(p *corev1.Pod) { p.Spec.ReadinessGates = nil })
	})
	t.Run("a pod with the warm-up gate", func(t *testing.T) {
		slowWarmup(t)
	})
}

func slowWarmup(t *testing.T, opts ...func(*corev1.Pod)) {
	r := manualReconciler(t, interceptor.Funcs{})
	ms := newModelServer(manualNamespace, fmt.Sprintf("slowwarm-%d", time.Now().UnixNano()%1e6))
	ms.Spec.Rollout.Warmup = &v1alpha1.WarmupSpec{Path: "/v1/models"}
	rev := manualRollout(t, r, ms, 0)

	clock := &fakeClock{now: time.Now()}
	r.Now = clock.Now
	prober := &slowProber{release: make(chan struct{})}
	r.Prober = prober
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	woken := make(chan types.NamespacedName, 16)
	r.warmups = newWarmth(ctx, 20*time.Millisecond, time.Minute, func(k types.NamespacedName) { woken <- k })

	pod := ownedPod(t, ms, v1alpha1.Green, ms.Name+"-green-1", opts...)
	gated := workload.WarmGated(&pod.Spec)
	markReady(t, manualNamespace, ms.DeploymentName(v1alpha1.Green))
	pass(t, r, ms)
	if got := getMS(t, ms).Status.Candidate; got == nil || got.Warm || prober.started.Load() != 1 {
		t.Fatalf("while the first probe runs: candidate %+v, %d probes; want cold, 1 probe", got, prober.started.Load())
	}
	prober.release <- struct{}{}
	if k := <-woken; k != client.ObjectKeyFromObject(ms) {
		t.Fatalf("woke %v", k)
	}

	var sized *metav1.Time
	for i := 0; sized == nil; i++ {
		if i == 10 {
			t.Fatalf("the warm candidate was never sized: %+v", getMS(t, ms).Status.Candidate)
		}
		pass(t, r, ms)
		markReady(t, manualNamespace, ms.DeploymentName(v1alpha1.Green))
		sized = getMS(t, ms).Status.Candidate.SizedSince
	}
	if s := podWarmCondition(t, pod); gated && s != corev1.ConditionTrue {
		t.Fatalf("the pod passed: warm-up condition %q, want True", s)
	}

	// Any probe from now on would outlast the pass's wait: the pod is warm, none is needed.
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatalf("no measurement after %d passes over %s: %+v", i, 5*time.Second*time.Duration(i), getMS(t, ms).Status)
		}
		clock.Add(5 * time.Second)
		pass(t, r, ms)
		got := getMS(t, ms)
		c := got.Status.Candidate
		if c == nil || c.Revision != rev {
			t.Fatalf("pass %d: the candidate is gone: phase %s", i, got.Status.Phase)
		}
		if c.SizedSince == nil || !c.SizedSince.Equal(sized) {
			t.Fatalf("pass %d: sizedSince went from %v to %v while the warm-up probes are slow (warm %t, %d probes)", i, sized, c.SizedSince, c.Warm, prober.started.Load())
		}
		if got.Status.Rollout.LastMeasuredAt != nil {
			break
		}
	}
	if n := prober.started.Load(); n != 1 {
		t.Fatalf("a pod that passed was probed again: %d probes, want 1", n)
	}
}
