// Package notify posts a ModelServer's rollout events and scaling limits to webhooks: the
// cluster-wide URLs of the controller's configuration and the ModelServer's spec.notifications,
// whose URLs are read from Secrets in its namespace. Delivery runs on the Sender's own
// goroutines, never on a reconcile worker: Notify only queues.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/warmup"
)

// Reasons are the event reasons that are notified: a rollout's transitions and the start of a
// scaling limit. Other events (AnalysisFailed, CandidateUnready...) are not.
var Reasons = map[string]bool{
	"RolloutStarted": true, "ShadowStarted": true, "ShadowPassed": true, "StepAdvanced": true, "Paused": true, "AwaitingPromotion": true,
	"Promoted": true, "RolledBack": true, "Aborted": true, "AnalysisStalled": true,
	"NoRoomForCandidate": true, v1alpha1.ConditionScalingLimited: true,
}

// Defaults of a Sender.
const (
	DefaultTimeout  = 5 * time.Second
	DefaultAttempts = 6
	DefaultBackoff  = time.Second
	MaxBackoff      = 30 * time.Second
	DefaultWorkers  = 2
	// rememberKeys bounds the keys of events already queued that a Sender keeps.
	rememberKeys = 10000
)

// Message is what a webhook receives, as JSON.
type Message struct {
	// ID identifies the event: the same transition decided again (a pass retried after a failed
	// status write) has the same ID, so a receiver can drop a repeat that a controller restart
	// might cause.
	ID          string    `json:"id"`
	Namespace   string    `json:"namespace"`
	ModelServer string    `json:"modelServer"`
	Type        string    `json:"type"` // Normal or Warning
	Reason      string    `json:"reason"`
	Message     string    `json:"message"`
	Revision    string    `json:"revision,omitempty"`
	Phase       string    `json:"phase,omitempty"`
	Step        int32     `json:"step"`
	Time        time.Time `json:"time"`
	// Text is the Slack-compatible form (an incoming webhook posts it as the message).
	Text string `json:"text"`
}

// Target is where one message goes: a cluster-wide URL, or a Secret key to read it from.
type Target struct {
	// Name identifies the target in logs and in the deduplication of messages.
	Name string
	// URL, when set, is the URL (the cluster's configuration).
	URL string
	// Secret, when URL is empty, holds it, in Namespace.
	Namespace string
	Secret    v1alpha1.SecretKeyRef
}

// Resolver reads a URL from a Secret key (in the ModelServer's namespace).
type Resolver func(ctx context.Context, namespace string, ref v1alpha1.SecretKeyRef) (string, error)

// Failed is called when a message could not be delivered after every attempt.
type Failed func(owner types.NamespacedName, t Target, m Message, err error)

// Sender queues messages and delivers them on its own goroutines (Start): each message to each
// target once (by ID and target name), retried with exponential backoff up to Attempts times, each
// attempt with the client's timeout and no redirect followed.
type Sender struct {
	// ClusterURLs receive every ModelServer's messages.
	ClusterURLs []string
	Resolve     Resolver
	Client      *http.Client
	Attempts    int
	Backoff     time.Duration
	OnFailure   Failed
	Log         logr.Logger

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []delivery
	seen    map[string]bool
	order   []string
	pending int
}

type delivery struct {
	owner  types.NamespacedName
	target Target
	msg    Message
}

// NewSender is a Sender with the defaults; Start runs it.
func NewSender(clusterURLs []string, resolve Resolver, log logr.Logger) *Sender {
	return &Sender{ClusterURLs: clusterURLs, Resolve: resolve, Client: warmup.NewClient(DefaultTimeout),
		Attempts: DefaultAttempts, Backoff: DefaultBackoff, Log: log}
}

func (s *Sender) init() {
	if s.cond == nil {
		s.cond = sync.NewCond(&s.mu)
		s.seen = map[string]bool{}
	}
}

// Targets are the targets of ms: the cluster's URLs and its spec.notifications.
func (s *Sender) Targets(ms *v1alpha1.ModelServer) []Target {
	var out []Target
	for i, u := range s.ClusterURLs {
		out = append(out, Target{Name: fmt.Sprintf("cluster-%d", i), URL: u})
	}
	for _, n := range ms.Spec.Notifications {
		out = append(out, Target{Name: n.Name, Namespace: ms.Namespace, Secret: n.URLSecretRef})
	}
	return out
}

// Notify queues m for each of ms's targets, unless it was queued for that target before. It
// never blocks on the network.
func (s *Sender) Notify(ms *v1alpha1.ModelServer, m Message) {
	if s == nil {
		return
	}
	targets := s.Targets(ms)
	if len(targets) == 0 {
		return
	}
	owner := types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	for _, t := range targets {
		k := m.ID + "\x00" + t.Name
		if s.seen[k] {
			continue
		}
		s.seen[k] = true
		s.order = append(s.order, k)
		if len(s.order) > rememberKeys {
			delete(s.seen, s.order[0])
			s.order = s.order[1:]
		}
		s.queue = append(s.queue, delivery{owner: owner, target: t, msg: m})
	}
	s.cond.Broadcast()
}

// Start runs workers goroutines that deliver the queue until ctx ends.
func (s *Sender) Start(ctx context.Context, workers int) {
	s.mu.Lock()
	s.init()
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	for range max(workers, 1) {
		go s.work(ctx)
	}
}

func (s *Sender) work(ctx context.Context) {
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && ctx.Err() == nil {
			s.cond.Wait()
		}
		if ctx.Err() != nil {
			s.mu.Unlock()
			return
		}
		d := s.queue[0]
		s.queue = s.queue[1:]
		s.pending++
		s.mu.Unlock()
		s.deliver(ctx, d)
		s.mu.Lock()
		s.pending--
		s.mu.Unlock()
	}
}

// deliver sends d, retrying with backoff.
func (s *Sender) deliver(ctx context.Context, d delivery) {
	attempts := max(s.Attempts, 1)
	wait := s.Backoff
	var err error
	for i := range attempts {
		if err = s.send(ctx, d); err == nil {
			return
		}
		s.Log.V(1).Info("Notification not delivered yet", "ModelServer", d.owner, "target", d.target.Name, "reason", d.msg.Reason, "attempt", i+1, "error", err.Error())
		if i == attempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, MaxBackoff)
	}
	s.Log.Info("Notification not delivered", "ModelServer", d.owner, "target", d.target.Name, "reason", d.msg.Reason, "attempts", attempts, "error", err.Error())
	if s.OnFailure != nil {
		s.OnFailure(d.owner, d.target, d.msg, err)
	}
}

// send makes one attempt: the URL (read from its Secret, each attempt, so a rotated Secret
// applies), a POST of the JSON, a 2xx answer.
func (s *Sender) send(ctx context.Context, d delivery) error {
	u := d.target.URL
	if u == "" {
		if s.Resolve == nil {
			return fmt.Errorf("no Secret reader")
		}
		var err error
		if u, err = s.Resolve(ctx, d.target.Namespace, d.target.Secret); err != nil {
			return err
		}
	}
	if err := Post(ctx, s.Client, u, d.msg); err != nil {
		return fmt.Errorf("target %s: %w", d.target.Name, err)
	}
	return nil
}

// Post sends body as JSON to the http or https URL u with c (warmup.NewClient: a timeout, no
// redirect followed; a nil c is one with DefaultTimeout) and wants a 2xx answer. Its errors
// never quote the URL, which may hold a token.
func Post(ctx context.Context, c *http.Client, u string, body any) error {
	if err := checkURL(u); err != nil {
		return err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("the URL does not make a request")
	}
	req.Header.Set("Content-Type", "application/json")
	if c == nil {
		c = warmup.NewClient(DefaultTimeout)
	}
	resp, err := c.Do(req)
	if err != nil {
		return redact(err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return nil
}

// checkURL accepts an absolute http or https URL.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("the URL does not parse")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("the URL must be an absolute http or https URL")
	}
	return nil
}

// redact keeps a URL (that may hold a token) out of an error's text.
func redact(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// Idle reports whether nothing is queued or being delivered (for tests and shutdown).
func (s *Sender) Idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) == 0 && s.pending == 0
}

// Text is the Slack-compatible one-line form of an event.
func Text(namespace, name, reason, message string) string {
	return fmt.Sprintf("[%s/%s] %s: %s", namespace, name, reason, message)
}

// ForEvent is the message of an event about ms, whose status is st after the pass that
// decided it. Its ID is the ModelServer's UID, the reason, the revision the spec asks for, the
// rollout's step and the spec's generation: the same transition decided again in a later pass
// (its status write failed) has the same ID, and a later transition of the same kind differs in
// one of them (a new rollout, step or spec).
func ForEvent(ms *v1alpha1.ModelServer, st *v1alpha1.ModelServerStatus, typ, reason, message string, now time.Time) Message {
	return Message{
		ID:        fmt.Sprintf("%s/%s/%s/%d/%d", ms.UID, reason, st.Revision, st.Rollout.Step, ms.Generation),
		Namespace: ms.Namespace, ModelServer: ms.Name,
		Type: typ, Reason: reason, Message: message,
		Revision: st.Revision, Phase: string(st.Phase), Step: st.Rollout.Step,
		Time: now.UTC(),
		Text: Text(ms.Namespace, ms.Name, reason, message),
	}
}
