package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/revision"
	"github.com/modelship/modelship/internal/rollout"
)

// Operations: a person's requests (promote, promote-full, abort) read from the ModelServer's
// annotations, matched to the candidate the spec asks for, recorded as handled in the status
// write of the pass that acted on them, and removed after it.

// operationAnnotations are the annotations by which a person steers a rollout, in the order
// operation() reads them.
var operationAnnotations = []string{v1alpha1.AnnotationAbort, v1alpha1.AnnotationPromoteFull, v1alpha1.AnnotationPromote}

// request is the operation annotation a pass finds, read by one rule.
type request struct {
	// found is the first operation annotation present, in operationAnnotations' order (nil:
	// none).
	found *v1alpha1.HandledOperation
	// handled: status already records it as acted on (a pass acted, and removing the
	// annotation failed): it never acts twice (a second promote would skip a step).
	handled bool
	// op is what it asks of the rollout machine: OpNone when handled, or when it names no
	// candidate the spec still asks for (see operation).
	op rollout.Operation
}

// readRequest reads the operation annotations of ms.
func readRequest(ms *v1alpha1.ModelServer) request {
	var q request
	a := ms.GetAnnotations()
	for _, k := range operationAnnotations {
		if v, ok := a[k]; ok {
			q.found = &v1alpha1.HandledOperation{Annotation: k, Revision: v}
			h := ms.Status.Rollout.HandledOperation
			q.handled = h != nil && *h == *q.found
			break
		}
	}
	if !q.handled {
		q.op = operation(ms)
	}
	return q
}

// record keeps status.rollout.handledOperation in step with the request: the operation's effect and
// the record that it was handled go in the same status write, and its annotation is removed
// only after that write succeeded (clear), so a failed write leaves the request in place for
// the next pass instead of losing it. keep: the machine could not act on it yet.
func (q request) record(st, before *v1alpha1.ModelServerStatus, keep bool) (clear bool) {
	clear = !keep && q.found != nil
	switch {
	case q.found == nil:
		st.Rollout.HandledOperation = nil
	case clear && !q.handled:
		st.Rollout.HandledOperation = q.found
	case !clear:
		st.Rollout.HandledOperation = before.Rollout.HandledOperation
	}
	return clear
}

// operation reads a human's request from the annotations; one naming another revision than
// the current candidate's is ignored (and cleared), so a stale request never acts on a newer rollout.
// The candidate is current only while the spec still asks for it: a candidate that a spec change
// superseded takes no request (rollout.Next would otherwise carry it to the superseding
// revision's rollout, which nobody reviewed).
func operation(ms *v1alpha1.ModelServer) rollout.Operation {
	cand := ms.Status.Candidate
	if cand == nil || cand.Revision != revision.Of(&ms.Spec.Template) {
		return rollout.OpNone
	}
	a := ms.GetAnnotations()
	switch {
	case a[v1alpha1.AnnotationAbort] == cand.Revision:
		return rollout.OpAbort
	case a[v1alpha1.AnnotationPromoteFull] == cand.Revision:
		return rollout.OpPromoteFull
	case a[v1alpha1.AnnotationPromote] == cand.Revision:
		return rollout.OpPromote
	}
	return rollout.OpNone
}

// clearOperations removes the operation annotations once a pass has acted on them and its
// status is written; seen is the ModelServer as the pass found it (an annotation that named no
// rollout then is reported as ignored).
func (r *ModelServerReconciler) clearOperations(ctx context.Context, seen, ms *v1alpha1.ModelServer) error {
	if readRequest(ms).found == nil {
		return nil
	}
	a := ms.GetAnnotations()
	patch := client.MergeFrom(ms.DeepCopy())
	for _, k := range operationAnnotations {
		if v, ok := a[k]; ok {
			h := seen.Status.Rollout.HandledOperation
			if op := operation(seen); op == rollout.OpNone && (h == nil || h.Annotation != k || h.Revision != v) {
				r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, "OperationIgnored", "Ignore", "%s=%s names no rollout in progress; ignored", k, v)
			}
			delete(a, k)
		}
	}
	ms.SetAnnotations(a)
	if err := r.Patch(ctx, ms, patch); err != nil {
		return fmt.Errorf("clearing operation annotations: %w", err)
	}
	r.fresh.wrote(client.ObjectKeyFromObject(ms), ms.UID, ms.ResourceVersion)
	return nil
}
