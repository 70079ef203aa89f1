package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/rollout"
	"github.com/modelship/modelship/internal/routing"
)

// The rollout stories run the real controller through whole blue/green rollouts against the
// shared API server: the test plays the Deployment controller (playDeployments) and Prometheus
// (vllmAnswers), and watches the HTTPRoute so that every weight the route ever carried is seen,
// not only those a poll happens to catch.

const (
	imageV1 = "vllm/vllm-openai:v0.10.2" // newModelServer's image
	imageV2 = "vllm/vllm-openai:v0.11.0"
	imageV3 = "vllm/vllm-openai:v0.11.1"

	// rolloutTimeout bounds a whole rollout (about 5s of steps) on a slow, shared machine.
	rolloutTimeout = 60 * time.Second
	// holdFor is how long a test checks that a held rollout does not move: longer than a step
	// (2s) plus an analysis interval (1s), so that a rollout that was not held would have moved.
	holdFor = 3500 * time.Millisecond
)

// fastRollout shortens the rollout policy so that a whole rollout takes seconds: steps 20, 50
// and 100 held 2s each, analysis every second on at least 10 requests, the previous color
// kept 3s after a promotion.
func fastRollout(ms *v1alpha1.ModelServer) {
	r := &ms.Spec.Rollout
	r.Steps = []int32{20, 50, 100}
	r.StepDuration = v1alpha1.Duration{Duration: 2 * time.Second}
	r.Analysis.Interval = v1alpha1.Duration{Duration: time.Second}
	r.Analysis.MinSamples = 10
	r.ScaleDownDelay = v1alpha1.Duration{Duration: 3 * time.Second}
}

// latencies are one color's p95 latencies in seconds, as the vLLM preset queries them.
// latencies are a color's p95s and its decode seconds per decoded token (decode).
type latencies struct{ ttft, itl, e2e, decode float64 }

var (
	healthy     = latencies{ttft: 0.30, itl: 0.040, e2e: 3.2, decode: 0.020}
	alsoHealthy = latencies{ttft: 0.32, itl: 0.041, e2e: 3.3, decode: 0.0205} // within the preset's bounds (1.2x, decode 1.1x) of healthy
	// slowBuild is a slower build: 3x healthy's time to first token, and twice its decode time
	// per token.
	slowBuild = latencies{ttft: 0.90, itl: 0.040, e2e: 3.2, decode: 0.040}
	// slowDecode decodes each token 1.5x slower than healthy, with the same p95s: a slower
	// build whose per-token latency stays within one histogram bucket.
	slowDecode = latencies{ttft: 0.30, itl: 0.040, e2e: 3.2, decode: 0.030}
)

// perPodAnswer answers a per-unit metric's per-pod queries of a color at perToken seconds per
// token: four pods of 2,000 tokens each (the answer, not the Deployment, makes the units),
// their speeds 1% apart; numerator says whether q is the seconds' query.
func perPodAnswer(numerator bool, perToken float64) promAnswer {
	pods := map[string]float64{}
	for i, spread := range []float64{0.99, 1.0, 1.0, 1.01} {
		tokens := 2000.0
		if numerator {
			tokens *= perToken * spread
		}
		pods[fmt.Sprintf("pod-%d", i)] = tokens
	}
	return promAnswer{pods: pods}
}

// vllmAnswers answers the vLLM preset's queries about the pods of ModelServer name: each
// color's p95 latencies (as scalars, and as 500 observations' buckets for the bucket queries
// the preset judges latencies from), no aborted request and 500 finished requests per window. A query
// about neither color's pods has no data.
func vllmAnswers(name string, byColor map[v1alpha1.Color]latencies) func(string) promAnswer {
	return func(q string) promAnswer {
		var l latencies
		switch {
		case strings.Contains(q, `pod=~"`+name+`-blue-`):
			l = byColor[v1alpha1.Blue]
		case strings.Contains(q, `pod=~"`+name+`-green-`):
			l = byColor[v1alpha1.Green]
		default:
			return promAnswer{noData: true}
		}
		answer := func(p95 float64) promAnswer {
			if !strings.Contains(q, "le) (") { // sum by (le) or sum by (pod, le): a bucket query
				return promAnswer{value: p95}
			}
			// A bucket query: 500 requests spread evenly up to p95/0.95, so that the p95 read
			// from the buckets is p95.
			return promAnswer{buckets: map[string]float64{strconv.FormatFloat(p95/0.95, 'g', -1, 64): 500, "+Inf": 500}}
		}
		switch {
		case strings.Contains(q, "sum by (pod) (increase(vllm:request_decode_time_seconds_sum"), strings.Contains(q, "sum by (pod) (increase(vllm:request_generation_tokens"):
			return perPodAnswer(strings.Contains(q, "decode_time"), l.decode)
		case strings.Contains(q, `finished_reason=`):
			return promAnswer{value: 0} // the error ratio
		case strings.Contains(q, "request_success_total"):
			return promAnswer{value: 500}
		case strings.Contains(q, "time_to_first_token"):
			return answer(l.ttft)
		case strings.Contains(q, "inter_token_latency"):
			return answer(l.itl)
		case strings.Contains(q, "e2e_request_latency"):
			return answer(l.e2e)
		}
		return promAnswer{noData: true}
	}
}

func prometheusDown(string) promAnswer { return promAnswer{down: true} }

// playDeployments plays the Deployment controller for every Deployment of the namespace until
// the test ends: each reports all its replicas ready, available and updated for its current
// generation, a moment after it changes.
func playDeployments(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var list appsv1.DeploymentList
			if err := k8s.List(ctx, &list, client.InNamespace(ns)); err == nil {
				for i := range list.Items {
					d := &list.Items[i]
					n := ptr.Deref(d.Spec.Replicas, 1)
					s := d.Status
					if s.ObservedGeneration == d.Generation && s.Replicas == n && s.ReadyReplicas == n && s.AvailableReplicas == n && s.UpdatedReplicas == n {
						continue
					}
					d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, ReadyReplicas: n, AvailableReplicas: n, UpdatedReplicas: n}
					_ = k8s.Status().Update(ctx, d) // a conflict is retried on the next tick
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

// routeTrace holds every version of an HTTPRoute that a watch delivered, in order.
type routeTrace struct {
	ms       *v1alpha1.ModelServer
	mu       sync.Mutex
	versions []*gatewayv1.HTTPRoute
}

// traceRoute watches the ModelServer's route (owned or named by routeRef) until the test ends.
func traceRoute(t *testing.T, ms *v1alpha1.ModelServer) *routeTrace {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatalf("watch client: %v", err)
	}
	tr := &routeTrace{ms: ms}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	started := make(chan error, 1)
	go func() {
		defer close(done)
		rv := ""
		for first := true; ctx.Err() == nil; first = false {
			w, err := wc.Watch(ctx, &gatewayv1.HTTPRouteList{}, client.InNamespace(ms.Namespace),
				client.MatchingFields{"metadata.name": ms.RouteName()}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if first {
				started <- err
			}
			if err != nil {
				if first {
					return
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				r, ok := ev.Object.(*gatewayv1.HTTPRoute)
				if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
					continue
				}
				rv = r.ResourceVersion
				tr.mu.Lock()
				tr.versions = append(tr.versions, r.DeepCopy())
				tr.mu.Unlock()
			}
			w.Stop()
		}
	}()
	if err := <-started; err != nil {
		t.Fatalf("watching HTTPRoute %s: %v", ms.RouteName(), err)
	}
	return tr
}

// weightsOf writes a route's weights for the ModelServer as "blue/green", e.g. "80/20"; "" when
// the route has none of its backendRefs.
func weightsOf(r *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer) string {
	w := routing.Weights(r, ms)
	if w == nil {
		return ""
	}
	return fmt.Sprintf("%d/%d", w[v1alpha1.Blue], w[v1alpha1.Green])
}

// history is the sequence of the route's weights, consecutive repeats (versions that changed
// something else) folded.
func (tr *routeTrace) history() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for _, r := range tr.versions {
		if w := weightsOf(r, tr.ms); w != "" && (len(out) == 0 || out[len(out)-1] != w) {
			out = append(out, w)
		}
	}
	return out
}

// current is the route's weights in its latest version.
func (tr *routeTrace) current() string {
	h := tr.history()
	if len(h) == 0 {
		return ""
	}
	return h[len(h)-1]
}

func (tr *routeTrace) all() []*gatewayv1.HTTPRoute {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.versions)
}

// waitWeights waits until the route carries the weights, "blue/green".
func (tr *routeTrace) waitWeights(t *testing.T, want string) {
	t.Helper()
	eventually(t, rolloutTimeout, "route weights "+want+" (blue/green)", func() error {
		if got := tr.current(); got != want {
			return fmt.Errorf("route weights %s; so far %v", got, tr.history())
		}
		return nil
	})
}

// waitCandidateWeight waits until green (the first candidate of a ModelServer that started on
// blue) has at least min percent of the traffic, and returns the weights.
func (tr *routeTrace) waitCandidateWeight(t *testing.T, minGreen int32) string {
	t.Helper()
	var got string
	eventually(t, rolloutTimeout, fmt.Sprintf("green has at least %d%% of the traffic", minGreen), func() error {
		got = tr.current()
		var b, g int32
		if _, err := fmt.Sscanf(got, "%d/%d", &b, &g); err != nil || g < minGreen {
			return fmt.Errorf("route weights %q; so far %v", got, tr.history())
		}
		return nil
	})
	return got
}

// consistently checks cond every 100ms for d and fails at the first error: for checks that
// something does NOT happen, so it has to wait.
func consistently(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// startServing creates the ModelServer with fastRollout and the given Prometheus answers,
// watches its route, marks revision 1 ready on blue and waits until it is Healthy. It returns
// the route trace and the first revision.
func startServing(t *testing.T, ms *v1alpha1.ModelServer, answers map[v1alpha1.Color]latencies) (*routeTrace, string) {
	t.Helper()
	fastRollout(ms)
	prometheus.set(ms.Namespace, vllmAnswers(ms.Name, answers))
	tr := traceRoute(t, ms)
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatalf("creating ModelServer: %v", err)
	}
	eventually(t, 20*time.Second, "blue Deployment created", func() error {
		_, err := getDeployment(ms.Namespace, ms.DeploymentName(v1alpha1.Blue))
		return err
	})
	markReady(t, ms.Namespace, ms.DeploymentName(v1alpha1.Blue))
	var rev string
	eventually(t, 20*time.Second, "first revision Healthy on blue", func() error {
		got := getMS(t, ms)
		if got.Status.Phase != v1alpha1.PhaseHealthy || got.Status.Stable == nil || got.Status.Stable.Color != v1alpha1.Blue {
			return fmt.Errorf("phase %s stable %+v", got.Status.Phase, got.Status.Stable)
		}
		rev = got.Status.Stable.Revision
		return nil
	})
	tr.waitWeights(t, "100/0")
	return tr, rev
}

func setImage(t *testing.T, ms *v1alpha1.ModelServer, image string) {
	t.Helper()
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) { ms.Spec.Template.Spec.Containers[0].Image = image })
}

// waitCandidate waits until the status names the spec's new revision as the candidate, and
// returns that revision.
func waitCandidate(t *testing.T, ms *v1alpha1.ModelServer, image string) string {
	t.Helper()
	var rev string
	eventually(t, 40*time.Second, "candidate running "+image, func() error {
		got := getMS(t, ms)
		c := got.Status.Candidate
		if c == nil || c.Image != image || c.Revision != got.Status.Revision {
			return fmt.Errorf("candidate %+v, spec revision %s", c, got.Status.Revision)
		}
		rev = c.Revision
		return nil
	})
	return rev
}

// waitRolledBack waits until rev is rolled back (phase RolledBack, status.rollout's
// rolledBackRevision) and, when reason is not empty, the history's first entry names it;
// it returns the status.
func waitRolledBack(t *testing.T, ms *v1alpha1.ModelServer, rev, reason string) v1alpha1.ModelServerStatus {
	t.Helper()
	var st v1alpha1.ModelServerStatus
	eventually(t, rolloutTimeout, "revision "+rev+" rolled back "+reason, func() error {
		st = getMS(t, ms).Status
		if st.Phase != v1alpha1.PhaseRolledBack || st.Rollout.RolledBackRevision != rev {
			return fmt.Errorf("phase %s rolledBackRevision %q weights %+v shadow %+v analysis %+v", st.Phase, st.Rollout.RolledBackRevision, st.Weights, st.Rollout.Shadow, st.Rollout.Analysis)
		}
		if reason != "" && (len(st.History) == 0 || !strings.Contains(st.History[0].Reason, reason)) {
			return fmt.Errorf("history %+v does not name %q", st.History, reason)
		}
		return nil
	})
	return st
}

// waitPromoted waits until rev serves all traffic from color, Healthy and Ready, with
// Promoted at the top of the history, and returns the ModelServer.
func waitPromoted(t *testing.T, ms *v1alpha1.ModelServer, color v1alpha1.Color, rev string) *v1alpha1.ModelServer {
	t.Helper()
	var got *v1alpha1.ModelServer
	eventually(t, rolloutTimeout, "revision "+rev+" promoted on "+string(color), func() error {
		got = getMS(t, ms)
		st := got.Status
		if st.Phase != v1alpha1.PhaseHealthy || st.Stable == nil || st.Stable.Color != color || st.Stable.Revision != rev || st.Candidate != nil {
			return fmt.Errorf("phase %s stable %+v candidate %+v weights %+v", st.Phase, st.Stable, st.Candidate, st.Weights)
		}
		if st.Weights != (v1alpha1.Weights{Stable: 100}) {
			return fmt.Errorf("status weights %+v", st.Weights)
		}
		if c := condition(got, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %+v", c)
		}
		if len(st.History) == 0 || st.History[0].Revision != rev || st.History[0].Outcome != v1alpha1.OutcomePromoted {
			return fmt.Errorf("history %+v", st.History)
		}
		return nil
	})
	return got
}

// findEvent returns the first event about the ModelServer with the type and reason.
func findEvent(ms *v1alpha1.ModelServer, typ, reason string) (*eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ms.Namespace)); err != nil {
		return nil, err
	}
	var seen []string
	for i := range list.Items {
		e := &list.Items[i]
		if e.Regarding.Kind != "ModelServer" || e.Regarding.Name != ms.Name {
			continue
		}
		if e.Type == typ && e.Reason == reason {
			return e, nil
		}
		seen = append(seen, e.Type+"/"+e.Reason)
	}
	return nil, fmt.Errorf("no %s event %s; events: %v", typ, reason, seen)
}

// countEvents counts the occurrences of events about the ModelServer with the type and reason
// (an event recorded as a series counts its occurrences).
func countEvents(t *testing.T, ms *v1alpha1.ModelServer, typ, reason string) int32 {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ms.Namespace)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var n int32
	for _, e := range list.Items {
		if e.Regarding.Kind == "ModelServer" && e.Regarding.Name == ms.Name && e.Type == typ && e.Reason == reason {
			if e.Series != nil {
				n += e.Series.Count
			} else {
				n++
			}
		}
	}
	return n
}

// onceEach checks that each transition of one rollout was recorded exactly as often as it
// happened: events beside actions, on transitions only.
func onceEach(t *testing.T, ms *v1alpha1.ModelServer, want map[string]int32) {
	t.Helper()
	for reason, n := range want {
		if got := countEvents(t, ms, corev1.EventTypeNormal, reason); got != n {
			t.Errorf("%d %s events, want %d", got, reason, n)
		}
	}
}

// waitEvent waits for an event about the ModelServer with the type and reason and returns it.
func waitEvent(t *testing.T, ms *v1alpha1.ModelServer, typ, reason string) *eventsv1.Event {
	t.Helper()
	var e *eventsv1.Event
	eventually(t, 20*time.Second, typ+" event "+reason, func() error {
		var err error
		e, err = findEvent(ms, typ, reason)
		return err
	})
	return e
}

// onlyForward fails unless every "blue/green" weights add up to 100 and green's weight never
// goes down: the rollout of one candidate on green only moved forward.
func onlyForward(t *testing.T, history []string) {
	t.Helper()
	prev := int32(-1)
	for _, w := range history {
		var b, g int32
		if _, err := fmt.Sscanf(w, "%d/%d", &b, &g); err != nil || b+g != 100 {
			t.Fatalf("weights %q do not add up to 100 (history %v)", w, history)
		}
		if g < prev {
			t.Fatalf("the candidate's weight went back from %d to %d: history %v", prev, g, history)
		}
		prev = g
	}
}

func TestRolloutPromotesAGoodRevisionStepByStep(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "good")
	tr, v1 := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})

	// When the template's image changes, green runs the new template, sized for the first
	// step's 20% of 2 replicas, while blue keeps revision 1 at full size and all the traffic.
	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	eventually(t, 20*time.Second, "green runs the new template at 1 replica", func() error {
		d, err := getDeployment(ns, "good-green")
		if err != nil {
			return err
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != imageV2 || d.Labels[v1alpha1.LabelRevision] != v2 || d.Spec.Template.Labels[v1alpha1.LabelRevision] != v2 {
			return fmt.Errorf("green runs %s revision %s", img, d.Labels[v1alpha1.LabelRevision])
		}
		if n := ptr.Deref(d.Spec.Replicas, 1); n != 1 {
			return fmt.Errorf("green has %d replicas, want 1 (20%% of 2)", n)
		}
		return nil
	})
	blue, err := getDeployment(ns, "good-blue")
	if err != nil {
		t.Fatal(err)
	}
	if img := blue.Spec.Template.Spec.Containers[0].Image; img != imageV1 || *blue.Spec.Replicas != 2 || blue.Labels[v1alpha1.LabelRevision] != v1 {
		t.Errorf("blue changed during the rollout: %s, %d replicas", img, *blue.Spec.Replicas)
	}
	got := getMS(t, ms)
	if got.Status.Phase != v1alpha1.PhaseProgressing || tr.current() != "100/0" {
		t.Errorf("before green is ready: phase %s, weights %s; want Progressing, 100/0", got.Status.Phase, tr.current())
	}

	// Once its pods are ready the route moves through each step, judged on good metrics.
	playDeployments(t, ns)
	promoted := waitPromoted(t, ms, v1alpha1.Green, v2)
	if h := tr.history(); !slices.Equal(h, []string{"100/0", "80/20", "50/50", "0/100"}) {
		t.Errorf("route weights went %v; want 100/0, 80/20, 50/50, 0/100", h)
	}
	if c := condition(promoted, v1alpha1.ConditionMetricsAvailable); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("MetricsAvailable %+v", c)
	}
	for _, r := range []string{"RolloutStarted", "StepAdvanced", "Promoted"} {
		waitEvent(t, ms, corev1.EventTypeNormal, r)
	}
	onceEach(t, ms, map[string]int32{"RolloutStarted": 1, "StepAdvanced": 2, "Promoted": 1})

	// The previous color stays at full size for the scale-down delay, then goes to zero.
	kw := promoted.Status.Rollout.KeepWarmUntil
	if kw == nil || kw.Sub(promoted.Status.History[0].At.Time) < 2*time.Second {
		t.Fatalf("keepWarmUntil %v, promoted at %v: want about 3s later", kw, promoted.Status.History[0].At)
	}
	eventually(t, 20*time.Second, "blue scaled to zero", func() error {
		if n := deploymentReplicas(t, ms.Namespace, ms.DeploymentName(v1alpha1.Blue)); n != 0 {
			return fmt.Errorf("blue has %d replicas", n)
		}
		return nil
	})
	if now := time.Now(); now.Before(kw.Time) {
		t.Errorf("blue scaled to zero at %s, before the scale-down delay ended at %s", now.Format(time.StampMilli), kw.Format(time.StampMilli))
	}
	if n := deploymentReplicas(t, ms.Namespace, ms.DeploymentName(v1alpha1.Green)); n != 2 {
		t.Errorf("green has %d replicas after promotion, want 2", n)
	}
}

// With spec.rollout.loadMatching StablePods, the route sends the candidate's one pod the share
// of a stable pod: 1 pod beside 2 stable ones gets 33% at the 20% step (and the event says so),
// and the 50% step, whose pod already carries more than a stable pod, keeps its weight.
func TestRolloutWithLoadMatchingSendsTheCandidateAStablePodsLoad(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "matched")
	ms.Spec.Rollout.LoadMatching = v1alpha1.LoadMatchingStablePods
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	playDeployments(t, ns)
	waitPromoted(t, ms, v1alpha1.Green, v2)
	if h := tr.history(); !slices.Equal(h, []string{"100/0", "67/33", "50/50", "0/100"}) {
		t.Errorf("route weights went %v; want 100/0, 67/33, 50/50, 0/100", h)
	}
	want := "33% (step 20% raised to a stable pod's load)"
	eventually(t, 20*time.Second, "a StepAdvanced event giving the raised weight", func() error {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name == ms.Name && e.Reason == rollout.EventStepAdvanced {
				if strings.Contains(e.Note, want) {
					return nil
				}
				seen = append(seen, e.Note)
			}
		}
		return fmt.Errorf("no StepAdvanced event says %q: %q", want, seen)
	})
}

func TestRolloutRollsBackASlowerBuild(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "bad")
	tr, v1 := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: slowBuild})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)

	// The candidate decodes at 40 ms per token against 20 ms on stable (bound 1.1x = 22 ms; its
	// p95 TTFT is 3x stable's, which the preset does not compare): on its first failed
	// measurement (failureLimit 0, the API's default), the rollout rolls back on its own.
	waitRolledBack(t, ms, v2, "")
	got := getMS(t, ms)
	st := got.Status
	if st.Stable == nil || st.Stable.Color != v1alpha1.Blue || st.Stable.Revision != v1 || st.Weights != (v1alpha1.Weights{Stable: 100}) {
		t.Errorf("after the rollback: stable %+v weights %+v; want %s on blue with all traffic", st.Stable, st.Weights, v1)
	}
	// The rejected candidate is kept in status; its pods drain for rollout.RollbackDrain after
	// its weight went to 0 (requests a Gateway still routes to it must not meet terminating
	// pods), then it scales to zero (checked below).
	if st.Candidate == nil || st.Candidate.Revision != v2 {
		t.Errorf("the rejected candidate should be kept in status: %+v", st.Candidate)
	}
	du := st.Rollout.DrainUntil
	if du == nil && (st.Candidate == nil || st.Candidate.Replicas != 0) {
		t.Errorf("no drainUntil while the rejected candidate is kept at %+v", st.Candidate)
	}
	if du != nil && len(st.History) > 0 && !du.Time.Equal(st.History[0].At.Add(rollout.RollbackDrain)) {
		t.Errorf("drainUntil %v, rolled back at %v: want %s later", du, st.History[0].At, rollout.RollbackDrain)
	}
	if iu := st.Rollout.InspectUntil; iu != nil {
		t.Errorf("inspectUntil %v after an automatic rollback: only an abort keeps a candidate for inspection", iu)
	}
	why := []string{"decode-per-token", "0.04", "0.022"}
	containsAll := func(s string) bool {
		for _, w := range why {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	}
	if len(st.History) == 0 || st.History[0].Revision != v2 || st.History[0].Outcome != v1alpha1.OutcomeRolledBack || !containsAll(st.History[0].Reason) {
		t.Errorf("history should record the rollback naming metric, value and bound %v: %+v", why, st.History)
	}
	if c := condition(got, v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonRolledBack || !containsAll(c.Message) {
		t.Errorf("Stalled should be True, RolledBack, naming %v: %+v", why, c)
	}
	if c := condition(got, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready %+v; want False", c)
	}
	tr.waitWeights(t, "100/0")
	eventually(t, rollout.RollbackDrain+20*time.Second, "green scaled to zero", func() error {
		if n := deploymentReplicas(t, ms.Namespace, ms.DeploymentName(v1alpha1.Green)); n != 0 {
			return fmt.Errorf("green has %d replicas", n)
		}
		return nil
	})
	if now := time.Now(); du != nil && now.Before(du.Time) {
		t.Errorf("green scaled to zero at %s, before its drain ended at %s", now.Format(time.StampMilli), du.Format(time.StampMilli))
	}
	// The status that says so is written in the same pass, just after the Deployment.
	eventually(t, 10*time.Second, "the rejected candidate kept in status at 0 replicas", func() error {
		if c := getMS(t, ms).Status.Candidate; c == nil || c.Revision != v2 || c.Replicas != 0 {
			return fmt.Errorf("candidate %+v", c)
		}
		return nil
	})
	if e := waitEvent(t, ms, corev1.EventTypeWarning, "RolledBack"); !containsAll(e.Note) {
		t.Errorf("the RolledBack event should name %v: %q", why, e.Note)
	}
	// With failureLimit 0 the first Fail rolls back: RolledBack carries its reason, and no
	// AnalysisFailed (a tolerated failure, internal/rollout's tests) comes before it.
	if h := tr.history(); !slices.Equal(h, []string{"100/0", "80/20", "100/0"}) {
		t.Errorf("route weights went %v; want 100/0, 80/20, 100/0", h)
	}

	// It stays rolled back while the spec asks for the same revision, even once the candidate's
	// metrics would pass: no retry, no flapping.
	prometheus.set(ns, vllmAnswers(ms.Name, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy}))
	consistently(t, holdFor, "stays rolled back", func() error {
		st := getMS(t, ms).Status
		if st.Phase != v1alpha1.PhaseRolledBack || tr.current() != "100/0" {
			return fmt.Errorf("phase %s weights %s", st.Phase, tr.current())
		}
		if n := deploymentReplicas(t, ms.Namespace, ms.DeploymentName(v1alpha1.Green)); n != 0 {
			return fmt.Errorf("green scaled back up to %d", n)
		}
		return nil
	})

	// A new spec is a new rollout, which goes through.
	setImage(t, ms, imageV3)
	v3 := waitCandidate(t, ms, imageV3)
	waitPromoted(t, ms, v1alpha1.Green, v3)
	if c := condition(getMS(t, ms), v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Stalled %+v after a new revision was promoted; want False", c)
	}
}

// A build that decodes each token 1.5x slower, with the same p95 latencies (its per-token
// latency stays within one histogram bucket), is rolled back on decode-per-token: the
// controller queries each color's decode seconds and decoded tokens per pod and judges them.
func TestRolloutRollsBackACandidateThatDecodesSlowerPerToken(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "slowdecode")
	_, _ = startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: slowDecode})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	waitRolledBack(t, ms, v2, "decode-per-token 0.03 > 0.022 (1.1x stable 0.02)")
}

// On a fleet too small to judge decode-per-token with the pods as units (one candidate pod
// beside two stable ones: one degree of freedom, which can fail nothing), the controller reads
// each color's decode sums per scrape interval and rolls the slower build back on them
// (analysis.PairedBlockTest); before, such a rollout held at its step on Inconclusive.
func TestRolloutRollsBackASlowerDecodeOnOnePodBesideTwo(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "fewpods")
	byColor := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: slowDecode}
	answers := vllmAnswers(ms.Name, byColor)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	fewPods := func(q string) promAnswer {
		a := answers(q)
		if a.pods == nil {
			return a
		}
		keep := 2 // stable
		if strings.Contains(q, `pod=~"`+ms.Name+`-green-`) {
			keep = 1
		}
		mu.Lock()
		defer mu.Unlock()
		for pod := range a.pods {
			if pod >= fmt.Sprintf("pod-%d", keep) {
				delete(a.pods, pod)
			} else if strings.Contains(q, "decode_time") {
				a.pods[pod] *= 1 + 0.05*rng.NormFloat64() // each read its own batches
			}
		}
		return a
	}
	_, _ = startServing(t, ms, byColor)
	prometheus.set(ns, fewPods)
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	waitRolledBack(t, ms, v2, "scrape intervals paired")
}

// While the stable color is saturated (its pods' queues never empty over the window), latency
// measures the overload, not the version: a candidate that decodes 1.5x slower is held at its
// step, neither rolled back nor advanced, with the verdict it would have had in its message;
// once the stable color's queue drains, it is judged and rolled back.
func TestRolloutHoldsItsLatencyVerdictsWhileTheStableColorIsSaturated(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "saturated")
	var drained atomic.Bool
	byColor := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: slowDecode}
	answers := vllmAnswers(ms.Name, byColor)
	saturated := func(q string) promAnswer {
		if strings.Contains(q, "vllm:num_requests_waiting") && strings.Contains(q, `pod=~"`+ms.Name+`-blue-`) && !drained.Load() {
			return promAnswer{value: 1} // every stable pod queued at every scrape
		}
		return answers(q)
	}
	tr, _ := startServing(t, ms, byColor)
	prometheus.set(ns, saturated)
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	tr.waitCandidateWeight(t, 20)
	const held = "held, decode-per-token would have been a failure (decode-per-token 0.03 > 0.022"
	var step int32
	eventually(t, 20*time.Second, "decode-per-token held", func() error {
		st := getMS(t, ms).Status
		for _, r := range st.Rollout.Analysis {
			if r.Name == metrics.MetricDecodePerToken && r.Verdict == v1alpha1.VerdictInconclusive && strings.HasPrefix(r.Message, held) {
				step = st.Rollout.Step
				return nil
			}
		}
		return fmt.Errorf("phase %s analysis %+v", st.Phase, st.Rollout.Analysis)
	})
	weights := tr.current()
	consistently(t, holdFor, "holds its step while the stable color is saturated", func() error {
		st := getMS(t, ms).Status
		if w := tr.current(); w != weights || st.Rollout.Step != step || st.Phase != v1alpha1.PhaseProgressing {
			return fmt.Errorf("weights %s step %d phase %s; held at %s step %d", w, st.Rollout.Step, st.Phase, weights, step)
		}
		return nil
	})

	drained.Store(true)
	waitRolledBack(t, ms, v2, "decode-per-token 0.03 > 0.022 (1.1x stable 0.02)")
}

// With spec.rollout.minStepDuration, a step whose analysis passes with confidence ends early:
// a good candidate, served as much as stable on plenty of requests (20,000 per window), is
// promoted within the test's minute although each step's stepDuration is an hour, and the
// promotion and its measurements say why.
func TestRolloutEndsItsStepsEarlyOnConfidentPasses(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "earlypass")
	byColor := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: healthy}
	answers := vllmAnswers(ms.Name, byColor)
	plenty := func(q string) promAnswer {
		a := answers(q)
		for le := range a.buckets {
			a.buckets[le] *= 40
		}
		if strings.Contains(q, "request_success_total") && !strings.Contains(q, "finished_reason") {
			a.value *= 40
		}
		return a
	}
	_, _ = startServing(t, ms, byColor)
	prometheus.set(ns, plenty)
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.StepDuration = v1alpha1.Duration{Duration: time.Hour}
		ms.Spec.Rollout.MinStepDuration = &v1alpha1.Duration{Duration: 2 * time.Second}
	})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	got := waitPromoted(t, ms, v1alpha1.Green, v2)
	if h := got.Status.History; len(h) == 0 || !strings.Contains(h[0].Reason, "passed with confidence") {
		t.Errorf("history %+v; want the promotion to say the analysis passed with confidence", h)
	}
	confident := map[string]bool{}
	for _, r := range got.Status.Rollout.Analysis {
		if r.Confident != nil {
			confident[r.Name] = *r.Confident
		}
	}
	if !confident[metrics.MetricITLP95] || !confident[metrics.MetricDecodePerToken] || len(confident) != 2 {
		t.Errorf("the last measurement's confident results %v; want itl-p95 and decode-per-token, both true", confident)
	}
}

// The presets do not compare TTFT with the stable color (queueing makes it differ between
// identical colors); a user's SLO holds it: a candidate whose p95 TTFT is above
// spec.autoscaling.slo.ttftP95, with every other metric as stable's, is rolled back on ttft-p95.
func TestRolloutHoldsTheCandidatesTTFTToTheUsersSLO(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "ttftslo", func(ms *v1alpha1.ModelServer) {
		ms.Spec.Replicas = nil
		ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(2)), MaxReplicas: 2,
			SLO: &v1alpha1.LatencySLO{TTFTP95: &v1alpha1.Duration{Duration: 500 * time.Millisecond}}}
	})
	slowFirstToken := healthy
	slowFirstToken.ttft = 0.9 // prefill as fast as stable's: a queue of its own, or a slower tokenizer
	_, _ = startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: slowFirstToken})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	waitRolledBack(t, ms, v2, "ttft-p95 0.9 > 0.5")
}

func TestRolloutHoldsItsStepWhilePrometheusIsDownAndResumesWhenItReturns(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "promdown")
	good := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy}
	tr, _ := startServing(t, ms, good)
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	tr.waitCandidateWeight(t, 20)

	// Prometheus goes away mid-rollout: every measurement is inconclusive.
	prometheus.set(ns, prometheusDown)
	var held *v1alpha1.ModelServer
	eventually(t, 20*time.Second, "MetricsAvailable False", func() error {
		held = getMS(t, ms)
		c := condition(held, v1alpha1.ConditionMetricsAvailable)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonMetricsUnavailable || c.Message == "" {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	weights, step := tr.current(), held.Status.Rollout.Step
	if held.Status.Phase != v1alpha1.PhaseProgressing || step < 1 || weights == "0/100" {
		t.Fatalf("when metrics went away: phase %s step %d weights %s; want a rollout in progress", held.Status.Phase, step, weights)
	}
	if c := condition(held, v1alpha1.ConditionProgressing); c == nil || c.Reason != v1alpha1.ReasonInconclusive {
		t.Errorf("Progressing %+v; want reason Inconclusive", c)
	}

	// The rollout holds its step for longer than a step, while the controller keeps measuring.
	consistently(t, holdFor, "holds its step while Prometheus is down", func() error {
		st := getMS(t, ms).Status
		if w := tr.current(); w != weights || st.Rollout.Step != step || st.Phase != v1alpha1.PhaseProgressing {
			return fmt.Errorf("weights %s step %d phase %s; held at %s step %d", w, st.Rollout.Step, st.Phase, weights, step)
		}
		return nil
	})
	st := getMS(t, ms).Status
	if st.Rollout.LastMeasuredAt == nil || st.Rollout.StepStartedAt == nil || st.Rollout.LastMeasuredAt.Sub(st.Rollout.StepStartedAt.Time) < 2*time.Second {
		t.Errorf("the controller should have kept measuring past the step's 2s: step started %v, last measured %v", st.Rollout.StepStartedAt, st.Rollout.LastMeasuredAt)
	}

	// Prometheus comes back: the rollout resumes and promotes.
	prometheus.set(ns, vllmAnswers(ms.Name, good))
	promoted := waitPromoted(t, ms, v1alpha1.Green, v2)
	if c := condition(promoted, v1alpha1.ConditionMetricsAvailable); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("MetricsAvailable %+v after Prometheus came back; want True", c)
	}
	h := tr.history()
	onlyForward(t, h)
	if h[len(h)-1] != "0/100" {
		t.Errorf("route weights went %v; want to end at 0/100", h)
	}
}

func TestRolloutPausedBySpecFreezesWeightsUntilResumed(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "pause")
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	tr.waitCandidateWeight(t, 20)
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) { ms.Spec.Paused = true })

	var paused *v1alpha1.ModelServer
	eventually(t, 20*time.Second, "phase Paused", func() error {
		paused = getMS(t, ms)
		if paused.Status.Phase != v1alpha1.PhasePaused {
			return fmt.Errorf("phase %s", paused.Status.Phase)
		}
		return nil
	})
	weights, step := tr.current(), paused.Status.Rollout.Step
	if weights == "0/100" || step < 1 {
		t.Fatalf("paused at weights %s step %d; want a rollout in progress", weights, step)
	}
	if c := condition(paused, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonPaused {
		t.Errorf("Ready %+v; want False, Paused", c)
	}
	if c := condition(paused, v1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Reconciling %+v; want False on a deliberate hold", c)
	}
	waitEvent(t, ms, corev1.EventTypeNormal, "Paused")
	consistently(t, holdFor, "weights frozen while paused", func() error {
		st := getMS(t, ms).Status
		if w := tr.current(); w != weights || st.Rollout.Step != step || st.Phase != v1alpha1.PhasePaused {
			return fmt.Errorf("weights %s step %d phase %s; paused at %s step %d", w, st.Rollout.Step, st.Phase, weights, step)
		}
		return nil
	})

	updateMS(t, ms, func(ms *v1alpha1.ModelServer) { ms.Spec.Paused = false })
	waitPromoted(t, ms, v1alpha1.Green, v2)
	waitEvent(t, ms, corev1.EventTypeNormal, "Resumed")
	h := tr.history()
	onlyForward(t, h)
	if h[len(h)-1] != "0/100" {
		t.Errorf("route weights went %v; want to end at 0/100", h)
	}
}

func TestRolloutOfASupersededCandidateSendsTrafficBackToStableBeforeTheNewOne(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "superseded")
	tr, v1 := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	tr.waitCandidateWeight(t, 20)

	// A newer template arrives mid-rollout: all traffic goes back to stable, green keeps v2's
	// pods while the route drains (rollout.RollbackDrain), then v3 replaces them.
	setImage(t, ms, imageV3)
	eventually(t, 20*time.Second, "route back on stable with v2's pods still on green", func() error {
		got := getMS(t, ms)
		c := condition(got, v1alpha1.ConditionReconciling)
		if tr.current() != "100/0" || c == nil || c.Reason != v1alpha1.ReasonSuperseding || got.Status.Rollout.DrainUntil == nil {
			return fmt.Errorf("route %s, Reconciling %+v, drainUntil %v", tr.current(), c, got.Status.Rollout.DrainUntil)
		}
		return nil
	})
	if d, err := getDeployment(ns, "superseded-green"); err != nil {
		t.Fatal(err)
	} else if img := d.Spec.Template.Spec.Containers[0].Image; img != imageV2 || d.Spec.Replicas == nil || *d.Spec.Replicas == 0 {
		t.Errorf("green runs %s x %v while the route drains, want %s's pods kept", img, d.Spec.Replicas, imageV2)
	}
	v3 := waitCandidate(t, ms, imageV3)
	got := getMS(t, ms)
	if h := got.Status.History; len(h) == 0 || h[0].Revision != v2 || h[0].Outcome != v1alpha1.OutcomeSuperseded {
		t.Errorf("history %+v; want %s Superseded on top", h, v2)
	}
	if got.Status.Stable == nil || got.Status.Stable.Revision != v1 || got.Status.Candidate.Color != v1alpha1.Green {
		t.Errorf("stable %+v candidate %+v; want %s stable on blue, the new candidate on green", got.Status.Stable, got.Status.Candidate, v1)
	}
	waitEvent(t, ms, corev1.EventTypeNormal, "Superseded")
	waitPromoted(t, ms, v1alpha1.Green, v3)
	d, err := getDeployment(ns, "superseded-green")
	if err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != imageV3 {
		t.Errorf("green runs %s, want %s", img, imageV3)
	}

	// All traffic went back to stable before the new candidate got any: the weights climbed
	// for v2, fell to 100/0, then climbed through every step for v3.
	h := tr.history()
	last := slices.Index(h[1:], "100/0") + 1
	if last < 2 || !slices.Equal(h[last:], []string{"100/0", "80/20", "50/50", "0/100"}) {
		t.Fatalf("route weights went %v; want the v2 climb, back to 100/0, then 80/20, 50/50, 0/100", h)
	}
	onlyForward(t, h[:last])
}

// releaseToTheGate sets the image of a ModelServer with autoPromote false and waits until its
// rollout holds before the last step for a person, at 50/50; it returns the candidate revision.
func releaseToTheGate(t *testing.T, ms *v1alpha1.ModelServer, tr *routeTrace, image string) string {
	t.Helper()
	setImage(t, ms, image)
	rev := waitCandidate(t, ms, image)
	eventually(t, rolloutTimeout, "phase AwaitingPromotion", func() error {
		if p := getMS(t, ms).Status.Phase; p != v1alpha1.PhaseAwaitingPromotion {
			return fmt.Errorf("phase %s, weights %s", p, tr.current())
		}
		return nil
	})
	tr.waitWeights(t, "50/50")
	return rev
}

func TestRolloutWithoutAutoPromoteWaitsForThePromoteAnnotation(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "manual", func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.AutoPromote = ptr.To(false) })
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)

	// The rollout runs its steps up to the last one, then holds for a human.
	v2 := releaseToTheGate(t, ms, tr, imageV2)
	waiting := getMS(t, ms)
	if c := condition(waiting, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonAwaitingPromotion || !strings.Contains(c.Message, v2) {
		t.Errorf("Ready %+v; want False, AwaitingPromotion, naming %s", c, v2)
	}
	if e := waitEvent(t, ms, corev1.EventTypeNormal, "AwaitingPromotion"); !strings.Contains(e.Note, v1alpha1.AnnotationPromote+"="+v2) {
		t.Errorf("the AwaitingPromotion event should say how to promote: %q", e.Note)
	}
	consistently(t, holdFor, "holds before the last step", func() error {
		if p := getMS(t, ms).Status.Phase; p != v1alpha1.PhaseAwaitingPromotion || tr.current() != "50/50" {
			return fmt.Errorf("phase %s weights %s", p, tr.current())
		}
		return nil
	})

	// The promote annotation naming the candidate's revision promotes it and is cleared.
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		if ms.Annotations == nil {
			ms.Annotations = map[string]string{}
		}
		ms.Annotations[v1alpha1.AnnotationPromote] = v2
	})
	waitPromoted(t, ms, v1alpha1.Green, v2)
	tr.waitWeights(t, "0/100")
	eventually(t, 20*time.Second, "promote annotation cleared", func() error {
		if v, ok := getMS(t, ms).Annotations[v1alpha1.AnnotationPromote]; ok {
			return fmt.Errorf("annotation still %q", v)
		}
		return nil
	})
	if h := tr.history(); !slices.Equal(h, []string{"100/0", "80/20", "50/50", "0/100"}) {
		t.Errorf("route weights went %v; want 100/0, 80/20, 50/50, 0/100", h)
	}
	waitEvent(t, ms, corev1.EventTypeNormal, "Promoted")
	onceEach(t, ms, map[string]int32{"RolloutStarted": 1, "StepAdvanced": 2, "AwaitingPromotion": 1, "Promoted": 1})
}

func TestRolloutThroughAUserOwnedRouteChangesOnlyOurBackendWeights(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createUserRoute(t, ns)
	ms := newModelServer(ns, "byref", func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway = v1alpha1.GatewaySpec{RouteRef: &v1alpha1.RouteReference{Name: "shared", RuleName: ptr.To(gatewayv1.SectionName("llm"))}}
	})
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	waitPromoted(t, ms, v1alpha1.Green, v2)
	tr.waitWeights(t, "0/100")
	if h := tr.history(); !slices.Equal(h, []string{"100/0", "80/20", "50/50", "0/100"}) {
		t.Errorf("route weights went %v; want 100/0, 80/20, 50/50, 0/100", h)
	}
	waitEvent(t, ms, corev1.EventTypeNormal, "Promoted")
	onceEach(t, ms, map[string]int32{"RolloutStarted": 1, "StepAdvanced": 2, "Promoted": 1})

	// Every version of the route the rollout wrote kept the user's rule, filter and ownership.
	for _, r := range tr.all() {
		if len(r.Spec.Rules) != 2 {
			t.Fatalf("route version %s has %d rules: %+v", r.ResourceVersion, len(r.Spec.Rules), r.Spec.Rules)
		}
		docs, llm := r.Spec.Rules[0], r.Spec.Rules[1]
		if ptr.Deref(docs.Name, "") != "docs" || len(docs.BackendRefs) != 1 || docs.BackendRefs[0].Name != "legacy" || ptr.Deref(docs.BackendRefs[0].Weight, 0) != 1 || *docs.Matches[0].Path.Value != "/docs" {
			t.Errorf("route version %s changed the docs rule: %+v", r.ResourceVersion, docs)
		}
		if len(llm.Filters) != 1 || llm.Filters[0].RequestHeaderModifier == nil || llm.Filters[0].RequestHeaderModifier.Add[0].Value != "ml" {
			t.Errorf("route version %s lost the llm rule's filter: %+v", r.ResourceVersion, llm.Filters)
		}
		if n := len(llm.BackendRefs); n != 0 && n != 2 {
			t.Errorf("route version %s has %d backendRefs in the llm rule, want ours: blue and green", r.ResourceVersion, n)
		}
		if len(r.OwnerReferences) != 0 || len(r.Spec.ParentRefs) != 1 || r.Spec.ParentRefs[0].Name != "gw" {
			t.Errorf("route version %s: owners %v parentRefs %v", r.ResourceVersion, r.OwnerReferences, r.Spec.ParentRefs)
		}
	}
}

// freezeRouteUpdates makes the API server deny every update of HTTPRoutes in the namespace, as
// a Gateway implementation's admission webhook that is down or rejects the route would, until
// the returned function is called (or the test ends).
func freezeRouteUpdates(t *testing.T, ns string) (thaw func()) {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "freeze-routes-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{gatewayv1.GroupName}, APIVersions: []string{"*"}, Resources: []string{"httproutes"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "route updates are frozen by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns},
			}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
	}
	thawed := false
	thaw = func() {
		if thawed {
			return
		}
		thawed = true
		for _, o := range []client.Object{binding, policy} {
			if err := k8s.Delete(ctx, o); err != nil {
				t.Errorf("deleting %T: %v", o, err)
			}
		}
	}
	t.Cleanup(thaw)
	return thaw
}

// routeUpdatesDenied reports whether a (dry-run) update of the route is denied.
func routeUpdatesDenied(ns, name string) error {
	r, err := getRoute(ns, name)
	if err != nil {
		return err
	}
	r.Labels = map[string]string{"probe": "frozen"}
	if err := k8s.Update(context.Background(), r, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "frozen by the test") {
		return fmt.Errorf("route update not denied yet: %v", err)
	}
	return nil
}

func TestRolloutNeverReplacesCandidatePodsThatStillReceiveTraffic(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "inflight")
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)
	setImage(t, ms, imageV2)
	waitCandidate(t, ms, imageV2)
	inflight := tr.waitCandidateWeight(t, 20)

	// The route cannot be written for a while (the Gateway's webhook rejects it) when a newer
	// template supersedes the candidate that serves part of the traffic.
	thaw := freezeRouteUpdates(t, ns)
	eventually(t, 20*time.Second, "route updates denied", func() error { return routeUpdatesDenied(ns, ms.RouteName()) })
	weights := tr.current()
	setImage(t, ms, imageV3)
	eventually(t, 20*time.Second, "a pass of the new spec failed to move the route", func() error {
		got := getMS(t, ms)
		c := condition(got, v1alpha1.ConditionReconciling)
		if c == nil || c.Reason != v1alpha1.ReasonApplyFailed || c.ObservedGeneration != got.Generation || !strings.Contains(c.Message, "frozen by the test") {
			return fmt.Errorf("Reconciling %+v (generation %d)", c, got.Generation)
		}
		return nil
	})
	// Green still gets its share of the traffic, so its pods must keep running the revision that
	// was analysed for it: the new template waits until the route no longer sends traffic there.
	consistently(t, 2*time.Second, "green keeps the revision that serves its traffic", func() error {
		d, err := getDeployment(ns, "inflight-green")
		if err != nil {
			return err
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != imageV2 || tr.current() != weights {
			return fmt.Errorf("green runs %s while the route sends it traffic (%s, %s when frozen; %s when v3 arrived)", img, tr.current(), inflight, weights)
		}
		return nil
	})

	// Once the route can be written, traffic goes back to stable and v3 rolls out.
	thaw()
	v3 := waitCandidate(t, ms, imageV3)
	waitPromoted(t, ms, v1alpha1.Green, v3)
	h := tr.history()
	last := slices.Index(h[1:], "100/0") + 1
	if last < 2 || !slices.Equal(h[last:], []string{"100/0", "80/20", "50/50", "0/100"}) {
		t.Fatalf("route weights went %v; want the v2 climb, back to 100/0, then 80/20, 50/50, 0/100", h)
	}
}
