package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// maxEvents is how many recent events status prints.
const maxEvents = 15

func addOutputFlag(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVarP(format, "output", "o", "", "Output format: json or yaml (default: a table for people)")
}

func (o *options) newGetCommand() *cobra.Command {
	var format string
	var all bool
	cmd := &cobra.Command{
		Use:   "get [NAME]",
		Short: "Show one ModelServer, or all in the namespace, as a table",
		Example: "  kubectl modelship get llama -n ml\n" +
			"  kubectl modelship get -A\n" +
			"  kubectl modelship get llama -o yaml",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if all {
					return fmt.Errorf("a NAME cannot be combined with --all-namespaces")
				}
				return o.runGet(cmd.Context(), args[0], format)
			}
			return o.runList(cmd.Context(), all, format)
		},
	}
	addOutputFlag(cmd, &format)
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List ModelServers in all namespaces")
	return cmd
}

func (o *options) newListCommand() *cobra.Command {
	var format string
	var all bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the ModelServers of the namespace (or of all namespaces with -A)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.runList(cmd.Context(), all, format)
		},
	}
	addOutputFlag(cmd, &format)
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List ModelServers in all namespaces")
	return cmd
}

func (o *options) runGet(ctx context.Context, name, format string) error {
	if err := validateOutput(format); err != nil {
		return err
	}
	_, ms, err := o.readModelServer(ctx, name)
	if err != nil {
		return err
	}
	if format != outputTable {
		return writeStructured(o.streams.Out, forOutput(ms), format)
	}
	return writeTable(o.streams.Out, []v1alpha1.ModelServer{*ms}, false, o.now())
}

func (o *options) runList(ctx context.Context, all bool, format string) error {
	if err := validateOutput(format); err != nil {
		return err
	}
	c, ns, err := o.newClient()
	if err != nil {
		return err
	}
	list := &v1alpha1.ModelServerList{}
	var opts []client.ListOption
	if !all {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return fmt.Errorf("listing modelservers: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	if format != outputTable {
		out := &v1alpha1.ModelServerList{Items: make([]v1alpha1.ModelServer, 0, len(list.Items))}
		out.APIVersion = v1alpha1.GroupVersion.String()
		out.Kind = "ModelServerList"
		for i := range list.Items {
			out.Items = append(out.Items, *forOutput(&list.Items[i]))
		}
		return writeStructured(o.streams.Out, out, format)
	}
	if len(list.Items) == 0 {
		where := fmt.Sprintf("namespace %q", ns)
		if all {
			where = "any namespace"
		}
		_, err := fmt.Fprintf(o.streams.ErrOut, "No modelservers found in %s.\n", where)
		return err
	}
	return writeTable(o.streams.Out, list.Items, all, o.now())
}

func (o *options) newStatusCommand() *cobra.Command {
	var format string
	var follow bool
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a ModelServer's rollout: step, weights, analysis, replicas, conditions, events",
		Example: "  kubectl modelship status llama -n ml\n" +
			"  kubectl modelship status llama --watch",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateOutput(format); err != nil {
				return err
			}
			c, ns, err := o.newClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if !follow {
				ms, err := getModelServer(ctx, c, ns, args[0])
				if err != nil {
					return err
				}
				return o.printStatus(ctx, c, ms, format)
			}
			last := ""
			err = o.follow(ctx, c, ns, args[0], func(ms *v1alpha1.ModelServer) (bool, error) {
				if ms.ResourceVersion == last {
					return false, nil
				}
				if last != "" {
					fmt.Fprintf(o.streams.Out, "\n--- %s ---\n", o.now().Format("15:04:05"))
				}
				last = ms.ResourceVersion
				return false, o.printStatus(ctx, c, ms, format)
			})
			if errors.Is(err, context.Canceled) {
				return nil // interrupted: the normal end of --watch
			}
			return err
		},
	}
	addOutputFlag(cmd, &format)
	cmd.Flags().BoolVarP(&follow, "watch", "w", false, "Print the status again on every change, until interrupted")
	return cmd
}

func (o *options) printStatus(ctx context.Context, c client.Client, ms *v1alpha1.ModelServer, format string) error {
	if format != outputTable {
		return writeStructured(o.streams.Out, forOutput(ms), format)
	}
	events, err := o.events(ctx, c, ms)
	if err != nil {
		// Events help but are not essential (RBAC may forbid them): say so and go on.
		fmt.Fprintf(o.streams.ErrOut, "warning: cannot list events: %v\n", err)
	}
	return writeStatus(o.streams.Out, ms, events, o.now())
}

// events lists the core/v1 Events involving ms (events.k8s.io events are served there too).
func (o *options) events(ctx context.Context, c client.Client, ms *v1alpha1.ModelServer) ([]corev1.Event, error) {
	list := &corev1.EventList{}
	sel := fields.Set{"involvedObject.kind": "ModelServer", "involvedObject.name": ms.Name}
	if err := c.List(ctx, list, client.InNamespace(ms.Namespace),
		client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(sel)}); err != nil {
		return nil, fmt.Errorf("listing events of modelserver %q: %w", ms.Name, err)
	}
	return recentEvents(list.Items, ms, maxEvents), nil
}

func (o *options) newHistoryCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "Show the revisions that left a rollout (status.history), newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateOutput(format); err != nil {
				return err
			}
			_, ms, err := o.readModelServer(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if format != outputTable {
				h := ms.Status.History
				if h == nil {
					h = []v1alpha1.RevisionRecord{}
				}
				return writeStructured(o.streams.Out, h, format)
			}
			return writeHistory(o.streams.Out, ms, o.now())
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}

// follow calls fn with the ModelServer now, then on every watch event and every poll interval,
// until fn says done, fn fails or ctx ends. The watch is opened before the first read so that no
// change is missed, and re-opened when the server closes it; the periodic re-read covers the
// time without a watch. Transient read errors are reported and retried.
func (o *options) follow(ctx context.Context, c client.WithWatch, ns, name string,
	fn func(*v1alpha1.ModelServer) (bool, error)) error {
	var w watch.Interface
	var events <-chan watch.Event
	open := func() {
		if w != nil {
			w.Stop()
		}
		w, events = nil, nil
		nw, err := c.Watch(ctx, &v1alpha1.ModelServerList{}, client.InNamespace(ns),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
		if err != nil {
			// The periodic re-read carries on; the watch is retried on the next tick.
			return
		}
		w, events = nw, nw.ResultChan()
	}
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	open()
	ms, err := getModelServer(ctx, c, ns, name)
	if err != nil {
		return err
	}
	ticker := time.NewTicker(o.poll)
	defer ticker.Stop()
	for {
		if ms != nil {
			done, err := fn(ms)
			if err != nil || done {
				return err
			}
		}
		ms = nil
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-events:
			if !ok {
				open()
				continue
			}
			got, isMS := ev.Object.(*v1alpha1.ModelServer)
			if !isMS || got.Name != name {
				continue
			}
			if ev.Type == watch.Deleted {
				return fmt.Errorf("modelserver %q in namespace %q was deleted", name, ns)
			}
			ms = got
		case <-ticker.C:
			if w == nil {
				open()
			}
			got, err := getModelServer(ctx, c, ns, name)
			var nf *notFoundError
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.As(err, &nf):
				return err
			case err != nil:
				fmt.Fprintf(o.streams.ErrOut, "warning: %v (retrying)\n", err)
				continue
			}
			ms = got
		}
	}
}
