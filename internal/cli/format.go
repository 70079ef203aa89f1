package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/health"
)

// Output formats accepted by -o.
const (
	outputTable = ""
	outputJSON  = "json"
	outputYAML  = "yaml"
)

func validateOutput(format string) error {
	switch format {
	case outputTable, outputJSON, outputYAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use json or yaml, or leave -o out for a table", format)
}

// writeStructured prints v as indented JSON or as YAML.
func writeStructured(w io.Writer, v any, format string) error {
	switch format {
	case outputJSON:
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return fmt.Errorf("encoding JSON: %w", err)
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q", format)
}

// forOutput returns a copy of ms with its kind set and managed fields left out, as kubectl prints.
func forOutput(ms *v1alpha1.ModelServer) *v1alpha1.ModelServer {
	out := ms.DeepCopy()
	out.APIVersion = v1alpha1.GroupVersion.String()
	out.Kind = "ModelServer"
	out.ManagedFields = nil
	return out
}

func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// writeTable prints the ModelServers one per line: NAME PHASE STABLE CANDIDATE WEIGHT REPLICAS AGE,
// with a NAMESPACE column first when withNamespace.
func writeTable(w io.Writer, items []v1alpha1.ModelServer, withNamespace bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "NAME\tPHASE\tSTABLE\tCANDIDATE\tWEIGHT\tREPLICAS\tAGE"
	if withNamespace {
		header = "NAMESPACE\t" + header
	}
	fmt.Fprintln(tw, header)
	for i := range items {
		ms := &items[i]
		st := ms.Status
		stable, candidate, weight := "<none>", "<none>", "-"
		if st.Stable != nil {
			stable = orNone(st.Stable.Revision)
		}
		if st.Candidate != nil {
			candidate = orNone(st.Candidate.Revision)
		}
		if health.InProgress(ms) {
			weight = fmt.Sprintf("%d%%", st.Weights.Candidate)
		}
		phase := string(st.Phase)
		if phase == "" {
			phase = "<unknown>"
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d/%d\t%s", ms.Name, phase, stable, candidate, weight,
			st.ReadyReplicas, st.Replicas, age(ms.CreationTimestamp, now))
		if withNamespace {
			row = ms.Namespace + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// writeHistory prints status.history newest first: REVISION IMAGE OUTCOME AGE REASON.
func writeHistory(w io.Writer, ms *v1alpha1.ModelServer, now time.Time) error {
	if len(ms.Status.History) == 0 {
		_, err := fmt.Fprintf(w, "No rollout history for modelserver %s/%s yet.\n", ms.Namespace, ms.Name)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tIMAGE\tOUTCOME\tAGE\tREASON")
	for _, r := range ms.Status.History {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Revision, orNone(r.Image), r.Outcome, age(r.At, now), r.Reason)
	}
	return tw.Flush()
}

// writeStatus prints everything a person needs to follow a rollout: phase and step, weights,
// each color's replicas, the analysis, the autoscaler's proposals, conditions and recent events.
func writeStatus(w io.Writer, ms *v1alpha1.ModelServer, events []corev1.Event, now time.Time) error {
	st := ms.Status
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	phase := string(st.Phase)
	if phase == "" {
		phase = "<unknown> (the controller has not written a status yet)"
	}
	if s := health.StepText(ms); s != "" {
		phase += ", " + s
		if st.Rollout.StepStartedAt != nil {
			phase += ", for " + age(*st.Rollout.StepStartedAt, now)
		}
	}
	fmt.Fprintf(tw, "Name:\t%s\n", ms.Name)
	fmt.Fprintf(tw, "Namespace:\t%s\n", ms.Namespace)
	fmt.Fprintf(tw, "Phase:\t%s\n", phase)
	gen := fmt.Sprintf("%d (observed %d)", ms.Generation, st.ObservedGeneration)
	if st.ObservedGeneration < ms.Generation {
		gen += ": the controller has not acted on the latest spec yet"
	}
	fmt.Fprintf(tw, "Generation:\t%s\n", gen)
	fmt.Fprintf(tw, "Spec revision:\t%s\n", orNone(st.Revision))
	if ms.Spec.Paused {
		fmt.Fprintf(tw, "Paused:\ttrue (spec.paused)\n")
	}
	if st.Stable != nil || st.Candidate != nil {
		fmt.Fprintf(tw, "Weights:\tstable %d%%, candidate %d%%\n", st.Weights.Stable, st.Weights.Candidate)
	}
	if st.Rollout.RolledBackRevision != "" {
		fmt.Fprintf(tw, "Rolled back:\t%s (not retried while the spec asks for it)\n", st.Rollout.RolledBackRevision)
	}
	for _, k := range []struct {
		label string
		until *metav1.Time
	}{
		{"Previous stable scales down", st.Rollout.KeepWarmUntil},
		{"Kept for inspection, scales down", st.Rollout.InspectUntil},
		{"Draining, scales down", st.Rollout.DrainUntil},
	} {
		if k.until != nil && k.until.After(now) {
			fmt.Fprintf(tw, "%s:\tin %s\n", k.label, duration.HumanDuration(k.until.Sub(now)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nReplicas: %d ready of %d\n", st.ReadyReplicas, st.Replicas)
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  ROLE\tCOLOR\tREVISION\tIMAGE\tREADY\tWARM")
	for _, c := range []struct {
		role string
		cs   *v1alpha1.ColorStatus
	}{{"stable", st.Stable}, {"candidate", st.Candidate}} {
		if c.cs == nil {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d/%d\t%t\n", c.role, c.cs.Color, c.cs.Revision, orNone(c.cs.Image),
			c.cs.ReadyReplicas, c.cs.Replicas, c.cs.Warm)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if a := st.Autoscaling; a != nil {
		fmt.Fprintf(w, "\nAutoscaling: desired %d", a.DesiredReplicas)
		if a.LastScaleTime != nil {
			fmt.Fprintf(w, ", last scaled %s ago (%s)", age(*a.LastScaleTime, now), a.LastScaleReason)
		}
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  METRIC\tVALUE\tTARGET\tPROPOSAL\tMESSAGE")
		for _, p := range a.Proposals {
			proposal := "-"
			if p.Replicas != nil {
				proposal = fmt.Sprint(*p.Replicas)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", p.Metric, orNone(p.Value), orNone(p.Target), proposal, p.Message)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, c := range a.LearnedCapacities {
			fmt.Fprintf(w, "  learnt capacity of %s: %s per replica, from %d sample(s), the last %s ago", c.Metric, c.PerReplica, c.Samples, age(c.LastSampleTime, now))
			if c.Revision != "" {
				fmt.Fprintf(w, ", on revision %s", c.Revision)
			}
			fmt.Fprintln(w)
		}
	}

	if len(st.Rollout.Analysis) > 0 {
		fmt.Fprintf(w, "\nAnalysis: %d failed measurement(s) in this rollout", st.Rollout.Failures)
		if st.Rollout.LastMeasuredAt != nil {
			fmt.Fprintf(w, ", last measured %s ago", age(*st.Rollout.LastMeasuredAt, now))
		}
		if st.Rollout.InconclusiveSince != nil {
			fmt.Fprintf(w, ", inconclusive for %s", age(*st.Rollout.InconclusiveSince, now))
		}
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  METRIC\tCANDIDATE\tSTABLE\tBOUND\tVERDICT\tAGE\tMESSAGE")
		for _, m := range st.Rollout.Analysis {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, orNone(m.Candidate), orNone(m.Stable),
				orNone(m.Bound), m.Verdict, age(m.At, now), m.Message)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if len(st.Conditions) > 0 {
		fmt.Fprintln(w, "\nConditions:")
		tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
		for _, c := range st.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, age(c.LastTransitionTime, now), c.Message)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "\nEvents: <none>")
		return err
	}
	fmt.Fprintln(w, "\nEvents:")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  AGE\tTYPE\tREASON\tMESSAGE")
	for _, e := range events {
		count := ""
		switch {
		case e.Series != nil && e.Series.Count > 1:
			count = fmt.Sprintf(" (x%d)", e.Series.Count)
		case e.Count > 1:
			count = fmt.Sprintf(" (x%d)", e.Count)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s%s\n", age(eventTime(e), now), e.Type, e.Reason,
			strings.TrimSpace(e.Message), count)
	}
	return tw.Flush()
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(e corev1.Event) metav1.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return metav1.Time{Time: e.Series.LastObservedTime.Time}
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.Time{Time: e.EventTime.Time}
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp
	}
	return e.CreationTimestamp
}

// recentEvents keeps the events about ms (matched by UID when the event has one), oldest first,
// at most limit of them.
func recentEvents(all []corev1.Event, ms *v1alpha1.ModelServer, limit int) []corev1.Event {
	var out []corev1.Event
	for _, e := range all {
		io := e.InvolvedObject
		if io.Kind != "ModelServer" || io.Name != ms.Name || (io.Namespace != "" && io.Namespace != ms.Namespace) {
			continue
		}
		if io.UID != "" && ms.UID != "" && io.UID != ms.UID {
			continue
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(out[i]).Time.Before(eventTime(out[j]).Time) })
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}
