package metrics

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/modelship/modelship/internal/window"
)

// Vars are the values a query template is rendered with. Each is escaped for use inside a
// PromQL double-quoted string, so templates must quote them with "..." (not backticks):
//
//	rate(vllm:e2e_request_latency_seconds_count{namespace="{{.Namespace}}",pod=~"{{.Pods}}"}[{{.Window}}])
type Vars struct {
	// Namespace of the ModelServer.
	Namespace string
	// Name of the ModelServer.
	Name string
	// Color is blue or green.
	Color string
	// Revision is the template hash the color runs.
	Revision string
	// Pods is a regular expression matching the color's pods (see PodRegex), for pod=~"...".
	Pods string
	// Pool is a regular expression matching the color's InferencePool (both colors' pools in
	// autoscaling queries), for the endpoint picker's metrics: name=~"{{.Pool}}" (or
	// inference_pool=~). Meaningful with spec.gateway.backend InferencePool.
	Pool string
	// Window is the analysis window as a PromQL duration (see PromDuration), e.g. 2m.
	Window string
	// Service is a regular expression matching the color's Service name, and Route the
	// ModelServer's HTTPRoute name as Traefik writes it in router names (TraefikName): for the
	// gateway's metrics (the built-in gateway queries; not a key the API admits in templates).
	Service, Route string
	// GatewayNamespace is the namespace label of the gateway's own series (the controller's
	// --gateway-metrics-namespace): the gateway queries read only its scrape target's series.
	GatewayNamespace string
}

func (v Vars) data() map[string]string {
	return map[string]string{
		"Namespace": escape(v.Namespace),
		"Name":      escape(v.Name),
		"Color":     escape(v.Color),
		"Revision":  escape(v.Revision),
		"Pods":      escape(v.Pods),
		"Pool":      escape(v.Pool),
		"Window":    escape(v.Window),

		"Service":          escape(v.Service),
		"Route":            escape(v.Route),
		"GatewayNamespace": escape(v.GatewayNamespace),
	}
}

// stringEscaper makes a value safe inside a PromQL double-quoted string (Go's escaping rules).
// A regular expression's own backslashes are doubled too: PromQL unescapes the string before
// compiling the regex, so `\.` in the regex is written "\\." in the query.
var stringEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`)

func escape(s string) string { return stringEscaper.Replace(s) }

// Render renders a query template with v. A key other than those of Vars is an error, as is a
// template that does not parse. The result is not checked as PromQL.
func Render(tmpl string, v Vars) (string, error) {
	t, err := parse(tmpl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Execute(&b, v.data()); err != nil {
		return "", fmt.Errorf("rendering query template: %w", err)
	}
	return b.String(), nil
}

func parse(tmpl string) (*template.Template, error) {
	if strings.TrimSpace(tmpl) == "" {
		return nil, errors.New("query template is empty")
	}
	t, err := template.New("query").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return nil, fmt.Errorf("parsing query template: %w", err)
	}
	return t, nil
}

// Validate parses a query template and renders it with dummy values, so that a template that
// does not parse or uses an unknown key is rejected with a clear error before any query runs.
func Validate(tmpl string) error {
	_, err := Render(tmpl, Vars{
		Namespace: "default",
		Name:      "model",
		Color:     "blue",
		Revision:  "0123456789",
		Pods:      PodRegex("model-blue"),
		Pool:      regexp.QuoteMeta("model-blue"),
		Window:    PromDuration(window.ScrapesPerWindow * window.DefaultScrapeInterval),
	})
	return err
}

// Pod names of a Deployment are generated from "<deployment>-<pod-template-hash>-" by the API
// server, which cuts that base to maxGeneratedBase characters before adding
// generatedSuffix random ones: pods of a long-named Deployment have 63-character names that
// end inside the hash (or inside the Deployment's name).
const (
	maxGeneratedBase = 58
	generatedSuffix  = 5
	maxHashLength    = 10
)

// MaxExactPodPrefix is the longest Deployment name whose pods' names are never cut by the API
// server, so that PodRegex matches its pods and no other Deployment's. Name Deployments within
// it (e.g. a cut ModelServer name plus a short hash, then the color).
const MaxExactPodPrefix = maxGeneratedBase - maxHashLength - 2

// PodRegex returns a regular expression matching exactly the pods of the Deployment whose pods
// are named after podNamePrefix (the Deployment's name): the prefix, the ReplicaSet's
// pod-template hash and the pod's random suffix. Prometheus anchors regex matchers, so
// "llama-blue" does not match the pods of "llama-blue-2". The prefix is quoted with
// regexp.QuoteMeta; Render escapes the result for the PromQL string.
//
// A prefix longer than MaxExactPodPrefix gives pods whose names the API server cuts; the
// expression then also matches the cut form (63 characters), which a Deployment named after the
// prefix plus a dash and more could share. From 58 characters on the cut falls inside the
// prefix, and two names alike in their first 58 characters (say the same long name with -blue
// and -green) cannot be told apart by pod name at all.
func PodRegex(podNamePrefix string) string {
	quoted := regexp.QuoteMeta(podNamePrefix)
	full := quoted + "-[a-z0-9]+-[a-z0-9]+"
	switch n := len(podNamePrefix); {
	case n+1+maxHashLength+1 <= maxGeneratedBase:
		return full
	case n+1 < maxGeneratedBase:
		// The base may be cut inside the hash: prefix, dash, then exactly enough characters.
		rest := maxGeneratedBase + generatedSuffix - n - 1
		return "(?:" + full + "|" + quoted + "-[-a-z0-9]{" + strconv.Itoa(rest) + "})"
	default:
		// The base is cut inside (or right after) the prefix.
		return regexp.QuoteMeta(podNamePrefix[:min(n, maxGeneratedBase)]) +
			"-?[a-z0-9]{" + strconv.Itoa(generatedSuffix) + "}"
	}
}

// AnalysisWindow is window as a PromQL duration for the queries' {{.Window}}.
func AnalysisWindow(window time.Duration) string {
	return PromDuration(window)
}

// PromDuration writes d as a PromQL duration in the largest unit that divides it exactly
// (90s -> "90s", 2m -> "2m", 1h -> "1h", 1500ms -> "1500ms"). It is rounded down to the
// millisecond; zero and negative durations are "0s".
func PromDuration(d time.Duration) string {
	ms := d.Milliseconds()
	if ms <= 0 {
		return "0s"
	}
	units := []struct {
		suffix string
		ms     int64
	}{
		{"h", int64(time.Hour / time.Millisecond)},
		{"m", int64(time.Minute / time.Millisecond)},
		{"s", int64(time.Second / time.Millisecond)},
	}
	for _, u := range units {
		if ms%u.ms == 0 {
			return strconv.FormatInt(ms/u.ms, 10) + u.suffix
		}
	}
	return strconv.FormatInt(ms, 10) + "ms"
}
