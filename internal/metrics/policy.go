package metrics

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// QueryPolicy says which PromQL a ModelServer may have the controller run. Every query runs
// with the controller's Prometheus credentials (--prometheus-bearer-token-file) and its values
// land in the ModelServer's status, readable by whoever can read the ModelServer: a tenant who
// may write a ModelServer in one namespace could otherwise read any series the controller can.
type QueryPolicy string

const (
	// QueryPolicyAny runs any query template (the default: one team owns the cluster).
	QueryPolicyAny QueryPolicy = "any"
	// QueryPolicyNamespaced runs the presets, the built-in signals and any query template
	// whose every series selector has the matcher namespace="<the ModelServer's namespace>"
	// (namespace="{{.Namespace}}" in a template).
	QueryPolicyNamespaced QueryPolicy = "namespaced"
	// QueryPolicyPresets runs only the presets' queries and the built-in autoscaling signals:
	// spec.rollout.analysis.metrics, spec.rollout.analysis.sampleQuery and prometheus
	// autoscaling metrics are refused.
	QueryPolicyPresets QueryPolicy = "presets"
)

// QueryPolicies lists the policies, for flag help and errors.
var QueryPolicies = []QueryPolicy{QueryPolicyAny, QueryPolicyNamespaced, QueryPolicyPresets}

// ParseQueryPolicy reads a policy name; the empty name is QueryPolicyAny.
func ParseQueryPolicy(s string) (QueryPolicy, error) {
	if s == "" {
		return QueryPolicyAny, nil
	}
	for _, p := range QueryPolicies {
		if string(p) == s {
			return p, nil
		}
	}
	names := make([]string, len(QueryPolicies))
	for i, p := range QueryPolicies {
		names[i] = string(p)
	}
	return "", fmt.Errorf("unknown query policy %q: want one of %s", s, strings.Join(names, ", "))
}

// CheckQuery says whether the policy lets a ModelServer in namespace run the query template
// tmpl written in its spec (a custom query: the presets' own queries are never checked). The
// error explains the refusal; the caller prefixes the field.
func (p QueryPolicy) CheckQuery(tmpl, namespace string) error {
	switch p {
	case QueryPolicyAny, "":
		return nil
	case QueryPolicyPresets:
		return errors.New("the controller's query policy (presets) runs only the presets' queries and the built-in signals: remove this query or ask the cluster's administrator")
	case QueryPolicyNamespaced:
		return checkNamespaced(tmpl, namespace)
	default:
		return fmt.Errorf("unknown query policy %q", p)
	}
}

// checkNamespaced renders tmpl for namespace, parses it as PromQL and requires every series
// selector to match namespace exactly.
func checkNamespaced(tmpl, namespace string) error {
	query, err := Render(tmpl, Vars{
		Namespace: namespace,
		Name:      "model",
		Color:     "blue",
		Revision:  "0123456789",
		Pods:      PodRegex("model-blue"),
		Window:    PromDuration(ScrapesPerWindow * DefaultScrapeInterval),
	})
	if err != nil {
		return err
	}
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(query)
	if err != nil {
		return fmt.Errorf("parsing the rendered query as PromQL: %w", err)
	}
	var unscoped []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if !scopedTo(vs.LabelMatchers, namespace) {
			unscoped = append(unscoped, vs.String())
		}
		return nil
	})
	if len(unscoped) > 0 {
		return fmt.Errorf(`the controller's query policy (namespaced) runs only queries whose every selector has namespace="{{.Namespace}}"; %s does not`, strings.Join(unscoped, ", "))
	}
	return nil
}

func scopedTo(ms []*labels.Matcher, namespace string) bool {
	for _, m := range ms {
		if m.Name == "namespace" && m.Type == labels.MatchEqual && m.Value == namespace {
			return true
		}
	}
	return false
}
