// Package workload decides the shape of a ModelServer's per-color Deployments and Services.
package workload

import (
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// GPUResource is the extended resource NVIDIA's device plugin advertises.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// Deployment is the Deployment of one color running the spec's template at the given replicas.
// Pods carry the ModelServer, color and revision labels. The rolling update never surges (a
// surge pod would need GPUs the cluster may not have) and replaces one pod at a time. With
// warmGate, the pods carry the warm-up readiness gate (see WarmGated). It is added here, not in
// spec.template, so that the revision (the hash of spec.template) does not depend on it.
func Deployment(ms *v1alpha1.ModelServer, c v1alpha1.Color, rev string, replicas int32, warmGate bool) *appsv1.Deployment {
	labels := ms.ColorLabels(c)
	labels[v1alpha1.LabelRevision] = rev
	tmpl := *ms.Spec.Template.DeepCopy()
	if warmGate && !WarmGated(&tmpl.Spec) {
		tmpl.Spec.ReadinessGates = append(tmpl.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: v1alpha1.PodConditionWarm})
	}
	podLabels := maps.Clone(tmpl.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, labels)
	tmpl.Labels = podLabels
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: ms.DeploymentName(c), Namespace: ms.Namespace, Labels: labels,
			Annotations: map[string]string{v1alpha1.AnnotationPort: strconv.Itoa(int(ms.Spec.Port))}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: ms.ColorLabels(c)},
			Template: tmpl,
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptr.To(intstr.FromInt32(0)),
					MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				},
			},
		},
	}
}

// WarmGated reports whether pods of spec carry the warm-up readiness gate
// (v1alpha1.PodConditionWarm): they are Ready only once the controller has set that condition,
// after their warm-up check passed.
func WarmGated(spec *corev1.PodSpec) bool {
	for _, g := range spec.ReadinessGates {
		if g.ConditionType == v1alpha1.PodConditionWarm {
			return true
		}
	}
	return false
}

// Service is the Service of one color: the route's backendRef for that color. It exposes
// spec.port (the port the route names) and targets targetPort, the port the color's pods
// listen on (see DeploymentPort).
func Service(ms *v1alpha1.ModelServer, c v1alpha1.Color, targetPort int32) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: ms.ServiceName(c), Namespace: ms.Namespace, Labels: ms.ColorLabels(c)},
		Spec: corev1.ServiceSpec{
			Selector: ms.ColorLabels(c),
			Ports: []corev1.ServicePort{{
				Name: "http", Port: ms.Spec.Port, TargetPort: intstr.FromInt32(targetPort), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// DeploymentPort is the port the pods of d listen on: the spec.port its template was applied
// with; fallback when d is nil or does not record it (made by an earlier version).
func DeploymentPort(d *appsv1.Deployment, fallback int32) int32 {
	if d == nil {
		return fallback
	}
	p, err := strconv.ParseInt(d.Annotations[v1alpha1.AnnotationPort], 10, 32)
	if err != nil || p < 1 || p > 65535 {
		return fallback
	}
	return int32(p)
}
