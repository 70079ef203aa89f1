package policysim

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var palette = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, // grey
	{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, // cyan
	{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown
}

// Plot writes a PNG with two panels sharing the time axis: the load (replicas' worth of work)
// and each policy's GPUs, then each policy's p95 TTFT against the SLO (log scale).
func Plot(path string, results []Result, slo time.Duration) error {
	if len(results) == 0 {
		return errors.New("no policy to plot")
	}
	top := plot.New()
	top.Title.Text = "Load and GPUs per policy"
	top.Y.Label.Text = "GPUs (load: replicas of work)"
	top.Legend.Top, top.Legend.Left = true, true
	bottom := plot.New()
	bottom.Title.Text = fmt.Sprintf("p95 time to first token (SLO %s)", slo)
	bottom.X.Label.Text = "minute"
	bottom.Y.Label.Text = "seconds"
	bottom.Y.Scale = plot.LogScale{}
	bottom.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	bottom.Legend.Top, bottom.Legend.Left = true, true

	if len(results) > 0 {
		load := make(plotter.XYs, len(results[0].Timeline))
		for i, m := range results[0].Timeline {
			load[i] = plotter.XY{X: m.At.Minutes(), Y: m.Work}
		}
		l, err := plotter.NewLine(load)
		if err != nil {
			return err
		}
		l.Color, l.Width = color.Black, vg.Points(1)
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		top.Add(l)
		top.Legend.Add("load", l)
	}
	for i, r := range results {
		c := palette[i%len(palette)]
		gpus := make(plotter.XYs, len(r.Timeline))
		var ttft plotter.XYs
		for j, m := range r.Timeline {
			gpus[j] = plotter.XY{X: m.At.Minutes(), Y: float64(m.Pods)}
			if !math.IsNaN(m.TTFTP95) {
				ttft = append(ttft, plotter.XY{X: m.At.Minutes(), Y: math.Max(m.TTFTP95, 0.01)})
			}
		}
		// Every other policy dashed: two policies that take the same decisions both show.
		var dashes []float64
		if i%2 == 1 {
			dashes = []float64{5, 3}
		}
		if err := AddLine(top, gpus, c, 1.5, fmt.Sprintf("%s (%.1f GPU-h, SLO %.0f%%)", r.Policy, r.GPUHours, 100*r.SLOMinutes), dashes...); err != nil {
			return err
		}
		if len(ttft) > 0 {
			if err := AddLine(bottom, ttft, c, 1, r.Policy); err != nil {
				return err
			}
		}
	}
	if len(results) > 0 && len(results[0].Timeline) > 0 {
		end := results[0].Timeline[len(results[0].Timeline)-1].At.Minutes()
		if err := AddLine(bottom, plotter.XYs{{X: 0, Y: slo.Seconds()}, {X: end, Y: slo.Seconds()}}, color.Black, 1.5, "SLO", 6, 3); err != nil {
			return err
		}
	}
	top.Add(plotter.NewGrid())
	bottom.Add(plotter.NewGrid())

	return WritePNG(path, vg.Points(900), vg.Points(700), top, bottom)
}

// AddLine draws xys on p in color c, width points wide, dashed when dashes (in points) are
// given, with a legend entry unless legend is empty.
func AddLine(p *plot.Plot, xys plotter.XYs, c color.Color, width float64, legend string, dashes ...float64) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color, l.Width = c, vg.Points(width)
	for _, d := range dashes {
		l.Dashes = append(l.Dashes, vg.Points(d))
	}
	p.Add(l)
	if legend != "" {
		p.Legend.Add(legend, l)
	}
	return nil
}

// WritePNG draws panels stacked top to bottom, their x axes aligned, into a PNG of the given
// size (make bench-sim's and make bench-peers' plots).
func WritePNG(path string, width, height vg.Length, panels ...*plot.Plot) error {
	img := vgimg.New(width, height)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4), PadY: vg.Points(8)}
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(rows, tiles, draw.New(img))
	for i, p := range panels {
		p.Draw(canvases[i][0])
	}
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
