package fleet

import (
	"errors"
	"fmt"
	"time"
)

// Errors of SubmitTo.
var (
	// ErrUnknownPod: the fleet holds no pod of that key (an HTTP server answers 404).
	ErrUnknownPod = errors.New("fleet: unknown pod")
	// ErrLoading: the pod's model is not loaded yet (vLLM answers 503 while it loads).
	ErrLoading = errors.New("fleet: model is loading")
)

// Result is what happened to a request submitted to one pod (SubmitTo), as the simulation
// reaches it. A request sends at most two Results: a first-token notice (Done false) when its
// prefill ends and its first token is out, then its end (Done true); a request that fails or
// whose pod goes away sends its end only.
type Result struct {
	// Pod that got the request, as namespace/name.
	Pod string
	// Done is false for the first-token notice, true for the request's end.
	Done bool
	// Code of the end: CodeOK, CodeServerError (the model failed it: Reason FinishAbort),
	// CodeBadGateway (the pod went away while holding it) or CodeClientClosed (Request.Cancel;
	// Reason FinishAbort). Empty on the first-token notice.
	Code string
	// Reason is vLLM's finished_reason (FinishStop, FinishLength, FinishAbort); empty on the
	// first-token notice and when the pod went away.
	Reason string
	// Arrival is when the request arrived at the pod (simulated time).
	Arrival time.Time
	// FirstToken is when the first token came out; zero when none did.
	FirstToken time.Time
	// Finished is when the request ended; zero on the first-token notice.
	Finished time.Time
	// PromptTokens is the prompt length the pod processed.
	PromptTokens int
	// Tokens is the number of tokens generated so far (at the end: in all).
	Tokens int
}

// Failed tells whether the request ended without a full answer.
func (r Result) Failed() bool { return r.Done && r.Code != CodeOK }

// result is the request's Result now (done: its end, with code and reason, at at).
func (q *request) result(done bool, code, reason string, at time.Time) Result {
	return Result{
		Pod: q.pod, Done: done, Code: code, Reason: reason, Arrival: q.arrival,
		FirstToken: q.firstToken, Finished: at, PromptTokens: q.context, Tokens: q.emitted,
	}
}

// finish sends a direct request's end and closes its channel.
func (q *request) finish(code, reason string, at time.Time) {
	if q.notify == nil {
		return
	}
	q.notify <- q.result(true, code, reason, at)
	close(q.notify)
	q.notify = nil
}

// SubmitTo gives a request to one pod, whatever the weights (a real Gateway chose it): the
// fleet first advances to the request's arrival, then queues it on the pod if its model is
// loaded (ErrLoading otherwise; ErrUnknownPod for a pod the fleet does not hold). A pod
// serves what reaches it whether or not it is Ready or terminating, as vLLM does; choosing
// Ready endpoints is the Gateway's part. The channel receives the request's Results as the
// simulation reaches them (it never blocks the fleet) and is closed after the end.
//
// Such requests count in the pod's metrics and in TakeWindow's activity, but not in the
// simulated Gateway's responses (GatewayCount, MetricGatewayResponses), which only count
// what Submit routed.
func (f *Fleet) SubmitTo(podKey string, req Request) (<-chan Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance(req.Arrival)
	if req.Arrival.Before(f.now) {
		req.Arrival = f.now
	}
	r, ok := f.pods[podKey]
	if !ok {
		return nil, fmt.Errorf("%w %s", ErrUnknownPod, podKey)
	}
	w := f.windowFor(msKey{r.pod.Namespace, r.pod.ModelServer})
	w.requests++
	if !r.loaded && !r.pod.loadedAt(req.Arrival) {
		w.errors++
		return nil, fmt.Errorf("pod %s: %w", podKey, ErrLoading)
	}
	q := f.newRequest(r, req)
	q.notify = make(chan Result, 2)
	q.pod = podKey
	r.waiting = append(r.waiting, q)
	return q.notify, nil
}

// newRequest makes a request for replica r: its generated tokens capped by MaxTokens, and its
// failure drawn from the pod's profile at arrival.
func (f *Fleet) newRequest(r *replica, req Request) *request {
	gen := max(1, req.GeneratedTokens)
	reason := FinishStop
	if f.cfg.MaxTokens > 0 && gen >= f.cfg.MaxTokens {
		gen, reason = f.cfg.MaxTokens, FinishLength
	}
	f.nextID++
	q := &request{
		id:          f.nextID,
		arrival:     req.Arrival,
		context:     max(0, req.ContextTokens),
		generate:    gen,
		reason:      reason,
		prefillLeft: float64(max(0, req.ContextTokens)),
		onTokens:    req.OnTokens,
		cancel:      req.Cancel,
	}
	if p := r.pod.profileAt(req.Arrival).ErrorProbability; p > 0 && f.rng.Float64() < p {
		q.fail = true
	}
	return q
}

// Pod returns what is known of a pod and whether its model is loaded at t; ok is false for a
// pod the fleet does not hold.
func (f *Fleet) Pod(key string, t time.Time) (p Pod, loaded, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.pods[key]
	if !ok {
		return Pod{}, false, false
	}
	return r.pod, r.loaded || r.pod.loadedAt(t), true
}

// CountGatewayResponse counts one answer of a real Gateway for a ModelServer's color (the
// answering pod's, "" when no pod answered) with a code, beside what Submit counts as the
// simulated Gateway: GatewayCount and MetricGatewayResponses then say what the Gateway
// answered, whichever Gateway it was.
func (f *Fleet) CountGatewayResponse(namespace, modelServer, color, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gateway[gatewayKey{namespace, modelServer, color, code}]++
}
