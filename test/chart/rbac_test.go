package chart

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/controller"
	"github.com/modelship/modelship/internal/harness/testenv"
)

// TestTheChartAppliesAndItsServiceAccountRunsTheControllerWithLeastPrivilege applies the
// rendered chart (namespaced mode) to a real kube-apiserver, then runs modelship's reconciler
// authenticated as the chart's ServiceAccount (impersonated) and checks what it may and may not do.
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

	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":modelship",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	as, err := client.New(sa, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]func() error{
		"reading Secrets in a watched namespace": func() error {
			return as.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "any"}, &corev1.Secret{})
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
	}
	for what, try := range refused {
		if err := try(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as the chart's ServiceAccount: %v, want Forbidden", what, err)
		}
	}
	if err := as.List(ctx, &corev1.NodeList{}); err != nil {
		t.Errorf("listing nodes (the GPU capacity check) as the ServiceAccount: %v", err)
	}

	// The reconciler itself, as the ServiceAccount, in namespaced mode, serves a ModelServer.
	mgr, err := ctrl.NewManager(sa, ctrl.Options{Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: controller.CacheOptions("team-a", "team-b")})
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
}
