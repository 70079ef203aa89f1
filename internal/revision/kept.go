package revision

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kept returns the pod template a ControllerRevision keeps for revision rev of the ModelServer
// whose UID is owner, or why it is not that record. Anyone who may create ControllerRevisions
// in the namespace can create one under the expected name (<modelserver>-<revision>), so a
// record is trusted only when the ModelServer controls it (a controller ownerReference with its
// UID) and its data is a pod template whose revision (Of) is rev: what a rollback puts back is
// then the template that ran as rev.
func Kept(cr *appsv1.ControllerRevision, owner types.UID, rev string) (*corev1.PodTemplateSpec, error) {
	ref := metav1.GetControllerOf(cr)
	switch {
	case ref == nil:
		return nil, fmt.Errorf("ControllerRevision %s has no controller: it is not the ModelServer's record", cr.Name)
	case ref.UID != owner:
		return nil, fmt.Errorf("ControllerRevision %s is controlled by %s %s (uid %s), not by the ModelServer", cr.Name, ref.Kind, ref.Name, ref.UID)
	}
	var t corev1.PodTemplateSpec
	if err := json.Unmarshal(cr.Data.Raw, &t); err != nil {
		return nil, fmt.Errorf("ControllerRevision %s does not hold a pod template: %w", cr.Name, err)
	}
	if got := Of(&t); got != rev {
		return nil, fmt.Errorf("ControllerRevision %s holds the template of revision %s, not %s", cr.Name, got, rev)
	}
	return &t, nil
}
