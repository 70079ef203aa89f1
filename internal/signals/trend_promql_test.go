package signals

import (
	"cmp"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// promtool finds Prometheus's promtool: $PROMTOOL (make test sets it from hack/prometheus.sh),
// else PATH.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	t.Skip("no promtool: run `make test` (hack/prometheus.sh installs Debian's prometheus) or set PROMTOOL")
	return ""
}

// promCase is one query evaluated by Prometheus's own engine (promtool test rules) over
// synthetic series; want nil means the query must return nothing.
type promCase struct {
	name   string
	series map[string]string // series -> promtool's expanding notation, one sample per 15s
	expr   string
	at     string
	want   *float64
	// interval is the series' sample interval (the scrape interval); 15s when empty.
	interval string
}

func num(v float64) *float64 { return &v }

// runPromtool evaluates every case with promtool and reports promtool's verdict per case.
func runPromtool(t *testing.T, cases []promCase) {
	t.Helper()
	bin := promtool(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			type sample struct {
				Labels string  `json:"labels"`
				Value  float64 `json:"value"`
			}
			type exprTest struct {
				Expr       string   `json:"expr"`
				EvalTime   string   `json:"eval_time"`
				ExpSamples []sample `json:"exp_samples"`
			}
			type input struct {
				Series string `json:"series"`
				Values string `json:"values"`
			}
			test := struct {
				Interval string     `json:"interval"`
				Input    []input    `json:"input_series"`
				Exprs    []exprTest `json:"promql_expr_test"`
			}{Interval: cmp.Or(c.interval, "15s"), Exprs: []exprTest{{Expr: c.expr, EvalTime: c.at, ExpSamples: []sample{}}}}
			for s, v := range c.series {
				test.Input = append(test.Input, input{Series: s, Values: v})
			}
			if c.want != nil {
				test.Exprs[0].ExpSamples = []sample{{Labels: "{}", Value: *c.want}}
			}
			// JSON is YAML: promtool reads the file as YAML.
			doc, err := json.Marshal(map[string]any{"rule_files": []string{}, "evaluation_interval": "15s", "tests": []any{test}})
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(t.TempDir(), "test.yml")
			if err := os.WriteFile(f, doc, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin, "test", "rules", f).CombinedOutput()
			if err != nil {
				t.Errorf("%s at %s: want %s; promtool: %v\n%s", c.expr, c.at, describe(c.want), err, strings.TrimSpace(string(out)))
			}
		})
	}
}

func describe(v *float64) string {
	if v == nil {
		return "no result"
	}
	b, _ := json.Marshal(*v)
	return string(b)
}

// TestTrendQueryInPrometheus runs TrendQuery through Prometheus's engine: a load that rises
// 0.1/s has the trend 0.1 once it has been measured over TrendMinSpan after a whole window of
// answers, and no trend before that (where a bare deriv already answers from the first samples
// of the new series); a steady rate that just started, on a new series or an idle one, has no
// trend while its window fills.
func TestTrendQueryInPrometheus(t *testing.T) {
	const q = `sum(work{namespace="ml"})`
	rising := map[string]string{`work{namespace="ml",pod="a"}`: "0+1.5x60"}
	lateRising := map[string]string{`work{namespace="ml",pod="a"}`: "_x20 0+1.5x40"}
	flat := map[string]string{`work{namespace="ml",pod="a"}`: "4x60", `work{namespace="ml",pod="b"}`: "3x60"}
	bare := "deriv((" + q + ")[5m:30s])"
	tq := TrendQuery(q, time.Minute)
	// A counter that starts at 5m and grows 10/s from then on: a steady load.
	const rate = `sum(rate(tokens_total{namespace="ml"}[1m]))`
	starts := map[string]string{`tokens_total{namespace="ml",pod="a"}`: "_x20 0+150x60"}
	// The same traffic starting at 5m on a pod that served nothing before.
	idle := map[string]string{`tokens_total{namespace="ml",pod="a"}`: "0x20 0+150x60"}
	runPromtool(t, []promCase{
		{name: "a bare deriv answers from the first minute of a new series", series: rising, expr: bare, at: "1m", want: num(0.1)},
		{name: "no trend before the load was measured over half the window", series: rising, expr: tq, at: "1m"},
		{name: "no trend two minutes in", series: rising, expr: tq, at: "2m"},
		{name: "no trend over half the window counting the first window", series: rising, expr: tq, at: "3m"},
		{name: "the trend once measured over half the window after a whole window", series: rising, expr: tq, at: "3m30s", want: num(0.1)},
		{name: "the trend over the whole window", series: rising, expr: tq, at: "10m", want: num(0.1)},
		{name: "a series that appeared a minute ago has no trend yet", series: lateRising, expr: tq, at: "6m"},
		{name: "a series that appeared three and a half minutes ago has one", series: lateRising, expr: tq, at: "8m30s", want: num(0.1)},
		{name: "a flat load has a zero trend", series: flat, expr: tq, at: "10m", want: num(0)},
		{name: "a rate still filling its window reads a ramp to the old query", series: starts, expr: "deriv((" + rate + ")[5m:30s]) and on() (count_over_time((" + rate + ")[5m:30s]) >= 6)", at: "8m", want: num(1 / 42.0)},
		{name: "a steady rate that just started has a zero trend", series: starts, expr: TrendQuery(rate, time.Minute), at: "8m30s", want: num(0)},
		{name: "and none while too little of it is full", series: starts, expr: TrendQuery(rate, time.Minute), at: "8m"},
		{name: "traffic that starts on an idle pod reads a ramp to the old query", series: idle, expr: "deriv((" + rate + ")[5m:30s]) and on() (count_over_time((" + rate + ")[5m:30s]) >= 6)", at: "8m30s", want: num(0.0446969696969697)},
		{name: "traffic that starts on an idle pod has no trend until its window is full", series: idle, expr: TrendQuery(rate, time.Minute), at: "8m30s"},
		{name: "traffic that starts on an idle pod has a zero trend", series: idle, expr: TrendQuery(rate, time.Minute), at: "9m", want: num(0)},
		{name: "an idle pod has no trend", series: idle, expr: TrendQuery(rate, time.Minute), at: "4m"},
	})
}

// TestFilledQueryInPrometheus runs FilledQuery through Prometheus's engine: traffic that starts
// on a new series at 5m (on an idle one at 5m15s) fills a one-minute rate's window a minute
// later (the rate is above zero at each of the four 15 s steps before it), not before; a load
// that stops is filling again a minute later. (Its count is 4 or 5 by Prometheus's version, whose subquery ranges are
// closed or open on the left; whether it answers is what counts.)
func TestFilledQueryInPrometheus(t *testing.T) {
	const rate = `sum(rate(tokens_total{namespace="ml"}[1m]))`
	starts := map[string]string{`tokens_total{namespace="ml",pod="a"}`: "_x20 0+150x60"}
	idle := map[string]string{`tokens_total{namespace="ml",pod="a"}`: "0x20 0+150x60"} // grows from 5m15s
	stops := map[string]string{`tokens_total{namespace="ml",pod="a"}`: "0+150x20 3000x40"}
	fq := "vector(1) and on() (" + FilledQuery(rate, time.Minute) + ")"
	runPromtool(t, []promCase{
		{name: "a new series 45 s after it starts is filling", series: starts, expr: fq, at: "5m45s"},
		{name: "a new series a minute after it starts has filled the window", series: starts, expr: fq, at: "6m", want: num(1)},
		{name: "an idle pod 45 s after traffic starts is filling", series: idle, expr: fq, at: "6m"},
		{name: "an idle pod a minute after traffic starts has filled the window", series: idle, expr: fq, at: "6m15s", want: num(1)},
		{name: "an idle pod is filling", series: idle, expr: fq, at: "4m"},
		{name: "a load that went on is full", series: stops, expr: fq, at: "5m", want: num(1)},
		{name: "a load that stopped is filling again", series: stops, expr: fq, at: "6m15s"},
	})
}

// TestTrendQueryAfterAHole runs TrendQuery through Prometheus's engine on traffic that stops
// and comes back (10 requests a second until 5m, none for three minutes, the same from 8m): the
// samples before the hole and after it are never six within its range together, so there is no
// trend until six follow the return (by 12m), and then the steady load's zero; a pause of 30 s
// is read across. The policy simulator's trend counts its samples as this
// does (test/sim/policysim, TestTheTrendCountsItsSamplesAcrossAHole).
func TestTrendQueryAfterAHole(t *testing.T) {
	const rate = `sum(rate(tokens_total{namespace="ml"}[1m]))`
	back := map[string]string{`tokens_total{namespace="ml",pod="a"}`: "0+150x20 3000x12 3000+150x40"}
	pause := map[string]string{`tokens_total{namespace="ml",pod="a"}`: "0+150x20 3000x2 3000+150x40"}
	tq := TrendQuery(rate, time.Minute)
	runPromtool(t, []promCase{
		{name: "no trend two minutes after the return", series: back, expr: tq, at: "10m"},
		{name: "none at 11m either", series: back, expr: tq, at: "11m"},
		{name: "the steady load's zero once six samples follow the return", series: back, expr: tq, at: "12m", want: num(0)},
		{name: "a pause of 30 s is read across (its drain a fall)", series: pause, expr: tq, at: "7m", want: num(-0.01818181818181818)},
	})
}
