package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// freshness answers the stale-cache problem: the status is the rollout's memory, and a pass
// that starts from a cached copy older than the controller's own last write decides from an
// earlier step and applies that step's weights and replicas (the e2e restart story once saw
// weights go back 25% -> 10%). It remembers the resourceVersion of the last write the
// controller made to each ModelServer (status, finalizer, annotations); a pass whose cached copy
// is older waits for the informer to deliver the newer one instead of acting. Reads stay on the
// informer cache: no GET per pass.
type freshness struct {
	mu      sync.Mutex
	written map[types.NamespacedName]write
}

// write is the object (its UID: a re-created ModelServer starts afresh) and the resourceVersion.
type write struct {
	uid types.UID
	rv  string
}

// wrote records the resourceVersion a write of the ModelServer returned.
func (f *freshness) wrote(key types.NamespacedName, uid types.UID, rv string) {
	if rv == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.written == nil {
		f.written = map[types.NamespacedName]write{}
	}
	if old, ok := f.written[key]; ok && old.uid == uid {
		if c, err := resourceversion.CompareResourceVersion(rv, old.rv); err == nil && c < 0 {
			return
		}
	}
	f.written[key] = write{uid: uid, rv: rv}
}

// stale reports whether a cached copy (uid at resourceVersion rv) is older than the
// controller's last write. Resource versions that cannot be compared never count as stale.
func (f *freshness) stale(key types.NamespacedName, uid types.UID, rv string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	last, ok := f.written[key]
	if !ok || last.uid != uid {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(rv, last.rv)
	return err == nil && c < 0
}

// forget drops a ModelServer that is gone.
func (f *freshness) forget(key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.written, key)
}
