package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/plan"
	"github.com/modelship/modelship/internal/rollout"
	"github.com/modelship/modelship/internal/routing"
)

// logDecisions writes one info line for a rollout decision and one for a scaling decision, each
// only when the pass changed something (phase, step, weights, stable or candidate; the desired
// replica count), with the inputs that led to it, and one line for a measurement of the
// analysis that changed nothing. A pass that changes nothing and measures nothing logs nothing.
//
// obs is the rollout's observation of the pass, p the plan.
func logDecisions(log logr.Logger, before, after *v1alpha1.ModelServerStatus, obs rollout.Observation, p plan.Result, autoscaling *v1alpha1.AutoscalingSpec) {
	d := p.Decision
	if rolloutChanged(before, after) {
		kv := []any{
			"phase", transition(string(before.Phase), string(after.Phase)),
			"step", transition(fmt.Sprint(before.Rollout.Step), fmt.Sprint(after.Rollout.Step)),
			"weights", transition(weights(before.Weights), weights(after.Weights)),
			"stable", colorRevision(after.Stable),
			"candidate", colorRevision(after.Candidate),
			"ready", readyCounts(obs),
		}
		if len(d.Events) > 0 {
			reasons := make([]string, 0, len(d.Events))
			for _, e := range d.Events {
				reasons = append(reasons, e.Reason+": "+e.Message)
			}
			kv = append(kv, "reason", strings.Join(reasons, "; "))
		}
		if obs.Operation != rollout.OpNone {
			kv = append(kv, "operation", string(obs.Operation))
		}
		if m := obs.Measurement; m != nil {
			kv = append(kv, "analysis", analysisSummary(m.Results))
		}
		log.Info("Rollout decision", kv...)
	} else if m := obs.Measurement; m != nil {
		// A measurement that moves nothing (a rollout held on an inconclusive or failing
		// analysis below the failure limit) is still worth its line: it says why.
		log.Info("Rollout measured", "phase", string(after.Phase), "step", fmt.Sprint(after.Rollout.Step),
			"weights", weights(after.Weights), "failures", after.Rollout.Failures, "analysis", analysisSummary(m.Results))
	}
	s := p.Scale
	if s == nil || autoscaling == nil {
		return
	}
	prev := int32(-1)
	if before.Autoscaling != nil {
		prev = before.Autoscaling.DesiredReplicas
	}
	if prev == s.Desired {
		return
	}
	var current int32
	for _, c := range obs.Colors {
		current += c.Replicas
	}
	kv := []any{
		"current", current, "desired", s.Desired,
		"min", autoscaling.Min(), "max", autoscaling.MaxReplicas,
		"signals", proposalSummary(s.Status.Proposals),
	}
	if prev >= 0 {
		kv = append(kv, "previousDesired", prev)
	}
	if s.Status.LastScaleReason != "" {
		kv = append(kv, "reason", s.Status.LastScaleReason)
	}
	if s.Held != "" {
		kv = append(kv, "held", s.Held)
	}
	if s.Limited {
		kv = append(kv, "limited", s.LimitedReason+": "+s.LimitedMessage)
	}
	if !s.MetricsAvailable {
		kv = append(kv, "metrics", s.MetricsMessage)
	}
	log.Info("Scaling decision", kv...)
}

func rolloutChanged(before, after *v1alpha1.ModelServerStatus) bool {
	return before.Phase != after.Phase || before.Rollout.Step != after.Rollout.Step || before.Weights != after.Weights ||
		colorRevision(before.Stable) != colorRevision(after.Stable) || colorRevision(before.Candidate) != colorRevision(after.Candidate)
}

func transition(from, to string) string {
	if from == to {
		return to
	}
	if from == "" {
		from = "none"
	}
	return from + " -> " + to
}

func weights(w v1alpha1.Weights) string { return fmt.Sprintf("%d/%d", w.Stable, w.Candidate) }

func colorRevision(c *v1alpha1.ColorStatus) string {
	if c == nil {
		return "none"
	}
	return string(c.Color) + "@" + c.Revision
}

// readyCounts is "blue 2/2 green 1/1": Ready pods of the replicas asked for, per color.
func readyCounts(obs rollout.Observation) string {
	var parts []string
	for _, c := range routing.Colors {
		if o, ok := obs.Colors[c]; ok {
			parts = append(parts, fmt.Sprintf("%s %d/%d", c, o.ReadyReplicas, o.Replicas))
		}
	}
	return strings.Join(parts, " ")
}

// analysisSummary is "ttft=Pass (candidate 0.31, stable 0.30, bound <= 0.36)" per metric.
func analysisSummary(results []v1alpha1.MetricResult) string {
	parts := make([]string, 0, len(results))
	for _, r := range results {
		s := fmt.Sprintf("%s=%s (candidate %s, stable %s, bound %s)", r.Name, r.Verdict, orNone(r.Candidate), orNone(r.Stable), orNone(r.Bound))
		if r.Message != "" {
			s += ": " + r.Message
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// proposalSummary is "gpuUtilization=91 (target 70) -> 5" per signal; a signal without data
// says so instead of a value.
func proposalSummary(ps []v1alpha1.Proposal) string {
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		s := fmt.Sprintf("%s=%s (target %s)", p.Metric, orNone(p.Value), orNone(p.Target))
		if p.Replicas != nil {
			s += fmt.Sprintf(" -> %d", *p.Replicas)
		} else if p.Message != "" {
			s += ": " + p.Message
		}
		parts = append(parts, s)
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "no data"
	}
	return s
}
