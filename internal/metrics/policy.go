package metrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// QueryPolicy says which PromQL a ModelServer may have the controller run. Every query runs
// with the controller's Prometheus credentials (--prometheus-bearer-token-file) and its values
// land in the ModelServer's status, readable by whoever can read the ModelServer: a tenant who
// may write a ModelServer in one namespace could otherwise read any series the controller can.
// The default is QueryPolicyNamespaced.
type QueryPolicy string

const (
	// QueryPolicyAny runs any query template and reads external metrics: for a cluster where
	// whoever writes a ModelServer may read everything the controller's Prometheus credentials
	// read. An explicit opt-in (--query-policy=any).
	QueryPolicyAny QueryPolicy = "any"
	// QueryPolicyNamespaced runs the presets, the built-in signals and any query template
	// whose every series selector, as the query runs, has the matcher
	// namespace="<the ModelServer's namespace>" (namespace="{{.Namespace}}" in a template).
	// External autoscaling metrics are refused. The default.
	QueryPolicyNamespaced QueryPolicy = "namespaced"
	// QueryPolicyPresets runs only the presets' queries and the built-in autoscaling signals:
	// spec.rollout.analysis.metrics, spec.rollout.analysis.sampleQuery, prometheus and external
	// autoscaling metrics are refused.
	QueryPolicyPresets QueryPolicy = "presets"
)

// DefaultQueryPolicy is the policy when none is given: namespaced.
const DefaultQueryPolicy = QueryPolicyNamespaced

// QueryPolicies lists the policies, for flag help and errors.
var QueryPolicies = []QueryPolicy{QueryPolicyAny, QueryPolicyNamespaced, QueryPolicyPresets}

// ParseQueryPolicy reads a policy name; the empty name is DefaultQueryPolicy.
func ParseQueryPolicy(s string) (QueryPolicy, error) {
	if s == "" {
		return DefaultQueryPolicy, nil
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

// orDefault is p, or DefaultQueryPolicy when p is empty (a reconciler built without one).
func (p QueryPolicy) orDefault() QueryPolicy {
	if p == "" {
		return DefaultQueryPolicy
	}
	return p
}

// CheckQuery says whether the policy lets a ModelServer run the query template tmpl written in
// its spec (a custom query: the presets' own queries are never refused) with each of vars, the
// values it runs with (the ModelServer's namespace and name, each color's pods and pool). The
// namespaced policy checks each rendering as CheckRendered does: a key outside a string
// literal (say {{.Pool}} of a ModelServer named "or") changes how the query parses, so the
// template is judged by what it becomes. The error explains the refusal; the caller prefixes
// the field.
func (p QueryPolicy) CheckQuery(tmpl string, vars ...Vars) error {
	switch p.orDefault() {
	case QueryPolicyAny:
		return nil
	case QueryPolicyPresets:
		return errors.New("the controller's query policy (presets) runs only the presets' queries and the built-in signals: remove this query or ask the cluster's administrator")
	case QueryPolicyNamespaced:
		for _, v := range vars {
			query, err := Render(tmpl, v)
			if err != nil {
				return err
			}
			if err := checkNamespaced(query, v.Namespace, QueryPolicyNamespaced); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("unknown query policy %q", p)
	}
}

// CheckExternal says whether the policy lets a ModelServer read an external metric. The
// external metrics API answers with the controller's credentials, and the adapters behind it
// (prometheus-adapter, KEDA) serve series of any namespace whatever namespace is asked: only
// the any policy reads them.
func (p QueryPolicy) CheckExternal() error {
	switch p := p.orDefault(); p {
	case QueryPolicyAny:
		return nil
	case QueryPolicyNamespaced, QueryPolicyPresets:
		return fmt.Errorf("the controller's query policy (%s) does not read external metrics: the external metrics API answers with the controller's credentials about any namespace; use a prometheus metric scoped to namespace=\"{{.Namespace}}\" or ask the cluster's administrator", p)
	default:
		return fmt.Errorf("unknown query policy %q", p)
	}
}

// CheckRendered says whether the policy lets a ModelServer in namespace run query, rendered
// and about to run: under namespaced and presets, every series selector must have
// namespace="<namespace>" (the presets' and the admitted templates' queries all do). It checks
// the exact text sent to Prometheus, with Prometheus's own parser.
func (p QueryPolicy) CheckRendered(query, namespace string) error {
	switch p.orDefault() {
	case QueryPolicyAny:
		return nil
	case QueryPolicyNamespaced, QueryPolicyPresets:
		return checkNamespaced(query, namespace, p.orDefault())
	default:
		return fmt.Errorf("unknown query policy %q", p)
	}
}

// checkNamespaced parses query as PromQL and requires every series selector to match namespace
// exactly; the refusal names policy.
func checkNamespaced(query, namespace string, policy QueryPolicy) error {
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
		return fmt.Errorf(`the controller's query policy (%s) runs only queries whose every selector has namespace="{{.Namespace}}"; %s does not`, policy, strings.Join(unscoped, ", "))
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

// Enforce returns q checking every query against policy for a ModelServer in namespace before
// it runs (CheckRendered): a refused query is not sent, and answers as an error naming the
// policy. Wrap the querier of every query run on a ModelServer's behalf (analysis, prometheus
// autoscaling metrics), not the built-in signals' cluster-wide ones. builtIn are queries the
// controller rendered itself for this ModelServer (the gateway's, which select the gateway's
// scrape target and the ModelServer's own Service or route by name): they run as the built-in
// signals do.
func Enforce(q Querier, policy QueryPolicy, namespace string, builtIn ...string) Querier {
	if policy.orDefault() == QueryPolicyAny {
		return q
	}
	return enforced{q: q, policy: policy, namespace: namespace, builtIn: builtIn}
}

type enforced struct {
	q         Querier
	policy    QueryPolicy
	namespace string
	builtIn   []string
}

func (e enforced) check(query string) error {
	if slices.Contains(e.builtIn, query) {
		return nil
	}
	return e.policy.CheckRendered(query, e.namespace)
}

func (e enforced) Scalar(ctx context.Context, query string, at time.Time) Sample {
	if err := e.check(query); err != nil {
		return Sample{Status: Error, Message: "not run: " + err.Error()}
	}
	return e.q.Scalar(ctx, query, at)
}

func (e enforced) Vector(ctx context.Context, query string, at time.Time) ([]Series, error) {
	if err := e.check(query); err != nil {
		return nil, fmt.Errorf("not run: %w", err)
	}
	return e.q.Vector(ctx, query, at)
}
