package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelship/modelship/internal/dashboard"
)

func (o *options) newDashboardCommand() *cobra.Command {
	var (
		all           bool
		address       string
		port          int
		prometheusURL string
	)
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a local web page of every ModelServer's rollout, live, with the rollout actions",
		Long: "dashboard serves a web page on this machine, at a free port unless --port is given, that shows every\n" +
			"ModelServer of the namespace (or of all namespaces with -A): phase, versions, weights, replicas and\n" +
			"GPU utilization, updated as the controller writes, and one page per ModelServer with its rollout's\n" +
			"steps and measurements, revision history and events. Its buttons run the same code as pause, resume,\n" +
			"promote, promote --full, abort and rollback, with your kubeconfig's credentials.\n\n" +
			"Open the URL it prints: it carries a random token made for this launch, which the page keeps in a\n" +
			"cookie (HttpOnly, SameSite=Strict). Requests without it are refused (401), as are requests that name\n" +
			"another host than localhost, 127.0.0.1 or [::1] at the dashboard's port (403: DNS rebinding), and\n" +
			"actions that are not JSON from the page itself. Scripts may send the token as Authorization: Bearer.",
		Example: "  kubectl modelship dashboard -n ml\n" +
			"  kubectl modelship dashboard -A --port 8080 --prometheus-url http://localhost:9090",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.runDashboard(cmd.Context(), all, net.JoinHostPort(address, strconv.Itoa(port)), prometheusURL)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "Show ModelServers in all namespaces")
	cmd.Flags().StringVar(&address, "address", "localhost", "Address to listen on (keep it local: the page acts with your credentials)")
	cmd.Flags().IntVar(&port, "port", 0, "Port to listen on (default: a free one)")
	cmd.Flags().StringVar(&prometheusURL, "prometheus-url", "", "Prometheus to read GPU utilization over time from (optional)")
	return cmd
}

func (o *options) runDashboard(ctx context.Context, all bool, listen, prometheusURL string) error {
	c, ns, err := o.newClient()
	if err != nil {
		return err
	}
	if all {
		ns = ""
	}
	opts := dashboard.Options{Client: c, Namespace: ns, Act: o.dashboardAct(c), Now: o.now}
	if prometheusURL != "" {
		pc, err := promapi.NewClient(promapi.Config{Address: prometheusURL})
		if err != nil {
			return fmt.Errorf("--prometheus-url: %w", err)
		}
		opts.Prometheus = promv1.NewAPI(pc)
	}
	d, err := dashboard.New(opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchErr := make(chan error, 1)
	go func() { watchErr <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-watchErr:
		if err == nil {
			return nil
		}
		return fmt.Errorf("reading modelservers for the dashboard: %w", err)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", listen, err)
	}
	access, base, err := accessFor(ln.Addr())
	if err != nil {
		_ = ln.Close()
		return err
	}
	srv := &http.Server{Handler: access.Wrap(d.Handler()), ReadHeaderTimeout: 10 * time.Second}
	where := "namespace " + ns
	if ns == "" {
		where = "all namespaces"
	}
	fmt.Fprintf(o.streams.Out, "modelship dashboard of %s at %s (Ctrl-C stops it)\n", where, access.URL(base))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving the dashboard: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancelShutdown := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancelShutdown()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stopping the dashboard: %w", err)
	}
	return nil
}

// accessFor guards a dashboard listening at addr with a new token, and returns the base URL
// to print: the listening IP, or localhost when it listens on all addresses. An IP the user
// asked for (--address) is served besides localhost, 127.0.0.1 and [::1].
func accessFor(addr net.Addr) (dashboard.Access, string, error) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return dashboard.Access{}, "", fmt.Errorf("listening on %s: not a TCP address", addr)
	}
	token, err := dashboard.NewToken()
	if err != nil {
		return dashboard.Access{}, "", err
	}
	a := dashboard.Access{Token: token, Port: tcp.Port}
	host := "localhost"
	if !tcp.IP.IsUnspecified() {
		host = tcp.IP.String()
		if !tcp.IP.Equal(net.IPv4(127, 0, 0, 1)) && !tcp.IP.Equal(net.IPv6loopback) {
			a.Hosts = []string{host}
		}
	}
	return a, "http://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port)), nil
}

// dashboardAct runs the page's actions through the subcommands' own code, as the dashboard's
// user, and returns what the subcommand printed.
func (o *options) dashboardAct(c client.WithWatch) dashboard.ActFunc {
	return func(ctx context.Context, namespace, name string, a dashboard.Action) (string, error) {
		out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
		sub := &options{
			streams:   genericiooptions.IOStreams{Out: out, ErrOut: errOut},
			newClient: func() (client.WithWatch, string, error) { return c, namespace, nil },
			now:       o.now,
			poll:      o.poll,
		}
		var err error
		// The page sends the candidate revision it showed: the actions on a rollout land on it
		// or are refused (see setOperation); pause is a brake and applies to whatever runs.
		switch a.Verb {
		case dashboard.ActionPause:
			err = sub.runPause(ctx, name, true, "")
		case dashboard.ActionResume:
			err = sub.runPause(ctx, name, false, a.Candidate)
		case dashboard.ActionPromote:
			err = sub.runOperation(ctx, name, opPromote, a.Candidate)
		case dashboard.ActionPromoteFull:
			err = sub.runOperation(ctx, name, opPromoteFull, a.Candidate)
		case dashboard.ActionAbort:
			err = sub.runOperation(ctx, name, opAbort, a.Candidate)
		case dashboard.ActionRollback:
			err = sub.runRollback(ctx, name, a.Revision, a.Candidate)
		default:
			err = fmt.Errorf("unknown action %q", a.Verb)
		}
		return errOut.String() + out.String(), err
	}
}
