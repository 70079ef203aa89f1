package revision

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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

func TestKeptTrustsOnlyTheModelServersOwnRecordOfTheRevision(t *testing.T) {
	const owner = types.UID("ms-uid")
	tmpl := template("vllm:1", "--model", "x")
	rev := Of(tmpl)
	data, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	other, err := json.Marshal(template("attacker/vllm:1"))
	if err != nil {
		t.Fatal(err)
	}
	record := func(raw []byte, refs ...metav1.OwnerReference) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "llama-" + rev, OwnerReferences: refs}, Data: runtime.RawExtension{Raw: raw}}
	}
	controller := func(uid types.UID) metav1.OwnerReference {
		return metav1.OwnerReference{Kind: "ModelServer", Name: "llama", UID: uid, Controller: ptr.To(true)}
	}
	cases := []struct {
		name    string
		cr      *appsv1.ControllerRevision
		wantErr string // empty: trusted
	}{
		{"the ModelServer's own record of the revision", record(data, controller(owner)), ""},
		{"a record nobody controls (created by hand under the name)", record(data), "has no controller"},
		{"a record another object controls", record(data, controller("other-uid")), "not by the ModelServer"},
		{"a record that only lists the ModelServer as an owner", record(data, metav1.OwnerReference{Kind: "ModelServer", Name: "llama", UID: owner}), "has no controller"},
		{"a record with the ModelServer as controller but another template", record(other, controller(owner)), "not " + rev},
		{"a record whose data is not a template", record([]byte(`"x"`), controller(owner)), "does not hold a pod template"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Kept(tc.cr, owner, rev)
			if tc.wantErr == "" {
				if err != nil || Of(got) != rev {
					t.Fatalf("Kept = %v, %v; want the template of %s", got, err, rev)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Kept error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
