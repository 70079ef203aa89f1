package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/modelship/modelship/internal/harness/policysim"
)

// policyColors tells the contenders apart in the plot, in the order they run.
var policyColors = []color.RGBA{{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, {R: 0x94, G: 0x67, B: 0xbd, A: 0xff}}

// plotSim draws three panels over the run's minutes: the load, each policy's replicas, and each
// policy's p95 time to first token against the SLO.
func plotSim(path string, results []policysim.Result, slo float64) error {
	load, reps, ttft := plot.New(), plot.New(), plot.New()
	load.Title.Text = "Load (requests per minute, trace replayed)"
	reps.Title.Text = "Replicas asked for (GPUs held)"
	ttft.Title.Text = fmt.Sprintf("p95 time to first token per minute (s, log scale; SLO %.1fs dashed)", slo)
	ttft.Y.Scale = plot.LogScale{}
	ttft.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	for _, p := range []*plot.Plot{load, reps, ttft} {
		p.X.Label.Text = "minute"
		p.Add(plotter.NewGrid())
	}
	if len(results) > 0 {
		pts := make(plotter.XYs, 0, len(results[0].Timeline))
		for _, m := range results[0].Timeline {
			pts = append(pts, plotter.XY{X: m.At.Minutes(), Y: float64(m.Requests)})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 0x55}
		load.Add(l)
	}
	for i, r := range results {
		c := policyColors[i%len(policyColors)]
		rp := make(plotter.XYs, 0, len(r.Timeline))
		tp := make(plotter.XYs, 0, len(r.Timeline))
		for _, m := range r.Timeline {
			rp = append(rp, plotter.XY{X: m.At.Minutes(), Y: float64(m.Replicas)})
			if m.TTFTP95 > 0 {
				tp = append(tp, plotter.XY{X: m.At.Minutes(), Y: m.TTFTP95.Seconds()})
			}
		}
		for _, panel := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{reps, rp}, {ttft, tp}} {
			l, err := plotter.NewLine(panel.xys)
			if err != nil {
				return err
			}
			l.Color, l.Width = c, vg.Points(1.5)
			panel.p.Add(l)
			if panel.p == reps {
				reps.Legend.Add(fmt.Sprintf("%s: %.0f%% SLO minutes, %.1f GPU-h", r.Policy, 100*r.SLOAttainment, r.GPUHours), l)
			}
		}
	}
	if len(results) > 0 && len(results[0].Timeline) > 0 {
		last := results[0].Timeline[len(results[0].Timeline)-1].At.Minutes()
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: slo}, {X: last, Y: slo}})
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		ttft.Add(l)
	}
	reps.Legend.Top, reps.Legend.Left = true, true
	img := vgimg.New(vg.Points(900), vg.Points(900))
	dc := draw.New(img)
	canvases := plot.Align([][]*plot.Plot{{load}, {reps}, {ttft}}, draw.Tiles{Rows: 3, Cols: 1, PadX: vg.Millimeter * 2,
		PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}, dc)
	load.Draw(canvases[0][0])
	reps.Draw(canvases[1][0])
	ttft.Draw(canvases[2][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
