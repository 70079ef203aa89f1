package metrics

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/modelship/modelship/internal/sample"
	"github.com/modelship/modelship/internal/telemetry"
)

// DefaultTimeout is the per-query timeout used when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// maxMessage bounds the length of a Sample's message: it ends up in a status field.
const maxMessage = 256

// Config says how to reach Prometheus (or any server of its HTTP API: Thanos Querier, Mimir,
// VictoriaMetrics).
type Config struct {
	// URL of the server, e.g. http://prometheus-operated.monitoring:9090 or
	// https://thanos-querier.openshift-monitoring.svc:9091. Required.
	URL string
	// BearerTokenFile, when set, is read before every request and sent as
	// "Authorization: Bearer <token>", so that a rotated (projected service account) token is
	// picked up without a restart.
	BearerTokenFile string
	// CAFile, when set, is a PEM bundle that replaces the system roots for verifying the server's
	// certificate. It is read once, by NewPrometheus.
	CAFile string
	// Timeout bounds each query, both on the client side and as Prometheus' own query timeout.
	// Zero means DefaultTimeout.
	Timeout time.Duration
	// MaxConcurrent bounds the queries in flight at once (the reconcile workers and the signal
	// cache share the server); a query waits for a slot within its timeout. Zero means
	// DefaultMaxConcurrent.
	MaxConcurrent int
}

// DefaultMaxConcurrent is the default bound on queries in flight.
const DefaultMaxConcurrent = 8

// Prometheus is a Querier backed by Prometheus' HTTP API. It is safe for concurrent use.
type Prometheus struct {
	api     promv1.API
	timeout time.Duration
	slots   chan struct{}
}

var _ Querier = (*Prometheus)(nil)

// NewPrometheus checks cfg (URL, readable token and CA files) and returns a Querier.
// It does not contact the server.
func NewPrometheus(cfg Config) (*Prometheus, error) {
	if cfg.URL == "" {
		return nil, errors.New("prometheus URL is empty")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("prometheus URL %q: %w", cfg.URL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("prometheus URL %q: scheme must be http or https", cfg.URL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("prometheus URL %q: no host", cfg.URL)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("prometheus timeout %s is negative", cfg.Timeout)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}

	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("http.DefaultTransport is not an *http.Transport")
	}
	transport := base.Clone()
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading prometheus CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("prometheus CA file %s holds no PEM certificate", cfg.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = partialFlag{next: transport}
	if cfg.BearerTokenFile != "" {
		if _, err := readToken(cfg.BearerTokenFile); err != nil {
			return nil, err
		}
		rt = &bearerFromFile{path: cfg.BearerTokenFile, next: rt}
	}

	client, err := promapi.NewClient(promapi.Config{Address: cfg.URL, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("prometheus client: %w", err)
	}
	n := cfg.MaxConcurrent
	if n <= 0 {
		n = DefaultMaxConcurrent
	}
	return &Prometheus{api: promv1.NewAPI(client), timeout: timeout, slots: make(chan struct{}, n)}, nil
}

// Scalar runs an instant query that should give one value. See Querier.
func (p *Prometheus) Scalar(ctx context.Context, query string, at time.Time) Sample {
	v, err := p.query(ctx, query, at)
	if errors.Is(err, ErrPartialData) {
		return Sample{Status: NoData, Message: truncate(err.Error())}
	}
	if err != nil {
		return Sample{Status: Error, Message: truncate(err.Error())}
	}
	switch v := v.(type) {
	case *model.Scalar:
		return finite(float64(v.Value))
	case model.Vector:
		switch len(v) {
		case 0:
			return Sample{Status: NoData, Message: "no data"}
		case 1:
			return finite(float64(v[0].Value))
		default:
			return Sample{Status: NoData, Message: fmt.Sprintf("ambiguous: %d series", len(v))}
		}
	default:
		return Sample{Status: Error, Message: truncate(unexpectedType(v).Error())}
	}
}

// Vector runs an instant query and returns its series, NaN and ±Inf elements dropped. A scalar
// result is one series without labels. An empty result is an empty slice and no error. An
// answer that warns of missing data (see PartialWarning) is no series and an error that
// errors.Is ErrPartialData: callers read it as no data, not as a failure of Prometheus.
func (p *Prometheus) Vector(ctx context.Context, query string, at time.Time) ([]Series, error) {
	v, err := p.query(ctx, query, at)
	if err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case *model.Scalar:
		if !isFinite(float64(v.Value)) {
			return []Series{}, nil
		}
		return []Series{{Labels: map[string]string{}, Value: float64(v.Value)}}, nil
	case model.Vector:
		out := make([]Series, 0, len(v))
		for _, s := range v {
			if !isFinite(float64(s.Value)) {
				continue
			}
			labels := make(map[string]string, len(s.Metric))
			for k, val := range s.Metric {
				labels[string(k)] = string(val)
			}
			out = append(out, Series{Labels: labels, Value: float64(s.Value)})
		}
		return out, nil
	default:
		return nil, unexpectedType(v)
	}
}

// query runs one instant query with the per-query timeout and turns failures into errors that
// say what went wrong in a few words (they end up in status messages).
func (p *Prometheus) query(ctx context.Context, query string, at time.Time) (model.Value, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if p.slots != nil {
		select {
		case p.slots <- struct{}{}:
			defer func() { <-p.slots }()
		case <-ctx.Done():
			return nil, &queryError{msg: fmt.Sprintf("prometheus: no free query slot within %s (%d in flight)", p.timeout, cap(p.slots)), err: ctx.Err()}
		}
	}
	var opts []promv1.Option
	// Prometheus' own evaluation timeout. The client writes it with time.Duration.String, which
	// Prometheus cannot parse for fractions ("1.5s"): whole seconds only.
	if server := p.timeout.Truncate(time.Second); server > 0 {
		opts = append(opts, promv1.WithTimeout(server))
	}
	began := time.Now()
	v, warnings, _, err := p.api.Query(ctx, query, at, opts...)
	telemetry.Query(time.Since(began), err, errors.Is(err, context.DeadlineExceeded))
	if err == nil {
		if w, partial := PartialWarning(warnings); partial {
			return nil, &partialError{warning: w}
		}
		return v, nil
	}
	var apiErr *promv1.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, &queryError{msg: fmt.Sprintf("prometheus timeout after %s", p.timeout), err: err}
	case errors.Is(err, context.Canceled):
		return nil, &queryError{msg: "prometheus query canceled", err: err}
	case errors.As(err, &apiErr):
		return nil, &queryError{msg: "prometheus " + describeAPIError(apiErr), err: err}
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return nil, fmt.Errorf("prometheus unreachable: %w", err)
	}
	return nil, fmt.Errorf("prometheus request failed: %w", err)
}

// ErrPartialData is sample.ErrPartialData: an answer that warns of missing data.
var ErrPartialData = sample.ErrPartialData

// PartialWarning returns the first warning of a query's answer that says its data may be
// incomplete, and whether there is one. Every warning counts except the informational
// annotations ("PromQL info: ...", which Prometheus 2.x sent as warnings before its API had
// infos, e.g. "metric might not be a counter"): they say nothing about missing data.
func PartialWarning(warnings []string) (string, bool) {
	for _, w := range warnings {
		if strings.HasPrefix(strings.TrimSpace(w), "PromQL info:") {
			continue
		}
		return w, true
	}
	return "", false
}

// partialError is an answer with a warning of missing data.
type partialError struct{ warning string }

func (e *partialError) Error() string {
	return "partial data, read as no data: prometheus warned: " + e.warning
}
func (e *partialError) Is(target error) bool { return target == ErrPartialData }

// queryError is a failed query with a short message; Unwrap gives the client's error.
type queryError struct {
	msg string
	err error
}

func (e *queryError) Error() string { return e.msg }
func (e *queryError) Unwrap() error { return e.err }

// describeAPIError says what Prometheus answered: the error type and message of an API error
// ("bad_data: 1:5: parse error ..."), or for other HTTP errors the status and, when the body
// is Prometheus' error JSON (a 503 for a query timeout, say), its type and message.
func describeAPIError(e *promv1.Error) string {
	var body struct {
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}
	if e.Detail != "" && json.Unmarshal([]byte(e.Detail), &body) == nil && body.Error != "" {
		if body.ErrorType != "" {
			return fmt.Sprintf("%s: %s: %s", e.Msg, body.ErrorType, body.Error)
		}
		return fmt.Sprintf("%s: %s", e.Msg, body.Error)
	}
	if e.Type == promv1.ErrServer || e.Type == promv1.ErrClient {
		return e.Msg // "server error: 502"
	}
	return e.Error()
}

func unexpectedType(v model.Value) error {
	if v == nil {
		return errors.New("prometheus returned no result")
	}
	return fmt.Errorf("prometheus returned a %s, want a vector or a scalar (is the query a range vector?)", v.Type())
}

func finite(v float64) Sample {
	switch {
	case math.IsNaN(v):
		return Sample{Status: NoData, Message: "value is NaN"}
	case math.IsInf(v, 1):
		return Sample{Status: NoData, Message: "value is +Inf"}
	case math.IsInf(v, -1):
		return Sample{Status: NoData, Message: "value is -Inf"}
	}
	return Sample{Status: OK, Value: v}
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}

// vmPartialWarning is the warning partialFlag adds for VictoriaMetrics' isPartial.
const vmPartialWarning = "isPartial: VictoriaMetrics answered without some of its storage nodes"

// partialFlag passes VictoriaMetrics' partial answers on as warnings: a cluster whose vmselect
// could not reach every vmstorage node answers with what it had and "isPartial": true (unless
// run with -search.denyPartialResponse), a field Prometheus' API client does not read. To a
// query it is then partial data, as a Thanos partial-response warning is.
type partialFlag struct{ next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (p partialFlag) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := p.next.RoundTrip(req)
	if err != nil || res.Body == nil {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if bytes.Contains(body, []byte(`"isPartial"`)) {
		var answer map[string]json.RawMessage
		if json.Unmarshal(body, &answer) == nil && strings.TrimSpace(string(answer["isPartial"])) == "true" {
			var warnings []string
			if w, ok := answer["warnings"]; ok {
				_ = json.Unmarshal(w, &warnings)
			}
			if w, err := json.Marshal(append(warnings, vmPartialWarning)); err == nil {
				answer["warnings"] = w
				if b, err := json.Marshal(answer); err == nil {
					body = b
				}
			}
		}
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
	res.Header.Del("Content-Length")
	return res, nil
}

// bearerFromFile adds the token read from a file to every request.
type bearerFromFile struct {
	path string
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b *bearerFromFile) RoundTrip(req *http.Request) (*http.Response, error) {
	token, err := readToken(b.path)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+token)
	return b.next.RoundTrip(req)
}

func readToken(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading prometheus bearer token: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", fmt.Errorf("prometheus bearer token file %s is empty", path)
	}
	return token, nil
}
