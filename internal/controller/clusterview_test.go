package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/modelship/modelship/internal/capacity"
)

// One view of the nodes and their pods' GPUs serves every capacity check of an interval; the
// next interval sees the pods bound meanwhile.
func TestClusterViewIsBuiltOncePerInterval(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{capacity.GPUResource: resource.MustParse("8")}}}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: "gpu-1",
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{capacity.GPUResource: resource.MustParse("2")}}}}}}
	}
	c := fake.NewClientBuilder().WithObjects(node, pod("a")).Build()
	v := clusterView{interval: 5 * time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for i := range 100 {
		view, err := v.get(ctx, c, t0.Add(time.Duration(i)*10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if view.UsedOn["gpu-1"] != 2 {
			t.Fatalf("GPUs used on gpu-1 = %d, want 2", view.UsedOn["gpu-1"])
		}
	}
	if v.built != 1 {
		t.Fatalf("built %d times within one interval, want 1", v.built)
	}
	if err := c.Create(ctx, pod("b")); err != nil {
		t.Fatal(err)
	}
	view, err := v.get(ctx, c, t0.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if v.built != 2 || view.UsedOn["gpu-1"] != 4 {
		t.Fatalf("after the interval: built %d times, %d GPUs used; want 2 and 4", v.built, view.UsedOn["gpu-1"])
	}
}
