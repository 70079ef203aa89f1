package signals

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Cache runs each ModelServer's sources off the reconcile workers, as the controller runs an
// analysis measurement: a Prometheus or metrics API that hangs holds one goroutine of its own,
// bounded by the timeout, never a worker that other ModelServers wait for.
//
// Get starts a fetch unless one runs for the ModelServer or one ended that no pass took yet,
// waits up to the wait for the fetch it started (a healthy source answers within it, and the
// pass goes on as if the call were inline), and returns the fetch's result once. A pass that
// got no fresh result is given the last one, while it is younger than its maxAge; the fetch's
// end enqueues the ModelServer (wake), and that pass takes the result. A nil *Cache fetches
// inline (the tests that drive a reconcile by hand).
type Cache struct {
	base    context.Context // fetches outlive the pass that started them, not the manager
	wait    time.Duration
	timeout time.Duration
	wake    func(types.NamespacedName)

	mu      sync.Mutex
	entries map[types.NamespacedName]*fetches
}

// fetches is one ModelServer's: the fetch under way (nil when none), and the last result.
type fetches struct {
	running   *fetch
	last      *Result
	unclaimed bool // last ended after its pass stopped waiting, and no pass took it yet
}

type fetch struct {
	done    chan struct{}
	res     Result
	waiting int
}

// Result is what one fetch of a ModelServer's sources measured, and when.
type Result struct {
	Signals Signals
	// Err joins the sources' errors (for logs: the observations say what is missing).
	Err error
	// At is the instant the fetch measured.
	At time.Time
}

// NewCache returns a cache whose fetches run under base, each for at most timeout, a pass
// waiting up to wait for the fetch it starts; wake enqueues a ModelServer whose fetch ended
// after its pass stopped waiting.
func NewCache(base context.Context, wait, timeout time.Duration, wake func(types.NamespacedName)) *Cache {
	return &Cache{base: base, wait: max(wait, 0), timeout: timeout, wake: wake, entries: map[types.NamespacedName]*fetches{}}
}

// Get returns the signals of the ModelServer key measured by sources on t, as of now: a fetch's
// result, fresh or (while a fetch runs) the last one if it is younger than maxAge. ok is false
// when there is none: the caller decides nothing on signals this pass.
func (c *Cache) Get(ctx context.Context, key types.NamespacedName, sources []Source, t Target, now time.Time, maxAge time.Duration) (Result, bool) {
	if c == nil {
		s, err := Gather(ctx, sources, t, now)
		return Result{Signals: s, Err: err, At: now}, true
	}
	c.mu.Lock()
	e := c.entries[key]
	if e == nil {
		e = &fetches{}
		c.entries[key] = e
	}
	if e.unclaimed {
		// A fetch ended after its pass stopped waiting and woke this pass: take it.
		e.unclaimed = false
		defer c.mu.Unlock()
		return *e.last, true
	}
	f := e.running
	started := f == nil
	if started {
		f = &fetch{done: make(chan struct{})}
		e.running = f
		go c.run(key, e, f, sources, t, now)
	}
	wait := started && c.wait > 0
	if wait {
		f.waiting++
	}
	c.mu.Unlock()

	if wait {
		timer := time.NewTimer(c.wait)
		defer timer.Stop()
		select {
		case <-f.done:
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if wait {
		f.waiting--
	}
	select {
	case <-f.done:
		e.unclaimed = false
		return f.res, true
	default:
	}
	if e.last != nil && now.Sub(e.last.At) < maxAge {
		return *e.last, true
	}
	return Result{}, false
}

func (c *Cache) run(key types.NamespacedName, e *fetches, f *fetch, sources []Source, t Target, now time.Time) {
	ctx, cancel := context.WithTimeout(c.base, c.timeout)
	defer cancel()
	s, err := Gather(ctx, sources, t, now)
	c.mu.Lock()
	f.res = Result{Signals: s, Err: err, At: now}
	close(f.done)
	e.last, e.running = &f.res, nil
	current := c.entries[key] == e
	unclaimed := current && f.waiting == 0
	e.unclaimed = unclaimed
	c.mu.Unlock()
	// Wake a pass to take the result, unless the pass that waited took it already or the
	// ModelServer is gone.
	if unclaimed && c.wake != nil {
		c.wake(key)
	}
}

// Forget drops a ModelServer that is gone; a fetch under way ends unclaimed.
func (c *Cache) Forget(key types.NamespacedName) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}
