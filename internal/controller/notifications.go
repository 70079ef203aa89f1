package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/notify"
	"github.com/modelship/modelship/internal/rollout"
)

// Notifications: once a pass's status is written, the rollout events it decided (and a scaling
// limit that started) are queued on the Notifier, which posts them on its own goroutines. A
// transition whose status write failed is decided again by the next pass, with the same ID
// (notify.ForEvent), and is queued once: exactly one message per event and target from the
// controller's point of view.

// notifyDecision queues the notified events of a pass whose status was written.
func (r *ModelServerReconciler) notifyDecision(ms, before *v1alpha1.ModelServer, d rollout.Decision) {
	if r.Notifier == nil {
		return
	}
	now := r.Now()
	for _, e := range d.Events {
		if notify.Reasons[e.Reason] {
			r.Notifier.Notify(ms, notify.ForEvent(ms, &ms.Status, e.Type, e.Reason, e.Message, now))
		}
	}
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionScalingLimited)
	if c != nil && c.Status == "True" && !meta.IsStatusConditionTrue(before.Status.Conditions, v1alpha1.ConditionScalingLimited) {
		r.Notifier.Notify(ms, notify.ForEvent(ms, &ms.Status, corev1.EventTypeWarning, v1alpha1.ConditionScalingLimited,
			c.Reason+": "+c.Message, now))
	}
}

// secretURL reads a notification URL from a Secret key in the ModelServer's namespace, from
// the API server (the controller caches no Secrets and may only get them): on the Notifier's
// goroutines, never a reconcile worker's.
func secretURL(reader client.Reader) notify.Resolver {
	return func(ctx context.Context, namespace string, ref v1alpha1.SecretKeyRef) (string, error) {
		s := &corev1.Secret{}
		if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, s); err != nil {
			return "", fmt.Errorf("reading Secret %s/%s of spec.notifications: %w", namespace, ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok || len(v) == 0 {
			return "", fmt.Errorf("secret %s/%s has no key %q (spec.notifications urlSecretRef)", namespace, ref.Name, ref.Key)
		}
		return string(v), nil
	}
}
