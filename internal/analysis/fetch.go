package analysis

import (
	"errors"
	"sync"
)

// errNoStable is a relative metric's stable answer when there is no stable color to read.
var errNoStable = errors.New("no stable color to compare with")

// colors is what a plan fetched for each of its metrics, in its order, per color.
type colors[S any] struct{ cand, stable []S }

// fetchColors runs fetch on each metric's candidate query and, where it has one (a Q other
// than the zero Q), its stable query, in the background, maxConcurrentQueries at a time, and
// sends both colors' answers once all have answered; a metric without a stable query gets
// noStable. The histogram and per-unit plans fetch their queries with it.
func fetchColors[Q comparable, S any](cand, stable []Q, fetch func(Q) S, noStable S) <-chan colors[S] {
	out := make(chan colors[S], 1)
	d := colors[S]{cand: make([]S, len(cand)), stable: make([]S, len(cand))}
	if len(cand) == 0 {
		out <- d
		return out
	}
	go func() {
		sem := make(chan struct{}, maxConcurrentQueries)
		var wg sync.WaitGroup
		run := func(query Q, dst *S) {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				*dst = fetch(query)
			})
		}
		var none Q
		for i := range cand {
			run(cand[i], &d.cand[i])
			if stable[i] != none {
				run(stable[i], &d.stable[i])
			} else {
				d.stable[i] = noStable
			}
		}
		wg.Wait()
		out <- d
	}()
	return out
}
