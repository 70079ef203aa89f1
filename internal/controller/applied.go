package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// appliedMemory lets a pass that changes nothing write nothing: for each object modelship
// applies it remembers what it applied (a hash of the apply configuration) and the
// resourceVersion the API server answered. A pass skips the apply when it would apply the same
// configuration and the cached object is still the one that answer returned: nobody (a person, a
// Gateway writing status, the Deployment controller) has changed it since. Any change, or a
// restart (the memory is empty), applies again, and server-side apply fixes drift as before.
type appliedMemory struct {
	mu   sync.Mutex
	last map[appliedKey]appliedState
}

type appliedKey struct {
	gvk schema.GroupVersionKind
	key types.NamespacedName
}

type appliedState struct {
	hash, rv string
}

// hashOf is the digest of an apply configuration.
func hashOf(u map[string]any) (string, error) {
	b, err := json.Marshal(u)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// unchanged reports whether applying hash to the object now cached at resourceVersion rv would
// repeat the last apply.
func (m *appliedMemory) unchanged(k appliedKey, hash, rv string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.last[k]
	return ok && rv != "" && s.hash == hash && s.rv == rv
}

// record remembers an apply and the resourceVersion it returned.
func (m *appliedMemory) record(k appliedKey, hash, rv string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[appliedKey]appliedState{}
	}
	m.last[k] = appliedState{hash: hash, rv: rv}
}

// forget drops what was applied for a ModelServer's objects (it is gone).
func (m *appliedMemory) forget(ns string, names ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.last {
		if k.key.Namespace != ns {
			continue
		}
		for _, n := range names {
			if k.key.Name == n {
				delete(m.last, k)
			}
		}
	}
}

// absentMemory remembers the children that a live read found missing, by kind and name.
type absentMemory struct {
	mu   sync.Mutex
	keys map[types.NamespacedName]map[string]bool // by child, the kinds (Go types) found missing
}

func kindOf(o any) string { return fmt.Sprintf("%T", o) }

func (m *absentMemory) seen(key types.NamespacedName, o any) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keys[key][kindOf(o)]
}

func (m *absentMemory) mark(key types.NamespacedName, o any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil {
		m.keys = map[types.NamespacedName]map[string]bool{}
	}
	if m.keys[key] == nil {
		m.keys[key] = map[string]bool{}
	}
	m.keys[key][kindOf(o)] = true
}

// forget drops what was found missing among a ModelServer's children (it is gone).
func (m *absentMemory) forget(ns string, names ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range names {
		delete(m.keys, types.NamespacedName{Namespace: ns, Name: n})
	}
}
