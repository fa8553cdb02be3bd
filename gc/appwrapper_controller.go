package gc

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
	"github.com/wrapup-dev/wrapup/gc/view"
)

// DefaultFailureGracePeriod is how long a Running AppWrapper with a failed
// trigger, which its controller does not report Unhealthy, is given to
// start a retry before the failure is taken as final: the AppWrapper
// controller's default failureGracePeriod (1m), the period at which it
// re-checks the components of a Running AppWrapper (1m), and 30 s for its
// own latency. An AppWrapper's own failureGracePeriod annotation replaces
// the first part.
const DefaultFailureGracePeriod = decision.DefaultFailureGracePeriod

// triggerCache is where the AppWrapper controller reads triggers: the
// trigger watches (triggers.Watches), one informer per kind.
type triggerCache interface {
	// Ensure claims a watch on kind gk for owner, keeping fields.
	Ensure(owner triggers.Owner, gk schema.GroupKind, fields celpolicies.Fields) error
	// Release drops the claims of owner.
	Release(owner triggers.Owner)
	// Get returns the cached object, or nil; synced is false while the
	// kind's informer has not listed.
	Get(gk schema.GroupKind, namespace, name string, fields celpolicies.Fields) (obj *unstructured.Unstructured, synced bool, err error)
	// Kind says how far the kind can be read.
	Kind(gk schema.GroupKind) decision.Kind
	// Resource is the resource the kind is watched as.
	Resource(gk schema.GroupKind) (schema.GroupVersionResource, bool)
	// Wait asks for an event for the AppWrapper key once gk's informer has listed.
	Wait(gk schema.GroupKind, key types.NamespacedName)
}

// outcomeCounter counts recorded outcomes per rule (the rules' status
// counters).
type outcomeCounter interface {
	Add(ctx context.Context, rule string, outcome wrapupv1alpha1.Outcome)
}

// appWrapperReconciler finishes AppWrappers: for each, it gathers what its
// caches say, lets decision.Decide decide, and acts: it writes the record,
// then emits the Events, then counts. Before a deletion, it gathers again
// from the API server, and deletes only if that decision agrees.
type appWrapperReconciler struct {
	// Cache reads AppWrappers, rules and Namespaces (the manager's cache).
	Cache client.Reader
	// Writer patches and deletes AppWrappers.
	Writer client.Writer
	// APIReader reads from the API server.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Policies  *celpolicies.Cache
	Triggers  triggerCache
	Assign    *assignments
	Counters  outcomeCounter
	// Clusters reaches the worker clusters of AppWrappers that MultiKueue
	// dispatches; nil when wrapup runs without MultiKueue support.
	Clusters workerSource
	// FailureGracePeriod defaults to DefaultFailureGracePeriod.
	FailureGracePeriod time.Duration
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// Workers is MaxConcurrentReconciles; default DefaultWorkers.
	Workers int
	// NoHistory writes no CompletionRecords (their CRD is not installed).
	NoHistory bool

	memory memory
	// own are wrapup's writes whose watch events need no decision.
	own ownWrites
	// stored, when set, says whether the AppWrapper cache holds key, and
	// under which UID (triggerWanted).
	stored func(key types.NamespacedName) (types.UID, bool)
	// rules lists the rules for the final checks, one read shared by
	// those that start together.
	rules     *ruleLister
	rulesOnce sync.Once
	// observe, when set, sees every decision (tests).
	observe func(stage string, in decision.Input, d decision.Decision)
	// readAhead, when set, runs the final check's reads ahead of its
	// triggers (view.Reader.Go); nil runs each in a goroutine.
	readAhead func(func())
}

// SetupWithManager registers the reconciler and its watches.
func (r *appWrapperReconciler) SetupWithManager(mgr ctrl.Manager, triggerEvents <-chan event.GenericEvent) error {
	r.defaults()
	if err := r.storeOf(mgr); err != nil {
		return err
	}
	wanted := source.WithPredicates[client.Object, reconcile.Request](predicate.NewPredicateFuncs(r.triggerWanted))
	b := ctrl.NewControllerManagedBy(mgr)
	if ws, ok := r.Clusters.(*workerClusters); ok && ws != nil {
		// Trigger changes on the workers; and a Workload dispatched (or
		// evicted), which names the worker to read: its AppWrapper's own
		// status may not change with it.
		b = b.WatchesRawSource(source.Channel(ws.Events(), &handler.EnqueueRequestForObject{}, wanted)).
			Watches(&kueue.Workload{},
				handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &awv1beta2.AppWrapper{}, handler.OnlyControllerOwner()),
				builder.WithPredicates(clusterNameChanged{}))
	}
	b = b.
		Named("wrapup-appwrapper").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		For(&awv1beta2.AppWrapper{}, builder.WithPredicates(ownEcho(&r.own))).
		Watches(&wrapupv1alpha1.CompletionRule{},
			handler.EnqueueRequestsFromMapFunc(r.allAppWrappers),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, readyChanged{}))).
		Watches(&corev1.Namespace{},
			handler.EnqueueRequestsFromMapFunc(r.appWrappersInNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WatchesRawSource(source.Channel(triggerEvents, &handler.EnqueueRequestForObject{}, wanted))
	if kinds, ok := r.Triggers.(kindLister); ok {
		// Decide once the rules' trigger kinds have listed, not twice.
		b = b.WatchesRawSource(&triggersListed{Rules: r.Cache, Policies: r.Policies, Kinds: kinds, Log: mgr.GetLogger().WithName("appwrapper-start")})
	}
	return b.Complete(r)
}

// storeOf sets r.stored to a look into the store of the manager's
// AppWrapper informer, which copies nothing.
func (r *appWrapperReconciler) storeOf(mgr ctrl.Manager) error {
	inf, err := mgr.GetCache().GetInformer(context.Background(), &awv1beta2.AppWrapper{}, ctrlcache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("the AppWrapper informer: %w", err)
	}
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return nil
	}
	store := sii.GetStore()
	r.stored = func(key types.NamespacedName) (types.UID, bool) {
		obj, ok, err := store.GetByKey(key.String())
		if err != nil || !ok {
			return "", false
		}
		m, err := apimeta.Accessor(obj)
		if err != nil {
			return "", true
		}
		return m.GetUID(), true
	}
	return nil
}

// triggerWanted says whether the event of a trigger of the AppWrapper obj
// names may need a decision: not when the AppWrapper cache does not hold
// it (one not there yet is decided on its own create event, on its
// triggers as their caches have them by then; one gone needs nothing),
// nor when wrapup deleted it. The events of a trigger after its
// AppWrapper's deletion (its controller's, the garbage collector's) so
// bring no reconcile.
func (r *appWrapperReconciler) triggerWanted(obj client.Object) bool {
	if r.stored == nil {
		return true
	}
	key := client.ObjectKeyFromObject(obj)
	uid, ok := r.stored(key)
	return ok && !r.own.isDeleted(key, uid)
}

func (r *appWrapperReconciler) defaults() {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.FailureGracePeriod == 0 {
		r.FailureGracePeriod = DefaultFailureGracePeriod
	}
	if r.Workers <= 0 {
		r.Workers = DefaultWorkers
	}
}

// clusterNameChanged passes Workload updates that change the worker
// cluster it is dispatched to (status.clusterName), or its condition
// Finished: a run whose copy MultiKueue removes is decided on how the
// Workload finished, and may bring no other change here.
type clusterNameChanged struct{ predicate.Funcs }

func (clusterNameChanged) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*kueue.Workload)
	n, ok2 := e.ObjectNew.(*kueue.Workload)
	if !ok1 || !ok2 {
		return false
	}
	finished := func(wl *kueue.Workload) string {
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished); c != nil {
			return string(c.Status) + "/" + c.Reason
		}
		return ""
	}
	return ptr.Deref(o.Status.ClusterName, "") != ptr.Deref(n.Status.ClusterName, "") || finished(o) != finished(n)
}

// readyChanged passes rule updates that change the Ready condition or
// status.deletingSince: a rule whose kind became served (or stopped being
// watchable), or whose deleting action was seen, changes what it does
// without a new generation.
type readyChanged struct{ predicate.Funcs }

func (readyChanged) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*wrapupv1alpha1.CompletionRule)
	n, ok2 := e.ObjectNew.(*wrapupv1alpha1.CompletionRule)
	if !ok1 || !ok2 {
		return false
	}
	if !equality.Semantic.DeepEqual(o.Status.DeletingSince, n.Status.DeletingSince) {
		// When the rule started deleting decides when recorded runs go.
		return true
	}
	a := apimeta.FindStatusCondition(o.Status.Conditions, wrapupv1alpha1.ConditionReady)
	b := apimeta.FindStatusCondition(n.Status.Conditions, wrapupv1alpha1.ConditionReady)
	return (a == nil) != (b == nil) || a != nil && (a.Status != b.Status || a.Reason != b.Reason)
}

func (r *appWrapperReconciler) allAppWrappers(ctx context.Context, _ client.Object) []ctrl.Request {
	return r.listAppWrappers(ctx)
}

func (r *appWrapperReconciler) appWrappersInNamespace(ctx context.Context, ns client.Object) []ctrl.Request {
	return r.listAppWrappers(ctx, client.InNamespace(ns.GetName()))
}

func (r *appWrapperReconciler) listAppWrappers(ctx context.Context, opts ...client.ListOption) []ctrl.Request {
	var list awv1beta2.AppWrapperList
	if err := r.Cache.List(ctx, &list, opts...); err != nil {
		logf.FromContext(ctx).Error(err, "Listing AppWrappers")
		return nil
	}
	reqs := make([]ctrl.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}

// claimOwner is the owner of the watch of kind gk for the AppWrapper key
// (aw): its own for the kind of its first annotated component, and one
// per other kind, for AppWrappers whose annotated triggers are of several
// kinds.
func claimOwner(key types.NamespacedName, aw *awv1beta2.AppWrapper, gk schema.GroupKind) triggers.Owner {
	if kinds := decision.AnnotatedKinds(aw); len(kinds) == 0 || kinds[0] == gk {
		return triggers.AppWrapperOwner(key)
	}
	return triggers.AppWrapperOwner(key).Of(gk)
}

// held are the trigger kinds an AppWrapper claims on one cluster's
// watches, each as triggers.AppWrapperOwner(key).Of(kind): on the cluster wrapup
// runs in, the kinds of its annotated triggers besides the first (which it
// holds as triggers.AppWrapperOwner(key), without remembering it); on a worker
// cluster, every kind it reads there.
type held struct {
	// cluster is the worker cluster; "" for the cluster wrapup runs in.
	cluster string
	kinds   []schema.GroupKind
}

// add remembers that gk is claimed.
func (h *held) add(gk schema.GroupKind) {
	if !slices.Contains(h.kinds, gk) {
		h.kinds = append(slices.Clone(h.kinds), gk)
	}
}

// keep releases, through release, the claims of the AppWrapper key on the
// kinds not in kinds, and remembers kinds.
func (h *held) keep(key types.NamespacedName, kinds []schema.GroupKind, release func(triggers.Owner)) {
	for _, gk := range h.kinds {
		if !slices.Contains(kinds, gk) {
			release(triggers.AppWrapperOwner(key).Of(gk))
		}
	}
	h.kinds = kinds
}

// keepClaims keeps the watches of the kinds claims, and drops the others
// the AppWrapper key held.
func (r *appWrapperReconciler) keepClaims(key types.NamespacedName, claims []schema.GroupKind, mem *awMemory) {
	if len(claims) == 0 {
		r.Triggers.Release(triggers.AppWrapperOwner(key))
	}
	var extra []schema.GroupKind
	if len(claims) > 1 {
		extra = claims[1:]
	}
	mem.claims.keep(key, extra, r.Triggers.Release)
}

// liveView reads from the API server, triggers at the version the watches
// read them; an AppWrapper handed to it may be the cache's, which keeps
// only part of the spec and status.
func (r *appWrapperReconciler) liveView() *view.Reader {
	return r.liveViewAhead(nil)
}

// liveViewAhead is liveView, reading ahead while it lists the rules
// (view.Reader.Ahead).
func (r *appWrapperReconciler) liveViewAhead(ahead *view.Ahead) *view.Reader {
	return &view.Reader{
		Ahead:  ahead,
		Go:     r.readAhead,
		Client: r.APIReader,
		Slim:   true,
		Kinds:  r.Triggers.Kind,
		Version: func(gk schema.GroupKind) (string, bool) {
			gvr, ok := r.Triggers.Resource(gk)
			return gvr.Version, ok
		},
		Labelled: true,
		ListRules: func(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error) {
			r.rulesOnce.Do(func() { r.rules = newRuleLister(r.APIReader) })
			return r.rules.List(ctx)
		},
		Workers: func(ctx context.Context, aw *awv1beta2.AppWrapper) (*decision.Worker, view.TriggerView) {
			w, c := r.readWorker(ctx, true, aw)
			if c == nil || w.Problem != "" {
				return w, nil
			}
			return w, r.workerLiveView(c)
		},
	}
}

// workerLiveView reads triggers from a worker's API server, at the
// version its watches read them.
func (r *appWrapperReconciler) workerLiveView(c *workerConn) *view.Reader {
	return &view.Reader{
		Client: c.reader,
		Kinds:  c.triggers.Kind,
		Version: func(gk schema.GroupKind) (string, bool) {
			gvr, ok := c.triggers.Resource(gk)
			return gvr.Version, ok
		},
		Labelled: true,
	}
}

// ReconcileFunc is the name the Go runtime gives the AppWrapper
// controller's Reconcile, as stack frames show it: the benchmark counts the
// API requests sent from within it.
const ReconcileFunc = "github.com/wrapup-dev/wrapup/gc.(*appWrapperReconciler).Reconcile"

// Reconcile finishes one AppWrapper. It decides on the caches (view.Gather
// through cacheView, decision.Decide), remembers what the decision says
// to, and when the decision writes or deletes, decides again on what the
// API server says (decideFresh) and does what that decision says (apply). The AppWrapper's
// memory entry is taken once and settled once.
func (r *appWrapperReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := req.NamespacedName
	mem := r.memory.take(key)
	defer r.memory.settle(key, mem)
	in, err := view.Gather(ctx, &cacheView{r: r, key: key, mem: mem}, r.Policies, key, nil, r.input(mem))
	if err != nil {
		return ctrl.Result{}, err
	}
	if in.AppWrapper == nil {
		r.forget(key, mem)
		return ctrl.Result{}, nil
	}
	mem.scope(in.AppWrapper.UID, &in)
	in.History.Cached = r.cachedRecord(ctx, in.AppWrapper)
	ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("appWrapper", klog.KObj(in.AppWrapper)))
	d := decision.Decide(ctx, in)
	r.observed("cached", in, d)
	if d.Verdict == decision.VerdictBeingDeleted {
		r.forget(key, mem)
		return ctrl.Result{}, nil
	}
	ctx = r.remember(ctx, in, d, mem)
	if d.Verdict == decision.VerdictWorkerUnreachable {
		return ctrl.Result{RequeueAfter: d.Requeue}, nil
	}
	if d.Write == nil && !d.Clear && d.Verdict != decision.VerdictDelete && d.History == nil {
		return ctrl.Result{RequeueAfter: d.Requeue}, nil
	}
	// The final check. For a write, the cached AppWrapper will do: the
	// write's resourceVersion makes sure it is current. Otherwise the
	// AppWrapper is read from the API server too, which shows a deletion
	// already made (the cache may not yet).
	known := in.AppWrapper
	if d.Write == nil && !d.Clear {
		known = nil
	}
	fin, fd, err := r.decideFresh(ctx, key, known, mem, view.AheadOf(in))
	if err != nil || fin.AppWrapper == nil {
		return ctrl.Result{}, err
	}
	return r.apply(ctx, d, fin, fd, known == nil, mem)
}

// input is the start of a decision's input: the clock and the memory.
func (r *appWrapperReconciler) input(mem *awMemory) decision.Input {
	return decision.Input{Now: r.Clock.Now(), FailureSeen: mem.failure, HoldStart: mem.holdStart, WorkerFailures: mem.unreachable, Warned: mem.warned, FailureGracePeriod: r.FailureGracePeriod,
		History: mem.historyInput(r.NoHistory)}
}

// remember keeps in mem what the decision d on the caches says to
// remember, and does what it allows before any write: the rule assigned,
// the watches claimed and released, the Warnings said once, the
// evaluation metrics, the count of a record write whose answer was lost.
// It returns ctx with the deciding rule in its logger.
func (r *appWrapperReconciler) remember(ctx context.Context, in decision.Input, d decision.Decision, mem *awMemory) context.Context {
	aw := in.AppWrapper
	key := client.ObjectKeyFromObject(aw)
	r.Assign.Set(key, d.Assigned)
	mem.update(aw.UID, d)
	r.keepClaims(key, d.Claims, mem)
	if d.Winner != "" {
		ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("rule", d.Winner))
	}
	if d.Worker == nil || d.Worker.Cluster != mem.worker.cluster {
		// Not dispatched there (any more): its triggers there are not watched for it.
		r.releaseWorker(key, mem)
	}
	r.warn(aw, d, mem)
	mem.unreachable = d.WorkerFailures
	if d.Verdict == decision.VerdictWorkerUnreachable {
		return ctx
	}
	for _, e := range d.Evaluations() {
		if !e.FromAppWrapperPhase {
			evaluationSeconds.Observe(e.Took.Seconds())
			if e.Error != "" {
				evaluationErrorsTotal.WithLabelValues(d.Winner).Inc()
			}
		}
	}
	if mem.unsure != nil && d.Recorded != nil {
		// A record write whose answer was lost: it landed if the
		// AppWrapper carries it now (else it was replaced), unless what it
		// carries is a record counted already.
		if d.Recorded.Same(mem.unsure) && !d.Recorded.Same(mem.counted) {
			r.count(ctx, mem.unsure)
			mem.counted = mem.unsure
		}
		mem.unsure = nil
	}
	return ctx
}

// apply does, in order, what the fresh decision fd on fin says: it writes
// the record (or clears it), writes the run's CompletionRecord, and
// deletes. When the API server answers a write with a changed AppWrapper,
// it decides again on that answer, the rest as read, and goes on with what
// that decision says. read says whether fin's AppWrapper is as the API
// server has it: else it is the cache's, which a write's resourceVersion
// checks, and which is read again before a deletion. d is the decision on
// the caches that led here.
func (r *appWrapperReconciler) apply(ctx context.Context, d decision.Decision, fin decision.Input, fd decision.Decision, read bool, mem *awMemory) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	key := client.ObjectKeyFromObject(fin.AppWrapper)
	wrote, echo := false, false
	for {
		switch {
		case fd.Write != nil || fd.Clear:
			if wrote {
				// The decision on its answer writes again: look again,
				// on caches that caught up.
				log.V(2).Info("A decision on the AppWrapper as the API server answered the write would write again; looking again", "reason", fd.Reason)
				return ctrl.Result{Requeue: true}, nil
			}
			if res, ok, err := r.write(ctx, &fin, fd, mem); !ok {
				return res, err
			}
			// A record written to delete: its watch event is dropped.
			echo = fd.Write != nil && fd.Verdict == decision.VerdictDelete
			wrote, read = true, true
			fd = decision.Decide(ctx, fin)
			r.observed("written", fin, fd)
		case fd.Verdict != decision.VerdictDelete:
			if read && !r.ensureHistory(ctx, fin, fd, mem) {
				// Not written yet: when the decision looks again, at the
				// soonest when the write is tried again, at most a minute
				// later.
				retry := time.Minute
				if fd.Requeue > 0 && fd.Requeue < retry {
					retry = max(fd.Requeue, historyRetry)
				}
				return ctrl.Result{RequeueAfter: retry}, nil
			}
			if echo {
				// The write was made to delete, and its watch event is
				// dropped: look again as that event would have.
				return ctrl.Result{Requeue: true}, nil
			}
			if !wrote && (d.Write != nil || d.Clear || d.Verdict == decision.VerdictDelete) {
				log.V(2).Info("A decision on a fresh read does not act; looking again", "cached", d.Verdict, "fresh", fd.Verdict, "reason", fd.Reason)
				return ctrl.Result{RequeueAfter: requeueSoon(fd.Requeue)}, nil
			}
			return ctrl.Result{RequeueAfter: fd.Requeue}, nil
		case !read:
			// Decided on the cached AppWrapper for a write that the fresh
			// decision does not make: read it too, as for any deletion.
			var err error
			if fin, fd, err = r.decideFresh(ctx, key, nil, mem, view.AheadOf(fin)); err != nil || fin.AppWrapper == nil {
				return ctrl.Result{}, err
			}
			read = true
		default:
			if !r.ensureHistory(ctx, fin, fd, mem) {
				// The run's CompletionRecord, by the rules as the API
				// server has them, is not written yet.
				return ctrl.Result{RequeueAfter: historyRetry}, nil
			}
			return r.delete(ctx, fin, fd, mem)
		}
	}
}

// write writes the record fd says (or clears it) on in's AppWrapper, then,
// for a record, its CompletionRecord; in's AppWrapper becomes the API
// server's answer. ok is false when apply is to return res and err: the
// write failed, or a deletion waits for the CompletionRecord.
func (r *appWrapperReconciler) write(ctx context.Context, in *decision.Input, fd decision.Decision, mem *awMemory) (res ctrl.Result, ok bool, err error) {
	log := logf.FromContext(ctx)
	aw := in.AppWrapper
	if fd.Clear {
		patched, err := r.writeRecord(ctx, aw, nil)
		if err != nil {
			res, err := r.writeFailed(ctx, err, "clearing outcome")
			return res, false, err
		}
		r.emit(aw, fd.Events, decision.EventAfterWrite)
		log.Info("Cleared outcome", "was", fd.Recorded.Outcome)
		r.answered(ctx, in, patched, mem)
		return ctrl.Result{}, true, nil
	}
	key := client.ObjectKeyFromObject(aw)
	if fd.Verdict == decision.VerdictDelete {
		// Every way on from here deletes it or asks to be called again:
		// the watch event of this write need not, even when it comes
		// before the answer.
		r.own.patching(key, aw.UID, aw.ResourceVersion, fd.Write)
	}
	patched, err := r.writeRecord(ctx, aw, fd.Write)
	switch {
	case err == nil && fd.Verdict == decision.VerdictDelete:
		r.own.patched(key, patched.UID, patched.ResourceVersion)
	case err != nil:
		// Not written, or not known to be: its event, if any, brings the
		// next decision. On a conflict, the cache is behind the API
		// server, perhaps behind a record patch of wrapup's own whose
		// event would be dropped: let that event, when the cache catches
		// up, bring the next decision, not this conflict's backoff.
		r.own.gone(key)
	}
	if err != nil {
		if !rejected(err) {
			// The write may have landed: count it when it is seen.
			mem.unsure = fd.Write
		}
		res, err := r.writeFailed(ctx, err, "recording outcome")
		return res, false, err
	}
	// It landed on the AppWrapper as read, so no earlier write of unknown
	// fate is on it.
	mem.unsure, mem.counted = nil, fd.Write
	r.emit(aw, fd.Events, decision.EventAfterWrite)
	log.Info("Recorded outcome", "outcome", fd.Write.Outcome, "message", fd.Write.Message)
	r.count(ctx, fd.Write)
	in.AppWrapper = patched
	ok = r.ensureHistory(ctx, *in, fd, mem)
	r.answered(ctx, in, patched, mem)
	if !ok && fd.Verdict == decision.VerdictDelete {
		return ctrl.Result{RequeueAfter: historyRetry}, false, nil
	}
	switch {
	case fd.Action.Action == wrapupv1alpha1.ActionUpdateStatus:
		actionsTotal.WithLabelValues(fd.Winner, "StatusOnly").Inc()
	case fd.DryRun:
		actionsTotal.WithLabelValues(fd.Winner, wrapupv1alpha1.ReasonWouldDelete).Inc()
	}
	return ctrl.Result{}, true, nil
}

// answered makes in the input of a decision on patched, the API server's
// answer to a write: its AppWrapper, and what the memory and the cache say
// now of its CompletionRecords.
func (r *appWrapperReconciler) answered(ctx context.Context, in *decision.Input, patched *awv1beta2.AppWrapper, mem *awMemory) {
	in.AppWrapper = patched
	in.History = mem.historyInput(r.NoHistory)
	in.History.Cached = r.cachedRecord(ctx, patched)
}

// decideFresh gathers from the API server (the AppWrapper too, unless
// known is it as good as read) and decides. The triggers of ahead are read
// while the rules are listed.
func (r *appWrapperReconciler) decideFresh(ctx context.Context, key types.NamespacedName, known *awv1beta2.AppWrapper, mem *awMemory, ahead *view.Ahead) (decision.Input, decision.Decision, error) {
	finalChecksTotal.WithLabelValues().Inc()
	in, err := view.Gather(ctx, r.liveViewAhead(ahead), r.Policies, key, known, r.input(mem))
	if err != nil || in.AppWrapper == nil {
		return in, decision.Decision{}, err
	}
	in.History.Cached = r.cachedRecord(ctx, in.AppWrapper)
	d := decision.Decide(ctx, in)
	r.observed("fresh", in, d)
	return in, d, nil
}

// requeueSoon is when to look again after the caches and the API server
// disagreed: soon, for the caches to catch up, unless the fresh decision
// wants to look even sooner.
func requeueSoon(d time.Duration) time.Duration {
	if d > 0 && d < time.Second {
		return d
	}
	return time.Second
}

// observed is called with every decision, for tests.
func (r *appWrapperReconciler) observed(stage string, in decision.Input, d decision.Decision) {
	if r.observe != nil {
		r.observe(stage, in, d)
	}
}

// writeFailed turns a failed write into the reconcile's result: a
// conflict (the AppWrapper changed since it was read) or a vanished
// AppWrapper is looked at again, not logged as an error.
func (r *appWrapperReconciler) writeFailed(ctx context.Context, err error, what string) (ctrl.Result, error) {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		logf.FromContext(ctx).V(2).Info("AppWrapper changed while "+what+"; looking again", "err", err.Error())
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{}, fmt.Errorf("%s: %w", what, err)
}

func (r *appWrapperReconciler) count(ctx context.Context, rec *decision.Record) {
	outcomesTotal.WithLabelValues(rec.Rule, string(rec.Outcome)).Inc()
	r.Counters.Add(ctx, rec.Rule, rec.Outcome)
}

// writeRecord writes rec (nil: removes the record) on aw's metadata, never
// its status, which its controller owns, with an optimistic lock: a record
// decided on a stale AppWrapper (or on one deleted and created again under
// the same name) fails with a conflict instead of landing. It returns the
// AppWrapper as the API server answered.
func (r *appWrapperReconciler) writeRecord(ctx context.Context, aw *awv1beta2.AppWrapper, rec *decision.Record) (*awv1beta2.AppWrapper, error) {
	patched := aw.DeepCopy()
	rec.Apply(patched)
	// The patch names the record's keys alone (set, or null to remove),
	// never whole maps: aw may be the cache's, which keeps only some
	// annotations, and a diff against it could remove the others.
	keys := func(after map[string]string, names ...string) map[string]any {
		m := make(map[string]any, len(names))
		for _, k := range names {
			if v, ok := after[k]; ok {
				m[k] = v
			} else {
				m[k] = nil
			}
		}
		return m
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": aw.ResourceVersion,
		"labels":          keys(patched.Labels, wrapupv1alpha1.OutcomeLabel),
		"annotations":     keys(patched.Annotations, decision.RecordAnnotations()...),
	}})
	if err != nil {
		return nil, fmt.Errorf("encoding the record's patch: %w", err)
	}
	if err := r.Writer.Patch(ctx, patched, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, err
	}
	return patched, nil
}

// delete deletes the AppWrapper that the fresh decision d on in says to
// delete, with UID and resourceVersion preconditions (so that it is the
// AppWrapper decided on, unchanged) and Background propagation (so that
// the AppWrapper controller's finalizer tears the components down and Kueue
// releases the quota only after the pods are gone).
func (r *appWrapperReconciler) delete(ctx context.Context, in decision.Input, d decision.Decision, mem *awMemory) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	aw := in.AppWrapper
	uid, rv := aw.UID, aw.ResourceVersion
	key := client.ObjectKeyFromObject(aw)
	// Its events, even those before the answer, need no decision.
	r.own.deleting(key, uid)
	err := r.Writer.Delete(ctx, aw, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil {
		r.own.gone(key)
	}
	switch {
	case apierrors.IsNotFound(err):
		// No AppWrapper of that name (its UID was a precondition): a new
		// one's create event decides it. Its deletion's events may have
		// been dropped while the delete was under way, and its triggers'
		// are: forget it here.
		r.forget(key, mem)
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		// It changed since it was read: look again.
		log.V(2).Info("AppWrapper changed before its deletion; looking again")
		return ctrl.Result{Requeue: true}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("deleting appwrapper: %w", err)
	}
	actionsTotal.WithLabelValues(d.Winner, "Deleted").Inc()
	if d.Recorded != nil {
		triggerToActionSeconds.WithLabelValues(d.Winner).Observe(in.Now.Sub(d.Recorded.FinishedAt).Seconds())
	}
	if !d.DueAt.IsZero() {
		deletionLatenessSeconds.WithLabelValues(d.Winner).Observe(max(0, in.Now.Sub(d.DueAt).Seconds()))
	}
	r.own.deleted(client.ObjectKeyFromObject(aw), aw.UID)
	log.Info("Deleted finished AppWrapper", "outcome", d.Outcome)
	r.emit(aw, d.Events, decision.EventAfterDelete)
	r.forget(client.ObjectKeyFromObject(aw), mem)
	return ctrl.Result{}, nil
}

// emit emits on aw those of evs whose When is when.
func (r *appWrapperReconciler) emit(aw *awv1beta2.AppWrapper, evs []decision.Event, when decision.EventWhen) {
	for _, e := range evs {
		if e.When == when {
			r.Recorder.Eventf(aw, nil, e.Type, e.Reason, e.Action, "%s", decision.Truncate(e.Message, decision.MaxMessage))
		}
	}
}

// warn emits the Warnings d says now (decision.Decide leaves out those
// said after the previous decision), and tells the rule when whether its
// trigger kind can be watched for the AppWrapper changed.
func (r *appWrapperReconciler) warn(aw *awv1beta2.AppWrapper, d decision.Decision, mem *awMemory) {
	for _, e := range d.Events {
		if e.When == decision.EventNow {
			r.Recorder.Eventf(aw, nil, e.Type, e.Reason, e.Action, "%s", e.Message)
		}
	}
	if d.Winner != "" && hasReason(mem.warned, wrapupv1alpha1.ReasonTriggerKindNotWatched) != hasReason(d.Warned, wrapupv1alpha1.ReasonTriggerKindNotWatched) {
		// The rule reports the AppWrappers whose trigger kind it cannot watch.
		r.Assign.Touch(d.Winner)
	}
	mem.warned = d.Warned
}

func hasReason(keys []string, reason string) bool {
	for _, k := range keys {
		if strings.HasPrefix(k, reason+"\x00") {
			return true
		}
	}
	return false
}

// forget drops what is held for the AppWrapper key, which is gone or
// going: its watch claims, here and on its worker, its rule assignment and
// its memory entry.
func (r *appWrapperReconciler) forget(key types.NamespacedName, mem *awMemory) {
	r.Triggers.Release(triggers.AppWrapperOwner(key))
	mem.claims.keep(key, nil, r.Triggers.Release)
	r.releaseWorker(key, mem)
	r.Assign.Set(key, "")
	*mem = awMemory{}
}

// memory is what the controller remembers of each AppWrapper between
// reconciles, one entry per AppWrapper, dropped when it goes: lost on a
// restart, which only delays (a failure's grace starts again; a Warning is
// said once more). A reconcile takes its AppWrapper's entry once, changes
// it through the pointer, and settles it once when it returns; the
// controller never reconciles one AppWrapper in two workers at a time.
type memory struct {
	mu sync.Mutex
	m  map[types.NamespacedName]awMemory
}

type awMemory struct {
	uid types.UID
	// failure is when the trigger was first seen failed.
	failure decision.FailureSeen
	// holdStart is when its failure hold was first seen.
	holdStart time.Time
	// warned are the Warnings last emitted, as reason and message.
	warned []string
	// unsure is a record write whose answer was lost: counted once it is
	// seen on the AppWrapper.
	unsure *decision.Record
	// counted is the record last counted.
	counted *decision.Record
	// claims are the kinds of its annotated triggers watched for it
	// besides the first.
	claims held
	// history is the record whose CompletionRecord is written.
	history *decision.Record
	// worker are the kinds watched for it on the worker cluster
	// MultiKueue dispatched it to.
	worker held
	// unreachable counts the decisions in a row that found its worker
	// cluster unreadable: the wait before the next grows with it.
	unreachable int
}

// empty is true when e remembers nothing but the AppWrapper's UID, which
// update compares only to reset what else is remembered.
func (e *awMemory) empty() bool {
	return e.failure == (decision.FailureSeen{}) && e.holdStart.IsZero() && len(e.warned) == 0 && e.unsure == nil && e.counted == nil &&
		len(e.claims.kinds) == 0 && e.history == nil && e.worker.cluster == "" && len(e.worker.kinds) == 0 && e.unreachable == 0
}

// take returns the entry of the AppWrapper key for one reconcile to
// change: a copy, which settle keeps.
func (m *memory) take(key types.NamespacedName) *awMemory {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.m[key]
	return &e
}

// settle keeps e as the entry of key; an entry that holds nothing but the
// UID is dropped instead, as take's zero value means the same: most
// AppWrappers (running, their trigger not done) need no entry, and an
// entry weighs as much as a cached AppWrapper's spec.
func (m *memory) settle(key types.NamespacedName, e *awMemory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.empty() {
		delete(m.m, key)
		return
	}
	if m.m == nil {
		m.m = map[types.NamespacedName]awMemory{}
	}
	m.m[key] = *e
}

// scope leaves out of in what e remembers of another AppWrapper than uid
// (one deleted, and created again under the same name): its failure and
// hold clocks, its worker's failures and its Warnings. A hold started for
// the AppWrapper deleted must never shorten the new one's.
func (e *awMemory) scope(uid types.UID, in *decision.Input) {
	if e.uid != uid {
		in.FailureSeen, in.HoldStart, in.WorkerFailures, in.Warned = decision.FailureSeen{}, time.Time{}, 0, nil
		in.History.Written, in.History.Counted = nil, nil
	}
}

// update keeps what d, decided on the AppWrapper uid, says to remember.
func (e *awMemory) update(uid types.UID, d decision.Decision) {
	if e.uid != uid {
		// Watches are claimed by name: an AppWrapper created again under
		// the same name takes its claims over.
		*e = awMemory{uid: uid, claims: e.claims, worker: e.worker}
	}
	e.failure = decision.FailureSeen{}
	if d.FailureSeen != nil {
		e.failure = *d.FailureSeen
	}
	e.holdStart = d.HoldStart
	if d.HistoryWritten != nil && d.Write == nil && !d.Clear && d.Verdict != decision.VerdictDelete {
		// A decision that goes on to a final check learns it there
		// (ensureHistory), on the caches as they are then.
		e.history = d.HistoryWritten
	}
}

// historyInput is what e remembers of the AppWrapper's CompletionRecords,
// as a decision's input.
func (e *awMemory) historyInput(off bool) decision.HistoryInput {
	return decision.HistoryInput{Off: off, Written: e.history, Counted: e.counted}
}

// Len is how many AppWrappers the controller remembers something of.
func (m *memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
