package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// writeCounter counts the API writes a reconciler makes, by verb and kind.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeCounter) add(verb string, obj any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, fmt.Sprintf("%s %T", verb, obj))
}

func (w *writeCounter) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.writes
	w.writes = nil
	return out
}

func (w *writeCounter) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.add("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			w.add("apply", obj)
			return c.Apply(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add(sub+" patch", obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.add(sub+" update", obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
}

func TestAPassThatChangesNothingWritesNothing(t *testing.T) {
	var w writeCounter
	r := manualReconciler(t, w.funcs())
	stamp := time.Now().UnixNano() % 1e6
	fixed := newModelServer(manualNamespace, fmt.Sprintf("steady-%d", stamp))
	scaled := newModelServer(manualNamespace, fmt.Sprintf("scaled-%d", stamp), func(ms *v1alpha1.ModelServer) {
		ms.Spec.Replicas = nil
		ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(2)), MaxReplicas: 4}
	})
	for _, ms := range []*v1alpha1.ModelServer{fixed, scaled} {
		if err := k8s.Create(context.Background(), ms); err != nil {
			t.Fatal(err)
		}
		pass(t, r, ms)
		markReady(t, ms.Namespace, ms.DeploymentName(v1alpha1.Blue))
		for range 3 { // settle: Healthy, conditions, the revision record
			pass(t, r, ms)
		}
		if got := getMS(t, ms); got.Status.Phase != v1alpha1.PhaseHealthy {
			t.Fatalf("%s: phase %s, want Healthy", ms.Name, got.Status.Phase)
		}
		w.take()
		for range 3 {
			pass(t, r, ms)
		}
		if writes := w.take(); len(writes) != 0 {
			t.Errorf("%s: passes with nothing to change wrote %d times: %v", ms.Name, len(writes), writes)
		}
	}
	// A real change still goes through.
	updateMS(t, fixed, func(ms *v1alpha1.ModelServer) { ms.Spec.Replicas = ptrTo(int32(3)) })
	pass(t, r, fixed)
	if writes := w.take(); len(writes) == 0 {
		t.Error("a replica change wrote nothing")
	}
}

func ptrTo[T any](v T) *T { return &v }
