package chart

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/cmd/modelship-controller/manager"
	"github.com/modelship/modelship/internal/controller"
	"github.com/modelship/modelship/internal/testenv"
)

// TestTheChartAppliesAndItsServiceAccountRunsTheControllerWithLeastPrivilege applies the
// rendered chart (namespaced mode) to a real kube-apiserver, then runs modelship's reconciler
// authenticated as the chart's ServiceAccount (a TokenRequest token): it serves a ModelServer and
// rolls a new version out to the end, and is refused what it must not do.
func TestTheChartAppliesAndItsServiceAccountRunsTheControllerWithLeastPrivilege(t *testing.T) {
	if ok, why := testenv.Available(); !ok {
		t.Skip(why)
	}
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	admin, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{namespace, "team-a", "team-b", "team-c"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := render(load(t), map[string]any{"watchNamespaces": []any{"team-a", "team-b"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objects(t, out) {
		// Server-side dry run first: the API server validates every object as rendered.
		if err := admin.Patch(ctx, o.DeepCopy(), client.Apply, client.FieldOwner("helm"), client.DryRunAll); err != nil { //nolint:staticcheck // unstructured apply
			t.Errorf("%s %s/%s does not apply: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			continue
		}
		if err := admin.Patch(ctx, o, client.Apply, client.FieldOwner("helm")); err != nil { //nolint:staticcheck // unstructured apply
			t.Errorf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Authenticated as the chart's ServiceAccount with a token from the TokenRequest API, as a
	// pod running it would be.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "modelship",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for the chart's ServiceAccount: %v", err)
	}
	sa := rest.AnonymousClientConfig(cfg)
	sa.BearerToken = tr.Status.Token
	as, err := client.New(sa, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]func() error{
		// Webhook URLs come from Secrets the ModelServer names, read one by one in its own
		// namespace: the controller may get a Secret there, never list or watch them, and
		// nothing outside the watched namespaces.
		"listing Secrets in a watched namespace": func() error {
			return as.List(ctx, &corev1.SecretList{}, client.InNamespace("team-a"))
		},
		"reading a Secret outside the watched namespaces": func() error {
			return as.Get(ctx, client.ObjectKey{Namespace: "team-c", Name: "any"}, &corev1.Secret{})
		},
		"creating a Deployment outside the watched namespaces": func() error {
			return as.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-c", Name: "x"},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}, client.DryRunAll)
		},
		"listing ModelServers cluster-wide": func() error { return as.List(ctx, &v1alpha1.ModelServerList{}) },
		"deleting a node": func() error {
			return as.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, client.DryRunAll)
		},
		"creating a Lease in a watched namespace": func() error {
			return as.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x"}}, client.DryRunAll)
		},
		"reading kube-node-lease's Leases": func() error {
			return as.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace("kube-node-lease"))
		},
	}
	for what, try := range refused {
		if err := try(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as the chart's ServiceAccount: %v, want Forbidden", what, err)
		}
	}
	if err := as.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "any"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("reading a named Secret (a webhook URL) in a watched namespace as the ServiceAccount: %v, want NotFound (allowed)", err)
	}
	if err := as.List(ctx, &corev1.NodeList{}); err != nil {
		t.Errorf("listing nodes (the GPU capacity check) as the ServiceAccount: %v", err)
	}
	if err := as.List(ctx, &gatewayv1.GatewayClassList{}); err != nil {
		t.Errorf("listing GatewayClasses (whether a Gateway mirrors, spec.rollout.shadow) as the ServiceAccount: %v", err)
	}
	if err := as.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "modelship-controller.serving.modelship.dev"}}, client.DryRunAll); err != nil {
		t.Errorf("creating the leader election Lease in its own namespace as the ServiceAccount: %v", err)
	}
	// The warm-up gate: a pod's status is patched in the watched namespaces only (authorization
	// comes first: a pod that does not exist is NotFound when allowed).
	warm := client.RawPatch(types.StrategicMergePatchType, []byte(`{"status":{"conditions":[{"type":"serving.modelship.dev/warm","status":"True"}]}}`))
	for ns, allowed := range map[string]bool{"team-a": true, "team-c": false} {
		err := as.Status().Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "absent"}}, warm)
		if allowed && !apierrors.IsNotFound(err) || !allowed && !apierrors.IsForbidden(err) {
			t.Errorf("patching a pod's warm-up condition in %s as the ServiceAccount: %v, want allowed %t", ns, err, allowed)
		}
	}

	// The reconciler itself, as the ServiceAccount, in namespaced mode, serves a ModelServer.
	mgr, err := ctrl.NewManager(sa, ctrl.Options{Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: manager.CacheOptions("team-a", "team-b")})
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.ModelServerReconciler{Client: mgr.GetClient(), LiveReader: mgr.GetAPIReader(), Scheme: testenv.Scheme(),
		Recorder: mgr.GetEventRecorder("modelship"), Now: time.Now}
	mctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	if err := r.SetupWithManager(mctx, mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(mctx) }()
	ms := &v1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "llama"},
		Spec: v1alpha1.ModelServerSpec{
			Replicas: ptr.To(int32(1)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.10.2",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}}}}},
			Gateway: v1alpha1.GatewaySpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
		},
	}
	if err := admin.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		err := func() error {
			for _, o := range []client.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "llama-blue"}},
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "llama-blue"}}, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "llama"}}} {
				if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: o.GetName()}, o); err != nil {
					return fmt.Errorf("%T %s: %w", o, o.GetName(), err)
				}
			}
			got := &v1alpha1.ModelServer{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
				return err
			}
			if got.Status.ObservedGeneration != got.Generation || got.Status.Phase == "" {
				return fmt.Errorf("status not written yet: %+v", got.Status)
			}
			return nil
		}()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller running as the chart's ServiceAccount did not serve the ModelServer: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A whole rollout, still as the ServiceAccount: the stable Deployment becomes ready, a new
	// image makes a candidate on the other color, and a person's promote --full (the
	// annotation) moves all traffic to it and makes it stable.
	markReady(t, admin, "team-a", "llama-blue")
	eventually(t, 30*time.Second, "Healthy on blue", func() error {
		got := &v1alpha1.ModelServer{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return err
		}
		if got.Status.Phase != v1alpha1.PhaseHealthy {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		got.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:v0.11.0"
		return admin.Update(ctx, got)
	})
	eventually(t, 30*time.Second, "a candidate on green", func() error {
		got := &v1alpha1.ModelServer{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return err
		}
		if c := got.Status.Candidate; c == nil || c.Color != v1alpha1.Green {
			return fmt.Errorf("candidate %+v", c)
		}
		return nil
	})
	markReady(t, admin, "team-a", "llama-green")
	eventually(t, 30*time.Second, "the promote --full annotation", func() error {
		got := &v1alpha1.ModelServer{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return err
		}
		if got.Status.Candidate == nil {
			return fmt.Errorf("no candidate")
		}
		metav1.SetMetaDataAnnotation(&got.ObjectMeta, v1alpha1.AnnotationPromoteFull, got.Status.Candidate.Revision)
		return admin.Update(ctx, got)
	})
	eventually(t, 45*time.Second, "green promoted with all traffic", func() error {
		got := &v1alpha1.ModelServer{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return err
		}
		st := got.Status
		if st.Stable == nil || st.Stable.Color != v1alpha1.Green || st.Candidate != nil {
			return fmt.Errorf("phase %s stable %+v candidate %+v", st.Phase, st.Stable, st.Candidate)
		}
		route := &gatewayv1.HTTPRoute{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "llama"}, route); err != nil {
			return err
		}
		for _, b := range route.Spec.Rules[0].BackendRefs {
			if w := ptr.Deref(b.Weight, 1); (string(b.Name) == "llama-green") != (w == 100) {
				return fmt.Errorf("route weights %s=%d", b.Name, w)
			}
		}
		return nil
	})
}

// eventually retries cond every 200ms until it passes, failing the test with its last error
// after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// markReady plays the Deployment controller (envtest runs none): the Deployment reports all its
// replicas ready and available for its current generation.
func markReady(t *testing.T, admin client.Client, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, "mark "+name+" ready", func() error {
		d := &appsv1.Deployment{}
		if err := admin.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, ReadyReplicas: n, AvailableReplicas: n, UpdatedReplicas: n}
		return admin.Status().Update(t.Context(), d)
	})
}
