package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// wakes records the objects a job's end enqueued.
type wakes struct {
	mu  sync.Mutex
	got []types.NamespacedName
	ch  chan types.NamespacedName
}

func newWakes() *wakes { return &wakes{ch: make(chan types.NamespacedName, 16)} }

func (w *wakes) wake(k types.NamespacedName) {
	w.mu.Lock()
	w.got = append(w.got, k)
	w.mu.Unlock()
	w.ch <- k
}

func (w *wakes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.got)
}

var objA = types.NamespacedName{Namespace: "ns", Name: "a"}

func TestJobsAFastJobIsAnsweredInTheSamePassWithoutAWake(t *testing.T) {
	w := newWakes()
	j := newJobs[int](context.Background(), time.Minute, time.Minute, w.wake)
	v, ok, err := j.do(context.Background(), objA, "m", "1", func(context.Context) (int, error) { return 7, nil })
	if !ok || err != nil || v != 7 {
		t.Fatalf("do = %d, %v, %v; want 7 in the same pass", v, err, ok)
	}
	if n := w.count(); n != 0 {
		t.Errorf("%d wakes for a result the pass took, want 0", n)
	}
	if len(j.entries) != 0 {
		t.Errorf("a taken result is kept: %v", j.entries)
	}
}

// A job that outlasts the wait leaves the pass (and its worker) free: the pass gets no result,
// later passes do not start it again nor wait for it, and its end enqueues the object, whose
// next pass takes the result once.
func TestJobsASlowJobFreesThePassAndWakesTheObject(t *testing.T) {
	w := newWakes()
	j := newJobs[int](context.Background(), 10*time.Millisecond, time.Minute, w.wake)
	release := make(chan struct{})
	var runs atomic.Int32
	slow := func(context.Context) (int, error) {
		runs.Add(1)
		<-release // ignores its context, as a hung call might
		return 42, nil
	}
	if _, ok, _ := j.do(context.Background(), objA, "m", "1", slow); ok {
		t.Fatal("a pass got a result from a job that is still running")
	}
	for range 3 {
		if _, ok, _ := j.do(context.Background(), objA, "m", "1", slow); ok {
			t.Fatal("a later pass got a result from a job that is still running")
		}
	}
	close(release)
	if k := <-w.ch; k != objA {
		t.Fatalf("woke %v, want %v", k, objA)
	}
	v, ok, err := j.do(context.Background(), objA, "m", "1", slow)
	if !ok || err != nil || v != 42 {
		t.Fatalf("the pass after the wake got %d, %v, %v; want 42", v, err, ok)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the job ran %d times, want once", n)
	}
}

// A job whose id is no longer asked for (the rollout moved on) is dropped: its end wakes no one
// and its result is never returned for the new id.
func TestJobsASupersededJobIsDropped(t *testing.T) {
	w := newWakes()
	j := newJobs[string](context.Background(), 10*time.Millisecond, time.Minute, w.wake)
	release := make(chan struct{})
	old := func(context.Context) (string, error) { <-release; return "old", nil }
	if _, ok, _ := j.do(context.Background(), objA, "m", "step-1", old); ok {
		t.Fatal("unexpected result")
	}
	v, ok, _ := j.do(context.Background(), objA, "m", "step-2", func(context.Context) (string, error) { return "new", nil })
	if !ok || v != "new" {
		t.Fatalf("the new id got %q, %v; want new", v, ok)
	}
	close(release)
	select {
	case k := <-w.ch:
		t.Fatalf("the superseded job woke %v", k)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestJobsKeepKindsAndObjectsApartAndForget(t *testing.T) {
	w := newWakes()
	j := newJobs[int](context.Background(), 0, time.Minute, w.wake)
	objB := types.NamespacedName{Namespace: "ns", Name: "b"}
	for _, c := range []struct {
		obj  types.NamespacedName
		kind string
		v    int
	}{{objA, "measurement", 1}, {objA, "warmup", 2}, {objB, "measurement", 3}} {
		if _, ok, _ := j.do(context.Background(), c.obj, c.kind, "x", func(context.Context) (int, error) { return c.v, nil }); ok {
			t.Fatal("a pass that does not wait got a result at once")
		}
	}
	for range 3 {
		<-w.ch
	}
	j.forget(objA)
	if v, ok, _ := j.do(context.Background(), objB, "measurement", "x", nil); !ok || v != 3 {
		t.Fatalf("b's measurement = %d, %v; want 3", v, ok)
	}
	errBoom := errors.New("boom")
	// objA's results were forgotten: the same id runs again.
	j2 := newJobs[int](context.Background(), time.Minute, time.Minute, nil)
	if _, ok, err := j2.do(context.Background(), objA, "warmup", "x", func(context.Context) (int, error) { return 0, errBoom }); !ok || !errors.Is(err, errBoom) {
		t.Fatalf("an error is not returned: %v, %v", err, ok)
	}
	if len(j.entries) != 0 {
		t.Errorf("entries left after taking and forgetting: %v", j.entries)
	}
}

// A job's context ends at its timeout, so a call that honours it cannot run forever.
func TestJobsTimeOut(t *testing.T) {
	w := newWakes()
	j := newJobs[error](context.Background(), time.Minute, 20*time.Millisecond, w.wake)
	v, ok, _ := j.do(context.Background(), objA, "m", "1", func(ctx context.Context) (error, error) {
		<-ctx.Done()
		return ctx.Err(), nil
	})
	if !ok || !errors.Is(v, context.DeadlineExceeded) {
		t.Fatalf("do = %v, %v; want the job's deadline", v, ok)
	}
}

// Without jobs (a reconciler driven by hand in tests) the call runs inline.
func TestJobsNilRunsInline(t *testing.T) {
	var j *jobs[int]
	v, ok, _ := j.do(context.Background(), objA, "m", "1", func(context.Context) (int, error) { return 5, nil })
	if !ok || v != 5 {
		t.Fatalf("do = %d, %v", v, ok)
	}
	j.forget(objA)
}

// A paced job is not started again within its gap, even for the id whose result was already
// taken (a pass reading a status older than the one that recorded it asks for it again): a gate
// that answers 503 is called once per gap, not once per pass. Results of a job already running
// are still returned within the gap, and after the gap the next call starts.
func TestJobsPacedStartNoNewJobWithinTheGap(t *testing.T) {
	j := newJobs[int](context.Background(), time.Second, time.Minute, nil)
	var calls atomic.Int32
	call := func(context.Context) (int, error) { return int(calls.Add(1)), nil }
	const gap = 200 * time.Millisecond
	if v, ok, _ := j.doPaced(context.Background(), objA, "gate", "fail-0", gap, call); !ok || v != 1 {
		t.Fatalf("first call: %d, %v", v, ok)
	}
	// A stale pass asks again for the id it took, then a fresh one for the next id: no call.
	for _, id := range []string{"fail-0", "fail-1"} {
		if _, ok, _ := j.doPaced(context.Background(), objA, "gate", id, gap, call); ok {
			t.Fatalf("id %s answered within the gap", id)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls within the gap, want 1", n)
	}
	time.Sleep(gap)
	if v, ok, _ := j.doPaced(context.Background(), objA, "gate", "fail-1", gap, call); !ok || v != 2 {
		t.Fatalf("after the gap: %d, %v; want the second call", v, ok)
	}
}
