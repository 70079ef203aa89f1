package controller

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
)

// Bounds that admission enforces too (see the CEL rules in api/v1alpha1); the controller checks
// them again for objects stored before those rules existed or that admission cannot fully check
// (CEL's cost budget: containers past the 16th, quantities written in unusual forms).
const (
	maxReplicaCount        = 10000
	maxStabilizationWindow = time.Hour
	maxPolicyPeriod        = 30 * time.Minute
)

// validateFields reports every field of the spec that admission should have refused, each
// error naming the field: malformed, zero or negative durations, replica counts beyond any
// cluster, pod settings a Deployment refuses, GPU counts that cannot be scheduled, and
// targets, bounds and tolerances that no value could meet.
func validateFields(ms *v1alpha1.ModelServer) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	errs = append(errs, validateTemplate(&ms.Spec.Template, spec.Child("template"))...)
	if r := ms.Spec.Replicas; r != nil && (*r < 0 || *r > maxReplicaCount) {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *r, "must be from 0 to 10000"))
	}

	ro, rp := ms.Spec.Rollout, spec.Child("rollout")
	errs = append(errs, positive(rp.Child("stepDuration"), ro.StepDuration, true)...)
	errs = append(errs, positive(rp.Child("scaleDownDelay"), ro.ScaleDownDelay, true)...)
	errs = append(errs, positive(rp.Child("progressDeadline"), ro.ProgressDeadline, true)...)
	ip := rp.Child("inconclusive")
	errs = append(errs, positive(ip.Child("reportAfter"), ro.Inconclusive.ReportAfter, true)...)
	if ra := ro.Inconclusive.RollbackAfter; ra != nil {
		errs = append(errs, positive(ip.Child("rollbackAfter"), *ra, false)...)
	}
	ap := rp.Child("analysis")
	errs = append(errs, positive(ap.Child("interval"), ro.Analysis.Interval, true)...)
	if si := ro.Analysis.ScrapeInterval; si != nil {
		if e := positive(ap.Child("scrapeInterval"), *si, false); len(e) > 0 {
			errs = append(errs, e...)
		} else if si.Duration < time.Second || si.Duration > 10*time.Minute {
			errs = append(errs, field.Invalid(ap.Child("scrapeInterval"), si.String(), "must be between 1s and 10m"))
		}
	}
	if s, i := ro.StepDuration.Duration, ro.Analysis.Interval.Duration; s > 0 && i > 0 && s < i {
		errs = append(errs, field.Invalid(rp.Child("stepDuration"), ro.StepDuration.String(),
			"must be at least spec.rollout.analysis.interval ("+ro.Analysis.Interval.String()+"): every step is judged on at least one measurement"))
	}
	for i, m := range ro.Analysis.Metrics {
		mp := ap.Child("metrics").Index(i)
		if q := m.MaxRatioToStable; q != nil && q.Sign() <= 0 {
			errs = append(errs, field.Invalid(mp.Child("maxRatioToStable"), q.String(), "must be greater than 0, such as 1.2 for at most 20% worse than the stable color"))
		}
		if m.Min != nil && m.Max != nil && m.Min.Cmp(*m.Max) > 0 {
			errs = append(errs, field.Invalid(mp.Child("min"), m.Min.String(), "must not be greater than max ("+m.Max.String()+"): no value could pass"))
		}
	}

	if !ms.UsesInferencePools() {
		errs = append(errs, poolKeyWithoutPools(ms)...)
	}
	if a := ms.Spec.Autoscaling; a != nil {
		errs = append(errs, validateAutoscaling(a, spec.Child("autoscaling"))...)
		for i, m := range a.Metrics {
			if m.EndpointPicker != nil && !ms.UsesInferencePools() {
				errs = append(errs, field.Invalid(spec.Child("autoscaling", "metrics").Index(i).Child("endpointPicker"), string(m.EndpointPicker.Signal), "reads the InferencePools' endpoint picker and needs spec.gateway.backend InferencePool"))
			}
		}
	}
	return errs
}

func validateAutoscaling(a *v1alpha1.AutoscalingSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.Min() < 0 || a.Min() > maxReplicaCount {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), a.Min(), "must be from 0 to 10000"))
	}
	if a.Min() == 0 && !autoscale.ScalesFromZero(a.Metrics) {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), a.Min(), "0 needs a metric that sees load while no pod runs "+
			"(prometheus, external, gateway, or endpointPicker with signal RunningRequests): the pod metrics have no data without pods, and the count would never come back from 0"))
	}
	if a.MaxReplicas < 1 || a.MaxReplicas > maxReplicaCount {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), a.MaxReplicas, "must be from 1 to 10000"))
	}
	errs = append(errs, positive(p.Child("interval"), a.Interval, true)...)
	if t := a.Tolerance; t != nil && (t.Sign() < 0 || t.Cmp(resource.MustParse("1")) >= 0) {
		errs = append(errs, field.Invalid(p.Child("tolerance"), t.String(), "must be a fraction from 0 up to (not including) 1, such as 0.1 for 10%"))
	}
	for i, m := range a.Metrics {
		mp := p.Child("metrics").Index(i)
		switch {
		case m.RequestsWaiting != nil:
			errs = append(errs, positiveQuantity(mp.Child("requestsWaiting", "target"), m.RequestsWaiting.Target)...)
		case m.Prometheus != nil:
			errs = append(errs, positiveQuantity(mp.Child("prometheus", "target"), m.Prometheus.Target)...)
			errs = append(errs, validateLearning(m.Prometheus.LearnCapacity, mp.Child("prometheus", "learnCapacity"))...)
		case m.External != nil:
			errs = append(errs, positiveQuantity(mp.Child("external", "target"), m.External.Target)...)
		case m.Gateway != nil:
			errs = append(errs, positiveQuantity(mp.Child("gateway", "target"), m.Gateway.Target)...)
		case m.KVCacheUsage != nil:
			if t := m.KVCacheUsage.Target; t.Sign() <= 0 || t.Cmp(resource.MustParse("1")) > 0 {
				errs = append(errs, field.Invalid(mp.Child("kvCacheUsage", "target"), t.String(), "must be a fraction greater than 0 and at most 1, such as 0.8 for 80%"))
			}
		case m.Saturation != nil:
			errs = append(errs, validateSaturation(m.Saturation, mp.Child("saturation"))...)
		case m.EndpointPicker != nil:
			e, ep := m.EndpointPicker, mp.Child("endpointPicker")
			errs = append(errs, positiveQuantity(ep.Child("target"), e.Target)...)
			if e.Signal == v1alpha1.EndpointPickerPoolSaturation && e.Target.Cmp(resource.MustParse("1")) > 0 {
				errs = append(errs, field.Invalid(ep.Child("target"), e.Target.String(), "must be a fraction greater than 0 and at most 1 with signal PoolSaturation, such as 0.8"))
			}
			if (e.Signal == v1alpha1.EndpointPickerRunningRequests) != (e.Objective != "") {
				errs = append(errs, field.Invalid(ep.Child("objective"), e.Objective, "the model name is required with signal RunningRequests and only with it"))
			}
		}
	}
	for _, d := range []struct {
		name  string
		rules *v1alpha1.ScalingRules
	}{{"scaleUp", a.Behavior.ScaleUp}, {"scaleDown", a.Behavior.ScaleDown}} {
		r := d.rules
		if r == nil {
			continue
		}
		rp := p.Child("behavior", d.name)
		if w := r.StabilizationWindow; w != nil {
			switch {
			case w.Err() != nil:
				errs = append(errs, field.Invalid(rp.Child("stabilizationWindow"), w.String(), w.Err().Error()))
			case w.Duration < 0 || w.Duration > maxStabilizationWindow:
				errs = append(errs, field.Invalid(rp.Child("stabilizationWindow"), w.String(), "must be a duration from 0s to 1h, such as 5m or 300s"))
			}
		}
		for i, pol := range r.Policies {
			pp := rp.Child("policies").Index(i)
			errs = append(errs, positive(pp.Child("period"), pol.Period, false)...)
			if pol.Period.Duration > maxPolicyPeriod {
				errs = append(errs, field.Invalid(pp.Child("period"), pol.Period.String(), "must be at most 30m"))
			}
		}
	}
	return errs
}

// poolKey is the {{.Pool}} template key, in any of the forms the CRD's pattern allows.
var poolKey = regexp.MustCompile(`\{\{-?\s*\.Pool\s*-?\}\}`)

// poolKeyWithoutPools reports each query template that reads {{.Pool}} although the ModelServer
// serves through Services: there is no pool, hence no endpoint picker metric, to read.
func poolKeyWithoutPools(ms *v1alpha1.ModelServer) field.ErrorList {
	var errs field.ErrorList
	const why = "uses {{.Pool}}, the color's InferencePool, which exists only with spec.gateway.backend InferencePool"
	ap := field.NewPath("spec", "rollout", "analysis")
	a := ms.Spec.Rollout.Analysis
	for i, m := range a.Metrics {
		if poolKey.MatchString(m.Query) {
			errs = append(errs, field.Invalid(ap.Child("metrics").Index(i).Child("query"), m.Query, why))
		}
		if h := m.Histogram; h != nil && poolKey.MatchString(h.BucketQuery) {
			errs = append(errs, field.Invalid(ap.Child("metrics").Index(i).Child("histogram", "bucketQuery"), h.BucketQuery, why))
		}
		if u := m.PerUnit; u != nil {
			for name, q := range map[string]string{"numeratorQuery": u.NumeratorQuery, "denominatorQuery": u.DenominatorQuery} {
				if poolKey.MatchString(q) {
					errs = append(errs, field.Invalid(ap.Child("metrics").Index(i).Child("perUnit", name), q, why))
				}
			}
		}
	}
	if poolKey.MatchString(a.SampleQuery) {
		errs = append(errs, field.Invalid(ap.Child("sampleQuery"), a.SampleQuery, why))
	}
	if as := ms.Spec.Autoscaling; as != nil {
		for i, m := range as.Metrics {
			if m.Prometheus != nil && poolKey.MatchString(m.Prometheus.Query) {
				errs = append(errs, field.Invalid(field.NewPath("spec", "autoscaling", "metrics").Index(i).Child("prometheus", "query"), m.Prometheus.Query, why))
			}
		}
	}
	return errs
}

// validateLearning checks capacity learning's ranges (a nil field takes its default).
func validateLearning(l *v1alpha1.CapacityLearning, p *field.Path) field.ErrorList {
	if l == nil {
		return nil
	}
	var errs field.ErrorList
	if t := l.TargetPercentOfCapacity; t != nil && (*t < 1 || *t > 100) {
		errs = append(errs, field.Invalid(p.Child("targetPercentOfCapacity"), *t, "must be from 1 to 100"))
	}
	if w := l.SaturatedAtRequestsWaiting; w != nil && (*w < 1 || *w > 1000) {
		errs = append(errs, field.Invalid(p.Child("saturatedAtRequestsWaiting"), *w, "must be from 1 to 1000"))
	}
	for _, d := range []struct {
		name string
		slo  *v1alpha1.Duration
	}{{"timeToFirstTokenP95", l.TimeToFirstTokenP95}, {"interTokenLatencyP95", l.InterTokenLatencyP95}} {
		if d.slo == nil {
			continue
		}
		errs = append(errs, positive(p.Child(d.name), *d.slo, false)...)
		if d.slo.Duration > maxLatencySLO {
			errs = append(errs, field.Invalid(p.Child(d.name), d.slo.String(), "must be at most 10m"))
		}
	}
	return errs
}

// maxLatencySLO bounds learnCapacity's latency SLOs.
const maxLatencySLO = 10 * time.Minute

// validateSaturation checks the thresholds' ranges and that each trigger is below its
// threshold (zero values are unset: the defaults apply).
func validateSaturation(m *v1alpha1.SaturationMetric, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	kv, queue := m.KVCacheThresholdPercent, m.QueueLengthThreshold
	if kv < 0 || kv > 100 {
		errs = append(errs, field.Invalid(p.Child("kvCacheThresholdPercent"), kv, "must be from 1 to 100"))
	}
	if queue < 0 || queue > 10000 {
		errs = append(errs, field.Invalid(p.Child("queueLengthThreshold"), queue, "must be from 1 to 10000"))
	}
	if kv == 0 {
		kv = autoscale.DefaultKVCacheThresholdPercent
	}
	if queue == 0 {
		queue = autoscale.DefaultQueueLengthThreshold
	}
	if t := m.KVSpareTriggerPercent; t != nil && (*t < 0 || *t >= kv) {
		errs = append(errs, field.Invalid(p.Child("kvSpareTriggerPercent"), *t, fmt.Sprintf("must be from 0 to below kvCacheThresholdPercent (%d)", kv)))
	}
	if t := m.QueueSpareTrigger; t != nil && (*t < 0 || *t >= queue) {
		errs = append(errs, field.Invalid(p.Child("queueSpareTrigger"), *t, fmt.Sprintf("must be from 0 to below queueLengthThreshold (%d)", queue)))
	}
	return errs
}

// positive reports a Duration that did not parse, or that is zero or negative. A zero left by
// an object written before defaulting (the field absent) is accepted when zeroIsUnset.
func positive(p *field.Path, d v1alpha1.Duration, zeroIsUnset bool) field.ErrorList {
	if err := d.Err(); err != nil {
		return field.ErrorList{field.Invalid(p, d.String(), err.Error())}
	}
	if d.Duration < 0 || (d.Duration == 0 && !zeroIsUnset) {
		return field.ErrorList{field.Invalid(p, d.String(), "must be a positive duration such as 2m or 90s")}
	}
	return nil
}

func positiveQuantity(p *field.Path, q resource.Quantity) field.ErrorList {
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(p, q.String(), "must be greater than 0")}
	}
	return nil
}

// podLabels are the labels modelship puts on the pods; a template must not set them.
var podLabels = []string{v1alpha1.LabelModelServer, v1alpha1.LabelColor, v1alpha1.LabelRevision}

// validateTemplate reports pod settings a Deployment refuses or a model server cannot run
// under, and GPU counts (extended resources) that cannot be scheduled.
func validateTemplate(t *corev1.PodTemplateSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	sp := p.Child("spec")
	if len(t.Spec.Containers) == 0 {
		errs = append(errs, field.Required(sp.Child("containers"), "must list at least one container (the model server)"))
	}
	if rp := t.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(sp.Child("restartPolicy"), rp, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(sp.Child("activeDeadlineSeconds"), "must be left out: a model server runs until it is replaced"))
	}
	for _, k := range podLabels {
		if _, ok := t.Labels[k]; ok {
			errs = append(errs, field.Forbidden(p.Child("metadata", "labels").Key(k), "is modelship's: it puts it on the pods to tell its ModelServers, colors and revisions apart"))
		}
	}
	for i := range t.Spec.InitContainers {
		errs = append(errs, validateExtendedResources(t.Spec.InitContainers[i].Resources, sp.Child("initContainers").Index(i).Child("resources"))...)
	}
	for i := range t.Spec.Containers {
		errs = append(errs, validateExtendedResources(t.Spec.Containers[i].Resources, sp.Child("containers").Index(i).Child("resources"))...)
	}
	return errs
}

// validateExtendedResources applies Kubernetes' rules for extended resources (nvidia.com/gpu and
// any other name with a domain outside kubernetes.io), which cannot be shared or overcommitted:
// whole non-negative numbers, and a request only with an equal limit.
func validateExtendedResources(r corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(r.Limits)) {
		q := r.Limits[name]
		if !extendedResource(name) {
			continue
		}
		if q.Sign() < 0 || q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(p.Child("limits").Key(string(name)), q.String(), "must be a whole number such as 1 or 8: a pod cannot have part of a GPU"))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		q := r.Requests[name]
		if !extendedResource(name) {
			continue
		}
		if l, ok := r.Limits[name]; !ok || l.Cmp(q) != 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), q.String(), "must equal the container's limit of "+string(name)+", which must be set: GPUs are neither shared nor overcommitted"))
		}
	}
	return errs
}

func extendedResource(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, "kubernetes.io/") && !strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix)
}
