//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/routing"
)

// onPools serves the ModelServer through one InferencePool per color. The fleet simulator plays
// the Gateway and the endpoint picker (it picks the pod with the fewest requests in flight), so
// the picker Service named here is not called.
func onPools(ms *v1alpha1.ModelServer) {
	ms.Spec.Gateway.Backend = v1alpha1.BackendInferencePool
	ms.Spec.Gateway.InferencePool = &v1alpha1.InferencePoolSpec{EndpointPickerRef: v1alpha1.EndpointPickerRef{
		Name: ms.Name + "-{color}-epp", Port: ptr.To(int32(9002))}}
}

func getPool(ns, name string) (*unstructured.Unstructured, error) {
	p := routing.NewPool()
	return p, st.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p)
}

// storyInferencePools: the same rollouts as the Service stories, over InferencePools.
func storyInferencePools(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-pools")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(replicas), onPools)
	given(t, "a %s, routed through one InferencePool per color", describe(ms))
	v0 := create(t, ms, 3*time.Minute)

	then(t, "each color has an InferencePool selecting its pods, the route points at the pools, and the Gateway accepted them")
	for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		p, err := getPool(ns, ms.PoolName(c))
		if err != nil {
			t.Fatalf("InferencePool of %s: %v", c, err)
		}
		sel, _, _ := unstructured.NestedStringMap(p.Object, "spec", "selector", "matchLabels")
		if sel[v1alpha1.LabelColor] != string(c) || sel[v1alpha1.LabelModelServer] != ms.Name {
			t.Errorf("InferencePool %s selects %v", p.GetName(), sel)
		}
	}
	route := &gatewayv1.HTTPRoute{}
	if err := st.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: ms.RouteName()}, route); err != nil {
		t.Fatal(err)
	}
	for _, b := range route.Spec.Rules[0].BackendRefs {
		if ptr.Deref(b.Kind, "") != routing.PoolKind {
			t.Errorf("backendRef %s is a %s, want an InferencePool", b.Name, ptr.Deref(b.Kind, "Service"))
		}
	}
	follow(t, ns, ms.Name, time.Minute, "RouteAccepted with both pools", weightsInvariant, func(v view) bool {
		c := v.condition(v1alpha1.ConditionRouteAccepted)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "InferencePools accepted")
	})

	goodVersionPromoted(t, ms, v0, " over InferencePools")
	v1, err := observe(context.Background(), ns, ms.Name)
	if err != nil {
		t.Fatal(err)
	}
	slowVersionRolledBack(t, ms, v1, " over InferencePools")

	when(t, "the ModelServer is deleted")
	if err := st.Client.Delete(context.Background(), v1.ms); err != nil {
		t.Fatal(err)
	}
	then(t, "the garbage collector removes both InferencePools with it")
	deadline := time.Now().Add(time.Minute)
	for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		for {
			_, err := getPool(ns, ms.PoolName(c))
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("InferencePool %s still there a minute after the ModelServer was deleted (%v)", ms.PoolName(c), err)
			}
			time.Sleep(pollInterval)
		}
	}
}
