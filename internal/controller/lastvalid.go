package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The last valid spec. A spec the controller refuses (an edit that fails its validation, or a
// --query-policy tightened since the spec was accepted) must never freeze what serves: abort,
// rollback, deadlines and the autoscaling of what serves go on from the last spec it accepted,
// and only the new spec waits. The controller keeps that spec in a ControllerRevision of its
// own, <modelserver>-valid-spec (owned by the ModelServer, written only when the accepted spec
// changes), so that a restart does not forget it.

// LabelValidSpecOf marks the ControllerRevision that keeps a ModelServer's last valid spec; its
// value is the ModelServer's name. It is not one of the revision templates (those carry
// LabelModelServer), so `kubectl modelship rollback` never lists it.
const LabelValidSpecOf = "serving.modelship.dev/valid-spec-of"

// annotationGeneration on that ControllerRevision is the ModelServer generation the spec had.
const annotationGeneration = "serving.modelship.dev/generation"

func validSpecName(ms *v1alpha1.ModelServer) string { return ms.Name + "-valid-spec" }

// rememberValidSpec keeps spec (the user's, before the controller's in-memory defaults) as the
// last valid spec of ms, writing only when it changed.
func (r *ModelServerReconciler) rememberValidSpec(ctx context.Context, ms *v1alpha1.ModelServer, spec *v1alpha1.ModelServerSpec) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encoding the valid spec: %w", err)
	}
	gen := strconv.FormatInt(ms.Generation, 10)
	cr := &appsv1.ControllerRevision{}
	err = r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: validSpecName(ms)}, cr)
	switch {
	case err == nil:
		if !metav1.IsControlledBy(cr, ms) {
			return nil // not ours (another owner's object, or one left by a deleted namesake)
		}
		if bytes.Equal(cr.Data.Raw, data) {
			return nil
		}
		// A ControllerRevision's data is immutable: replace it (a pass that finds it missing
		// in between, an invalid spec, stalls as before anything was kept).
		if err := r.Delete(ctx, cr, client.Preconditions{UID: &cr.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replacing ControllerRevision %s: %w", cr.Name, err)
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("getting ControllerRevision %s: %w", validSpecName(ms), err)
	}
	cr = &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ms.Namespace, Name: validSpecName(ms),
			Labels:      map[string]string{LabelValidSpecOf: ms.Name},
			Annotations: map[string]string{annotationGeneration: gen}},
		Data: runtime.RawExtension{Raw: data},
	}
	if err := controllerutil.SetControllerReference(ms, cr, r.Scheme); err != nil {
		return fmt.Errorf("owner reference on ControllerRevision %s: %w", cr.Name, err)
	}
	if err := r.Create(ctx, cr); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// The cache has not seen the delete (or the create) yet: the next pass retries.
			return nil
		}
		return fmt.Errorf("creating ControllerRevision %s: %w", cr.Name, err)
	}
	return nil
}

// lastValidSpec returns the last spec of ms that the controller accepted and its generation;
// nil when none was kept (a ModelServer never valid, or written by an older controller).
func (r *ModelServerReconciler) lastValidSpec(ctx context.Context, ms *v1alpha1.ModelServer) (*v1alpha1.ModelServerSpec, int64, error) {
	cr := &appsv1.ControllerRevision{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: validSpecName(ms)}, cr)
	if apierrors.IsNotFound(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("getting ControllerRevision %s: %w", validSpecName(ms), err)
	}
	if !metav1.IsControlledBy(cr, ms) {
		return nil, 0, nil
	}
	spec := &v1alpha1.ModelServerSpec{}
	if err := json.Unmarshal(cr.Data.Raw, spec); err != nil {
		return nil, 0, nil // unreadable: as if none was kept
	}
	gen, _ := strconv.ParseInt(cr.Annotations[annotationGeneration], 10, 64)
	return spec, gen, nil
}

// specChoice is the spec a pass acts on: the user's when the controller accepts it, else the
// last valid one (ms.Spec is swapped for it), with why the user's waits.
type specChoice struct {
	// user is the user's spec as written (before the flags' in-memory defaults).
	user *v1alpha1.ModelServerSpec
	// refused says why the controller refuses the user's spec (nil: it acts on it).
	refused error
	// reason is the Stalled reason of a refused spec: InvalidSpec or InvalidTemplate.
	reason string
	// lastValid is the generation of the last valid spec the pass acts on instead (0: none
	// was kept, so nothing is applied).
	lastValid int64
	// held: the query policy refuses even the last valid spec now (a --query-policy
	// tightened since): none of its queries runs, so analysis and autoscaling hold while
	// aborts, rollbacks and deadlines act.
	held    bool
	heldWhy error
}

// specToActOn validates the user's spec (its fields, its queries under the query policy, its
// template by a dry run) and, when the controller refuses it, puts the last valid spec in
// ms.Spec: a refused edit never freezes what serves, only the new spec waits.
func (r *ModelServerReconciler) specToActOn(ctx context.Context, ms *v1alpha1.ModelServer) (specChoice, error) {
	c := specChoice{user: ms.Spec.DeepCopy(), reason: v1alpha1.ReasonInvalidSpec}
	c.refused = r.validate(ms)
	if c.refused == nil {
		if msg := r.templateRefusal(ctx, ms); msg != "" {
			c.refused, c.reason = errors.New(msg), v1alpha1.ReasonInvalidTemplate
		}
	}
	if c.refused == nil {
		return c, nil
	}
	last, gen, err := r.lastValidSpec(ctx, ms)
	if err != nil || last == nil {
		return c, err
	}
	c.lastValid = gen
	ms.Spec = *last
	if err := r.validate(ms); err != nil {
		c.held, c.heldWhy = true, err
	}
	return c, nil
}

// invalid: the controller refuses the user's spec.
func (c specChoice) invalid() bool { return c.refused != nil }

// refusal is the Stalled message when the user's spec is refused and no valid spec was ever
// kept ("" otherwise).
func (c specChoice) refusal() string {
	if c.refused == nil || c.lastValid > 0 {
		return ""
	}
	return c.refused.Error()
}

// invalidMessage is the Stalled message of a pass that acts on the last valid spec ("" when it
// acts on the user's).
func (c specChoice) invalidMessage() string {
	if c.refused == nil {
		return ""
	}
	msg := fmt.Sprintf("%s; what serves goes on from the last valid spec (generation %d) until it is fixed", c.refused, c.lastValid)
	if c.held {
		msg += fmt.Sprintf(" (which the controller refuses too now: %s; analysis and autoscaling hold)", c.heldWhy)
	}
	return msg
}
