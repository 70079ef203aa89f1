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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// keptRevisions is how many revision templates are kept, as status.history keeps 10 outcomes.
const keptRevisions = 10

// recordRevision keeps the spec's pod template as a ControllerRevision named
// <modelserver>-<revision> (as StatefulSets and DaemonSets keep theirs), so that
// `kubectl modelship rollback --to-revision` can put an earlier template back. The newest
// keptRevisions are kept, and always those that run (stable and candidate).
func (r *ModelServerReconciler) recordRevision(ctx context.Context, ms *v1alpha1.ModelServer, rev string) error {
	name := v1alpha1.RevisionObjectName(ms.Name, rev)
	existing := &appsv1.ControllerRevision{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: name}, existing)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting ControllerRevision %s: %w", name, err)
	}
	var list appsv1.ControllerRevisionList
	if err := r.List(ctx, &list, client.InNamespace(ms.Namespace), client.MatchingLabels(ms.SelectorLabels())); err != nil {
		return fmt.Errorf("listing ControllerRevisions: %w", err)
	}
	var number int64
	for _, cr := range list.Items {
		number = max(number, cr.Revision)
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
	return r.pruneRevisions(ctx, ms, append(list.Items, *cr))
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
