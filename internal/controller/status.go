package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// writeStatus is the one status write of a pass (deferred by Reconcile): skipped when the pass
// changed nothing. Every condition is set by package plan (its status.go).
func (r *ModelServerReconciler) writeStatus(ctx context.Context, before, ms *v1alpha1.ModelServer) error {
	if equality.Semantic.DeepEqual(before.Status, ms.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, ms, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	r.fresh.wrote(client.ObjectKeyFromObject(ms), ms.UID, ms.ResourceVersion)
	return nil
}
