package workloads

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelship/modelship/test/framework/fleet"
)

func shipped(t *testing.T) fleet.Trace {
	t.Helper()
	tr, err := fleet.LoadTrace("../../traces/azure-llm-2023-conv.csv")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func generate(t *testing.T, w Workload, seed uint64) fleet.Trace {
	t.Helper()
	tr, err := w.Trace(seed)
	if err != nil {
		t.Fatalf("%s seed %d: %v", w.Name, seed, err)
	}
	return tr
}

// matrixWorkload is the matrix's workload of that name.
func matrixWorkload(t *testing.T, name string) Workload {
	t.Helper()
	w, err := Find(Matrix(shipped(t)), name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestTheMatrixListsItsWorkloads: at least six workloads under distinct names, covering the
// shipped trace at several rate scales and offsets, heavy-tailed long-prompt and short-chat
// lengths, bursty and self-exciting arrivals, a flash crowd, a slow ramp and slower and faster
// GPUs.
func TestTheMatrixListsItsWorkloads(t *testing.T) {
	m := Matrix(shipped(t))
	if len(m) < 6 {
		t.Fatalf("%d workloads, want at least 6", len(m))
	}
	names := map[string]bool{}
	scales, offsets := map[float64]bool{}, map[time.Duration]bool{}
	var slower, faster, flash, ramp, bursty, hawkes, code, chat, long bool
	for _, w := range m {
		if names[w.Name] {
			t.Errorf("two workloads named %s", w.Name)
		}
		names[w.Name] = true
		if w.Summary == "" || w.Duration <= 0 {
			t.Errorf("%s: no summary or no duration", w.Name)
		}
		if w.Base != nil {
			scales[w.RateScale], offsets[w.Offset] = true, true
		}
		slower = slower || w.Speed() < 1
		faster = faster || w.Speed() > 1
		flash = flash || w.Shape.FlashFactor >= 4 && w.Shape.FlashRise <= time.Minute
		ramp = ramp || w.Shape.RampOver >= 30*time.Minute
		bursty = bursty || w.Arrivals.HighShare > 0 && w.Arrivals.BurstSize > 1
		hawkes = hawkes || w.Arrivals.Branching > 0
		code = code || w.Base == nil && w.Prompt.Mean() > 1500 && w.Output.Mean() < 50 && w.Prompt.TailShare > 0
		chat = chat || w.Base == nil && w.Prompt.Mean() < 600 && w.Prompt.TailShare > 0
		long = long || w.Base == nil && w.Prompt.Mean() > 5000 && w.Output.Mean() > 100
		t.Logf("%-22s speed=%.1f %s", w.Name, w.Speed(), w.Summary)
	}
	if len(scales) < 3 || len(offsets) < 3 {
		t.Errorf("the shipped trace at rate scales %v and offsets %v, want three of each", scales, offsets)
	}
	for what, ok := range map[string]bool{"a slower GPU": slower, "a faster GPU": faster, "a flash crowd": flash, "a slow ramp": ramp,
		"bursty arrivals": bursty, "self-exciting arrivals": hawkes, "code-completion lengths": code, "short-chat lengths": chat,
		"long-context prompts": long} {
		if !ok {
			t.Errorf("the matrix has no workload with %s", what)
		}
	}
}

// TestEveryWorkloadIsDeterministicPerSeedAndDistinctAcrossSeeds: a seed names one sequence, and
// two seeds two sequences (the shipped trace's replays too: their copies land at seeded points).
func TestEveryWorkloadIsDeterministicPerSeedAndDistinctAcrossSeeds(t *testing.T) {
	for _, w := range Matrix(shipped(t)) {
		t.Run(w.Name, func(t *testing.T) {
			a, b, c := generate(t, w, 7), generate(t, w, 7), generate(t, w, 8)
			if !slices.Equal(a.Requests, b.Requests) {
				t.Errorf("seed 7 twice: two sequences")
			}
			if slices.Equal(a.Requests, c.Requests) {
				t.Errorf("seeds 7 and 8: the same sequence")
			}
			seq, err := w.Sequence(7)
			if err != nil {
				t.Fatal(err)
			}
			if len(seq) != len(a.Requests) || seq[len(seq)-1].At != a.Requests[len(a.Requests)-1].Offset {
				t.Errorf("Sequence is not Trace: %d arrivals vs %d requests", len(seq), len(a.Requests))
			}
			for i := 1; i < len(seq); i++ {
				if seq[i].At < seq[i-1].At || seq[i].At >= w.Duration {
					t.Fatalf("arrival %d at %s after %s (duration %s): not sorted within the duration", i, seq[i].At, seq[i-1].At, w.Duration)
				}
			}
		})
	}
}

// within reports whether got is within rel of want (relative), printing both.
func within(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	if want == 0 {
		return
	}
	if math.Abs(got-want) > rel*math.Abs(want) {
		t.Errorf("%s = %.3f, want %.3f within %.0f%%", what, got, want, 100*rel)
	}
}

// TestEveryWorkloadShowsItsSettings: over three seeds, each workload's measured rate, prompt and
// output means and 95th percentiles are those its settings imply, and the bursty workload shows
// the stated arrival figures of the held-out coding trace (#27): a 1 s CV of 2.27 +-0.25, a 10 s
// CV of 1.67 +-0.2, 73% +-5 points empty 1 s bins, 10 s peaks (the busiest tenth) at 2-4.5x the
// mean; its lengths: prompts mean 2,048 / p95 7,315 and outputs mean 28, each within 6%.
func TestEveryWorkloadShowsItsSettings(t *testing.T) {
	for _, w := range Matrix(shipped(t)) {
		t.Run(w.Name, func(t *testing.T) {
			want := w.Expected()
			rateTol := 0.03
			if w.Arrivals.HighShare > 0 || w.Arrivals.Branching > 0 {
				// Bursts of 15 requests, or clusters of children: fewer independent units.
				rateTol = 0.08
			}
			for seed := uint64(1); seed <= 3; seed++ {
				got := Measure(generate(t, w, seed), w.Duration)
				t.Logf("seed %d: %s", seed, got)
				within(t, "rate", got.Rate, want.Rate, rateTol)
				within(t, "prompt mean", got.PromptMean, want.PromptMean, 0.06)
				within(t, "prompt p95", got.PromptP95, want.PromptP95, 0.06)
				within(t, "output mean", got.OutputMean, want.OutputMean, 0.06)
				within(t, "output p95", got.OutputP95, want.OutputP95, 0.06)
				if want.CV1s > 0 {
					if math.Abs(got.CV1s-want.CV1s) > 0.25 || math.Abs(got.CV10s-want.CV10s) > 0.2 || math.Abs(got.Empty1s-want.Empty1s) > 0.05 {
						t.Errorf("CV 1 s %.2f, 10 s %.2f, empty 1 s %.2f: want %.2f +-0.25, %.2f +-0.2, %.2f +-0.05",
							got.CV1s, got.CV10s, got.Empty1s, want.CV1s, want.CV10s, want.Empty1s)
					}
					if got.Peak10s < 2 || got.Peak10s > 4.5 {
						t.Errorf("10 s peak %.2fx the mean, want 2-4.5x", got.Peak10s)
					}
				}
			}
		})
	}
}

// TestBurstyArrivalsAreNotPoisson: the same mean rate without bursts has a 1 s CV near
// 1/sqrt(rate) and no empty bins; the bursty process is at least six times as variable, and
// the self-exciting one clusters (its 10 s CV at least twice a Poisson process's).
func TestBurstyArrivalsAreNotPoisson(t *testing.T) {
	m := Matrix(shipped(t))
	code, err := Find(m, "code-bursty")
	if err != nil {
		t.Fatal(err)
	}
	poisson := code
	poisson.Name, poisson.Arrivals = "poisson", Arrivals{Rate: code.Arrivals.Rate}
	p := Measure(generate(t, poisson, 1), time.Hour)
	b := Measure(generate(t, code, 1), time.Hour)
	if p.CV1s > 1.3/math.Sqrt(p.Rate) || p.Empty1s > 0.01 {
		t.Errorf("Poisson at %.1f/s: CV 1 s %.2f, empty %.2f; want about %.2f and none", p.Rate, p.CV1s, p.Empty1s, 1/math.Sqrt(p.Rate))
	}
	if b.CV1s < 6*p.CV1s {
		t.Errorf("bursty CV 1 s %.2f, Poisson %.2f: want at least 6x", b.CV1s, p.CV1s)
	}
	hk, err := Find(m, "chat-hawkes")
	if err != nil {
		t.Fatal(err)
	}
	h := Measure(generate(t, hk, 1), time.Hour)
	if poissonCV10 := 1 / math.Sqrt(10*h.Rate); h.CV10s < 2*poissonCV10 {
		t.Errorf("Hawkes CV 10 s %.3f, want at least twice a Poisson process's %.3f", h.CV10s, poissonCV10)
	}
}

// TestFlashCrowdReachesFourTimesWithinAMinute: the minute after the crowd starts rising carries
// about four times the rate of the five minutes before it, and so does the hold; the rate is
// back afterwards.
func TestFlashCrowdReachesFourTimesWithinAMinute(t *testing.T) {
	w := matrixWorkload(t, "flash-crowd")
	at := w.Shape.FlashAt
	for seed := uint64(1); seed <= 3; seed++ {
		tr := generate(t, w, seed)
		before := RateBetween(tr, at-5*time.Minute, at)
		first := RateBetween(tr, at+time.Minute, at+2*time.Minute)
		hold := RateBetween(tr, at+time.Minute, at+w.Shape.FlashRise+w.Shape.FlashHold)
		after := RateBetween(tr, at+w.Shape.FlashRise+w.Shape.FlashHold+w.Shape.FlashFall, at+w.Shape.FlashRise+w.Shape.FlashHold+w.Shape.FlashFall+5*time.Minute)
		t.Logf("seed %d: flash_crowd_ratio_first_minute=%.2f hold=%.2f after=%.2f", seed, first/before, hold/before, after/before)
		within(t, "ratio in the minute after the rise", first/before, 4, 0.1)
		within(t, "ratio over the hold", hold/before, 4, 0.05)
		within(t, "ratio after the fall", after/before, 1, 0.05)
	}
}

// TestSlowRampFollowsItsShape: every five minutes of the ramp carry the rate its shape gives,
// within 5%, from 0.2x to 1x.
func TestSlowRampFollowsItsShape(t *testing.T) {
	w := matrixWorkload(t, "slow-ramp")
	tr := generate(t, w, 1)
	for from := time.Duration(0); from < w.Duration; from += 5 * time.Minute {
		want := w.Arrivals.Rate * w.Shape.At(from+150*time.Second)
		within(t, "rate from "+from.String(), RateBetween(tr, from, from+5*time.Minute), want, 0.05)
	}
}

// TestOnOffIdlesBetweenItsSpells: every 15 minutes carry the arrival rate for 10, within 5%,
// and no request for the next 5 (after the 10 s over which the last bursts' requests spread,
// exponentially at a mean of 0.5 s).
func TestOnOffIdlesBetweenItsSpells(t *testing.T) {
	w := matrixWorkload(t, "on-off")
	tr := generate(t, w, 1)
	for from := time.Duration(0); from < w.Duration; from += 15 * time.Minute {
		within(t, "rate on from "+from.String(), RateBetween(tr, from, from+10*time.Minute), w.Arrivals.Rate, 0.05)
		if r := RateBetween(tr, from+10*time.Minute+10*time.Second, from+15*time.Minute); r != 0 {
			t.Errorf("rate %.2f/s idle from %v, want 0", r, from+10*time.Minute)
		}
	}
}

// TestTenantShiftJoinsAtItsTime: tenant-shift carries the chat rate until 20 minutes and the
// chat and long-context rates after (within 5%), its prompts twice as long on average after;
// the chat requests before 20 minutes are those of the workload without the tenant.
func TestTenantShiftJoinsAtItsTime(t *testing.T) {
	w := matrixWorkload(t, "tenant-shift")
	if w.Tenant == nil {
		t.Fatal("tenant-shift has no second tenant")
	}
	tr := generate(t, w, 1)
	at := w.Tenant.At
	within(t, "rate before the tenant", RateBetween(tr, 0, at), w.Arrivals.Rate, 0.05)
	within(t, "rate after the tenant", RateBetween(tr, at, w.Duration), w.Arrivals.Rate+w.Tenant.Arrivals.Rate, 0.05)
	// The mean prompt after the tenant joined, from the hour's and the minutes' before it.
	all, first := Measure(tr, w.Duration), Measure(tr, at)
	nb := first.Requests
	before := first.PromptMean
	after := (all.PromptMean*float64(all.Requests) - before*float64(nb)) / float64(max(all.Requests-nb, 1))
	if after < 1.8*before {
		t.Errorf("mean prompt %.0f after the tenant, %.0f before: want at least 1.8x", after, before)
	}
	alone := w
	alone.Tenant = nil
	a := generate(t, alone, 1)
	if n := Measure(a, at).Requests; n != nb {
		t.Fatalf("%d requests before the tenant, %d without it", nb, n)
	}
	for i := range nb {
		if a.Requests[i] != tr.Requests[i] {
			t.Fatalf("request %d before the tenant %+v, without it %+v", i, tr.Requests[i], a.Requests[i])
		}
	}
}

// TestLengthsSpliceALognormalBodyWithAParetoTail: the quantile function is continuous at the
// splice and increasing; the tail is heavier than the lognormal's (the 99.9th percentile well
// above it) and clamped at Max.
func TestLengthsSpliceALognormalBodyWithAParetoTail(t *testing.T) {
	l := codePrompt
	l.Max = 1 << 30
	body := l
	body.TailShare = 0
	u := 1 - l.TailShare
	if a, b := l.Quantile(u-1e-9), l.Quantile(u+1e-9); math.Abs(a-b) > 1e-3*a {
		t.Errorf("quantile jumps at the splice: %.1f to %.1f", a, b)
	}
	prev := 0.0
	for i := 1; i < 1000; i++ {
		q := l.Quantile(float64(i) / 1000)
		if q < prev {
			t.Fatalf("quantile decreases at %d/1000: %.1f < %.1f", i, q, prev)
		}
		prev = q
	}
	if tail, logn := l.Quantile(1-1e-5), body.Quantile(1-1e-5); tail < 1.3*logn {
		t.Errorf("quantile at 1-1e-5 %.0f, lognormal alone %.0f: the tail is not heavier", tail, logn)
	}
	if q := codePrompt.Quantile(1 - 1e-9); q != float64(codePrompt.Max) {
		t.Errorf("extreme quantile %.0f, want the clamp %d", q, codePrompt.Max)
	}
}

// TestAReplayStartsAtItsOffsetAndLoops: the shipped trace from 40 minutes at 18x begins with the
// trace's request at 40 minutes, copied 18 times, and after 20 minutes continues with the
// trace's first request.
func TestAReplayStartsAtItsOffsetAndLoops(t *testing.T) {
	base := shipped(t)
	w, err := Find(Matrix(base), "azure-conv-x18-at40m")
	if err != nil {
		t.Fatal(err)
	}
	tr := generate(t, w, 1)
	var first fleet.TraceRequest
	for _, r := range base.Requests {
		if r.Offset >= 40*time.Minute {
			first = r
			break
		}
	}
	if got := tr.Requests[0]; got.Offset != first.Offset-40*time.Minute || got.ContextTokens != first.ContextTokens {
		t.Errorf("first request %+v, want the trace's first at 40m re-based: %+v", got, first)
	}
	seam := base.Duration() - 40*time.Minute
	n := 0
	for _, r := range tr.Requests {
		if r.Offset == seam {
			n++
			if r.ContextTokens != base.Requests[0].ContextTokens {
				t.Errorf("request at the seam %s has %d prompt tokens, want the trace's first (%d)", seam, r.ContextTokens, base.Requests[0].ContextTokens)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d requests exactly at the seam %s, want the trace's first request once (its copies spread after it)", n, seam)
	}
}

// TestFromTraceReplaysAnyTraceInTheShippedFormat: a small CSV read as --trace reads it becomes a
// workload of one pass at the given scale.
func TestFromTraceReplaysAnyTraceInTheShippedFormat(t *testing.T) {
	csv := "TIMESTAMP,ContextTokens,GeneratedTokens\n"
	for i := range 120 {
		csv += "2024-05-01 00:" + pad(i/60) + ":" + pad(i%60) + ".0000000,100,10\n"
	}
	tr, err := fleet.ReadTrace(strings.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	w := FromTrace("small.csv", tr, 2)
	g := generate(t, w, 1)
	if w.Duration != 2*time.Minute || len(g.Requests) != 240 {
		t.Errorf("duration %s, %d requests; want 2m0s and 240", w.Duration, len(g.Requests))
	}
}

func pad(i int) string {
	if i < 10 {
		return "0" + string(rune('0'+i))
	}
	return string(rune('0'+i/10)) + string(rune('0'+i%10))
}

// TestAGeneratedWorkloadRoundTripsThroughTheTraceFormat: written as CSV and read back as --trace
// reads it, a workload is the same sequence (to the format's 100 ns).
func TestAGeneratedWorkloadRoundTripsThroughTheTraceFormat(t *testing.T) {
	w := matrixWorkload(t, "code-bursty")
	w.Duration = 5 * time.Minute
	tr := generate(t, w, 3)
	var b strings.Builder
	if err := WriteCSV(&b, tr); err != nil {
		t.Fatal(err)
	}
	back, err := fleet.ReadTrace(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Requests) != len(tr.Requests) {
		t.Fatalf("%d requests back, wrote %d", len(back.Requests), len(tr.Requests))
	}
	first := tr.Requests[0].Offset.Truncate(100 * time.Nanosecond)
	for i, r := range back.Requests {
		want := tr.Requests[i]
		if d := r.Offset + first - want.Offset; d < -100*time.Nanosecond || d > 100*time.Nanosecond ||
			r.ContextTokens != want.ContextTokens || r.GeneratedTokens != want.GeneratedTokens {
			t.Fatalf("request %d: %+v back, wrote %+v", i, r, want)
		}
	}
}
