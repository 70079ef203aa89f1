package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// The moves an SRE relies on, through the real controller: an instant rollback to the warm
// previous revision, a manual gate whose candidate is still judged, and an abort that reaches
// the route while a webhook refuses every Deployment write.

func TestRollbackToTheWarmPreviousRevisionMovesAllTrafficAtOnce(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "revert")
	tr, v1 := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	// Keep the previous color warm for the rest of the test.
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.ScaleDownDelay = v1alpha1.Duration{Duration: 10 * time.Minute}
	})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	waitPromoted(t, ms, v1alpha1.Green, v2)
	tr.waitWeights(t, "0/100")
	blueBefore, err := getDeployment(ns, ms.DeploymentName(v1alpha1.Blue))
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(blueBefore.Spec.Replicas, 0) != 2 {
		t.Fatalf("blue has %d replicas after the promotion, want 2 kept warm", ptr.Deref(blueBefore.Spec.Replicas, 0))
	}

	// A revert in Git: the spec goes back to v1, which blue still runs.
	setImage(t, ms, imageV1)
	tr.waitWeights(t, "100/0")
	got := waitPromotedBack(t, ms, v1alpha1.Blue, v1)
	if h := got.Status.History; len(h) == 0 || h[0].Revision != v2 || h[0].Outcome != v1alpha1.OutcomeRolledBack {
		t.Errorf("history %+v, want %s RolledBack on top", h, v2)
	}
	if h := tr.history(); strings.Join(h, " ") != "100/0 80/20 50/50 0/100 100/0" {
		t.Errorf("route weights went %v; the rollback should move all traffic at once", h)
	}
	// No pod of v1 was restarted or created: blue's Deployment was not written.
	blueAfter, err := getDeployment(ns, ms.DeploymentName(v1alpha1.Blue))
	if err != nil {
		t.Fatal(err)
	}
	if blueAfter.Generation != blueBefore.Generation || ptr.Deref(blueAfter.Spec.Replicas, 0) != 2 {
		t.Errorf("blue went from generation %d, %d replicas to %d, %d; want it untouched", blueBefore.Generation, ptr.Deref(blueBefore.Spec.Replicas, 0), blueAfter.Generation, ptr.Deref(blueAfter.Spec.Replicas, 0))
	}
	// The abandoned revision keeps its pods for inspection.
	green, err := getDeployment(ns, ms.DeploymentName(v1alpha1.Green))
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(green.Spec.Replicas, 0) != 2 {
		t.Errorf("green has %d replicas, want its 2 kept for inspection", ptr.Deref(green.Spec.Replicas, 0))
	}
	waitEvent(t, ms, corev1.EventTypeNormal, "RevertedToWarm")
	if n := countEvents(t, ms, corev1.EventTypeNormal, "RolloutStarted"); n != 1 {
		t.Errorf("%d RolloutStarted events, want 1 (v2's only)", n)
	}
}

// waitPromotedBack waits until rev serves all traffic from color, Healthy and Ready.
func waitPromotedBack(t *testing.T, ms *v1alpha1.ModelServer, color v1alpha1.Color, rev string) *v1alpha1.ModelServer {
	t.Helper()
	var got *v1alpha1.ModelServer
	eventually(t, rolloutTimeout, "revision "+rev+" back on "+string(color), func() error {
		got = getMS(t, ms)
		st := got.Status
		if st.Phase != v1alpha1.PhaseHealthy || st.Stable == nil || st.Stable.Color != color || st.Stable.Revision != rev || st.Weights.Stable != 100 {
			return fmt.Errorf("phase %s stable %+v weights %+v", st.Phase, st.Stable, st.Weights)
		}
		if c := condition(got, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	return got
}

func TestAManualGateWhoseCandidateDegradesIsRolledBack(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "gate", func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.AutoPromote = ptr.To(false) })
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)

	v2 := releaseToTheGate(t, ms, tr, imageV2)

	// Overnight, the candidate goes bad while it waits for a human.
	prometheus.set(ns, vllmAnswers(ms.Name, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: slowBuild}))
	eventually(t, rolloutTimeout, "the waiting candidate rolled back", func() error {
		st := getMS(t, ms).Status
		if st.Phase != v1alpha1.PhaseRolledBack || len(st.History) == 0 || st.History[0].Revision != v2 || st.History[0].Outcome != v1alpha1.OutcomeRolledBack {
			return fmt.Errorf("phase %s history %+v", st.Phase, st.History)
		}
		if !strings.Contains(st.History[0].Reason, "while awaiting promotion") {
			return fmt.Errorf("reason %q does not say it was awaiting promotion", st.History[0].Reason)
		}
		return nil
	})
	tr.waitWeights(t, "100/0")
	if e := waitEvent(t, ms, corev1.EventTypeWarning, "RolledBack"); !strings.Contains(e.Note, "while awaiting promotion") {
		t.Errorf("RolledBack event %q should say the rollout was awaiting promotion", e.Note)
	}
}

// refuseDeploymentWrites installs a ValidatingWebhookConfiguration with failurePolicy Fail for
// the namespace's Deployments whose webhook listens nowhere: every create and update of a
// Deployment there is refused, as in a webhook outage.
func refuseDeploymentWrites(t *testing.T, ns string) (restore func()) {
	t.Helper()
	ctx := context.Background()
	wh := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "outage-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "deployments.outage.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(int32(2)),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		}},
	}
	if err := k8s.Create(ctx, wh); err != nil {
		t.Fatalf("creating the webhook: %v", err)
	}
	done := false
	restore = func() {
		if !done {
			done = true
			if err := k8s.Delete(ctx, wh); err != nil {
				t.Errorf("deleting the webhook: %v", err)
			}
		}
	}
	t.Cleanup(restore)
	return restore
}

// halfwayWithDeploymentWritesRefused rolls imageV2 out to 50/50 on a ModelServer held for a
// manual promotion, then refuses every Deployment write in its namespace (a webhook outage)
// and waits until a write is refused. restore ends the outage.
func halfwayWithDeploymentWritesRefused(t *testing.T, name string) (ms *v1alpha1.ModelServer, tr *routeTrace, v2 string, restore func()) {
	t.Helper()
	ns := newNamespace(t)
	ms = newModelServer(ns, name, func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.AutoPromote = ptr.To(false) })
	tr, _ = startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)
	setImage(t, ms, imageV2)
	v2 = waitCandidate(t, ms, imageV2)
	tr.waitWeights(t, "50/50")

	restore = refuseDeploymentWrites(t, ns)
	eventually(t, 20*time.Second, "Deployment writes refused", func() error {
		d, err := getDeployment(ns, ms.DeploymentName(v1alpha1.Blue))
		if err != nil {
			return err
		}
		if err := k8s.Update(context.Background(), d, client.DryRunAll); err == nil {
			return fmt.Errorf("a Deployment update still passes")
		}
		return nil
	})
	return ms, tr, v2, restore
}

func TestAnAbortDuringADeploymentWebhookOutageMovesTrafficBackAtOnce(t *testing.T) {
	t.Parallel()
	ms, tr, v2, restore := halfwayWithDeploymentWritesRefused(t, "outage")

	// The on-call engineer aborts: the candidate's Deployment cannot be written (its last
	// apply is refused on every pass), the route must move all the same.
	abort(t, ms, v2)
	tr.waitWeights(t, "100/0")
	eventually(t, 20*time.Second, "the abort recorded while applies fail", func() error {
		got := getMS(t, ms)
		if got.Status.Phase != v1alpha1.PhaseRolledBack || got.Status.Rollout.RolledBackRevision != v2 {
			return fmt.Errorf("phase %s rolledBack %q", got.Status.Phase, got.Status.Rollout.RolledBackRevision)
		}
		if c := condition(got, v1alpha1.ConditionReconciling); c == nil || c.Reason != v1alpha1.ReasonApplyFailed {
			return fmt.Errorf("Reconciling %+v, want ApplyFailed naming the refused write", c)
		}
		return nil
	})

	// The webhook comes back, and so does the stable color's scaling.
	restore()
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To(int32(3)) })
	eventually(t, 30*time.Second, "blue scaled to 3 after the outage", func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ms.Namespace, Name: ms.DeploymentName(v1alpha1.Blue)}, d); err != nil {
			return err
		}
		if ptr.Deref(d.Spec.Replicas, 0) != 3 {
			return fmt.Errorf("blue has %d replicas", ptr.Deref(d.Spec.Replicas, 0))
		}
		return nil
	})
}

// TestAnAbortDoesNotWaitForAStableScaleUpTheWebhookRefuses: during a Deployment webhook outage
// the on-call engineer raises spec.replicas from 2 to 4 and aborts. The stable color's two Ready
// pods carry only half of the new total, so the aborted candidate keeps the rest while the
// stable color grows; but its scale-up is refused, no pod is coming: status.stable.shortSince
// records it, and DrainRefusedAfter later all traffic is on the stable color.
func TestAnAbortDoesNotWaitForAStableScaleUpTheWebhookRefuses(t *testing.T) {
	t.Parallel()
	ms, tr, v2, _ := halfwayWithDeploymentWritesRefused(t, "refused")
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To(int32(4)) })
	abort(t, ms, v2)
	eventually(t, rolloutTimeout, "all traffic on blue", func() error {
		if got := tr.current(); got != "100/0" {
			st := getMS(t, ms).Status
			return fmt.Errorf("route weights %s; so far %v; status phase %s weights %+v stable %+v candidate %+v conditions %+v", got, tr.history(), st.Phase, st.Weights, st.Stable, st.Candidate, st.Conditions)
		}
		return nil
	})
	got := getMS(t, ms)
	if got.Status.Phase != v1alpha1.PhaseRolledBack || got.Status.Stable == nil || got.Status.Stable.ShortSince == nil {
		t.Fatalf("phase %s stable %+v, want RolledBack with status.stable.shortSince set", got.Status.Phase, got.Status.Stable)
	}
	if d, err := getDeployment(ms.Namespace, ms.DeploymentName(v1alpha1.Blue)); err != nil || ptr.Deref(d.Spec.Replicas, 0) != 2 {
		t.Fatalf("blue Deployment %v (%v), want still 2 replicas: the webhook refused its scale-up", d, err)
	}
}

func TestAnEditTheControllerRefusesNeverFreezesALiveRollout(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "frozen", func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.AutoPromote = ptr.To(false) })
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)
	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	tr.waitWeights(t, "50/50")

	// An edit the controller refuses: a custom analysis query that reads every namespace, under
	// the namespaced query policy.
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Analysis.Metrics = append(ms.Spec.Rollout.Analysis.Metrics, v1alpha1.AnalysisMetric{
			Name: "everyone", Query: `sum(rate(vllm:request_success_total[1m]))`, Max: ptr.To(mustQuantity("1000"))})
	})
	eventually(t, 20*time.Second, "Stalled InvalidSpec", func() error {
		c := condition(getMS(t, ms), v1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, "last valid spec") {
			return fmt.Errorf("Stalled %+v", c)
		}
		return nil
	})

	// The on-call engineer aborts the live rollout: it acts from the last valid spec.
	abort(t, ms, v2)
	tr.waitWeights(t, "100/0")
	eventually(t, 20*time.Second, "aborted, still reporting the refused spec", func() error {
		got := getMS(t, ms)
		if got.Status.Phase != v1alpha1.PhaseRolledBack || got.Status.Rollout.RolledBackRevision != v2 {
			return fmt.Errorf("phase %s rolledBack %q", got.Status.Phase, got.Status.Rollout.RolledBackRevision)
		}
		if c := condition(got, v1alpha1.ConditionStalled); c == nil || c.Reason != v1alpha1.ReasonInvalidSpec {
			return fmt.Errorf("Stalled %+v, want InvalidSpec while the spec is refused", c)
		}
		if got.Status.ObservedGeneration >= got.Generation {
			return fmt.Errorf("observedGeneration %d of %d: the refused generation was not acted on", got.Status.ObservedGeneration, got.Generation)
		}
		return nil
	})
}

// TestAQueryPolicyTightenedAfterARestartNeverFreezesALiveRollout: a spec accepted under
// --query-policy=any is refused once the controller restarts with namespaced; what serves goes
// on from that last valid spec without running its queries, and an abort still acts.
func TestAQueryPolicyTightenedAfterARestartNeverFreezesALiveRollout(t *testing.T) {
	loose := manualReconciler(t, interceptor.Funcs{})
	loose.QueryPolicy = metrics.QueryPolicyAny
	ms := newModelServer(manualNamespace, fmt.Sprintf("policy-%d", time.Now().UnixNano()%1e6), func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "everyone", Query: `sum(rate(vllm:request_success_total[1m]))`, Max: ptr.To(mustQuantity("1000"))}}
	})
	rev := manualRollout(t, loose, ms, 1)
	route, err := getRoute(ms.Namespace, ms.RouteName())
	if err != nil {
		t.Fatal(err)
	}
	if w := weightsOf(route, ms); w != "80/20" {
		t.Fatalf("route %s before the restart, want 80/20", w)
	}

	// The controller restarts with the namespaced policy, and the on-call engineer aborts.
	strict := manualReconciler(t, interceptor.Funcs{})
	strict.QueryPolicy = metrics.QueryPolicyNamespaced
	abort(t, ms, rev)
	pass(t, strict, ms)
	got := getMS(t, ms)
	if got.Status.Phase != v1alpha1.PhaseRolledBack || got.Status.Rollout.RolledBackRevision != rev {
		t.Fatalf("phase %s rolledBack %q: the abort did not act under the tightened policy", got.Status.Phase, got.Status.Rollout.RolledBackRevision)
	}
	if route, err = getRoute(ms.Namespace, ms.RouteName()); err != nil || weightsOf(route, ms) != "100/0" {
		t.Fatalf("route %v (%v), want 100/0 after the abort", weightsOf(route, ms), err)
	}
	c := condition(got, v1alpha1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, "refuses too now") {
		t.Errorf("Stalled %+v, want InvalidSpec saying the last valid spec is refused too and its queries hold", c)
	}
}

// abort asks for an abort of rev, as `kubectl modelship abort` does.
func abort(t *testing.T, ms *v1alpha1.ModelServer, rev string) {
	t.Helper()
	updateMS(t, ms, func(m *v1alpha1.ModelServer) {
		metav1.SetMetaDataAnnotation(&m.ObjectMeta, v1alpha1.AnnotationAbort, rev)
	})
}
