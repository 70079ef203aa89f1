package peerbench

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/modelship/modelship/test/sim/policysim"
)

var palette = map[string]color.RGBA{
	"modelship":     {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"modelship-slo": {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	"keda-hpa":      {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"flagger":       {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"argo-rollouts": {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

func colorOf(name string) color.RGBA {
	if c, ok := palette[name]; ok {
		return c
	}
	return color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
}

// Plot writes a PNG of four panels: for the autoscaling runs, the GPUs each contender held and
// its p95 TTFT; for the rollout runs, the candidate's traffic weight and the p95 TTFT. Time is
// in minutes from each run's start.
func Plot(path string, scale, rollouts map[string]*Run, slo SLO) error {
	gpus, scaleTTFT := newPanel("Autoscaling: GPUs held (dashed marks below: the load step, then Prometheus stopping)", "GPUs", false),
		newPanel(fmt.Sprintf("Autoscaling: p95 TTFT per %s (SLO %s)", Window, slo.TTFT), "seconds", true)
	weight, rolloutTTFT := newPanel("Rollouts (good, 1.5x slower, good across a Prometheus outage): candidate weight", "percent", false),
		newPanel(fmt.Sprintf("Rollouts: p95 TTFT per %s", Window), "seconds", true)
	if err := addRuns(gpus, scaleTTFT, scale, slo, func(p Point) float64 { return float64(p.GPUs) }); err != nil {
		return err
	}
	if err := addRuns(weight, rolloutTTFT, rollouts, slo, func(p Point) float64 { return float64(p.Weight) }); err != nil {
		return err
	}
	var panels []*plot.Plot
	if len(scale) > 0 {
		panels = append(panels, gpus, scaleTTFT)
	}
	if len(rollouts) > 0 {
		panels = append(panels, weight, rolloutTTFT)
	}
	if len(panels) == 0 {
		return errors.New("no run to plot")
	}
	return policysim.WritePNG(path, vg.Points(1000), vg.Points(275*float64(len(panels))), panels...)
}

func newPanel(title, y string, log bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "minute"
	p.Y.Label.Text = y
	if log {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p
}

// addRuns draws value(point) of each run on top and its windowed p95 TTFT on bottom, with a
// vertical mark at the run's load step or rollout starts.
func addRuns(top, bottom *plot.Plot, runs map[string]*Run, slo SLO, value func(Point) float64) error {
	names := make([]string, 0, len(runs))
	for n := range runs {
		names = append(names, n)
	}
	sort.Strings(names)
	end := 0.0
	for _, n := range names {
		r := runs[n]
		c := colorOf(n)
		var vals, ttft plotter.XYs
		for _, p := range r.Points {
			vals = append(vals, plotter.XY{X: p.At.Sub(r.Start).Minutes(), Y: value(p)})
		}
		for _, w := range Windows(r, slo) {
			if !math.IsNaN(w.TTFT) {
				ttft = append(ttft, plotter.XY{X: (w.Start + Window).Minutes(), Y: math.Max(w.TTFT, 0.01)})
			}
		}
		if len(vals) == 0 {
			continue
		}
		end = math.Max(end, vals[len(vals)-1].X)
		if err := policysim.AddLine(top, vals, c, 1.5, n); err != nil {
			return err
		}
		if len(ttft) > 0 {
			if err := policysim.AddLine(bottom, ttft, c, 1, n); err != nil {
				return err
			}
		}
		for name, t := range r.Events {
			if name != "step" && name != "good" && name != "bad" && name != "outage" && name != "outage-start" {
				continue
			}
			x := t.Sub(r.Start).Minutes()
			if err := policysim.AddLine(bottom, plotter.XYs{{X: x, Y: 0.01}, {X: x, Y: 1}}, c, 0.5, "", 2, 2); err != nil {
				return err
			}
		}
	}
	if end > 0 {
		if err := policysim.AddLine(bottom, plotter.XYs{{X: 0, Y: slo.TTFT.Seconds()}, {X: end, Y: slo.TTFT.Seconds()}}, color.Black, 1.5, "SLO", 6, 3); err != nil {
			return err
		}
	}
	return nil
}
