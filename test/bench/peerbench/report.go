package peerbench

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/modelship/modelship/internal/metrics"
)

// Window is the span over which latency percentiles are read (and the SLO judged).
const Window = 10 * time.Second

// SLO is the latency objective: p95 time to first token and p95 inter-token latency.
type SLO struct{ TTFT, ITL time.Duration }

// at is the last point at or before t (the first point if t precedes them all).
func at(points []Point, t time.Time) Point {
	i := sort.Search(len(points), func(i int) bool { return points[i].At.After(t) })
	if i == 0 {
		return points[0]
	}
	return points[i-1]
}

// p95 of the observations between two points; ok is false when there were none.
func p95(later, earlier metrics.Histogram) (float64, bool) {
	d := Delta(later, earlier)
	if d.Total() <= 0 {
		return 0, false
	}
	v, err := d.Quantile(0.95)
	return v, err == nil
}

// Windowed is a run's latency and load per Window, from its start.
type Windowed struct {
	Start            time.Duration
	TTFT, ITL        float64 // p95 in seconds; NaN without observations
	Served, Errors5x float64
	Met              bool
}

// Windows cuts a run into Windows and judges each against the SLO: a window meets it when its
// p95 TTFT and ITL are within the SLO and it answered no 5xx; a window that served nothing and
// failed nothing meets it.
func Windows(r *Run, slo SLO) []Windowed {
	if len(r.Points) == 0 {
		return nil
	}
	end := r.Points[len(r.Points)-1].At
	var out []Windowed
	for t := r.Start; !t.Add(Window).After(end); t = t.Add(Window) {
		a, b := at(r.Points, t), at(r.Points, t.Add(Window))
		w := Windowed{Start: t.Sub(r.Start), TTFT: math.NaN(), ITL: math.NaN()}
		if v, ok := p95(b.TTFT, a.TTFT); ok {
			w.TTFT = v
		}
		if v, ok := p95(b.ITL, a.ITL); ok {
			w.ITL = v
		}
		w.Served = sum(b.Served) - sum(a.Served)
		w.Errors5x = errors5xx(b) - errors5xx(a)
		ttftOK := math.IsNaN(w.TTFT) || w.TTFT <= slo.TTFT.Seconds()
		itlOK := math.IsNaN(w.ITL) || w.ITL <= slo.ITL.Seconds()
		w.Met = ttftOK && itlOK && w.Errors5x == 0
		out = append(out, w)
	}
	return out
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

func errors5xx(p Point) float64 {
	t := 0.0
	for code, v := range p.Responses {
		if strings.HasPrefix(code, "5") {
			t += v
		}
	}
	return t
}

// ScaleFigures are the autoscaling scenario's figures of one contender.
type ScaleFigures struct {
	SLOMinutes, Minutes float64
	GPUHours            float64
	ScaleEvents         int
	// StepToReplica is the time from the load step to the first replica asked for above what
	// was asked at the step; negative when none was.
	StepToReplica time.Duration
	// BeforeOutage is the replicas asked for when Prometheus stopped; OutageMin and OutageMax
	// the fewest and most asked for until 30s after it came back.
	BeforeOutage, OutageMin, OutageMax int32
	Errors5xx                          float64
	Served                             float64
}

// Scale computes the autoscaling figures of a run.
func Scale(r *Run, slo SLO) ScaleFigures {
	f := ScaleFigures{StepToReplica: -1}
	ws := Windows(r, slo)
	for _, w := range ws {
		if w.Met {
			f.SLOMinutes += Window.Minutes()
		}
	}
	f.Minutes = float64(len(ws)) * Window.Minutes()
	pts := r.Points
	last := pts[len(pts)-1]
	f.Errors5xx, f.Served = errors5xx(last), sum(last.Served)
	for i := 1; i < len(pts); i++ {
		f.GPUHours += float64(pts[i-1].GPUs) * pts[i].At.Sub(pts[i-1].At).Hours()
		if pts[i].Desired >= 0 && pts[i-1].Desired >= 0 && pts[i].Desired != pts[i-1].Desired {
			f.ScaleEvents++
		}
	}
	if step, ok := r.Events["step"]; ok {
		base := at(pts, step).Desired
		for _, p := range pts {
			if p.At.After(step) && p.Desired > base {
				f.StepToReplica = p.At.Sub(step)
				break
			}
		}
	}
	if start, ok := r.Events["outage-start"]; ok {
		end := r.Events["outage-end"].Add(30 * time.Second)
		f.BeforeOutage = at(pts, start).Desired
		f.OutageMin, f.OutageMax = f.BeforeOutage, f.BeforeOutage
		for _, p := range pts {
			if p.At.After(start) && p.At.Before(end) && p.Desired >= 0 {
				f.OutageMin, f.OutageMax = min(f.OutageMin, p.Desired), max(f.OutageMax, p.Desired)
			}
		}
	}
	return f
}

// RolloutFigures are one rollout's figures.
type RolloutFigures struct {
	Verdict string
	// Decided is the time from the new image to the verdict; negative when undecided.
	Decided time.Duration
	// ImageRequests are the requests the rollout's image served until the rollout's end (the
	// bad release: over the whole horizon, whatever the verdict).
	ImageRequests float64
	// Errors5xx are the 5xx the clients saw from the new image until the rollout's end.
	Errors5xx float64
	// ServedTotal is every request served in the same span.
	ServedTotal float64
}

// Rollout computes the figures of the named rollout ("good", "bad", "outage") of a run.
func Rollout(r *Run, name, image string) RolloutFigures {
	f := RolloutFigures{Verdict: r.Verdicts[name], Decided: -1}
	began, ok := r.Events[name]
	if !ok || len(r.Points) == 0 {
		return f
	}
	if v, ok := r.Events[name+"-verdict"]; ok {
		f.Decided = v.Sub(began)
	}
	end, ok := r.Events[name+"-end"]
	if !ok {
		end = r.Points[len(r.Points)-1].At
	}
	a, b := at(r.Points, began), at(r.Points, end)
	f.ImageRequests = b.Served[image] - a.Served[image]
	f.Errors5xx = errors5xx(b) - errors5xx(a)
	f.ServedTotal = sum(b.Served) - sum(a.Served)
	return f
}

// WriteCSV writes every run's points, one row per point, with the latency of the Window
// ending at it.
func WriteCSV(path string, runs []*Run) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"contender", "scenario", "t_s", "desired", "pods", "ready", "gpus", "phase", "canary_weight",
		"ttft_p95_s", "itl_p95_s", "served_total", "errors_5xx_total", "events", "round", "why"})
	for _, r := range runs {
		for i, p := range r.Points {
			ttft, itl := "", ""
			prev := at(r.Points[:i+1], p.At.Add(-Window))
			if v, ok := p95(p.TTFT, prev.TTFT); ok {
				ttft = strconv.FormatFloat(v, 'f', 3, 64)
			}
			if v, ok := p95(p.ITL, prev.ITL); ok {
				itl = strconv.FormatFloat(v, 'f', 4, 64)
			}
			var events []string
			for name, t := range r.Events {
				if !t.After(p.At) && (i == 0 || t.After(r.Points[i-1].At)) {
					events = append(events, name)
				}
			}
			sort.Strings(events)
			_ = w.Write([]string{r.Contender, r.Scenario, strconv.FormatFloat(p.At.Sub(r.Start).Seconds(), 'f', 1, 64),
				strconv.Itoa(int(p.Desired)), strconv.Itoa(p.Pods), strconv.Itoa(p.Ready), strconv.Itoa(p.GPUs), p.Phase,
				strconv.Itoa(int(p.Weight)), ttft, itl, strconv.FormatFloat(sum(p.Served), 'f', 0, 64),
				strconv.FormatFloat(errors5xx(p), 'f', 0, 64), strings.Join(events, " "), strconv.Itoa(max(r.Round, 1)), p.Why})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// ratio formats a/b, "n/a" when b is not positive or a is negative (an absent figure).
func ratio(a, b float64) string {
	if b <= 0 || a < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", a/b)
}

// seconds formats a duration in seconds, -1 for a negative (absent) one.
func seconds(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return fmt.Sprintf("%.1f", d.Seconds())
}

// Summary prints the figures as key=value lines, contender by contender, then modelship's
// ratios to each peer. scale and rollouts hold the runs by contender.
func Summary(scale, rollouts map[string]*Run, o *Options, slo SLO) []string {
	var lines []string
	add := func(k string, v any) { lines = append(lines, fmt.Sprintf("%s=%v", k, v)) }
	key := func(name string) string { return strings.ReplaceAll(name, "-", "_") }
	names := func(m map[string]*Run) []string {
		var out []string
		for n := range m {
			out = append(out, n)
		}
		sort.Strings(out)
		return out
	}
	sf := map[string]ScaleFigures{}
	for _, n := range names(scale) {
		f := Scale(scale[n], slo)
		sf[n] = f
		add(key(n)+"_slo_minutes", fmt.Sprintf("%.2f", f.SLOMinutes))
		add(key(n)+"_minutes", fmt.Sprintf("%.2f", f.Minutes))
		add(key(n)+"_gpu_hours", fmt.Sprintf("%.4f", f.GPUHours))
		add(key(n)+"_scale_events", f.ScaleEvents)
		add(key(n)+"_step_to_first_replica_s", seconds(f.StepToReplica))
		add(key(n)+"_outage_replicas_before", f.BeforeOutage)
		add(key(n)+"_outage_replicas_min", f.OutageMin)
		add(key(n)+"_outage_replicas_max", f.OutageMax)
		add(key(n)+"_scale_5xx", fmt.Sprintf("%.0f", f.Errors5xx))
		add(key(n)+"_scale_served", fmt.Sprintf("%.0f", f.Served))
	}
	rf := map[string]map[string]RolloutFigures{}
	for _, n := range names(rollouts) {
		rf[n] = map[string]RolloutFigures{}
		for _, r := range []struct{ name, image string }{{"good", o.GoodImage}, {"bad", o.BadImage}, {"outage", o.OutageImage}} {
			f := Rollout(rollouts[n], r.name, r.image)
			rf[n][r.name] = f
			verdict := f.Verdict
			if verdict == Undecided {
				verdict = "undecided"
			}
			add(key(n)+"_"+r.name+"_verdict", verdict)
			add(key(n)+"_"+r.name+"_decided_s", seconds(f.Decided))
			add(key(n)+"_"+r.name+"_5xx", fmt.Sprintf("%.0f", f.Errors5xx))
			if r.name == "bad" {
				add(key(n)+"_bad_requests", fmt.Sprintf("%.0f", f.ImageRequests))
				add(key(n)+"_bad_share", ratio(f.ImageRequests, f.ServedTotal))
			}
		}
	}
	for _, base := range names(scale) {
		if !strings.HasPrefix(base, "modelship") {
			continue
		}
		for _, n := range names(scale) {
			if strings.HasPrefix(n, "modelship") {
				continue
			}
			prefix := key(strings.TrimPrefix(strings.TrimPrefix(base, "modelship"), "-"))
			if prefix != "" {
				prefix += "_"
			}
			add(prefix+"gpu_hours_vs_"+key(n), ratio(sf[base].GPUHours, sf[n].GPUHours))
			add(prefix+"slo_minutes_vs_"+key(n), ratio(sf[base].SLOMinutes, sf[n].SLOMinutes))
		}
	}
	if m, ok := rf["modelship"]; ok {
		for _, n := range names(rollouts) {
			if n == "modelship" {
				continue
			}
			add("bad_requests_vs_"+key(n), ratio(m["bad"].ImageRequests, rf[n]["bad"].ImageRequests))
			add("bad_decided_vs_"+key(n), ratio(m["bad"].Decided.Seconds(), rf[n]["bad"].Decided.Seconds()))
			add("good_decided_vs_"+key(n), ratio(m["good"].Decided.Seconds(), rf[n]["good"].Decided.Seconds()))
		}
	}
	return lines
}

// Spread summarizes the key=value lines of several rounds of Summary, key by key in the first
// round's order: a figure numeric in every round gets KEY_median, KEY_min and KEY_max (the
// median of an even count is the mean of the middle two); any other gets KEY_rounds with each
// round's value, comma-separated ("n/a" and -1 are absent figures, so a key that has one in
// some round is listed, not averaged).
func Spread(rounds [][]string) []string {
	var order []string
	values := map[string][]string{}
	for _, lines := range rounds {
		for _, l := range lines {
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				continue
			}
			if _, seen := values[k]; !seen {
				order = append(order, k)
			}
			values[k] = append(values[k], v)
		}
	}
	var out []string
	for _, k := range order {
		vs := values[k]
		nums := make([]float64, 0, len(vs))
		for _, v := range vs {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				break
			}
			nums = append(nums, f)
		}
		if len(nums) != len(rounds) {
			out = append(out, fmt.Sprintf("%s_rounds=%s", k, strings.Join(vs, ",")))
			continue
		}
		sort.Float64s(nums)
		med := nums[len(nums)/2]
		if len(nums)%2 == 0 {
			med = (nums[len(nums)/2-1] + nums[len(nums)/2]) / 2
		}
		prec := 0
		for _, v := range vs {
			if _, frac, ok := strings.Cut(v, "."); ok {
				prec = max(prec, len(frac))
			}
		}
		f := func(x float64) string { return strconv.FormatFloat(x, 'f', prec, 64) }
		out = append(out, fmt.Sprintf("%s_median=%s", k, f(med)), fmt.Sprintf("%s_min=%s", k, f(nums[0])), fmt.Sprintf("%s_max=%s", k, f(nums[len(nums)-1])))
	}
	return out
}
