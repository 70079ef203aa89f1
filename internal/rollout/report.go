package rollout

import "time"

// Report is what the pass knows beyond the status it computed and what the conditions Ready,
// Reconciling, Stalled, Progressing and Degraded are derived from. Next does not set those
// conditions: the plan's status file does, from Decision.Status and this report.
type Report struct {
	// Generation is the ModelServer's metadata.generation (the conditions' observedGeneration).
	Generation int64
	// SpecRevision is the revision the spec asks for.
	SpecRevision string
	// Total is the desired replica count of the pass.
	Total int32
	// StableReady and StableAvailable count the stable color's Ready and available pods.
	StableReady     int32
	StableAvailable int32
	// WasServing: the stable color had Ready pods before (so 0 now is a degradation).
	WasServing bool
	// HoldReason and HoldMessage say why the pass held the rollout (see hold): RolledBack or
	// Aborted explain phase RolledBack, Superseding a superseded or abandoned candidate that
	// still drains, RouteNotAccepted a route that a Gateway did not accept, GateHeld a rollout
	// gate that has not answered 2xx at this step. Empty: no hold.
	HoldReason  string
	HoldMessage string
	// StableDead: the stable color serves nothing; a live candidate carries what its warm pods
	// carry and is judged on absolute bounds only.
	StableDead bool
	// Stall explains a rollout stalled ("" when it is not): on inconclusive analysis, or with
	// no room for the candidate's next step (StallReason says which).
	Stall       string
	StallReason string
	// UnreadyDeadline is when a candidate below its step's need is rolled back (zero: not
	// below).
	UnreadyDeadline time.Time
}
