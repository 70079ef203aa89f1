package signals

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	externalv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
)

// MetricsAPIs reads the Kubernetes metrics APIs for resource and external autoscaling metrics
// (metrics-server, prometheus-adapter, KEDA's metrics server).
type MetricsAPIs interface {
	// PodMetrics lists metrics.k8s.io usage of the pods matching selector.
	PodMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]metricsv1beta1.PodMetrics, error)
	// External lists one external metric's values.
	External(ctx context.Context, namespace, metric string, selector labels.Selector) (*externalv1beta1.ExternalMetricValueList, error)
}

// KubeMetricsAPIs reads metrics.k8s.io and external.metrics.k8s.io through k8s.io/metrics.
type KubeMetricsAPIs struct {
	resource metricsclient.Interface
	external externalclient.ExternalMetricsClient
}

// NewKubeMetricsAPIs builds the clients from the controller's REST config.
func NewKubeMetricsAPIs(cfg *rest.Config) (*KubeMetricsAPIs, error) {
	rc, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metrics.k8s.io client: %w", err)
	}
	ec, err := externalclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("external.metrics.k8s.io client: %w", err)
	}
	return &KubeMetricsAPIs{resource: rc, external: ec}, nil
}

// PodMetrics implements MetricsAPIs.
func (k *KubeMetricsAPIs) PodMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
	list, err := k.resource.MetricsV1beta1().PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("reading metrics.k8s.io pod metrics: %w", err)
	}
	return list.Items, nil
}

// External implements MetricsAPIs.
func (k *KubeMetricsAPIs) External(_ context.Context, namespace, metric string, selector labels.Selector) (*externalv1beta1.ExternalMetricValueList, error) {
	list, err := k.external.NamespacedMetrics(namespace).List(metric, selector)
	if err != nil {
		return nil, fmt.Errorf("reading external metric %s: %w", metric, err)
	}
	return list, nil
}
