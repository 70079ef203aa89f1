package stack

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/devenv"
)

// ModelServer is the demo's ModelServer: vLLM on one GPU (an H100 node, tolerating the GPU
// taint), served through the local Gateway, rolled out in four steps with vLLM analysis and
// warm-up, autoscaled on GPU utilization and queue length. Durations are short so that a
// rollout is watchable in minutes.
func ModelServer(ns, name, image string) *v1alpha1.ModelServer {
	d := func(s time.Duration) v1alpha1.Duration { return v1alpha1.Duration{Duration: s} }
	return &v1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ModelServerSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"nvidia.com/gpu.product": devenv.DefaultGPUProduct},
				Tolerations:  []corev1.Toleration{{Key: devenv.GPUTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				Containers: []corev1.Container{{
					Name: "vllm", Image: image, Args: []string{"--model", "/models/llama-3-8b", "--served-model-name", "llama-3-8b"},
					Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
				}},
			}},
			Replicas: ptr.To(int32(2)),
			Gateway: v1alpha1.GatewaySpec{
				ParentRefs: []gatewayv1.ParentReference{{Name: devenv.DefaultGatewayName, Namespace: ptr.To(gatewayv1.Namespace(devenv.DefaultGatewayNamespace))}},
				Hostnames:  []gatewayv1.Hostname{"llm.local"},
			},
			Rollout: v1alpha1.RolloutSpec{
				Steps:          []int32{10, 25, 50, 100},
				StepDuration:   d(20 * time.Second),
				Warmup:         &v1alpha1.WarmupSpec{Path: "/v1/models"},
				AutoPromote:    ptr.To(true),
				ScaleDownDelay: d(30 * time.Second),
				Analysis: v1alpha1.AnalysisSpec{
					Preset: v1alpha1.AnalysisPresetVLLM, Interval: d(5 * time.Second), MinSamples: 20,
				},
			},
			Autoscaling: &v1alpha1.AutoscalingSpec{
				MinReplicas: ptr.To(int32(2)), MaxReplicas: 12, Interval: d(5 * time.Second),
				Metrics: []v1alpha1.AutoscalingMetric{
					{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: 70}},
					{RequestsWaiting: &v1alpha1.PerReplicaMetric{Target: resource.MustParse("5")}},
				},
				Behavior: v1alpha1.ScalingBehavior{ScaleDown: &v1alpha1.ScalingRules{StabilizationWindow: ptr.To(d(60 * time.Second))}},
			},
		},
	}
}
