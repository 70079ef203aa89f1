// Package health is the contract between a ModelServer's status and the tools that read it:
// kstatus (kubectl wait, Flux, cli-utils), the Argo CD health check in config/argocd/health.lua
// and `kubectl modelship wait`. It is pure: no client, no clock.
//
// The controller sets these kstatus conditions in each phase (reasons in parentheses are
// examples; the status values are the contract; package plan sets them, and its
// PhaseConditions gives each row as conditions, for tests):
//
//	Phase              Ready              Reconciling                    Stalled            kstatus     Argo CD      wait
//	Pending            False              True  (DeploymentsNotReady)    False              InProgress  Progressing  waits
//	Progressing        False              True  (RolloutInProgress,      False              InProgress  Progressing  waits
//	                                             WarmingUp, Analyzing,
//	                                             Inconclusive, CandidateUnready,
//	                                             RouteNotAccepted)
//	Progressing, stalled  False           False (AnalysisInconclusive)   True (AnalysisInconclusive)  Failed  Degraded  exit 1
//	Paused             False              False (Paused)                 False              InProgress  Suspended    exit 3
//	AwaitingPromotion  False              False (AwaitingPromotion)      False              InProgress  Suspended    exit 3
//	Healthy            True  (Available)  False (Reconciled)             False              Current     Healthy      exit 0
//	Healthy, scaling   False (DeploymentsNotReady) True                  False              InProgress  Progressing  exit 0
//	Healthy, at zero   False (NoReplicaForLoad) False                    False              InProgress  Progressing  exit 0
//	  replicas with requests waiting, or with no metric that shows none wait (autoscaled only)
//	RolledBack         False (RolledBack) False (RolledBack)             True (RolledBack)  Failed      Degraded     exit 1
//	Degraded           False              True  (DeploymentsNotReady)    False              InProgress  Degraded     waits
//
// In any phase, a spec that cannot run (ReasonInvalidSpec) sets Stalled True and Reconciling
// False: kstatus Failed, Argo CD Degraded, wait exit 1.
//
// Rules behind the table:
//   - Ready is True only when the spec's revision serves all traffic and is available (Healthy).
//   - Reconciling is True while the controller itself moves things (pods coming up, weights
//     shifting). A rollout held for a person (Paused, AwaitingPromotion) is not Reconciling but
//     not Ready either, so kstatus reads it InProgress through Ready=False.
//   - Stalled is True only when retrying will not help until the spec changes (RolledBack,
//     InvalidSpec), or when a rollout has held on inconclusive analysis for longer than the
//     stall deadline (AnalysisInconclusive, phase still Progressing): it cannot move without
//     metrics or a person, and says why. It clears by itself when a verdict returns. Reconciling and Stalled are never both True: kstatus takes whichever comes
//     first in the list.
//   - status.observedGeneration is written on every pass; while it is below metadata.generation
//     every reader treats the status as stale (kstatus InProgress, Argo CD Progressing, wait waits).
//   - All three conditions are written from the first pass on: kstatus reads an object with no
//     conditions at all as Current.
package health

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Result is what `kubectl modelship wait` makes of a ModelServer.
type Result struct {
	// Done is true when waiting longer would not change the outcome without a person or a new spec.
	Done bool
	// Code is the exit code when Done: 0 Healthy, 1 rolled back or stalled, 3 waiting for a person.
	Code int
	// Message says why, for people.
	Message string
}

// Exit codes of Assess's Results.
const (
	// CodeHealthy: the current generation's rollout finished and the spec's revision serves.
	CodeHealthy = 0
	// CodeFailed: the current generation was rolled back, or the ModelServer is stalled.
	CodeFailed = 1
	// CodeNeedsHuman: the rollout is paused or awaits a promotion.
	CodeNeedsHuman = 3
)

// Assess says whether the rollout of the ModelServer's current generation is finished and how.
// A status older than metadata.generation is never final.
func Assess(ms *v1alpha1.ModelServer) Result {
	st := ms.Status
	if st.ObservedGeneration < ms.Generation {
		return Result{Message: fmt.Sprintf("waiting for the controller to observe generation %d (observed %d)",
			ms.Generation, st.ObservedGeneration)}
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return Result{Done: true, Code: CodeFailed, Message: fmt.Sprintf("stalled (%s): %s", c.Reason, c.Message)}
	}
	switch st.Phase {
	case v1alpha1.PhaseHealthy:
		return Result{Done: true, Code: CodeHealthy, Message: fmt.Sprintf("healthy: revision %s serves all traffic", st.Revision)}
	case v1alpha1.PhaseRolledBack:
		return Result{Done: true, Code: CodeFailed, Message: fmt.Sprintf("rolled back: revision %s failed, the stable revision serves all traffic",
			orUnknown(st.Rollout.RolledBackRevision, st.Revision))}
	case v1alpha1.PhaseAwaitingPromotion:
		return Result{Done: true, Code: CodeNeedsHuman, Message: "awaiting promotion: run `kubectl modelship promote " + ms.Name + "` or abort"}
	case v1alpha1.PhasePaused:
		return Result{Done: true, Code: CodeNeedsHuman, Message: "paused: run `kubectl modelship resume " + ms.Name + "` to go on"}
	case "":
		return Result{Message: "waiting for the controller to write a status"}
	}
	return Result{Message: fmt.Sprintf("phase %s", st.Phase)}
}

func orUnknown(s, fallback string) string {
	if s != "" {
		return s
	}
	return fallback
}
