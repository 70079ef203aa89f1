package fleetsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"

	"github.com/modelship/modelship/test/framework/fleet"
)

// Response headers a simulated pod sets on every answer, so that a client behind a Gateway
// learns who served it.
const (
	HeaderPod         = "X-Modelship-Pod"         // namespace/name
	HeaderColor       = "X-Modelship-Color"       // the pod's color (or peer group)
	HeaderModelServer = "X-Modelship-Modelserver" // the pod's model server
)

// DefaultPodPort is the port a pod serves on when neither its ModelServer nor its containers
// say (vLLM's default).
const DefaultPodPort = 8000

// DefaultMaxTokens is the output length of a completion request without max_tokens (OpenAI's
// default for completions).
const DefaultMaxTokens = 16

// PodEndpoint is where a simulated pod serves: its address and port, as the pod's status and
// spec say.
type PodEndpoint struct {
	// Namespace and Name of the pod.
	Namespace, Name string
	// IP is the pod's status.podIP.
	IP string
	// Port the pod serves on (the Service's targetPort); 0 binds any free port (tests).
	Port int32
	// UID of the pod: a new pod given the same name or address is another server.
	UID string
}

// Key is the pod's namespace/name.
func (e PodEndpoint) Key() string { return e.Namespace + "/" + e.Name }

// Address is IP:Port.
func (e PodEndpoint) Address() string {
	return net.JoinHostPort(e.IP, strconv.Itoa(int(e.Port)))
}

// PodEndpointOf is where a pod serves: its podIP and port (0 takes the model container's
// first declared containerPort, else DefaultPodPort). ok is false without a podIP, for a
// finished pod and for a terminating one (its server stops listening, as vLLM does on SIGTERM).
func PodEndpointOf(pod *corev1.Pod, port int32) (PodEndpoint, bool) {
	if pod.Status.PodIP == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		pod.DeletionTimestamp != nil {
		return PodEndpoint{}, false
	}
	if port <= 0 {
		if c, _ := modelContainer(pod); c != nil && len(c.Ports) > 0 {
			port = c.Ports[0].ContainerPort
		}
	}
	if port <= 0 {
		port = DefaultPodPort
	}
	return PodEndpoint{Namespace: pod.Namespace, Name: pod.Name, IP: pod.Status.PodIP, Port: port, UID: string(pod.UID)}, true
}

// PodServers serves every simulated pod on its own address, as a vLLM process on the pod would:
// Sync binds a listener at each pod's IP:port and closes it when the pod goes away or moves.
// Each pod answers the OpenAI-compatible endpoints (/v1/completions, /v1/chat/completions,
// streaming or not; /v1/models), /health and its own vLLM /metrics, from the fleet's
// simulation of that pod (fleet.SubmitTo): 503 while its model loads, 500 for a request the
// model fails, the connection dropped when the pod goes while answering. A request's prompt
// length is the request's "modelship_sim": {"prompt_tokens": N} when set, else the number of
// words of its prompt or messages; its output length is max_tokens (or
// max_completion_tokens; DefaultMaxTokens without either).
//
// Streaming answers send their first chunk when the simulated first token is out and each
// later token in the simulation step that produced it (fleet.Request.OnTokens). The fleet
// advances in steps its owner drives (fleet.Advance); answers come as it does.
type PodServers struct {
	// Fleet holds the pods.
	Fleet *fleet.Fleet
	// Now is the clock of request arrivals; nil is time.Now.
	Now func() time.Time
	// Listen binds a pod's listener; nil is GuardedListen. Every address is checked against
	// the network rule (AddressAllowed) before it is called.
	Listen ListenFunc
	// Log receives binds, closes and bind errors.
	Log logr.Logger

	mu      sync.Mutex
	servers map[string]*podServer
	nextID  atomic.Uint64
}

// podServer is one pod's listener and HTTP server.
type podServer struct {
	ep   PodEndpoint
	addr string // the bound address (differs from ep's with port 0)
	srv  *http.Server
	done chan struct{}
}

// Sync makes the served pods those of eps: it binds pods that are new or whose address
// changed, and closes the others (their open connections are dropped, as when a pod goes).
// Bind errors are returned joined; the pods that bound serve regardless, and a later Sync
// retries the others.
func (s *PodServers) Sync(ctx context.Context, eps []PodEndpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers == nil {
		s.servers = map[string]*podServer{}
	}
	want := make(map[string]PodEndpoint, len(eps))
	for _, ep := range eps {
		want[ep.Key()] = ep
	}
	for key, ps := range s.servers {
		if ep, ok := want[key]; !ok || ep != ps.ep {
			ps.close()
			delete(s.servers, key)
			s.Log.V(1).Info("Pod server closed", "pod", key, "address", ps.addr)
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, key := range keys {
		if _, ok := s.servers[key]; ok {
			continue
		}
		ps, err := s.serve(ctx, want[key])
		if err != nil {
			errs = append(errs, fmt.Errorf("serving pod %s: %w", key, err))
			continue
		}
		s.servers[key] = ps
		s.Log.V(1).Info("Pod server listening", "pod", key, "address", ps.addr)
	}
	return errors.Join(errs...)
}

// Observe stops a pod's server at once when the pod it serves is deleted, terminating, finished,
// moved to another address or replaced by a new pod of the same name (another UID), rather than
// at the next Sync: kwok hands a deleted pod's address to the next pod, whose warm-up checks
// must not be answered by the old pod's server (a real kubelet tears the old sandbox down
// first). deleted says the pod is gone from the cluster. A terminating pod's server stops
// listening and finishes the requests it holds (for at most 30 s, as a graceful shutdown); the
// others drop their connections. It returns whether a server stopped.
func (s *PodServers) Observe(pod *corev1.Pod, deleted bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := pod.Namespace + "/" + pod.Name
	ps, ok := s.servers[key]
	if !ok || (ps.ep.UID != "" && pod.UID != "" && string(pod.UID) != ps.ep.UID && deleted) {
		return false // not served, or the deletion of an older pod of that name
	}
	ep, live := PodEndpointOf(pod, ps.ep.Port)
	graceful := pod.DeletionTimestamp != nil && !deleted
	switch {
	case deleted, !live:
	case ep.IP != ps.ep.IP, ps.ep.UID != "" && ep.UID != ps.ep.UID:
	default:
		return false
	}
	delete(s.servers, key)
	if graceful {
		ps.shutdown()
	} else {
		ps.close()
	}
	s.Log.V(1).Info("Pod server stopped with its pod", "pod", key, "address", ps.addr, "deleted", deleted, "graceful", graceful)
	return true
}

// Addresses returns the bound address of every served pod, by namespace/name.
func (s *PodServers) Addresses() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.servers))
	for k, ps := range s.servers {
		out[k] = ps.addr
	}
	return out
}

// Close closes every pod's server.
func (s *PodServers) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, ps := range s.servers {
		ps.close()
		delete(s.servers, k)
	}
}

func (s *PodServers) serve(ctx context.Context, ep PodEndpoint) (*podServer, error) {
	listen := s.Listen
	if listen == nil {
		listen = GuardedListen
	}
	ln, err := guard(listen)(ctx, "tcp", ep.Address())
	if err != nil {
		return nil, err
	}
	h, err := s.handler(ep)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	ps := &podServer{ep: ep, addr: ln.Addr().String(), done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(ps.done)
		if err := ps.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.Log.Error(err, "Pod server stopped", "pod", ep.Key(), "address", ps.addr)
		}
	}()
	return ps, nil
}

// close drops the listener and every open connection, and waits for Serve to return.
func (ps *podServer) close() {
	_ = ps.srv.Close()
	<-ps.done
}

// shutdown closes the listener now and lets the requests in flight finish, in the background,
// for at most 30 s; then it drops what is left.
func (ps *podServer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	go func() {
		defer cancel()
		if ps.srv.Shutdown(ctx) != nil {
			_ = ps.srv.Close()
		}
	}()
	<-ps.done // Serve returns as soon as its listener is closed
}

func (s *PodServers) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// handler serves one pod.
func (s *PodServers) handler(ep PodEndpoint) (http.Handler, error) {
	key := ep.Key()
	reg := prometheus.NewRegistry()
	ns, name, _ := strings.Cut(key, "/")
	if err := reg.Register(s.Fleet.PodCollector(ns, name)); err != nil {
		return nil, fmt.Errorf("registering the pod's collector: %w", err)
	}
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pod, loaded, ok := s.Fleet.Pod(key, s.now())
		if !ok {
			openAIError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("pod %s is not served here", key))
			return
		}
		if ep.UID != "" && pod.UID != "" && pod.UID != ep.UID {
			// The fleet knows another pod of that name now: this server's pod is gone, and
			// its address no longer answers (its connection drops, as a torn-down sandbox's).
			panic(http.ErrAbortHandler)
		}
		w.Header().Set(HeaderPod, key)
		w.Header().Set(HeaderColor, pod.Color)
		w.Header().Set(HeaderModelServer, pod.ModelServer)
		path := r.URL.Path
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(path, "/chat/completions"):
			s.complete(w, r, key, pod, true)
		case r.Method == http.MethodPost && strings.HasSuffix(path, "/completions"):
			s.complete(w, r, key, pod, false)
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			openAIError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" "+path)
		case !loaded && (path == "/health" || path == "/metrics" || strings.HasSuffix(path, "/v1/models")):
			openAIError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "model is loading")
		case path == "/health":
			w.WriteHeader(http.StatusOK)
		case path == "/metrics":
			metrics.ServeHTTP(w, r)
		case strings.HasSuffix(path, "/v1/models"):
			writeJSON(w, http.StatusOK, map[string]any{
				"object": "list",
				"data":   []map[string]any{{"id": pod.ModelName, "object": "model", "owned_by": "vllm", "root": pod.ModelName}},
			})
		default:
			openAIError(w, http.StatusNotFound, "NotFoundError", "no route "+path)
		}
	}), nil
}

// completionRequest is what the simulator reads of an OpenAI completion or chat request.
type completionRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	Sim                 *SimExtension   `json:"modelship_sim"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// SimExtension is the simulator's own field of a completion request ("modelship_sim"): the
// load generator states the prompt's length in tokens rather than sending that many words.
type SimExtension struct {
	// PromptTokens is the prompt length in tokens.
	PromptTokens *int `json:"prompt_tokens,omitempty"`
}

// promptTokens is the request's prompt length: the extension's, else its words.
func (c completionRequest) promptTokens() int {
	if c.Sim != nil && c.Sim.PromptTokens != nil {
		return max(0, *c.Sim.PromptTokens)
	}
	n := countWords(c.Prompt)
	for _, m := range c.Messages {
		n += countWords(m.Content)
	}
	return n
}

// countWords counts the words of a prompt or message content: a string, a list of strings,
// a list of token ids (one each), or a list of content parts ({"type":"text","text":...}).
func countWords(raw json.RawMessage) int {
	if len(raw) == 0 {
		return 0
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return len(strings.Fields(s))
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return 0
	}
	n := 0
	for _, item := range list {
		var part struct {
			Text string `json:"text"`
		}
		var id float64
		switch {
		case json.Unmarshal(item, &id) == nil:
			n++
		case json.Unmarshal(item, &part) == nil && part.Text != "":
			n += len(strings.Fields(part.Text))
		default:
			n += countWords(item)
		}
	}
	return n
}

func (c completionRequest) maxTokens() int {
	switch {
	case c.MaxTokens != nil:
		return *c.MaxTokens
	case c.MaxCompletionTokens != nil:
		return *c.MaxCompletionTokens
	}
	return DefaultMaxTokens
}

// complete answers a completion (chat: a chat completion) from the fleet's simulation.
func (s *PodServers) complete(w http.ResponseWriter, r *http.Request, key string, pod fleet.Pod, chat bool) {
	var req completionRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20)).Decode(&req); err != nil {
		openAIError(w, http.StatusBadRequest, "BadRequestError", "invalid JSON body: "+err.Error())
		return
	}
	if chat && len(req.Messages) == 0 && (req.Sim == nil || req.Sim.PromptTokens == nil) {
		openAIError(w, http.StatusBadRequest, "BadRequestError", "messages: required")
		return
	}
	if n := req.maxTokens(); n < 1 {
		openAIError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("max_tokens %d: must be at least 1", n))
		return
	}
	var prog *progress
	freq := fleet.Request{Arrival: s.now(), ContextTokens: req.promptTokens(), GeneratedTokens: req.maxTokens(),
		Cancel: r.Context().Done()} // a client that goes away aborts its request, as vLLM does
	if req.Stream {
		prog = &progress{tick: make(chan struct{}, 1)}
		freq.OnTokens = prog.set
	}
	results, err := s.Fleet.SubmitTo(key, freq)
	switch {
	case errors.Is(err, fleet.ErrLoading):
		openAIError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "model is loading")
		return
	case err != nil:
		openAIError(w, http.StatusNotFound, "NotFoundError", err.Error())
		return
	}
	model := req.Model
	if model == "" {
		model = pod.ModelName
	}
	a := answer{id: fmt.Sprintf("cmpl-%s-%d", strings.ReplaceAll(key, "/", "-"), s.nextID.Add(1)),
		created: s.now().Unix(), model: model, chat: chat}
	if req.Stream {
		a.stream(w, r, results, prog)
		return
	}
	end, ok := wait(r.Context(), results, true)
	if !ok {
		return // the client went away
	}
	switch end.Code {
	case fleet.CodeOK:
		writeJSON(w, http.StatusOK, a.full(end))
	case fleet.CodeServerError:
		openAIError(w, http.StatusInternalServerError, "InternalServerError", "the request failed (simulated)")
	default: // the pod went away: its connection drops, as a Gateway sees it
		panic(http.ErrAbortHandler)
	}
}

// wait returns the next Result (the end, when done), or false when ctx ends first.
func wait(ctx context.Context, results <-chan fleet.Result, done bool) (fleet.Result, bool) {
	for {
		select {
		case <-ctx.Done():
			return fleet.Result{}, false
		case res, ok := <-results:
			if !ok {
				return fleet.Result{}, false
			}
			if res.Done || !done {
				return res, true
			}
		}
	}
}

// answer renders the OpenAI response objects of one request.
type answer struct {
	id      string
	created int64
	model   string
	chat    bool
}

// text is the generated text of n tokens: one word per token.
func text(from, n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(" tok")
		b.WriteString(strconv.Itoa(from + i))
	}
	return b.String()
}

func (a answer) full(end fleet.Result) map[string]any {
	usage := map[string]any{"prompt_tokens": end.PromptTokens, "completion_tokens": end.Tokens, "total_tokens": end.PromptTokens + end.Tokens}
	choice := map[string]any{"index": 0, "finish_reason": end.Reason}
	object := "text_completion"
	if a.chat {
		object = "chat.completion"
		choice["message"] = map[string]any{"role": "assistant", "content": text(0, end.Tokens)}
	} else {
		choice["text"] = text(0, end.Tokens)
		choice["logprobs"] = nil
	}
	return map[string]any{"id": a.id, "object": object, "created": a.created, "model": a.model,
		"choices": []any{choice}, "usage": usage}
}

// chunk is one server-sent event of a streamed answer: token i (from 0), finishing with
// reason when not empty.
func (a answer) chunk(i int, reason string) map[string]any {
	var fr any
	if reason != "" {
		fr = reason
	}
	choice := map[string]any{"index": 0, "finish_reason": fr}
	object := "text_completion"
	if a.chat {
		object = "chat.completion.chunk"
		delta := map[string]any{"content": text(i, 1)}
		if i == 0 {
			delta["role"] = "assistant"
		}
		choice["delta"] = delta
	} else {
		choice["text"] = text(i, 1)
		choice["logprobs"] = nil
	}
	return map[string]any{"id": a.id, "object": object, "created": a.created, "model": a.model, "choices": []any{choice}}
}

// progress is how many tokens a streamed request has generated, as the fleet reports them.
type progress struct {
	generated atomic.Int64
	tick      chan struct{} // signalled (never blocking) when generated grows
}

// set is the request's fleet.Request.OnTokens: it runs under the fleet's lock.
func (p *progress) set(n int) {
	p.generated.Store(int64(n))
	select {
	case p.tick <- struct{}{}:
	default:
	}
}

// stream answers with server-sent events: the status waits for the first token (a request the
// model fails before it gets a 500), the first chunk goes out then, each later token in the
// simulation step that produced it, the last one holding the finish_reason, then
// "data: [DONE]".
func (a answer) stream(w http.ResponseWriter, r *http.Request, results <-chan fleet.Result, prog *progress) {
	first, ok := wait(r.Context(), results, false)
	if !ok {
		return
	}
	if first.Done && first.Code == fleet.CodeServerError {
		openAIError(w, http.StatusInternalServerError, "InternalServerError", "the request failed (simulated)")
		return
	}
	if first.Done && first.Code != fleet.CodeOK {
		panic(http.ErrAbortHandler)
	}
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sent := 0
	send := func(reason string) {
		b, _ := json.Marshal(a.chunk(sent, reason))
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
		sent++
	}
	end := first
	for !end.Done {
		// The end may already be there (a one-token answer ends in the step of its first
		// token): then every token goes out with it.
		select {
		case res, ok := <-results:
			if !ok {
				return
			}
			if res.Done {
				end = res
				continue
			}
		default:
		}
		// Tokens out so far, but the last: it may be the final one, which carries the
		// finish_reason, and only the end says so.
		if n := max(1, int(prog.generated.Load())); sent < n-1 || sent == 0 {
			for sent < max(1, n-1) {
				send("")
			}
			flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-prog.tick:
		case res, ok := <-results:
			if !ok {
				return
			}
			if res.Done {
				end = res
			}
		}
	}
	if end.Code != fleet.CodeOK {
		panic(http.ErrAbortHandler) // the pod went away mid-answer
	}
	if sent >= end.Tokens {
		// Every token went out already: the finish_reason comes in an empty final chunk.
		c := a.chunk(sent, end.Reason)
		setText(c, a.chat, "")
		b, _ := json.Marshal(c)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
	}
	for sent < end.Tokens {
		reason := ""
		if sent == end.Tokens-1 {
			reason = end.Reason
		}
		send(reason)
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	flush()
}

// setText replaces a chunk's token text.
func setText(c map[string]any, chat bool, s string) {
	choice := c["choices"].([]any)[0].(map[string]any)
	if chat {
		choice["delta"] = map[string]any{"content": s}
		return
	}
	choice["text"] = s
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// openAIError answers with OpenAI's error object.
func openAIError(w http.ResponseWriter, code int, kind, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": kind, "code": code}})
}
