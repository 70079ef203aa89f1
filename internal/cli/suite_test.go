package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/plan"
	"github.com/modelship/modelship/internal/revision"
)

// harness runs the plugin's commands against one cluster (a fake client or envtest) in one
// namespace, and lets the test play the controller through c.
type harness struct {
	t  *testing.T
	c  client.WithWatch
	ns string
	// command builds the root command writing to out and errOut, with extra args placed first
	// (the kubeconfig flags of envtest).
	command func(out, errOut *syncBuffer) (*rootRun, error)
}

// rootRun is a root command and the flags that select the cluster.
type rootRun struct {
	run       func(ctx context.Context, args []string) error
	extraArgs []string
}

// syncBuffer is a bytes.Buffer safe to read while a command writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func streams(out, errOut *syncBuffer) genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut}
}

// run runs the plugin with args and returns its stdout, stderr and error.
func (h *harness) run(args ...string) (string, string, error) {
	h.t.Helper()
	return h.runContext(context.Background(), args...)
}

func (h *harness) runContext(ctx context.Context, args ...string) (string, string, error) {
	out, errOut := &syncBuffer{}, &syncBuffer{}
	r, err := h.command(out, errOut)
	if err != nil {
		h.t.Fatalf("building the command: %v", err)
	}
	err = r.run(ctx, append(append([]string{}, r.extraArgs...), args...))
	return out.String(), errOut.String(), err
}

// create makes a valid ModelServer named name.
func (h *harness) create(name string) *v1alpha1.ModelServer {
	h.t.Helper()
	ms := &v1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: v1alpha1.ModelServerSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "server", Image: "vllm/vllm-openai:v0.9.2"},
			}}},
			Gateway: v1alpha1.GatewaySpec{ParentRefs: []gatewayv1.ParentReference{{Name: "inference"}}},
			Rollout: v1alpha1.RolloutSpec{Steps: []int32{10, 25, 50, 100}},
		},
	}
	if err := h.c.Create(context.Background(), ms); err != nil {
		h.t.Fatalf("creating modelserver %s: %v", name, err)
	}
	return ms
}

// get reads the ModelServer back.
// keep creates the ControllerRevision name holding tmpl, controlled by ms when controlled (as
// the controller records revisions), else owned by nobody.
func (h *harness) keep(ms *v1alpha1.ModelServer, name string, tmpl corev1.PodTemplateSpec, controlled bool) {
	h.t.Helper()
	data, err := json.Marshal(tmpl)
	if err != nil {
		h.t.Fatal(err)
	}
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}, Data: runtime.RawExtension{Raw: data}, Revision: 1}
	if controlled {
		cr.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ms, v1alpha1.GroupVersion.WithKind("ModelServer"))}
	}
	if err := h.c.Create(context.Background(), cr); err != nil {
		h.t.Fatalf("creating ControllerRevision %s: %v", name, err)
	}
}

func (h *harness) get(name string) *v1alpha1.ModelServer {
	h.t.Helper()
	ms := &v1alpha1.ModelServer{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, ms); err != nil {
		h.t.Fatalf("reading modelserver %s: %v", name, err)
	}
	return ms
}

// statusOption changes the status the test writes as the controller.
type statusOption func(*v1alpha1.ModelServerStatus)

func withStep(step int32, candidateWeight int32) statusOption {
	return func(st *v1alpha1.ModelServerStatus) {
		st.Rollout.Step = step
		st.Weights = v1alpha1.Weights{Stable: 100 - candidateWeight, Candidate: candidateWeight}
	}
}

func withObservedGeneration(delta int64) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.ObservedGeneration += delta }
}

func withStalledReason(reason string) statusOption {
	return func(st *v1alpha1.ModelServerStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionReconciling,
			Status: metav1.ConditionFalse, Reason: reason, ObservedGeneration: st.ObservedGeneration})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionStalled,
			Status: metav1.ConditionTrue, Reason: reason, Message: "image cannot be pulled", ObservedGeneration: st.ObservedGeneration})
	}
}

func withHistory(records ...v1alpha1.RevisionRecord) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.History = records }
}

// setStatus plays the controller: it writes the status of phase for the object's current
// generation, with stable rev-a on blue and, during a rollout, candidate rev-b on green.
func (h *harness) setStatus(name string, phase v1alpha1.Phase, opts ...statusOption) {
	h.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ms := h.get(name)
		st := v1alpha1.ModelServerStatus{
			ObservedGeneration: ms.Generation,
			Phase:              phase,
			Revision:           "rev-b",
			Stable:             &v1alpha1.ColorStatus{Color: v1alpha1.Blue, Revision: "rev-a", Image: "vllm/vllm-openai:v0.9.1", Replicas: 2, ReadyReplicas: 2},
			Weights:            v1alpha1.Weights{Stable: 100},
			Replicas:           2,
			ReadyReplicas:      2,
			Conditions:         plan.PhaseConditions(phase, ms.Generation),
		}
		switch phase {
		case v1alpha1.PhaseProgressing, v1alpha1.PhasePaused, v1alpha1.PhaseAwaitingPromotion, v1alpha1.PhaseRolledBack:
			st.Candidate = &v1alpha1.ColorStatus{Color: v1alpha1.Green, Revision: "rev-b", Image: "vllm/vllm-openai:v0.9.2", Replicas: 1, ReadyReplicas: 1, Warm: true}
			st.Replicas, st.ReadyReplicas = 3, 3
			if phase == v1alpha1.PhaseRolledBack {
				st.Rollout.RolledBackRevision = "rev-b"
			} else {
				st.Rollout.Step, st.Weights = 1, v1alpha1.Weights{Stable: 90, Candidate: 10}
			}
		case v1alpha1.PhaseHealthy:
			st.Stable = &v1alpha1.ColorStatus{Color: v1alpha1.Green, Revision: "rev-b", Image: "vllm/vllm-openai:v0.9.2", Replicas: 2, ReadyReplicas: 2}
		}
		for _, o := range opts {
			o(&st)
		}
		now := metav1.Now()
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = now
			st.Conditions[i].ObservedGeneration = st.ObservedGeneration
		}
		ms.Status = st
		return h.c.Status().Update(context.Background(), ms)
	})
	if err != nil {
		h.t.Fatalf("writing the status of %s: %v", name, err)
	}
}

func annotation(ms *v1alpha1.ModelServer, key string) (string, bool) {
	v, ok := ms.Annotations[key]
	return v, ok
}

// commandSuite is every subcommand's behaviour, run against a fake client and against envtest.
func commandSuite(t *testing.T, newHarness func(t *testing.T) *harness) {
	t.Run("get shows phase, revisions, candidate weight and replicas", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseProgressing, withStep(2, 25))
		out, _, err := h.run("get", "llama")
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("want a header and one row, got:\n%s", out)
		}
		for _, col := range []string{"NAME", "PHASE", "STABLE", "CANDIDATE", "WEIGHT", "REPLICAS", "AGE"} {
			if !strings.Contains(lines[0], col) {
				t.Errorf("header lacks %s: %q", col, lines[0])
			}
		}
		fields := strings.Fields(lines[1])
		want := []string{"llama", "Progressing", "rev-a", "rev-b", "25%", "3/3"}
		for i, w := range want {
			if i >= len(fields) || fields[i] != w {
				t.Fatalf("row = %q, want it to start with %v", lines[1], want)
			}
		}
	})

	t.Run("get of a missing ModelServer names it and its namespace", func(t *testing.T) {
		h := newHarness(t)
		_, _, err := h.run("get", "nope")
		want := `modelserver "nope" not found in namespace "` + h.ns + `"`
		if err == nil || err.Error() != want {
			t.Fatalf("err = %v, want %q", err, want)
		}
		if ExitCode(err) != ExitFailure {
			t.Errorf("exit code = %d, want %d", ExitCode(err), ExitFailure)
		}
	})

	t.Run("list -o json prints a ModelServerList that kubectl could read", func(t *testing.T) {
		h := newHarness(t)
		h.create("b-model")
		h.create("a-model")
		out, _, err := h.run("list", "-o", "json")
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		var list v1alpha1.ModelServerList
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("output is not a ModelServerList: %v\n%s", err, out)
		}
		if list.Kind != "ModelServerList" || len(list.Items) != 2 || list.Items[0].Name != "a-model" {
			t.Errorf("list = kind %q, %d items, first %q; want ModelServerList, 2, a-model", list.Kind, len(list.Items), list.Items[0].Name)
		}
	})

	t.Run("an unknown output format is refused", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		_, _, err := h.run("get", "llama", "-o", "wide")
		if err == nil || !strings.Contains(err.Error(), `unknown output format "wide"`) {
			t.Fatalf("err = %v, want an unknown output format error", err)
		}
	})

	t.Run("status shows the step, weights, colors, conditions and events of the rollout", func(t *testing.T) {
		h := newHarness(t)
		ms := h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseProgressing, withStep(2, 25))
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "llama.step", Namespace: h.ns},
			InvolvedObject: corev1.ObjectReference{Kind: "ModelServer", APIVersion: v1alpha1.GroupVersion.String(), Name: "llama", Namespace: h.ns, UID: h.get("llama").UID},
			Reason:         "StepAdvanced", Message: "step 2 of 4: candidate weight 25%", Type: corev1.EventTypeNormal,
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
			Source: corev1.EventSource{Component: "modelship"},
		}
		if err := h.c.Create(context.Background(), ev); err != nil {
			t.Fatalf("creating an event: %v", err)
		}
		_ = ms
		out, _, err := h.run("status", "llama")
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		for _, want := range []string{"Progressing, step 2 of 4 (25%)", "stable 75%, candidate 25%", "candidate  green", "rev-b",
			"Reconciling  True", "StepAdvanced", "step 2 of 4: candidate weight 25%"} {
			if !strings.Contains(out, want) {
				t.Errorf("status lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("status -o yaml prints the object", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseHealthy)
		out, _, err := h.run("status", "llama", "-o", "yaml")
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		if !strings.Contains(out, "kind: ModelServer") || !strings.Contains(out, "phase: Healthy") {
			t.Errorf("yaml lacks kind or phase:\n%s", out)
		}
	})

	t.Run("status --watch prints again when the status changes", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseProgressing, withStep(1, 10))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out, errOut := &syncBuffer{}, &syncBuffer{}
		done := make(chan error, 1)
		r, err := h.command(out, errOut)
		if err != nil {
			t.Fatal(err)
		}
		go func() { done <- r.run(ctx, append(r.extraArgs, "status", "llama", "--watch")) }()
		eventually(t, func() bool { return strings.Contains(out.String(), "step 1 of 4") })
		h.setStatus("llama", v1alpha1.PhaseProgressing, withStep(2, 25))
		eventually(t, func() bool { return strings.Contains(out.String(), "step 2 of 4") })
		cancel()
		if err := <-done; err != nil {
			t.Errorf("status --watch ended with %v after an interrupt, want nil", err)
		}
	})

	t.Run("pause sets spec.paused, twice is harmless, resume clears it", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseProgressing)
		out, _, err := h.run("pause", "llama")
		if err != nil || !h.get("llama").Spec.Paused {
			t.Fatalf("pause: err %v, paused %t", err, h.get("llama").Spec.Paused)
		}
		if !strings.Contains(out, "spec.paused=true") {
			t.Errorf("pause does not say what it set: %q", out)
		}
		rv := h.get("llama").ResourceVersion
		out, _, err = h.run("pause", "llama")
		if err != nil || !strings.Contains(out, "already paused") || h.get("llama").ResourceVersion != rv {
			t.Fatalf("second pause: err %v, out %q, object changed %t", err, out, h.get("llama").ResourceVersion != rv)
		}
		if _, _, err := h.run("resume", "llama"); err != nil || h.get("llama").Spec.Paused {
			t.Fatalf("resume: err %v, paused %t", err, h.get("llama").Spec.Paused)
		}
		out, _, err = h.run("resume", "llama")
		if err != nil || !strings.Contains(out, "already resumed") {
			t.Fatalf("second resume: err %v, out %q", err, out)
		}
	})

	t.Run("promote names the candidate revision and repeating it changes nothing", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseAwaitingPromotion, withStep(3, 50))
		out, _, err := h.run("promote", "llama")
		if err != nil {
			t.Fatalf("promote: %v", err)
		}
		if v, _ := annotation(h.get("llama"), v1alpha1.AnnotationPromote); v != "rev-b" {
			t.Fatalf("%s = %q, want rev-b", v1alpha1.AnnotationPromote, v)
		}
		if !strings.Contains(out, v1alpha1.AnnotationPromote+"=rev-b") {
			t.Errorf("promote does not print what it set: %q", out)
		}
		rv := h.get("llama").ResourceVersion
		out, _, err = h.run("promote", "llama")
		if err != nil || !strings.Contains(out, "nothing changed") || h.get("llama").ResourceVersion != rv {
			t.Fatalf("second promote: err %v, out %q", err, out)
		}
		if _, ok := annotation(h.get("llama"), v1alpha1.AnnotationPromoteFull); ok {
			t.Errorf("promote without --full set %s", v1alpha1.AnnotationPromoteFull)
		}
	})

	t.Run("promote --full sets the promote-full annotation", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseProgressing)
		if _, _, err := h.run("promote", "llama", "--full"); err != nil {
			t.Fatalf("promote --full: %v", err)
		}
		if v, _ := annotation(h.get("llama"), v1alpha1.AnnotationPromoteFull); v != "rev-b" {
			t.Fatalf("%s = %q, want rev-b", v1alpha1.AnnotationPromoteFull, v)
		}
	})

	t.Run("promote without a rollout in progress is refused and changes nothing", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseHealthy)
		_, _, err := h.run("promote", "llama")
		want := "cannot promote: modelserver llama is Healthy, no rollout in progress"
		if err == nil || err.Error() != want {
			t.Fatalf("err = %v, want %q", err, want)
		}
		if len(h.get("llama").Annotations) != 0 {
			t.Errorf("annotations set: %v", h.get("llama").Annotations)
		}
	})

	t.Run("promote of a missing ModelServer names it", func(t *testing.T) {
		h := newHarness(t)
		_, _, err := h.run("promote", "ghost")
		if err == nil || !strings.Contains(err.Error(), `modelserver "ghost" not found`) {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("abort names the candidate revision, twice is harmless", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhasePaused)
		for i := 0; i < 2; i++ {
			if _, _, err := h.run("abort", "llama"); err != nil {
				t.Fatalf("abort #%d: %v", i+1, err)
			}
		}
		if v, _ := annotation(h.get("llama"), v1alpha1.AnnotationAbort); v != "rev-b" {
			t.Fatalf("%s = %q, want rev-b", v1alpha1.AnnotationAbort, v)
		}
	})

	t.Run("abort after a rollback is refused", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseRolledBack)
		_, _, err := h.run("abort", "llama")
		if err == nil || err.Error() != "cannot abort: modelserver llama is RolledBack, no rollout in progress" {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("rollback during a rollout aborts it and warns GitOps users", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseProgressing)
		out, _, err := h.run("rollback", "llama")
		if err != nil {
			t.Fatalf("rollback: %v", err)
		}
		if v, _ := annotation(h.get("llama"), v1alpha1.AnnotationAbort); v != "rev-b" {
			t.Fatalf("%s = %q, want rev-b", v1alpha1.AnnotationAbort, v)
		}
		if !strings.Contains(out, "Git") {
			t.Errorf("rollback does not tell GitOps users that Git still names rev-b: %q", out)
		}
		if _, _, err := h.run("rollback", "llama", "--to-revision", "rev-a"); err != nil {
			t.Errorf("rollback to the stable revision named explicitly: %v", err)
		}
	})

	t.Run("rollback to a kept revision sets its template back and warns GitOps users", func(t *testing.T) {
		h := newHarness(t)
		ms := h.create("llama")
		old := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "vllm/vllm-openai:v0.8.0"}}}}
		rev := revision.Of(&old)
		h.keep(ms, v1alpha1.RevisionObjectName("llama", rev), old, true)
		h.setStatus("llama", v1alpha1.PhaseHealthy, withHistory(v1alpha1.RevisionRecord{
			Revision: rev, Image: "vllm/vllm-openai:v0.8.0", Outcome: v1alpha1.OutcomePromoted, At: metav1.Now()}))
		out, _, err := h.run("rollback", "llama", "--to-revision", rev)
		if err != nil {
			t.Fatalf("rollback: %v", err)
		}
		got := h.get("llama")
		if got.Spec.Template.Spec.Containers[0].Image != "vllm/vllm-openai:v0.8.0" || revision.Of(&got.Spec.Template) != rev {
			t.Fatalf("spec.template is revision %s with image %s, want %s", revision.Of(&got.Spec.Template), got.Spec.Template.Spec.Containers[0].Image, rev)
		}
		if !strings.Contains(out, "Git") {
			t.Errorf("rollback does not warn GitOps users: %q", out)
		}
		out, _, err = h.run("rollback", "llama", "--to-revision", rev)
		if err != nil || !strings.Contains(out, "nothing changed") {
			t.Errorf("a second rollback: err %v out %q, want nothing changed", err, out)
		}
	})

	t.Run("rollback refuses a ControllerRevision that is not the ModelServer's record of the revision", func(t *testing.T) {
		h := newHarness(t)
		ms := h.create("llama")
		old := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "vllm/vllm-openai:v0.8.0"}}}}
		planted := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "attacker/vllm-openai:v0.8.0"}}}}
		cases := []struct {
			name       string
			tmpl       corev1.PodTemplateSpec
			controlled bool
			want       string
		}{
			{"a record someone created under the name", old, false, "has no controller"},
			{"a record claiming the ModelServer as controller that holds another template", planted, true, "holds the template of revision " + revision.Of(&planted)},
		}
		for i, c := range cases {
			rev := revision.Of(&old)
			name := v1alpha1.RevisionObjectName("llama", rev)
			if i > 0 {
				if err := h.c.Delete(context.Background(), &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}); err != nil {
					t.Fatal(err)
				}
			}
			h.keep(ms, name, c.tmpl, c.controlled)
			h.setStatus("llama", v1alpha1.PhaseHealthy, withHistory(v1alpha1.RevisionRecord{
				Revision: rev, Image: "vllm/vllm-openai:v0.8.0", Outcome: v1alpha1.OutcomePromoted, At: metav1.Now()}))
			_, _, err := h.run("rollback", "llama", "--to-revision", rev)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: rollback error %v, want one containing %q", c.name, err, c.want)
			}
			if got := h.get("llama").Spec.Template.Spec.Containers[0].Image; got != "vllm/vllm-openai:v0.9.2" {
				t.Errorf("%s: spec.template now runs %s", c.name, got)
			}
		}
	})

	t.Run("rollback to a revision whose template is not kept is refused", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseHealthy, withHistory(v1alpha1.RevisionRecord{
			Revision: "rev-0", Image: "vllm/vllm-openai:v0.8.0", Outcome: v1alpha1.OutcomePromoted, At: metav1.Now()}))
		_, _, err := h.run("rollback", "llama", "--to-revision", "rev-0")
		if err == nil || !strings.Contains(err.Error(), "not kept") {
			t.Fatalf("err = %v, want a refusal saying the template is not kept", err)
		}
		if len(h.get("llama").Annotations) != 0 || h.get("llama").Spec.Template.Spec.Containers[0].Image != "vllm/vllm-openai:v0.9.2" {
			t.Errorf("the ModelServer changed: %+v", h.get("llama").Spec.Template.Spec.Containers[0])
		}
	})

	t.Run("rollback of a healthy ModelServer to its stable revision changes nothing", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseHealthy)
		out, _, err := h.run("rollback", "llama")
		if err != nil || !strings.Contains(out, "nothing changed") || len(h.get("llama").Annotations) != 0 {
			t.Fatalf("rollback: err %v, out %q, annotations %v", err, out, h.get("llama").Annotations)
		}
	})

	t.Run("history prints one row per record and yaml on request", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseHealthy, withHistory(
			v1alpha1.RevisionRecord{Revision: "rev-c", Image: "img:c", Outcome: v1alpha1.OutcomeRolledBack, Reason: "ttft-p95 0.9 > 0.4", At: metav1.Now()},
			v1alpha1.RevisionRecord{Revision: "rev-a", Image: "img:a", Outcome: v1alpha1.OutcomePromoted, At: metav1.Now()}))
		out, _, err := h.run("history", "llama")
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[1], "rev-c") || !strings.Contains(lines[1], "ttft-p95 0.9 > 0.4") {
			t.Fatalf("history:\n%s", out)
		}
		out, _, err = h.run("history", "llama", "-o", "yaml")
		if err != nil || !strings.Contains(out, "outcome: RolledBack") {
			t.Fatalf("history -o yaml: err %v\n%s", err, out)
		}
	})

	waitCases := []struct {
		name  string
		final func(h *harness)
		code  int
	}{
		{"wait exits 0 when the rollout of the current generation ends Healthy",
			func(h *harness) { h.setStatus("llama", v1alpha1.PhaseHealthy) }, ExitOK},
		{"wait exits 1 when the revision is rolled back",
			func(h *harness) { h.setStatus("llama", v1alpha1.PhaseRolledBack) }, ExitFailure},
		{"wait exits 1 when the ModelServer is stalled",
			func(h *harness) {
				h.setStatus("llama", v1alpha1.PhaseProgressing, withStalledReason(v1alpha1.ReasonInvalidSpec))
			}, ExitFailure},
		{"wait exits 3 when the rollout awaits promotion",
			func(h *harness) { h.setStatus("llama", v1alpha1.PhaseAwaitingPromotion, withStep(3, 50)) }, ExitNeedsHuman},
		{"wait exits 3 when the rollout is paused",
			func(h *harness) { h.setStatus("llama", v1alpha1.PhasePaused) }, ExitNeedsHuman},
	}
	for _, tc := range waitCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.create("llama")
			h.setStatus("llama", v1alpha1.PhaseProgressing, withStep(1, 10))
			out, errOut := &syncBuffer{}, &syncBuffer{}
			r, err := h.command(out, errOut)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				done <- r.run(context.Background(), append(r.extraArgs, "wait", "llama", "--timeout", "60s"))
			}()
			eventually(t, func() bool { return strings.Contains(out.String(), "Progressing, step 1 of 4") })
			h.setStatus("llama", v1alpha1.PhaseProgressing, withStep(2, 25))
			eventually(t, func() bool { return strings.Contains(out.String(), "step 2 of 4") })
			tc.final(h)
			select {
			case err := <-done:
				if got := ExitCode(err); got != tc.code {
					t.Fatalf("exit code = %d (%v), want %d\n%s", got, err, tc.code, out.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("wait did not end; output:\n%s", out.String())
			}
		})
	}

	t.Run("wait exits 2 on timeout", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseProgressing)
		_, _, err := h.run("wait", "llama", "--timeout", "1s")
		if ExitCode(err) != ExitTimeout || !strings.Contains(err.Error(), "timed out after 1s") {
			t.Fatalf("err = %v (exit %d), want a timeout (exit %d)", err, ExitCode(err), ExitTimeout)
		}
	})

	t.Run("wait does not trust a Healthy status of an older generation", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseHealthy, withObservedGeneration(-1))
		out, _, err := h.run("wait", "llama", "--timeout", "1s")
		if ExitCode(err) != ExitTimeout {
			t.Fatalf("err = %v (exit %d), want a timeout", err, ExitCode(err))
		}
		if !strings.Contains(out, "not observed yet") {
			t.Errorf("wait does not say the status is stale:\n%s", out)
		}
	})

	t.Run("wait --timeout 0 checks once", func(t *testing.T) {
		h := newHarness(t)
		h.create("llama")
		h.setStatus("llama", v1alpha1.PhaseHealthy)
		if _, _, err := h.run("wait", "llama", "--timeout", "0"); err != nil {
			t.Fatalf("wait on a Healthy ModelServer: %v", err)
		}
		h.setStatus("llama", v1alpha1.PhaseProgressing)
		if _, _, err := h.run("wait", "llama", "--timeout", "0"); ExitCode(err) != ExitTimeout {
			t.Fatalf("wait on a Progressing ModelServer: %v, want exit %d", err, ExitTimeout)
		}
	})

	t.Run("wait on a missing ModelServer fails at once", func(t *testing.T) {
		h := newHarness(t)
		_, _, err := h.run("wait", "ghost", "--timeout", "30s")
		if ExitCode(err) != ExitFailure || !strings.Contains(err.Error(), `modelserver "ghost" not found`) {
			t.Fatalf("err = %v", err)
		}
	})
}

// eventually polls cond for up to 20s.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
