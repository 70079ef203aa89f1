package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/testenv"
	"github.com/modelship/modelship/internal/warmup"
)

// manualNamespace holds ModelServers that the running controller never sees (its cache leaves
// the namespace out): tests there drive passes themselves through Reconcile, with a client that
// can be made to fail.
const manualNamespace = "manual"

// manualReconciler returns a reconciler that reads and writes the API server directly (no
// cache) through funcs, and a namespace-unique name prefix.
func manualReconciler(t *testing.T, funcs interceptor.Funcs) *ModelServerReconciler {
	t.Helper()
	requireEnv(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: manualNamespace}}
	if err := k8s.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", manualNamespace, err)
	}
	scheme := testenv.Scheme()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &ModelServerReconciler{
		Client: interceptor.NewClient(c, funcs), Scheme: scheme, Recorder: &events.FakeRecorder{},
		Prober: warmup.NewHTTPProber(time.Second, ""), Now: time.Now,
	}
}

// pass runs one reconcile of ms and fails the test on an error.
func pass(t *testing.T, r *ModelServerReconciler, ms *v1alpha1.ModelServer) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
}

// manualRollout creates a ModelServer in manualNamespace, brings its first revision to Healthy
// on blue, changes the image and runs passes until the candidate on green holds step want
// (no Prometheus: analysis is inconclusive, so the rollout holds there). It returns the
// candidate revision.
func manualRollout(t *testing.T, r *ModelServerReconciler, ms *v1alpha1.ModelServer, want int32) string {
	t.Helper()
	fastRollout(ms)
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatalf("creating ModelServer: %v", err)
	}
	pass(t, r, ms)
	markReady(t, ms.Namespace, ms.DeploymentName(v1alpha1.Blue))
	pass(t, r, ms)
	if got := getMS(t, ms); got.Status.Phase != v1alpha1.PhaseHealthy {
		t.Fatalf("first revision: phase %s, want Healthy", got.Status.Phase)
	}
	setImage(t, ms, "vllm/vllm-openai:v0.11.0")
	for i := 0; i < 10; i++ {
		pass(t, r, ms)
		got := getMS(t, ms)
		if c := got.Status.Candidate; c != nil && got.Status.Rollout.Step == want {
			// At its step the candidate is sized to carry the next one at a stable pod's load
			// (as many pods as the stable color at 50%): they come up too.
			markReady(t, ms.Namespace, ms.DeploymentName(v1alpha1.Green))
			return c.Revision
		}
		if _, err := getDeployment(ms.Namespace, ms.DeploymentName(v1alpha1.Green)); err == nil {
			markReady(t, ms.Namespace, ms.DeploymentName(v1alpha1.Green))
		}
	}
	got := getMS(t, ms)
	t.Fatalf("candidate never reached step %d: phase %s step %d", want, got.Status.Phase, got.Status.Rollout.Step)
	return ""
}

var errInjected = errors.New("injected failure")

// failOnce fails the first call for which match returns true.
func failOnce(match func(client.Object) bool) func(client.Object) error {
	failed := false
	return func(o client.Object) error {
		if !failed && match(o) {
			failed = true
			return errInjected
		}
		return nil
	}
}

func isModelServer(o client.Object) bool { _, ok := o.(*v1alpha1.ModelServer); return ok }

func TestAbortIsNotLostWhenTheStatusWriteFailsOnce(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{})
	ms := newModelServer(manualNamespace, fmt.Sprintf("abort-%d", time.Now().UnixNano()%1e6))
	rev := manualRollout(t, r, ms, 0)
	updateMS(t, ms, func(m *v1alpha1.ModelServer) {
		metav1.SetMetaDataAnnotation(&m.ObjectMeta, v1alpha1.AnnotationAbort, rev)
	})

	statusFails := failOnce(isModelServer)
	failing := manualReconciler(t, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := statusFails(o); err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		},
	})
	if _, err := failing.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); !errors.Is(err, errInjected) {
		t.Fatalf("the pass whose status write failed returned %v", err)
	}
	if got := getMS(t, ms); got.Annotations[v1alpha1.AnnotationAbort] != rev {
		t.Fatalf("the abort annotation was removed although its status was never written: %v", got.Annotations)
	}

	pass(t, r, ms)
	got := getMS(t, ms)
	if got.Status.Phase != v1alpha1.PhaseRolledBack || len(got.Status.History) == 0 || got.Status.History[0].Outcome != v1alpha1.OutcomeAborted {
		t.Fatalf("the abort was lost: phase %s history %+v", got.Status.Phase, got.Status.History)
	}
	if _, ok := got.Annotations[v1alpha1.AnnotationAbort]; ok {
		t.Fatal("the abort annotation stayed after the abort was recorded")
	}
	if h := got.Status.Rollout.HandledOperation; h == nil || h.Annotation != v1alpha1.AnnotationAbort || h.Revision != rev {
		t.Fatalf("status.rollout.handledOperation = %+v, want the abort of %s", h, rev)
	}
	pass(t, r, ms)
	if h := getMS(t, ms).Status.Rollout.HandledOperation; h != nil {
		t.Fatalf("status.rollout.handledOperation = %+v after the annotation was gone, want none", h)
	}
}

func TestPromoteActsOnceWhenRemovingItsAnnotationFails(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{})
	ms := newModelServer(manualNamespace, fmt.Sprintf("promote-%d", time.Now().UnixNano()%1e6))
	rev := manualRollout(t, r, ms, 1)
	updateMS(t, ms, func(m *v1alpha1.ModelServer) {
		metav1.SetMetaDataAnnotation(&m.ObjectMeta, v1alpha1.AnnotationPromote, rev)
	})

	clearFails := failOnce(isModelServer)
	failing := manualReconciler(t, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			if err := clearFails(o); err != nil {
				return err
			}
			return c.Patch(ctx, o, p, opts...)
		},
	})
	if _, err := failing.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); !errors.Is(err, errInjected) {
		t.Fatalf("the pass whose annotation removal failed returned %v", err)
	}
	got := getMS(t, ms)
	if got.Status.Rollout.Step != 2 {
		t.Fatalf("promote did not move the rollout from step 1 to 2: step %d", got.Status.Rollout.Step)
	}
	if got.Annotations[v1alpha1.AnnotationPromote] != rev {
		t.Fatalf("the promote annotation is gone although removing it failed: %v", got.Annotations)
	}

	pass(t, r, ms)
	got = getMS(t, ms)
	if got.Status.Rollout.Step != 2 {
		t.Fatalf("the promote acted twice: step %d, want 2", got.Status.Rollout.Step)
	}
	if _, ok := got.Annotations[v1alpha1.AnnotationPromote]; ok {
		t.Fatal("the promote annotation stayed after it was recorded as handled")
	}
}

func TestWarmupNeverProbesAPodItsDeploymentDoesNotOwn(t *testing.T) {
	var probes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		probes.Add(1)
		_, _ = w.Write([]byte(`{"data":[]}`))
	}))
	defer srv.Close()
	r := manualReconciler(t, interceptor.Funcs{})
	r.Prober = warmup.NewHTTPProber(time.Second, srv.URL+"/{namespace}/{pod}/{path}")
	ms := newModelServer(manualNamespace, fmt.Sprintf("warm-%d", time.Now().UnixNano()%1e6))
	ms.Spec.Rollout.Warmup = &v1alpha1.WarmupSpec{Path: "/v1/models"}
	rev := manualRollout(t, r, ms, 0)

	// A tenant's pod with the candidate's labels, Ready, owned by nothing of ours.
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: manualNamespace, Name: ms.Name + "-green-tenant", Labels: map[string]string{
			v1alpha1.LabelModelServer: ms.Name, v1alpha1.LabelColor: string(v1alpha1.Green), v1alpha1.LabelRevision: rev}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{PodIP: "169.254.169.254", Conditions: []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The candidate's Deployment reports its pods Ready: warm-up is the only thing left.
	markReady(t, manualNamespace, ms.DeploymentName(v1alpha1.Green))
	for i := 0; i < 3; i++ {
		pass(t, r, ms)
	}
	if n := probes.Load(); n != 0 {
		t.Fatalf("the prober reached a pod our Deployment does not own %d times", n)
	}
	got := getMS(t, ms)
	if got.Status.Rollout.Step != 0 || got.Status.Candidate == nil || got.Status.Candidate.Warm {
		t.Fatalf("the candidate counted as warm from a foreign pod: step %d candidate %+v", got.Status.Rollout.Step, got.Status.Candidate)
	}
}

// terminating is the API server's answer to a create in a namespace being deleted.
func terminating(o client.Object) error {
	err := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "controllerrevisions"}, o.GetName(),
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", o.GetNamespace()))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace is being terminated", Field: "metadata.namespace"})
	return err
}

// A ModelServer whose namespace is being deleted goes away with everything in it: a pass that
// cannot create what it records (the revision, the last valid spec) there is no failure to
// retry with backoff and log as a reconciler error (the real bench logged five when it deleted
// a scenario's namespace).
func TestANamespaceBeingDeletedIsNoReconcileError(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			if _, ok := o.(*appsv1.ControllerRevision); ok {
				return terminating(o)
			}
			return c.Create(ctx, o, opts...)
		},
	})
	ms := newModelServer(manualNamespace, fmt.Sprintf("ending-%d", time.Now().UnixNano()%1e6))
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); err != nil {
			t.Fatalf("pass %d in a namespace being deleted: %v", i+1, err)
		}
	}
}
