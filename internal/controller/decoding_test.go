package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

const modelServerCRD = "modelservers.serving.modelship.dev"

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// withoutStepDurationRule installs the ModelServer CRD without its stepDuration rule (as an
// older CRD had it), runs stored, and puts the rule back, waiting until the API server
// refuses "2 minutes" again so that later tests see the real CRD.
func withoutStepDurationRule(t *testing.T, ns string, stored func()) {
	t.Helper()
	ctx := context.Background()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := k8s.Get(ctx, client.ObjectKey{Name: modelServerCRD}, crd); err != nil {
		t.Fatal(err)
	}
	original := crd.DeepCopy()
	stepDuration := []string{"spec", "versions"}
	versions, _, _ := unstructured.NestedSlice(crd.Object, stepDuration...)
	path := []string{"schema", "openAPIV3Schema", "properties", "spec", "properties", "rollout", "properties", "stepDuration"}
	v0 := versions[0].(map[string]any)
	unstructured.RemoveNestedField(v0, append(path, "x-kubernetes-validations")...)
	if err := unstructured.SetNestedSlice(crd.Object, versions, stepDuration...); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Update(ctx, crd); err != nil {
		t.Fatalf("installing the older CRD: %v", err)
	}
	restore := func() {
		eventually(t, 10*time.Second, "put the CRD back", func() error {
			now := &unstructured.Unstructured{}
			now.SetGroupVersionKind(crdGVK)
			if err := k8s.Get(ctx, client.ObjectKey{Name: modelServerCRD}, now); err != nil {
				return err
			}
			now.Object["spec"] = original.Object["spec"]
			return k8s.Update(ctx, now)
		})
		eventually(t, 20*time.Second, "the API server refuses 2 minutes again", func() error {
			probe := badStepDuration(ns, "probe")
			err := k8s.Create(ctx, probe)
			if err == nil {
				_ = k8s.Delete(ctx, probe)
				return fmt.Errorf("still accepted")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.rollout.stepDuration") || !strings.Contains(err.Error(), "must be a duration such as") {
				return fmt.Errorf("refused for another reason: %w", err)
			}
			return nil
		})
	}
	defer restore()
	stored()
}

// badStepDuration is a ModelServer whose stepDuration is "2 minutes", as JSON (the Go types
// would send it the same way, but this is what a user's YAML gives).
func badStepDuration(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "ModelServer",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
				"name": "vllm", "image": "vllm/vllm-openai:v0.10.2",
				"resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1"}},
			}}}},
			"gateway": map[string]any{"parentRefs": []any{map[string]any{"name": "inference-gateway", "namespace": "gateway-system"}}},
			"rollout": map[string]any{"stepDuration": "2 minutes"},
		},
	}}
	return u
}

// The worst case of issue #10: a ModelServer stored before admission checked durations (or by an
// older CRD) holds "2 minutes". Before, the controller's list of ModelServers failed to decode
// ("time: unknown unit") and no ModelServer in the cluster was reconciled while it existed. Now
// the bad one is reported naming the field, nothing is applied for it, and the others go on.
func TestOneUndecodableModelServerDoesNotBlindTheController(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	withoutStepDurationRule(t, ns, func() {
		eventually(t, 20*time.Second, "store a ModelServer with stepDuration 2 minutes", func() error {
			return k8s.Create(ctx, badStepDuration(ns, "old"))
		})
	})

	// The list every informer starts from decodes, with the bad object in it.
	var list v1alpha1.ModelServerList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("the ModelServer list does not decode: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Spec.Rollout.StepDuration.Err() == nil {
		t.Fatalf("want the stored object with its malformed stepDuration, got %+v", list.Items)
	}

	// Another ModelServer created now is reconciled.
	good := newModelServer(ns, "fresh")
	if err := k8s.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the other ModelServer is served", func() error {
		_, err := getDeployment(ns, "fresh-blue")
		return err
	})

	// The bad one is Stalled, naming the field and its text; nothing was applied for it.
	old := &v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old"}}
	eventually(t, 20*time.Second, "the bad one is reported", func() error {
		c := condition(getMS(t, old), v1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonInvalidSpec ||
			!strings.Contains(c.Message, "spec.rollout.stepDuration") || !strings.Contains(c.Message, `"2 minutes" is not a duration`) {
			return fmt.Errorf("Stalled condition %+v", c)
		}
		return nil
	})
	t.Logf("Stalled: %s", condition(getMS(t, old), v1alpha1.ConditionStalled).Message)
	if _, err := getDeployment(ns, "old-blue"); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment was applied for the invalid spec: %v", err)
	}
	// What the user wrote is still there: the controller's writes did not turn it into 0s.
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ModelServer"))
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(old), raw); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(raw.Object, "spec", "rollout", "stepDuration"); got != "2 minutes" {
		t.Errorf("stored stepDuration is now %q", got)
	}

	// Fixing it is allowed (the rule ratchets) and the controller then serves it.
	updateMS(t, old, func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.StepDuration = dur("2m") })
	eventually(t, 20*time.Second, "the fixed one is served", func() error {
		_, err := getDeployment(ns, "old-blue")
		return err
	})
}
