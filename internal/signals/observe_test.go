package signals

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	externalv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/modelship/modelship/internal/metrics"
)

func cpuPod(name, request string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}}
	c := corev1.Container{Name: "server"}
	if request != "" {
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(request)}
	}
	p.Spec.Containers = []corev1.Container{c}
	return p
}

func cpuUsage(name, used string) metricsv1beta1.PodMetrics {
	return metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name},
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "server", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(used)}}}}
}

func TestResourceObservation(t *testing.T) {
	cases := []struct {
		name        string
		ready       []corev1.Pod
		usage       []metricsv1beta1.PodMetrics
		wantStatus  metrics.Status
		wantValue   float64
		wantPods    int32
		wantMissing int32
	}{
		{"is total usage over total requests of the Ready pods with usage",
			[]corev1.Pod{cpuPod("a", "1"), cpuPod("b", "3")}, []metricsv1beta1.PodMetrics{cpuUsage("a", "1"), cpuUsage("b", "1"), cpuUsage("gone", "8")},
			metrics.OK, 50, 2, 0},
		{"counts Ready pods without usage as missing",
			[]corev1.Pod{cpuPod("a", "1"), cpuPod("b", "1")}, []metricsv1beta1.PodMetrics{cpuUsage("a", "500m")},
			metrics.OK, 50, 1, 1},
		{"is an error when a Ready pod has no request", []corev1.Pod{cpuPod("a", "")}, []metricsv1beta1.PodMetrics{cpuUsage("a", "1")}, metrics.Error, 0, 0, 0},
		{"has no data without usage", []corev1.Pod{cpuPod("a", "1")}, nil, metrics.NoData, 0, 0, 0},
		{"has no data without Ready pods", nil, []metricsv1beta1.PodMetrics{cpuUsage("a", "1")}, metrics.NoData, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := ResourceObservation("resource/cpu", corev1.ResourceCPU, tc.ready, tc.usage)
			if o.Status != tc.wantStatus || o.Value != tc.wantValue || o.Pods != tc.wantPods || o.MissingPods != tc.wantMissing {
				t.Errorf("got %+v", o)
			}
		})
	}
}

func TestExternalObservation(t *testing.T) {
	list := &externalv1beta1.ExternalMetricValueList{Items: []externalv1beta1.ExternalMetricValue{{Value: resource.MustParse("3")}, {Value: resource.MustParse("1500m")}}}
	if o := ExternalObservation("external/q", list, nil); o.Status != metrics.OK || o.Value != 4.5 {
		t.Errorf("sums the values: got %+v", o)
	}
	if o := ExternalObservation("external/q", &externalv1beta1.ExternalMetricValueList{}, nil); o.Status != metrics.NoData {
		t.Errorf("an empty list is no data, not zero: got %+v", o)
	}
	if o := ExternalObservation("external/q", nil, errors.New("503")); o.Status != metrics.Error || o.Message == "" {
		t.Errorf("an API error is an error: got %+v", o)
	}
}

func TestFromSample(t *testing.T) {
	if o := FromSample("prometheus", metrics.Sample{Status: metrics.OK, Value: 12}); o.Status != metrics.OK || o.Value != 12 || o.Metric != "prometheus" {
		t.Errorf("got %+v", o)
	}
	if o := FromSample("prometheus", metrics.Sample{Status: metrics.NoData, Message: "empty"}); o.Status != metrics.NoData || o.Message != "empty" {
		t.Errorf("got %+v", o)
	}
}
