package v1alpha1

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDurationReadsAndWritesJSON(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    time.Duration
		wantErr string // substring of Err(); empty: valid
		out     string // what MarshalJSON writes back
	}{
		{name: "a duration in minutes is read", in: `"2m"`, want: 2 * time.Minute, out: `"2m0s"`},
		{name: "a compound duration is read", in: `"1h30m"`, want: 90 * time.Minute, out: `"1h30m0s"`},
		{name: "a fractional duration is read", in: `"1.5s"`, want: 1500 * time.Millisecond, out: `"1.5s"`},
		{name: "a negative duration is read as negative (admission refuses it, not the decoder)", in: `"-30s"`, want: -30 * time.Second, out: `"-30s"`},
		{name: "null reads as zero", in: `null`, want: 0, out: `"0s"`},
		{name: "words are kept and reported, never a decoding error", in: `"2 minutes"`, wantErr: `"2 minutes" is not a duration such as 90s, 2m or 1h30m`, out: `"2 minutes"`},
		{name: "a number without a unit is kept and reported", in: `"90"`, wantErr: `"90" is not a duration`, out: `"90"`},
		{name: "an empty string is kept and reported", in: `""`, wantErr: `"" is not a duration`, out: `""`},
		{name: "a JSON number is kept as a number and reported", in: `120`, wantErr: `120 is not a duration: write a string`, out: `120`},
		{name: "a JSON object is kept and reported", in: `{"seconds":3}`, wantErr: `{"seconds":3} is not a duration`, out: `{"seconds":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Duration
			if err := json.Unmarshal([]byte(tt.in), &d); err != nil {
				t.Fatalf("Unmarshal(%s) failed: %v", tt.in, err)
			}
			if d.Duration != tt.want {
				t.Errorf("Duration = %v, want %v", d.Duration, tt.want)
			}
			switch err := d.Err(); {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Err() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Err() = %v, want it to contain %q", err, tt.wantErr)
			}
			if tt.wantErr != "" && d.String() == "" && tt.in != `""` {
				t.Errorf("String() is empty for %s", tt.in)
			}
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(out) != tt.out {
				t.Errorf("Marshal = %s, want %s", out, tt.out)
			}
		})
	}
}

func TestDurationSetByHandWithTextThatIsNotJSONIsWrittenAsAString(t *testing.T) {
	out, err := json.Marshal(Duration{Invalid: "2 minutes"})
	if err != nil || string(out) != `"2 minutes"` {
		t.Errorf("Marshal = %s, %v", out, err)
	}
	if got := (Duration{Invalid: `"2 minutes"`}).String(); got != "2 minutes" {
		t.Errorf("String() = %q, want the text without JSON quotes", got)
	}
}

// A list of ModelServers in which one holds a malformed duration still decodes: the others are
// intact and the bad one says which value is wrong (the informer decodes the whole list at once).
func TestModelServerListWithOneMalformedDurationStillDecodes(t *testing.T) {
	list := `{"apiVersion":"serving.modelship.dev/v1alpha1","kind":"ModelServerList","metadata":{},"items":[
	 {"metadata":{"name":"good"},"spec":{"rollout":{"stepDuration":"2m"}}},
	 {"metadata":{"name":"bad"},"spec":{"rollout":{"stepDuration":"2 minutes","analysis":{"interval":"30s"}},
	  "autoscaling":{"maxReplicas":3,"behavior":{"scaleDown":{"stabilizationWindow":"five minutes"}}}}}]}`
	var l ModelServerList
	if err := json.Unmarshal([]byte(list), &l); err != nil {
		t.Fatalf("the list does not decode: %v", err)
	}
	if len(l.Items) != 2 {
		t.Fatalf("got %d items, want 2", len(l.Items))
	}
	good, bad := l.Items[0], l.Items[1]
	if good.Spec.Rollout.StepDuration.Duration != 2*time.Minute || good.Spec.Rollout.StepDuration.Err() != nil {
		t.Errorf("good stepDuration = %v (%v)", good.Spec.Rollout.StepDuration, good.Spec.Rollout.StepDuration.Err())
	}
	if bad.Spec.Rollout.StepDuration.Err() == nil || bad.Spec.Rollout.Analysis.Interval.Duration != 30*time.Second {
		t.Errorf("bad: stepDuration %v (%v), interval %v", bad.Spec.Rollout.StepDuration, bad.Spec.Rollout.StepDuration.Err(), bad.Spec.Rollout.Analysis.Interval)
	}
	if w := bad.Spec.Autoscaling.Behavior.ScaleDown.StabilizationWindow; w == nil || w.Err() == nil {
		t.Errorf("bad: stabilizationWindow %v should report five minutes", w)
	}
	// Writing the object back (a finalizer update, say) keeps what the user wrote.
	out, err := json.Marshal(bad.Spec.Rollout)
	if err != nil || !strings.Contains(string(out), `"stepDuration":"2 minutes"`) {
		t.Errorf("written back as %s (%v)", out, err)
	}
	cp := bad.DeepCopy()
	if cp.Spec.Rollout.StepDuration.Err() == nil {
		t.Error("DeepCopy lost the malformed text")
	}
}
