package v1alpha1

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestServiceNamesAreValidUniqueAndPredictable(t *testing.T) {
	tests := []struct {
		name, modelServer string
		want              string // blue's Service, when it is kept
		wantPrefix        string // how blue's Service starts, when it is derived
	}{
		{name: "a name that is a DNS label is kept", modelServer: "llama", want: "llama-blue"},
		{name: "a name with dashes and digits is kept", modelServer: "llama-3-8b", want: "llama-3-8b-blue"},
		{name: "dots become dashes and a hash of the name is added", modelServer: "llama-3.1-8b", wantPrefix: "llama-3-1-8b-"},
		{name: "a name starting with a digit gets a letter in front", modelServer: "3b-chat", wantPrefix: "ms-3b-chat-"},
		{name: "a name starting with a digit and holding dots", modelServer: "7.5b", wantPrefix: "ms-7-5b-"},
		{name: "a long dotted name is cut to fit 63 characters", modelServer: strings.Repeat("a.", 60) + "b", wantPrefix: "a-a-a-"},
		{name: "a long label (stored before the 40-character limit) is cut to fit", modelServer: strings.Repeat("x", 60), wantPrefix: "xxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []Color{Blue, Green} {
				got := ServiceNameOf(tt.modelServer, c)
				if errs := validation.IsDNS1035Label(got); len(errs) > 0 {
					t.Fatalf("ServiceNameOf(%q, %s) = %q, not a Service name: %v", tt.modelServer, c, got, errs)
				}
				if !strings.HasSuffix(got, "-"+string(c)) {
					t.Errorf("ServiceNameOf(%q, %s) = %q, does not end with the color", tt.modelServer, c, got)
				}
				if again := ServiceNameOf(tt.modelServer, c); again != got {
					t.Errorf("ServiceNameOf(%q, %s) gave %q, then %q", tt.modelServer, c, got, again)
				}
			}
			got := (&ModelServer{ObjectMeta: metav1.ObjectMeta{Name: tt.modelServer}}).ServiceName(Blue)
			if tt.want != "" && got != tt.want {
				t.Errorf("ServiceName(blue) of %q = %q, want %q", tt.modelServer, got, tt.want)
			}
			if tt.wantPrefix != "" && (!hashed.MatchString(got) || !strings.HasPrefix(got, tt.wantPrefix)) {
				t.Errorf("ServiceName(blue) of %q = %q, want %s...-<6 hex digits>-blue", tt.modelServer, got, tt.wantPrefix)
			}
		})
	}
}

// hashed is a derived Service name: a DNS label, a dash, six hex digits and the color.
var hashed = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?-[0-9a-f]{6}-blue$`)

// Names that differ only where a Service name cannot follow them (a dot, a leading digit) get
// Services of their own, and so does every other pair of valid ModelServer names tried.
func TestServiceNamesOfDifferentModelServersNeverCollide(t *testing.T) {
	names := []string{"a.b", "a-b", "a.b-c", "a-b.c", "a-b-c", "a.b.c", "1a", "ms-1a", "llama-3.1-8b", "llama-3-1-8b", "llama-3.18b", "llama-31-8b"}
	for i := range 500 {
		names = append(names, fmt.Sprintf("m%d.v%d", i/10, i%10), fmt.Sprintf("m%d-v%d", i/10, i%10), fmt.Sprintf("%d.%d", i/10, i%10), fmt.Sprintf("%d-%d", i/10, i%10))
	}
	seen := map[string]string{}
	for _, n := range names {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Fatalf("test name %q is not a ModelServer name: %v", n, errs)
		}
		for _, c := range []Color{Blue, Green} {
			s := ServiceNameOf(n, c)
			if other, ok := seen[s]; ok && other != n {
				t.Fatalf("ModelServers %q and %q both get Service %q", other, n, s)
			}
			seen[s] = n
		}
	}
}
