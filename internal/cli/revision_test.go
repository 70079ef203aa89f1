package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// revisionSuite is how the rollout actions land on the revision the person saw, run against a
// fake client and against envtest.
func revisionSuite(t *testing.T, newHarness func(t *testing.T) *harness) {
	t.Run("promote --revision of a candidate that was replaced is refused naming both revisions", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseAwaitingPromotion) // candidate rev-b
		_, _, err := h.run("promote", "llama", "--full", "--revision", "rev-reviewed")
		if err == nil || !strings.Contains(err.Error(), "revision rev-b") || !strings.Contains(err.Error(), "revision rev-reviewed") {
			t.Fatalf("err = %v, want a refusal naming rev-b and rev-reviewed", err)
		}
		if len(h.get("llama").Annotations) != 0 {
			t.Errorf("annotations set: %v", h.get("llama").Annotations)
		}
	})

	t.Run("promote --revision of the candidate annotates it", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseAwaitingPromotion)
		if _, _, err := h.run("promote", "llama", "--revision", "rev-b"); err != nil {
			t.Fatalf("promote: %v", err)
		}
		if v, _ := annotation(h.get("llama"), v1alpha1.AnnotationPromote); v != "rev-b" {
			t.Fatalf("%s = %q, want rev-b", v1alpha1.AnnotationPromote, v)
		}
	})

	t.Run("abort and resume --revision of another candidate are refused", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhasePaused)
		if _, _, err := h.run("abort", "llama", "--revision", "rev-x"); err == nil || !strings.Contains(err.Error(), "rev-x") || !strings.Contains(err.Error(), "rev-b") {
			t.Errorf("abort: err = %v, want a refusal naming rev-b and rev-x", err)
		}
		updateSpec(t, h, "llama", func(ms *v1alpha1.ModelServer) { ms.Spec.Paused = true })
		if _, _, err := h.run("resume", "llama", "--revision", "rev-x"); err == nil || !strings.Contains(err.Error(), "rev-x") || !strings.Contains(err.Error(), "rev-b") {
			t.Errorf("resume: err = %v, want a refusal naming rev-b and rev-x", err)
		}
		if ms := h.get("llama"); len(ms.Annotations) != 0 || !ms.Spec.Paused {
			t.Errorf("refused requests changed the object: annotations %v, paused %t", ms.Annotations, ms.Spec.Paused)
		}
	})

	t.Run("a second promote after the controller acted on the first waits for it, then asks again", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseProgressing, withHandled(v1alpha1.AnnotationPromote, "rev-b"))
		updateSpec(t, h, "llama", func(ms *v1alpha1.ModelServer) {
			ms.Annotations = map[string]string{v1alpha1.AnnotationPromote: "rev-b"} // handled, not removed yet
		})
		out, errOut := &syncBuffer{}, &syncBuffer{}
		r, err := h.command(out, errOut)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.run(context.Background(), append(r.extraArgs, "promote", "llama")) }()
		eventually(t, func() bool { return strings.Contains(errOut.String(), "waiting to ask again") })
		// The controller finishes with the first request: the annotation goes, then its record.
		updateSpec(t, h, "llama", func(ms *v1alpha1.ModelServer) { ms.Annotations = nil })
		h.setStatus("llama", v1alpha1.PhaseProgressing, withStep(2, 25))
		if err := <-done; err != nil {
			t.Fatalf("second promote: %v (%s)", err, errOut.String())
		}
		if v, _ := annotation(h.get("llama"), v1alpha1.AnnotationPromote); v != "rev-b" || !strings.Contains(out.String(), "annotated") {
			t.Fatalf("after the first was handled: %s = %q, out %q; want the second request set", v1alpha1.AnnotationPromote, v, out.String())
		}
	})
}

func withHandled(key, rev string) statusOption {
	return func(st *v1alpha1.ModelServerStatus) {
		st.HandledOperation = &v1alpha1.HandledOperation{Annotation: key, Revision: rev}
	}
}

// updateSpec changes the ModelServer as a person or the controller would, retrying conflicts.
func updateSpec(t *testing.T, h *harness, name string, mutate func(*v1alpha1.ModelServer)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ms := h.get(name)
		mutate(ms)
		return h.c.Update(context.Background(), ms)
	}); err != nil {
		t.Fatalf("updating %s: %v", name, err)
	}
}

func TestRevisionChecksWithAFakeClient(t *testing.T) {
	revisionSuite(t, newFakeHarness)
}

// CI pushes revision rev-c and the controller starts its rollout between promote's read and its
// write: the write, conditional on what was read, fails; promote reads again and refuses,
// naming both revisions, instead of promoting rev-c, which nobody reviewed.
func TestAPromoteWhoseCandidateChangesBeforeItsWriteIsRefusedNamingBoth(t *testing.T) {
	h := newFakeHarness(t)
	h.create("llama")
	h.setStatus("llama", v1alpha1.PhaseAwaitingPromotion)
	changed := false
	c := interceptor.NewClient(h.c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			if !changed {
				changed = true
				h.setStatus("llama", v1alpha1.PhaseProgressing, func(st *v1alpha1.ModelServerStatus) {
					st.Candidate.Revision, st.Revision, st.Step = "rev-c", "rev-c", 0
				})
			}
			return c.Patch(ctx, o, p, opts...)
		},
	})
	out, errOut := &syncBuffer{}, &syncBuffer{}
	cmd := NewCommand(streams(out, errOut), WithClient(c, "ml"), WithPollInterval(100*time.Millisecond))
	cmd.SetArgs([]string{"promote", "llama", "--full"})
	err := cmd.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "revision rev-c") || !strings.Contains(err.Error(), "revision rev-b") {
		t.Fatalf("err = %v, want a refusal naming rev-b (read) and rev-c (now)", err)
	}
	if len(h.get("llama").Annotations) != 0 {
		t.Errorf("annotations set: %v", h.get("llama").Annotations)
	}
}
