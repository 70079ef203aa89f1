package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/rollout"
	"github.com/modelship/modelship/internal/routing"
	"github.com/modelship/modelship/internal/warmup"
	"github.com/modelship/modelship/internal/workload"
)

// Warm-up, with spec.rollout.warmup set: each color's pods carry the readiness gate
// v1alpha1.PodConditionWarm (see workload.Deployment), so a pod is Ready, and gets traffic from
// its color's Service, only once the controller has set that condition True. A pass probes the
// pods of both colors whose containers are ready (ContainersReady: Ready waits on the gate) and
// that have not passed yet, and opens the gate of each pod that passed. A Deployment's
// readyReplicas then counts warm pods only: the rollout's Ready counts mean warm.
//
// Probes run off the reconcile workers, as jobs do, and their outcome is kept per pod (see
// warmth): a pod that passed is not probed again, and a pass whose probes are still running
// counts as warm the pods that passed before, so a slow warm-up endpoint never makes a warm
// candidate look cold every other pass.

// maxConcurrentProbes bounds the warm-up probes of one pass that run at once.
const maxConcurrentProbes = 8

// observeWarmup probes and gates both colors' pods and sets each color's Warm and WarmPods
// (with spec.rollout.warmup set): the pods of the Deployment's revision whose containers are
// ready, all warm (and at least one), and how many are. cold is true when a pod whose
// containers are ready has not passed yet: the caller looks again after
// rollout.WarmupPollInterval, as nothing else may (a stable color's new pod).
func (r *ModelServerReconciler) observeWarmup(ctx context.Context, ms *v1alpha1.ModelServer, colors map[v1alpha1.Color]rollout.ColorObservation) (cold bool, err error) {
	key := client.ObjectKeyFromObject(ms)
	deps := map[v1alpha1.Color]*appsv1.Deployment{}
	for _, c := range routing.Colors {
		if !colors[c].Exists {
			continue
		}
		d := &appsv1.Deployment{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: ms.DeploymentName(c)}, d); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("getting Deployment %s: %w", ms.DeploymentName(c), err)
		}
		switch {
		case !metav1.IsControlledBy(d, ms):
			if ms.Spec.Rollout.Warmup != nil {
				co := colors[c]
				co.Warm, co.WarmPods = false, 0 // another owner's pods are never probed
				colors[c] = co
			}
		case ms.Spec.Rollout.Warmup != nil || workload.WarmGated(&d.Spec.Template.Spec):
			// (A Deployment made without the gate while warm-up is off has nothing to probe.)
			deps[c] = d
		}
	}
	if len(deps) == 0 {
		r.warmups.forget(key)
		return false, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, r.podsOf(ms, client.MatchingLabels(ms.SelectorLabels()))...); err != nil {
		return false, fmt.Errorf("listing pods: %w", err)
	}
	live := map[types.UID]bool{}
	for i := range pods.Items {
		live[pods.Items[i].UID] = true
	}
	r.warmups.prune(key, live)
	for _, c := range routing.Colors {
		d := deps[c]
		if d == nil {
			continue
		}
		var own []corev1.Pod
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
				p.Labels[v1alpha1.LabelColor] != string(c) {
				continue
			}
			owned, err := r.podOwnedBy(ctx, p, d)
			if err != nil {
				return false, err
			}
			if !owned {
				// Labels are not ownership: a pod anyone could create is never probed.
				ctrl.LoggerFrom(ctx).V(1).Info("Not probing a pod that the color's Deployment does not own", "Pod", klog.KObj(p), "Deployment", klog.KObj(d))
				continue
			}
			own = append(own, *p)
		}
		if ms.Spec.Rollout.Warmup == nil {
			if err := r.openGates(ctx, key, own); err != nil {
				return false, err
			}
			continue
		}
		warm, n, c0, err := r.warmColor(ctx, ms, d, own)
		if err != nil {
			return false, err
		}
		co := colors[c]
		co.Warm, co.WarmPods = warm, n
		colors[c] = co
		cold = cold || c0
	}
	return cold, nil
}

// warmColor probes the pods of d (own) that need it, opens the gate of those that passed and
// closes it on those whose containers stopped being ready; it returns whether all the pods of
// d's revision whose containers are ready are warm, how many are, and whether any is not.
func (r *ModelServerReconciler) warmColor(ctx context.Context, ms *v1alpha1.ModelServer, d *appsv1.Deployment, own []corev1.Pod) (bool, int32, bool, error) {
	w := ms.Spec.Rollout.Warmup
	port := workload.DeploymentPort(d, ms.Spec.Port) // the port the color's pods listen on
	if w.Port != nil {
		port = *w.Port
	}
	var targets, started []corev1.Pod
	for i := range own {
		p := &own[i]
		if !podConditionTrue(p, corev1.ContainersReady) {
			// A restarted container reloads its model: it is checked again once ready.
			r.warmups.drop(p.UID)
			if workload.WarmGated(&p.Spec) && podConditionTrue(p, v1alpha1.PodConditionWarm) {
				if err := r.setWarmGate(ctx, p, corev1.ConditionFalse, v1alpha1.ReasonContainersNotReady, "the containers are not ready: the warm-up check runs again once they are"); err != nil {
					return false, 0, false, err
				}
			}
			continue
		}
		started = append(started, *p)
		if !podConditionTrue(p, v1alpha1.PodConditionWarm) && !r.warmups.passed(p.UID) {
			targets = append(targets, *p)
		}
	}
	prober, log := r.Prober, ctrl.LoggerFrom(ctx)
	passed := r.warmups.check(ctx, client.ObjectKeyFromObject(ms), targets, func(ctx context.Context, p *corev1.Pod) error {
		err := prober.Probe(ctx, p, port, w.Path)
		if err != nil {
			log.V(1).Info("Pod not warm yet", "Pod", klog.KObj(p), "reason", err.Error())
		}
		return err
	})
	rev := d.Labels[v1alpha1.LabelRevision]
	var ready, n int32
	cold := false
	for i := range started {
		p := &started[i]
		gate := podConditionTrue(p, v1alpha1.PodConditionWarm)
		warm := gate || passed[p.UID] || r.warmups.passed(p.UID)
		if warm && !gate && workload.WarmGated(&p.Spec) && !r.warmups.opened(p.UID) {
			if err := r.setWarmGate(ctx, p, corev1.ConditionTrue, v1alpha1.ReasonWarmupPassed, fmt.Sprintf("GET %s on port %d answered 2xx", w.Path, port)); err != nil {
				return false, 0, false, err
			}
			r.warmups.markOpened(client.ObjectKeyFromObject(ms), p.UID)
		}
		cold = cold || !warm
		if p.Labels[v1alpha1.LabelRevision] != rev {
			continue // a pod of the Deployment's previous template, going away
		}
		ready++
		if warm {
			n++
		}
	}
	return ready > 0 && n == ready, n, cold, nil
}

// openGates sets the warm-up condition of gated pods True when no warm-up is asked any more.
func (r *ModelServerReconciler) openGates(ctx context.Context, key types.NamespacedName, pods []corev1.Pod) error {
	for i := range pods {
		p := &pods[i]
		if workload.WarmGated(&p.Spec) && !podConditionTrue(p, v1alpha1.PodConditionWarm) && !r.warmups.opened(p.UID) {
			if err := r.setWarmGate(ctx, p, corev1.ConditionTrue, v1alpha1.ReasonWarmupNotAsked, "spec.rollout.warmup is not set"); err != nil {
				return err
			}
			r.warmups.markOpened(key, p.UID)
		}
	}
	return nil
}

// setWarmGate sets the pod's warm-up condition (a strategic merge patch of its status: the
// kubelet's own conditions are left alone). A pod that is gone needs none.
func (r *ModelServerReconciler) setWarmGate(ctx context.Context, p *corev1.Pod, status corev1.ConditionStatus, reason, msg string) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": v1alpha1.PodConditionWarm, "status": status, "reason": reason, "message": msg,
		"lastTransitionTime": metav1.NewTime(r.Now()),
	}}}})
	if err != nil {
		return fmt.Errorf("warm-up condition of pod %s: %w", p.Name, err)
	}
	if err := r.Status().Patch(ctx, p.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("setting the warm-up condition of pod %s to %s: %w", p.Name, status, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Set the warm-up gate", "Pod", klog.KObj(p), "status", status, "reason", reason)
	return nil
}

// warmGate says whether the Deployment applied for color c at revision rev carries the warm-up
// readiness gate: as spec.rollout.warmup asks for a new Deployment or a new revision, and as it
// is for one that already runs rev, so that turning warm-up on or off (or upgrading the
// controller) never replaces running pods: the change comes with the next revision.
func (r *ModelServerReconciler) warmGate(ctx context.Context, ms *v1alpha1.ModelServer, o rollout.ColorObservation, c v1alpha1.Color, rev string) (bool, error) {
	want := ms.Spec.Rollout.Warmup != nil
	if !o.Exists || o.Revision != rev {
		return want, nil
	}
	d := &appsv1.Deployment{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: ms.DeploymentName(c)}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return want, nil
		}
		return false, fmt.Errorf("getting Deployment %s: %w", ms.DeploymentName(c), err)
	}
	return workload.WarmGated(&d.Spec.Template.Spec), nil
}

// probeAll probes pods, up to maxConcurrentProbes at once, and says which passed.
func probeAll(ctx context.Context, probe func(context.Context, *corev1.Pod) error, pods []corev1.Pod) []bool {
	passed := make([]bool, len(pods))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxConcurrentProbes)
	for i := range pods {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			passed[i] = probe(ctx, &pods[i]) == nil
		})
	}
	wg.Wait()
	return passed
}

// podOwnedBy reports whether the pod is controlled by a ReplicaSet that d controls (both read
// from the cache).
func (r *ModelServerReconciler) podOwnedBy(ctx context.Context, p *corev1.Pod, d *appsv1.Deployment) (bool, error) {
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return false, nil
	}
	rs := &appsv1.ReplicaSet{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, rs); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("getting ReplicaSet %s of pod %s: %w", ref.Name, p.Name, err)
	}
	return warmup.OwnedBy(p, rs, d), nil
}

func podConditionTrue(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// warmth remembers, per pod, the outcome of its warm-up probes and runs them in the background:
// a pass starts probes of the pods that have neither passed nor a probe in flight, waits for
// them up to wait (a healthy endpoint answers within it, and the pass goes on with the result
// as if the probes were inline), and reads what is known. Probes that end after their pass gave
// up waiting record their outcome for the next pass and enqueue the ModelServer (wake) when a
// pod passed. Entries go with their pods (prune) and ModelServers (forget). A nil *warmth
// probes inline and remembers nothing (the tests that drive Reconcile by hand).
type warmth struct {
	base    context.Context // probes outlive the pass that started them, not the manager
	wait    time.Duration
	timeout time.Duration
	wake    func(types.NamespacedName)

	mu   sync.Mutex
	pods map[types.UID]*podWarmth
}

type podWarmth struct {
	owner   types.NamespacedName // the ModelServer
	passed  bool
	probing bool
	opened  bool // this process set the pod's warm-up condition True
}

// probeBatch is the probes one pass started.
type probeBatch struct {
	done    chan struct{}
	waiting bool // the pass that started it still waits: it reads the outcome, no wake needed
}

func newWarmth(base context.Context, wait, timeout time.Duration, wake func(types.NamespacedName)) *warmth {
	if timeout <= 0 {
		timeout = DefaultJobTimeout
	}
	return &warmth{base: base, wait: max(wait, 0), timeout: timeout, wake: wake, pods: map[types.UID]*podWarmth{}}
}

// check returns which of pods passed: before, or in probes started now that end within the wait.
func (w *warmth) check(ctx context.Context, key types.NamespacedName, pods []corev1.Pod, probe func(context.Context, *corev1.Pod) error) map[types.UID]bool {
	out := map[types.UID]bool{}
	if w == nil {
		for i, ok := range probeAll(ctx, probe, pods) {
			if ok {
				out[pods[i].UID] = true
			}
		}
		return out
	}
	w.mu.Lock()
	var start []corev1.Pod
	var entries []*podWarmth
	for i := range pods {
		e := w.pods[pods[i].UID]
		if e == nil {
			e = &podWarmth{owner: key}
			w.pods[pods[i].UID] = e
		}
		switch {
		case e.passed:
			out[pods[i].UID] = true
		case !e.probing:
			e.probing = true
			start, entries = append(start, pods[i]), append(entries, e)
		}
	}
	if len(start) == 0 {
		w.mu.Unlock()
		return out
	}
	b := &probeBatch{done: make(chan struct{}), waiting: w.wait > 0}
	w.mu.Unlock()
	go w.run(key, b, start, entries, probe)

	if b.waiting {
		t := time.NewTimer(w.wait)
		defer t.Stop()
		select {
		case <-b.done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b.waiting = false
	for i, e := range entries {
		if e.passed {
			out[start[i].UID] = true
		}
	}
	return out
}

func (w *warmth) run(key types.NamespacedName, b *probeBatch, pods []corev1.Pod, entries []*podWarmth, probe func(context.Context, *corev1.Pod) error) {
	ctx, cancel := context.WithTimeout(w.base, w.timeout)
	defer cancel()
	passed := probeAll(ctx, probe, pods)
	w.mu.Lock()
	news := false
	for i, e := range entries {
		e.probing = false
		if passed[i] {
			e.passed, news = true, true
		}
	}
	unclaimed := !b.waiting
	w.mu.Unlock()
	close(b.done)
	// A pod that passed changes what the ModelServer sees: wake a pass unless the one that
	// started the probes reads it. A failed probe changes nothing; the next pass probes again.
	if news && unclaimed && w.wake != nil {
		w.wake(key)
	}
}

// passed reports whether the pod passed its warm-up check.
func (w *warmth) passed(uid types.UID) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.pods[uid]
	return e != nil && e.passed
}

// opened reports whether this process set the pod's warm-up condition True (the cache may not
// show it yet).
func (w *warmth) opened(uid types.UID) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.pods[uid]
	return e != nil && e.opened
}

func (w *warmth) markOpened(key types.NamespacedName, uid types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.pods[uid]
	if e == nil {
		e = &podWarmth{owner: key}
		w.pods[uid] = e
	}
	e.opened = true
}

// drop forgets a pod's outcome (its containers restarted); a probe in flight for it records
// nothing.
func (w *warmth) drop(uid types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pods, uid)
}

// prune forgets the pods of the ModelServer key that are not in live.
func (w *warmth) prune(key types.NamespacedName, live map[types.UID]bool) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, e := range w.pods {
		if e.owner == key && !live[uid] {
			delete(w.pods, uid)
		}
	}
}

// forget drops a ModelServer's pods (it was deleted, or has nothing to probe).
func (w *warmth) forget(key types.NamespacedName) {
	w.prune(key, nil)
}
