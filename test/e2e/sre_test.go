//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The moves an SRE relies on: an instant rollback to the warm previous revision, a manual gate
// whose candidate is still judged, and an abort that reaches the Gateway while every Deployment
// write is refused.

// sreReplicas is the size of these stories' ModelServers: small, so that both colors kept at
// once fit beside the other stories.
const sreReplicas = 2

// podsOfRevision returns the UIDs and summed restart counts of a ModelServer's pods of rev.
func podsOfRevision(t *testing.T, ns, name, rev string) (map[string]bool, int32) {
	t.Helper()
	var pods corev1.PodList
	if err := st.Client.List(context.Background(), &pods, client.InNamespace(ns),
		client.MatchingLabels{v1alpha1.LabelModelServer: name, v1alpha1.LabelRevision: rev}); err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	uids := map[string]bool{}
	var restarts int32
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		uids[string(p.UID)] = true
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
	}
	return uids, restarts
}

func storyInstantRollback(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-revert")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(sreReplicas), steps(10*time.Second, 50, 100),
		func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.ScaleDownDelay = v1alpha1.Duration{Duration: 10 * time.Minute}
		})
	given(t, "a %s, the previous color kept warm for 10m after a promotion", describe(ms))
	v0 := create(t, ms, 3*time.Minute)
	old, rev0 := v0.stableColor(), v0.ms.Status.Stable.Revision

	when(t, "%s is rolled out and promoted on %s", imageGood, old.Other())
	rev := setImage(t, ns, ms.Name, imageGood)
	follow(t, ns, ms.Name, 4*time.Minute, "promotion of "+rev, weightsInvariant, func(v view) bool { return v.healthyOn(rev) })
	warm := follow(t, ns, ms.Name, time.Minute, "the previous color kept warm", weightsInvariant, func(v view) bool {
		return v.replicas(old) == sreReplicas && v.ready(old) == sreReplicas
	})
	and(t, "%s still runs %s with %d/%d Ready pods", old, rev0, warm.ready(old), warm.replicas(old))
	before, restartsBefore := podsOfRevision(t, ns, ms.Name, rev0)

	when(t, "the spec goes back to %s (a revert in Git, or `kubectl modelship rollback --to-revision`)", imageV1)
	began := time.Now()
	setImage(t, ns, ms.Name, imageV1)
	var seen []int32 // the old color's route weights, in the order they appeared
	back := follow(t, ns, ms.Name, time.Minute, "all traffic on "+string(old), func(v view) error {
		if err := weightsInvariant(v); err != nil {
			return err
		}
		if n := len(seen); n == 0 || seen[n-1] != v.route[old] {
			seen = append(seen, v.route[old])
		}
		return nil
	}, func(v view) bool { return v.route[old] == 100 })
	took := back.at.Sub(began)
	settled := follow(t, ns, ms.Name, time.Minute, "Healthy on "+rev0, weightsInvariant, func(v view) bool { return v.healthyOn(rev0) })

	then(t, "all traffic is on %s in one move (weights seen %v), after %s", old, seen, secs(took))
	for _, w := range seen {
		if w != 0 && w != 100 {
			t.Errorf("the old color's route weight went through %v: a progressive rollout, not an instant rollback", seen)
			break
		}
	}
	if h := settled.ms.Status.History; len(h) == 0 || h[0].Revision != rev || h[0].Outcome != v1alpha1.OutcomeRolledBack {
		t.Errorf("history %+v, want %s RolledBack on top", h, rev)
	}
	for _, e := range events(t, ns, ms.Name) {
		if e == "StepAdvanced" && settled.ms.Status.Rollout.Step != 0 {
			t.Errorf("a step advanced during the rollback")
		}
	}
	after, restartsAfter := podsOfRevision(t, ns, ms.Name, rev0)
	created := 0
	for uid := range after {
		if !before[uid] {
			created++
		}
	}
	restarted := restartsAfter - restartsBefore
	and(t, "no pod of %s was created (%d) or restarted (%d), and %s keeps its pods for inspection", rev0, created, restarted, old.Other())
	if created != 0 || restarted != 0 {
		t.Errorf("%d pods of %s created and %d restarted, want none", created, rev0, restarted)
	}
	if settled.replicas(old.Other()) != sreReplicas {
		t.Errorf("%s has %d replicas, want its %d kept for inspection", old.Other(), settled.replicas(old.Other()), sreReplicas)
	}
	figure(t, "instant rollback: spec change to 100% on the warm revision", "%dms (polled every %s)", took.Milliseconds(), pollInterval)
	figure(t, "instant rollback: pods of the warm revision restarted or created", "%d", created+int(restarted))
}

// degradingImage is a build that the simulator serves normally for its first 150 s in service,
// then three times slower (degradeProfile): it passes its steps and degrades at the gate.
const (
	degradingImage = "vllm/vllm-openai:v0.11.4-degrades"
	degradeProfile = "revision=v0.11.4-degrades:latency=3.0,after=150"
)

func storyManualGateDegrades(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-gate")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(sreReplicas), steps(10*time.Second, 50, 100),
		func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.AutoPromote = ptr.To(false) })
	given(t, "a %s, promoted only by a person (autoPromote false)", describe(ms))
	v0 := create(t, ms, 3*time.Minute)
	newColor := v0.stableColor().Other()

	when(t, "%s is released: it serves well for 150s, then 3x slower (%s)", degradingImage, degradeProfile)
	rev := setImage(t, ns, ms.Name, degradingImage)
	gate := follow(t, ns, ms.Name, 3*time.Minute, "AwaitingPromotion", weightsInvariant, func(v view) bool {
		return v.phase() == v1alpha1.PhaseAwaitingPromotion
	})
	gated := gate.at
	and(t, "it waits for a person at %d%% with its analysis passing", gate.route[newColor])

	then(t, "nobody promotes it; once it degrades, the analysis that goes on while it waits rolls it back")
	v := follow(t, ns, ms.Name, 5*time.Minute, "rollback of the waiting candidate", func(v view) error {
		if err := weightsInvariant(v); err != nil {
			return err
		}
		if v.phase() == v1alpha1.PhaseHealthy && v.ms.Status.Stable.Revision == rev {
			return fmt.Errorf("the degraded candidate was promoted")
		}
		return nil
	}, func(v view) bool { return v.phase() == v1alpha1.PhaseRolledBack && v.route[newColor] == 0 })
	h := v.ms.Status.History
	if len(h) == 0 || h[0].Revision != rev || h[0].Outcome != v1alpha1.OutcomeRolledBack || !strings.Contains(h[0].Reason, "while awaiting promotion") {
		t.Errorf("history %+v, want %s RolledBack while awaiting promotion", h, rev)
	} else {
		and(t, "the reason: %s", h[0].Reason)
	}
	figure(t, "manual gate: a candidate that degrades while it waits is rolled back", "%s after it began to wait", secs(v.at.Sub(gated)))
}

// refuseDeploymentWrites installs a ValidatingWebhookConfiguration with failurePolicy Fail for
// the namespace's Deployments, whose webhook listens nowhere (a webhook outage). It returns a
// function that removes it.
func refuseDeploymentWrites(t *testing.T, ns string) func() {
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
	if err := st.Client.Create(ctx, wh); err != nil {
		t.Fatalf("creating the webhook: %v", err)
	}
	removed := false
	remove := func() {
		if !removed {
			removed = true
			_ = st.Client.Delete(ctx, wh)
		}
	}
	t.Cleanup(remove)
	return remove
}

func storyAbortDuringWebhookOutage(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-outage")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(sreReplicas), steps(10*time.Second, 50, 100),
		func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.AutoPromote = ptr.To(false) })
	given(t, "a %s", describe(ms))
	v0 := create(t, ms, 3*time.Minute)
	newColor := v0.stableColor().Other()
	rev := setImage(t, ns, ms.Name, imageGood)
	follow(t, ns, ms.Name, 3*time.Minute, "candidate traffic", weightsInvariant, func(v view) bool {
		return v.candidateRevision() == rev && v.route[newColor] > 0
	})

	when(t, "a validating webhook for Deployments (failurePolicy Fail) is down, and the SRE aborts")
	remove := refuseDeploymentWrites(t, ns)
	out, code := plugin(t, ns, time.Minute, "abort", ms.Name)
	if code != 0 {
		t.Fatalf("abort exited %d:\n%s", code, out)
	}
	aborted := time.Now()
	refused := false
	v := follow(t, ns, ms.Name, time.Minute, "all traffic on stable", func(v view) error {
		if c := v.condition(v1alpha1.ConditionReconciling); c != nil && c.Reason == v1alpha1.ReasonApplyFailed {
			refused = true
		}
		return weightsInvariant(v)
	}, func(v view) bool {
		return v.phase() == v1alpha1.PhaseRolledBack && v.route[newColor] == 0
	})
	then(t, "all traffic is back on %s after %s, while Deployment writes are refused (a refused write seen in status: %t)", v.stableColor(), secs(v.at.Sub(aborted)), refused)
	if h := v.ms.Status.History; len(h) == 0 || h[0].Revision != rev || h[0].Outcome != v1alpha1.OutcomeAborted {
		t.Errorf("history %+v, want %s Aborted first", h, rev)
	}
	figure(t, "abort during a Deployment webhook outage to all traffic on stable", "%s", secs(v.at.Sub(aborted)))
	remove()
}
