package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/health"
	"github.com/modelship/modelship/internal/revision"
)

// resourceName is how kubectl names a ModelServer in its messages.
func resourceName(ms *v1alpha1.ModelServer) string {
	return "modelserver.serving.modelship.dev/" + ms.Name
}

// mergePatch sends an RFC 7386 merge patch; it touches only the fields named in patch, so it is
// harmless to repeat and leaves fields other tools own alone.
func mergePatch(ctx context.Context, c client.Client, ms *v1alpha1.ModelServer, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	if err := c.Patch(ctx, ms, client.RawPatch(types.MergePatchType, b)); err != nil {
		return fmt.Errorf("patching modelserver %q in namespace %q: %w", ms.Name, ms.Namespace, err)
	}
	return nil
}

// warnIfStale tells the user that the status (and so the candidate revision) may be older than
// the spec.
func warnIfStale(w io.Writer, ms *v1alpha1.ModelServer) {
	if ms.Status.ObservedGeneration < ms.Generation {
		fmt.Fprintf(w, "warning: the controller has not observed generation %d yet (observed %d): "+
			"the request names the candidate it last reported and is ignored if a newer rollout replaced it\n",
			ms.Generation, ms.Status.ObservedGeneration)
	}
}

func (o *options) newPauseCommand(pause bool) *cobra.Command {
	use, short := "pause NAME", "Freeze the rollout where it is (sets spec.paused=true)"
	if !pause {
		use, short = "resume NAME", "Let a paused rollout go on (clears spec.paused)"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runPause(cmd.Context(), args[0], pause)
		},
	}
}

func (o *options) runPause(ctx context.Context, name string, pause bool) error {
	c, ns, err := o.newClient()
	if err != nil {
		return err
	}
	ms, err := getModelServer(ctx, c, ns, name)
	if err != nil {
		return err
	}
	verb := map[bool]string{true: "paused", false: "resumed"}[pause]
	if ms.Spec.Paused == pause {
		_, err := fmt.Fprintf(o.streams.Out, "%s already %s (spec.paused=%t), nothing changed\n", resourceName(ms), verb, pause)
		return err
	}
	// Resume removes the field rather than writing false, so that the object matches a manifest
	// that never mentions it (no GitOps drift).
	var value any
	if pause {
		value = true
	}
	if err := mergePatch(ctx, c, ms, map[string]any{"spec": map[string]any{"paused": value}}); err != nil {
		return err
	}
	where := "no rollout is in progress now"
	if s := health.StepText(ms); s != "" {
		where = "rollout of " + ms.Status.Candidate.Revision + " at " + s
	}
	set := "spec.paused=true"
	if !pause {
		set = "spec.paused removed"
	}
	_, err = fmt.Fprintf(o.streams.Out, "%s %s: %s (%s)\n", resourceName(ms), verb, set, where)
	return err
}

func (o *options) newPromoteCommand() *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:   "promote NAME",
		Short: "Advance the rollout to its next step now, or with --full make the candidate stable",
		Long: "promote sets the annotation " + v1alpha1.AnnotationPromote + " (or " + v1alpha1.AnnotationPromoteFull +
			" with --full)\nto the candidate revision. The controller acts on it only while that revision is the candidate,\n" +
			"so a request left behind never promotes a later rollout.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if full {
				return o.runOperation(cmd.Context(), args[0], opPromoteFull)
			}
			return o.runOperation(cmd.Context(), args[0], opPromote)
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "Skip the remaining steps: the candidate takes all traffic and becomes stable")
	return cmd
}

func (o *options) newAbortCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "abort NAME",
		Short: "Send all traffic back to the stable revision, keeping the candidate for inspection",
		Long: "abort sets the annotation " + v1alpha1.AnnotationAbort + " to the candidate revision. The controller\n" +
			"moves all traffic to stable and will not retry that revision while the spec asks for it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runOperation(cmd.Context(), args[0], opAbort)
		},
	}
}

// operation is a request the controller reads from an annotation naming the candidate revision.
type operation struct {
	// verb names it in messages ("cannot promote: ...").
	verb string
	// key is the annotation.
	key string
	// what says what the controller is asked to do.
	what string
}

// The operations of promote, promote --full and abort.
var (
	opPromote     = operation{verb: "promote", key: v1alpha1.AnnotationPromote, what: "advance to the next step"}
	opPromoteFull = operation{verb: "promote", key: v1alpha1.AnnotationPromoteFull, what: "skip the remaining steps and make it stable"}
	opAbort       = operation{verb: "abort", key: v1alpha1.AnnotationAbort, what: "send all traffic back to stable"}
)

// runOperation sets the operation's annotation to the candidate revision of a rollout in progress.
func (o *options) runOperation(ctx context.Context, name string, op operation) error {
	c, ns, err := o.newClient()
	if err != nil {
		return err
	}
	ms, err := getModelServer(ctx, c, ns, name)
	if err != nil {
		return err
	}
	_, err = o.setOperation(ctx, c, ms, op.verb, op.key, op.what)
	return err
}

// setOperation checks that a rollout is in progress and annotates ms; it returns the candidate
// revision it named.
func (o *options) setOperation(ctx context.Context, c client.Client, ms *v1alpha1.ModelServer, op, key, what string) (string, error) {
	if !health.InProgress(ms) {
		phase := string(ms.Status.Phase)
		if phase == "" {
			return "", fmt.Errorf("cannot %s: modelserver %s has no status yet, no rollout in progress", op, ms.Name)
		}
		return "", fmt.Errorf("cannot %s: modelserver %s is %s, no rollout in progress", op, ms.Name, phase)
	}
	rev := ms.Status.Candidate.Revision
	warnIfStale(o.streams.ErrOut, ms)
	if ms.Annotations[key] == rev {
		_, err := fmt.Fprintf(o.streams.Out, "%s already has %s=%s (%s requested for candidate %s, waiting for the controller), nothing changed\n",
			resourceName(ms), key, rev, op, rev)
		return rev, err
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: rev}}}
	if err := mergePatch(ctx, c, ms, patch); err != nil {
		return "", err
	}
	_, err := fmt.Fprintf(o.streams.Out, "%s annotated %s=%s: asked the controller to %s (candidate %s, %s)\n",
		resourceName(ms), key, rev, what, rev, health.StepText(ms))
	return rev, err
}

func (o *options) newRollbackCommand() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "rollback NAME",
		Short: "Go back to the stable revision, or to an earlier revision's template",
		Long: "rollback returns a ModelServer to an earlier revision. During a rollout, going back to the stable\n" +
			"revision is an abort: all traffic returns to stable at once. Any other kept revision (the last 10,\n" +
			"kept as ControllerRevisions <name>-<revision>) is restored by setting spec.template back to its\n" +
			"template: modelship then rolls it out like any new revision (at once when its color is still warm).\n" +
			"With GitOps (Argo CD, Flux) revert the change in Git instead: the spec in Git still names the other\n" +
			"version and would be applied again.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runRollback(cmd.Context(), args[0], to)
		},
	}
	cmd.Flags().StringVar(&to, "to-revision", "", "Revision to go back to (default: the stable revision)")
	return cmd
}

const gitOpsNote = "note: spec.template still names revision %s; modelship will not retry it while the spec asks for it.\n" +
	"      If a GitOps tool manages this ModelServer, the spec in Git still names that version: revert it in Git.\n"

func (o *options) runRollback(ctx context.Context, name, to string) error {
	c, ns, err := o.newClient()
	if err != nil {
		return err
	}
	ms, err := getModelServer(ctx, c, ns, name)
	if err != nil {
		return err
	}
	st := ms.Status
	stable := ""
	if st.Stable != nil {
		stable = st.Stable.Revision
	}
	if to == "" {
		to = stable
	}
	if to == "" {
		return fmt.Errorf("cannot roll back: modelserver %s has no stable revision yet", ms.Name)
	}
	switch {
	case to == stable && health.InProgress(ms):
		rev, err := o.setOperation(ctx, c, ms, "roll back", v1alpha1.AnnotationAbort,
			"abort the rollout and send all traffic back to stable revision "+stable)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.streams.Out, gitOpsNote, rev)
		return err
	case to == stable:
		_, err := fmt.Fprintf(o.streams.Out, "%s already serves stable revision %s (phase %s), nothing changed\n",
			resourceName(ms), stable, st.Phase)
		if err == nil && st.Phase == v1alpha1.PhaseRolledBack && st.RolledBackRevision != "" {
			_, err = fmt.Fprintf(o.streams.Out, gitOpsNote, st.RolledBackRevision)
		}
		return err
	case st.Candidate != nil && to == st.Candidate.Revision && health.InProgress(ms):
		return fmt.Errorf("cannot roll back modelserver %s to revision %s: it is the candidate in progress; use promote", ms.Name, to)
	}
	return o.restoreTemplate(ctx, c, ms, to)
}

// restoreTemplate sets spec.template back to a kept revision's template.
func (o *options) restoreTemplate(ctx context.Context, c client.Client, ms *v1alpha1.ModelServer, to string) error {
	current := revision.Of(&ms.Spec.Template)
	if current == to {
		_, err := fmt.Fprintf(o.streams.Out, "%s: spec.template already is revision %s, nothing changed\n", resourceName(ms), to)
		return err
	}
	cr := &appsv1.ControllerRevision{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ms.Namespace, Name: v1alpha1.RevisionObjectName(ms.Name, to)}, cr); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("cannot roll back modelserver %s to revision %s: its template is not kept (modelship keeps the last 10; "+
				"see `kubectl modelship history %s`)", ms.Name, to, ms.Name)
		}
		return fmt.Errorf("reading the template of revision %s: %w", to, err)
	}
	// Anyone who may create ControllerRevisions here can create one under this name: put back
	// only modelship's own record of the revision, and exactly the template that hashes to it.
	tmpl, err := revision.Kept(cr, ms.UID, to)
	if err != nil {
		return fmt.Errorf("cannot roll back modelserver %s to revision %s: %w", ms.Name, to, err)
	}
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template", "value": tmpl}})
	if err != nil {
		return fmt.Errorf("building the patch: %w", err)
	}
	if err := c.Patch(ctx, ms, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("setting spec.template of modelserver %s to revision %s: %w", ms.Name, to, err)
	}
	_, err = fmt.Fprintf(o.streams.Out, "%s: spec.template set back to revision %s (was %s); modelship rolls it out\n"+
		"note: if a GitOps tool manages this ModelServer, the spec in Git still names revision %s and will put it back: revert it in Git.\n",
		resourceName(ms), to, current, current)
	return err
}
