package controller

import (
	"context"
	"errors"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/revision"
	"github.com/modelship/modelship/internal/workload"
)

// templateVerdicts remembers, for each ModelServer, the last template revision the API server
// judged (a dry run of its Deployment) and its refusal, "" when it accepted it, so that a
// template is sent once per revision and not on every pass.
type templateVerdicts struct {
	mu   sync.Mutex
	last map[types.NamespacedName]templateVerdict
}

type templateVerdict struct{ revision, refusal string }

func (m *templateVerdicts) get(k types.NamespacedName, rev string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.last[k]
	return v.refusal, ok && v.revision == rev
}

func (m *templateVerdicts) set(k types.NamespacedName, rev, refusal string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[types.NamespacedName]templateVerdict{}
	}
	m.last[k] = templateVerdict{revision: rev, refusal: refusal}
}

func (m *templateVerdicts) forget(k types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, k)
}

// templateRefusal asks the API server, with a dry run that creates nothing, whether it would
// take a Deployment of the spec's template as modelship makes it, once for each new revision of
// the template. It returns the refusal naming the fields ("" when the template is accepted): a
// template that CEL cannot fully check at admission (an upper-case container name past the
// first containers, duplicate container names, a bad volume) is reported at once, before
// anything is applied, instead of failing the apply on every pass. Only a refusal of the object
// itself (Invalid) counts: another error (a quota on the number of Deployments, a webhook that
// cannot dry-run, a timeout) lets the pass go on, and the apply reports whatever is real.
func (r *ModelServerReconciler) templateRefusal(ctx context.Context, ms *v1alpha1.ModelServer) string {
	key := client.ObjectKeyFromObject(ms)
	rev := revision.Of(&ms.Spec.Template)
	if refusal, ok := r.templates.get(key, rev); ok {
		return refusal
	}
	d := workload.Deployment(ms, v1alpha1.Blue, rev, 0, ms.Spec.Rollout.Warmup != nil)
	d.GenerateName, d.Name = ms.DeploymentName(v1alpha1.Blue)+"-", ""
	refusal := ""
	err := r.Create(ctx, d, client.DryRunAll)
	var status apierrors.APIStatus
	switch {
	case err == nil:
	case apierrors.IsInvalid(err) && errors.As(err, &status):
		refusal = "spec.template is refused by the Deployment API: " + causes(status)
	default:
		ctrl.LoggerFrom(ctx).V(1).Info("Dry run of the template's Deployment failed; going on", "revision", rev, "error", err.Error())
	}
	r.templates.set(key, rev, refusal)
	return refusal
}

// causes lists an Invalid error's causes as "field: what is wrong"; the Deployment's fields
// under spec.template are the ModelServer's own paths.
func causes(status apierrors.APIStatus) string {
	s := status.Status()
	if s.Details == nil || len(s.Details.Causes) == 0 {
		return s.Message
	}
	parts := make([]string, 0, len(s.Details.Causes))
	for _, c := range s.Details.Causes {
		if c.Field == "" {
			parts = append(parts, c.Message)
			continue
		}
		parts = append(parts, c.Field+": "+c.Message)
	}
	return strings.Join(parts, "; ")
}
