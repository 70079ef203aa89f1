package workload

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/revision"
)

func modelServer() *v1alpha1.ModelServer {
	return &v1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llama"},
		Spec: v1alpha1.ModelServerSpec{
			Port:     8000,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.10.2"}}}},
		},
	}
}

func TestDeploymentWarmGate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		gate     bool
		userGate bool // the user's template already names the gate
		want     int  // readiness gates of the Deployment's pods
	}{
		{name: "pods carry the warm-up gate when asked", gate: true, want: 1},
		{name: "pods carry no gate otherwise", gate: false, want: 0},
		{name: "a template that names the gate gets it once", gate: true, userGate: true, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := modelServer()
			if tc.userGate {
				ms.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: v1alpha1.PodConditionWarm}}
			}
			spec := ms.Spec.Template.DeepCopy()
			rev := revision.Of(&ms.Spec.Template)
			d := Deployment(ms, v1alpha1.Green, rev, 2, tc.gate)
			gates := d.Spec.Template.Spec.ReadinessGates
			if len(gates) != tc.want || WarmGated(&d.Spec.Template.Spec) != (tc.want > 0) {
				t.Fatalf("readiness gates %+v, want %d warm-up gate(s)", gates, tc.want)
			}
			if !equality.Semantic.DeepEqual(spec, &ms.Spec.Template) || revision.Of(&ms.Spec.Template) != rev {
				t.Fatalf("building the Deployment changed spec.template (revision %s, was %s)", revision.Of(&ms.Spec.Template), rev)
			}
		})
	}
}
