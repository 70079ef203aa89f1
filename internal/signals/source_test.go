package signals

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/sample"
)

func autoscaled(metrics ...v1alpha1.AutoscalingMetric) *v1alpha1.ModelServer {
	return &v1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llama"},
		Spec:       v1alpha1.ModelServerSpec{Autoscaling: &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 8, Metrics: metrics}},
	}
}

func names(sources []Source) []string {
	var out []string
	for _, s := range sources {
		out = append(out, s.Name())
	}
	return out
}

// One builder turns a ModelServer's autoscaling spec into its sources: the built-in signals
// first, one source per custom metric in spec order, the latency SLOs when asked for; without
// Prometheus the built-in metrics are reported as errors, never as zero.
func TestSourcesOfAnAutoscalingSpec(t *testing.T) {
	ms := autoscaled(
		v1alpha1.AutoscalingMetric{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: 70}},
		v1alpha1.AutoscalingMetric{Prometheus: &v1alpha1.PrometheusMetric{Query: `sum(rate(x{namespace="{{.Namespace}}"}[1m]))`, Target: resource.MustParse("10"),
			LearnCapacity: &v1alpha1.CapacityLearning{TimeToFirstTokenP95: &v1alpha1.Duration{Duration: time.Second}}}},
		v1alpha1.AutoscalingMetric{Resource: &v1alpha1.ResourceMetric{Name: corev1.ResourceCPU, Target: 60}},
		v1alpha1.AutoscalingMetric{External: &v1alpha1.ExternalMetric{MetricName: "queue", Target: resource.MustParse("5")}},
	)
	q := &fakeQuerier{series: map[string][]sample.Series{}}
	with := Deps{Snapshots: NewSnapshotCache(q, DefaultQueries(), time.Minute), Prometheus: q, Policy: metrics.QueryPolicyAny}
	if got, want := names(with.Sources(ms)), []string{"builtin", "prometheus", "resource/cpu", "external/queue", "latency"}; !equal(got, want) {
		t.Errorf("sources with Prometheus %v, want %v", got, want)
	}
	without := Deps{}
	if got, want := names(without.Sources(ms)), []string{"prometheus", "resource/cpu", "external/queue", "unavailable"}; !equal(got, want) {
		t.Errorf("sources without Prometheus %v, want %v", got, want)
	}
	s, err := Gather(context.Background(), without.Sources(ms), Target{ModelServer: ms}, t0)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]autoscale.Observation{}
	for _, o := range s.Observations {
		byName[o.Metric] = o
	}
	if len(byName) != 4 {
		t.Fatalf("observations %+v, want one per metric", s.Observations)
	}
	for n, o := range byName {
		if o.Status != sample.Error {
			t.Errorf("%s: %s %q without Prometheus and metrics APIs, want Error", n, o.Status, o.Message)
		}
	}
	if s.RequestsWaiting.Status != sample.NoData || s.TTFTP95.Status != sample.NoData {
		t.Errorf("requests waiting %+v, ttft %+v: want NoData when nothing measured them", s.RequestsWaiting, s.TTFTP95)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// slowSource measures 42 after release is closed.
type slowSource struct {
	release chan struct{}
	calls   *atomic.Int32
}

func (slowSource) Name() string { return "slow" }

func (s slowSource) Fetch(ctx context.Context, _ Target, _ time.Time) (Signals, error) {
	s.calls.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
		return Signals{}, ctx.Err()
	}
	return one(autoscale.Observation{Metric: "slow", Status: sample.OK, Value: 42}), nil
}

// A source that hangs holds no reconcile: the pass that starts its fetch waits at most the
// cache's wait and decides nothing on signals; the fetch's end wakes the ModelServer, whose next
// pass takes the result without fetching again; while a later fetch runs, passes go on with the
// last result as long as it is younger than the age they accept.
func TestCacheRunsSourcesOffTheWorker(t *testing.T) {
	key := types.NamespacedName{Namespace: "ml", Name: "llama"}
	woken := make(chan types.NamespacedName, 4)
	c := NewCache(context.Background(), 10*time.Millisecond, time.Minute, func(k types.NamespacedName) { woken <- k })
	var calls atomic.Int32
	src := slowSource{release: make(chan struct{}), calls: &calls}
	tgt := Target{ModelServer: autoscaled()}

	if _, ok := c.Get(context.Background(), key, []Source{src}, tgt, t0, time.Minute); ok {
		t.Fatal("a pass got signals from a source that has not answered")
	}
	if _, ok := c.Get(context.Background(), key, []Source{src}, tgt, t0.Add(time.Second), time.Minute); ok {
		t.Fatal("a second pass got signals while the first fetch still runs")
	}
	close(src.release)
	select {
	case k := <-woken:
		if k != key {
			t.Fatalf("woke %v, want %v", k, key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch's end did not wake the ModelServer")
	}
	res, ok := c.Get(context.Background(), key, []Source{src}, tgt, t0.Add(2*time.Second), time.Minute)
	if !ok || len(res.Signals.Observations) != 1 || res.Signals.Observations[0].Value != 42 || !res.At.Equal(t0) {
		t.Fatalf("the woken pass got %+v (ok %v), want the fetch's 42 measured at t0", res, ok)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d fetches, want 1: the woken pass takes the result", n)
	}

	// The next pass fetches again; its fetch answers at once.
	res, ok = c.Get(context.Background(), key, []Source{src}, tgt, t0.Add(3*time.Second), time.Minute)
	if !ok || !res.At.Equal(t0.Add(3*time.Second)) {
		t.Errorf("a pass with a quick source got %+v (ok %v), want the fresh result", res, ok)
	}

	// A source that hangs again: the last result serves while it is young enough.
	hang := slowSource{release: make(chan struct{}), calls: &calls}
	defer close(hang.release)
	if res, ok := c.Get(context.Background(), key, []Source{hang}, tgt, t0.Add(4*time.Second), time.Minute); !ok || !res.At.Equal(t0.Add(3*time.Second)) {
		t.Errorf("while a fetch hangs, got %+v (ok %v), want the last result", res, ok)
	}
	if _, ok := c.Get(context.Background(), key, []Source{hang}, tgt, t0.Add(time.Hour), time.Minute); ok {
		t.Error("a result an hour old was served as current")
	}
}

// A nil cache fetches inline (the tests that drive a reconcile by hand).
func TestNilCacheFetchesInline(t *testing.T) {
	var c *Cache
	var calls atomic.Int32
	src := slowSource{release: make(chan struct{}), calls: &calls}
	close(src.release)
	res, ok := c.Get(context.Background(), types.NamespacedName{}, []Source{src}, Target{ModelServer: autoscaled()}, t0, time.Minute)
	if !ok || len(res.Signals.Observations) != 1 || !errors.Is(res.Err, nil) {
		t.Errorf("got %+v (ok %v)", res, ok)
	}
}
