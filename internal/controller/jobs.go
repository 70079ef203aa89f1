package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Slow I/O on a tenant's behalf (an analysis measurement's Prometheus queries here, warm-up
// probes of the pods in warm.go) runs off the reconcile workers, as Argo Rollouts runs its
// AnalysisRuns apart from the rollout: a blackholed Prometheus or a pod that accepts connections
// and never answers holds one goroutine of its own, never a worker that other ModelServers (and
// this one's abort) are waiting for.
const (
	// DefaultJobWait is how long a pass that starts a job (or warm-up probes) waits for it: a
	// healthy Prometheus answers a measurement within it, and the pass goes on with the result as
	// if the call were inline. A pass that finds the job already running does not wait at all.
	DefaultJobWait = time.Second
	// DefaultJobTimeout bounds a job (each query and probe has its own, shorter, timeout).
	DefaultJobTimeout = 2 * time.Minute
)

// jobs runs at most one job per object and kind (a measurement) in the background. Warm-up
// probes keep their outcome per pod instead (see warmth): a job's result is taken once, and a
// warm pod must stay warm on the passes after it.
//
// A pass asks for the job identified by id (what it measures: the candidate, step and last
// measurement): do starts it unless it runs or ended unclaimed, waits up to
// wait when it started it, and returns its result once. A pass that got no result returns; the
// job's end enqueues the object (wake), and that pass takes the result. A job whose id is no
// longer asked for (the rollout moved on, the spec changed) is dropped when another id is asked
// for. A nil *jobs runs every job inline (the tests that drive Reconcile by hand).
type jobs[T any] struct {
	base    context.Context // jobs outlive the pass that started them, not the manager
	wait    time.Duration
	timeout time.Duration
	wake    func(types.NamespacedName)

	mu      sync.Mutex
	entries map[jobKey]*job[T]
	// started is when each (object, kind) last started a job, for doPaced.
	started map[jobKey]time.Time
}

type jobKey struct {
	obj  types.NamespacedName
	kind string
}

type job[T any] struct {
	id      string
	done    chan struct{}
	val     T
	err     error
	waiting int // passes waiting for the result: they take it, no wake needed
}

func newJobs[T any](base context.Context, wait, timeout time.Duration, wake func(types.NamespacedName)) *jobs[T] {
	if wait < 0 {
		wait = 0
	}
	if timeout <= 0 {
		timeout = DefaultJobTimeout
	}
	return &jobs[T]{base: base, wait: wait, timeout: timeout, wake: wake, entries: map[jobKey]*job[T]{}, started: map[jobKey]time.Time{}}
}

// do returns the result of job (obj, kind, id) with ok true, or ok false while it runs.
func (j *jobs[T]) do(ctx context.Context, obj types.NamespacedName, kind, id string, run func(context.Context) (T, error)) (T, bool, error) {
	return j.doPaced(ctx, obj, kind, id, 0, run)
}

// doPaced is do that starts no new job of (obj, kind) within gap of the last one it started
// (ok false then): a pass that reads a status older than the one recording the last result
// (the cache lags a status write) asks again for the job it already took, and would call out
// again at once; an HTTP gate answering 503 would be called on every pass.
func (j *jobs[T]) doPaced(ctx context.Context, obj types.NamespacedName, kind, id string, gap time.Duration, run func(context.Context) (T, error)) (T, bool, error) {
	if j == nil {
		v, err := run(ctx)
		return v, true, err
	}
	k := jobKey{obj, kind}
	j.mu.Lock()
	e := j.entries[k]
	started := false
	if (e == nil || e.id != id) && gap > 0 && time.Since(j.started[k]) < gap {
		j.mu.Unlock()
		var zero T
		return zero, false, nil
	}
	if e == nil || e.id != id {
		j.started[k] = time.Now()
		e = &job[T]{id: id, done: make(chan struct{})}
		j.entries[k] = e
		started = true
		go j.run(k, e, run)
	}
	wait := started && j.wait > 0
	if wait {
		e.waiting++
	}
	j.mu.Unlock()

	if wait {
		t := time.NewTimer(j.wait)
		defer t.Stop()
		select {
		case <-e.done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if wait {
		e.waiting--
	}
	select {
	case <-e.done:
	default:
		var zero T
		return zero, false, nil
	}
	if j.entries[k] == e {
		delete(j.entries, k)
	}
	return e.val, true, e.err
}

func (j *jobs[T]) run(k jobKey, e *job[T], run func(context.Context) (T, error)) {
	ctx, cancel := context.WithTimeout(j.base, j.timeout)
	defer cancel()
	val, err := run(ctx)
	j.mu.Lock()
	e.val, e.err = val, err
	close(e.done)
	unclaimed := j.entries[k] == e && e.waiting == 0
	j.mu.Unlock()
	// Wake a pass to take the result, unless the pass that waited took it already or the job
	// was superseded. The object is enqueued, so a wake after its pass is never lost.
	if unclaimed && j.wake != nil {
		j.wake(k.obj)
	}
}

// forget drops an object's jobs (it was deleted); running ones end unclaimed.
func (j *jobs[T]) forget(obj types.NamespacedName) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for k := range j.entries {
		if k.obj == obj {
			delete(j.entries, k)
		}
	}
	for k := range j.started {
		if k.obj == obj {
			delete(j.started, k)
		}
	}
}
