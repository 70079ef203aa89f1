package peers

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func testArgoCanary() ArgoCanary {
	return ArgoCanary{
		Name: "llm", Namespace: "ns", Replicas: 6,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{AppLabel: "llm", ServerLabel: "llm"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "vllm/vllm-openai:v0.10.0"}}},
		},
		GatewayName: "gw", GatewayNamespace: "default", Hostname: "llm.local",
		StepWeights: []int{10, 25, 50}, StepPause: 20 * time.Second,
		PrometheusURL: "http://127.0.0.1:9090",
		Metrics:       []ArgoMetric{{Name: "ttft", Query: "vector(1)", SuccessCondition: "result[0] <= 1.2"}},
		Interval:      10 * time.Second, InitialDelay: 10 * time.Second, FailureLimit: 4, StartingStep: 1,
	}
}

func field(t *testing.T, obj map[string]any, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(obj, path...)
	if err != nil || !ok {
		t.Fatalf("%s: missing (%v)", strings.Join(path, "."), err)
	}
	return v
}

// The Rollout: a canary on the two Services routed by the TraefikService, a weight and a
// pause per step, a background analysis from step 1 whose hash arguments come from the
// ReplicaSets, and the pod template as given.
func TestArgoRollout(t *testing.T) {
	a := testArgoCanary()
	u, err := a.Rollout()
	if err != nil {
		t.Fatal(err)
	}
	if u.GroupVersionKind() != RolloutGVK || u.GetName() != "llm" || u.GetNamespace() != "ns" {
		t.Errorf("rollout is %s %s/%s", u.GroupVersionKind(), u.GetNamespace(), u.GetName())
	}
	o := u.Object
	if got := field(t, o, "spec", "replicas"); got != int64(6) {
		t.Errorf("replicas = %v", got)
	}
	if got := field(t, o, "spec", "selector", "matchLabels"); !reflect.DeepEqual(got, map[string]any{"app": "llm"}) {
		t.Errorf("selector = %v", got)
	}
	if got := field(t, o, "spec", "template", "metadata", "labels"); !reflect.DeepEqual(got, map[string]any{"app": "llm", ServerLabel: "llm"}) {
		t.Errorf("template labels = %v", got)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(o, "spec", "template", "metadata", "creationTimestamp"); ok {
		t.Error("the template carries a creationTimestamp (null), which the CRD's schema does not allow")
	}
	c := field(t, o, "spec", "strategy", "canary").(map[string]any)
	if c["canaryService"] != "llm-canary" || c["stableService"] != "llm-stable" {
		t.Errorf("services = %v / %v", c["canaryService"], c["stableService"])
	}
	if got := field(t, c, "trafficRouting", "traefik", "weightedTraefikServiceName"); got != "llm" {
		t.Errorf("traefik service = %v", got)
	}
	wantSteps := []any{
		map[string]any{"setWeight": int64(10)}, map[string]any{"pause": map[string]any{"duration": "20s"}},
		map[string]any{"setWeight": int64(25)}, map[string]any{"pause": map[string]any{"duration": "20s"}},
		map[string]any{"setWeight": int64(50)}, map[string]any{"pause": map[string]any{"duration": "20s"}},
	}
	if got := c["steps"]; !reflect.DeepEqual(got, wantSteps) {
		t.Errorf("steps = %v\nwant %v", got, wantSteps)
	}
	if got := field(t, c, "analysis", "startingStep"); got != int64(1) {
		t.Errorf("startingStep = %v", got)
	}
	if got := field(t, c, "analysis", "templates"); !reflect.DeepEqual(got, []any{map[string]any{"templateName": "llm-analysis"}}) {
		t.Errorf("templates = %v", got)
	}
	wantArgs := []any{
		map[string]any{"name": "canary-hash", "valueFrom": map[string]any{"podTemplateHashValue": "Latest"}},
		map[string]any{"name": "stable-hash", "valueFrom": map[string]any{"podTemplateHashValue": "Stable"}},
		map[string]any{"name": "namespace", "value": "ns"},
	}
	if got := field(t, c, "analysis", "args"); !reflect.DeepEqual(got, wantArgs) {
		t.Errorf("analysis args = %v\nwant %v", got, wantArgs)
	}

	// Without metrics there is no analysis.
	a.Metrics = nil
	u, err = a.Rollout()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "strategy", "canary", "analysis"); ok {
		t.Error("a Rollout without metrics has an analysis")
	}
}

// The AnalysisTemplate: the three arguments, and each metric on the Prometheus provider with
// the interval, initial delay, failure limit and condition given, nothing else set.
func TestArgoAnalysisTemplate(t *testing.T) {
	u := testArgoCanary().AnalysisTemplate()
	if u.GroupVersionKind() != AnalysisTemplateGVK || u.GetName() != "llm-analysis" {
		t.Errorf("template is %s %s", u.GroupVersionKind(), u.GetName())
	}
	if got := field(t, u.Object, "spec", "args"); !reflect.DeepEqual(got, []any{
		map[string]any{"name": "canary-hash"}, map[string]any{"name": "stable-hash"}, map[string]any{"name": "namespace"},
	}) {
		t.Errorf("args = %v", got)
	}
	want := []any{map[string]any{
		"name": "ttft", "interval": "10s", "initialDelay": "10s", "failureLimit": int64(4),
		"successCondition": "result[0] <= 1.2",
		"provider":         map[string]any{"prometheus": map[string]any{"address": "http://127.0.0.1:9090", "query": "vector(1)"}},
	}}
	if got := field(t, u.Object, "spec", "metrics"); !reflect.DeepEqual(got, want) {
		t.Errorf("metrics = %v\nwant %v", got, want)
	}
	a := testArgoCanary()
	a.InitialDelay = 0
	m := field(t, a.AnalysisTemplate().Object, "spec", "metrics").([]any)[0].(map[string]any)
	if _, ok := m["initialDelay"]; ok {
		t.Errorf("initialDelay set without InitialDelay: %v", m)
	}
}

// The data path: the HTTPRoute's one backendRef is the TraefikService, whose weighted services
// are the stable Service at 100 and the canary at 0, each selecting the Rollout's pods.
func TestArgoRouting(t *testing.T) {
	a := testArgoCanary()
	r := a.HTTPRoute()
	if len(r.Spec.Rules) != 1 || len(r.Spec.Rules[0].BackendRefs) != 1 {
		t.Fatalf("route rules = %+v", r.Spec.Rules)
	}
	ref := r.Spec.Rules[0].BackendRefs[0]
	if ref.Group == nil || *ref.Group != "traefik.io" || ref.Kind == nil || *ref.Kind != "TraefikService" || ref.Name != "llm" || ref.Weight != nil || ref.Port != nil {
		t.Errorf("backendRef = %+v", ref.BackendObjectReference)
	}
	if p := r.Spec.ParentRefs[0]; p.Name != "gw" || p.Namespace == nil || *p.Namespace != "default" {
		t.Errorf("parentRef = %+v", p)
	}
	if len(r.Spec.Hostnames) != 1 || r.Spec.Hostnames[0] != "llm.local" {
		t.Errorf("hostnames = %v", r.Spec.Hostnames)
	}
	if m := r.Spec.Rules[0].Matches[0].Path; m == nil || *m.Value != "/" {
		t.Errorf("path = %+v", m)
	}
	ts := a.TraefikService()
	if ts.GroupVersionKind() != TraefikServiceGVK || ts.GetName() != "llm" {
		t.Errorf("traefik service is %s %s", ts.GroupVersionKind(), ts.GetName())
	}
	if got := traefikWeights(ts); !reflect.DeepEqual(got, map[string]int{"llm-stable": 100, "llm-canary": 0}) {
		t.Errorf("weights = %v", got)
	}
	for _, s := range field(t, ts.Object, "spec", "weighted", "services").([]any) {
		if s.(map[string]any)["port"] != int64(ModelServerPort) {
			t.Errorf("weighted service without the model server's port: %v", s)
		}
	}
	svcs := a.Services()
	if len(svcs) != 2 || svcs[0].Name != "llm-stable" || svcs[1].Name != "llm-canary" {
		t.Fatalf("services = %v", svcs)
	}
	for _, s := range svcs {
		if !reflect.DeepEqual(s.Spec.Selector, map[string]string{"app": "llm"}) || s.Spec.Ports[0].Name != "http" || s.Spec.Ports[0].Port != ModelServerPort {
			t.Errorf("service %s: selector %v ports %+v", s.Name, s.Spec.Selector, s.Spec.Ports)
		}
	}
	objs, err := a.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
	}
	if got := strings.Join(kinds, ","); got != "Service,Service,TraefikService,HTTPRoute,AnalysisTemplate,Rollout" {
		t.Errorf("objects in order = %s", got)
	}
}

// A weighted service without a weight weighs 1, as in Traefik.
func TestTraefikWeightsDefault(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"weighted": map[string]any{"services": []any{
		map[string]any{"name": "a"}, map[string]any{"name": "b", "weight": float64(3)},
	}}}}}
	if got := traefikWeights(u); !reflect.DeepEqual(got, map[string]int{"a": 1, "b": 3}) {
		t.Errorf("weights = %v", got)
	}
}

// The ratio query tells the canary's pods from the stable's by their pod template hash.
func TestArgoQuantileRatioQuery(t *testing.T) {
	got := ArgoQuantileRatioQuery("llm", "vllm:e2e_request_latency_seconds", 0.95)
	want := `histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{namespace="{{args.namespace}}",pod=~"llm-{{args.canary-hash}}-[0-9a-zA-Z]+"}[1m])))` +
		` / histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{namespace="{{args.namespace}}",pod=~"llm-{{args.stable-hash}}-[0-9a-zA-Z]+"}[1m])))`
	if got != want {
		t.Errorf("query = %s\nwant %s", got, want)
	}
	re := regexp.MustCompile("^(?:" + ArgoPodRegex("llm", "6d4f8b9c7") + ")$")
	for pod, match := range map[string]bool{
		"llm-6d4f8b9c7-x2k4q": true, "llm-5c9d7f8b6-x2k4q": false, "llm2-6d4f8b9c7-x2k4q": false, "llm-6d4f8b9c7": false,
	} {
		if re.MatchString(pod) != match {
			t.Errorf("%s: match %v, want %v", pod, !match, match)
		}
	}
}

// The state read from a Rollout: the observed generation is a string in Argo's status.
func TestRolloutState(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"generation": int64(3)},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "server", "image": "img:2"},
		}}}},
		"status": map[string]any{
			"phase": "Healthy", "observedGeneration": "3", "currentPodHash": "abc", "stableRS": "abc",
			"currentStepIndex": int64(6), "canary": map[string]any{"weights": map[string]any{"canary": map[string]any{"weight": int64(0)}}},
		},
	}}
	s := rolloutState(u)
	if !s.Observed || !s.Promoted() || s.Image != "img:2" || s.CurrentStepIndex != 6 {
		t.Errorf("state = %+v, promoted %v", s, s.Promoted())
	}
	_ = unstructured.SetNestedField(u.Object, "2", "status", "observedGeneration")
	if s := rolloutState(u); s.Observed || s.Promoted() {
		t.Errorf("a status of generation 2 counts for generation 3: %+v", s)
	}
	_ = unstructured.SetNestedField(u.Object, "3", "status", "observedGeneration")
	_ = unstructured.SetNestedField(u.Object, "Degraded", "status", "phase")
	_ = unstructured.SetNestedField(u.Object, true, "status", "abort")
	_ = unstructured.SetNestedField(u.Object, "2026-12-05T01:00:00Z", "status", "abortedAt")
	_ = unstructured.SetNestedField(u.Object, "old", "status", "stableRS")
	_ = unstructured.SetNestedField(u.Object, int64(25), "status", "canary", "weights", "canary", "weight")
	s = rolloutState(u)
	if s.Promoted() || !s.Abort || s.AbortedAt.IsZero() || s.Weight != 25 {
		t.Errorf("aborted state = %+v", s)
	}
	if s := rolloutState(&unstructured.Unstructured{Object: map[string]any{}}); s.CurrentStepIndex != -1 {
		t.Errorf("step index without status = %d, want -1", s.CurrentStepIndex)
	}
}
