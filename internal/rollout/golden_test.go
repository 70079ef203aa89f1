package rollout

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current behaviour")

// story is a scripted run: events injected at given passes, measurements from a script,
// pods coming up one per pass, the clock following RequeueAfter.
type story struct {
	name     string
	ms       *v1alpha1.ModelServer
	total    int32
	passes   int
	events   func(pass int, s *sim)
	verdicts func(s *sim, n int) []v1alpha1.Verdict // n counts the candidate's earlier measurements
}

func TestGoldenLogs(t *testing.T) {
	stories := []story{
		{
			name:  "promotes-good-revision",
			ms:    newModelServer(withSteps(10, 50, 100), withStepDuration(time.Minute)),
			total: 4, passes: 27,
			events: func(pass int, s *sim) {
				if pass == 6 {
					s.newRevision(good)
				}
			},
			verdicts: func(*sim, int) []v1alpha1.Verdict { return []v1alpha1.Verdict{pass, pass} },
		},
		{
			name:  "rolls-back-failing-revision",
			ms:    newModelServer(withSteps(10, 25, 50, 100), withStepDuration(time.Minute), withFailureLimit(1)),
			total: 2, passes: 30,
			events: func(pass int, s *sim) {
				if pass == 4 {
					s.newRevision(bad)
				}
				if pass == 24 {
					s.newRevision(good) // the fix: a new revision leaves RolledBack
				}
			},
			verdicts: func(s *sim, n int) []v1alpha1.Verdict {
				if s.quality[s.ms.Status.Candidate.Revision] == good {
					return []v1alpha1.Verdict{pass}
				}
				switch {
				case n == 0:
					return []v1alpha1.Verdict{inc, pass} // too few samples yet: hold
				case n < 3:
					return []v1alpha1.Verdict{pass, pass}
				default:
					return []v1alpha1.Verdict{fail, pass}
				}
			},
		},
		{
			name:  "waits-for-promotion-with-pause",
			ms:    newModelServer(withSteps(25, 100), withStepDuration(time.Minute), withAutoPromote(false)),
			total: 4, passes: 30,
			events: func(pass int, s *sim) {
				switch pass {
				case 6:
					s.newRevision(good)
				case 9:
					s.ms.Spec.Paused = true
				case 12:
					s.ms.Spec.Paused = false
				case 22:
					s.op = OpPromote
				}
			},
			verdicts: func(*sim, int) []v1alpha1.Verdict { return nil }, // no metric configured
		},
	}
	for _, st := range stories {
		t.Run(st.name, func(t *testing.T) {
			got := runStory(st)
			path := filepath.Join("testdata", st.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading %s (run with -update to create it): %v", path, err)
			}
			if got != string(want) {
				t.Errorf("%s differs (run with -update after checking the change):\n%s", path, firstDiff(string(want), got))
			}
		})
	}
}

func runStory(st story) string {
	s := newSim(st.ms, st.total, good)
	var b strings.Builder
	measurements := map[string]int{}
	for pass := range st.passes {
		if st.events != nil {
			st.events(pass, s)
		}
		obs := s.observe()
		if MeasureDue(s.ms, s.now) {
			rev := s.ms.Status.Candidate.Revision
			obs.Measurement = &Measurement{At: s.now, Results: results(s.now, st.verdicts(s, measurements[rev])...)}
			measurements[rev]++
		}
		d := next(s.ms, obs, s.now)
		b.WriteString(s.logLine(pass, obs, d))
		b.WriteString("\n")
		s.apply(d)
		s.evolveSteady()
		next := d.RequeueAfter
		if next == 0 || next > 5*time.Minute {
			next = 30 * time.Second
		}
		s.now = s.now.Add(next)
	}
	return b.String()
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + w + "\n  got:  " + g
		}
	}
	return ""
}
