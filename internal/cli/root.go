// Package cli is the logic of the kubectl plugin `kubectl modelship`: it reads ModelServers,
// renders their rollout for people, and asks rollouts to pause, resume, promote or abort by
// setting spec.paused or the operation annotations that the controller reads. main only calls
// NewCommand and turns the returned error into an exit code with ExitCode.
package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Exit codes of the plugin. Codes other than 0 and ExitFailure come only from `wait`.
const (
	// ExitOK: the command did what it was asked; for wait, the rollout finished Healthy.
	ExitOK = 0
	// ExitFailure: an error, or for wait a rollout that was rolled back or is stalled.
	ExitFailure = 1
	// ExitTimeout: wait gave up after --timeout.
	ExitTimeout = 2
	// ExitNeedsHuman: wait found the rollout paused or awaiting promotion.
	ExitNeedsHuman = 3
)

// ExitError is an error that asks main to exit with Code.
type ExitError struct {
	// Code is the process exit code.
	Code int
	// Err says why.
	Err error
}

// Error returns the message of the wrapped error.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the process exit code for err: ExitOK for nil, the Code of an ExitError in the
// chain, ExitFailure otherwise.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	return ExitFailure
}

// Option changes how NewCommand builds its commands; tests use them to inject a client and a clock.
type Option func(*options)

// WithClient makes the commands use c in namespace ns instead of the kubeconfig flags.
func WithClient(c client.WithWatch, ns string) Option {
	return func(o *options) {
		o.newClient = func() (client.WithWatch, string, error) { return c, ns, nil }
	}
}

// WithClock makes the commands read the time from now (ages, wait's log lines).
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithPollInterval sets how often wait and status --watch re-read the object besides the
// watch (default 10s).
func WithPollInterval(d time.Duration) Option {
	return func(o *options) { o.poll = d }
}

type options struct {
	streams   genericiooptions.IOStreams
	flags     *genericclioptions.ConfigFlags
	newClient func() (client.WithWatch, string, error)
	now       func() time.Time
	poll      time.Duration
}

// Scheme holds the types the plugin reads: ModelServers and core/v1 Events.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding modelship types to the scheme: %w", err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding core types to the scheme: %w", err)
	}
	if err := appsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding apps types to the scheme: %w", err)
	}
	return s, nil
}

// NewCommand returns the root command `kubectl modelship` with all its subcommands and the
// usual kubeconfig flags (-n, --context, --kubeconfig, ...).
func NewCommand(streams genericiooptions.IOStreams, opts ...Option) *cobra.Command {
	o := &options{
		streams: streams,
		flags:   genericclioptions.NewConfigFlags(true),
		now:     time.Now,
		poll:    10 * time.Second,
	}
	o.newClient = o.clientFromFlags
	for _, opt := range opts {
		opt(o)
	}
	root := &cobra.Command{
		Use:   "kubectl-modelship",
		Short: "Inspect and steer modelship ModelServer rollouts",
		Long: "kubectl modelship shows ModelServers and their blue/green rollouts, and asks the controller\n" +
			"to pause, resume, promote, abort or roll back a rollout. Every action is a plain change to\n" +
			"the ModelServer (spec.paused or an operation annotation naming the candidate revision),\n" +
			"so it is safe to repeat and can also be made with kubectl patch / kubectl annotate.",
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl modelship",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(
		o.newGetCommand(), o.newListCommand(), o.newStatusCommand(), o.newHistoryCommand(),
		o.newPauseCommand(true), o.newPauseCommand(false), o.newPromoteCommand(),
		o.newAbortCommand(), o.newRollbackCommand(), o.newWaitCommand(), o.newDashboardCommand(),
	)
	return root
}

func (o *options) clientFromFlags() (client.WithWatch, string, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("reading kubeconfig: %w", err)
	}
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("reading the namespace from kubeconfig: %w", err)
	}
	s, err := Scheme()
	if err != nil {
		return nil, "", err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, "", fmt.Errorf("creating a client: %w", err)
	}
	return c, ns, nil
}

// readModelServer connects and reads the ModelServer name in the namespace of the flags.
func (o *options) readModelServer(ctx context.Context, name string) (client.WithWatch, *v1alpha1.ModelServer, error) {
	c, ns, err := o.newClient()
	if err != nil {
		return nil, nil, err
	}
	ms, err := getModelServer(ctx, c, ns, name)
	return c, ms, err
}

// getModelServer reads one ModelServer, with an error that names it and its namespace.
func getModelServer(ctx context.Context, c client.Client, ns, name string) (*v1alpha1.ModelServer, error) {
	ms := &v1alpha1.ModelServer{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ms); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &notFoundError{name: name, namespace: ns, err: err}
		}
		return nil, fmt.Errorf("reading modelserver %q in namespace %q: %w", name, ns, err)
	}
	return ms, nil
}

// notFoundError says which ModelServer is missing where, and keeps the API error for errors.Is.
type notFoundError struct {
	name, namespace string
	err             error
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("modelserver %q not found in namespace %q", e.name, e.namespace)
}

func (e *notFoundError) Unwrap() error { return e.err }
