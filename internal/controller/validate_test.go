package controller

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// The controller's own checks, for objects that admission did not refuse (stored before a rule
// existed, or beyond what CEL's cost budget lets admission check). Pure: no API server.
func TestValidateReportsTheFieldAdmissionShouldHaveRefused(t *testing.T) {
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	dur := func(text string) v1alpha1.Duration {
		var d v1alpha1.Duration
		if err := json.Unmarshal([]byte(text), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	autoscaled := func(ms *v1alpha1.ModelServer) *v1alpha1.AutoscalingSpec {
		ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 4}
		return ms.Spec.Autoscaling
	}
	gpus := func(ms *v1alpha1.ModelServer, limit, request string) {
		r := &ms.Spec.Template.Spec.Containers[0].Resources
		r.Limits, r.Requests = corev1.ResourceList{}, corev1.ResourceList{}
		if limit != "" {
			r.Limits["nvidia.com/gpu"] = resource.MustParse(limit)
		}
		if request != "" {
			r.Requests["nvidia.com/gpu"] = resource.MustParse(request)
		}
	}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.ModelServer)
		want   []string // substrings of the error; none: valid
	}{
		{name: "a valid spec passes", mutate: func(*v1alpha1.ModelServer) {}},
		{name: "a valid spec with every duration set passes", mutate: func(ms *v1alpha1.ModelServer) {
			r := &ms.Spec.Rollout
			r.StepDuration, r.ScaleDownDelay, r.ProgressDeadline = dur(`"2m"`), dur(`"10m"`), dur(`"30m"`)
			r.Inconclusive.RollbackAfter, r.Analysis.Interval = ptr.To(dur(`"15m"`)), dur(`"30s"`)
			a := autoscaled(ms)
			a.Interval, a.Tolerance = dur(`"15s"`), q("0")
			a.Behavior.ScaleDown = &v1alpha1.ScalingRules{StabilizationWindow: ptr.To(dur(`"0s"`)), Policies: []v1alpha1.ScalingPolicy{{Type: v1alpha1.PodsScalingPolicy, Value: 1, Period: dur(`"30m"`)}}}
		}},
		{name: "a learnt-capacity SLO that did not parse is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Metrics = []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{Query: "x", Target: resource.MustParse("1"),
				LearnCapacity: &v1alpha1.CapacityLearning{TimeToFirstTokenP95: ptr.To(dur(`"2 seconds"`)), TargetPercentOfCapacity: ptr.To(int32(0))}}}}
		}, want: []string{"spec.autoscaling.metrics[0].prometheus.learnCapacity.timeToFirstTokenP95", "spec.autoscaling.metrics[0].prometheus.learnCapacity.targetPercentOfCapacity"}},
		{name: "a learnt-capacity SLO over 10 minutes is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Metrics = []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{Query: "x", Target: resource.MustParse("1"),
				LearnCapacity: &v1alpha1.CapacityLearning{InterTokenLatencyP95: ptr.To(dur(`"11m"`))}}}}
		}, want: []string{"spec.autoscaling.metrics[0].prometheus.learnCapacity.interTokenLatencyP95", "at most 10m"}},
		{name: "scale to zero on the default GPU utilization is refused: at zero pods it has no data", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).MinReplicas = ptr.To(int32(0))
		}, want: []string{"spec.autoscaling.minReplicas", "needs a metric that sees load while no pod runs"}},
		{name: "scale to zero on pod metrics and the endpoint picker's queue per pod is refused", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			a := autoscaled(ms)
			a.MinReplicas = ptr.To(int32(0))
			a.Metrics = []v1alpha1.AutoscalingMetric{{KVCacheUsage: &v1alpha1.AverageMetric{Target: resource.MustParse("0.8")}},
				{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerQueueSize, Target: resource.MustParse("2")}}}
		}, want: []string{"spec.autoscaling.minReplicas", "needs a metric that sees load while no pod runs"}},
		{name: "scale to zero with a prometheus total beside GPU utilization passes", mutate: func(ms *v1alpha1.ModelServer) {
			a := autoscaled(ms)
			a.MinReplicas = ptr.To(int32(0))
			a.Metrics = []v1alpha1.AutoscalingMetric{{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: 70}},
				{Prometheus: &v1alpha1.PrometheusMetric{Query: `sum(rate(gateway_requests_total{route="llama"}[1m])) or vector(0)`, Target: resource.MustParse("5")}}}
		}},
		{name: "scale to zero on the endpoint picker's running requests passes", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			a := autoscaled(ms)
			a.MinReplicas = ptr.To(int32(0))
			a.Metrics = []v1alpha1.AutoscalingMetric{{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerRunningRequests, Target: resource.MustParse("8"), Objective: "llama"}}}
		}},
		{name: "endpoint picker metrics on a Service backend are refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Metrics = []v1alpha1.AutoscalingMetric{{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerQueueSize, Target: resource.MustParse("2")}}}
		}, want: []string{"spec.autoscaling.metrics[0].endpointPicker", "needs spec.gateway.backend InferencePool"}},
		{name: "running requests without a model name are refused", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			autoscaled(ms).Metrics = []v1alpha1.AutoscalingMetric{{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerRunningRequests, Target: resource.MustParse("8")}}}
		}, want: []string{"spec.autoscaling.metrics[0].endpointPicker.objective", "required with signal RunningRequests"}},
		{name: "a pool saturation target above 1 is refused", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			autoscaled(ms).Metrics = []v1alpha1.AutoscalingMetric{{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerPoolSaturation, Target: resource.MustParse("80")}}}
		}, want: []string{"spec.autoscaling.metrics[0].endpointPicker.target", "at most 1"}},
		{name: "a saturation trigger at its threshold is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Metrics = []v1alpha1.AutoscalingMetric{{Saturation: &v1alpha1.SaturationMetric{QueueLengthThreshold: 4, QueueSpareTrigger: ptr.To(int32(4))}}}
		}, want: []string{"spec.autoscaling.metrics[0].saturation.queueSpareTrigger", "below queueLengthThreshold (4)"}},
		{name: "a KV-cache spare trigger above the default threshold is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Metrics = []v1alpha1.AutoscalingMetric{{Saturation: &v1alpha1.SaturationMetric{KVSpareTriggerPercent: ptr.To(int32(85))}}}
		}, want: []string{"spec.autoscaling.metrics[0].saturation.kvSpareTriggerPercent", "below kvCacheThresholdPercent (80)"}},
		{name: "an analysis query reading the pool of a ModelServer served through Services is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "epp-queue", MaxRatioToStable: q("2"), Query: `avg(inference_pool_average_queue_size{name=~"{{ .Pool }}"})`}}
		}, want: []string{"spec.rollout.analysis.metrics[0].query", "uses {{.Pool}}", "only with spec.gateway.backend InferencePool"}},
		{name: "an analysis query reading the pool over InferencePools passes", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "epp-queue", MaxRatioToStable: q("2"), Query: `avg(inference_pool_average_queue_size{name=~"{{.Pool}}"})`}}
		}},
		{name: "a step duration in words names the field and the text", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.StepDuration = dur(`"2 minutes"`)
		}, want: []string{"spec.rollout.stepDuration", `"2 minutes" is not a duration`}},
		{name: "a negative scale-down delay is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.ScaleDownDelay = dur(`"-5m"`)
		}, want: []string{"spec.rollout.scaleDownDelay", "must be a positive duration"}},
		{name: "a zero inconclusive deadline is refused (unset is the way to say none)", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Inconclusive.RollbackAfter = ptr.To(dur(`"0s"`))
		}, want: []string{"spec.rollout.inconclusive.rollbackAfter", "positive"}},
		{name: "a progress deadline written as a number is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.ProgressDeadline = dur(`1800`)
		}, want: []string{"spec.rollout.progressDeadline", "write a string"}},
		{name: "a step shorter than the analysis interval is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.StepDuration, ms.Spec.Rollout.Analysis.Interval = dur(`"30s"`), dur(`"1m"`)
		}, want: []string{"spec.rollout.stepDuration", "at least spec.rollout.analysis.interval"}},
		{name: "a malformed analysis interval is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.Interval = dur(`"30 s"`)
		}, want: []string{"spec.rollout.analysis.interval"}},
		{name: "a zero ratio to stable is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "x", Query: "x", MaxRatioToStable: q("0e3")}}
		}, want: []string{"spec.rollout.analysis.metrics[0].maxRatioToStable", "greater than 0"}},
		{name: "a min above max is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "x", Query: "x", Min: q("0.99"), Max: q("0.5")}}
		}, want: []string{"spec.rollout.analysis.metrics[0].min", "must not be greater than max"}},
		{name: "a template label modelship puts on the pods is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Labels = map[string]string{"app": "llm", v1alpha1.LabelColor: "blue"}
		}, want: []string{"spec.template.metadata.labels[serving.modelship.dev/color]", "is modelship's"}},
		{name: "template labels of the user's own pass", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Labels = map[string]string{"app": "llm", "serving.modelship.dev/team": "search"}
		}},
		{name: "a zero ratio to stable written 0.000 is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "x", Query: "x", MaxRatioToStable: q("0.000")}}
		}, want: []string{"spec.rollout.analysis.metrics[0].maxRatioToStable", "greater than 0"}},
		{name: "a zero KV-cache target written 0Ki is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Metrics = []v1alpha1.AutoscalingMetric{{KVCacheUsage: &v1alpha1.AverageMetric{Target: resource.MustParse("0Ki")}}}
		}, want: []string{"spec.autoscaling.metrics[0].kvCacheUsage.target", "fraction"}},
		{name: "replicas far beyond any cluster are refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Replicas = ptr.To(int32(1000000))
		}, want: []string{"spec.replicas", "from 0 to 10000"}},
		{name: "a max replica count beyond any cluster is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).MaxReplicas = 50000
		}, want: []string{"spec.autoscaling.maxReplicas"}},
		{name: "a malformed autoscaling interval is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Interval = dur(`"15"`)
		}, want: []string{"spec.autoscaling.interval", `"15" is not a duration`}},
		{name: "a tolerance written as a percentage is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Tolerance = q("10")
		}, want: []string{"spec.autoscaling.tolerance", "fraction"}},
		{name: "a negative tolerance is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Tolerance = q("-0.1")
		}, want: []string{"spec.autoscaling.tolerance"}},
		{name: "a zero target per replica is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Metrics = []v1alpha1.AutoscalingMetric{{RequestsWaiting: &v1alpha1.PerReplicaMetric{Target: resource.MustParse("0")}}}
		}, want: []string{"spec.autoscaling.metrics[0].requestsWaiting.target", "greater than 0"}},
		{name: "a negative Prometheus target is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Metrics = []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{Query: "x", Target: resource.MustParse("-3")}}}
		}, want: []string{"spec.autoscaling.metrics[0].prometheus.target"}},
		{name: "a KV-cache target in percent is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Metrics = []v1alpha1.AutoscalingMetric{{KVCacheUsage: &v1alpha1.AverageMetric{Target: resource.MustParse("80")}}}
		}, want: []string{"spec.autoscaling.metrics[0].kvCacheUsage.target", "fraction"}},
		{name: "a stabilization window in words is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Behavior.ScaleDown = &v1alpha1.ScalingRules{StabilizationWindow: ptr.To(dur(`"five minutes"`))}
		}, want: []string{"spec.autoscaling.behavior.scaleDown.stabilizationWindow", "five minutes"}},
		{name: "a stabilization window over an hour is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Behavior.ScaleUp = &v1alpha1.ScalingRules{StabilizationWindow: ptr.To(dur(`"2h"`))}
		}, want: []string{"spec.autoscaling.behavior.scaleUp.stabilizationWindow", "from 0s to 1h"}},
		{name: "a zero policy period is refused", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaled(ms).Behavior.ScaleUp = &v1alpha1.ScalingRules{Policies: []v1alpha1.ScalingPolicy{{Type: v1alpha1.PodsScalingPolicy, Value: 2, Period: dur(`"0s"`)}}}
		}, want: []string{"spec.autoscaling.behavior.scaleUp.policies[0].period", "positive"}},
		{name: "a restart policy of Never is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}, want: []string{"spec.template.spec.restartPolicy", "Always"}},
		{name: "an active deadline is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To(int64(3600))
		}, want: []string{"spec.template.spec.activeDeadlineSeconds"}},
		{name: "an empty container list is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.Containers = []corev1.Container{}
		}, want: []string{"spec.template.spec.containers"}},
		{name: "half a GPU is refused", mutate: func(ms *v1alpha1.ModelServer) { gpus(ms, "500m", "") },
			want: []string{"spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]", "whole number"}},
		{name: "a GPU request different from the limit is refused", mutate: func(ms *v1alpha1.ModelServer) { gpus(ms, "2", "1") },
			want: []string{"spec.template.spec.containers[0].resources.requests[nvidia.com/gpu]", "must equal the container's limit"}},
		{name: "a GPU request without a limit is refused", mutate: func(ms *v1alpha1.ModelServer) { gpus(ms, "", "1") },
			want: []string{"spec.template.spec.containers[0].resources.requests[nvidia.com/gpu]"}},
		{name: "a GPU request equal to the limit passes, written differently", mutate: func(ms *v1alpha1.ModelServer) { gpus(ms, "1", "1000m") }},
		{name: "a fractional extended resource in the 17th container is found (admission checks 16)", mutate: func(ms *v1alpha1.ModelServer) {
			for i := range 16 {
				ms.Spec.Template.Spec.Containers = append(ms.Spec.Template.Spec.Containers, corev1.Container{Name: "side" + string(rune('a'+i)), Image: "busybox"})
			}
			ms.Spec.Template.Spec.Containers[16].Resources.Limits = corev1.ResourceList{"example.com/fpga": resource.MustParse("1.5")}
		}, want: []string{"spec.template.spec.containers[16].resources.limits[example.com/fpga]"}},
		{name: "a fractional GPU in an init container is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0.5")}}}}
		}, want: []string{"spec.template.spec.initContainers[0].resources.limits[nvidia.com/gpu]"}},
		{name: "fractional CPU and memory stay allowed", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1.5Gi")}
		}},
		{name: "an unknown analysis template key is refused", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.SampleQuery = `sum(x{ns="{{.namespace}}"})`
		}, want: []string{"spec.rollout.analysis.sampleQuery"}},
		{name: "several mistakes are all reported", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.StepDuration = dur(`"2 minutes"`)
			ms.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		}, want: []string{"spec.rollout.stepDuration", "spec.template.spec.restartPolicy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := newModelServer("ns", "llama")
			tt.mutate(ms)
			err := validate(ms, metrics.QueryPolicyAny)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("refused a valid spec: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want an error naming %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// Defaults filled by an older API server (or absent in an object written before defaulting) are
// zero and mean "use the default": the controller does not refuse them.
func TestValidateAcceptsZeroDurationsThatMeanTheDefault(t *testing.T) {
	ms := newModelServer("ns", "llama")
	ms.Spec.Rollout.StepDuration, ms.Spec.Rollout.Analysis.Interval = v1alpha1.Duration{}, v1alpha1.Duration{}
	if err := validate(ms, metrics.QueryPolicyAny); err != nil {
		t.Fatal(err)
	}
	ms.Spec.Rollout.StepDuration = v1alpha1.Duration{Duration: time.Minute}
	if err := validate(ms, metrics.QueryPolicyAny); err != nil {
		t.Fatal(err)
	}
}

// What admission accepts the controller accepts too: a valid spec never stalls.
func TestValidateAcceptsTheSpecsAdmissionAccepts(t *testing.T) {
	for _, g := range goodSpecs() {
		t.Run(g.name, func(t *testing.T) {
			ms := newModelServer("ns", "good")
			if g.mutate != nil {
				g.mutate(ms)
			}
			u := toUnstructured(t, ms, g.raw)
			if a, ok := u.Object["spec"].(map[string]any)["autoscaling"].(map[string]any); ok {
				if _, set := a["minReplicas"]; !set {
					a["minReplicas"] = int64(1) // the CRD's default, applied before the controller reads it
				}
			}
			b, err := json.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			got := &v1alpha1.ModelServer{}
			if err := json.Unmarshal(b, got); err != nil {
				t.Fatal(err)
			}
			if err := validate(got, metrics.QueryPolicyAny); err != nil {
				t.Errorf("the controller refuses a spec admission accepts: %v", err)
			}
		})
	}
}
