package analysis

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// perUnitPlan is the per-unit metrics of a measurement (Run's path for metrics with PerUnit
// set): their rendered numerator and denominator queries per color.
type perUnitPlan struct {
	metrics []v1alpha1.AnalysisMetric
	// cand and stable are each metric's rendered [numerator, denominator] queries; stable is
	// empty when the metric has no relative bound or there is no stable color.
	cand, stable [][2]string
	// blockCand and blockStable are the same over a block's span (BlockTimes), read where a
	// metric's pods are too few (PairedBlockTest); empty without a stable query or t.Scrape.
	blockCand, blockStable [][2]string
	window, scrape         time.Duration
}

// planPerUnit renders the queries of the per-unit metrics among ms.
func planPerUnit(ms []v1alpha1.AnalysisMetric, t Target, candVars, stableVars metrics.Vars, window time.Duration) (*perUnitPlan, error) {
	p := &perUnitPlan{window: window, scrape: t.Scrape}
	var span time.Duration
	if t.Scrape > 0 && window > 0 {
		_, span = blockSpacing(window, t.Scrape)
	}
	render := func(m v1alpha1.AnalysisMetric, v metrics.Vars) ([2]string, error) {
		num, err := metrics.Render(m.PerUnit.NumeratorQuery, v)
		if err != nil {
			return [2]string{}, fmt.Errorf("metrics[%s].perUnit.numeratorQuery: %w", m.Name, err)
		}
		den, err := metrics.Render(m.PerUnit.DenominatorQuery, v)
		if err != nil {
			return [2]string{}, fmt.Errorf("metrics[%s].perUnit.denominatorQuery: %w", m.Name, err)
		}
		return [2]string{num, den}, nil
	}
	for _, m := range ms {
		if m.PerUnit == nil || m.Histogram != nil {
			continue
		}
		cand, err := render(m, candVars)
		if err != nil {
			return nil, err
		}
		var stable, blockCand, blockStable [2]string
		if m.MaxRatioToStable != nil && t.Stable.Pods != "" {
			if stable, err = render(m, stableVars); err != nil {
				return nil, err
			}
			if span > 0 {
				cv, sv := candVars, stableVars
				cv.Window, sv.Window = metrics.PromDuration(span), metrics.PromDuration(span)
				if blockCand, err = render(m, cv); err != nil {
					return nil, err
				}
				if blockStable, err = render(m, sv); err != nil {
					return nil, err
				}
			}
		}
		p.metrics = append(p.metrics, m)
		p.cand, p.stable = append(p.cand, cand), append(p.stable, stable)
		p.blockCand, p.blockStable = append(p.blockCand, blockCand), append(p.blockStable, blockStable)
	}
	return p, nil
}

// start runs the plan's queries in the background, a few at a time, and sends the sums once
// all have answered; where a metric's pods are too few to judge as units (PerUnitTest's
// degrees of freedom below blockUnitDF), it then reads both colors' blocks (BlockTimes).
func (p *perUnitPlan) start(ctx context.Context, q metrics.Querier, at time.Time) <-chan colors[PerUnitSample] {
	sums := fetchColors(p.cand, p.stable, func(queries [2]string) PerUnitSample { return fetchPerUnit(ctx, q, queries, at) },
		PerUnitSample{Err: errNoStable})
	out := make(chan colors[PerUnitSample], 1)
	go func() {
		d := <-sums
		ends, _ := BlockTimes(at, p.window, p.scrape)
		sem := make(chan struct{}, maxConcurrentQueries)
		var wg sync.WaitGroup
		for i := range d.cand {
			c, s := &d.cand[i], &d.stable[i]
			if p.blockCand[i] == ([2]string{}) || c.Err != nil || s.Err != nil || len(ends) == 0 || !PairsOverTime(c.Units, s.Units) {
				continue
			}
			c.Blocks = fetchBlocks(ctx, q, p.blockCand[i], ends, sem, &wg)
			s.Blocks = fetchBlocks(ctx, q, p.blockStable[i], ends, sem, &wg)
		}
		wg.Wait()
		out <- d
	}()
	return out
}

// fetchBlocks reads a color's sums over each block ending at ends (the queries rendered over
// a block's span) in the background, sem bounding the queries in flight, into the slice it
// returns, oldest first, complete once wg is done. A block whose queries fail reads no work.
func fetchBlocks(ctx context.Context, q metrics.Querier, queries [2]string, ends []time.Time, sem chan struct{}, wg *sync.WaitGroup) []UnitBlock {
	out := make([]UnitBlock, len(ends))
	for i, end := range ends {
		b := &out[len(ends)-1-i]
		b.At = end
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s := fetchPerUnit(ctx, q, queries, end)
			if s.Err != nil {
				return
			}
			for _, u := range s.Units {
				b.Numerator += u.Numerator
				b.Denominator += u.Denominator
			}
		})
	}
	return out
}

// fetchPerUnit runs a color's numerator and denominator queries and joins their series by
// pod. A Prometheus failure of either is an Err; a pod without both series, or without work
// (a denominator not above 0), is left out.
func fetchPerUnit(ctx context.Context, q metrics.Querier, queries [2]string, at time.Time) PerUnitSample {
	num, err := q.Vector(ctx, queries[0], at)
	if err != nil {
		return PerUnitSample{Err: fmt.Errorf("numerator query: %w", err)}
	}
	den, err := q.Vector(ctx, queries[1], at)
	if err != nil {
		return PerUnitSample{Err: fmt.Errorf("denominator query: %w", err)}
	}
	return PerUnitSample{Units: joinUnits(num, den)}
}

// joinUnits pairs numerator and denominator series by their pod label, in pod order. A query
// not grouped by pod (a single series without the label) counts as one unit.
func joinUnits(num, den []metrics.Series) []UnitSum {
	nums := map[string]float64{}
	for _, s := range num {
		nums[s.Labels["pod"]] += s.Value
	}
	var out []UnitSum
	for _, s := range den {
		pod := s.Labels["pod"]
		n, ok := nums[pod]
		if !ok || !(s.Value > 0) || n < 0 {
			continue
		}
		out = append(out, UnitSum{Pod: pod, Numerator: n, Denominator: s.Value})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out
}

// judge judges each per-unit metric with the candidate's request count.
func (p *perUnitPlan) judge(d colors[PerUnitSample], candRequests metrics.Sample, minSamples int32, look Look, at time.Time, results map[string]v1alpha1.MetricResult) {
	for i, m := range p.metrics {
		c := d.cand[i]
		c.Requests = candRequests
		results[m.Name] = JudgePerUnit(m, c, d.stable[i], minSamples, look, at)
	}
}
