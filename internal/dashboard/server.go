// Package dashboard serves `kubectl modelship dashboard`: a local web page of every ModelServer
// (phase, versions, weights, replicas, GPU utilization, kstatus health) kept live by one watch
// and pushed to the page with server-sent events, a page per ModelServer (the rollout's steps and
// measurements, revision history, replicas and GPU utilization over time, events) and the
// rollout actions, which run the plugin's own code paths through Options.Act.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/health"
	"github.com/modelship/modelship/internal/revision"
)

// The actions a page can ask for.
const (
	ActionPause       = "pause"
	ActionResume      = "resume"
	ActionPromote     = "promote"
	ActionPromoteFull = "promote-full"
	ActionAbort       = "abort"
	ActionRollback    = "rollback"
)

// Action is one request from the page.
type Action struct {
	// Verb is one of the Action* constants.
	Verb string `json:"-"`
	// Revision is rollback's target; empty means the stable revision.
	Revision string `json:"revision,omitempty"`
	// Candidate is the candidate revision the page showed when the person clicked (empty: no
	// rollout in progress). Every action but pause lands on it or is refused (409): a person
	// who reviewed one candidate never promotes, aborts or resumes another one that replaced it
	// meanwhile.
	Candidate string `json:"candidate"`
}

// candidateOf is the candidate revision of a rollout in progress, "" when none.
func candidateOf(ms *v1alpha1.ModelServer) string {
	if !health.InProgress(ms) {
		return ""
	}
	return ms.Status.Candidate.Revision
}

// ActFunc carries out an action on the ModelServer namespace/name and returns what it did, in
// the words the plugin prints.
type ActFunc func(ctx context.Context, namespace, name string, a Action) (string, error)

// Options configure a Server.
type Options struct {
	// Client reads and watches ModelServers, Events and ControllerRevisions as the user.
	Client client.WithWatch
	// Namespace limits the dashboard to one namespace; empty means all namespaces.
	Namespace string
	// Act carries out the actions (the plugin's pause, resume, promote, abort, rollback).
	Act ActFunc
	// Prometheus, when set, gives the charts GPU utilization per color over the last hour.
	Prometheus promv1.API
	// Now is the clock (default time.Now).
	Now func() time.Time
}

//go:embed assets
var assets embed.FS

// Server is the dashboard: Run keeps its view of the fleet current, Handler serves it.
type Server struct {
	opts  Options
	store *store
	ready chan struct{}
}

// New returns a Server; call Run to start watching.
func New(opts Options) (*Server, error) {
	if opts.Client == nil || opts.Act == nil {
		return nil, errors.New("dashboard: a client and an action function are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Server{opts: opts, store: newStore(), ready: make(chan struct{})}, nil
}

// Run lists and watches ModelServers until ctx ends, re-listing after a watch closes. The
// first list's error is returned (no access, no CRD); later errors are retried.
func (s *Server) Run(ctx context.Context) error {
	first := true
	backoff := time.Second
	for {
		err := s.listAndWatch(ctx, func() {
			if first {
				first = false
				close(s.ready)
			}
			backoff = time.Second
		})
		if ctx.Err() != nil {
			return nil
		}
		if first {
			return err
		}
		if err != nil {
			log.FromContext(ctx).Info("watch of modelservers ended; listing again", "error", err.Error(), "after", backoff)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// Ready is closed once the first list arrived.
func (s *Server) Ready() <-chan struct{} { return s.ready }

func (s *Server) listOptions() []client.ListOption {
	if s.opts.Namespace == "" {
		return nil
	}
	return []client.ListOption{client.InNamespace(s.opts.Namespace)}
}

func (s *Server) listAndWatch(ctx context.Context, listed func()) error {
	list := &v1alpha1.ModelServerList{}
	if err := s.opts.Client.List(ctx, list, s.listOptions()...); err != nil {
		return fmt.Errorf("listing modelservers: %w", err)
	}
	s.store.replace(list.Items, s.opts.Now())
	listed()
	opts := append(s.listOptions(), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true}})
	w, err := s.opts.Client.Watch(ctx, &v1alpha1.ModelServerList{}, opts...)
	if err != nil {
		return fmt.Errorf("watching modelservers: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if ms, ok := ev.Object.(*v1alpha1.ModelServer); ok {
					s.store.upsert(ms, s.opts.Now())
				}
			case watch.Deleted:
				if ms, ok := ev.Object.(*v1alpha1.ModelServer); ok {
					s.store.remove(keyOf(ms))
				}
			case watch.Error:
				return fmt.Errorf("watch error: %v", apierrors.FromObject(ev.Object))
			}
		}
	}
}

// Handler serves the page, its assets, the JSON API, the event stream and the actions.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	mux.Handle("GET /", files)
	mux.HandleFunc("GET /api/modelservers", s.handleList)
	mux.HandleFunc("GET /api/modelservers/{namespace}/{name}", s.handleDetail)
	mux.HandleFunc("GET /api/stream", s.handleStream)
	mux.HandleFunc("POST /api/modelservers/{namespace}/{name}/actions/{action}", s.handleAction)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return securityHeaders(mux)
}

// securityHeaders keeps the page from being framed or loading anything but its own files.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

type errorBody struct {
	Error string `json:"error"`
}

func (s *Server) handleList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.store.rows())
}

func (s *Server) handleDetail(w http.ResponseWriter, r *http.Request) {
	k := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	ms, samples, measurements := s.store.get(k)
	if ms == nil {
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("modelserver %q not found in namespace %q", k.Name, k.Namespace)})
		return
	}
	d := Detail{
		Row:          RowOf(ms),
		Steps:        StepsOf(ms),
		Analysis:     MeasurementsOf(ms),
		Measurements: measurements,
		History:      HistoryOf(ms, revision.Of(&ms.Spec.Template)),
		Conditions:   ms.Status.Conditions,
		Autoscaling:  ms.Status.Autoscaling,
		Samples:      samples,
		Actions:      ActionsOf(ms),
		Events:       []EventView{},
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	events := &corev1.EventList{}
	if err := s.opts.Client.List(ctx, events, client.InNamespace(ms.Namespace),
		client.MatchingFields{"involvedObject.name": ms.Name, "involvedObject.kind": "ModelServer"}); err == nil {
		d.Events = EventsOf(events.Items, 30)
	}
	if s.opts.Prometheus != nil {
		d.GPUSeries, d.PrometheusError = s.gpuSeries(ctx, ms)
	}
	writeJSON(w, http.StatusOK, d)
}

// streamMessage is one server-sent event's data: the rows that changed and the keys removed.
type streamMessage struct {
	Rows    []Row    `json:"rows"`
	Deleted []string `json:"deleted"`
}

// handleStream pushes the fleet, then every change, as server-sent events ("fleet" first, then
// "change"). A comment line every 20 s keeps proxies from closing it.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "streaming unsupported"})
		return
	}
	sub := s.store.subscribe()
	defer s.store.unsubscribe(sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	if !send("fleet", s.store.rows()) {
		return
	}
	keepalive := time.NewTicker(20 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepalive.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-sub.wake:
			msg := streamMessage{Rows: []Row{}, Deleted: []string{}}
			for _, k := range sub.drain() {
				if ms, _, _ := s.store.get(k); ms != nil {
					msg.Rows = append(msg.Rows, RowOf(ms))
				} else {
					msg.Deleted = append(msg.Deleted, k.String())
				}
			}
			sortRows(msg.Rows)
			if len(msg.Rows)+len(msg.Deleted) > 0 && !send("change", msg) {
				return
			}
		}
	}
}

func sortRows(rows []Row) {
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Namespace != rows[j].Namespace {
			return rows[i].Namespace < rows[j].Namespace
		}
		return rows[i].Name < rows[j].Name
	})
}

// actionResult is the answer to an action: what was done, or the error.
type actionResult struct {
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

// handleAction runs one action. It accepts only JSON posted from the dashboard's own origin,
// so another site open in the same browser cannot trigger it.
func (s *Server) handleAction(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeJSON(w, http.StatusForbidden, actionResult{Error: "cross-origin request refused"})
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeJSON(w, http.StatusUnsupportedMediaType, actionResult{Error: "send the action as application/json"})
		return
	}
	a := Action{Verb: r.PathValue("action")}
	switch a.Verb {
	case ActionPause, ActionResume, ActionPromote, ActionPromoteFull, ActionAbort, ActionRollback:
	default:
		writeJSON(w, http.StatusNotFound, actionResult{Error: fmt.Sprintf("unknown action %q", a.Verb)})
		return
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&a); err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, actionResult{Error: "reading the request: " + err.Error()})
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if s.opts.Namespace != "" && ns != s.opts.Namespace {
		writeJSON(w, http.StatusForbidden, actionResult{Error: fmt.Sprintf("this dashboard serves namespace %q only", s.opts.Namespace)})
		return
	}
	if ms, _, _ := s.store.get(types.NamespacedName{Namespace: ns, Name: name}); ms != nil && a.Verb != ActionPause && candidateOf(ms) != a.Candidate {
		// The page is behind what the dashboard already knows (Act checks the live object too).
		writeJSON(w, http.StatusConflict, actionResult{Error: changedCandidate(a.Candidate, candidateOf(ms))})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	msg, err := s.opts.Act(ctx, ns, name, a)
	if err != nil {
		code := http.StatusConflict
		var status apierrors.APIStatus
		if errors.As(err, &status) && status.Status().Code != 0 {
			code = int(status.Status().Code)
		}
		log.FromContext(ctx).Info("action refused", "action", a.Verb, "namespace", ns, "name", name, "error", err.Error())
		writeJSON(w, code, actionResult{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, actionResult{Message: msg})
}

// changedCandidate says that the rollout the page showed is not the one in progress now.
func changedCandidate(shown, now string) string {
	switch {
	case shown == "":
		return fmt.Sprintf("the page showed no rollout in progress; revision %s is rolling out now: review it, then act", now)
	case now == "":
		return fmt.Sprintf("the page showed the rollout of revision %s, which is over: nothing done", shown)
	}
	return fmt.Sprintf("the page showed candidate revision %s; the candidate is revision %s now: review it, then act", shown, now)
}

func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return r.Header.Get("Sec-Fetch-Site") == "" || r.Header.Get("Sec-Fetch-Site") == "same-origin"
	}
	return origin == "http://"+r.Host || origin == "https://"+r.Host
}
