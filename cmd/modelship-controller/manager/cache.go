// Package manager is the wiring of the controller's manager: what its informer caches hold and
// how its own metrics endpoint is served. The command (cmd/modelship-controller) turns its flags
// into these options; the reconciler (internal/controller) knows none of them, and tests that
// run it under a manager take CacheOptions from here.
package manager

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// CacheOptions sizes the informer caches for large clusters: Deployments, Services and
// EndpointSlices only where they carry the ModelServer label (modelship's own; the EndpointSlice
// controller copies a Service's labels onto its slices), managed fields dropped everywhere,
// and pods (all of them: the GPU capacity check counts every pod's GPUs) reduced to the fields
// the controller reads. A cluster of 10,000 pods then costs a fraction of their full objects.
// With namespaces (namespaced mode, --watch-namespaces) namespaced objects are cached in those
// only, so the controller needs no cluster-wide read of them.
func CacheOptions(namespaces ...string) cache.Options {
	ours, err := labels.NewRequirement(v1alpha1.LabelModelServer, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key
	}
	selector := labels.NewSelector().Add(*ours)
	var perNamespace map[string]cache.Config
	if len(namespaces) > 0 {
		perNamespace = map[string]cache.Config{}
		for _, ns := range namespaces {
			perNamespace[ns] = cache.Config{}
		}
	}
	return cache.Options{
		DefaultNamespaces: perNamespace,
		DefaultTransform:  cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:         {Label: selector},
			&corev1.Service{}:            {Label: selector},
			&discoveryv1.EndpointSlice{}: {Label: selector},
			&corev1.Pod{}:                {Transform: trimPod},
		},
	}
}

// trimPod keeps what the controller reads of a pod: identity, labels and owners (which
// ModelServer and ReplicaSet), its node and GPU requests (capacity), host networking, phase,
// readiness gates, conditions and IP (readiness and warm-up checks).
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, OwnerReferences: p.OwnerReferences, DeletionTimestamp: p.DeletionTimestamp,
			CreationTimestamp: p.CreationTimestamp,
		},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork, Overhead: p.Spec.Overhead, ReadinessGates: p.Spec.ReadinessGates},
		Status: corev1.PodStatus{
			Phase: p.Status.Phase, Conditions: p.Status.Conditions, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs,
		},
	}
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Resources: c.Resources, Ports: c.Ports})
	}
	for _, c := range p.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy})
	}
	return out, nil
}
