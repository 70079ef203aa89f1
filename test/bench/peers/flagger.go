package peers

// Flagger's objects for a model-server canary (Gateway API provider), and how to read what
// Flagger does with them.
//
// What Flagger v1.36.1 does with a Canary whose targetRef is Deployment <name> (read from its
// source, module github.com/fluxcd/flagger@v1.36.1):
//
//   - It creates Deployment <name>-primary, a copy of <name> whose pod labels are those of <name>
//     with the selector label (the first of app, name, app.kubernetes.io/name found in
//     <name>'s spec.selector.matchLabels) set to <name>-primary; other pod labels, such as
//     bench.modelship.dev/server, are copied as they are (pkg/canary/util.go makePrimaryLabels).
//     Then it scales <name> to 0: between rollouts only the primary runs.
//   - It creates three ClusterIP Services on spec.service.port: <name> and <name>-primary
//     selecting app=<name>-primary, and <name>-canary selecting app=<name>
//     (pkg/router/kubernetes_default.go).
//   - With -mesh-provider gatewayapi:v1 it creates HTTPRoute <name> (in the Canary's namespace)
//     whose parentRefs are spec.service.gatewayRefs, with one rule matching PathPrefix / and two
//     Service backendRefs: <name>-primary (weight 100) and <name>-canary (weight 0)
//     (pkg/router/gateway_api.go Reconcile). It then moves the weights; it never reads the
//     route's status, so no Gateway controller is needed for the rollout itself.
//   - Every analysis interval (at least 10 s, pkg/apis/flagger/v1beta1/canary.go
//     GetAnalysisInterval) it advances the Canary once (pkg/controller/scheduler.go
//     advanceCanary): a new pod template hash moves Initialized/Succeeded/Failed to Progressing
//     and scales <name> up; the next tick sets the first step weight without running the
//     metrics; each later tick runs the metrics and, if they pass, moves to the next step;
//     at the last step it copies <name>'s template to <name>-primary (Promoting), then routes
//     100 % to the primary (Finalising), then scales <name> to 0 (Succeeded). A failed tick
//     increments status.failedChecks, which is not reset until the next rollout; when
//     failedChecks reaches analysis.threshold the next tick routes 100 % back to the primary,
//     scales <name> to 0 and sets Failed.
//   - A metric whose query errs (Prometheus down, a bad query) or returns no sample (or NaN)
//     fails the tick like a metric out of range (pkg/controller/scheduler_metrics.go
//     runMetricChecks): a Prometheus outage longer than threshold intervals rolls back.

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelship/modelship/test/framework/fleetsim"
)

// Flagger's API and the Gateway API objects it writes.
var (
	CanaryGVK         = schema.GroupVersionKind{Group: "flagger.app", Version: "v1beta1", Kind: "Canary"}
	MetricTemplateGVK = schema.GroupVersionKind{Group: "flagger.app", Version: "v1beta1", Kind: "MetricTemplate"}
	HTTPRouteGVK      = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}
)

// Canary phases (status.phase) Flagger sets.
const (
	PhaseInitializing     = "Initializing"
	PhaseInitialized      = "Initialized"
	PhaseWaiting          = "Waiting"
	PhaseProgressing      = "Progressing"
	PhaseWaitingPromotion = "WaitingPromotion"
	PhasePromoting        = "Promoting"
	PhaseFinalising       = "Finalising"
	PhaseSucceeded        = "Succeeded"
	PhaseFailed           = "Failed"
)

// Labels of a benchmark model-server pod.
const (
	// AppLabel is the pod label Flagger selects on (one of its -selector-labels): <name> on the
	// canary's pods, <name>-primary on the primary's.
	AppLabel = fleetsim.LabelPeerGroup
	// ServerLabel names the model server a pod serves, on primary and canary pods alike.
	ServerLabel = fleetsim.LabelPeerServer
)

// ModelServerPort is the port vLLM serves on, the containerPort and the Canary's service port.
const ModelServerPort = 8000

// ModelServerDeployment is a vLLM-like model-server Deployment for Flagger to roll out: name
// and namespace, image (the version; changing it starts a rollout) and replicas, each pod
// asking for one nvidia.com/gpu and labelled app=<name> and bench.modelship.dev/server=<name>.
// No readiness probe: kwok marks the pods Ready.
func ModelServerDeployment(name, namespace, image string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{AppLabel: name, ServerLabel: name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{AppLabel: name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "server",
					Image: image,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: ModelServerPort, Protocol: corev1.ProtocolTCP}},
					Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
					},
				}}},
			},
		},
	}
}

// MetricTemplate is a Flagger MetricTemplate reading query from the Prometheus at
// prometheusURL. The query is a Go template rendered by Flagger with {{ namespace }},
// {{ name }} (the Canary), {{ target }} (the Deployment), {{ service }}, {{ interval }} (the
// metric's interval, e.g. 1m), {{ variables.<key> }} (the metric's templateVariables); it must
// return one sample (Flagger takes the last sample's value; none or NaN fails the check).
func MetricTemplate(name, namespace, prometheusURL, query string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"provider": map[string]any{"type": "prometheus", "address": prometheusURL},
			"query":    query,
		},
	}}
	u.SetGroupVersionKind(MetricTemplateGVK)
	return u
}

// CanaryMetric is one check of a Canary's analysis: the MetricTemplate it renders, over which
// interval, and the range its value must stay in (nil bounds are open).
type CanaryMetric struct {
	// Name names the check in Flagger's events and metrics.
	Name string
	// Template is the MetricTemplate's name, in the Canary's namespace.
	Template string
	// Interval is the template's {{ interval }} (a Prometheus duration); "" means 1m.
	Interval string
	// Min and Max bound the value.
	Min, Max *float64
	// Variables are the template's {{ variables.<key> }}.
	Variables map[string]string
}

// Canary describes a Flagger Canary of a ModelServerDeployment, routed by the Gateway API.
type Canary struct {
	// Name and Namespace of the Canary; the Deployment it rolls out has the same name.
	Name, Namespace string
	// GatewayName and GatewayNamespace are the Gateway the HTTPRoute attaches to.
	GatewayName, GatewayNamespace string
	// Hosts are the HTTPRoute's hostnames (spec.service.hosts); none matches every host.
	Hosts []string
	// Interval is the analysis interval; Flagger raises anything under 10 s to 10 s.
	Interval time.Duration
	// Threshold is how many failed checks roll back (analysis.threshold; 0 means 1).
	Threshold int
	// StepWeights are the canary's traffic steps, in percent; the last is where it is promoted.
	StepWeights []int
	// Metrics are the checks run at every step after the first.
	Metrics []CanaryMetric
	// ProgressDeadline is how long a Deployment may take to be ready before a rollback; 0 means
	// Flagger's 600 s.
	ProgressDeadline time.Duration
}

// Object is the Canary as Flagger reads it: targetRef the Deployment, service port 8000 with
// gatewayRefs to the Gateway, and an analysis with no webhooks (no load tester, no manual
// gates).
func (c Canary) Object() *unstructured.Unstructured {
	metrics := make([]any, 0, len(c.Metrics))
	for _, m := range c.Metrics {
		mm := map[string]any{
			"name":        m.Name,
			"templateRef": map[string]any{"name": m.Template, "namespace": c.Namespace},
		}
		// Flagger renders {{ interval }} from this field as it is: left empty, a query using it
		// would not parse.
		mm["interval"] = m.Interval
		if m.Interval == "" {
			mm["interval"] = "1m"
		}
		tr := map[string]any{}
		if m.Min != nil {
			tr["min"] = *m.Min
		}
		if m.Max != nil {
			tr["max"] = *m.Max
		}
		if len(tr) > 0 {
			mm["thresholdRange"] = tr
		}
		if len(m.Variables) > 0 {
			vars := map[string]any{}
			for k, v := range m.Variables {
				vars[k] = v
			}
			mm["templateVariables"] = vars
		}
		metrics = append(metrics, mm)
	}
	steps := make([]any, 0, len(c.StepWeights))
	for _, w := range c.StepWeights {
		steps = append(steps, int64(w))
	}
	analysis := map[string]any{
		"interval":    c.Interval.String(),
		"threshold":   int64(max(c.Threshold, 1)),
		"stepWeights": steps,
		"metrics":     metrics,
	}
	spec := map[string]any{
		"targetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": c.Name},
		"service": map[string]any{
			"port":       int64(ModelServerPort),
			"targetPort": int64(ModelServerPort),
			"gatewayRefs": []any{map[string]any{
				"name": c.GatewayName, "namespace": c.GatewayNamespace,
			}},
		},
		"analysis": analysis,
	}
	if len(c.Hosts) > 0 {
		hosts := make([]any, 0, len(c.Hosts))
		for _, h := range c.Hosts {
			hosts = append(hosts, h)
		}
		spec["service"].(map[string]any)["hosts"] = hosts
	}
	if c.ProgressDeadline > 0 {
		spec["progressDeadlineSeconds"] = int64(c.ProgressDeadline / time.Second)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": c.Name, "namespace": c.Namespace},
		"spec":     spec,
	}}
	u.SetGroupVersionKind(CanaryGVK)
	return u
}

// PodRegex is a PromQL regex on the pod label matching the pods of Deployment target's
// canary (primary false: <target>-<hash>-<suffix>) or of its primary (<target>-primary-...).
// The canary's pattern is the one Flagger's built-in checks use; it does not match the primary's
// pods because "primary" is followed by two more dashes.
func PodRegex(target string, primary bool) string {
	if primary {
		return target + `-primary-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)`
	}
	return target + `-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)`
}

// CanaryState is what Flagger reports about a Canary.
type CanaryState struct {
	Phase              string
	CanaryWeight       int
	FailedChecks       int
	Iterations         int
	LastTransitionTime time.Time
}

// Route is the weighted rule of the HTTPRoute Flagger writes: its backends' weights by Service.
type Route struct {
	// Primary and Canary are the weights of <name>-primary and <name>-canary.
	Primary, Canary int
	// Backends are the rule's backendRefs in order, as name=weight.
	Backends []string
}

// Observation is a Canary's state and its route's weights at one moment. Route is nil until
// Flagger creates the HTTPRoute.
type Observation struct {
	At     time.Time
	State  CanaryState
	Route  *Route
	errMsg string
}

// String is a compact line: phase, weights, failed checks.
func (o Observation) String() string {
	s := fmt.Sprintf("%s weight=%d failed=%d", o.State.Phase, o.State.CanaryWeight, o.State.FailedChecks)
	if o.Route != nil {
		s += fmt.Sprintf(" route=%d/%d", o.Route.Primary, o.Route.Canary)
	}
	return s
}

// same reports whether two observations differ only by time.
func (o Observation) same(p Observation) bool {
	if o.State.Phase != p.State.Phase || o.State.CanaryWeight != p.State.CanaryWeight ||
		o.State.FailedChecks != p.State.FailedChecks || o.State.Iterations != p.State.Iterations ||
		(o.Route == nil) != (p.Route == nil) {
		return false
	}
	return o.Route == nil || (o.Route.Primary == p.Route.Primary && o.Route.Canary == p.Route.Canary)
}

// GetCanaryState reads a Canary's status.
func GetCanaryState(ctx context.Context, c client.Reader, namespace, name string) (CanaryState, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(CanaryGVK)
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, u); err != nil {
		return CanaryState{}, err
	}
	var s CanaryState
	s.Phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	s.CanaryWeight = nestedInt(u.Object, "status", "canaryWeight")
	s.FailedChecks = nestedInt(u.Object, "status", "failedChecks")
	s.Iterations = nestedInt(u.Object, "status", "iterations")
	if t, _, _ := unstructured.NestedString(u.Object, "status", "lastTransitionTime"); t != "" {
		s.LastTransitionTime, _ = time.Parse(time.RFC3339, t)
	}
	return s, nil
}

// GetRoute reads the weights of HTTPRoute name (Flagger names it after the Canary's service,
// by default the Deployment), from its rule with two backends.
func GetRoute(ctx context.Context, c client.Reader, namespace, name string) (*Route, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(HTTPRouteGVK)
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, u); err != nil {
		return nil, err
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	r := &Route{}
	for _, rule := range rules {
		rm, _ := rule.(map[string]any)
		refs, _, _ := unstructured.NestedSlice(rm, "backendRefs")
		if len(refs) != 2 {
			continue
		}
		for _, ref := range refs {
			m, _ := ref.(map[string]any)
			svc, _, _ := unstructured.NestedString(m, "name")
			w := nestedInt(m, "weight")
			r.Backends = append(r.Backends, fmt.Sprintf("%s=%d", svc, w))
			switch svc {
			case name + "-primary":
				r.Primary = w
			case name + "-canary":
				r.Canary = w
			}
		}
	}
	return r, nil
}

// nestedInt reads an integer field that JSON decoding may have made int64 or float64.
func nestedInt(obj map[string]any, fields ...string) int {
	v, ok, _ := unstructured.NestedFieldNoCopy(obj, fields...)
	if !ok {
		return 0
	}
	switch n := v.(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	case int:
		return n
	}
	return 0
}

// Observe reads Canary name's state and its HTTPRoute's weights (the route may not exist yet).
func Observe(ctx context.Context, c client.Reader, namespace, name string) (Observation, error) {
	s, err := GetCanaryState(ctx, c, namespace, name)
	if err != nil {
		return Observation{}, err
	}
	o := Observation{At: time.Now(), State: s}
	if r, err := GetRoute(ctx, c, namespace, name); err == nil {
		o.Route = r
	} else if client.IgnoreNotFound(err) != nil {
		return Observation{}, err
	}
	return o, nil
}

// CanaryWatch polls a Canary and keeps every change of its phase, weight, failed checks and
// route weights.
type CanaryWatch struct {
	Client          client.Reader
	Namespace, Name string
	// Every is the polling period; 0 means 250 ms.
	Every time.Duration
	// OnChange, if set, is called with each new observation.
	OnChange func(Observation)

	history []Observation
}

// History is every distinct observation so far, oldest first.
func (w *CanaryWatch) History() []Observation { return append([]Observation(nil), w.history...) }

// Until polls until the phase is one of phases (with the route present), or until timeout, and
// returns the last observation. It fails early on a phase in fail (e.g. Failed while waiting for
// Succeeded).
func (w *CanaryWatch) Until(ctx context.Context, timeout time.Duration, phases []string, fail ...string) (Observation, error) {
	every := w.Every
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	var last Observation
	for {
		o, err := Observe(ctx, w.Client, w.Namespace, w.Name)
		if err != nil {
			o = Observation{At: time.Now(), errMsg: err.Error()}
		} else {
			if len(w.history) == 0 || !o.same(w.history[len(w.history)-1]) {
				w.history = append(w.history, o)
				if w.OnChange != nil {
					w.OnChange(o)
				}
			}
			last = o
			for _, p := range phases {
				if o.State.Phase == p && o.Route != nil {
					return o, nil
				}
			}
			for _, p := range fail {
				if o.State.Phase == p {
					return o, fmt.Errorf("canary %s/%s reached %s while waiting for %s", w.Namespace, w.Name, p, strings.Join(phases, " or "))
				}
			}
		}
		if time.Now().After(deadline) {
			msg := last.String()
			if o.errMsg != "" {
				msg += " (last read: " + o.errMsg + ")"
			}
			return last, fmt.Errorf("canary %s/%s not %s within %s: %s", w.Namespace, w.Name, strings.Join(phases, " or "), timeout, msg)
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(every):
		}
	}
}

// SetImage changes the image of a ModelServerDeployment's container, which starts a rollout.
func SetImage(ctx context.Context, c client.Client, namespace, name, image string) error {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, d); err != nil {
		return err
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Template.Spec.Containers[0].Image = image
	return c.Patch(ctx, d, patch)
}

// SetQuery changes a MetricTemplate's query; Flagger uses it from the next check on.
func SetQuery(ctx context.Context, c client.Client, namespace, name, query string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(MetricTemplateGVK)
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, u); err != nil {
		return err
	}
	patch := client.MergeFrom(u.DeepCopy())
	if err := unstructured.SetNestedField(u.Object, query, "spec", "query"); err != nil {
		return err
	}
	return c.Patch(ctx, u, patch)
}

// QuantileQuery is a MetricTemplate query for the q-quantile of a vLLM histogram (its name
// without _bucket, e.g. vllm:e2e_request_latency_seconds) over the Canary's namespace and the
// pods of its canary (or primary), rated over the metric's {{ interval }}. The model-server
// series carry namespace and pod labels; Flagger renders {{ namespace }}, {{ target }} and
// {{ interval }}. A window with no request gives NaN, which Flagger counts as a failed check.
func QuantileQuery(histogram string, q float64, primary bool) string {
	return fmt.Sprintf(`histogram_quantile(%g, sum by (le) (rate(%s_bucket{namespace="{{ namespace }}",pod=~"%s"}[{{ interval }}])))`,
		q, histogram, PodRegex("{{ target }}", primary))
}

// QuantileRatioQuery is the canary's q-quantile of histogram over the primary's: with a
// thresholdRange max of, say, 1.2 it fails a canary more than 20 % slower than the primary
// under the same traffic mix, whatever the absolute latency.
func QuantileRatioQuery(histogram string, q float64) string {
	return QuantileQuery(histogram, q, false) + " / " + QuantileQuery(histogram, q, true)
}
