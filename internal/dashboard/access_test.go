package dashboard

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// guarded is a dashboard behind Access at its real port, with the actions it was asked to run.
type guarded struct {
	url    string // http://127.0.0.1:port
	port   int
	access Access
	calls  *[]string
}

func newGuarded(t *testing.T) guarded {
	t.Helper()
	var calls []string
	s, err := New(Options{Client: fake.NewClientBuilder().WithScheme(testScheme(t)).Build(), Namespace: "demo",
		Act: func(_ context.Context, ns, name string, a Action) (string, error) {
			calls = append(calls, ns+"/"+name+" "+a.Verb)
			return "done", nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	token, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	access := Access{Token: token, Port: port}
	srv.Config.Handler = access.Wrap(s.Handler())
	srv.Start()
	t.Cleanup(srv.Close)
	return guarded{url: srv.URL, port: port, access: access, calls: &calls}
}

// request is one HTTP request to the guarded dashboard.
type request struct {
	method, path string
	host         string // Host header; empty: the server's address
	headers      map[string]string
	cookie       bool // send the token's cookie
}

func (g guarded) do(t *testing.T, r request) *http.Response {
	t.Helper()
	var body io.Reader
	if r.method == http.MethodPost {
		body = strings.NewReader(`{}`)
	}
	req, err := http.NewRequestWithContext(context.Background(), r.method, g.url+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.host != "" {
		req.Host = r.host
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	if r.cookie {
		req.AddCookie(&http.Cookie{Name: g.access.CookieName(), Value: g.access.Token})
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

func TestTheDashboardRefusesAnotherSiteAndAnyoneWithoutTheToken(t *testing.T) {
	g := newGuarded(t)
	evil := "evil.example:" + strconv.Itoa(g.port)
	pause := "/api/modelservers/demo/llama/actions/pause"
	json := map[string]string{"Content-Type": "application/json"}
	cases := []struct {
		name string
		req  request
		want int
	}{
		{"a DNS-rebinding page's pause (its own name in Host and Origin)",
			request{method: http.MethodPost, path: pause, host: evil, headers: map[string]string{"Content-Type": "application/json", "Origin": "http://" + evil}}, http.StatusForbidden},
		{"the same pause even with the token's cookie",
			request{method: http.MethodPost, path: pause, host: evil, cookie: true, headers: map[string]string{"Content-Type": "application/json", "Origin": "http://" + evil}}, http.StatusForbidden},
		{"a local user's plain curl -X POST .../actions/resume with no Origin",
			request{method: http.MethodPost, path: "/api/modelservers/demo/llama/actions/resume", headers: json}, http.StatusUnauthorized},
		{"a resume with a wrong bearer token",
			request{method: http.MethodPost, path: "/api/modelservers/demo/llama/actions/resume", headers: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer guess"}}, http.StatusUnauthorized},
		{"a resume with the token in the URL only (page loads only)",
			request{method: http.MethodPost, path: "/api/modelservers/demo/llama/actions/resume?token=" + g.access.Token, headers: json}, http.StatusUnauthorized},
		{"the fleet read without the token", request{method: http.MethodGet, path: "/api/modelservers"}, http.StatusUnauthorized},
		{"the stream without the token", request{method: http.MethodGet, path: "/api/stream"}, http.StatusUnauthorized},
		{"a detail without the token", request{method: http.MethodGet, path: "/api/modelservers/demo/llama"}, http.StatusUnauthorized},
		{"the page without the token", request{method: http.MethodGet, path: "/"}, http.StatusUnauthorized},
		{"the health check without the token", request{method: http.MethodGet, path: "/healthz"}, http.StatusUnauthorized},
		{"the fleet read with the token but another host name", request{method: http.MethodGet, path: "/api/modelservers", host: evil, cookie: true}, http.StatusForbidden},
		{"the fleet read with the token at another port", request{method: http.MethodGet, path: "/api/modelservers", host: "127.0.0.1:1", cookie: true}, http.StatusForbidden},
		{"a pause with the token from another origin",
			request{method: http.MethodPost, path: pause, cookie: true, headers: map[string]string{"Content-Type": "application/json", "Origin": "http://localhost:1"}}, http.StatusForbidden},
		{"a pause with the token that the browser says is cross-site",
			request{method: http.MethodPost, path: pause, cookie: true, headers: map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}}, http.StatusForbidden},
		{"a pause with the token sent as a form (a simple request any site can send)",
			request{method: http.MethodPost, path: pause, cookie: true, headers: map[string]string{"Content-Type": "text/plain"}}, http.StatusUnsupportedMediaType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if res := g.do(t, tc.req); res.StatusCode != tc.want {
				t.Errorf("got %d, want %d", res.StatusCode, tc.want)
			}
		})
	}
	if len(*g.calls) != 0 {
		t.Errorf("refused requests ran actions: %v", *g.calls)
	}
}

func TestThePrintedURLsTokenBecomesAStrictCookieThatRunsTheActions(t *testing.T) {
	g := newGuarded(t)
	res := g.do(t, request{method: http.MethodGet, path: "/?token=" + g.access.Token})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("the printed URL answered %d to %q, want 303 to / (the token out of the address bar)", res.StatusCode, res.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == g.access.CookieName() {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value != g.access.Token || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v, want the token, HttpOnly, SameSite=Strict", cookie)
	}
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]"} {
		hostport := host + ":" + strconv.Itoa(g.port)
		if res := g.do(t, request{method: http.MethodGet, path: "/api/modelservers", host: hostport, cookie: true}); res.StatusCode != http.StatusOK {
			t.Errorf("the fleet read at %s with the cookie answered %d, want 200", hostport, res.StatusCode)
		}
	}
	if res := g.do(t, request{method: http.MethodGet, path: "/", cookie: true}); res.StatusCode != http.StatusOK {
		t.Errorf("the page with the cookie answered %d", res.StatusCode)
	}
	origin := "http://127.0.0.1:" + strconv.Itoa(g.port)
	res = g.do(t, request{method: http.MethodPost, path: "/api/modelservers/demo/llama/actions/pause", cookie: true,
		headers: map[string]string{"Content-Type": "application/json", "Origin": origin, "Sec-Fetch-Site": "same-origin"}})
	if res.StatusCode != http.StatusOK || strings.Join(*g.calls, ",") != "demo/llama pause" {
		t.Errorf("the page's own pause answered %d and ran %v, want 200 and the pause", res.StatusCode, *g.calls)
	}
	res = g.do(t, request{method: http.MethodPost, path: "/api/modelservers/demo/llama/actions/resume",
		headers: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + g.access.Token}})
	if res.StatusCode != http.StatusOK {
		t.Errorf("a script's resume with the bearer token answered %d, want 200", res.StatusCode)
	}
}

func TestTheTokensAreRandom(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || len(a) < 40 {
		t.Errorf("tokens %q and %q, want two different ones of 32 random bytes", a, b)
	}
}
