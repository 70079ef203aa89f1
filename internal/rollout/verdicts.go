package rollout

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Verdicts: measurements judged against the failure limit, and analysis that holds inconclusive.

// measuredPassInStep: the last measurement was taken in the current step and passed (a
// measurement without results, when no metric is configured, passes). A measurement taken at
// the step's start is the one that advanced to it, so it belongs to the previous step.
func (m *machine) measuredPassInStep() bool {
	st := m.st
	if st.Rollout.LastMeasuredAt == nil || st.Rollout.StepStartedAt == nil || !st.Rollout.LastMeasuredAt.After(st.Rollout.StepStartedAt.Time) {
		return false
	}
	v, _ := Verdict(st.Rollout.Analysis)
	return v == v1alpha1.VerdictPass
}

// confidentPassInStep: the last measurement was taken during the current step and passed with
// confidence (confidentPass): the step may end before stepDuration.
func (m *machine) confidentPassInStep() bool {
	return m.measuredPassInStep() && confidentPass(m.st.Rollout.Analysis)
}

// passedNow: this pass brought a measurement, and it passed.
func (m *machine) passedNow() bool {
	if m.obs.Measurement == nil {
		return false
	}
	v, _ := Verdict(m.obs.Measurement.Results)
	return v == v1alpha1.VerdictPass
}

// judge records a measurement; it returns true when it rolled the rollout back. held says
// how a person holds the rollout (" while paused"), for the rollback's reason.
func (m *machine) judge(meas Measurement, held string) bool {
	st := m.st
	at := meas.At
	if at.IsZero() {
		at = m.now
	}
	st.Rollout.LastMeasuredAt = m.timeP(at)
	st.Rollout.Analysis = append([]v1alpha1.MetricResult(nil), meas.Results...)
	v, r := Verdict(meas.Results)
	switch v {
	case v1alpha1.VerdictFail:
		st.Rollout.Failures++
		st.Rollout.InconclusiveSince = nil
		reason := describe(r)
		if st.Rollout.Failures > m.pol.failureLimit {
			m.rollback(v1alpha1.OutcomeRolledBack, fmt.Sprintf("analysis failed %d time(s)%s, limit %d: %s", st.Rollout.Failures, held, m.pol.failureLimit, reason))
			return true
		}
		m.event(corev1.EventTypeWarning, EventAnalysisFailed, "measurement %d of %d tolerated failed: %s", st.Rollout.Failures, m.pol.failureLimit, reason)
	case v1alpha1.VerdictInconclusive:
		if st.Rollout.InconclusiveSince == nil {
			st.Rollout.InconclusiveSince = m.timeP(m.now)
			m.event(corev1.EventTypeNormal, EventAnalysisInconclusive, "holding step %d: %s", st.Rollout.Step, describe(r))
		}
	default:
		st.Rollout.InconclusiveSince = nil
	}
	return false
}

// inconclusiveStalled explains a live rollout that has held on inconclusive analysis for
// spec.rollout.inconclusive.reportAfter ("" otherwise): the metric's message, a hint at the cause, and what
// will happen.
func (m *machine) inconclusiveStalled() string {
	st := m.st
	if st.Phase != v1alpha1.PhaseProgressing || !judging(st) || st.Rollout.InconclusiveSince == nil {
		return ""
	}
	held := m.now.Sub(st.Rollout.InconclusiveSince.Time)
	if held < m.pol.inconclusiveReport {
		return ""
	}
	msg := firstMessage(st.Rollout.Analysis, v1alpha1.VerdictInconclusive)
	then := "it will neither promote nor roll back by itself: fix the metrics, promote, or abort (spec.rollout.inconclusive.rollbackAfter rolls back after a deadline)"
	if m.pol.inconclusiveRollback > 0 {
		then = fmt.Sprintf("spec.rollout.inconclusive.rollbackAfter rolls it back at %s", st.Rollout.InconclusiveSince.Add(m.pol.inconclusiveRollback).UTC().Format(time.RFC3339))
	}
	// The message names the instant, not the time held, so that it does not change every pass.
	return fmt.Sprintf("analysis of %s inconclusive since %s (over %s) at step %d: %s (%s); %s", st.Candidate.Revision, st.Rollout.InconclusiveSince.UTC().Format(time.RFC3339), m.pol.inconclusiveReport, st.Rollout.Step, msg, inconclusiveHint(msg), then)
}

// inconclusiveHint guesses the cause of an inconclusive result from its message.
func inconclusiveHint(msg string) string {
	l := strings.ToLower(msg)
	switch {
	case strings.Contains(l, "too few samples"):
		return "the candidate receives too little traffic at this weight for analysis.minSamples"
	case strings.Contains(l, "no data"), strings.Contains(l, "no samples"), strings.Contains(l, "empty"), strings.Contains(l, "nan"):
		return "no samples in the window: the scrape interval may exceed the window, or the pods are not scraped"
	case strings.Contains(l, "stable"):
		return "the stable color has no value to compare with"
	case strings.Contains(l, "unreachable"), strings.Contains(l, "connection"), strings.Contains(l, "timeout"), strings.Contains(l, "deadline"):
		return "Prometheus did not answer: check the analysis' Prometheus address"
	case strings.Contains(l, "no measurement"):
		return "no measurement was taken"
	default:
		return "the metrics gave no verdict"
	}
}

// confidentPass says whether a measurement lets a step end before its stepDuration
// (spec.rollout.minStepDuration): every result passed, and every result of a metric judged by
// a test (MetricResult.Confident set) is confident. A measurement without any tested metric is
// never confident: a point estimate alone does not end a step early.
func confidentPass(results []v1alpha1.MetricResult) bool {
	tested := 0
	for _, r := range results {
		if r.Verdict != v1alpha1.VerdictPass {
			return false
		}
		if r.Confident != nil {
			if !*r.Confident {
				return false
			}
			tested++
		}
	}
	return tested > 0
}
