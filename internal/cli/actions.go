package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	var rev string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runPause(cmd.Context(), args[0], pause, rev)
		},
	}
	if !pause {
		cmd.Flags().StringVar(&rev, "revision", "", "The candidate revision you reviewed: refused, naming both, when the paused rollout is of another one")
	}
	return cmd
}

// runPause sets or clears spec.paused. expect, for resume, is the candidate revision the person
// reviewed: a rollout of another revision is not let go on.
func (o *options) runPause(ctx context.Context, name string, pause bool, expect string) error {
	c, ms, err := o.readModelServer(ctx, name)
	if err != nil {
		return err
	}
	if expect != "" && !pause {
		cand := ""
		if health.InProgress(ms) {
			cand = ms.Status.Candidate.Revision
		}
		if cand != expect {
			now := "no rollout is in progress"
			if cand != "" {
				now = "the candidate is revision " + cand
			}
			return fmt.Errorf("cannot resume: %s of modelserver %s, not revision %s that the request names", now, ms.Name, expect)
		}
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

// revisionFlagHelp describes --revision of the operations.
const revisionFlagHelp = "The candidate revision you reviewed (see `kubectl modelship status`): refused, naming both, when the candidate is another one"

// operationNote says how an operation lands on the revision the person saw.
const operationNote = "\n\nThe request names the revision: with --revision, the one you reviewed, else the candidate read when the\n" +
	"command starts. It is written only if the ModelServer did not change since it was read, and the controller acts\n" +
	"on it only while that revision is the candidate of the spec's rollout: a candidate that changed in between\n" +
	"(CI pushed another one) is refused, naming both revisions, and a request left behind never acts on a later\n" +
	"rollout. The same request twice before the controller acts is one request (\"already requested\"); once the\n" +
	"controller acted, the command waits for it to finish with the first, then asks again."

func (o *options) newPromoteCommand() *cobra.Command {
	var full bool
	var rev string
	cmd := &cobra.Command{
		Use:   "promote NAME",
		Short: "Advance the rollout to its next step now, or with --full make the candidate stable",
		Long: "promote sets the annotation " + v1alpha1.AnnotationPromote + " (or " + v1alpha1.AnnotationPromoteFull +
			" with --full)\nto the candidate revision." + operationNote,
		Example: "  kubectl modelship promote llama --revision 7d9c5b6f8",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if full {
				return o.runOperation(cmd.Context(), args[0], opPromoteFull, rev)
			}
			return o.runOperation(cmd.Context(), args[0], opPromote, rev)
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "Skip the remaining steps: the candidate takes all traffic and becomes stable")
	cmd.Flags().StringVar(&rev, "revision", "", revisionFlagHelp)
	return cmd
}

func (o *options) newAbortCommand() *cobra.Command {
	var rev string
	cmd := &cobra.Command{
		Use:   "abort NAME",
		Short: "Send all traffic back to the stable revision, keeping the candidate for inspection",
		Long: "abort sets the annotation " + v1alpha1.AnnotationAbort + " to the candidate revision. The controller\n" +
			"moves all traffic to stable and will not retry that revision while the spec asks for it." + operationNote,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runOperation(cmd.Context(), args[0], opAbort, rev)
		},
	}
	cmd.Flags().StringVar(&rev, "revision", "", revisionFlagHelp)
	return cmd
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

// runOperation sets the operation's annotation to the candidate revision of a rollout in
// progress; expect is the revision the person reviewed (empty: the candidate read now).
func (o *options) runOperation(ctx context.Context, name string, op operation, expect string) error {
	c, ms, err := o.readModelServer(ctx, name)
	if err != nil {
		return err
	}
	_, err = o.setOperation(ctx, c, ms, op.verb, op.key, op.what, expect)
	return err
}

// operationAttempts bounds the writes setOperation tries when the ModelServer changed between
// its read and its write (the controller writes status every few seconds during a rollout).
const operationAttempts = 5

// handledWait bounds how long setOperation waits for the controller to finish with an
// identical request it already acted on.
const handledWait = 30 * time.Second

// setOperation checks that a rollout is in progress and annotates ms; it returns the candidate
// revision it named. The request lands on the revision the person saw: expect, or when empty
// the candidate of ms as read (once). The write carries ms's resourceVersion, so that a
// ModelServer that changed since it was read is read again and checked again rather than
// overwritten; a candidate that is no longer expect is refused, naming both revisions.
//
// The same request twice: while the first waits for the controller, the second is the same
// request ("already requested", nothing changed). Once the controller acted on the first
// (status.rollout.handledOperation names it) and before it removed the annotation and its record, the
// same value written again would read as the first one, already handled: setOperation waits
// (at most handledWait) for the controller to finish with it, then asks again.
func (o *options) setOperation(ctx context.Context, c client.Client, ms *v1alpha1.ModelServer, op, key, what, expect string) (string, error) {
	warned := false
	for attempt := 1; ; attempt++ {
		if !health.InProgress(ms) {
			phase := string(ms.Status.Phase)
			if phase == "" {
				return "", fmt.Errorf("cannot %s: modelserver %s has no status yet, no rollout in progress", op, ms.Name)
			}
			if expect != "" && ms.Status.Candidate != nil && ms.Status.Candidate.Revision == expect {
				return "", fmt.Errorf("cannot %s: modelserver %s is %s, the rollout of revision %s is over", op, ms.Name, phase, expect)
			}
			return "", fmt.Errorf("cannot %s: modelserver %s is %s, no rollout in progress", op, ms.Name, phase)
		}
		rev := ms.Status.Candidate.Revision
		if expect == "" {
			expect = rev
		}
		if rev != expect {
			return "", fmt.Errorf("cannot %s: the candidate of modelserver %s is revision %s, not revision %s that the request names; "+
				"review %s, then run again with --revision %s", op, ms.Name, rev, expect, rev, rev)
		}
		if !warned {
			warnIfStale(o.streams.ErrOut, ms)
			warned = true
		}
		handled := ms.Status.Rollout.HandledOperation != nil && *ms.Status.Rollout.HandledOperation == v1alpha1.HandledOperation{Annotation: key, Revision: rev}
		if !handled && ms.Annotations[key] == rev {
			_, err := fmt.Fprintf(o.streams.Out, "%s already has %s=%s: %s already requested for candidate %s, waiting for the controller; nothing changed\n",
				resourceName(ms), key, rev, op, rev)
			return rev, err
		}
		if handled {
			next, err := o.waitHandled(ctx, c, ms, key, rev, op)
			if err != nil {
				return "", err
			}
			ms = next
			continue
		}
		next := ms.DeepCopy()
		metav1.SetMetaDataAnnotation(&next.ObjectMeta, key, rev)
		err := c.Patch(ctx, next, client.MergeFromWithOptions(ms, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) && attempt < operationAttempts {
			// Changed since read (a status write, another request): read again and check again.
			if ms, err = getModelServer(ctx, c, ms.Namespace, ms.Name); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", fmt.Errorf("patching modelserver %q in namespace %q: %w", ms.Name, ms.Namespace, err)
		}
		_, err = fmt.Fprintf(o.streams.Out, "%s annotated %s=%s: asked the controller to %s (candidate %s, %s)\n",
			resourceName(ms), key, rev, what, rev, health.StepText(ms))
		return rev, err
	}
}

// waitHandled waits until the controller has finished with an identical request it acted on:
// the annotation removed and status.rollout.handledOperation no longer naming it. It returns the
// ModelServer as then read.
func (o *options) waitHandled(ctx context.Context, c client.Client, ms *v1alpha1.ModelServer, key, rev, op string) (*v1alpha1.ModelServer, error) {
	fmt.Fprintf(o.streams.ErrOut, "the controller acted on an identical %s of %s moments ago and is finishing with it; waiting to ask again\n", op, rev)
	wctx, cancel := context.WithTimeout(ctx, handledWait)
	defer cancel()
	poll := o.poll
	if poll <= 0 || poll > time.Second {
		poll = time.Second
	}
	notYet := func() error {
		return fmt.Errorf("cannot %s again yet: the controller has not finished with the previous %s of %s (%s=%s, handled); nothing changed, run again",
			op, op, rev, key, rev)
	}
	for {
		h := ms.Status.Rollout.HandledOperation
		if _, set := ms.Annotations[key]; !set && (h == nil || *h != (v1alpha1.HandledOperation{Annotation: key, Revision: rev})) {
			return ms, nil
		}
		select {
		case <-wctx.Done():
			return nil, notYet()
		case <-time.After(poll):
		}
		next, err := getModelServer(wctx, c, ms.Namespace, ms.Name)
		if err != nil {
			if wctx.Err() != nil {
				return nil, notYet()
			}
			return nil, err
		}
		ms = next
	}
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
			return o.runRollback(cmd.Context(), args[0], to, "")
		},
	}
	cmd.Flags().StringVar(&to, "to-revision", "", "Revision to go back to (default: the stable revision)")
	return cmd
}

const gitOpsNote = "note: spec.template still names revision %s; modelship will not retry it while the spec asks for it.\n" +
	"      If a GitOps tool manages this ModelServer, the spec in Git still names that version: revert it in Git.\n"

// runRollback returns the ModelServer to revision to (default: the stable revision); candidate,
// when set, is the candidate revision the person saw, which a rollback during a rollout (an
// abort) must still find.
func (o *options) runRollback(ctx context.Context, name, to, candidate string) error {
	c, ms, err := o.readModelServer(ctx, name)
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
			"abort the rollout and send all traffic back to stable revision "+stable, candidate)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.streams.Out, gitOpsNote, rev)
		return err
	case to == stable:
		_, err := fmt.Fprintf(o.streams.Out, "%s already serves stable revision %s (phase %s), nothing changed\n",
			resourceName(ms), stable, st.Phase)
		if err == nil && st.Phase == v1alpha1.PhaseRolledBack && st.Rollout.RolledBackRevision != "" {
			_, err = fmt.Fprintf(o.streams.Out, gitOpsNote, st.Rollout.RolledBackRevision)
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
