package peers

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelship/modelship/test/framework/devenv"
)

// SmokeOptions shape FlaggerSmoke. Zero values take the defaults in brackets.
type SmokeOptions struct {
	// Namespace of the Deployment, MetricTemplate and Canary [flagger-smoke].
	Namespace string
	// Name of the Deployment and Canary [llm].
	Name string
	// Replicas of the Deployment [2].
	Replicas int32
	// Interval is the Canary's analysis interval [10s, Flagger's minimum].
	Interval time.Duration
	// Threshold is the failed checks that roll back [2].
	Threshold int
	// Outage, if positive, adds a fourth rollout (passing checks) during which Prometheus is
	// stopped for this long once the canary has traffic.
	Outage time.Duration
	// Log receives a line per observed change; nil discards them.
	Log io.Writer
}

// SmokeStep is one phase of the smoke test: how long it took from its trigger (creating the
// Canary, changing the image) to the phase it waited for, and every change seen on the way.
type SmokeStep struct {
	Name    string
	Reached string
	Took    time.Duration
	History []Observation
	// Note says what else happened (the outage's timing).
	Note string
	Err  error
}

// SmokeReport is what FlaggerSmoke saw.
type SmokeReport struct {
	Steps []SmokeStep
	// Route is the HTTPRoute Flagger wrote after initialization (name=weight per backend).
	Route *Route
	// Services are the Services Flagger created and their selectors (name: k=v,...).
	Services []string
}

// Passing and failing constant queries against a thresholdRange max of 10.
const (
	smokePassQuery = "vector(1)"
	smokeFailQuery = "vector(100)"
)

// FlaggerSmoke drives a real Flagger (already running against env, see StartFlagger) through a
// Canary's life on a model-server Deployment, with constant Prometheus queries standing in for
// real latency checks: initialization; a rollout whose check passes (promoted); a rollout whose
// check fails (rolled back); and, with Outage set, a rollout during which Prometheus stops. c
// must write to env's API server. It returns what it measured, with the error of the first step
// that did not end as expected.
func FlaggerSmoke(ctx context.Context, env *devenv.Env, c client.Client, o SmokeOptions) (*SmokeReport, error) {
	if o.Namespace == "" {
		o.Namespace = "flagger-smoke"
	}
	if o.Name == "" {
		o.Name = "llm"
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.Interval == 0 {
		o.Interval = 10 * time.Second
	}
	if o.Threshold == 0 {
		o.Threshold = 2
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	ns, name := o.Namespace, o.Name
	const template = "latency"
	gw := env.Options()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	for _, obj := range []client.Object{
		MetricTemplate(template, ns, env.PrometheusURL(), smokePassQuery),
		ModelServerDeployment(name, ns, "vllm/vllm-openai:good-0", o.Replicas),
	} {
		if err := c.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("create %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	canary := Canary{
		Name: name, Namespace: ns,
		GatewayName: gw.GatewayName, GatewayNamespace: gw.GatewayNamespace,
		Interval: o.Interval, Threshold: o.Threshold, StepWeights: []int{10, 25, 50},
		Metrics: []CanaryMetric{{Name: "e2e-latency", Template: template, Interval: "1m", Max: ptr.To(10.0)}},
	}
	report := &SmokeReport{}
	began := time.Now()
	if err := c.Create(ctx, canary.Object()); err != nil {
		return report, fmt.Errorf("create Canary: %w", err)
	}
	timeout := 20*o.Interval + time.Minute
	// run watches the Canary until it reaches want; with rollout, it first waits for
	// Progressing, as the phase a rollout starts from (Succeeded, Failed) may be the one wanted
	// or the one that fails.
	run := func(step string, began time.Time, rollout bool, want []string, fail ...string) error {
		w := &CanaryWatch{Client: c, Namespace: ns, Name: name, OnChange: func(ob Observation) {
			fmt.Fprintf(o.Log, "%s +%5.1fs %s\n", step, ob.At.Sub(began).Seconds(), ob)
		}}
		var last Observation
		var err error
		if rollout {
			last, err = w.Until(ctx, timeout, []string{PhaseProgressing})
		}
		if err == nil {
			last, err = w.Until(ctx, timeout, want, fail...)
		}
		report.Steps = append(report.Steps, SmokeStep{Name: step, Reached: last.State.Phase, Took: last.At.Sub(began), History: w.History(), Err: err})
		return err
	}

	if err := run("initialize", began, false, []string{PhaseInitialized}, PhaseFailed); err != nil {
		return report, err
	}
	route, err := GetRoute(ctx, c, ns, name)
	if err != nil {
		return report, err
	}
	report.Route = route
	report.Services, err = serviceSelectors(ctx, c, ns, name, name+"-primary", name+"-canary")
	if err != nil {
		return report, err
	}

	rollout := func(step, image, query string, want []string, fail ...string) error {
		if err := SetQuery(ctx, c, ns, template, query); err != nil {
			return err
		}
		began := time.Now()
		if err := SetImage(ctx, c, ns, name, image); err != nil {
			return err
		}
		return run(step, began, true, want, fail...)
	}
	if err := rollout("promote", "vllm/vllm-openai:good-1", smokePassQuery, []string{PhaseSucceeded}, PhaseFailed); err != nil {
		return report, err
	}
	if err := rollout("rollback", "vllm/vllm-openai:slow-2", smokeFailQuery, []string{PhaseFailed}, PhaseSucceeded); err != nil {
		return report, err
	}
	if o.Outage <= 0 {
		return report, nil
	}
	return report, flaggerOutage(ctx, env, c, o, template, report)
}

// flaggerOutage starts a rollout whose check passes, stops Prometheus for o.Outage once the
// canary has traffic, starts it again and waits for the Canary to settle.
func flaggerOutage(ctx context.Context, env *devenv.Env, c client.Client, o SmokeOptions, template string, report *SmokeReport) error {
	ns, name := o.Namespace, o.Name
	if err := SetQuery(ctx, c, ns, template, smokePassQuery); err != nil {
		return err
	}
	began := time.Now()
	if err := SetImage(ctx, c, ns, name, "vllm/vllm-openai:good-3"); err != nil {
		return err
	}
	w := &CanaryWatch{Client: c, Namespace: ns, Name: name, OnChange: func(ob Observation) {
		fmt.Fprintf(o.Log, "outage +%5.1fs %s\n", ob.At.Sub(began).Seconds(), ob)
	}}
	step := SmokeStep{Name: "outage"}
	defer func() {
		step.History = w.History()
		report.Steps = append(report.Steps, step)
	}()
	// Wait for the first weight (Progressing, weight > 0).
	deadline := time.Now().Add(20*o.Interval + time.Minute)
	for {
		last, err := w.Until(ctx, o.Interval, []string{PhaseProgressing})
		if err == nil && last.State.CanaryWeight > 0 {
			break
		}
		if time.Now().After(deadline) {
			step.Err = fmt.Errorf("no canary weight within %s: %s", 20*o.Interval+time.Minute, last)
			return step.Err
		}
		time.Sleep(250 * time.Millisecond)
	}
	prom := env.Process(devenv.PartPrometheus)
	if prom == nil {
		step.Err = fmt.Errorf("no Prometheus process in the environment")
		return step.Err
	}
	stoppedAt := time.Now()
	fmt.Fprintf(o.Log, "outage +%5.1fs Prometheus stopped for %s\n", stoppedAt.Sub(began).Seconds(), o.Outage)
	if err := prom.Stop(); err != nil {
		step.Err = err
		return err
	}
	// Watch through the outage; the Canary may roll back meanwhile.
	_, _ = w.Until(ctx, o.Outage, []string{"(outage over)"})
	if err := prom.Restart(); err != nil {
		step.Err = err
		return err
	}
	fmt.Fprintf(o.Log, "outage +%5.1fs Prometheus started again\n", time.Since(began).Seconds())
	last, err := w.Until(ctx, 20*o.Interval+time.Minute, []string{PhaseSucceeded, PhaseFailed})
	step.Reached, step.Took, step.Err = last.State.Phase, last.At.Sub(began), err
	// The end phase may have come during the outage: time it from its first sighting.
	for _, ob := range w.History() {
		if ob.State.Phase == last.State.Phase && ob.At.After(stoppedAt) {
			step.Took = ob.At.Sub(began)
			break
		}
	}
	step.Note = fmt.Sprintf("Prometheus stopped at +%.1fs for %s", stoppedAt.Sub(began).Seconds(), o.Outage)
	return err
}

// serviceSelectors describes Services as "name: k=v,..." (missing ones as "name: absent").
func serviceSelectors(ctx context.Context, c client.Reader, ns string, names ...string) ([]string, error) {
	var out []string
	for _, n := range names {
		svc := &corev1.Service{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, svc); err != nil {
			if apierrors.IsNotFound(err) {
				out = append(out, n+": absent")
				continue
			}
			return nil, err
		}
		var sel []string
		for k, v := range svc.Spec.Selector {
			sel = append(sel, k+"="+v)
		}
		sort.Strings(sel)
		out = append(out, n+": "+strings.Join(sel, ","))
	}
	return out, nil
}
