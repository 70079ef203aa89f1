package signals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelship/modelship/internal/autoscale"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// fakeQuerier answers Vector from a table of query -> series, counting calls.
type fakeQuerier struct {
	mu     sync.Mutex
	series map[string][]metrics.Series
	fail   map[string]error
	calls  map[string]int
}

func (f *fakeQuerier) Scalar(context.Context, string, time.Time) metrics.Sample {
	return metrics.Sample{Status: metrics.Error, Message: "not used"}
}

func (f *fakeQuerier) Vector(_ context.Context, q string, _ time.Time) ([]metrics.Series, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[q]++
	if err := f.fail[q]; err != nil {
		return nil, err
	}
	return f.series[q], nil
}

func series(v float64, kv ...string) metrics.Series {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return metrics.Series{Labels: l, Value: v}
}

func pod(ns, name string) autoscale.PodKey { return autoscale.PodKey{Namespace: ns, Name: name} }

func TestSnapshotObserve(t *testing.T) {
	q := &fakeQuerier{series: map[string][]metrics.Series{
		QueryGPUUtilization: {
			// exported_* labels win over the exporter's own pod/namespace.
			series(90, "namespace", "gpu-operator", "pod", "dcgm-exporter-x", "exported_namespace", "ml", "exported_pod", "llama-a"),
			series(70, "namespace", "gpu-operator", "pod", "dcgm-exporter-x", "exported_namespace", "ml", "exported_pod", "llama-b"),
			// honorLabels style: pod/namespace are the workload's.
			series(50, "namespace", "ml", "pod", "llama-c"),
			// Scraped with a namespace target label but no pod one: only namespace collided,
			// so the workload's namespace is exported_namespace and its pod is pod.
			series(30, "namespace", "gpu-operator", "exported_namespace", "ml", "pod", "llama-d"),
			// a pod of another ModelServer, a deleted pod, a GPU with no pod.
			series(5, "namespace", "ml", "pod", "other-a"),
			series(0, "namespace", "ml", "pod", "llama-deleted"),
			series(1, "namespace", "gpu-operator", "pod", "dcgm-exporter-x"),
		},
		QueryRequestsWaiting: {
			series(3, "namespace", "ml", "pod", "llama-a"),
			series(4, "namespace", "ml", "pod", "llama-b"),
			series(100, "namespace", "ml", "pod", "llama-deleted"),
			series(9, "namespace", "other", "pod", "llama-c"),
		},
	}, fail: map[string]error{QueryKVCacheUsage: errors.New("connection refused")}}
	snap, err := Fetch(context.Background(), q, DefaultQueries(), t0)
	if err == nil || !strings.Contains(err.Error(), "kvCacheUsage") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Fetch error = %v, want the failed kvCacheUsage query wrapped", err)
	}
	ready := []autoscale.PodKey{pod("ml", "llama-a"), pod("ml", "llama-b"), pod("ml", "llama-c")}

	cases := []struct {
		name  string
		spec  v1alpha1.AutoscalingSpec
		ready []autoscale.PodKey
		want  []autoscale.Observation
	}{
		{
			name:  "averages GPU utilization over the Ready pods only, ignoring other and deleted pods",
			spec:  newSpec(1, 10, withGPU(70)),
			ready: ready,
			want:  []autoscale.Observation{{Metric: autoscale.MetricGPUUtilization, Status: metrics.OK, Value: 70, Pods: 3}},
		},
		{
			name:  "observes the default GPU utilization metric when the spec lists none",
			spec:  newSpec(1, 10),
			ready: ready[:2],
			want:  []autoscale.Observation{{Metric: autoscale.MetricGPUUtilization, Status: metrics.OK, Value: 80, Pods: 2}},
		},
		{
			name:  "sums the queue of the Ready pods in the ModelServer's namespace and counts pods without a series",
			spec:  newSpec(1, 10, withWaiting(5)),
			ready: ready,
			want:  []autoscale.Observation{{Metric: autoscale.MetricRequestsWaiting, Status: metrics.OK, Value: 7, Pods: 2, MissingPods: 1}},
		},
		{
			name:  "reports a failed query as an error, not as zero",
			spec:  newSpec(1, 10, withKV("0.8")),
			ready: ready,
			want:  []autoscale.Observation{{Metric: autoscale.MetricKVCacheUsage, Status: metrics.Error}},
		},
		{
			name:  "files a GPU under exported_namespace when the exporter was scraped with a namespace but no pod target label",
			spec:  newSpec(1, 10, withGPU(70)),
			ready: []autoscale.PodKey{pod("ml", "llama-d")},
			want:  []autoscale.Observation{{Metric: autoscale.MetricGPUUtilization, Status: metrics.OK, Value: 30, Pods: 1}},
		},
		{
			name:  "has no data when none of the Ready pods has a series",
			spec:  newSpec(1, 10, withGPU(70)),
			ready: []autoscale.PodKey{pod("ml", "llama-new")},
			want:  []autoscale.Observation{{Metric: autoscale.MetricGPUUtilization, Status: metrics.NoData}},
		},
		{
			name:  "has no data without Ready pods",
			spec:  newSpec(1, 10, withGPU(70), withWaiting(5)),
			ready: nil,
			want:  []autoscale.Observation{{Metric: autoscale.MetricGPUUtilization, Status: metrics.NoData}, {Metric: autoscale.MetricRequestsWaiting, Status: metrics.NoData}},
		},
		{
			name: "leaves custom metrics to the controller",
			spec: func() v1alpha1.AutoscalingSpec {
				s := newSpec(1, 10, withGPU(70))
				s.Metrics = append(s.Metrics, v1alpha1.AutoscalingMetric{Prometheus: &v1alpha1.PrometheusMetric{Query: "x"}})
				return s
			}(),
			ready: ready,
			want:  []autoscale.Observation{{Metric: autoscale.MetricGPUUtilization, Status: metrics.OK, Value: 70, Pods: 3}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := snap.Observe(tc.spec, tc.ready)
			if len(got) != len(tc.want) {
				t.Fatalf("Observe = %+v, want %+v", got, tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Metric != w.Metric || g.Status != w.Status || g.Pods != w.Pods || g.MissingPods != w.MissingPods || (w.Status == metrics.OK && g.Value != w.Value) {
					t.Errorf("observation %d = %+v, want %+v", i, g, w)
				}
				if w.Status != metrics.OK && g.Message == "" {
					t.Errorf("observation %d has no message saying why there is no data", i)
				}
			}
		})
	}
}

func TestSnapshotCacheRefreshesAtMostOncePerInterval(t *testing.T) {
	q := &fakeQuerier{series: map[string][]metrics.Series{}}
	c := NewSnapshotCache(q, DefaultQueries(), 15*time.Second)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Get(ctx, t0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, at := range []time.Duration{time.Second, 14 * time.Second} {
		s, _ := c.Get(ctx, t0.Add(at))
		if !s.At.Equal(t0) {
			t.Errorf("at +%s the snapshot is from %v, want the cached one", at, s.At)
		}
	}
	if n := q.calls[QueryGPUUtilization]; n != 1 {
		t.Errorf("GPU query ran %d times within one interval, want 1", n)
	}
	s, _ := c.Get(ctx, t0.Add(15*time.Second))
	if !s.At.Equal(t0.Add(15*time.Second)) || q.calls[QueryGPUUtilization] != 2 {
		t.Errorf("after the interval: snapshot at %v, %d queries; want a refresh", s.At, q.calls[QueryGPUUtilization])
	}
}

func TestSnapshotCacheDoesNotRetryAFailureWithinTheInterval(t *testing.T) {
	q := &fakeQuerier{fail: map[string]error{QueryGPUUtilization: errors.New("timeout")}}
	c := NewSnapshotCache(q, Queries{GPUUtilization: QueryGPUUtilization}, 15*time.Second)
	for i := 0; i < 3; i++ {
		s, err := c.Get(context.Background(), t0.Add(time.Duration(i)*time.Second))
		if err == nil || s == nil {
			t.Fatalf("Get = %v, %v; want a snapshot and the error", s, err)
		}
		if o := s.Observe(newSpec(1, 2), []autoscale.PodKey{pod("a", "b")}); o[0].Status != metrics.Error {
			t.Errorf("observation = %+v, want Error", o[0])
		}
	}
	if q.calls[QueryGPUUtilization] != 1 {
		t.Errorf("failed query ran %d times within one interval, want 1", q.calls[QueryGPUUtilization])
	}
}

// BenchmarkSnapshotObserve maps a thousand ModelServers of 4 Ready pods each from one snapshot.
func BenchmarkSnapshotObserve(b *testing.B) {
	const servers, perServer = 1000, 4
	q := &fakeQuerier{series: map[string][]metrics.Series{}}
	ready := make([][]autoscale.PodKey, servers)
	for s := 0; s < servers; s++ {
		ns := fmt.Sprintf("team-%d", s%50)
		for p := 0; p < perServer; p++ {
			name := fmt.Sprintf("ms-%d-%d", s, p)
			ready[s] = append(ready[s], pod(ns, name))
			q.series[QueryGPUUtilization] = append(q.series[QueryGPUUtilization], series(float64(p*20), "namespace", "gpu-operator", "pod", "dcgm", "exported_namespace", ns, "exported_pod", name))
			q.series[QueryRequestsWaiting] = append(q.series[QueryRequestsWaiting], series(float64(p), "namespace", ns, "pod", name))
			q.series[QueryKVCacheUsage] = append(q.series[QueryKVCacheUsage], series(0.5, "namespace", ns, "pod", name))
		}
	}
	snap, err := Fetch(context.Background(), q, DefaultQueries(), t0)
	if err != nil {
		b.Fatal(err)
	}
	spec := newSpec(1, 10, withGPU(70), withWaiting(5), withKV("0.8"))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for s := 0; s < servers; s++ {
			if o := snap.Observe(spec, ready[s]); len(o) != 3 || o[0].Status != metrics.OK {
				b.Fatalf("server %d: %+v", s, o)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*servers), "ns/modelserver")
}

// blockingQuerier answers after release is closed.
type blockingQuerier struct {
	fakeQuerier
	release chan struct{}
}

func (b *blockingQuerier) Vector(ctx context.Context, q string, at time.Time) ([]metrics.Series, error) {
	<-b.release
	return b.fakeQuerier.Vector(ctx, q, at)
}

func TestSnapshotCacheServesThePreviousSnapshotWhileASlowRefreshRuns(t *testing.T) {
	q := &blockingQuerier{fakeQuerier: fakeQuerier{series: map[string][]metrics.Series{}}, release: make(chan struct{})}
	close(q.release)
	c := NewSnapshotCache(q, DefaultQueries(), 15*time.Second)
	ctx := context.Background()
	if _, err := c.Get(ctx, t0); err != nil {
		t.Fatal(err)
	}
	q.release = make(chan struct{}) // Prometheus hangs from now on
	refreshing := make(chan struct{})
	go func() {
		defer close(refreshing)
		_, _ = c.Get(ctx, t0.Add(20*time.Second)) // stale: this caller refreshes and hangs
	}()
	// Another reconcile meanwhile gets the previous snapshot at once instead of waiting.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		started := c.fetching != nil
		c.mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the refresh never started")
		}
		time.Sleep(time.Millisecond)
	}
	got := make(chan *autoscale.Snapshot, 1)
	go func() { s, _ := c.Get(ctx, t0.Add(21*time.Second)); got <- s }()
	select {
	case s := <-got:
		if !s.At.Equal(t0) {
			t.Errorf("got the snapshot of %v, want the previous one of %v", s.At, t0)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a reconcile waited on the slow refresh although a previous snapshot existed")
	}
	close(q.release)
	<-refreshing
	if s, _ := c.Get(ctx, t0.Add(22*time.Second)); !s.At.Equal(t0.Add(20 * time.Second)) {
		t.Errorf("after the refresh the snapshot is of %v, want the refreshed one", s.At)
	}
}

// A cluster without InferencePools does not query the endpoint picker's signals.
func TestSnapshotCacheSkipsTheEndpointPickerWhenAsked(t *testing.T) {
	q := &fakeQuerier{series: map[string][]metrics.Series{}}
	c := NewSnapshotCache(q, DefaultQueries(), 15*time.Second)
	c.SkipEndpointPicker()
	if _, err := c.Get(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	for _, query := range []string{QueryPoolQueueSize, QueryPoolSaturation, QueryObjectiveRunning} {
		if n := q.calls[query]; n != 0 {
			t.Errorf("%s queried %d times", query, n)
		}
	}
	if n := q.calls[QueryGPUUtilization]; n != 1 {
		t.Errorf("GPU utilization queried %d times, want 1", n)
	}
}
