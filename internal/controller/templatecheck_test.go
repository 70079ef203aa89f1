package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// stalledFor waits until ms is Stalled for reason with a message holding every string of want.
func stalledFor(t *testing.T, ms *v1alpha1.ModelServer, reason string, want ...string) {
	t.Helper()
	eventually(t, 20*time.Second, "Stalled "+reason, func() error {
		c := condition(getMS(t, ms), v1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
			return fmt.Errorf("Stalled %+v", c)
		}
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return fmt.Errorf("message %q does not say %q", c.Message, w)
			}
		}
		return nil
	})
}

// Given a serving ModelServer, when its template gets something the Deployment API refuses
// and CEL does not check (a mount of a volume the pod does not have), then it says so at once, Stalled
// with reason InvalidTemplate naming the field, and what serves keeps its template; when the
// template is fixed, the rollout starts.
func TestATemplateTheDeploymentAPIRefusesStallsTheModelServerAndLeavesWhatServes(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "tmplcheck")
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "blue Deployment", func() error { _, err := getDeployment(ns, "tmplcheck-blue"); return err })
	markReady(t, ns, "tmplcheck-blue")
	eventually(t, 20*time.Second, "Healthy", func() error {
		if p := getMS(t, ms).Status.Phase; p != v1alpha1.PhaseHealthy {
			return fmt.Errorf("phase %s", p)
		}
		return nil
	})
	before, err := getDeployment(ns, "tmplcheck-blue")
	if err != nil {
		t.Fatal(err)
	}

	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		c := &ms.Spec.Template.Spec.Containers[0]
		c.Image = "vllm/vllm-openai:v0.11.0"
		c.VolumeMounts = []corev1.VolumeMount{{Name: "weights", MountPath: "/models"}}
	})
	stalledFor(t, ms, v1alpha1.ReasonInvalidTemplate, "spec.template is refused by the Deployment API", "spec.template.spec.containers[0].volumeMounts[0].name", "Not found", "weights")
	got := getMS(t, ms)
	if c := condition(got, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonInvalidTemplate {
		t.Errorf("Ready %+v, want False with reason InvalidTemplate", c)
	}
	after, err := getDeployment(ns, "tmplcheck-blue")
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation || after.Spec.Template.Spec.Containers[0].Image != "vllm/vllm-openai:v0.10.2" {
		t.Errorf("the serving Deployment changed: generation %d -> %d, image %s", before.Generation, after.Generation, after.Spec.Template.Spec.Containers[0].Image)
	}
	if _, err := getDeployment(ns, "tmplcheck-green"); !apierrors.IsNotFound(err) {
		t.Errorf("a candidate Deployment was made for a refused template: %v", err)
	}
	if w, err := routeWeights(ns, ms); err != nil || w[v1alpha1.Blue] != 100 {
		t.Errorf("the route moved: %v %v", w, err)
	}

	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "weights", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	})
	eventually(t, 20*time.Second, "the fixed template's candidate", func() error {
		if _, err := getDeployment(ns, "tmplcheck-green"); err != nil {
			return err
		}
		if c := condition(getMS(t, ms), v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("still Stalled: %+v", c)
		}
		return nil
	})
}

// A ModelServer created with a template that admission cannot fully check (an upper-case name
// on its ninth container) makes no Deployment and says which field is wrong.
func TestAModelServerCreatedWithATemplateTheDeploymentAPIRefusesMakesNothing(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "ninth", func(ms *v1alpha1.ModelServer) {
		for i := range 8 {
			ms.Spec.Template.Spec.Containers = append(ms.Spec.Template.Spec.Containers, corev1.Container{Name: fmt.Sprintf("side-%d", i), Image: "busybox"})
		}
		ms.Spec.Template.Spec.Containers[8].Name = "Side-7"
	})
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatalf("admission refused what the dry run should report: %v", err)
	}
	stalledFor(t, ms, v1alpha1.ReasonInvalidTemplate, "spec.template.spec.containers[8].name", "Side-7")
	for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		if _, err := getDeployment(ns, ms.DeploymentName(c)); !apierrors.IsNotFound(err) {
			t.Errorf("Deployment %s: %v, want none", ms.DeploymentName(c), err)
		}
	}
}

// The dry run is sent once per template revision: passes over a refused template write nothing.
func TestARefusedTemplateIsNotSentAgainOnEveryPass(t *testing.T) {
	var w writeCounter
	r := manualReconciler(t, w.funcs())
	ms := newModelServer(manualNamespace, fmt.Sprintf("cpu-%d", time.Now().UnixNano()%1e6), func(ms *v1alpha1.ModelServer) {
		r := &ms.Spec.Template.Spec.Containers[0].Resources
		r.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
		r.Limits[corev1.ResourceCPU] = resource.MustParse("2")
	})
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	pass(t, r, ms)
	if c := condition(getMS(t, ms), v1alpha1.ConditionStalled); c == nil || c.Reason != v1alpha1.ReasonInvalidTemplate {
		t.Fatalf("Stalled %+v, want reason InvalidTemplate", c)
	}
	w.take()
	for range 3 {
		pass(t, r, ms)
	}
	if writes := w.take(); len(writes) != 0 {
		t.Errorf("passes over the same refused template wrote %d times: %v", len(writes), writes)
	}
}
