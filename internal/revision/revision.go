// Package revision names a ModelServer's template: a short, stable hash that changes when, and
// only when, what the pods run changes; and says which ControllerRevision truly keeps a
// revision's template (Kept).
package revision

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
)

// Of returns the revision of a pod template: 10 hex digits of an FNV-1a hash of its JSON form.
// JSON of a Go struct is deterministic (fields in order, map keys sorted).
func Of(t *corev1.PodTemplateSpec) string {
	b, err := json.Marshal(t)
	if err != nil {
		// A PodTemplateSpec always marshals; keep the signature simple and the hash defined.
		b = []byte(fmt.Sprintf("%#v", t))
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return fmt.Sprintf("%016x", h.Sum64())[:10]
}

// Image returns the image of the template's first container, for people.
func Image(t *corev1.PodTemplateSpec) string {
	if len(t.Spec.Containers) == 0 {
		return ""
	}
	return t.Spec.Containers[0].Image
}
