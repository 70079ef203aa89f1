package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/revision"
)

// plant creates, as someone who may create ControllerRevisions in the namespace, the
// ControllerRevision name holding tmpl with the ModelServer's labels and a high number,
// controlled by owner when it is not nil.
func plant(t *testing.T, ms *v1alpha1.ModelServer, name string, tmpl corev1.PodTemplateSpec, owner *v1alpha1.ModelServer) *appsv1.ControllerRevision {
	t.Helper()
	data, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ms.Namespace, Name: name,
			Labels: map[string]string{v1alpha1.LabelModelServer: ms.Name, v1alpha1.LabelRevision: "planted"}},
		Data: runtime.RawExtension{Raw: data}, Revision: 5000,
	}
	if owner != nil {
		cr.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, v1alpha1.GroupVersion.WithKind("ModelServer"))}
	}
	if err := k8s.Create(context.Background(), cr); err != nil {
		t.Fatalf("planting ControllerRevision %s: %v", name, err)
	}
	return cr
}

func getRevision(t *testing.T, ns, name string) *appsv1.ControllerRevision {
	t.Helper()
	cr := &appsv1.ControllerRevision{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cr); err != nil {
		t.Fatalf("reading ControllerRevision %s: %v", name, err)
	}
	return cr
}

// recordRevision keeps only the ModelServer's own records: a ControllerRevision someone else
// created under the revision's name is neither trusted nor taken over (nor is one bearing the
// ModelServer's labels numbered after or pruned), and one that claims the ModelServer as its
// controller but holds another template is replaced by the revision's own.
func TestRecordsRevisionsOnlyInControllerRevisionsTheModelServerOwns(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{})
	planted := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "attacker/vllm:latest"}}}}

	t.Run("a ControllerRevision someone else created under the name is left alone", func(t *testing.T) {
		ms := newModelServer(manualNamespace, fmt.Sprintf("squat-%d", time.Now().UnixNano()%1e6))
		if err := k8s.Create(context.Background(), ms); err != nil { // ms now holds the defaulted template
			t.Fatal(err)
		}
		name := v1alpha1.RevisionObjectName(ms.Name, revision.Of(&ms.Spec.Template))
		plant(t, ms, name, planted, nil)
		labelled := plant(t, ms, ms.Name+"-labelled", planted, nil)
		pass(t, r, ms)
		pass(t, r, ms)
		cr := getRevision(t, ms.Namespace, name)
		if len(cr.OwnerReferences) != 0 {
			t.Errorf("the planted ControllerRevision was taken over: owners %+v", cr.OwnerReferences)
		}
		if _, err := revision.Kept(cr, getMS(t, ms).UID, revision.Of(&ms.Spec.Template)); err == nil {
			t.Error("the planted ControllerRevision passes for the ModelServer's record")
		}
		if _, err := getDeployment(ms.Namespace, ms.DeploymentName(v1alpha1.Blue)); err != nil {
			t.Errorf("the ModelServer is not served: %v", err)
		}
		// A new revision is recorded, numbered after the ModelServer's own records only.
		setImage(t, ms, "vllm/vllm-openai:v0.11.0")
		pass(t, r, ms)
		got := getMS(t, ms)
		mine := getRevision(t, ms.Namespace, v1alpha1.RevisionObjectName(ms.Name, revision.Of(&got.Spec.Template)))
		if !metav1.IsControlledBy(mine, got) || mine.Revision != 1 {
			t.Errorf("the new revision's record: controlled %v, number %d; want controlled and 1 (not after the planted 5000)", metav1.IsControlledBy(mine, got), mine.Revision)
		}
		getRevision(t, ms.Namespace, labelled.Name)
	})

	t.Run("a record claiming the ModelServer as controller that holds another template is replaced", func(t *testing.T) {
		ms := newModelServer(manualNamespace, fmt.Sprintf("forged-%d", time.Now().UnixNano()%1e6))
		if err := k8s.Create(context.Background(), ms); err != nil {
			t.Fatal(err)
		}
		rev := revision.Of(&ms.Spec.Template)
		name := v1alpha1.RevisionObjectName(ms.Name, rev)
		forged := plant(t, ms, name, planted, ms)
		pass(t, r, ms)
		eventually(t, 10*time.Second, "the record replaced", func() error {
			pass(t, r, ms)
			cr := &appsv1.ControllerRevision{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ms.Namespace, Name: name}, cr); err != nil {
				return err
			}
			if cr.UID == forged.UID {
				return fmt.Errorf("still the forged record")
			}
			_, err := revision.Kept(cr, ms.UID, rev)
			return err
		})
	})
}
