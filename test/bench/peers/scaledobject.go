package peers

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ScaledObjectGVR is the resource of KEDA's ScaledObjects, for dynamic clients.
var ScaledObjectGVR = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}

// KEDAHPAName is the name of the HorizontalPodAutoscaler KEDA's operator creates for a
// ScaledObject (unless advanced.horizontalPodAutoscalerConfig.name says otherwise).
func KEDAHPAName(scaledObject string) string { return "keda-hpa-" + scaledObject }

// PrometheusTrigger is a ScaledObject trigger of type prometheus.
type PrometheusTrigger struct {
	// ServerAddress is Prometheus' base URL (devenv.Env.PrometheusURL()). Required.
	ServerAddress string
	// Query is a PromQL query returning one value. Required.
	Query string
	// Threshold is the target: the value per replica with MetricType AverageValue (the HPA wants
	// ceil(value/Threshold) replicas), the value itself with Value. Required, above 0.
	Threshold float64
	// ActivationThreshold is the value at or below which KEDA deactivates the target (scale to
	// zero, when MinReplicas is 0). Optional.
	ActivationThreshold float64
	// MetricType is AverageValue (the default) or Value.
	MetricType autoscalingv2.MetricTargetType
}

// ScaledObjectSpec describes a ScaledObject scaling a Deployment on one Prometheus trigger.
type ScaledObjectSpec struct {
	// Namespace and Name of the ScaledObject; the Deployment is in the same namespace.
	Namespace, Name string
	// Deployment is the name of the scale target. Required.
	Deployment string
	// MinReplicas and MaxReplicas bound the HPA (KEDA's minReplicaCount, maxReplicaCount).
	MinReplicas, MaxReplicas int32
	// PollingInterval is how often the operator checks the trigger for activation (whole
	// seconds; 0 leaves KEDA's default, 30 s). The HPA reads the metric on its own period
	// (kube-controller-manager --horizontal-pod-autoscaler-sync-period, 15 s by default).
	PollingInterval time.Duration
	// Prometheus is the trigger.
	Prometheus PrometheusTrigger
	// Behavior is the HPA's scaling behavior (advanced.horizontalPodAutoscalerConfig.behavior);
	// nil leaves the HPA's defaults.
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior
}

// ScaledObject builds a keda.sh/v1alpha1 ScaledObject from spec, for a dynamic or
// controller-runtime client.
func ScaledObject(spec ScaledObjectSpec) (*unstructured.Unstructured, error) {
	switch {
	case spec.Name == "" || spec.Namespace == "" || spec.Deployment == "":
		return nil, errors.New("scaledobject: Name, Namespace and Deployment are required")
	case spec.MaxReplicas < 1 || spec.MinReplicas < 0 || spec.MinReplicas > spec.MaxReplicas:
		return nil, fmt.Errorf("scaledobject %s: replicas %d..%d are not a range", spec.Name, spec.MinReplicas, spec.MaxReplicas)
	case spec.Prometheus.ServerAddress == "" || spec.Prometheus.Query == "" || spec.Prometheus.Threshold <= 0:
		return nil, fmt.Errorf("scaledobject %s: the Prometheus trigger needs ServerAddress, Query and a Threshold above 0", spec.Name)
	}
	metricType := spec.Prometheus.MetricType
	if metricType == "" {
		metricType = autoscalingv2.AverageValueMetricType
	}
	metadata := map[string]any{
		"serverAddress": spec.Prometheus.ServerAddress,
		"query":         spec.Prometheus.Query,
		"threshold":     formatFloat(spec.Prometheus.Threshold),
	}
	if spec.Prometheus.ActivationThreshold != 0 {
		metadata["activationThreshold"] = formatFloat(spec.Prometheus.ActivationThreshold)
	}
	s := map[string]any{
		"scaleTargetRef":  map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": spec.Deployment},
		"minReplicaCount": int64(spec.MinReplicas),
		"maxReplicaCount": int64(spec.MaxReplicas),
		"triggers": []any{map[string]any{
			"type":       "prometheus",
			"metricType": string(metricType),
			"metadata":   metadata,
		}},
	}
	if spec.PollingInterval > 0 {
		s["pollingInterval"] = int64(spec.PollingInterval / time.Second)
	}
	if spec.Behavior != nil {
		b, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec.Behavior)
		if err != nil {
			return nil, fmt.Errorf("scaledobject %s: behavior: %w", spec.Name, err)
		}
		s["advanced"] = map[string]any{"horizontalPodAutoscalerConfig": map[string]any{"behavior": b}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "keda.sh/v1alpha1",
		"kind":       "ScaledObject",
		"metadata":   map[string]any{"name": spec.Name, "namespace": spec.Namespace},
		"spec":       s,
	}}, nil
}

// formatFloat writes a threshold as KEDA parses it (a plain decimal).
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
