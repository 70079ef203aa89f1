package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/revision"
)

// keptRevisions is how many revision templates are kept, as status.history keeps 10 outcomes.
const keptRevisions = 10

// recordRevision keeps the spec's pod template as a ControllerRevision named
// <modelserver>-<revision> (as StatefulSets and DaemonSets keep theirs), so that
// `kubectl modelship rollback --to-revision` can put an earlier template back. The newest
// keptRevisions are kept, and always those that run (stable and candidate).
//
// Only the ModelServer's own records count (revision.Kept: controlled by it, holding the
// template of the revision they are named after): one that someone else created under the name
// is left alone and the revision is not kept (a rollback to it is refused), and one of ours
// that does not hold its revision's template is replaced. Others' ControllerRevisions carrying
// the ModelServer's labels are neither numbered after nor pruned.
func (r *ModelServerReconciler) recordRevision(ctx context.Context, ms *v1alpha1.ModelServer, rev string) error {
	name := v1alpha1.RevisionObjectName(ms.Name, rev)
	existing := &appsv1.ControllerRevision{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: name}, existing)
	switch {
	case err == nil:
		_, bad := revision.Kept(existing, ms.UID, rev)
		if bad == nil {
			return nil
		}
		if !metav1.IsControlledBy(existing, ms) {
			ctrl.LoggerFrom(ctx).V(1).Info("Revision not kept: its ControllerRevision's name is taken", "ControllerRevision", name, "reason", bad.Error())
			return nil
		}
		if err := r.Delete(ctx, existing, client.Preconditions{UID: &existing.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replacing ControllerRevision %s (%v): %w", name, bad, err)
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("getting ControllerRevision %s: %w", name, err)
	}
	var list appsv1.ControllerRevisionList
	if err := r.List(ctx, &list, client.InNamespace(ms.Namespace), client.MatchingLabels(ms.SelectorLabels())); err != nil {
		return fmt.Errorf("listing ControllerRevisions: %w", err)
	}
	own := list.Items[:0]
	var number int64
	for _, cr := range list.Items {
		if metav1.IsControlledBy(&cr, ms) && cr.Name != name {
			own = append(own, cr)
			number = max(number, cr.Revision)
		}
	}
	data, err := json.Marshal(ms.Spec.Template)
	if err != nil {
		return fmt.Errorf("encoding the template of revision %s: %w", rev, err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ms.Namespace, Name: name,
			Labels: map[string]string{v1alpha1.LabelModelServer: ms.Name, v1alpha1.LabelRevision: rev}},
		Data:     runtime.RawExtension{Raw: data},
		Revision: number + 1,
	}
	if err := controllerutil.SetControllerReference(ms, cr, r.Scheme); err != nil {
		return fmt.Errorf("owner reference on ControllerRevision %s: %w", name, err)
	}
	if err := r.Create(ctx, cr); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ControllerRevision %s: %w", name, err)
	}
	return r.pruneRevisions(ctx, ms, append(own, *cr))
}

func (r *ModelServerReconciler) pruneRevisions(ctx context.Context, ms *v1alpha1.ModelServer, all []appsv1.ControllerRevision) error {
	if len(all) <= keptRevisions {
		return nil
	}
	inUse := map[string]bool{}
	for _, c := range []*v1alpha1.ColorStatus{ms.Status.Stable, ms.Status.Candidate} {
		if c != nil {
			inUse[c.Revision] = true
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Revision > all[j].Revision })
	for i := keptRevisions; i < len(all); i++ {
		if inUse[all[i].Labels[v1alpha1.LabelRevision]] {
			continue
		}
		if err := r.Delete(ctx, &all[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("pruning ControllerRevision %s: %w", all[i].Name, err)
		}
	}
	return nil
}
