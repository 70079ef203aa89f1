//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/revision"
	"github.com/modelship/modelship/test/framework/stack"
)

// pollInterval is how often the stories read the cluster.
const pollInterval = 500 * time.Millisecond

// Story lines.

func given(t *testing.T, format string, args ...any) { t.Helper(); t.Logf("GIVEN "+format, args...) }
func when(t *testing.T, format string, args ...any)  { t.Helper(); t.Logf("WHEN  "+format, args...) }
func then(t *testing.T, format string, args ...any)  { t.Helper(); t.Logf("THEN  "+format, args...) }
func and(t *testing.T, format string, args ...any)   { t.Helper(); t.Logf("AND   "+format, args...) }

// figure reports a number of the story, for the summary of the run.
func figure(t *testing.T, name, format string, args ...any) {
	t.Helper()
	t.Logf("FIGURE: %s: %s", name, fmt.Sprintf(format, args...))
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// ModelServers.

// msOption changes the stack's demo ModelServer for a story.
type msOption func(*v1alpha1.ModelServer)

// fixedReplicas turns autoscaling off: n replicas, whatever the load.
func fixedReplicas(n int32) msOption {
	return func(ms *v1alpha1.ModelServer) {
		ms.Spec.Autoscaling = nil
		ms.Spec.Replicas = ptr.To(n)
	}
}

// steps sets the rollout's steps and their duration.
func steps(d time.Duration, weights ...int32) msOption {
	return func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Steps = weights
		ms.Spec.Rollout.StepDuration = v1alpha1.Duration{Duration: d}
	}
}

// newModelServer is stack.ModelServer (vLLM on one H100, steps 10/25/50/100 of 20s judged every
// 5s on the vLLM preset with the API's default of at least 20 samples, autoscaled 2..12), with
// the hostname <name>.<namespace>.local, changed by opts.
func newModelServer(ns, name, image string, opts ...msOption) *v1alpha1.ModelServer {
	ms := stack.ModelServer(ns, name, image)
	// A hostname of its own: routes of the same hostname and path on one Gateway conflict (the
	// oldest wins), and Traefik would send one story's requests to another's pods.
	ms.Spec.Gateway.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(name + "." + ns + ".local")}
	for _, o := range opts {
		o(ms)
	}
	return ms
}

// describe says what a ModelServer is, for the GIVEN line.
func describe(ms *v1alpha1.ModelServer) string {
	r := ms.Spec.Rollout
	s := fmt.Sprintf("ModelServer %s/%s serving %s, rolled out over steps %v of %s judged every %s",
		ms.Namespace, ms.Name, ms.Spec.Template.Spec.Containers[0].Image, r.Steps, r.StepDuration.Duration, r.Analysis.Interval.Duration)
	if a := ms.Spec.Autoscaling; a != nil {
		return s + fmt.Sprintf(", autoscaled %d..%d", a.Min(), a.MaxReplicas)
	}
	return s + fmt.Sprintf(", %d replicas", *ms.Spec.Replicas)
}

// namespace creates a namespace for a story; it is deleted when the story passes (kept with its
// objects for a look when it fails).
func namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := st.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = st.Client.Delete(context.Background(), ns)
		}
	})
	return name
}

// create applies a ModelServer and waits until it is Healthy on its first revision.
func create(t *testing.T, ms *v1alpha1.ModelServer, timeout time.Duration) view {
	t.Helper()
	if err := st.Client.Create(context.Background(), ms); err != nil {
		t.Fatalf("creating ModelServer %s/%s: %v", ms.Namespace, ms.Name, err)
	}
	rev := revision.Of(&ms.Spec.Template)
	v := follow(t, ms.Namespace, ms.Name, timeout, "Healthy on revision "+rev, nil, func(v view) bool {
		return v.healthyOn(rev)
	})
	waitServing(t, ms.Namespace, ms.Name, timeout)
	return v
}

// waitServing waits until the Gateway (Traefik, or the simulated one) answers the ModelServer's requests and has
// refused none for 5 s: a first revision is Healthy once its pods are Ready (with warm-up, once
// loaded: the warm-up gate holds Ready), and the route and the Gateway follow a little later.
func waitServing(t *testing.T, ns, name string, timeout time.Duration) {
	t.Helper()
	ok := fmt.Sprintf(`sum(rate(%s{namespace=%q,modelserver=%q,code="200"}[5s]))`, st.ResponsesMetric, ns, name)
	failed := fmt.Sprintf(`sum(increase(%s{namespace=%q,modelserver=%q,code=~"5.."}[5s]))`, st.ResponsesMetric, ns, name)
	deadline := time.Now().Add(timeout)
	for {
		now := time.Now()
		o := prom.Scalar(context.Background(), ok, now)
		f := prom.Scalar(context.Background(), failed, now)
		if o.Status == metrics.OK && o.Value > 0 && (f.Status == metrics.NoData || (f.Status == metrics.OK && f.Value == 0)) {
			return
		}
		if now.After(deadline) {
			t.Fatalf("%s/%s: the Gateway did not serve without errors within %s: 200 rate %+v, 5xx %+v", ns, name, timeout, o, f)
		}
		time.Sleep(time.Second)
	}
}

// setImage changes the image of the model container and returns the revision the spec now asks for.
func setImage(t *testing.T, ns, name, image string) string {
	t.Helper()
	ms := &v1alpha1.ModelServer{}
	if err := st.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ms); err != nil {
		t.Fatalf("reading ModelServer %s/%s: %v", ns, name, err)
	}
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Template.Spec.Containers[0].Image = image
	if err := st.Client.Patch(context.Background(), ms, patch); err != nil {
		t.Fatalf("setting the image of %s/%s to %s: %v", ns, name, image, err)
	}
	return revision.Of(&ms.Spec.Template)
}

// Observation.

// view is what one poll saw: the ModelServer, the weights in the HTTPRoute and each color's
// Deployment.
type view struct {
	at    time.Time
	ms    *v1alpha1.ModelServer
	route map[v1alpha1.Color]int32 // backendRef weights; a color without a backendRef is absent
	// deploy holds each existing color's Deployment.
	deploy map[v1alpha1.Color]*appsv1.Deployment
}

func observe(ctx context.Context, ns, name string) (view, error) {
	v := view{at: time.Now(), ms: &v1alpha1.ModelServer{}, route: map[v1alpha1.Color]int32{}, deploy: map[v1alpha1.Color]*appsv1.Deployment{}}
	if err := st.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, v.ms); err != nil {
		return v, fmt.Errorf("reading ModelServer: %w", err)
	}
	route := &gatewayv1.HTTPRoute{}
	err := st.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v.ms.RouteName()}, route)
	if err != nil && !apierrors.IsNotFound(err) {
		return v, fmt.Errorf("reading HTTPRoute: %w", err)
	}
	for _, rule := range route.Spec.Rules {
		for _, ref := range rule.BackendRefs {
			for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
				if string(ref.Name) == v.ms.ServiceName(c) {
					v.route[c] = ptr.Deref(ref.Weight, 1)
				}
			}
		}
	}
	for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		d := &appsv1.Deployment{}
		err := st.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v.ms.DeploymentName(c)}, d)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return v, fmt.Errorf("reading Deployment: %w", err)
		default:
			v.deploy[c] = d
		}
	}
	return v, nil
}

func (v view) phase() v1alpha1.Phase { return v.ms.Status.Phase }

// healthyOn: the status is current, Healthy, and rev is the stable revision.
func (v view) healthyOn(rev string) bool {
	st := v.ms.Status
	return st.ObservedGeneration >= v.ms.Generation && st.Phase == v1alpha1.PhaseHealthy &&
		st.Stable != nil && st.Stable.Revision == rev
}

func (v view) stableColor() v1alpha1.Color {
	if s := v.ms.Status.Stable; s != nil {
		return s.Color
	}
	return ""
}

func (v view) candidateRevision() string {
	if c := v.ms.Status.Candidate; c != nil {
		return c.Revision
	}
	return ""
}

// ready is a color's Deployment's Ready replicas (0 without one).
func (v view) ready(c v1alpha1.Color) int32 {
	if d := v.deploy[c]; d != nil {
		return d.Status.ReadyReplicas
	}
	return 0
}

// replicas is a color's Deployment's spec.replicas (0 without one).
func (v view) replicas(c v1alpha1.Color) int32 {
	if d := v.deploy[c]; d != nil {
		return ptr.Deref(d.Spec.Replicas, 1)
	}
	return 0
}

func (v view) desired() int32 {
	if a := v.ms.Status.Autoscaling; a != nil {
		return a.DesiredReplicas
	}
	return -1
}

func (v view) condition(t string) *metav1.Condition {
	return meta.FindStatusCondition(v.ms.Status.Conditions, t)
}

func (v view) String() string {
	s := v.ms.Status
	stable, cand := "-", "-"
	if s.Stable != nil {
		stable = fmt.Sprintf("%s %s %d/%d", s.Stable.Color, s.Stable.Revision, v.ready(s.Stable.Color), v.replicas(s.Stable.Color))
	}
	if s.Candidate != nil {
		cand = fmt.Sprintf("%s %s %d/%d", s.Candidate.Color, s.Candidate.Revision, v.ready(s.Candidate.Color), v.replicas(s.Candidate.Color))
	}
	var conds []string
	for _, c := range s.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	out := fmt.Sprintf("phase %s step %d weights %d/%d route %v stable %s candidate %s desired %d gen %d/%d %s",
		s.Phase, s.Rollout.Step, s.Weights.Stable, s.Weights.Candidate, v.route, stable, cand, v.desired(),
		s.ObservedGeneration, v.ms.Generation, strings.Join(conds, " "))
	if a := s.Autoscaling; a != nil {
		// What the autoscaler saw: each signal's value and proposal, and its last recommendations.
		var props []string
		for _, p := range a.Proposals {
			n := "-"
			if p.Replicas != nil {
				n = fmt.Sprint(*p.Replicas)
			}
			props = append(props, fmt.Sprintf("%s %s/%s -> %s %s", p.Metric, p.Value, p.Target, n, p.Message))
		}
		var recs []string
		for _, r := range a.Recommendations {
			recs = append(recs, fmt.Sprintf("%d@%s", r.Replicas, r.At.Format("15:04:05")))
		}
		out += fmt.Sprintf(" proposals [%s] recommendations [%s]", strings.Join(props, "; "), strings.Join(recs, " "))
	}
	return out
}

// follow polls the ModelServer until done says so, failing the story at timeout or as soon as
// invariant returns an error. It returns the last view.
func follow(t *testing.T, ns, name string, timeout time.Duration, what string, invariant func(view) error, done func(view) bool) view {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last view
	var lastErr error
	for {
		v, err := observe(ctx, ns, name)
		if err == nil {
			last = v
			if invariant != nil {
				if err := invariant(v); err != nil {
					t.Fatalf("%s/%s at %s: %v\n  while waiting for: %s\n  state: %s", ns, name, v.at.Format("15:04:05.0"), err, what, v)
				}
			}
			if done(v) {
				return v
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s/%s: no %s after %s (last error: %v)\n  state: %s", ns, name, what, timeout, lastErr, last)
		case <-time.After(pollInterval):
		}
	}
}

// hold polls the ModelServer for d, failing the story as soon as invariant returns an error.
func hold(t *testing.T, ns, name string, d time.Duration, what string, invariant func(view) error) view {
	t.Helper()
	end := time.Now().Add(d)
	return follow(t, ns, name, d+30*time.Second, what, invariant, func(v view) bool { return !v.at.Before(end) })
}

// weightsInvariant checks what holds at every moment: status weights add up to 100, so do the
// route's, and the route gives traffic only to colors that exist.
func weightsInvariant(v view) error {
	w := v.ms.Status.Weights
	if v.ms.Status.Phase != "" && w.Stable+w.Candidate != 100 {
		return fmt.Errorf("status weights %d + %d != 100", w.Stable, w.Candidate)
	}
	if len(v.route) > 0 {
		sum := int32(0)
		for c, x := range v.route {
			sum += x
			if x > 0 && v.deploy[c] == nil {
				return fmt.Errorf("route sends %d%% to %s, which has no Deployment", x, c)
			}
		}
		if sum != 100 {
			return fmt.Errorf("route weights %v add up to %d", v.route, sum)
		}
	}
	return nil
}

// Prometheus.

// counter reads a sum of counters at an instant; no series is 0.
func counter(t *testing.T, query string, at time.Time) float64 {
	t.Helper()
	s := prom.Scalar(context.Background(), query, at)
	switch s.Status {
	case metrics.OK:
		return s.Value
	case metrics.NoData:
		return 0
	}
	t.Fatalf("Prometheus query %s: %s", query, s.Message)
	return 0
}

// gatewayResponses is the sum of the answers to the trace's requests of a ModelServer (through
// Traefik, as the simulator's load generator counts them; or the simulated Gateway's), of a
// color (all colors when color is empty; through Traefik, the color of the pod that answered,
// "" for the Gateway's own errors) with a code matching codeRegex.
func gatewayResponses(ns, name string, color v1alpha1.Color, codeRegex string) string {
	sel := fmt.Sprintf(`namespace=%q,modelserver=%q,code=~%q`, ns, name, codeRegex)
	if color != "" {
		sel += fmt.Sprintf(`,color=%q`, string(color))
	}
	return `sum(` + st.ResponsesMetric + `{` + sel + `})`
}

// served counts a color's responses between two instants (the simulator keeps running, so the
// counters do not reset in between).
func served(t *testing.T, ns, name string, color v1alpha1.Color, codeRegex string, from, to time.Time) float64 {
	t.Helper()
	q := gatewayResponses(ns, name, color, codeRegex)
	return counter(t, q, to) - counter(t, q, from)
}

// settleScrape waits until Prometheus has scraped past now (1 s scrape interval).
func settleScrape() time.Time {
	at := time.Now()
	time.Sleep(3 * time.Second)
	return at
}

// The kubectl plugin.

// plugin runs `kubectl modelship --kubeconfig ... -n ns args...` and returns its output and
// exit code.
func plugin(t *testing.T, ns string, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	out, code, err := runPlugin(ns, timeout, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out, code
}

// runPlugin is plugin for any goroutine: an error means the plugin could not run.
func runPlugin(ns string, timeout time.Duration, args ...string) (string, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	full := append([]string{"--kubeconfig", st.Env.Kubeconfig(), "-n", ns}, args...)
	cmd := exec.CommandContext(ctx, st.Plugin(), full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0, nil
	case errors.As(err, &exit) && ctx.Err() == nil:
		return out.String(), exit.ExitCode(), nil
	}
	return out.String(), -1, fmt.Errorf("running kubectl-modelship %s: %w\n%s", strings.Join(args, " "), err, out.String())
}

// events returns the reasons of the ModelServer's events, oldest first.
func events(t *testing.T, ns, name string) []string {
	t.Helper()
	var list corev1.EventList
	if err := st.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "ModelServer" && e.InvolvedObject.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}
