// Package rollout is the blue/green progressive delivery state machine of modelship. It is pure:
// Next takes the spec, the last status, what the controller observed and the clock, and returns
// the next status, what each color's Deployment should run, the route weights, events and when
// to look again. No I/O, no goroutines, no package-level clock.
package rollout

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// ColorObservation is what the controller saw of one color's Deployment.
type ColorObservation struct {
	// Exists is false when the Deployment has not been created yet.
	Exists bool
	// Revision is the revision label of the Deployment's template.
	Revision string
	// Image of the first container.
	Image string
	// Replicas is the Deployment's spec.replicas.
	Replicas int32
	// ReadyReplicas / AvailableReplicas / UpdatedReplicas from the Deployment's status, counted
	// only when status.observedGeneration matches the Deployment's generation (else zero).
	ReadyReplicas     int32
	AvailableReplicas int32
	UpdatedReplicas   int32
	// Warm is true when every pod of this color whose containers are ready passed the warm-up
	// check (or none is asked). With the warm-up readiness gate on its pods, only those are
	// Ready: ReadyReplicas counts warm pods.
	Warm bool
	// WarmPods is how many pods whose containers are ready passed the warm-up check (the Ready
	// ones when none is asked); 0 when not counted. It lets a step be measured as soon as the
	// pods that serve its weight carry no more per pod than the stable color's, before the pods
	// pre-scaled for the next step have loaded (see markSized).
	WarmPods int32
	// Stale is true when the Deployment's status is older than its spec (status.observedGeneration
	// behind metadata.generation, as just after a scale): the counts above are then zero, which
	// is no news rather than "no pods", so Next keeps the Ready count of its last pass.
	Stale bool
	// EndpointsObserved is true when the color's Service has EndpointSlices: ReadyEndpoints is
	// then how many ready endpoints they list (what a Gateway routes the color's share to; with
	// none, Traefik answers that share with HTTP 503). The weight cap counts the smaller of the
	// Ready pods and the ready endpoints, so that no weight goes to a color whose endpoints are
	// not ready yet. False (no slice: no EndpointSlice controller, as in envtest, or not written
	// yet; a Gateway then reports ResolvedRefs False, which holds the rollout) counts the pods.
	EndpointsObserved bool
	ReadyEndpoints    int32
}

// Operation is a human's request, read from the operation annotations and already matched to
// the candidate revision (a request naming another revision never reaches Next).
type Operation string

const (
	// OpNone means: nothing asked.
	OpNone Operation = ""
	// OpPromote means: go to the next step now, whatever the analysis or step timer says.
	OpPromote Operation = "Promote"
	// OpPromoteFull means: promote the candidate now, skipping the remaining steps.
	OpPromoteFull Operation = "PromoteFull"
	// OpAbort means: all traffic back to stable; the candidate is kept (at its replicas, no traffic)
	// until the scale-down delay, for inspection.
	OpAbort Operation = "Abort"
)

// Measurement is one analysis run over all metrics, taken by the controller when MeasureDue said so.
type Measurement struct {
	At      time.Time
	Results []v1alpha1.MetricResult
}

// Observation is everything Next needs besides the spec, the last status and the clock.
type Observation struct {
	// Revision is the hash of spec.template (the revision the spec asks for).
	Revision string
	// Image of the spec template's first container.
	Image string
	// Colors holds both colors (missing key = Deployment absent).
	Colors map[v1alpha1.Color]ColorObservation
	// DesiredReplicas is the total the ModelServer should run: spec.replicas, or the
	// autoscaler's decision.
	DesiredReplicas int32
	// Capacity is how many pods of this ModelServer, both colors together, the cluster can hold
	// (GPUs on matching nodes and the namespace's GPU quota); 0 means unknown or unlimited.
	// When the stable color at full size plus the candidate for its next weight do not fit,
	// the rollout runs in swap mode: the stable color shrinks to what its traffic share needs
	// as the candidate grows, and the promotion does not keep the old color warm.
	Capacity int32
	// Measurement is set when the controller ran analysis in this pass.
	Measurement *Measurement
	// Operation requested by a human for the current candidate.
	Operation Operation
	// RouteAccepted is the HTTPRoute's acceptance by its Gateways (the RouteAccepted
	// condition's status). False holds a live rollout: it neither advances nor promotes, not
	// even by request, until the route is accepted again; rollbacks and aborts still act.
	// Unknown or empty (no Gateway has answered: many gateways and test setups never write
	// route status) does not hold.
	RouteAccepted metav1.ConditionStatus
	// RouteMessage says why the route was not accepted, for the status message.
	RouteMessage string
	// MirrorUnsupported, when set, says why the Gateway cannot mirror requests to the candidate
	// as spec.rollout.shadow asks (see v1alpha1.ReasonMirrorUnsupported): the shadow phase does
	// not start and the rollout holds at step 0. "" when it can (or no shadow phase is asked).
	MirrorUnsupported string
	// GateResults are the answers of the rollout gates (spec.rollout.gates) that the
	// controller called and that ended since the last pass, for the step they were called at.
	GateResults []GateResult
}

// GateResult is one call of a rollout gate.
type GateResult struct {
	Name string
	// Step is status.rollout.step when the gate was called.
	Step   int32
	Passed bool
	// Message says why it did not pass (the status code, a timeout).
	Message string
}

// ColorPlan is what one color's Deployment should be.
type ColorPlan struct {
	// Revision the color should run. When it equals the spec's revision the controller applies
	// the spec template; otherwise it keeps the Deployment's template and sets only replicas.
	Revision string
	// Replicas the Deployment should have.
	Replicas int32
}

// Event is a Kubernetes Event to record beside an action.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type    string
	Reason  string
	Message string
}

// Mirror is the shadow phase's mirror to the candidate.
type Mirror struct {
	Color   v1alpha1.Color
	Percent int32
}

// Decision is the outcome of one pass of the state machine.
type Decision struct {
	// Status is the next status (phase, stable, candidate, weights, step, analysis, failures,
	// history). Its conditions are the last pass's: the plan sets them (package plan's status
	// file), from Report, with replica totals, selector and the controller's own conditions.
	Status v1alpha1.ModelServerStatus
	// Plans for each color that should exist.
	Plans map[v1alpha1.Color]ColorPlan
	// Weights are the route's backendRef weights per color; they sum to 100.
	Weights map[v1alpha1.Color]int32
	// HeaderRoute is the color the header route of spec.rollout.headerRoute sends to in this
	// pass: the live candidate's once it has Ready, warm pods (from step 0, at weight 0), up to
	// its promotion; "" means no header route (none asked, no live candidate, a candidate not
	// warm yet, or one promoted, rolled back, aborted or superseded).
	HeaderRoute v1alpha1.Color
	// Mirror, when set, is the shadow phase's mirror: the candidate's color and the share of the
	// requests the Gateway mirrors to it (spec.rollout.shadow), while no user request is routed
	// to it. Nil means no mirror: none asked, not started yet, passed, or the candidate no
	// longer live.
	Mirror *Mirror
	// Events to record.
	Events []Event
	// RequeueAfter is when to look again (0: only on change).
	RequeueAfter time.Duration
	// KeepOperation is true when obs.Operation could not act yet (the candidate is not sized or
	// warm for the weight it would get, or the rollout is paused) and should be passed again:
	// the controller then leaves its annotation in place. False: the operation was carried out
	// (or had nothing to act on) and its annotation can be removed.
	KeepOperation bool
	// Report is what the conditions are derived from besides Status.
	Report Report
}
