package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/revision"
	"github.com/modelship/modelship/internal/routing"
)

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func getDeployment(ns, name string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d)
}

func getRoute(ns, name string) (*gatewayv1.HTTPRoute, error) {
	r := &gatewayv1.HTTPRoute{}
	return r, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, r)
}

func ownedBy(obj metav1.Object, ms *v1alpha1.ModelServer) error {
	for _, o := range obj.GetOwnerReferences() {
		if o.UID == ms.UID && ptr.Deref(o.Controller, false) {
			return nil
		}
	}
	return fmt.Errorf("%s has no controller owner reference to the ModelServer", obj.GetName())
}

// routeWeights reads blue/green weights from a route.
func routeWeights(ns string, ms *v1alpha1.ModelServer) (map[v1alpha1.Color]int32, error) {
	r, err := getRoute(ns, ms.RouteName())
	if err != nil {
		return nil, err
	}
	return routing.Weights(r, ms), nil
}

func TestServesOneVersionThroughADeploymentServicesAndAnHTTPRoute(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "llama")
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatalf("creating ModelServer: %v", err)
	}

	// Given a ModelServer, the blue Deployment runs its template with the GPUs it asks for.
	eventually(t, 20*time.Second, "blue Deployment created", func() error {
		d, err := getDeployment(ns, "llama-blue")
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 2 {
			return fmt.Errorf("replicas %d, want 2", *d.Spec.Replicas)
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != "vllm/vllm-openai:v0.10.2" || c.Resources.Limits.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 1 {
			return fmt.Errorf("template not copied: %s %v", c.Image, c.Resources.Limits)
		}
		l := d.Spec.Template.Labels
		if l[v1alpha1.LabelModelServer] != "llama" || l[v1alpha1.LabelColor] != "blue" || l[v1alpha1.LabelRevision] == "" {
			return fmt.Errorf("pod labels %v", l)
		}
		return ownedBy(d, getMS(t, ms))
	})
	// One Service per color, owned.
	for _, c := range []string{"blue", "green"} {
		eventually(t, 10*time.Second, c+" Service", func() error {
			s := &corev1.Service{}
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama-" + c}, s); err != nil {
				return err
			}
			if s.Spec.Selector[v1alpha1.LabelColor] != c || s.Spec.Ports[0].Port != 8000 {
				return fmt.Errorf("service %v %v", s.Spec.Selector, s.Spec.Ports)
			}
			return ownedBy(s, getMS(t, ms))
		})
	}
	// The route sends 100% to blue, attached to the Gateway with the hostnames.
	eventually(t, 10*time.Second, "route with 100% on blue", func() error {
		r, err := getRoute(ns, "llama")
		if err != nil {
			return err
		}
		if r.Spec.ParentRefs[0].Name != "inference-gateway" || r.Spec.Hostnames[0] != "llm.example.com" {
			return fmt.Errorf("parentRefs %v hostnames %v", r.Spec.ParentRefs, r.Spec.Hostnames)
		}
		w := routing.Weights(r, ms)
		if w[v1alpha1.Blue] != 100 || w[v1alpha1.Green] != 0 {
			return fmt.Errorf("weights %v", w)
		}
		return ownedBy(r, getMS(t, ms))
	})
	// Not Ready until the Deployment is available; the route's acceptance is Unknown. (The
	// status may be written a moment after the route: wait for the condition, then judge it.)
	eventually(t, 10*time.Second, "a Ready condition", func() error {
		if condition(getMS(t, ms), v1alpha1.ConditionReady) == nil {
			return fmt.Errorf("no Ready condition yet")
		}
		return nil
	})
	got := getMS(t, ms)
	if c := condition(got, v1alpha1.ConditionReady); c == nil || c.Status == metav1.ConditionTrue {
		t.Fatalf("Ready before the Deployment is available: %+v", c)
	}
	markReady(t, ns, "llama-blue")
	eventually(t, 10*time.Second, "Ready and Healthy", func() error {
		got := getMS(t, ms)
		c := condition(got, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || got.Status.Phase != v1alpha1.PhaseHealthy {
			return fmt.Errorf("phase %s ready %+v", got.Status.Phase, c)
		}
		if got.Status.ObservedGeneration != got.Generation || got.Status.Stable == nil || got.Status.Stable.Color != v1alpha1.Blue {
			return fmt.Errorf("status %+v", got.Status)
		}
		if got.Status.Replicas != 2 || got.Status.ReadyReplicas != 2 || got.Status.Selector == "" {
			return fmt.Errorf("replicas %d ready %d selector %q", got.Status.Replicas, got.Status.ReadyReplicas, got.Status.Selector)
		}
		if ra := condition(got, v1alpha1.ConditionRouteAccepted); ra == nil || ra.Status != metav1.ConditionUnknown {
			return fmt.Errorf("RouteAccepted should be Unknown while no Gateway answered: %+v", ra)
		}
		return nil
	})
	// A Gateway controller accepts the route: the condition follows.
	r, err := getRoute(ns, "llama")
	if err != nil {
		t.Fatal(err)
	}
	r.Status.Parents = []gatewayv1.RouteParentStatus{{
		ParentRef: r.Spec.ParentRefs[0], ControllerName: "example.com/gateway",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now()}},
	}}
	if err := k8s.Status().Update(ctx, r); err != nil {
		t.Fatalf("updating route status: %v", err)
	}
	eventually(t, 10*time.Second, "RouteAccepted True", func() error {
		if ra := condition(getMS(t, ms), v1alpha1.ConditionRouteAccepted); ra == nil || ra.Status != metav1.ConditionTrue {
			return fmt.Errorf("%+v", ra)
		}
		return nil
	})
	// kubectl scale goes through the /scale subresource.
	scale := &autoscalingv1.Scale{}
	if err := k8s.SubResource("scale").Get(ctx, getMS(t, ms), scale); err != nil {
		t.Fatalf("getting /scale: %v", err)
	}
	if scale.Spec.Replicas != 2 || scale.Status.Selector == "" {
		t.Errorf("/scale = %+v", scale)
	}
	scale.Spec.Replicas = 3
	if err := k8s.SubResource("scale").Update(ctx, getMS(t, ms), client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("updating /scale: %v", err)
	}
	eventually(t, 10*time.Second, "Deployment follows /scale", func() error {
		d, err := getDeployment(ns, "llama-blue")
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 3 {
			return fmt.Errorf("replicas %d", *d.Spec.Replicas)
		}
		return nil
	})
}

func TestRepairsDriftOnOwnedObjects(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "drift")
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "route created", func() error { _, err := getRoute(ns, "drift"); return err })

	// Someone edits the Deployment's image and replicas by hand, and the route's weights.
	eventually(t, 10*time.Second, "edit the Deployment by hand", func() error {
		d, err := getDeployment(ns, "drift-blue")
		if err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To(int32(7))
		d.Spec.Template.Spec.Containers[0].Image = "evil:latest"
		return k8s.Update(ctx, d)
	})
	eventually(t, 10*time.Second, "edit the route by hand", func() error {
		r, err := getRoute(ns, "drift")
		if err != nil {
			return err
		}
		for i := range r.Spec.Rules[0].BackendRefs {
			r.Spec.Rules[0].BackendRefs[i].Weight = ptr.To(int32(50))
		}
		return k8s.Update(ctx, r)
	})
	// And deletes a Service.
	if err := k8s.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "drift-green"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "drift repaired", func() error {
		d, err := getDeployment(ns, "drift-blue")
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != "vllm/vllm-openai:v0.10.2" {
			return fmt.Errorf("deployment still %d %s", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
		}
		w, err := routeWeights(ns, ms)
		if err != nil {
			return err
		}
		if w[v1alpha1.Blue] != 100 || w[v1alpha1.Green] != 0 {
			return fmt.Errorf("weights %v", w)
		}
		return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "drift-green"}, &corev1.Service{})
	})
}

func TestUserOwnedRouteOnlyHasOurBackendRefsEdited(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	createUserRoute(t, ns)
	ms := newModelServer(ns, "llama", func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway = v1alpha1.GatewaySpec{RouteRef: &v1alpha1.RouteReference{Name: "shared", RuleName: ptr.To(gatewayv1.SectionName("llm"))}}
	})
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "our backends in the llm rule", func() error {
		r, err := getRoute(ns, "shared")
		if err != nil {
			return err
		}
		llm := r.Spec.Rules[1]
		if len(llm.BackendRefs) != 2 || len(llm.Filters) != 1 {
			return fmt.Errorf("llm rule %+v", llm)
		}
		w := routing.Weights(&gatewayv1.HTTPRoute{Spec: gatewayv1.HTTPRouteSpec{Rules: []gatewayv1.HTTPRouteRule{llm}}}, ms)
		if w[v1alpha1.Blue] != 100 || w[v1alpha1.Green] != 0 {
			return fmt.Errorf("weights %v", w)
		}
		if docs := r.Spec.Rules[0]; len(docs.BackendRefs) != 1 || docs.BackendRefs[0].Name != "legacy" || *docs.Matches[0].Path.Value != "/docs" {
			return fmt.Errorf("the docs rule changed: %+v", docs)
		}
		if len(r.OwnerReferences) != 0 {
			return fmt.Errorf("modelship took ownership of the user's route")
		}
		return nil
	})
	// Deleting the ModelServer takes our backends out of the user's route and nothing else.
	if err := k8s.Delete(ctx, getMS(t, ms)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "backends removed and ModelServer gone", func() error {
		r, err := getRoute(ns, "shared")
		if err != nil {
			return err
		}
		if len(r.Spec.Rules[1].BackendRefs) != 0 || len(r.Spec.Rules[0].BackendRefs) != 1 {
			return fmt.Errorf("rules %+v", r.Spec.Rules)
		}
		err = k8s.Get(ctx, client.ObjectKeyFromObject(ms), &v1alpha1.ModelServer{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("ModelServer still there: %v", err)
		}
		return nil
	})
}

// Admission refuses what it can (see admission_test.go); this is what it cannot: a query the
// controller's query policy (namespaced, in these tests) does not run, for want of a namespace.
func TestAQueryThePolicyRefusesStallsWithoutDisturbingServing(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "tmpl")
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "serving", func() error { _, err := getDeployment(ns, "tmpl-blue"); return err })
	markReady(t, ns, "tmpl-blue")
	updateMS(t, ms, func(got *v1alpha1.ModelServer) {
		got.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:v0.11.0"
		got.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "bad", Query: `up{pod=~"{{.Pods}}"}`, Max: ptr.To(mustQuantity("1"))}}
	})
	eventually(t, 20*time.Second, "Stalled with the field named", func() error {
		c := condition(getMS(t, ms), v1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, "spec.rollout.analysis.metrics[bad].query") {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	// Nothing moved: no green Deployment, the route still sends everything to blue.
	if _, err := getDeployment(ns, "tmpl-green"); !apierrors.IsNotFound(err) {
		t.Errorf("a candidate was started from an invalid spec: %v", err)
	}
	if w, err := routeWeights(ns, ms); err != nil || w[v1alpha1.Blue] != 100 {
		t.Errorf("weights %v %v", w, err)
	}
}

func TestDefaultsAreFilledAtAdmission(t *testing.T) {
	ns := newNamespace(t)
	ms := newModelServer(ns, "defaults", func(ms *v1alpha1.ModelServer) { ms.Spec.Replicas = nil })
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	got := getMS(t, ms)
	r := got.Spec.Rollout
	if fmt.Sprint(r.Steps) != "[10 25 50 100]" || r.StepDuration.Duration != 2*time.Minute || r.ScaleDownDelay.Duration != 10*time.Minute ||
		!ptr.Deref(r.AutoPromote, false) || r.FailureLimit != 0 || r.Analysis.Preset != v1alpha1.AnalysisPresetVLLM ||
		r.Analysis.MinSamples != 20 || r.Analysis.Interval.Duration != 30*time.Second || got.Spec.Port != 8000 || ptr.Deref(got.Spec.Replicas, 0) != 1 {
		t.Errorf("defaults not filled: replicas %v port %d rollout %+v", got.Spec.Replicas, got.Spec.Port, r)
	}
}

func TestKeepsEachRevisionsTemplateForRollback(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "keep")
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	kept := func(image string) error {
		var list appsv1.ControllerRevisionList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelModelServer: "keep"}); err != nil {
			return err
		}
		for _, cr := range list.Items {
			var tmpl corev1.PodTemplateSpec
			if err := json.Unmarshal(cr.Data.Raw, &tmpl); err != nil {
				return fmt.Errorf("ControllerRevision %s: %w", cr.Name, err)
			}
			if tmpl.Spec.Containers[0].Image == image {
				if cr.Name != v1alpha1.RevisionObjectName("keep", revision.Of(&tmpl)) || cr.Labels[v1alpha1.LabelRevision] != revision.Of(&tmpl) {
					return fmt.Errorf("ControllerRevision %s is not named after its template's revision %s", cr.Name, revision.Of(&tmpl))
				}
				return ownedBy(&cr, getMS(t, ms))
			}
		}
		return fmt.Errorf("no ControllerRevision keeps the template with %s among %d", image, len(list.Items))
	}
	eventually(t, 20*time.Second, "first template kept", func() error { return kept("vllm/vllm-openai:v0.10.2") })
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:v0.11.0" })
	eventually(t, 20*time.Second, "second template kept", func() error { return kept("vllm/vllm-openai:v0.11.0") })
	if err := kept("vllm/vllm-openai:v0.10.2"); err != nil {
		t.Errorf("the first template is gone: %v", err)
	}
}
