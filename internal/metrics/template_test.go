package metrics

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/storage/names"
)

func TestRender(t *testing.T) {
	vars := Vars{
		Namespace: "ml",
		Name:      "llama",
		Color:     "green",
		Revision:  "5f7c9d8b6",
		Pods:      PodRegex("llama-green"),
		Window:    "2m",
	}
	cases := []struct {
		name    string
		tmpl    string
		vars    Vars
		want    string
		wantErr string
	}{
		{
			name: "substitutes every key",
			tmpl: `x{namespace="{{.Namespace}}",ms="{{.Name}}",color="{{.Color}}",rev="{{.Revision}}",pod=~"{{.Pods}}"}[{{.Window}}]`,
			vars: vars,
			want: `x{namespace="ml",ms="llama",color="green",rev="5f7c9d8b6",pod=~"llama-green-[a-z0-9]+-[a-z0-9]+"}[2m]`,
		},
		{
			name: "escapes double quotes and backslashes so a value cannot leave its string",
			tmpl: `x{namespace="{{.Namespace}}"}`,
			vars: Vars{Namespace: `a"} or vector(1) or y{z="\`},
			want: `x{namespace="a\"} or vector(1) or y{z=\"\\"}`,
		},
		{
			name: "escapes a newline",
			tmpl: `x{name="{{.Name}}"}`,
			vars: Vars{Name: "a\nb"},
			want: `x{name="a\nb"}`,
		},
		{
			name: "doubles the backslashes of a pod regex so that PromQL unescapes them back for the regex engine",
			tmpl: `x{pod=~"{{.Pods}}"}`,
			vars: Vars{Pods: PodRegex("llama.v2-blue")},
			want: `x{pod=~"llama\\.v2-blue-[a-z0-9]+-[a-z0-9]+"}`,
		},
		{
			name: "leaves a template without keys alone",
			tmpl: `sum(up)`,
			vars: vars,
			want: `sum(up)`,
		},
		{
			name:    "rejects an unknown key",
			tmpl:    `x{pod="{{.Unknown}}"}`,
			vars:    vars,
			wantErr: `map has no entry for key "Unknown"`,
		},
		{
			name:    "rejects a lower-case key, which is an unknown key",
			tmpl:    `x{ns="{{.namespace}}"}`,
			vars:    vars,
			wantErr: `no entry for key "namespace"`,
		},
		{
			name:    "rejects a template that does not parse",
			tmpl:    `x{pod="{{.Pods"}`,
			vars:    vars,
			wantErr: "parsing query template",
		},
		{
			name:    "rejects an empty template",
			tmpl:    "  ",
			vars:    vars,
			wantErr: "empty",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(tc.tmpl, tc.vars)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		tmpl    string
		wantErr bool
	}{
		{"accepts a template using every key", `x{namespace="{{.Namespace}}",n="{{.Name}}",c="{{.Color}}",r="{{.Revision}}",pod=~"{{.Pods}}"}[{{.Window}}]`, false},
		{"rejects an unknown key", `x{a="{{.Deployment}}"}`, true},
		{"rejects an unclosed action", `x{a="{{.Name"}`, true},
		{"rejects a call of an undefined function", `{{ shell "ls" }}`, true},
		{"rejects an empty template", ``, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.tmpl)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate(%q) = %v, want error: %v", tc.tmpl, err, tc.wantErr)
			}
		})
	}
}

func TestPodRegex(t *testing.T) {
	cases := []struct {
		name   string
		prefix string
		pod    string
		match  bool
	}{
		{"matches a pod of the Deployment", "llama-blue", "llama-blue-7d9c8b6f5-x2k9p", true},
		{"does not match the other color's pods", "llama-blue", "llama-green-7d9c8b6f5-x2k9p", false},
		{"does not match the pods of a Deployment whose name extends the prefix", "llama-blue", "llama-blue-2-7d9c8b6f5-x2k9p", false},
		{"does not match the Deployment's name alone", "llama-blue", "llama-blue", false},
		{"quotes a dot in the name", "llama.v2-blue", "llamaXv2-blue-7d9c8b6f5-x2k9p", false},
		{"matches a dotted name literally", "llama.v2-blue", "llama.v2-blue-7d9c8b6f5-x2k9p", true},
		{"is exact at the longest prefix whose pod names are never cut", strings.Repeat("a", MaxExactPodPrefix), strings.Repeat("a", MaxExactPodPrefix) + "-5b4f6d7c9x-x2k9p", true},
		{"still rejects an extended name at the longest exact prefix", strings.Repeat("a", MaxExactPodPrefix), strings.Repeat("a", MaxExactPodPrefix) + "-2-5b4f6d7c9x-x2k9p", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Prometheus anchors regex matchers at both ends.
			re := regexp.MustCompile("^(?:" + PodRegex(tc.prefix) + ")$")
			if got := re.MatchString(tc.pod); got != tc.match {
				t.Fatalf("%s matches %s: %v, want %v", PodRegex(tc.prefix), tc.pod, got, tc.match)
			}
		})
	}
}

// TestPodRegexMatchesGeneratedPodNames names pods the way the API server does (generateName
// "<deployment>-<hash>-", cut to 58 characters, plus 5 random ones) for Deployment names of
// every length, and checks that each color's regex matches its own pods and, as long as the
// names differ before the cut, not the other's.
func TestPodRegexMatchesGeneratedPodNames(t *testing.T) {
	for n := 1; n <= 80; n++ {
		base := strings.Repeat("m", n)
		for _, hash := range []string{"7d9c8b6f5", "5b4f6d7c9x", "6f7"} {
			blue, green := base+"-blue", base+"-green"
			blueRe := regexp.MustCompile("^(?:" + PodRegex(blue) + ")$")
			greenRe := regexp.MustCompile("^(?:" + PodRegex(green) + ")$")
			for range 5 {
				bluePod := names.SimpleNameGenerator.GenerateName(blue + "-" + hash + "-")
				greenPod := names.SimpleNameGenerator.GenerateName(green + "-" + hash + "-")
				if !blueRe.MatchString(bluePod) {
					t.Fatalf("name length %d: %s does not match its pod %s", len(blue), PodRegex(blue), bluePod)
				}
				if !greenRe.MatchString(greenPod) {
					t.Fatalf("name length %d: %s does not match its pod %s", len(green), PodRegex(green), greenPod)
				}
				// Once the API server's cut falls before the colors differ, the names are equal
				// but for the random suffix: nothing tells them apart.
				distinguishable := n+1 < maxGeneratedBase
				if distinguishable && (blueRe.MatchString(greenPod) || greenRe.MatchString(bluePod)) {
					t.Fatalf("name length %d: a color's regex matches the other color's pod (%s, %s)", n, bluePod, greenPod)
				}
			}
		}
	}
}

func TestPromDuration(t *testing.T) {
	cases := []struct {
		name string
		d    time.Duration
		want string
	}{
		{"writes 90 seconds in seconds", 90 * time.Second, "90s"},
		{"writes 2 minutes in minutes", 2 * time.Minute, "2m"},
		{"writes 120 seconds in minutes", 120 * time.Second, "2m"},
		{"writes an hour in hours", time.Hour, "1h"},
		{"writes 90 minutes in minutes", 90 * time.Minute, "90m"},
		{"writes 1.5 seconds in milliseconds", 1500 * time.Millisecond, "1500ms"},
		{"rounds sub-millisecond parts down", time.Second + 300*time.Microsecond, "1s"},
		{"writes zero as 0s", 0, "0s"},
		{"writes a negative duration as 0s", -time.Minute, "0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PromDuration(tc.d); got != tc.want {
				t.Fatalf("PromDuration(%s) = %q, want %q", tc.d, got, tc.want)
			}
		})
	}
}

func TestAnalysisWindow(t *testing.T) {
	cases := []struct {
		name   string
		window time.Duration
		want   string
	}{
		{"writes a 4m window in minutes", 4 * time.Minute, "4m"},
		{"writes a 90s window in seconds", 90 * time.Second, "90s"},
		{"writes a 1h window in hours", time.Hour, "1h"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AnalysisWindow(tc.window); got != tc.want {
				t.Fatalf("AnalysisWindow(%s) = %q, want %q", tc.window, got, tc.want)
			}
		})
	}
}
