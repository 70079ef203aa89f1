package fleet

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// traceTimeLayout parses the Azure LLM trace's TIMESTAMP column ("2023-11-16 18:15:46.6805900").
const traceTimeLayout = "2006-01-02 15:04:05.999999999"

// TraceRequest is one request of a trace.
type TraceRequest struct {
	// Offset is the arrival time since the trace's first request.
	Offset time.Duration
	// ContextTokens is the prompt length.
	ContextTokens int
	// GeneratedTokens is the number of tokens the model generated.
	GeneratedTokens int
}

// Trace is a recorded request log, sorted by arrival.
type Trace struct {
	// Start is the timestamp of the first request.
	Start time.Time
	// Requests in arrival order.
	Requests []TraceRequest
}

// Duration is the length of one replay of the trace at speed 1: the last arrival plus one mean
// inter-arrival gap, so that a looped replay keeps the trace's spacing across the seam.
func (t Trace) Duration() time.Duration {
	n := len(t.Requests)
	if n == 0 {
		return 0
	}
	last := t.Requests[n-1].Offset
	if n == 1 {
		return last + time.Second
	}
	return last + last/time.Duration(n-1)
}

// LoadTrace reads a CSV trace with the header TIMESTAMP,ContextTokens,GeneratedTokens.
func LoadTrace(path string) (Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return Trace{}, fmt.Errorf("opening trace: %w", err)
	}
	defer func() { _ = f.Close() }()
	t, err := ReadTrace(f)
	if err != nil {
		return Trace{}, fmt.Errorf("reading trace %s: %w", path, err)
	}
	return t, nil
}

// ReadTrace parses a CSV trace (TIMESTAMP,ContextTokens,GeneratedTokens, header required, columns
// found by name). Rows are sorted by time; an empty trace is an error.
func ReadTrace(r io.Reader) (Trace, error) {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return Trace{}, fmt.Errorf("reading header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	its, okT := col["TIMESTAMP"]
	ic, okC := col["ContextTokens"]
	ig, okG := col["GeneratedTokens"]
	if !okT || !okC || !okG {
		return Trace{}, fmt.Errorf("header %q: want TIMESTAMP,ContextTokens,GeneratedTokens", header)
	}
	type row struct {
		at       time.Time
		ctx, gen int
	}
	var rows []row
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Trace{}, fmt.Errorf("line %d: %w", line, err)
		}
		if len(rec) <= max(its, ic, ig) {
			return Trace{}, fmt.Errorf("line %d: %d columns, want at least %d", line, len(rec), max(its, ic, ig)+1)
		}
		at, err := time.Parse(traceTimeLayout, strings.TrimSpace(rec[its]))
		if err != nil {
			return Trace{}, fmt.Errorf("line %d: timestamp: %w", line, err)
		}
		c, err := strconv.Atoi(strings.TrimSpace(rec[ic]))
		if err != nil || c < 0 {
			return Trace{}, fmt.Errorf("line %d: ContextTokens %q: not a count", line, rec[ic])
		}
		g, err := strconv.Atoi(strings.TrimSpace(rec[ig]))
		if err != nil || g < 0 {
			return Trace{}, fmt.Errorf("line %d: GeneratedTokens %q: not a count", line, rec[ig])
		}
		rows = append(rows, row{at: at, ctx: c, gen: g})
	}
	if len(rows) == 0 {
		return Trace{}, errors.New("trace has no requests")
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].at.Before(rows[j].at) })
	t := Trace{Start: rows[0].at, Requests: make([]TraceRequest, len(rows))}
	for i, r := range rows {
		t.Requests[i] = TraceRequest{Offset: r.at.Sub(t.Start), ContextTokens: r.ctx, GeneratedTokens: r.gen}
	}
	return t, nil
}

// Slice returns the requests whose offsets lie in [from, to), re-based so the first offset is
// measured from `from`.
func (t Trace) Slice(from, to time.Duration) Trace {
	out := Trace{Start: t.Start.Add(from)}
	for _, r := range t.Requests {
		if r.Offset >= from && r.Offset < to {
			r.Offset -= from
			out.Requests = append(out.Requests, r)
		}
	}
	return out
}

// ReplayOptions shape a replay.
type ReplayOptions struct {
	// Speed compresses time: trace seconds per replayed second (60 replays an hour in a minute,
	// which also multiplies the request rate by 60). Zero means 1.
	Speed float64
	// RateScale multiplies the number of requests: 2 duplicates every request, 0.5 keeps about
	// half, 2.5 makes two or three copies. Copies are spread evenly up to the next arrival.
	// Zero means 1.
	RateScale float64
	// Seed makes the thinning/duplication choices reproducible.
	Seed uint64
	// Loop restarts the trace when it ends.
	Loop bool
}

// Arrival is a replayed request.
type Arrival struct {
	// At is the arrival time since the replay began.
	At time.Duration
	// ContextTokens is the prompt length.
	ContextTokens int
	// GeneratedTokens is the number of tokens to generate.
	GeneratedTokens int
}

// Replay yields a trace's requests in replay time, time-compressed and scaled. It holds no
// clock: the caller asks for the arrivals up to an offset. Not safe for concurrent use.
type Replay struct {
	trace   Trace
	opts    ReplayOptions
	rng     *rand.Rand
	cycle   time.Duration // one pass in replay time
	next    int           // index of the next trace request to expand
	pass    int           // completed passes
	pending []Arrival
	done    bool
}

// NewReplay starts a replay of t.
func NewReplay(t Trace, opts ReplayOptions) (*Replay, error) {
	if len(t.Requests) == 0 {
		return nil, errors.New("replay of an empty trace")
	}
	if opts.Speed == 0 {
		opts.Speed = 1
	}
	if opts.RateScale == 0 {
		opts.RateScale = 1
	}
	if opts.Speed < 0 || math.IsNaN(opts.Speed) || math.IsInf(opts.Speed, 0) {
		return nil, fmt.Errorf("speed %v: must be a positive number", opts.Speed)
	}
	if opts.RateScale < 0 || math.IsNaN(opts.RateScale) || math.IsInf(opts.RateScale, 0) {
		return nil, fmt.Errorf("rate scale %v: must be a positive number", opts.RateScale)
	}
	return &Replay{
		trace: t,
		opts:  opts,
		rng:   rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		cycle: scaleDuration(t.Duration(), 1/opts.Speed),
	}, nil
}

// CycleDuration is the length of one pass of the trace in replay time.
func (r *Replay) CycleDuration() time.Duration { return r.cycle }

// Done is true when a non-looping replay has yielded every request.
func (r *Replay) Done() bool { return r.done && len(r.pending) == 0 }

// Until returns, in order, the arrivals before offset that were not returned yet.
func (r *Replay) Until(offset time.Duration) []Arrival {
	var out []Arrival
	for {
		// Emit what is pending first.
		i := 0
		for i < len(r.pending) && r.pending[i].At < offset {
			i++
		}
		out = append(out, r.pending[:i]...)
		r.pending = r.pending[i:]
		if len(r.pending) > 0 || r.done {
			return out
		}
		// Expand the next trace request if it arrives before offset.
		base := time.Duration(r.pass) * r.cycle
		at := base + scaleDuration(r.trace.Requests[r.next].Offset, 1/r.opts.Speed)
		if at >= offset {
			return out
		}
		r.expand(base, at)
	}
}

// expand turns trace request r.next into its copies and moves on.
func (r *Replay) expand(base, at time.Duration) {
	req := r.trace.Requests[r.next]
	var nextAt time.Duration
	if r.next+1 < len(r.trace.Requests) {
		nextAt = base + scaleDuration(r.trace.Requests[r.next+1].Offset, 1/r.opts.Speed)
	} else {
		nextAt = base + r.cycle
	}
	n := int(r.opts.RateScale)
	if frac := r.opts.RateScale - float64(n); frac > 0 && r.rng.Float64() < frac {
		n++
	}
	gap := nextAt - at
	for k := range n {
		r.pending = append(r.pending, Arrival{
			At:              at + gap*time.Duration(k)/time.Duration(n),
			ContextTokens:   req.ContextTokens,
			GeneratedTokens: req.GeneratedTokens,
		})
	}
	r.next++
	if r.next == len(r.trace.Requests) {
		r.next = 0
		r.pass++
		if !r.opts.Loop {
			r.done = true
		}
	}
}

func scaleDuration(d time.Duration, f float64) time.Duration {
	return time.Duration(math.Round(float64(d) * f))
}
