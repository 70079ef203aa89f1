package dashboard

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Bounds of what the dashboard remembers per ModelServer since it started.
const (
	maxSamples      = 720
	maxMeasurements = 200
)

// store holds the ModelServers the watch delivered, what the charts and the timeline remember
// of them, and the pages listening for changes.
type store struct {
	mu           sync.Mutex
	objs         map[types.NamespacedName]*v1alpha1.ModelServer
	samples      map[types.NamespacedName][]Sample
	measurements map[types.NamespacedName][]Measurement
	subs         map[*subscriber]struct{}
}

// subscriber is one page's stream: the keys changed since it last wrote, and a wake-up.
type subscriber struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]bool
	wake    chan struct{}
}

func newStore() *store {
	return &store{
		objs:         map[types.NamespacedName]*v1alpha1.ModelServer{},
		samples:      map[types.NamespacedName][]Sample{},
		measurements: map[types.NamespacedName][]Measurement{},
		subs:         map[*subscriber]struct{}{},
	}
}

func keyOf(ms *v1alpha1.ModelServer) types.NamespacedName {
	return types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}
}

// upsert records ms (a watch event or a list item) at now.
func (s *store) upsert(ms *v1alpha1.ModelServer, now time.Time) {
	k := keyOf(ms)
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.objs[k]
	s.objs[k] = ms
	if old == nil || old.Generation != ms.Generation || !statusEqual(old, ms) {
		s.samples[k] = appendBounded(s.samples[k], SampleOf(ms, now), maxSamples)
	}
	s.recordMeasurements(k, ms)
	s.notify(k)
}

// recordMeasurements keeps each analysis result once (by metric and time), for the timeline.
func (s *store) recordMeasurements(k types.NamespacedName, ms *v1alpha1.ModelServer) {
	seen := s.measurements[k]
	for _, m := range MeasurementsOf(ms) {
		dup := false
		for i := len(seen) - 1; i >= 0 && i >= len(seen)-20; i-- {
			if seen[i].Metric == m.Metric && seen[i].At.Equal(m.At) && seen[i].Revision == m.Revision {
				dup = true
				break
			}
		}
		if !dup {
			seen = appendBounded(seen, m, maxMeasurements)
		}
	}
	s.measurements[k] = seen
}

func (s *store) remove(k types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objs, k)
	delete(s.samples, k)
	delete(s.measurements, k)
	s.notify(k)
}

// replace sets the whole fleet after a (re)list: objects missing from items are gone.
func (s *store) replace(items []v1alpha1.ModelServer, now time.Time) {
	present := map[types.NamespacedName]bool{}
	for i := range items {
		present[keyOf(&items[i])] = true
		s.upsert(&items[i], now)
	}
	s.mu.Lock()
	var gone []types.NamespacedName
	for k := range s.objs {
		if !present[k] {
			gone = append(gone, k)
		}
	}
	s.mu.Unlock()
	for _, k := range gone {
		s.remove(k)
	}
}

func (s *store) get(k types.NamespacedName) (*v1alpha1.ModelServer, []Sample, []Measurement) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := s.objs[k]
	if ms == nil {
		return nil, nil, nil
	}
	return ms, append([]Sample(nil), s.samples[k]...), append([]Measurement(nil), s.measurements[k]...)
}

func (s *store) rows() []Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Row, 0, len(s.objs))
	for _, ms := range s.objs {
		out = append(out, RowOf(ms))
	}
	sortRows(out)
	return out
}

func (s *store) subscribe() *subscriber {
	sub := &subscriber{pending: map[types.NamespacedName]bool{}, wake: make(chan struct{}, 1)}
	s.mu.Lock()
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	return sub
}

func (s *store) unsubscribe(sub *subscriber) {
	s.mu.Lock()
	delete(s.subs, sub)
	s.mu.Unlock()
}

// notify marks k changed for every page; called with s.mu held. It never blocks: a page that
// is behind gets the latest state of each changed key once.
func (s *store) notify(k types.NamespacedName) {
	for sub := range s.subs {
		sub.mu.Lock()
		sub.pending[k] = true
		sub.mu.Unlock()
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}

// drain returns the keys changed since the last call.
func (sub *subscriber) drain() []types.NamespacedName {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(sub.pending))
	for k := range sub.pending {
		out = append(out, k)
	}
	clear(sub.pending)
	return out
}

func statusEqual(a, b *v1alpha1.ModelServer) bool {
	return a.Status.Weights == b.Status.Weights && a.Status.Replicas == b.Status.Replicas &&
		a.Status.ReadyReplicas == b.Status.ReadyReplicas && colorEqual(a.Status.Stable, b.Status.Stable) &&
		colorEqual(a.Status.Candidate, b.Status.Candidate) && gpu(a) == gpu(b)
}

func colorEqual(a, b *v1alpha1.ColorStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Color == b.Color && a.Replicas == b.Replicas && a.ReadyReplicas == b.ReadyReplicas
}

func gpu(ms *v1alpha1.ModelServer) string { return RowOf(ms).GPUUtilization }

func appendBounded[T any](s []T, v T, limit int) []T {
	s = append(s, v)
	if len(s) > limit {
		s = append(s[:0:0], s[len(s)-limit:]...)
	}
	return s
}
