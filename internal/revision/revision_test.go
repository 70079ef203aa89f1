package revision

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func template(image string, args ...string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: image, Args: args}}}}
}

func TestOf(t *testing.T) {
	a := Of(template("vllm:1", "--model", "x"))
	if len(a) != 10 {
		t.Fatalf("revision %q is not 10 characters", a)
	}
	if got := Of(template("vllm:1", "--model", "x")); got != a {
		t.Errorf("the same template gave %q then %q", a, got)
	}
	if got := Of(template("vllm:2", "--model", "x")); got == a {
		t.Errorf("a new image kept revision %q", got)
	}
	if got := Of(template("vllm:1", "--model", "y")); got == a {
		t.Errorf("new args kept revision %q", got)
	}
	withLabel := template("vllm:1", "--model", "x")
	withLabel.Labels = map[string]string{"team": "a"}
	if got := Of(withLabel); got == a {
		t.Errorf("a new pod label kept revision %q", got)
	}
}

func TestImage(t *testing.T) {
	if got := Image(template("vllm:1")); got != "vllm:1" {
		t.Errorf("Image = %q, want vllm:1", got)
	}
	if got := Image(&corev1.PodTemplateSpec{}); got != "" {
		t.Errorf("Image of an empty template = %q, want empty", got)
	}
}
