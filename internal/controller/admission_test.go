package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/testenv"
)

// badSpec is one ModelServer a user might write wrong: a valid one (newModelServer) changed by
// mutate (typed) and then raw (on the JSON, for what the Go types cannot say), refused with an
// error that contains every string of want (the field and what is allowed).
type badSpec struct {
	name   string
	mutate func(*v1alpha1.ModelServer)
	raw    func(spec map[string]any)
	want   []string
	// createOnly: the mistake cannot be made by an update (the name is immutable).
	createOnly bool
}

// text is a Duration holding text that is not a duration, as a user would write it; it is sent
// to the API server as written.
func text(s string) v1alpha1.Duration {
	b, _ := json.Marshal(s)
	return v1alpha1.Duration{Invalid: string(b)}
}

func dur(s string) v1alpha1.Duration {
	var d v1alpha1.Duration
	if err := json.Unmarshal([]byte(`"`+s+`"`), &d); err != nil || d.Err() != nil {
		panic(fmt.Sprintf("dur(%q): %v %v", s, err, d.Err()))
	}
	return d
}

func qty(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

// autoscaleOn turns autoscaling on (1..4 replicas) and returns it for the case to change.
func autoscaleOn(ms *v1alpha1.ModelServer) *v1alpha1.AutoscalingSpec {
	ms.Spec.Replicas = nil
	ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 4}
	return ms.Spec.Autoscaling
}

func withGPU(limit, request string) func(*v1alpha1.ModelServer) {
	return func(ms *v1alpha1.ModelServer) {
		r := &ms.Spec.Template.Spec.Containers[0].Resources
		r.Limits, r.Requests = corev1.ResourceList{}, nil
		if limit != "" {
			r.Limits["nvidia.com/gpu"] = resource.MustParse(limit)
		}
		if request != "" {
			r.Requests = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(request)}
		}
	}
}

// set writes value at a dotted path of the spec's JSON (creating maps on the way).
func set(path string, value any) func(map[string]any) {
	return func(spec map[string]any) {
		keys := strings.Split(path, ".")
		m := spec
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = value
	}
}

// firstContainer returns the JSON of the template's first container.
func firstContainer(spec map[string]any) map[string]any {
	return spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
}

// badSpecs is the corpus: what users get wrong, from durations in words to GPU fractions.
func badSpecs() []badSpec {
	analysisMetric := func(m v1alpha1.AnalysisMetric) func(*v1alpha1.ModelServer) {
		return func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{m} }
	}
	scaleOn := func(m v1alpha1.AutoscalingMetric) func(*v1alpha1.ModelServer) {
		return func(ms *v1alpha1.ModelServer) { autoscaleOn(ms).Metrics = []v1alpha1.AutoscalingMetric{m} }
	}
	const positiveDuration = "must be a positive duration such as 2m or 90s"
	// notADuration is what the Duration type's own rule says of text that is not a duration,
	// after the field's path and the value.
	notADuration := func(path, value string) string {
		return path + `: Invalid value: "` + value + `": must be a duration such as 90s, 2m or 1h30m`
	}
	return append(append(zeroSpellings(), childKindsOfMistake()...), []badSpec{
		// Header route.
		{name: "a header route whose header name has a space", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.HeaderRoute = &v1alpha1.HeaderRouteSpec{Name: "x canary", Value: "always"}
		}, want: []string{"spec.rollout.headerRoute.name", "should match"}},
		{name: "a header route on an HTTP/2 pseudo-header", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.HeaderRoute = &v1alpha1.HeaderRouteSpec{Name: ":authority", Value: "canary.example.com"}
		}, want: []string{"spec.rollout.headerRoute.name", "should match"}},
		{name: "a header route without a value", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.HeaderRoute = &v1alpha1.HeaderRouteSpec{Name: "x-canary"}
		}, want: []string{"spec.rollout.headerRoute.value", "at least 1 chars long"}},
		{name: "a header route without a header name", raw: set("rollout.headerRoute", map[string]any{"value": "always"}),
			want: []string{"spec.rollout.headerRoute.name", "Required value"}},
		// Rollout gates.
		{name: "a gate of an unknown type", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Gates = []v1alpha1.RolloutGate{{Name: "load", Type: "PreRollout", URLSecretRef: v1alpha1.SecretKeyRef{Name: "gates", Key: "load"}}}
		}, want: []string{"spec.rollout.gates[0].type", "ConfirmRollout", "PreStep", "ConfirmPromotion"}},
		{name: "a gate without a Secret", raw: set("rollout.gates", []any{map[string]any{"name": "load", "type": "PreStep"}}),
			want: []string{"spec.rollout.gates[0].urlSecretRef", "Required value"}},
		{name: "a negative gate failure limit", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.GateFailureLimit = -1 },
			want: []string{"spec.rollout.gateFailureLimit", "greater than or equal to 0"}},
		// Notifications.
		{name: "a notification target named with capitals", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Notifications = []v1alpha1.NotificationTarget{{Name: "Team", URLSecretRef: v1alpha1.SecretKeyRef{Name: "hooks", Key: "url"}}}
		}, want: []string{"spec.notifications[0].name", "should match"}},
		{name: "a notification target without a Secret key", raw: set("notifications", []any{map[string]any{"name": "team", "urlSecretRef": map[string]any{"name": "hooks"}}}),
			want: []string{"spec.notifications[0].urlSecretRef.key", "Required value"}},
		{name: "two notification targets of one name", mutate: func(ms *v1alpha1.ModelServer) {
			t := v1alpha1.NotificationTarget{Name: "team", URLSecretRef: v1alpha1.SecretKeyRef{Name: "hooks", Key: "url"}}
			ms.Spec.Notifications = []v1alpha1.NotificationTarget{t, t}
		}, want: []string{"spec.notifications[1]", "Duplicate value"}},
		// Durations.
		{name: "a step duration in words", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.StepDuration = text("2 minutes") },
			want: []string{notADuration("spec.rollout.stepDuration", "2 minutes")}},
		{name: "a step duration without a unit", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.StepDuration = text("120") },
			want: []string{notADuration("spec.rollout.stepDuration", "120")}},
		{name: "a step duration of zero", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.StepDuration = text("0s") },
			want: []string{"spec.rollout.stepDuration " + positiveDuration}},
		{name: "a negative step duration", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.StepDuration = text("-1m") },
			want: []string{"spec.rollout.stepDuration " + positiveDuration}},
		{name: "an empty step duration", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.StepDuration = text("") },
			want: []string{notADuration("spec.rollout.stepDuration", "")}},
		{name: "a step duration as a number of seconds", raw: set("rollout.stepDuration", 120),
			want: []string{"spec.rollout.stepDuration", "must be of type string"}},
		{name: "a step duration in days", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.StepDuration = text("1d") },
			want: []string{notADuration("spec.rollout.stepDuration", "1d")}},
		{name: "a scale-down delay in words", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.ScaleDownDelay = text("10 min") },
			want: []string{notADuration("spec.rollout.scaleDownDelay", "10 min")}},
		{name: "a scale-down delay of a bare zero", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.ScaleDownDelay = text("0") },
			want: []string{"spec.rollout.scaleDownDelay " + positiveDuration}},
		{name: "a negative progress deadline", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.ProgressDeadline = text("-30m") },
			want: []string{"spec.rollout.progressDeadline " + positiveDuration}},
		{name: "a zero inconclusive rollback delay", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Inconclusive.RollbackAfter = ptr.To(text("0s")) },
			want: []string{"spec.rollout.inconclusive.rollbackAfter " + positiveDuration}},
		{name: "an inconclusive report delay of a negative duration", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Inconclusive.ReportAfter = text("-10m") },
			want: []string{"spec.rollout.inconclusive.reportAfter " + positiveDuration}},
		{name: "an analysis interval with a space", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Analysis.Interval = text("30 s") },
			want: []string{notADuration("spec.rollout.analysis.interval", "30 s")}},
		{name: "an analysis interval of zero", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Analysis.Interval = text("0s") },
			want: []string{"spec.rollout.analysis.interval " + positiveDuration}},
		{name: "a step shorter than the analysis interval", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.StepDuration, ms.Spec.Rollout.Analysis.Interval = dur("30s"), dur("1m")
		}, want: []string{"spec.rollout.stepDuration must be at least spec.rollout.analysis.interval"}},
		{name: "a minimum step duration longer than the step", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.StepDuration, ms.Spec.Rollout.MinStepDuration = dur("1m"), ptr.To(dur("90s"))
		}, want: []string{"spec.rollout.minStepDuration must be at most spec.rollout.stepDuration"}},
		{name: "a minimum step duration of zero", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.MinStepDuration = ptr.To(text("0s")) },
			want: []string{"spec.rollout.minStepDuration must be a positive duration"}},
		{name: "a minimum step duration in words", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.MinStepDuration = ptr.To(text("half a minute")) },
			want: []string{notADuration("spec.rollout.minStepDuration", "half a minute")}},
		{name: "an autoscaling interval written 15sec", mutate: func(ms *v1alpha1.ModelServer) { autoscaleOn(ms).Interval = text("15sec") },
			want: []string{notADuration("spec.autoscaling.interval", "15sec")}},
		{name: "a negative autoscaling interval", mutate: func(ms *v1alpha1.ModelServer) { autoscaleOn(ms).Interval = text("-15s") },
			want: []string{"spec.autoscaling.interval " + positiveDuration}},
		{name: "a stabilization window in words", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).Behavior.ScaleDown = &v1alpha1.ScalingRules{StabilizationWindow: ptr.To(text("5 minutes"))}
		}, want: []string{notADuration("spec.autoscaling.behavior.scaleDown.stabilizationWindow", "5 minutes")}},
		{name: "a negative stabilization window", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).Behavior.ScaleUp = &v1alpha1.ScalingRules{StabilizationWindow: ptr.To(text("-1m"))}
		}, want: []string{"spec.autoscaling.behavior.scaleUp.stabilizationWindow", "from 0s to 1h"}},
		{name: "a projection horizon in words", mutate: func(ms *v1alpha1.ModelServer) { autoscaleOn(ms).ProjectionHorizon = text("3 minutes") },
			want: []string{notADuration("spec.autoscaling.projectionHorizon", "3 minutes")}},
		{name: "a negative projection horizon", mutate: func(ms *v1alpha1.ModelServer) { autoscaleOn(ms).ProjectionHorizon = text("-3m") },
			want: []string{"spec.autoscaling.projectionHorizon must be a duration from 0s to 1h"}},
		{name: "a projection horizon longer than an hour", mutate: func(ms *v1alpha1.ModelServer) { autoscaleOn(ms).ProjectionHorizon = text("2h") },
			want: []string{"spec.autoscaling.projectionHorizon must be a duration from 0s to 1h"}},
		{name: "a learnt-capacity TTFT SLO in words", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).Metrics = []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{Query: "x", Target: resource.MustParse("1"),
				LearnCapacity: &v1alpha1.CapacityLearning{TimeToFirstTokenP95: ptr.To(text("2 seconds"))}}}}
		}, want: []string{notADuration("spec.autoscaling.metrics[0].prometheus.learnCapacity.timeToFirstTokenP95", "2 seconds")}},
		{name: "a zero learnt-capacity ITL SLO", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).Metrics = []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{Query: "x", Target: resource.MustParse("1"),
				LearnCapacity: &v1alpha1.CapacityLearning{InterTokenLatencyP95: ptr.To(text("0s"))}}}}
		}, want: []string{"spec.autoscaling.metrics[*].prometheus.learnCapacity.interTokenLatencyP95 must be a duration above 0s"}},
		{name: "an SLO stating no latency", mutate: func(ms *v1alpha1.ModelServer) { autoscaleOn(ms).SLO = &v1alpha1.LatencySLO{} },
			want: []string{"spec.autoscaling.slo must set ttftP95, itlP95 or both"}},
		{name: "an SLO TTFT in words", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).SLO = &v1alpha1.LatencySLO{TTFTP95: ptr.To(text("2 seconds"))}
		}, want: []string{notADuration("spec.autoscaling.slo.ttftP95", "2 seconds")}},
		{name: "an SLO TTFT of zero", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).SLO = &v1alpha1.LatencySLO{TTFTP95: ptr.To(text("0s"))}
		}, want: []string{"spec.autoscaling.slo.ttftP95 must be a duration from 10ms to 10m"}},
		{name: "an SLO ITL of an hour", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).SLO = &v1alpha1.LatencySLO{ITLP95: ptr.To(dur("1h"))}
		}, want: []string{"spec.autoscaling.slo.itlP95 must be a duration from 1ms to 10m"}},
		{name: "a burst memory of two days", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).SLO = &v1alpha1.LatencySLO{TTFTP95: ptr.To(dur("2s")), BurstMemory: ptr.To(dur("48h"))}
		}, want: []string{"spec.autoscaling.slo.burstMemory must be a duration from 0s to 24h"}},
		{name: "a burst memory in words", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).SLO = &v1alpha1.LatencySLO{TTFTP95: ptr.To(dur("2s")), BurstMemory: ptr.To(text("half an hour"))}
		}, want: []string{notADuration("spec.autoscaling.slo.burstMemory", "half an hour")}},
		{name: "a learnt-capacity share over 100%", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).Metrics = []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{Query: "x", Target: resource.MustParse("1"),
				LearnCapacity: &v1alpha1.CapacityLearning{TargetPercentOfCapacity: ptr.To(int32(120))}}}}
		}, want: []string{"learnCapacity.targetPercentOfCapacity", "less than or equal to 100"}},
		{name: "a stabilization window longer than HPA allows", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).Behavior.ScaleDown = &v1alpha1.ScalingRules{StabilizationWindow: ptr.To(dur("2h"))}
		}, want: []string{"spec.autoscaling.behavior.scaleDown.stabilizationWindow", "from 0s to 1h"}},
		{name: "a zero scaling policy period", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).Behavior.ScaleUp = &v1alpha1.ScalingRules{Policies: []v1alpha1.ScalingPolicy{{Type: v1alpha1.PodsScalingPolicy, Value: 4, Period: text("0s")}}}
		}, want: []string{"spec.autoscaling.behavior.scaleUp.policies[0].period", "positive duration of at most 30m"}},
		{name: "a scaling policy period of an hour", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).Behavior.ScaleUp = &v1alpha1.ScalingRules{Policies: []v1alpha1.ScalingPolicy{{Type: v1alpha1.PodsScalingPolicy, Value: 4, Period: dur("1h")}}}
		}, want: []string{"spec.autoscaling.behavior.scaleUp.policies[0].period", "at most 30m"}},

		// GPUs and the pod template.
		{name: "half a GPU", mutate: withGPU("0.5", ""),
			want: []string{"spec.template.spec.containers", "GPU count (nvidia.com/gpu and the like) must be a whole number from 0 to 16"}},
		{name: "a GPU in millis", mutate: withGPU("500m", ""),
			want: []string{"spec.template.spec.containers", "must be a whole number"}},
		{name: "a GPU count as a fractional number", raw: func(spec map[string]any) {
			firstContainer(spec)["resources"] = map[string]any{"limits": map[string]any{"nvidia.com/gpu": 1.5}}
		}, want: []string{"spec.template.spec.containers[0].resources.limits.nvidia.com/gpu", "must be of type integer,string"}},
		{name: "more GPUs than any node has", mutate: withGPU("32", ""),
			want: []string{"spec.template.spec.containers", "from 0 to 16"}},
		{name: "a GPU request different from the limit", mutate: withGPU("2", "1"),
			want: []string{"spec.template.spec.containers", "a GPU request (nvidia.com/gpu and the like) must equal the container's GPU limit"}},
		{name: "a GPU request without a limit", mutate: withGPU("", "1"),
			want: []string{"spec.template.spec.containers", "must equal the container's GPU limit, which must be set"}},
		{name: "a fractional AMD GPU in a sidecar", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.Containers = append(ms.Spec.Template.Spec.Containers, corev1.Container{Name: "helper", Image: "busybox",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"amd.com/gpu": resource.MustParse("1.5")}}})
		}, want: []string{"spec.template.spec.containers", "must be a whole number"}},
		{name: "a restart policy of Never", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			want: []string{"spec.template.spec.restartPolicy must be Always or left out"}},
		{name: "a restart policy of OnFailure", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			want: []string{"spec.template.spec.restartPolicy must be Always or left out"}},
		{name: "an active deadline on the pods", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To(int64(3600)) },
			want: []string{"spec.template.spec.activeDeadlineSeconds must be left out"}},
		{name: "an empty container list", raw: set("template.spec.containers", []any{}),
			want: []string{"spec.template.spec.containers must list at least one container"}},
		{name: "a template without containers", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.Containers = nil },
			want: []string{"spec.template.spec.containers"}},

		// Replica counts.
		{name: "a million replicas", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To(int32(1000000)) },
			want: []string{"spec.replicas", "less than or equal to 10000"}},
		{name: "negative replicas", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To(int32(-1)) },
			want: []string{"spec.replicas", "greater than or equal to 0"}},
		{name: "a max replica count beyond any cluster", mutate: func(ms *v1alpha1.ModelServer) { autoscaleOn(ms).MaxReplicas = 100000 },
			want: []string{"spec.autoscaling.maxReplicas", "less than or equal to 10000"}},
		{name: "a max replica count of zero", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 0}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.maxReplicas", "greater than or equal to 1"}},
		{name: "a min replica count beyond any cluster", mutate: func(ms *v1alpha1.ModelServer) {
			a := autoscaleOn(ms)
			a.MinReplicas, a.MaxReplicas = ptr.To(int32(50000)), 60000
		},
			want: []string{"spec.autoscaling.minReplicas", "less than or equal to 10000"}},
		{name: "scale to zero on the default GPU utilization, which has no data without pods", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"minReplicas": 0, "maxReplicas": 4}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.minReplicas", "needs a metric that sees load while no pod runs"}},
		{name: "scale to zero on the requests waiting in the pods", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"minReplicas": 0, "maxReplicas": 4, "metrics": []any{map[string]any{"requestsWaiting": map[string]any{"target": 2}}}}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.minReplicas", "needs a metric that sees load while no pod runs"}},
		{name: "minReplicas above maxReplicas", mutate: func(ms *v1alpha1.ModelServer) {
			a := autoscaleOn(ms)
			a.MinReplicas, a.MaxReplicas = ptr.To(int32(5)), 2
		},
			want: []string{"spec.autoscaling.minReplicas must be less than or equal to spec.autoscaling.maxReplicas"}},

		// Lists the controller needs non-empty, and the steps.
		{name: "no steps", raw: set("rollout.steps", []any{}),
			want: []string{"spec.rollout.steps", "at least 1 items"}},
		{name: "steps that go down", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Steps = []int32{50, 25, 100} },
			want: []string{"spec.rollout.steps must be strictly increasing"}},
		{name: "steps that do not end at 100", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Steps = []int32{10, 50} },
			want: []string{"spec.rollout.steps must end at 100"}},
		{name: "a step of 0", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Steps = []int32{0, 100} },
			want: []string{"spec.rollout.steps must each be between 1 and 100"}},
		{name: "steps in percent above 100", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Steps = []int32{50, 150} },
			want: []string{"spec.rollout.steps must each be between 1 and 100"}},
		{name: "a repeated step", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Steps = []int32{50, 50, 100} },
			want: []string{"spec.rollout.steps"}},
		{name: "an empty list of scaling policies", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "behavior": map[string]any{"scaleUp": map[string]any{"selectPolicy": "Max", "policies": []any{}}}}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.behavior.scaleUp.policies", "at least 1 items"}},
		{name: "a gateway with neither parentRefs nor routeRef", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Gateway = v1alpha1.GatewaySpec{} },
			want: []string{"exactly one of spec.gateway.parentRefs"}},
		{name: "a gateway with an empty parentRefs list", raw: func(spec map[string]any) {
			spec["gateway"] = map[string]any{"parentRefs": []any{}}
		}, want: []string{"exactly one of spec.gateway.parentRefs"}},
		{name: "a gateway with both parentRefs and routeRef", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Gateway.RouteRef = &v1alpha1.RouteReference{Name: "r"} },
			want: []string{"exactly one of spec.gateway.parentRefs"}},
		{name: "hostnames with a route reference", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Gateway = v1alpha1.GatewaySpec{RouteRef: &v1alpha1.RouteReference{Name: "r"}, Hostnames: []gatewayv1.Hostname{"a.example.com"}}
		}, want: []string{"spec.gateway.hostnames and spec.gateway.matches"}},
		{name: "a route reference that is not a Kubernetes name", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Gateway = v1alpha1.GatewaySpec{RouteRef: &v1alpha1.RouteReference{Name: "Shared_Route"}}
		}, want: []string{"spec.gateway.routeRef.name"}},

		// PromQL templates.
		{name: "a query with a lower-case template key", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "x", Query: `up{namespace="{{.namespace}}"}`, Max: qty("1")}),
			want: []string{"spec.rollout.analysis.metrics[0].query", "may use only the template keys {{.Namespace}}, {{.Name}}, {{.Color}}, {{.Revision}}, {{.Pods}}, {{.Pool}} and {{.Window}}"}},
		{name: "a query with a misspelt template key", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "x", Query: `up{pod=~"{{.Pod}}"}`, Max: qty("1")}),
			want: []string{"spec.rollout.analysis.metrics[0].query: Invalid value", "spec.rollout.analysis.metrics[*].query may use only the template keys"}},
		{name: "a query with a template key without its dot", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "x", Query: `up{pod=~"{{Pods}}"}`, Max: qty("1")}),
			want: []string{"spec.rollout.analysis.metrics[0].query: Invalid value", "spec.rollout.analysis.metrics[*].query may use only the template keys"}},
		{name: "a query with an unclosed template action", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "x", Query: `up{namespace="{{.Namespace"}`, Max: qty("1")}),
			want: []string{"spec.rollout.analysis.metrics[0].query: Invalid value", "spec.rollout.analysis.metrics[*].query may use only the template keys"}},
		{name: "a blank query", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "x", Query: "   ", Max: qty("1")}),
			want: []string{"spec.rollout.analysis.metrics[0].query: Invalid value", "spec.rollout.analysis.metrics[*].query must not be blank"}},
		{name: "a sample query with a key the renderer does not know", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.SampleQuery = `sum(increase(vllm:request_success_total[{{.Interval}}]))`
		}, want: []string{"spec.rollout.analysis.sampleQuery may use only the template keys"}},
		{name: "an autoscaling query with a key the renderer does not know", mutate: scaleOn(v1alpha1.AutoscalingMetric{Prometheus: &v1alpha1.PrometheusMetric{
			Query: `sum(rate(x{deployment="{{.Deployment}}"}[1m]))`, Target: resource.MustParse("10")}}),
			want: []string{"spec.autoscaling.metrics[0].prometheus.query: Invalid value", "spec.autoscaling.metrics[*].prometheus.query may use only the template keys"}},

		// Targets, bounds and tolerances.
		{name: "a negative tolerance", mutate: func(ms *v1alpha1.ModelServer) { autoscaleOn(ms).Tolerance = qty("-0.1") },
			want: []string{"spec.autoscaling.tolerance must be a fraction from 0 up to (not including) 1"}},
		{name: "a tolerance written as a percentage", mutate: func(ms *v1alpha1.ModelServer) { autoscaleOn(ms).Tolerance = qty("10") },
			want: []string{"spec.autoscaling.tolerance must be a fraction"}},
		{name: "a zero waiting-requests target", mutate: scaleOn(v1alpha1.AutoscalingMetric{RequestsWaiting: &v1alpha1.PerReplicaMetric{Target: resource.MustParse("0")}}),
			want: []string{"spec.autoscaling.metrics[0].requestsWaiting.target: Invalid value", "spec.autoscaling.metrics[*].requestsWaiting.target must be greater than 0"}},
		{name: "a negative waiting-requests target", mutate: scaleOn(v1alpha1.AutoscalingMetric{RequestsWaiting: &v1alpha1.PerReplicaMetric{Target: resource.MustParse("-5")}}),
			want: []string{"spec.autoscaling.metrics[0].requestsWaiting.target: Invalid value", "spec.autoscaling.metrics[*].requestsWaiting.target must be greater than 0"}},
		{name: "a waiting-requests target in words", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "metrics": []any{map[string]any{"requestsWaiting": map[string]any{"target": "five"}}}}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.metrics[0].requestsWaiting.target", "should match"}},
		{name: "a zero Prometheus target", mutate: scaleOn(v1alpha1.AutoscalingMetric{Prometheus: &v1alpha1.PrometheusMetric{Query: "sum(up)", Target: resource.MustParse("0")}}),
			want: []string{"spec.autoscaling.metrics[0].prometheus.target: Invalid value", "spec.autoscaling.metrics[*].prometheus.target must be greater than 0"}},
		{name: "a negative external target", mutate: scaleOn(v1alpha1.AutoscalingMetric{External: &v1alpha1.ExternalMetric{MetricName: "queue", Target: resource.MustParse("-1")}}),
			want: []string{"spec.autoscaling.metrics[0].external.target: Invalid value", "spec.autoscaling.metrics[*].external.target must be greater than 0"}},
		{name: "a KV-cache target in percent", mutate: scaleOn(v1alpha1.AutoscalingMetric{KVCacheUsage: &v1alpha1.AverageMetric{Target: resource.MustParse("80")}}),
			want: []string{"spec.autoscaling.metrics[0].kvCacheUsage.target: Invalid value", "spec.autoscaling.metrics[*].kvCacheUsage.target must be a fraction greater than 0 and at most 1"}},
		{name: "a zero KV-cache target", mutate: scaleOn(v1alpha1.AutoscalingMetric{KVCacheUsage: &v1alpha1.AverageMetric{Target: resource.MustParse("0")}}),
			want: []string{"spec.autoscaling.metrics[0].kvCacheUsage.target: Invalid value", "spec.autoscaling.metrics[*].kvCacheUsage.target must be a fraction"}},
		{name: "a GPU utilization target of zero", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "metrics": []any{map[string]any{"gpuUtilization": map[string]any{"target": 0}}}}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.metrics[0].gpuUtilization.target", "greater than or equal to 1"}},
		{name: "a GPU utilization target above 100", mutate: scaleOn(v1alpha1.AutoscalingMetric{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: 150}}),
			want: []string{"spec.autoscaling.metrics[0].gpuUtilization.target", "less than or equal to 100"}},
		{name: "a zero CPU utilization target", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "metrics": []any{map[string]any{"resource": map[string]any{"name": "cpu", "target": 0}}}}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.metrics[0].resource.target", "greater than or equal to 1"}},
		{name: "a resource metric on GPUs", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "metrics": []any{map[string]any{"resource": map[string]any{"name": "nvidia.com/gpu", "target": 70}}}}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.metrics[0].resource.name", `supported values: "cpu", "memory"`}},
		{name: "an autoscaling metric with no signal", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "metrics": []any{map[string]any{}}}
			delete(spec, "replicas")
		}, want: []string{"exactly one of gpuUtilization, requestsWaiting"}},
		{name: "an autoscaling metric with two signals", mutate: scaleOn(v1alpha1.AutoscalingMetric{
			GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: 70}, KVCacheUsage: &v1alpha1.AverageMetric{Target: resource.MustParse("0.8")}}),
			want: []string{"exactly one of gpuUtilization, requestsWaiting"}},
		{name: "a zero scaling policy value", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "behavior": map[string]any{"scaleUp": map[string]any{"policies": []any{map[string]any{"type": "Pods", "value": 0, "period": "15s"}}}}}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.behavior.scaleUp.policies[0].value", "greater than or equal to 1"}},
		{name: "a select policy that is not Max, Min or Disabled", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "behavior": map[string]any{"scaleDown": map[string]any{"selectPolicy": "Maximum"}}}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.behavior.scaleDown.selectPolicy", `supported values: "Max", "Min", "Disabled"`}},
		{name: "a zero ratio to stable", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "x", Query: "up", MaxRatioToStable: qty("0")}),
			want: []string{"spec.rollout.analysis.metrics: Invalid value", "spec.rollout.analysis.metrics[*].maxRatioToStable must be greater than 0"}},
		{name: "a negative ratio to stable", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "x", Query: "up", MaxRatioToStable: qty("-1.2")}),
			want: []string{"spec.rollout.analysis.metrics: Invalid value", "spec.rollout.analysis.metrics[*].maxRatioToStable must be greater than 0"}},
		{name: "an analysis metric without a bound", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "ttft", Query: "x"}),
			want: []string{"an analysis metric needs at least one of max, min or maxRatioToStable"}},
		{name: "a histogram percentile of 100", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "ttft", Query: "x", MaxRatioToStable: qty("1.2"),
			Histogram: &v1alpha1.AnalysisHistogram{BucketQuery: "b", Percentile: 100}}),
			want: []string{"spec.rollout.analysis.metrics[0].histogram.percentile"}},
		{name: "a histogram without a bucket query", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "ttft", Query: "x", MaxRatioToStable: qty("1.2"),
			Histogram: &v1alpha1.AnalysisHistogram{}}),
			want: []string{"spec.rollout.analysis.metrics[0].histogram.bucketQuery"}},
		{name: "a histogram bucket query with a key the renderer does not know", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "ttft", Query: "x", MaxRatioToStable: qty("1.2"),
			Histogram: &v1alpha1.AnalysisHistogram{BucketQuery: `sum by (le) (increase(x_bucket{ns="{{.Namespce}}"}[5m]))`}}),
			want: []string{"spec.rollout.analysis.metrics[*].histogram.bucketQuery may use only the template keys"}},
		{name: "a metric read both from a histogram and per unit", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "tpot", Query: "x", MaxRatioToStable: qty("1.2"),
			Histogram: &v1alpha1.AnalysisHistogram{BucketQuery: "b"}, PerUnit: &v1alpha1.AnalysisPerUnit{NumeratorQuery: "n", DenominatorQuery: "d"}}),
			want: []string{"set at most one of histogram and perUnit"}},
		{name: "a per-unit metric without a denominator query", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "tpot", Query: "x", MaxRatioToStable: qty("1.2"),
			PerUnit: &v1alpha1.AnalysisPerUnit{NumeratorQuery: "n"}}),
			want: []string{"spec.rollout.analysis.metrics[0].perUnit.denominatorQuery"}},
		{name: "a per-unit numerator query with a key the renderer does not know", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "tpot", Query: "x", MaxRatioToStable: qty("1.2"),
			PerUnit: &v1alpha1.AnalysisPerUnit{NumeratorQuery: `sum by (pod) (n{d="{{.Deployment}}"})`, DenominatorQuery: "d"}}),
			want: []string{"spec.rollout.analysis.metrics[*].perUnit.numeratorQuery may use only the template keys"}},
		{name: "an analysis metric name with capitals", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "TTFT", Query: "x", Max: qty("1")}),
			want: []string{"spec.rollout.analysis.metrics[0].name"}},
		{name: "an unknown analysis preset", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Analysis.Preset = "sglang-fast" },
			want: []string{"spec.rollout.analysis.preset", `supported values: "vllm", "sglang", "none"`}},
		{name: "an unknown load matching", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.LoadMatching = "Stable" },
			want: []string{"spec.rollout.loadMatching", `supported values: "None", "StablePods"`}},
		{name: "a negative failure limit", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.FailureLimit = -1 },
			want: []string{"spec.rollout.failureLimit", "greater than or equal to 0"}},
		{name: "a negative sample minimum", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Analysis.MinSamples = -5 },
			want: []string{"spec.rollout.analysis.minSamples", "greater than or equal to 0"}},

		// Ports, warm-up, names.
		{name: "a port of zero", raw: set("port", 0),
			want: []string{"spec.port", "greater than or equal to 1"}},
		{name: "a port out of range", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Port = 70000 },
			want: []string{"spec.port", "less than or equal to 65535"}},
		{name: "a warm-up path without a leading slash", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Warmup = &v1alpha1.WarmupSpec{Path: "v1/models"} },
			want: []string{"spec.rollout.warmup.path"}},
		{name: "a warm-up port of zero", raw: set("rollout.warmup", map[string]any{"path": "/v1/models", "port": 0}),
			want: []string{"spec.rollout.warmup.port", "greater than or equal to 1"}},
		{name: "a name too long for the pods' names", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Name = "meta-llama-3-1-70b-instruct-fp8-h100-production"
		}, want: []string{"metadata.name must be at most 40 characters"}, createOnly: true},
		// InferencePools.
		{name: "InferencePool backend without its endpoint picker", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Gateway.Backend = v1alpha1.BackendInferencePool },
			want: []string{"spec.gateway.inferencePool", "required when spec.gateway.backend is InferencePool"}},
		{name: "an unknown backend kind", raw: set("gateway.backend", "Pool"),
			want: []string{"spec.gateway.backend", "Service", "InferencePool"}},
		{name: "an endpoint picker Service without a port", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			ms.Spec.Gateway.InferencePool.EndpointPickerRef.Port = nil
		}, want: []string{"spec.gateway.inferencePool.endpointPickerRef.port is required"}},
		{name: "pool settings on a Service backend", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			ms.Spec.Gateway.Backend = ""
		}, want: []string{"spec.gateway.inferencePool is set but spec.gateway.backend is not InferencePool"}},
		{name: "an unknown failure mode", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			ms.Spec.Gateway.InferencePool.EndpointPickerRef.FailureMode = "Retry"
		}, want: []string{"spec.gateway.inferencePool.endpointPickerRef.failureMode", "FailOpen", "FailClose"}},
		// The gateway's metrics.
		{name: "the gateway's error ratio on an InferencePool backend", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			ms.Spec.Rollout.Analysis.Gateway = v1alpha1.GatewayMetricsTraefik
		}, want: []string{"spec.rollout.analysis.gateway", "needs spec.gateway.backend Service"}},
		{name: "a gateway it does not read", raw: set("rollout.analysis.gateway", "Envoy"),
			want: []string{"spec.rollout.analysis.gateway", "Traefik"}},
		{name: "a gateway request rate target of 0", mutate: scaleOn(v1alpha1.AutoscalingMetric{Gateway: &v1alpha1.GatewayRequestsMetric{Target: resource.MustParse("0")}}),
			want: []string{"spec.autoscaling.metrics[*].gateway.target must be greater than 0"}},
		{name: "the gateway request rate beside another signal in one item", mutate: scaleOn(v1alpha1.AutoscalingMetric{
			Gateway: &v1alpha1.GatewayRequestsMetric{Target: resource.MustParse("5")}, GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: 70}}),
			want: []string{"exactly one of", "endpointPicker or gateway must be set"}},
		// Saturation and the endpoint picker's metrics.
		{name: "endpoint picker metrics on a Service backend", mutate: scaleOn(v1alpha1.AutoscalingMetric{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerQueueSize, Target: resource.MustParse("2")}}),
			want: []string{"spec.autoscaling.metrics[*].endpointPicker reads the InferencePools' endpoint picker and needs spec.gateway.backend InferencePool"}},
		{name: "an endpoint picker signal it does not have", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "metrics": []any{map[string]any{"endpointPicker": map[string]any{"signal": "KVCache", "target": "1"}}}}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.metrics[0].endpointPicker.signal", "QueueSize", "PoolSaturation", "RunningRequests"}},
		{name: "running requests without the model name", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			scaleOn(v1alpha1.AutoscalingMetric{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerRunningRequests, Target: resource.MustParse("8")}})(ms)
		}, want: []string{"spec.autoscaling.metrics[*].endpointPicker.objective (the model name) is required with signal RunningRequests"}},
		{name: "a model name on the queue size", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			scaleOn(v1alpha1.AutoscalingMetric{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerQueueSize, Target: resource.MustParse("2"), Objective: "llama"}})(ms)
		}, want: []string{"spec.autoscaling.metrics[*].endpointPicker.objective (the model name) is required with signal RunningRequests and only with it"}},
		{name: "a pool saturation target in percent", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			scaleOn(v1alpha1.AutoscalingMetric{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerPoolSaturation, Target: resource.MustParse("80")}})(ms)
		}, want: []string{"spec.autoscaling.metrics[*].endpointPicker.target must be a fraction greater than 0 and at most 1 with signal PoolSaturation"}},
		{name: "a zero endpoint picker target", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			scaleOn(v1alpha1.AutoscalingMetric{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerQueueSize, Target: resource.MustParse("0")}})(ms)
		}, want: []string{"spec.autoscaling.metrics[0].endpointPicker.target: Invalid value", "must be greater than 0"}},
		{name: "a KV-cache saturation threshold as a fraction", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "metrics": []any{map[string]any{"saturation": map[string]any{"kvCacheThresholdPercent": "0.8"}}}}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.metrics[0].saturation.kvCacheThresholdPercent", "integer"}},
		{name: "a KV-cache spare trigger at the threshold", mutate: scaleOn(v1alpha1.AutoscalingMetric{Saturation: &v1alpha1.SaturationMetric{KVCacheThresholdPercent: 80, KVSpareTriggerPercent: ptr.To(int32(80))}}),
			want: []string{"spec.autoscaling.metrics[*].saturation.kvSpareTriggerPercent must be less than kvCacheThresholdPercent"}},
		{name: "a queue spare trigger above the default threshold", mutate: scaleOn(v1alpha1.AutoscalingMetric{Saturation: &v1alpha1.SaturationMetric{QueueSpareTrigger: ptr.To(int32(6))}}),
			want: []string{"spec.autoscaling.metrics[*].saturation.queueSpareTrigger must be less than queueLengthThreshold"}},
		{name: "a queue threshold of zero", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "metrics": []any{map[string]any{"saturation": map[string]any{"queueLengthThreshold": 0}}}}
			delete(spec, "replicas")
		}, want: []string{"spec.autoscaling.metrics[0].saturation.queueLengthThreshold", "greater than or equal to 1"}},
		{name: "saturation beside another signal in one item", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "metrics": []any{map[string]any{"saturation": map[string]any{}, "gpuUtilization": map[string]any{"target": 70}}}}
			delete(spec, "replicas")
		}, want: []string{"exactly one of gpuUtilization, requestsWaiting, kvCacheUsage, prometheus, resource, external, saturation, endpointPicker or gateway"}},
	}...)
}

// zeroTargets are the numeric fields that must be greater than 0, each with how to write a
// value into the spec's JSON as the user spelt it, and what the refusal says.
func zeroTargets() []struct {
	field string
	write func(value string) func(spec map[string]any)
	pools bool
	want  []string
} {
	scaleOn := func(metric string, fields func(string) map[string]any) func(string) func(map[string]any) {
		return func(v string) func(map[string]any) {
			return func(spec map[string]any) {
				spec["autoscaling"] = map[string]any{"maxReplicas": 4, "metrics": []any{map[string]any{metric: fields(v)}}}
				delete(spec, "replicas")
			}
		}
	}
	return []struct {
		field string
		write func(value string) func(spec map[string]any)
		pools bool
		want  []string
	}{
		{field: "an endpoint picker queue target", pools: true,
			write: scaleOn("endpointPicker", func(v string) map[string]any { return map[string]any{"signal": "QueueSize", "target": v} }),
			want:  []string{"spec.autoscaling.metrics[0].endpointPicker.target: Invalid value", "must be greater than 0"}},
		{field: "an endpoint picker saturation target", pools: true,
			write: scaleOn("endpointPicker", func(v string) map[string]any { return map[string]any{"signal": "PoolSaturation", "target": v} }),
			want:  []string{"spec.autoscaling.metrics[0].endpointPicker.target: Invalid value", "must be greater than 0"}},
		{field: "a KV-cache target",
			write: scaleOn("kvCacheUsage", func(v string) map[string]any { return map[string]any{"target": v} }),
			want:  []string{"spec.autoscaling.metrics[0].kvCacheUsage.target: Invalid value", "must be a fraction greater than 0 and at most 1"}},
		{field: "a waiting-requests target",
			write: scaleOn("requestsWaiting", func(v string) map[string]any { return map[string]any{"target": v} }),
			want:  []string{"spec.autoscaling.metrics[0].requestsWaiting.target: Invalid value", "must be greater than 0"}},
		{field: "a Prometheus target",
			write: scaleOn("prometheus", func(v string) map[string]any { return map[string]any{"query": "sum(up)", "target": v} }),
			want:  []string{"spec.autoscaling.metrics[0].prometheus.target: Invalid value", "must be greater than 0"}},
		{field: "an external metric target",
			write: scaleOn("external", func(v string) map[string]any { return map[string]any{"metricName": "queue", "target": v} }),
			want:  []string{"spec.autoscaling.metrics[0].external.target: Invalid value", "must be greater than 0"}},
		{field: "a ratio to stable",
			write: func(v string) func(map[string]any) {
				return set("rollout.analysis.metrics", []any{map[string]any{"name": "x", "query": "x", "maxRatioToStable": v}})
			},
			want: []string{"spec.rollout.analysis.metrics: Invalid value", "spec.rollout.analysis.metrics[*].maxRatioToStable must be greater than 0"}},
	}
}

// zeroSpellings writes zero, and a negative value, in the ways the quantity syntax allows into
// every field that must be greater than 0: admission compares quantities, not spellings.
func zeroSpellings() []badSpec {
	var out []badSpec
	for _, f := range zeroTargets() {
		for _, v := range []string{"0", "0.000", "0e3", "0Ki", "-0.1"} {
			var mutate func(*v1alpha1.ModelServer)
			if f.pools {
				mutate = onPools
			}
			out = append(out, badSpec{name: f.field + " of " + v, mutate: mutate, raw: f.write(v), want: f.want})
		}
	}
	out = append(out, badSpec{name: "a tolerance of -0.1", raw: func(spec map[string]any) {
		spec["autoscaling"] = map[string]any{"maxReplicas": 4, "tolerance": "-0.1"}
		delete(spec, "replicas")
	}, want: []string{"spec.autoscaling.tolerance must be a fraction from 0"}})
	return out
}

// childKindsOfMistake are the mistakes that used to get through admission and fail later: a
// pool key without pools, bounds no value can pass, the controller's own pod labels, a port
// the model server does not declare, a pod template the Deployment API refuses.
func childKindsOfMistake() []badSpec {
	analysisMetric := func(m v1alpha1.AnalysisMetric) func(*v1alpha1.ModelServer) {
		return func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{m} }
	}
	label := func(k string) func(*v1alpha1.ModelServer) {
		return func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Labels = map[string]string{"app": "llm", k: "x"} }
	}
	const labelsMsg = "spec.template.metadata.labels must not set serving.modelship.dev/modelserver, serving.modelship.dev/color or serving.modelship.dev/revision"
	const containerName = "spec.template.spec.containers[*].name must be a DNS-1123 label"
	return []badSpec{
		// {{.Pool}} on Service backends.
		{name: "an analysis query reading the pool of a ModelServer served through Services", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "epp", MaxRatioToStable: qty("2"),
			Query: `avg(inference_pool_average_queue_size{name=~"{{.Pool}}"})`}),
			want: []string{"spec.rollout.analysis.metrics: Invalid value", "spec.rollout.analysis.metrics[*].query and histogram.bucketQuery may use {{.Pool}}, the color's InferencePool, only with spec.gateway.backend InferencePool"}},
		{name: "a histogram bucket query reading the pool without pools", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "ttft", MaxRatioToStable: qty("1.2"), Query: "x",
			Histogram: &v1alpha1.AnalysisHistogram{BucketQuery: `sum by (le) (increase(x_bucket{pool="{{- .Pool -}}"}[5m]))`}}),
			want: []string{"spec.rollout.analysis.metrics: Invalid value", "may use {{.Pool}}", "only with spec.gateway.backend InferencePool"}},
		{name: "a sample query reading the pool without pools", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.SampleQuery = `sum(increase(x{pool="{{ .Pool }}"}[{{.Window}}]))`
		}, want: []string{"spec.rollout.analysis.sampleQuery: Invalid value", "spec.rollout.analysis.sampleQuery may use {{.Pool}}"}},
		{name: "an autoscaling query reading the pool without pools", mutate: func(ms *v1alpha1.ModelServer) {
			autoscaleOn(ms).Metrics = []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{Query: `sum(x{pool=~"{{.Pool}}"})`, Target: resource.MustParse("1")}}}
		}, want: []string{"spec.autoscaling.metrics: Invalid value", "spec.autoscaling.metrics[*].prometheus.query may use {{.Pool}}"}},

		// Bounds that no value can pass.
		{name: "an analysis min above its max", mutate: analysisMetric(v1alpha1.AnalysisMetric{Name: "success", Query: "x", Min: qty("0.99"), Max: qty("0.5")}),
			want: []string{"spec.rollout.analysis.metrics: Invalid value", "spec.rollout.analysis.metrics[*].min must not be greater than max: no value could pass"}},
		{name: "an analysis min above its max in other units", raw: set("rollout.analysis.metrics", []any{map[string]any{"name": "x", "query": "x", "min": "1Ki", "max": 1000}}),
			want: []string{"spec.rollout.analysis.metrics[*].min must not be greater than max"}},
		{name: "an analysis min above its max in the last metric of twenty", mutate: func(ms *v1alpha1.ModelServer) {
			for i := range 20 {
				m := v1alpha1.AnalysisMetric{Name: fmt.Sprintf("m%d", i), Query: "x", Max: qty("1")}
				if i == 19 {
					m.Min = qty("2")
				}
				ms.Spec.Rollout.Analysis.Metrics = append(ms.Spec.Rollout.Analysis.Metrics, m)
			}
		}, want: []string{"spec.rollout.analysis.metrics[*].min must not be greater than max"}},

		// The controller's own pod labels.
		{name: "a template label of the color", mutate: label(v1alpha1.LabelColor), want: []string{"spec.template.metadata.labels: Invalid value", labelsMsg}},
		{name: "a template label of the ModelServer", mutate: label(v1alpha1.LabelModelServer), want: []string{labelsMsg}},
		{name: "a template label of the revision", mutate: label(v1alpha1.LabelRevision), want: []string{labelsMsg}},

		// spec.port left at its default while the model server declares another port.
		{name: "the default port while the model server declares 8080", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		}, want: []string{"spec.port: Invalid value", "spec.port is 8000 (the default), but the only container that declares ports declares containerPort 8080 and not 8000: set spec.port to 8080"}},
		{name: "the default port while the model server declares 9000 and 9090 beside a sidecar without ports", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 9000}, {Name: "metrics", ContainerPort: 9090}}
			ms.Spec.Template.Spec.Containers = append(ms.Spec.Template.Spec.Containers, corev1.Container{Name: "log-shipper", Image: "busybox"})
		}, want: []string{"set spec.port to 9000"}},

		// Pod templates the Deployment API refuses, caught by CEL.
		{name: "an upper-case container name", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.Containers[0].Name = "VLLM" },
			want: []string{"spec.template.spec.containers: Invalid value", containerName}},
		{name: "a container name with an underscore", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.Containers[0].Name = "vllm_server" },
			want: []string{containerName}},
		{name: "a container name ending with a dash", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.Containers[0].Name = "vllm-" },
			want: []string{containerName}},
		{name: "an empty container name", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.Containers[0].Name = "" },
			want: []string{containerName}},
		{name: "an upper-case sidecar name", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.Containers = append(ms.Spec.Template.Spec.Containers, corev1.Container{Name: "Proxy", Image: "envoyproxy/envoy:v1.31"})
		}, want: []string{containerName}},
		{name: "an upper-case init container name", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "FetchWeights", Image: "busybox"}}
		}, want: []string{"spec.template.spec.initContainers: Invalid value", "spec.template.spec.initContainers[*].name must be a DNS-1123 label"}},
		{name: "an empty image", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.Containers[0].Image = "" },
			want: []string{"spec.template.spec.containers: Invalid value", "spec.template.spec.containers[*].image must be set"}},
		{name: "a sidecar without an image", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.Containers = append(ms.Spec.Template.Spec.Containers, corev1.Container{Name: "proxy"})
		}, want: []string{"spec.template.spec.containers[*].image must be set"}},
	}
}

// toUnstructured writes ms as the API server would receive it, then lets raw change its spec.
func toUnstructured(t *testing.T, ms *v1alpha1.ModelServer, raw func(map[string]any)) *unstructured.Unstructured {
	t.Helper()
	ms.APIVersion, ms.Kind = v1alpha1.GroupVersion.String(), "ModelServer"
	b, err := json.Marshal(ms)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	if raw != nil {
		raw(u.Object["spec"].(map[string]any))
	}
	return u
}

func TestRejectsInvalidSpecsAtAdmissionNamingTheField(t *testing.T) {
	ns := newNamespace(t)
	cases := badSpecs()
	if len(cases) < 40 {
		t.Fatalf("the corpus has %d bad specs; keep at least 40", len(cases))
	}
	for i, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			ms := newModelServer(ns, fmt.Sprintf("bad-%d", i))
			if tt.mutate != nil {
				tt.mutate(ms)
			}
			err := k8s.Create(context.Background(), toUnstructured(t, ms, tt.raw))
			if err == nil {
				t.Fatalf("accepted; want an error naming %q", tt.want)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("refused, but not as invalid: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			// A duration rule that errors (rather than answering false) says so twice and cannot
			// ratchet: a stored object with that value could never have its status written again.
			// (The quantity rules still error on text that is not a quantity: guarding them with
			// isQuantity puts the CRD over the API server's CEL cost budget.)
			if strings.Contains(err.Error(), "google.protobuf.Duration") {
				t.Errorf("a rule failed to evaluate instead of answering: %v", err)
			}
		})
	}
}

// An invalid update is refused naming the field and leaves the stored object as it was, while
// the controller keeps reconciling it (and writing its status).
func TestRejectsInvalidUpdatesLeavingTheStoredObjectUnchanged(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "stored")
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tt := range badSpecs() {
		if tt.createOnly {
			continue
		}
		n++
		t.Run(tt.name, func(t *testing.T) {
			var before map[string]any
			var generation int64
			var err error
			// A full update (PUT) of the stored object with the mistake made; retried when the
			// controller's status write got in between (a conflict is not a refusal).
			for range 20 {
				typed := &v1alpha1.ModelServer{}
				stored := &unstructured.Unstructured{}
				stored.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ModelServer"))
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(ms), stored); err != nil {
					t.Fatal(err)
				}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(stored.Object, typed); err != nil {
					t.Fatal(err)
				}
				before, generation = stored.Object["spec"].(map[string]any), stored.GetGeneration()
				if tt.mutate != nil {
					tt.mutate(typed)
				}
				after := toUnstructured(t, typed, tt.raw)
				after.SetResourceVersion(stored.GetResourceVersion())
				if err = k8s.Update(ctx, after); !apierrors.IsConflict(err) {
					break
				}
			}
			if err == nil {
				t.Fatalf("update accepted; want an error naming %q", tt.want)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("refused, but not as invalid: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			now := &unstructured.Unstructured{}
			now.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ModelServer"))
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(ms), now); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(now.Object["spec"], any(before)) || now.GetGeneration() != generation {
				t.Fatalf("the stored spec changed (generation %d -> %d):\nbefore %v\nafter  %v", generation, now.GetGeneration(), before, now.Object["spec"])
			}
		})
	}
	if n < 36 {
		t.Fatalf("only %d invalid updates tried; keep at least 36", n)
	}
}

// Every ModelServer the repository shows users (config/samples, the README) is still accepted
// by the rules above. The demo's and the end-to-end stories' stack.ModelServer is checked in the
// test module (test/framework/stack).
func TestAcceptsEveryModelServerTheRepositoryShows(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	type example struct {
		from string
		obj  *unstructured.Unstructured
	}
	var examples []example
	addYAML := func(from, doc string) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%s: %v", from, err)
		}
		if u.GetKind() == "ModelServer" {
			examples = append(examples, example{from, u})
		}
	}
	samples, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "*.yaml"))
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples in config/samples: %v", err)
	}
	for _, f := range samples {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(b), "\n---") {
			addYAML(fmt.Sprintf("%s#%d", filepath.Base(f), i), doc)
		}
	}
	readme, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for i, block := range strings.Split(string(readme), "```yaml\n")[1:] {
		addYAML(fmt.Sprintf("README.md yaml block %d", i+1), strings.SplitN(block, "```", 2)[0])
	}
	examples = append(examples, example{"Go: envtest", toUnstructured(t, newModelServer(ns, "envtest"), nil)})
	if len(examples) < 3 {
		t.Fatalf("found only %d examples", len(examples))
	}
	for _, g := range append(goodSpecs(), tinyPositives()...) {
		ms := newModelServer(ns, "good")
		if g.mutate != nil {
			g.mutate(ms)
		}
		examples = append(examples, example{"edge: " + g.name, toUnstructured(t, ms, g.raw)})
	}
	for i, ex := range examples {
		t.Run(ex.from, func(t *testing.T) {
			ex.obj.SetNamespace(ns)
			ex.obj.SetName(fmt.Sprintf("example-%d", i))
			if err := k8s.Create(ctx, ex.obj, client.DryRunAll); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
	// The dry run is judged as a create would be: a bad spec is refused the same way.
	bad := newModelServer(ns, "bad")
	bad.Spec.Rollout.StepDuration = text("2 minutes")
	if err := k8s.Create(ctx, toUnstructured(t, bad, nil), client.DryRunAll); !apierrors.IsInvalid(err) {
		t.Errorf("a dry run accepted stepDuration 2 minutes: %v", err)
	}
}

// goodSpecs are unusual but valid ModelServers the rules must not refuse.
func goodSpecs() []badSpec {
	gpu := func(name string, limit, request any) func(map[string]any) {
		return func(spec map[string]any) {
			r := map[string]any{"limits": map[string]any{name: limit}}
			if request != nil {
				r["requests"] = map[string]any{name: request}
			}
			firstContainer(spec)["resources"] = r
		}
	}
	return []badSpec{
		{name: "durations in hours and minutes, fractions and milliseconds", mutate: func(ms *v1alpha1.ModelServer) {
			r := &ms.Spec.Rollout
			r.StepDuration, r.ScaleDownDelay, r.ProgressDeadline, r.Inconclusive.RollbackAfter = dur("1h30m"), dur("1.5h"), dur("45m"), ptr.To(dur("90s"))
			r.Analysis.Interval = dur("1500ms")
		}},
		{name: "a step as long as the analysis interval", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.StepDuration, ms.Spec.Rollout.Analysis.Interval = dur("1m"), dur("60s")
		}},
		{name: "eight GPUs as a number, request equal to limit", raw: gpu("nvidia.com/gpu", 8, 8)},
		{name: "sixteen GPUs as a string, request equal to limit", raw: gpu("nvidia.com/gpu", "16", "16")},
		{name: "a GPU request as a string and a limit as a number", raw: gpu("nvidia.com/gpu", 1, "1")},
		{name: "an AMD GPU", raw: gpu("amd.com/gpu", "1", nil)},
		{name: "no GPU at all, fractional CPU", raw: func(spec map[string]any) {
			firstContainer(spec)["resources"] = map[string]any{"requests": map[string]any{"cpu": "500m", "memory": "1.5Gi"}}
		}},
		{name: "restartPolicy Always", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways }},
		{name: "load matching on the stable pods", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.LoadMatching = v1alpha1.LoadMatchingStablePods }},
		{name: "a header route to the candidate", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.HeaderRoute = &v1alpha1.HeaderRouteSpec{Name: "X-Canary", Value: "always"}
		}},
		{name: "template keys with spaces and trim markers", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "ok", MaxRatioToStable: qty("2"),
				Query: `sum(rate(x{namespace="{{ .Namespace }}",pod=~"{{- .Pods -}}",c="{{.Color}}",r="{{.Revision}}",n="{{.Name}}"}[{{.Window}}]))`}}
			ms.Spec.Rollout.Analysis.SampleQuery = `sum(increase(y{job="a"}[5m]))`
		}},
		{name: "the vLLM preset's own queries written out", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "ttft-p95", Max: qty("500m"), Min: qty("0"),
				Query: `histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{namespace="{{.Namespace}}",pod=~"{{.Pods}}"}[{{.Window}}])))`}}
		}},
		{name: "negative bounds on a metric that can be negative", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "drift", Query: "x", Min: qty("-1"), Max: qty("1")}}
		}},
		{name: "a ratio to stable as a whole number", raw: set("rollout.analysis.metrics", []any{map[string]any{"name": "x", "query": "x", "maxRatioToStable": 2}})},
		{name: "autoscaling with every signal at sensible targets and the widest bounds", mutate: func(ms *v1alpha1.ModelServer) {
			a := autoscaleOn(ms)
			a.MinReplicas, a.MaxReplicas, a.Interval, a.Tolerance = ptr.To(int32(0)), 10000, dur("200ms"), qty("0")
			a.Metrics = []v1alpha1.AutoscalingMetric{
				{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: 100}},
				{RequestsWaiting: &v1alpha1.PerReplicaMetric{Target: resource.MustParse("500m")}},
				{KVCacheUsage: &v1alpha1.AverageMetric{Target: resource.MustParse("1")}},
				{Prometheus: &v1alpha1.PrometheusMetric{Query: `sum(rate(x{namespace="{{.Namespace}}"}[1m]))`, Target: resource.MustParse("10")}},
				{Resource: &v1alpha1.ResourceMetric{Name: corev1.ResourceCPU, Target: 80}},
				{External: &v1alpha1.ExternalMetric{MetricName: "queue_depth", Target: resource.MustParse("20")}},
			}
			a.Behavior = v1alpha1.ScalingBehavior{
				ScaleUp:   &v1alpha1.ScalingRules{StabilizationWindow: ptr.To(dur("0s")), Policies: []v1alpha1.ScalingPolicy{{Type: v1alpha1.PercentScalingPolicy, Value: 900, Period: dur("30m")}}},
				ScaleDown: &v1alpha1.ScalingRules{StabilizationWindow: ptr.To(dur("1h")), SelectPolicy: ptr.To(v1alpha1.SelectDisabled)},
			}
		}},
		{name: "zero durations where zero is allowed, written 0 and 0s, and an explicit plus sign", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "projectionHorizon": "0", "behavior": map[string]any{
				"scaleUp": map[string]any{"stabilizationWindow": "0"}, "scaleDown": map[string]any{"stabilizationWindow": "+0s"}}}
			set("rollout.inconclusive", map[string]any{"reportAfter": "+5m", "rollbackAfter": "1h30m"})(spec)
			delete(spec, "replicas")
		}},
		{name: "capacity learning with both latency SLOs, and with its defaults", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 8, "projectionHorizon": "3m", "metrics": []any{
				map[string]any{"prometheus": map[string]any{"query": "sum(x)", "target": "0.54",
					"learnCapacity": map[string]any{"targetPercentOfCapacity": 90, "timeToFirstTokenP95": "2s", "interTokenLatencyP95": "100ms", "saturatedAtRequestsWaiting": 2}}},
				map[string]any{"prometheus": map[string]any{"query": "sum(y)", "target": 3, "learnCapacity": map[string]any{}}},
			}}
			delete(spec, "replicas")
		}},
		{name: "an SLO with both latencies and no metrics", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 30, "minReplicas": 2, "projectionHorizon": "3m", "slo": map[string]any{"ttftP95": "2s", "itlP95": "100ms"}}
			delete(spec, "replicas")
		}},
		{name: "an SLO TTFT only beside a metric", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 8, "slo": map[string]any{"ttftP95": "500ms"}, "metrics": []any{map[string]any{"gpuUtilization": map[string]any{"target": 80}}}}
			delete(spec, "replicas")
		}},
		{name: "a tolerance just under 1 and a KV-cache target as a number", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "tolerance": "0.99", "metrics": []any{map[string]any{"kvCacheUsage": map[string]any{"target": 1}}}}
			delete(spec, "replicas")
		}},
		{name: "scale to zero on a prometheus total beside GPU utilization", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"minReplicas": 0, "maxReplicas": 4, "metrics": []any{
				map[string]any{"gpuUtilization": map[string]any{}},
				map[string]any{"prometheus": map[string]any{"query": `sum(rate(gateway_requests_total{route="llama"}[1m])) or vector(0)`, "target": 5}},
			}}
			delete(spec, "replicas")
		}},
		{name: "scale to zero on an external queue", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"minReplicas": 0, "maxReplicas": 4, "metrics": []any{
				map[string]any{"external": map[string]any{"metricName": "queue_depth", "target": 20}},
			}}
			delete(spec, "replicas")
		}},
		{name: "zero replicas", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To(int32(0)) }},
		{name: "saturation with llm-d's defaults", raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 8, "metrics": []any{map[string]any{"saturation": map[string]any{}}}}
			delete(spec, "replicas")
		}},
		{name: "saturation with zero triggers and the endpoint picker's three signals over pools", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			a := autoscaleOn(ms)
			a.Metrics = []v1alpha1.AutoscalingMetric{
				{Saturation: &v1alpha1.SaturationMetric{KVCacheThresholdPercent: 100, QueueLengthThreshold: 1, KVSpareTriggerPercent: ptr.To(int32(0)), QueueSpareTrigger: ptr.To(int32(0))}},
				{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerQueueSize, Target: resource.MustParse("2.5")}},
				{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerPoolSaturation, Target: resource.MustParse("1")}},
				{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerRunningRequests, Target: resource.MustParse("16"), Objective: "meta-llama/Llama-3.1-8B-Instruct"}},
			}
		}},
		{name: "a route reference with a dotted name", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Gateway = v1alpha1.GatewaySpec{RouteRef: &v1alpha1.RouteReference{Name: "llm.shared-route"}}
		}},
		{name: "the pool key over InferencePools, in every query", mutate: func(ms *v1alpha1.ModelServer) {
			onPools(ms)
			ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "epp", MaxRatioToStable: qty("2"), Query: `avg(inference_pool_average_queue_size{name=~"{{.Pool}}"})`,
				Histogram: &v1alpha1.AnalysisHistogram{BucketQuery: `sum by (le) (increase(x_bucket{pool=~"{{ .Pool }}"}[5m]))`}}}
			ms.Spec.Rollout.Analysis.SampleQuery = `sum(increase(x{pool=~"{{.Pool}}"}[5m]))`
			autoscaleOn(ms).Metrics = []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{Query: `sum(x{pool=~"{{.Pool}}"})`, Target: resource.MustParse("1")}}}
		}},
		{name: "a query naming a pool label without the key on Services", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "x", MaxRatioToStable: qty("2"), Query: `avg(x{name=~"my.Pool.+",pod=~"{{.Pods}}"})`}}
		}},
		{name: "a min equal to its max in other spellings", raw: set("rollout.analysis.metrics", []any{
			map[string]any{"name": "zero", "query": "x", "min": "0Ki", "max": "0.000"},
			map[string]any{"name": "one", "query": "x", "min": 1, "max": "1000m"},
		})},
		{name: "template labels of the user's own, one under modelship's domain", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Labels = map[string]string{"app": "llm", "serving.modelship.dev/team": "search"}
		}},
		{name: "spec.port set to the model server's declared port", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Port = 8080
			ms.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		}},
		{name: "the default port declared beside a metrics port", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}, {Name: "http", ContainerPort: 8000}}
		}},
		{name: "the default port with no port declared", mutate: func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.Containers[0].Ports = nil }},
		{name: "the default port with two containers declaring others (which one serves is the user's call)", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
			ms.Spec.Template.Spec.Containers = append(ms.Spec.Template.Spec.Containers, corev1.Container{Name: "proxy", Image: "envoyproxy/envoy:v1.31", Ports: []corev1.ContainerPort{{ContainerPort: 8001}}})
		}},
		{name: "container names with digits and dashes, and an init container", mutate: func(ms *v1alpha1.ModelServer) {
			ms.Spec.Template.Spec.Containers[0].Name = "vllm-0"
			ms.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "fetch-weights-2", Image: "busybox"}}
		}},
	}
}

// tinyPositives are values just above 0 in each field that must be greater than 0, and zero
// tolerances in every spelling: what the quantity rules must let through.
func tinyPositives() []badSpec {
	var out []badSpec
	for _, f := range zeroTargets() {
		for _, v := range []string{"1m", "0.001", "1e-3"} {
			var mutate func(*v1alpha1.ModelServer)
			if f.pools {
				mutate = onPools
			}
			out = append(out, badSpec{name: f.field + " of " + v, mutate: mutate, raw: f.write(v)})
		}
	}
	for _, v := range []string{"0", "0.000", "0e3", "0Ki", "1m"} {
		out = append(out, badSpec{name: "a tolerance of " + v, raw: func(spec map[string]any) {
			spec["autoscaling"] = map[string]any{"maxReplicas": 4, "tolerance": v}
			delete(spec, "replicas")
		}})
	}
	return out
}

// minReplicas 0 sent by a typed Go client is stored as 0 (scale to zero), and an unset one gets
// the default 1: as an int with omitempty the 0 was dropped and defaulted to 1, so a Go client
// (a CD tool, an operator, the e2e stories) could not ask for scale to zero.
func TestATypedClientCanAskForZeroMinReplicas(t *testing.T) {
	ns := newNamespace(t)
	for name, min := range map[string]*int32{"zero": ptr.To(int32(0)), "unset": nil} {
		ms := newModelServer(ns, name, func(ms *v1alpha1.ModelServer) {
			ms.Spec.Replicas = nil
			ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: min, MaxReplicas: 4, Metrics: []v1alpha1.AutoscalingMetric{
				{Gateway: &v1alpha1.GatewayRequestsMetric{Target: resource.MustParse("5")}}}}
		})
		if err := k8s.Create(context.Background(), ms); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := getMS(t, ms).Spec.Autoscaling.MinReplicas
		want := int32(1)
		if min != nil {
			want = *min
		}
		if got == nil || *got != want {
			t.Errorf("%s: stored minReplicas %v, want %d", name, got, want)
		}
	}
}

// An unset spec.rollout.loadMatching is stored as StablePods, the API's default: a step's
// weight follows the candidate's share of Ready pods, so that the colors are compared at the
// same load per pod; None stays None.
func TestAdmissionDefaultsLoadMatchingToStablePods(t *testing.T) {
	ns := newNamespace(t)
	for name, lm := range map[string]v1alpha1.LoadMatching{"unset": "", "none": v1alpha1.LoadMatchingNone} {
		ms := newModelServer(ns, name, func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.LoadMatching = lm })
		if err := k8s.Create(context.Background(), ms); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := v1alpha1.LoadMatchingStablePods
		if lm != "" {
			want = lm
		}
		if got := getMS(t, ms).Spec.Rollout.LoadMatching; got != want {
			t.Errorf("%s: stored loadMatching %q, want %q", name, got, want)
		}
	}
}
