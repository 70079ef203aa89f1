package controller

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/notify"
	"github.com/modelship/modelship/internal/rollout"
	"github.com/modelship/modelship/internal/warmup"
)

// Rollout gates (spec.rollout.gates): the gates due at the rollout's step (rollout.GatesDue)
// that have not passed there are called off the reconcile workers, as measurements are (jobs):
// a call starts in a pass, which waits up to JobWait for it, and a call that ends later wakes
// the ModelServer. Each call is one job, identified by the revision, the step and the failures
// recorded so far: a recorded answer (pass or failure) starts the next call on a later pass,
// one analysis interval apart (the machine's requeue while it holds).

// GateRequest is the JSON body a gate receives.
type GateRequest struct {
	// ID identifies the call (the ModelServer's UID, the gate, the revision, the step and the
	// failures so far).
	ID          string            `json:"id"`
	Namespace   string            `json:"namespace"`
	ModelServer string            `json:"modelServer"`
	Gate        string            `json:"gate"`
	Type        v1alpha1.GateType `json:"type"`
	Revision    string            `json:"revision"`
	Step        int32             `json:"step"`
	// Weight is the candidate's weight now.
	Weight int32 `json:"weight"`
}

// callGates returns the answers of the gates due now that ended (started in this pass or an
// earlier one).
func (r *ModelServerReconciler) callGates(ctx context.Context, ms *v1alpha1.ModelServer, now time.Time) []rollout.GateResult {
	st := &ms.Status
	due := rollout.GatesDue(ms, st)
	if len(due) == 0 {
		return nil
	}
	key := client.ObjectKeyFromObject(ms)
	step := st.Rollout.Step
	var out []rollout.GateResult
	for _, g := range due {
		var failures int32
		if i := slices.IndexFunc(st.Rollout.Gates, func(x v1alpha1.GateStatus) bool { return x.Name == g.Name && x.Step == step }); i >= 0 {
			gs := st.Rollout.Gates[i]
			if gs.Passed || now.Before(rollout.GateCallAt(ms, gs)) {
				continue // passed, or asked again one analysis interval after its last failure
			}
			failures = gs.Failures
		}
		req := GateRequest{
			ID:        fmt.Sprintf("%s/%s/%s/%d/%d", ms.UID, g.Name, st.Candidate.Revision, step, failures),
			Namespace: ms.Namespace, ModelServer: ms.Name, Gate: g.Name, Type: g.Type,
			Revision: st.Candidate.Revision, Step: step, Weight: st.Weights.Candidate,
		}
		ref := g.URLSecretRef
		res, ok, _ := r.gateCalls.doPaced(ctx, key, "gate/"+g.Name, req.ID, rollout.AnalysisInterval(ms), func(ctx context.Context) (rollout.GateResult, error) {
			return r.callGate(ctx, key, ref, req), nil
		})
		if ok {
			out = append(out, res)
		}
	}
	return out
}

// callGate makes one call: the URL read from its Secret in the ModelServer's namespace, a POST
// of req with the notification client (timeout, no redirect followed), a 2xx answer passes.
func (r *ModelServerReconciler) callGate(ctx context.Context, key types.NamespacedName, ref v1alpha1.SecretKeyRef, req GateRequest) rollout.GateResult {
	res := rollout.GateResult{Name: req.Gate, Step: req.Step}
	reader := r.LiveReader
	if reader == nil {
		reader = r.Client
	}
	u, err := secretURL(reader)(ctx, key.Namespace, ref)
	if err == nil {
		err = notify.Post(ctx, r.gateClient(), u, req)
	}
	if err != nil {
		res.Message = err.Error()
		return res
	}
	res.Passed = true
	return res
}

func (r *ModelServerReconciler) gateClient() *http.Client {
	if r.Notifier != nil && r.Notifier.Client != nil {
		return r.Notifier.Client
	}
	return warmup.NewClient(notify.DefaultTimeout)
}

// gateCallTimeout bounds one gate call's job.
const gateCallTimeout = time.Minute
