package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Access guards a dashboard the way Jupyter and kubectl proxy users expect: the page acts with
// the kubeconfig's credentials, so only the browser of the person who started it may use it.
//
//   - Every request carries this launch's random token: in the URL the command prints
//     (?token=...), which the first page load turns into a cookie (HttpOnly, SameSite=Strict)
//     and drops from the address bar, or in an Authorization: Bearer header. Without it: 401.
//   - The Host header must name this machine at the listening port (localhost, 127.0.0.1,
//     [::1], or an address in Hosts): a page of another site that rebinds its DNS name to
//     127.0.0.1 sends its own name and gets 403.
//   - Anything but GET and HEAD (the actions) must be JSON (Content-Type application/json) and,
//     when the browser says where it comes from (Origin, Sec-Fetch-Site), come from the
//     dashboard's own origin: what a form of another site can send is refused.
type Access struct {
	// Token is this launch's secret (see NewToken). Required.
	Token string
	// Port is the port the dashboard listens on; a Host naming another port is refused.
	Port int
	// Hosts are more host names the dashboard answers to besides localhost, 127.0.0.1 and
	// [::1]: the IP address it was asked to listen on (an IP literal cannot be rebound).
	Hosts []string
}

// NewToken returns a random token: 32 bytes from crypto/rand, URL-safe.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating the dashboard's token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// CookieName is the token's cookie. Browsers share cookies between the ports of a host, so
// the name carries the port: two dashboards open at once keep their own tokens.
func (a Access) CookieName() string { return "modelship-dashboard-" + strconv.Itoa(a.Port) }

// URL is the address to open: base (http://host:port) with the token.
func (a Access) URL(base string) string {
	return strings.TrimSuffix(base, "/") + "/?token=" + url.QueryEscape(a.Token)
}

// Wrap returns next behind the checks above.
func (a Access) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.hostAllowed(r.Host) {
			refuse(w, r, http.StatusForbidden, fmt.Sprintf("host %q is not this dashboard's: open it at localhost:%d", r.Host, a.Port))
			return
		}
		safe := r.Method == http.MethodGet || r.Method == http.MethodHead
		// The token in the URL is taken on page loads only: an action carries the cookie.
		fromQuery := safe && a.valid(r.URL.Query().Get("token"))
		if !fromQuery && !a.valid(a.presented(r)) {
			refuse(w, r, http.StatusUnauthorized, "no valid token: open the URL `kubectl modelship dashboard` printed (it carries this launch's token)")
			return
		}
		if !safe {
			if reason := a.crossSite(r); reason != "" {
				refuse(w, r, http.StatusForbidden, reason)
				return
			}
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
				refuse(w, r, http.StatusUnsupportedMediaType, "send the action as application/json")
				return
			}
		}
		if fromQuery {
			http.SetCookie(w, &http.Cookie{Name: a.CookieName(), Value: a.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			if !strings.HasPrefix(r.URL.Path, "/api/") {
				// Drop the token from the address bar (and the history); the browser keeps the
				// fragment (#/namespace/name) across the redirect.
				q := r.URL.Query()
				q.Del("token")
				to := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
				w.Header().Set("Cache-Control", "no-store")
				http.Redirect(w, r, to.String(), http.StatusSeeOther)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// presented is the token a request carries in its cookie or its Authorization header.
func (a Access) presented(r *http.Request) string {
	if c, err := r.Cookie(a.CookieName()); err == nil {
		return c.Value
	}
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	return ""
}

func (a Access) valid(token string) bool {
	return a.Token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(a.Token)) == 1
}

// hostAllowed says whether a Host header names this machine at the dashboard's port.
func (a Access) hostAllowed(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, "80"
	}
	if port != strconv.Itoa(a.Port) {
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	switch host {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	for _, h := range a.Hosts {
		if strings.EqualFold(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), host) {
			return true
		}
	}
	return false
}

// crossSite says why a request that changes something does not come from the dashboard's own
// page, or "" when it does (or is no browser's: a client holding the token sends no Origin).
func (a Access) crossSite(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Sprintf("cross-origin request refused (Sec-Fetch-Site: %s)", site)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Sprintf("cross-origin request refused (Origin %s)", origin)
	}
	return ""
}

// refuse answers a refused request: JSON for the API (the page shows its error), text else.
func refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, code, errorBody{Error: msg})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, msg, code)
}
