package controller

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/analysis"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/notify"
	"github.com/modelship/modelship/internal/plan"
	"github.com/modelship/modelship/internal/revision"
	"github.com/modelship/modelship/internal/rollout"
	"github.com/modelship/modelship/internal/routing"
	"github.com/modelship/modelship/internal/signals"
	"github.com/modelship/modelship/internal/telemetry"
	"github.com/modelship/modelship/internal/warmup"
)

// routeRefIndex indexes ModelServers by the user-owned HTTPRoute they reference.
const routeRefIndex = ".spec.gateway.routeRef.name"

// podModelServerIndex indexes the cached pods by their ModelServer label, so that a pass lists
// its own pods without scanning every pod of the namespace.
const podModelServerIndex = "pod.modelserver"

// cleanupFinalizer removes modelship's backendRefs from a user-owned HTTPRoute on deletion
// (objects modelship owns go with their owner references).
const cleanupFinalizer = "serving.modelship.dev/route-cleanup"

// DefaultWorkers is the default number of ModelServers reconciled at once: a slow Prometheus
// or metrics API (bounded by their timeouts) then holds one ModelServer, not the fleet.
const DefaultWorkers = 4

// staleCacheRetry is when a pass that found the cache older than its own last write looks again
// (the informer's event for that write usually comes first).
const staleCacheRetry = 100 * time.Millisecond

// MaxRetryDelay is the longest a ModelServer whose pass failed waits for the next one. A failed
// pass is retried with a growing delay (5 ms, doubling), and the delay it asked for is then
// dropped: controller-runtime's default lets it grow to 16 minutes, so a write refused on every
// pass (a webhook that is down) delayed every timer the pass's decision had set, such as the end
// of an aborted candidate's drain, by as much.
const MaxRetryDelay = 10 * time.Second

// retryLimiter is controller-runtime's default rate limiter with the per-object delay capped
// at MaxRetryDelay: a per-object exponential delay from 5 ms, and 10 retries per second with
// bursts of 100 over all objects.
func retryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, MaxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// ModelServerReconciler runs a ModelServer: it observes the Deployments, route, pods and
// metrics, asks the rollout state machine what to do, applies it and writes status once.
type ModelServerReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// Prometheus answers analysis queries; nil means every measurement is inconclusive.
	Prometheus metrics.Querier
	// Prober checks warm-up of both colors' pods.
	Prober warmup.Prober
	// Signals fetches the built-in autoscaling signals for all ModelServers at once; nil
	// without Prometheus.
	Signals *signals.SnapshotCache
	// MetricsAPIs reads metrics.k8s.io and external.metrics.k8s.io; nil when not configured.
	MetricsAPIs signals.MetricsAPIs
	// ScrapeInterval is how often Prometheus scrapes model server pods, the default of
	// spec.rollout.analysis.scrapeInterval (--prometheus-scrape-interval); zero means
	// window.DefaultScrapeInterval.
	ScrapeInterval time.Duration
	// QueryPolicy says which custom PromQL (and external metrics) a ModelServer may have the
	// controller run (--query-policy); empty is metrics.DefaultQueryPolicy (namespaced).
	QueryPolicy metrics.QueryPolicy
	// GatewayMetricsNamespace is the namespace label of the gateway's own series in Prometheus
	// (--gateway-metrics-namespace: the namespace Traefik runs in, as its scrape target labels
	// its series). The gateway metrics (spec.rollout.analysis.gateway, autoscaling metric
	// gateway) read that target's series only; empty refuses them.
	GatewayMetricsNamespace string
	// Now is the clock (time.Now in production).
	Now func() time.Time
	// fresh remembers the controller's last write of each ModelServer, so that a pass never
	// starts from a cached copy older than it (see freshness).
	fresh freshness
	// applied lets a pass skip applies that would repeat the last one (see appliedMemory).
	applied appliedMemory
	// podIndex is true when the cache indexes pods by ModelServer (set by SetupWithManager).
	podIndex bool
	// absent remembers the children checked live and found missing (see nameConflict).
	absent absentMemory
	// templates remembers the API server's verdict on each template revision (see templateRefusal).
	templates templateVerdicts
	// Workers is how many ModelServers are reconciled at once (default DefaultWorkers).
	Workers int
	// LiveReader reads straight from the API server; nameConflict uses it, only while one of
	// the ModelServer's objects is missing from the cache, to see objects of other owners that
	// the label-selected caches (CacheOptions) leave out. Nil reads the cache only.
	LiveReader client.Reader
	// InferencePools is true when the cluster served InferencePools at start (set by
	// SetupWithManager): only then are they watched and applied.
	InferencePools bool
	// cacheReader reads unstructured objects (KEDA ScaledObjects) from the
	// informer cache (the client reads unstructured objects from the API server).
	cacheReader client.Reader
	// scaledObjects is true when the cluster served KEDA's ScaledObjects at start.
	scaledObjects bool
	// traefikServices is true when the cluster served Traefik's TraefikServices at start
	// (spec.rollout.shadow.mirror TraefikService).
	traefikServices bool
	// CapacityInterval is how long one view of the nodes and their pods' GPUs serves every
	// capacity check (DefaultCapacityInterval when zero).
	CapacityInterval time.Duration
	// cluster is that shared view.
	cluster clusterView
	// JobWait is how long a pass waits for the background measurement or warm-up it starts
	// (DefaultJobWait when zero; see jobs).
	JobWait time.Duration
	// measurements and warmups run analysis queries and warm-up probes off the workers (set
	// by SetupWithManager; nil runs them inline).
	measurements *jobs[*rollout.Measurement]
	warmups      *warmth
	// fetches runs the autoscaling signal sources off the workers (set by SetupWithManager;
	// nil fetches inline).
	fetches *signals.Cache
	// Notifier posts rollout events and scaling limits to webhooks (spec.notifications and the
	// cluster's --notify-url) on its own goroutines; nil sends none. SetupWithManager starts
	// it, reading Secrets through LiveReader when it has no Resolve.
	Notifier *notify.Sender
	// gateCalls call the rollout gates off the workers (set by SetupWithManager; nil calls them
	// inline).
	gateCalls *jobs[rollout.GateResult]
}

// SetupWithManager registers the reconciler, its watches and its index.
func (r *ModelServerReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ModelServer{}, routeRefIndex, func(o client.Object) []string {
		ms := o.(*v1alpha1.ModelServer)
		if ms.Spec.Gateway.RouteRef == nil {
			return nil
		}
		return []string{ms.Spec.Gateway.RouteRef.Name}
	}); err != nil {
		return fmt.Errorf("indexing ModelServers by route reference: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podModelServerIndex, func(o client.Object) []string {
		if ms := o.GetLabels()[v1alpha1.LabelModelServer]; ms != "" {
			return []string{ms}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing pods by ModelServer: %w", err)
	}
	r.podIndex = true
	served, err := apiServed(mgr.GetRESTMapper(), routing.PoolGVK)
	if err != nil {
		return err
	}
	r.InferencePools, r.cacheReader = served, mgr.GetCache()
	if !served && r.Signals != nil {
		// Without InferencePools no endpoint picker reports: three fewer queries per interval.
		r.Signals.SkipEndpointPicker()
	}
	if r.scaledObjects, err = apiServed(mgr.GetRESTMapper(), scaledObjectGVK); err != nil {
		return err
	}
	if r.traefikServices, err = apiServed(mgr.GetRESTMapper(), routing.TraefikServiceGVK); err != nil {
		return err
	}
	telemetry.Register()
	workers := r.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	// A background job that ends after its pass gave up waiting enqueues the ModelServer.
	woken := make(chan crevent.TypedGenericEvent[*v1alpha1.ModelServer], 256)
	wake := func(k types.NamespacedName) {
		select {
		case woken <- crevent.TypedGenericEvent[*v1alpha1.ModelServer]{Object: &v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}}:
		case <-ctx.Done():
		}
	}
	wait := r.JobWait
	if wait == 0 {
		wait = DefaultJobWait
	}
	r.cluster.interval = r.CapacityInterval
	if r.cluster.interval == 0 {
		r.cluster.interval = DefaultCapacityInterval
	}
	r.measurements = newJobs[*rollout.Measurement](ctx, wait, DefaultJobTimeout, wake)
	r.warmups = newWarmth(ctx, wait, DefaultJobTimeout, wake)
	r.fetches = signals.NewCache(ctx, wait, DefaultJobTimeout, wake)
	r.gateCalls = newJobs[rollout.GateResult](ctx, wait, gateCallTimeout, wake)
	if r.Notifier != nil {
		if r.Notifier.Resolve == nil {
			reader := r.LiveReader
			if reader == nil {
				reader = r.Client
			}
			r.Notifier.Resolve = secretURL(reader)
		}
		r.Notifier.Start(ctx, notify.DefaultWorkers)
	}
	b := ctrl.NewControllerManagedBy(mgr).WithOptions(controller.Options{MaxConcurrentReconciles: workers, RateLimiter: retryLimiter()})
	if served {
		b = b.Owns(routing.NewPool())
	}
	return b.
		WatchesRawSource(source.Channel(woken, &handler.TypedEnqueueRequestForObject[*v1alpha1.ModelServer]{})).
		For(&v1alpha1.ModelServer{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&gatewayv1.HTTPRoute{}).
		Watches(&gatewayv1.HTTPRoute{}, handler.EnqueueRequestsFromMapFunc(r.modelServersForRoute)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podOwner),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				return o.GetLabels()[v1alpha1.LabelModelServer] != ""
			}))).
		// A color's EndpointSlices (labelled like its Service) cap its weight by ready endpoints.
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(podOwner),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				return o.GetLabels()[v1alpha1.LabelModelServer] != ""
			}))).
		Named("modelserver").
		Complete(r)
}

func podOwner(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetLabels()[v1alpha1.LabelModelServer]}}}
}

func (r *ModelServerReconciler) modelServersForRoute(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha1.ModelServerList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{routeRefIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ModelServers for an HTTPRoute", "HTTPRoute", klog.KObj(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, ms := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ms)})
	}
	return reqs
}

// Reconcile is one pass: get, freshness, finalizer, the spec to act on, one status write
// deferred whatever the exit (after which what must follow a successful write runs: the valid
// spec kept, a handled operation's annotation removed), validate, observe (reads only), plan
// (pure: package plan decides and sets every condition), apply.
func (r *ModelServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	ms := &v1alpha1.ModelServer{}
	if err := r.Get(ctx, req.NamespacedName, ms); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.fresh.stale(req.NamespacedName, ms.UID, ms.ResourceVersion) {
		// The informer has not delivered our last write yet; its event brings the object back.
		return ctrl.Result{RequeueAfter: staleCacheRetry}, nil
	}
	if !ms.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, ms)
	}
	if err := r.addFinalizer(ctx, ms); err != nil {
		return ctrl.Result{}, err
	}
	spec, err := r.specToActOn(ctx, ms)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.defaultSpec(ms)
	before, now := ms.DeepCopy(), r.Now()
	var after func() error // what follows a successful status write
	defer func() {
		if werr := r.writeStatus(ctx, before, ms); werr != nil {
			err = errors.Join(err, werr)
		} else if err == nil && after != nil {
			err = after()
		}
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// The namespace goes away with everything in it: nothing to retry.
			res, err = ctrl.Result{}, nil
		}
	}()
	if res, refused, err := r.refuse(ctx, before, ms, spec); refused || err != nil {
		return res, err
	}
	obs, err := r.observe(ctx, ms, now, spec.held)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A route the spec moved is taken over first (status.route, and the notes the plan reports).
	if err := r.moveRoute(ctx, ms, &obs); err != nil {
		return ctrl.Result{}, err
	}
	op := readRequest(ms)
	obs.Rollout.Operation = op.op
	obs.Rollout.GateResults = r.callGates(ctx, ms, now)
	p := plan.Plan(ms, obs, now)
	res, after, err = r.applyPlan(ctx, before, ms, spec, op, obs, p)
	return res, err
}

// refuse stalls a ModelServer the pass must not act on: a spec with nothing valid ever kept, the
// InferencePool API missing, or a child's name held by another owner. refused: the pass stops
// here (its status, Stalled, is still written).
func (r *ModelServerReconciler) refuse(ctx context.Context, before, ms *v1alpha1.ModelServer, spec specChoice) (res ctrl.Result, refused bool, err error) {
	if msg := spec.refusal(); msg != "" {
		// Nothing valid was ever kept: nothing is applied until it is fixed.
		plan.Stall(ms, spec.reason, msg)
		return ctrl.Result{}, true, nil
	}
	if msg := r.poolAPIMissing(ms); msg != "" {
		plan.Stall(ms, v1alpha1.ReasonInferencePoolAPIMissing, msg)
		return ctrl.Result{}, true, nil
	}
	conflict, err := r.nameConflict(ctx, ms)
	if err != nil || conflict != "" {
		return r.refuseConflict(ctx, before, ms, conflict), true, err
	}
	return ctrl.Result{}, false, nil
}

// applyPlan applies the plan p and puts its status in ms.Status, for the pass's one status
// write; after is what follows that write when it succeeds.
func (r *ModelServerReconciler) applyPlan(ctx context.Context, before, ms *v1alpha1.ModelServer, spec specChoice, op request, obs plan.Observation, p plan.Result) (ctrl.Result, func() error, error) {
	routeWritten, applyErr := r.apply(ctx, ms, obs.Rollout, p.Decision, obs.Route)
	var nc *nameConflictError
	switch {
	case errors.As(applyErr, &nc):
		return r.refuseConflict(ctx, before, ms, nc.object), nil, nil
	case apierrors.HasStatusCause(applyErr, corev1.NamespaceTerminatingCause):
		return ctrl.Result{}, nil, nil // the namespace goes away with everything in it
	}
	applyErr = errors.Join(applyErr, r.recordRevision(ctx, ms, obs.Rollout.Revision))

	// The decision is recorded even when part of it could not be applied (a rollback whose
	// candidate Deployment a webhook refuses is still a rollback).
	ms.Status = p.Status
	clear := op.record(&ms.Status, &before.Status, p.Decision.KeepOperation)
	plan.Finish(ms, before, plan.Notes{RouteWritten: routeWritten, ApplyErr: applyErr, Invalid: spec.invalidMessage(), InvalidReason: spec.reason})
	r.recordEvents(ms, p)
	after := func() error {
		r.notifyDecision(ms, before, p.Decision)
		if applyErr != nil {
			return applyErr // retried with backoff (at most MaxRetryDelay); the next pass decides again
		}
		if !spec.invalid() {
			if err := r.rememberValidSpec(ctx, ms, spec.user); err != nil {
				return err
			}
		}
		telemetry.Record(ms)
		if s := p.Scale; s != nil && s.Event != nil {
			telemetry.Decision(ms, s.Event.Reason)
		}
		logDecisions(ctrl.LoggerFrom(ctx), &before.Status, &ms.Status, obs.Rollout, p, ms.Spec.Autoscaling)
		if clear {
			return r.clearOperations(ctx, before, ms)
		}
		return nil
	}
	return ctrl.Result{RequeueAfter: p.RequeueAfter}, after, nil
}

// forget drops what the controller keeps in memory about a ModelServer that is gone.
func (r *ModelServerReconciler) forget(key types.NamespacedName) {
	telemetry.Forget(key)
	r.fresh.forget(key)
	r.measurements.forget(key)
	r.warmups.forget(key)
	r.fetches.Forget(key)
	r.gateCalls.forget(key)
	children := []string{key.Name, key.Name + "-" + string(v1alpha1.Blue), key.Name + "-" + string(v1alpha1.Green),
		v1alpha1.ServiceNameOf(key.Name, v1alpha1.Blue), v1alpha1.ServiceNameOf(key.Name, v1alpha1.Green)}
	r.applied.forget(key.Namespace, children...)
	r.absent.forget(key.Namespace, children...)
	r.templates.forget(key)
}

// addFinalizer adds the finalizer that takes modelship's backendRefs out of a user's route.
func (r *ModelServerReconciler) addFinalizer(ctx context.Context, ms *v1alpha1.ModelServer) error {
	if ms.Spec.Gateway.RouteRef == nil || !controllerutil.AddFinalizer(ms, cleanupFinalizer) {
		return nil
	}
	if err := r.Update(ctx, ms); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	r.fresh.wrote(client.ObjectKeyFromObject(ms), ms.UID, ms.ResourceVersion)
	return nil
}

// recordEvents records the plan's events: the rollout machine's and the autoscaler's.
func (r *ModelServerReconciler) recordEvents(ms *v1alpha1.ModelServer, p plan.Result) {
	for _, e := range p.Decision.Events {
		r.Recorder.Eventf(ms, nil, e.Type, e.Reason, e.Reason, "%s", e.Message)
	}
	if s := p.Scale; s != nil && s.Event != nil {
		r.Recorder.Eventf(ms, nil, s.Event.Type, s.Event.Reason, s.Event.Reason, "%s", s.Event.Message)
	}
}

// nameConflictRecheck is how often a ModelServer stalled on a name conflict looks again.
const nameConflictRecheck = 30 * time.Second

// podsOf are the list options for ms's pods (narrowed by more): through the cache's index when
// there is one, else by label.
func (r *ModelServerReconciler) podsOf(ms *v1alpha1.ModelServer, more ...client.ListOption) []client.ListOption {
	opts := append([]client.ListOption{client.InNamespace(ms.Namespace)}, more...)
	if r.podIndex {
		opts = append(opts, client.MatchingFields{podModelServerIndex: ms.Name})
	}
	return opts
}

// refuseConflict stalls the ModelServer on an object of another owner with one of its children's
// names: server-side apply with force would take it over, so nothing more is applied. conflict
// names the object ("Service ml/llama-blue"), or is a whole sentence, ending with a period, that
// says who holds it (a routeRef conflict, see routeRefConflict).
func (r *ModelServerReconciler) refuseConflict(ctx context.Context, before, ms *v1alpha1.ModelServer, conflict string) ctrl.Result {
	if conflict == "" {
		return ctrl.Result{}
	}
	msg := conflict
	if !strings.HasSuffix(conflict, ".") {
		msg = conflict + " exists and is not controlled by this ModelServer: rename or delete it; modelship does not take it over"
	}
	plan.Stall(ms, v1alpha1.ReasonNameConflict, msg)
	if !meta.IsStatusConditionTrue(before.Status.Conditions, v1alpha1.ConditionStalled) {
		ctrl.LoggerFrom(ctx).Info("Refusing to take over an object of another owner", "object", conflict)
		r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, v1alpha1.ReasonNameConflict, "Refuse", "%s", msg)
	}
	// The other object is not watched: look again now and then.
	return ctrl.Result{RequeueAfter: nameConflictRecheck}
}

// nameConflictError is an object of another owner found where modelship was about to create one.
type nameConflictError struct{ object string }

func (e *nameConflictError) Error() string {
	return e.object + " exists and is not controlled by the ModelServer"
}

// nameConflict names ("Service ml/llama-blue") the first object that the ModelServer would
// apply but that exists without being controlled by it; "" when there is none. The HTTPRoute
// named by spec.gateway.routeRef is the user's by design: it conflicts only when another object
// controls it (see routeRefConflict).
func (r *ModelServerReconciler) nameConflict(ctx context.Context, ms *v1alpha1.ModelServer) (string, error) {
	var objs []client.Object
	for _, c := range routing.Colors {
		objs = append(objs,
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: ms.DeploymentName(c)}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ms.ServiceName(c)}})
	}
	if ms.Spec.Gateway.RouteRef == nil {
		objs = append(objs, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: ms.RouteName()}})
	}
	for _, o := range objs {
		key := types.NamespacedName{Namespace: ms.Namespace, Name: o.GetName()}
		err := r.Get(ctx, key, o)
		if apierrors.IsNotFound(err) && r.LiveReader != nil && !r.absent.seen(key, o) {
			// The caches hold only objects with modelship's label: look once for another
			// owner's; an object created later is caught when modelship is about to create it
			// (applyObject), so a color that never runs costs no read per pass.
			if err = r.LiveReader.Get(ctx, key, o); apierrors.IsNotFound(err) {
				r.absent.mark(key, o)
			}
		}
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return "", fmt.Errorf("getting %T %s: %w", o, key.Name, err)
		}
		if !metav1.IsControlledBy(o, ms) {
			kind := strings.TrimPrefix(fmt.Sprintf("%T", o), "*v1.")
			return kind + " " + key.String(), nil
		}
	}
	return r.routeRefConflict(ctx, ms)
}

// defaultSpec fills, in memory only, what the controller's flags default: the scrape interval
// analysis windows are derived from. It runs after any spec write of the pass, so it is never
// written back.
func (r *ModelServerReconciler) defaultSpec(ms *v1alpha1.ModelServer) {
	if a := &ms.Spec.Rollout.Analysis; a.ScrapeInterval == nil && r.ScrapeInterval > 0 {
		a.ScrapeInterval = &v1alpha1.Duration{Duration: r.ScrapeInterval}
	}
}

// validate is validate with the controller's query policy, and refuses the gateway metrics
// when the controller does not know which series are the gateway's.
func (r *ModelServerReconciler) validate(ms *v1alpha1.ModelServer) error {
	if err := validate(ms, r.QueryPolicy); err != nil {
		return err
	}
	if r.GatewayMetricsNamespace != "" {
		return nil
	}
	const why = "the controller runs without --gateway-metrics-namespace (the namespace of the gateway's metrics series), so it cannot tell the gateway's series from others: set the flag or remove this"
	if ms.Spec.Rollout.Analysis.Gateway != "" {
		return fmt.Errorf("spec.rollout.analysis.gateway: %s", why)
	}
	if a := ms.Spec.Autoscaling; a != nil {
		for i, m := range a.Metrics {
			if m.Gateway != nil {
				return fmt.Errorf("spec.autoscaling.metrics[%d].gateway: %s", i, why)
			}
		}
	}
	return nil
}

// validate checks what admission cannot fully check (the analysis templates, and what CEL's cost
// budget leaves out), what an object stored before a rule existed may hold (see
// validateFields), and the custom queries against the controller's query policy. Each error
// names the field.
func validate(ms *v1alpha1.ModelServer, policy metrics.QueryPolicy) error {
	if errs := validateFields(ms); len(errs) > 0 {
		return errs.ToAggregate()
	}
	a := ms.Spec.Rollout.Analysis
	if err := analysis.Validate(a); err != nil {
		return fmt.Errorf("spec.rollout.analysis.%w", err)
	}
	colors := analysisVars(ms)
	for _, m := range a.Metrics {
		if err := policy.CheckQuery(m.Query, colors...); err != nil {
			return fmt.Errorf("spec.rollout.analysis.metrics[%s].query: %w", m.Name, err)
		}
		if h := m.Histogram; h != nil {
			if err := policy.CheckQuery(h.BucketQuery, colors...); err != nil {
				return fmt.Errorf("spec.rollout.analysis.metrics[%s].histogram.bucketQuery: %w", m.Name, err)
			}
		}
		if u := m.PerUnit; u != nil {
			if err := policy.CheckQuery(u.NumeratorQuery, colors...); err != nil {
				return fmt.Errorf("spec.rollout.analysis.metrics[%s].perUnit.numeratorQuery: %w", m.Name, err)
			}
			if err := policy.CheckQuery(u.DenominatorQuery, colors...); err != nil {
				return fmt.Errorf("spec.rollout.analysis.metrics[%s].perUnit.denominatorQuery: %w", m.Name, err)
			}
		}
	}
	if a.SampleQuery != "" {
		if err := policy.CheckQuery(a.SampleQuery, colors...); err != nil {
			return fmt.Errorf("spec.rollout.analysis.sampleQuery: %w", err)
		}
	}
	if ms.Spec.Autoscaling == nil {
		return nil
	}
	for i, m := range ms.Spec.Autoscaling.Metrics {
		if m.Prometheus != nil {
			if err := metrics.Validate(m.Prometheus.Query); err != nil {
				return fmt.Errorf("spec.autoscaling.metrics[%d].prometheus.query: %w", i, err)
			}
			if err := policy.CheckQuery(m.Prometheus.Query, signals.BothColors(ms)); err != nil {
				return fmt.Errorf("spec.autoscaling.metrics[%d].prometheus.query: %w", i, err)
			}
		}
		if m.External != nil {
			if err := policy.CheckExternal(); err != nil {
				return fmt.Errorf("spec.autoscaling.metrics[%d].external: %w", i, err)
			}
		}
	}
	return nil
}

// analysisVars are the values the ModelServer's analysis queries run with, one per color (see
// measure), for judging its templates as they will run. The revision is the spec's (the
// candidate a measurement would judge) and the window the one its spec asks for.
func analysisVars(ms *v1alpha1.ModelServer) []metrics.Vars {
	out := make([]metrics.Vars, 0, len(routing.Colors))
	for _, c := range routing.Colors {
		out = append(out, metrics.Vars{
			Namespace: ms.Namespace, Name: ms.Name, Color: string(c), Revision: revision.Of(&ms.Spec.Template),
			Pods: metrics.PodRegex(ms.DeploymentName(c)), Pool: regexp.QuoteMeta(ms.PoolName(c)),
			Window: metrics.AnalysisWindow(rollout.AnalysisWindow(ms)),
		})
	}
	return out
}

// observe reads what the plan needs into one Observation and changes nothing: both colors'
// Deployments, warm-up of their pods, the route and its InferencePools' acceptance, a
// measurement when one is due, the autoscaling signals and the cluster's room for the GPUs.
//
// held (a spec the query policy refuses): no measurement and no autoscaling query runs; the
// desired replicas stay the last decision's.
func (r *ModelServerReconciler) observe(ctx context.Context, ms *v1alpha1.ModelServer, now time.Time, held bool) (plan.Observation, error) {
	var o plan.Observation
	obs := rollout.Observation{
		Revision: revision.Of(&ms.Spec.Template),
		Image:    revision.Image(&ms.Spec.Template),
		Colors:   map[v1alpha1.Color]rollout.ColorObservation{},
	}
	for _, c := range routing.Colors {
		d := &appsv1.Deployment{}
		err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: ms.DeploymentName(c)}, d)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return o, fmt.Errorf("getting Deployment %s: %w", ms.DeploymentName(c), err)
		}
		co := rollout.ColorObservation{Exists: true, Revision: d.Labels[v1alpha1.LabelRevision], Replicas: derefReplicas(d.Spec.Replicas), Warm: true}
		if len(d.Spec.Template.Spec.Containers) > 0 {
			co.Image = d.Spec.Template.Spec.Containers[0].Image
		}
		if d.Status.ObservedGeneration >= d.Generation {
			co.ReadyReplicas, co.AvailableReplicas, co.UpdatedReplicas = d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas
			co.WarmPods = co.ReadyReplicas // no warm-up check: Ready is warm
		} else {
			co.Stale = true
		}
		if co.EndpointsObserved, co.ReadyEndpoints, err = r.readyEndpoints(ctx, ms, c); err != nil {
			return o, err
		}
		obs.Colors[c] = co
	}
	cold, err := r.observeWarmup(ctx, ms, obs.Colors)
	if err != nil {
		return o, err
	}
	o.Cold = cold
	route, err := r.getRoute(ctx, ms)
	if err != nil {
		return o, err
	}
	o.Route = route
	// A route a Gateway rejected holds the rollout; Unknown (no Gateway answered) does not.
	// So does an accepted route whose backends a Gateway did not resolve (ResolvedRefs False).
	// InferencePools join in: one its Gateway has not accepted holds it too.
	accepted := routing.WithResolvedRefs(routing.AcceptedCondition(route, ms.Generation), route, ms)
	if ms.UsesInferencePools() {
		accepted = routing.WithPools(accepted, r.readPools(ctx, ms))
	}
	o.Accepted = accepted
	obs.RouteAccepted, obs.RouteMessage = accepted.Status, accepted.Message
	if rollout.ShadowPending(ms, obs.Revision) {
		if obs.MirrorUnsupported, err = r.mirrorUnsupported(ctx, ms, route); err != nil {
			return o, err
		}
	}
	if !held && rollout.MeasureDue(ms, now) {
		m, err := r.measure(ctx, ms, now)
		if err != nil {
			return o, err
		}
		obs.Measurement = m
	}
	o.Rollout = obs
	autoscaled := ms.Spec.Autoscaling != nil && !held
	// A rollout needs room for both colors (swap mode when they do not fit).
	rolling := ms.Status.Stable != nil && (ms.Status.Stable.Revision != obs.Revision || ms.Status.Candidate != nil)
	if !autoscaled && !rolling {
		return o, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, r.podsOf(ms, client.MatchingLabels(ms.SelectorLabels()))...); err != nil {
		return o, fmt.Errorf("listing pods: %w", err)
	}
	if autoscaled {
		if o.Autoscaling, err = r.observeSignals(ctx, ms, pods.Items, now); err != nil {
			return o, err
		}
	}
	if o.Capacity, err = r.observeCapacity(ctx, ms, pods.Items); err != nil {
		return o, err
	}
	return o, nil
}

// readyEndpoints counts the ready endpoints of color c's Service's EndpointSlices (from the
// cache, which holds the slices of modelship's Services only); observed is false when the
// Service has none (no EndpointSlice controller, or not written yet).
func (r *ModelServerReconciler) readyEndpoints(ctx context.Context, ms *v1alpha1.ModelServer, c v1alpha1.Color) (observed bool, ready int32, err error) {
	var slices discoveryv1.EndpointSliceList
	if err := r.List(ctx, &slices, client.InNamespace(ms.Namespace), client.MatchingLabels{
		discoveryv1.LabelServiceName: ms.ServiceName(c), v1alpha1.LabelModelServer: ms.Name,
	}); err != nil {
		return false, 0, fmt.Errorf("listing the EndpointSlices of Service %s: %w", ms.ServiceName(c), err)
	}
	if len(slices.Items) == 0 {
		return false, 0, nil
	}
	return true, routing.ReadyEndpoints(slices.Items), nil
}

func derefReplicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	c := readyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

// readyCondition is the pod's Ready condition, nil when it has none.
func readyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func (r *ModelServerReconciler) getRoute(ctx context.Context, ms *v1alpha1.ModelServer) (*gatewayv1.HTTPRoute, error) {
	route := &gatewayv1.HTTPRoute{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: ms.RouteName()}, route)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting HTTPRoute %s: %w", ms.RouteName(), err)
	}
	return route, nil
}

// measure runs analysis of the candidate against the stable color.
func (r *ModelServerReconciler) measure(ctx context.Context, ms *v1alpha1.ModelServer, now time.Time) (*rollout.Measurement, error) {
	cand, stable := ms.Status.Candidate, ms.Status.Stable
	if cand == nil || stable == nil {
		return nil, nil
	}
	// The window holds the step's requests since its window opened (a scrape interval after
	// the switch or the sizing, see rollout.MeasureWindow), four scrapes at least.
	window := rollout.MeasureWindow(ms, now)
	target := analysis.Target{
		Namespace: ms.Namespace, Name: ms.Name,
		Candidate: analysis.ColorTarget{Color: cand.Color, Revision: cand.Revision, Pods: metrics.PodRegex(ms.DeploymentName(cand.Color)), Pool: regexp.QuoteMeta(ms.PoolName(cand.Color)), Service: regexp.QuoteMeta(ms.ServiceName(cand.Color))},
		Stable:    analysis.ColorTarget{Color: stable.Color, Revision: stable.Revision, Pods: metrics.PodRegex(ms.DeploymentName(stable.Color)), Pool: regexp.QuoteMeta(ms.PoolName(stable.Color)), Service: regexp.QuoteMeta(ms.ServiceName(stable.Color))},
		Route:     metrics.TraefikName(routeTarget(ms).Name), GatewayNamespace: r.GatewayMetricsNamespace,
		// A stable color that lost every pod has nothing to compare with (see rollout's
		// stableServesNothing): the candidate is held to absolute bounds only.
		AbsoluteOnly: stable.ReadyReplicas == 0 && meta.IsStatusConditionTrue(ms.Status.Conditions, v1alpha1.ConditionDegraded),
		Look:         rollout.MeasureLook(ms, now),
		Scrape:       rollout.ScrapeInterval(ms),
	}
	// The latency SLO, when the user states one, bounds the candidate's TTFT (the presets
	// judge it relative to nothing: metrics.WithSLO).
	var slo *v1alpha1.LatencySLO
	if ms.Spec.Autoscaling != nil {
		slo = ms.Spec.Autoscaling.SLO
	}
	spec := metrics.WithSLO(*ms.Spec.Rollout.Analysis.DeepCopy(), slo)
	var q metrics.Querier = unavailable{}
	if r.Prometheus != nil {
		// Every query is checked against the policy as it runs, not only its template; the
		// gateway's, which the controller renders itself, run as built-in signals do.
		q = metrics.Enforce(r.Prometheus, r.QueryPolicy, ms.Namespace, analysis.GatewayQueries(spec, target, window)...)
	}
	// The measurement due now: of this candidate, at this step, after the last one, for this
	// spec. A job of another id (the rollout moved on) is dropped.
	st := ms.Status
	id := fmt.Sprintf("%s/%s/%d/%d/%s/%s", cand.Revision, cand.Color, st.Rollout.Step, ms.Generation, timeString(st.Rollout.StepStartedAt), timeString(st.Rollout.LastMeasuredAt))
	m, ok, err := r.measurements.do(ctx, client.ObjectKeyFromObject(ms), "measurement", id, func(ctx context.Context) (*rollout.Measurement, error) {
		results, err := analysis.Run(ctx, q, spec, target, window, now)
		if err != nil {
			return nil, fmt.Errorf("analysis: %w", err)
		}
		return &rollout.Measurement{At: now, Results: results}, nil
	})
	if !ok {
		ctrl.LoggerFrom(ctx).V(1).Info("Measurement under way in the background", "id", id)
		return nil, nil
	}
	return m, err
}

func timeString(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// unavailable answers every query with an error: no Prometheus is configured.
type unavailable struct{}

func (unavailable) Scalar(context.Context, string, time.Time) metrics.Sample {
	return metrics.Sample{Status: metrics.Error, Message: "no Prometheus configured (--prometheus-url)"}
}

func (unavailable) Vector(context.Context, string, time.Time) ([]metrics.Series, error) {
	return nil, fmt.Errorf("no Prometheus configured (--prometheus-url)")
}
