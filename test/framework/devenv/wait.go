package devenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// logTailLines is how many lines of a part's log a start error shows.
const logTailLines = 25

// errPortInUse marks a part that could not listen on the port picked for it: another program
// took the port between the pick and the start. Start retries such a part with new ports.
var errPortInUse = errors.New("port taken by another program")

// partError names the part that failed and shows the end of its log.
func partError(part *Process, err error) error {
	tail := tailFile(part.LogPath(), logTailLines)
	if strings.Contains(tail, "address already in use") {
		err = fmt.Errorf("%w (%w)", err, errPortInUse)
	}
	return fmt.Errorf("%s: %w\n--- last lines of %s ---\n%s\n---", part.Name(), err, part.LogPath(), tail)
}

// waitFor polls check every interval until it returns nil, the process exits, ctx ends or the
// timeout passes. The error carries check's last error.
func waitFor(ctx context.Context, proc *Process, what string, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var exited <-chan struct{}
	if proc != nil {
		exited = proc.Exited()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(cctx)
		ccancel()
		if err == nil {
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return fmt.Errorf("waiting for %s: %w", what, perm.error)
		}
		// A check cut short by the overall deadline says less than the one before it.
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-exited:
			return fmt.Errorf("exited (%v) while waiting for %s: last check: %w", proc.ExitErr(), what, last)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s not reached within %s: last check: %w", what, timeout, last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// permanentError marks a check failure that retrying cannot fix (an invalid object).
type permanentError struct{ error }

// permanent wraps err so that waitFor stops at once.
func permanent(err error) error { return permanentError{err} }

// httpGetOK is a check that GETs url and wants a 200. caPEM, when set, is the server's CA; an
// empty caPEM with an https URL skips verification (the parts' self-signed health endpoints).
func httpGetOK(url, bearer string, caPEM []byte) func(context.Context) error {
	tr := &http.Transport{Proxy: nil}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	} else {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback health check of a self-signed part
	}
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("request %s: %w", url, err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", url, err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
		}
		return nil
	}
}

// WaitServing waits until url (plain http on loopback) answers 200, for a companion started
// with Env.StartProcess. When the process exits first, the error is its *ExitError: its name,
// exit status and the last lines of its log (a simulator that cannot open its trace says so
// there). It also fails when ctx ends or timeout passes, showing the log's tail.
func WaitServing(ctx context.Context, p *Process, url string, timeout time.Duration) error {
	err := waitFor(ctx, p, url, timeout, httpGetOK(url, "", nil))
	if err == nil {
		return nil
	}
	select {
	case <-p.Exited():
		return p.exitError(p.ExitErr())
	default:
		return partError(p, err)
	}
}
