package analysis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// drawBlocks draws both colors' sums over n scrape intervals: each block's seconds per token
// is perToken times a load effect both colors share (sigma 0.3: the load and the requests'
// mix move over time), times each color's own batch effect, an AR(1) series of correlation
// rho with stationary sigma sigma (a batch outlives a scrape interval), the candidate mult
// times slower; each block's work is log-normal around tokens.
func drawBlocks(rng *rand.Rand, n int, tokens, perToken, mult, sigma, rho float64) (cand, stable []UnitBlock) {
	at := time.Unix(0, 0)
	innov := sigma * math.Sqrt(1-rho*rho)
	ec, es := sigma*rng.NormFloat64(), sigma*rng.NormFloat64()
	for i := range n {
		if i > 0 {
			ec = rho*ec + innov*rng.NormFloat64()
			es = rho*es + innov*rng.NormFloat64()
		}
		shared := 0.3 * rng.NormFloat64()
		end := at.Add(time.Duration(i+1) * 15 * time.Second)
		dc := math.Max(1, tokens*math.Exp(0.4*rng.NormFloat64()))
		ds := math.Max(1, 2*tokens*math.Exp(0.4*rng.NormFloat64()))
		cand = append(cand, UnitBlock{At: end, Numerator: perToken * mult * math.Exp(shared+ec) * dc, Denominator: dc})
		stable = append(stable, UnitBlock{At: end, Numerator: perToken * math.Exp(shared+es) * ds, Denominator: ds})
	}
	return cand, stable
}

// The paired-block test holds its level when the candidate is exactly at its bound, on blocks
// whose batch effects last a scrape interval or more (correlation 0.5 between neighbours: the
// estimated serial correlation widens the test), on as few blocks as it judges and on many. At
// a correlation of 0.8 a dozen blocks hold too little to tell it well: at the bound a look
// fails up to three times its share of the budget (0.4-0.7%, the whole rollout's is 1%), and
// an identical candidate almost never.
func TestPairedBlockTestHoldsItsLevelAtTheBound(t *testing.T) {
	const runs, ratio = 20000, 1.2
	a := Alpha / 4 // step 1, first doubling: FailZ's budget for one look
	threshold := normalQuantile(1 - a)
	for _, rho := range []float64{0, 0.5, 0.8} {
		for _, blocks := range []int{5, 8, 16, 32} {
			t.Run(fmt.Sprintf("rho %.1f, %d blocks", rho, blocks), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(blocks), uint64(10*rho)))
				fails, aa := 0, 0
				for range runs {
					cand, stable := drawBlocks(rng, blocks, 300, 0.02, ratio, 0.1, rho)
					if z, df, _ := PairedBlockTest(cand, stable, ratio); df >= minBlockDF && z >= threshold {
						fails++
					}
					cand, stable = drawBlocks(rng, blocks, 300, 0.02, 1, 0.15, rho)
					if z, df, _ := PairedBlockTest(cand, stable, ratio); df >= minBlockDF && z >= threshold {
						aa++
					}
				}
				rate, aaRate := float64(fails)/runs, float64(aa)/runs
				t.Logf("FIGURE/blocks_level=%.4f identical=%.4f budget=%.4f", rate, aaRate, a)
				// 1.5x the budget: 3 binomial standard deviations above it at 20,000 runs.
				limit := 1.5 * a
				if rho > 0.5 {
					limit = Alpha
				}
				if rate > limit {
					t.Errorf("a candidate at its bound failed %d of %d windows (%.3f%%); the limit is %.3f%%", fails, runs, 100*rate, 100*limit)
				}
				if aaRate > a {
					t.Errorf("an identical candidate failed %d of %d windows (%.3f%%); the budget is %.3f%%", aa, runs, 100*aaRate, 100*a)
				}
			})
		}
	}
}

// A candidate 1.5x slower per token, on one pod beside two stable ones (PerUnitTest's one
// degree of freedom can fail nothing), is failed while its first step holds on it (looked at
// every two minutes of 15s scrape intervals, up to 24 minutes), and an identical one is not;
// with a single block pair nothing is judged.
func TestJudgePerUnitPairsBlocksWhenThePodsAreTooFew(t *testing.T) {
	m := v1alpha1.AnalysisMetric{Name: "decode-per-token", MaxRatioToStable: resource.NewMilliQuantity(1200, resource.DecimalSI),
		PerUnit: &v1alpha1.AnalysisPerUnit{NumeratorQuery: "n", DenominatorQuery: "d"}}
	requests := metrics.Sample{Status: metrics.OK, Value: 200}
	const runs = 2000
	judge := func(rng *rand.Rand, cb, sb []UnitBlock, mult float64) v1alpha1.MetricResult {
		blocks := float64(len(cb))
		cand := PerUnitSample{Units: drawPods(rng, 1, 300*blocks, 0, 0.02*mult, 0.06, 0.5), Blocks: cb, Requests: requests}
		stable := PerUnitSample{Units: drawPods(rng, 2, 300*blocks, 0, 0.02, 0.06, 0.5), Blocks: sb, Requests: requests}
		return JudgePerUnit(m, cand, stable, 20, Look{Step: 1, Info: blocks / 4, Looks: 2}, time.Unix(0, 0))
	}
	// step is the first step held on the candidate: a look every 8 blocks; the first Fail.
	step := func(rng *rand.Rand, mult float64) (v1alpha1.MetricResult, bool) {
		cb, sb := drawBlocks(rng, 96, 300, 0.02, mult, 0.1, 0.3)
		var r v1alpha1.MetricResult
		for n := 8; n <= 96; n += 8 {
			if r = judge(rng, cb[:n], sb[:n], mult); r.Verdict == v1alpha1.VerdictFail {
				return r, true
			}
		}
		return r, false
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var aa, caught int
	var failed v1alpha1.MetricResult
	for range runs {
		if _, f := step(rng, 1); f {
			aa++
		}
		if r, f := step(rng, 1.5); f {
			caught, failed = caught+1, r
		}
	}
	t.Logf("FIGURE/blocks_aa_fails=%d 1.5x_fails=%d of %d (looks every 8 blocks up to 96)", aa, caught, runs)
	if aa > runs/100 {
		t.Errorf("%d of %d identical candidates failed; the budget is 1%%", aa, runs)
	}
	if caught < runs*95/100 {
		t.Errorf("a 1.5x slower candidate on one pod beside two failed in %d of %d steps; want 95%%", caught, runs)
	}
	if !strings.Contains(failed.Message, "too few to judge as units") || !strings.Contains(failed.Message, "scrape intervals paired") {
		t.Errorf("the message does not say the blocks judged: %q", failed.Message)
	}
	cb, sb := drawBlocks(rng, 1, 300, 0.02, 1.5, 0.01, 0)
	if r := judge(rng, cb, sb, 1.5); r.Verdict == v1alpha1.VerdictFail {
		t.Errorf("one block pair failed the candidate: %s", r.Message)
	}
}

func TestBlockTimes(t *testing.T) {
	at := time.Unix(1000, 0)
	for _, tc := range []struct {
		name           string
		window, scrape time.Duration
		every, span    time.Duration
		n              int
	}{
		{"a scrape interval apart, each over two", time.Minute, 15 * time.Second, 15 * time.Second, 30 * time.Second, 3},
		{"a longer window, more blocks", 4 * time.Minute, 15 * time.Second, 15 * time.Second, 30 * time.Second, 15},
		{"at most maxBlocks, whole scrape intervals apart", time.Hour, 15 * time.Second, time.Minute, 75 * time.Second, 59},
		{"no scrape interval, no blocks", time.Minute, 0, 0, 0, 0},
		{"a window shorter than a span, no blocks", 20 * time.Second, 15 * time.Second, 15 * time.Second, 30 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ends, span := BlockTimes(at, tc.window, tc.scrape)
			if len(ends) != tc.n || (tc.n > 0 && span != tc.span) {
				t.Fatalf("%d blocks over %s; want %d over %s", len(ends), span, tc.n, tc.span)
			}
			for i, e := range ends {
				if want := at.Add(-time.Duration(i) * tc.every); !e.Equal(want) {
					t.Errorf("block %d ends at %s; want %s", i, e, want)
				}
				if e.Add(-span).Before(at.Add(-tc.window)) {
					t.Errorf("block %d reads from %s, before the window opened at %s", i, e.Add(-span), at.Add(-tc.window))
				}
			}
			if len(ends) > maxBlocks {
				t.Errorf("%d blocks; at most %d", len(ends), maxBlocks)
			}
		})
	}
}

// blockQuerier answers the vLLM preset's queries as healthyVLLM does, but decode-per-token's
// per pod: one candidate pod beside two stable ones, the candidate perToken seconds per token
// and the stable pods 0.02, each scaled by a load that changes with the instant queried, and
// records the instants and spans of the per-pod queries.
type blockQuerier struct {
	*fakeQuerier
	perToken float64
	mu       sync.Mutex
	spans    map[string][]time.Time // span ("[30s]") -> instants
}

func (b *blockQuerier) Vector(ctx context.Context, query string, at time.Time) ([]metrics.Series, error) {
	num := strings.Contains(query, "request_decode_time_seconds_sum")
	if !num && !strings.Contains(query, "request_generation_tokens_sum") {
		return b.fakeQuerier.Vector(ctx, query, at)
	}
	b.mu.Lock()
	span := query[strings.LastIndex(query, "[") : strings.LastIndex(query, "]")+1]
	b.spans[span] = append(b.spans[span], at)
	b.mu.Unlock()
	load := 1 + 0.3*math.Sin(float64(at.Unix())/20) // the load, as both colors see it
	pods := map[string]float64{"cand-0": b.perToken * (1 + 0.05*math.Sin(float64(at.Unix())/7))}
	if strings.Contains(query, stablePods) {
		pods = map[string]float64{"stable-0": 0.02, "stable-1": 0.021}
	}
	var out []metrics.Series
	for pod, perToken := range pods {
		v := 600.0
		if num {
			v *= perToken * load
		}
		out = append(out, metrics.Series{Labels: map[string]string{"pod": pod}, Value: v})
	}
	return out, nil
}

// With one candidate pod beside two stable ones, Run reads decode-per-token's sums per scrape
// interval (BlockTimes: 30s spans every 15s over the 4m window) and fails a candidate 1.5x
// slower on them; with eight stable pods it reads none.
func TestRunReadsBlocksWhenThePodsAreTooFew(t *testing.T) {
	spec := vllmSpec()
	tgt := target
	tgt.Scrape = 15 * time.Second
	tgt.Look = Look{Step: 1, Info: 1, Looks: 8}
	b := &blockQuerier{fakeQuerier: healthyVLLM(), perToken: 0.03, spans: map[string][]time.Time{}}
	rs, err := Run(context.Background(), b, spec, tgt, 4*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	r := rs[slicesIndex(rs, "decode-per-token")]
	if r.Verdict != v1alpha1.VerdictFail || !strings.Contains(r.Message, "scrape intervals paired") {
		t.Errorf("decode-per-token %s: %s; want a Fail on the paired blocks", r.Verdict, r.Message)
	}
	ends, _ := BlockTimes(now, 4*time.Minute, 15*time.Second)
	if got := len(b.spans["[30s]"]); got != 4*len(ends) {
		t.Errorf("%d block queries over [30s]; want %d (two per color for each of %d blocks)", got, 4*len(ends), len(ends))
	}
	if got := len(b.spans["[4m]"]); got != 4 {
		t.Errorf("%d per-pod queries over the window; want 4", got)
	}

	// Eight stable pods: the pods are units enough; no block is read.
	f := healthyVLLM()
	f.rules = append([]rule{decode(candidatePods, 0.030)[0]}, f.rules...)
	if _, err := Run(context.Background(), f, spec, tgt, 4*time.Minute, now); err != nil {
		t.Fatal(err)
	}
	for _, q := range f.recorded() {
		if strings.Contains(q, "[30s]") {
			t.Errorf("a block was read with eight stable pods: %s", q)
		}
	}
}

func slicesIndex(rs []v1alpha1.MetricResult, name string) int {
	for i, r := range rs {
		if r.Name == name {
			return i
		}
	}
	return -1
}
