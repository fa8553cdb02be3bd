package gc

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
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
	"github.com/wrapup-dev/wrapup/gc/read"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// DefaultFailureGracePeriod is decision.DefaultFailureGracePeriod, the
// --failure-grace-period flag's default.
const DefaultFailureGracePeriod = decision.DefaultFailureGracePeriod

// triggerCache is where the AppWrapper controller reads triggers: the
// trigger watches (triggers.Watches), one informer per kind.
type triggerCache interface {
	// Ensure claims a watch on kind gk for owner, keeping fields.
	Ensure(owner triggers.Owner, gk schema.GroupKind, fields celpolicies.Fields) error
	// Keep drops the claims of the AppWrapper key on kinds not in kinds.
	Keep(key types.NamespacedName, kinds []schema.GroupKind)
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

// appWrapperReconciler finishes AppWrappers (Reconcile).
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
	// Clusters is nil when wrapup runs without MultiKueue support.
	Clusters workerSource
	// FailureGracePeriod, Clock and Workers (MaxConcurrentReconciles): defaults.
	FailureGracePeriod time.Duration
	Clock              clock.PassiveClock
	Workers            int
	// memory is what it remembers of each AppWrapper between reconciles.
	memory memory
	// own are wrapup's writes whose watch events need no decision.
	own ownWrites
	// stored, when set, says whether the AppWrapper cache holds key, and
	// under which UID (triggerWanted).
	stored func(key types.NamespacedName) (types.UID, bool)
	// rules lists the rules for the final checks, one read shared by
	// those that start together.
	rules     ruleLister
	rulesOnce sync.Once
	// observe, when set, sees every decision (tests).
	observe func(stage string, in decision.Input, d decision.Decision)
	// readAhead, when set, runs the final check's reads ahead of its
	// triggers (read.Reader.Go); nil runs each in a goroutine.
	readAhead func(func())
}

// SetupWithManager registers the reconciler and its watches.
func (r *appWrapperReconciler) SetupWithManager(mgr ctrl.Manager, triggerEvents <-chan event.GenericEvent) error {
	r.defaults()
	inf, err := mgr.GetCache().GetInformer(context.Background(), &awv1beta2.AppWrapper{}, ctrlcache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("the AppWrapper informer: %w", err)
	}
	if sii, ok := inf.(toolscache.SharedIndexInformer); ok {
		// A look into the informer's store, which copies nothing.
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
				builder.WithPredicates(clusterNameChanged))
	}
	b = b.
		Named("wrapup-appwrapper").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		For(&awv1beta2.AppWrapper{}, builder.WithPredicates(ownEcho(&r.own))).
		Watches(&wrapupv1alpha1.CompletionRule{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []ctrl.Request { return r.listAppWrappers(ctx) }),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, readyChanged))).
		Watches(&corev1.Namespace{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, ns client.Object) []ctrl.Request {
				return r.listAppWrappers(ctx, client.InNamespace(ns.GetName()))
			}),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		// The run's record is its memory: a decision made on a cache that
		// lagged behind a change of it (a clear, a new stamp, a deletion
		// not seen yet) is made again once the cache has it. A create
		// needs none: a decision on a cache without the record writes it,
		// and the final check finds it.
		Watches(&wrapupv1alpha1.CompletionRecord{}, handler.EnqueueRequestsFromMapFunc(recordsAppWrapper),
			builder.WithPredicates(predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }})).
		WatchesRawSource(source.Channel(triggerEvents, &handler.EnqueueRequestForObject{}, wanted))
	if kinds, ok := r.Triggers.(kindLister); ok {
		// Decide once the rules' trigger kinds have listed, not twice.
		b = b.WatchesRawSource(&triggersListed{Rules: r.Cache, Policies: r.Policies, Kinds: kinds, Log: mgr.GetLogger().WithName("appwrapper-start")})
	}
	return b.Complete(r)
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

// defaults sets what is left zero: FailureGracePeriod to
// DefaultFailureGracePeriod, Clock to the real clock, Workers to
// DefaultWorkers.
func (r *appWrapperReconciler) defaults() {
	r.Clock = cmp.Or[clock.PassiveClock](r.Clock, clock.RealClock{})
	r.FailureGracePeriod = cmp.Or(r.FailureGracePeriod, DefaultFailureGracePeriod)
	if r.Workers <= 0 {
		r.Workers = DefaultWorkers
	}
}

// clusterNameChanged passes Workload updates that change the worker
// cluster it is dispatched to (status.clusterName), or its condition
// Finished: a run whose copy MultiKueue removes is decided on how the
// Workload finished, and may bring no other change here.
var clusterNameChanged = updateChanges(func(wl *kueue.Workload) workloadKey {
	return workloadKey{ptr.Deref(wl.Status.ClusterName, ""), condition(wl.Status.Conditions, kueue.WorkloadFinished)}
})

// workloadKey is what clusterNameChanged compares of a Workload.
type workloadKey struct {
	cluster  string
	finished conditionKey
}

// readyChanged passes rule updates that change the Ready condition: a rule
// whose kind became served (or stopped being watchable) changes what it
// does without a new generation.
var readyChanged = updateChanges(func(rule *wrapupv1alpha1.CompletionRule) conditionKey {
	return condition(rule.Status.Conditions, wrapupv1alpha1.ConditionReady)
})

// updateChanges passes the updates of a T that change key of it, and
// every other event.
func updateChanges[T client.Object, K comparable](key func(T) K) predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(T)
		n, ok2 := e.ObjectNew.(T)
		return ok1 && ok2 && key(o) != key(n)
	}}
}

// conditionKey is what a predicate compares of a condition.
type conditionKey struct {
	present        bool
	status, reason string
}

// condition is the status and reason of the condition typ in conds; the
// zero key when there is none.
func condition(conds []metav1.Condition, typ string) conditionKey {
	if c := apimeta.FindStatusCondition(conds, typ); c != nil {
		return conditionKey{true, string(c.Status), c.Reason}
	}
	return conditionKey{}
}

// recordsAppWrapper is the AppWrapper of a CompletionRecord.
func recordsAppWrapper(_ context.Context, obj client.Object) []ctrl.Request {
	cr, ok := obj.(*wrapupv1alpha1.CompletionRecord)
	if !ok || cr.AppWrapper.Name == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: cr.Namespace, Name: cr.AppWrapper.Name}}}
}

// listAppWrappers lists the AppWrappers in the cache for a change of a
// rule (all) or of a Namespace's labels (those in it).
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

// liveViewAhead reads from the API server, triggers at the version the
// watches read them, reading ahead while it lists the rules
// (read.Reader.Ahead); an AppWrapper handed to it may be the cache's,
// which keeps only part of the spec and status.
func (r *appWrapperReconciler) liveViewAhead(ahead *read.Ahead) *read.Reader {
	v := liveView(r.APIReader, r.Triggers)
	v.Ahead, v.Go, v.Slim = ahead, r.readAhead, true
	r.rulesOnce.Do(func() { r.rules = newRuleLister(r.APIReader) })
	v.ListRules = r.rules
	v.Workers = func(ctx context.Context, aw *awv1beta2.AppWrapper) (*decision.Worker, read.TriggerView) {
		w, c := r.readWorker(ctx, true, aw)
		if c == nil || w.Problem != "" {
			return w, nil
		}
		return w, liveView(c.reader, c.triggers)
	}
	return v
}

// liveView reads triggers through c (an API server's reader), at the
// version the watches tc read them.
func liveView(c client.Reader, tc triggerCache) *read.Reader {
	return &read.Reader{Client: c, Kinds: tc.Kind, Labelled: true, Version: func(gk schema.GroupKind) (string, bool) {
		gvr, ok := tc.Resource(gk)
		return gvr.Version, ok
	}}
}

// ReconcileFunc is the name the Go runtime gives the AppWrapper
// controller's Reconcile, as stack frames show it: the benchmark counts the
// API requests sent from within it.
const ReconcileFunc = "github.com/wrapup-dev/wrapup/gc.(*appWrapperReconciler).Reconcile"

// Reconcile finishes one AppWrapper, on an event of it (those of wrapup's
// own delete bring none: ownEcho) or of its trigger (triggers.Watches). It
// gathers on the caches (read.Gather through cacheView), decides
// (decision.Decide) and remembers what the decision says to; when the
// decision writes the run's CompletionRecord or deletes, it gathers again
// from the API server and decides again (the final check, decideFresh),
// then does what that decision says, in order (act). The AppWrapper's
// memory entry is taken once and settled once.
func (r *appWrapperReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := req.NamespacedName
	mem := r.memory.take(key)
	defer r.memory.settle(key, mem)
	in, err := read.Gather(ctx, &cacheView{r: r, key: key, mem: mem}, r.Policies, key, nil, r.input(mem))
	if err != nil {
		return ctrl.Result{}, err
	}
	if in.AppWrapper == nil {
		r.forget(key, mem)
		return ctrl.Result{}, nil
	}
	mem.scope(in.AppWrapper.UID, &in)
	ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("appWrapper", klog.KObj(in.AppWrapper)))
	d := decision.Decide(ctx, in)
	r.observed("cached", in, d)
	if d.Verdict == decision.VerdictBeingDeleted {
		r.forget(key, mem)
		return ctrl.Result{}, nil
	}
	ctx = r.remember(ctx, in, d, mem)
	if d.Verdict == decision.VerdictWorkerUnreachable || d.Store == nil && d.Verdict != decision.VerdictDelete {
		return ctrl.Result{RequeueAfter: d.Requeue}, nil
	}
	fin, fd, err := r.decideFresh(ctx, key, mem, read.AheadOf(in))
	if err != nil || fin.AppWrapper == nil {
		return ctrl.Result{}, err
	}
	return r.act(ctx, fin, fd, mem)
}

// input is the start of a decision's input: the clock and the memory.
func (r *appWrapperReconciler) input(mem *awMemory) decision.Input {
	return decision.Input{Now: r.Clock.Now(), FailureSeen: mem.failure, HoldStart: mem.holdStart, WorkerFailures: mem.unreachable, Warned: mem.warned, FailureGracePeriod: r.FailureGracePeriod}
}

// act does, in order, what the final check's decision fd on fin says:
// it writes the run's CompletionRecord (the new outcome, the outcome
// cleared, or the action in force), and decides again on the record as
// the API server answered; then it mirrors the outcome on the
// AppWrapper's metadata for people, unless it deletes the AppWrapper now;
// then it deletes, when that decision says to.
func (r *appWrapperReconciler) act(ctx context.Context, fin decision.Input, fd decision.Decision, mem *awMemory) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	aw := fin.AppWrapper
	if fd.Store != nil {
		// Created, or updated under its resourceVersion; kept as the API
		// server answered.
		stored := fd.Store.DeepCopy()
		var err error
		if stored.ResourceVersion == "" {
			err = r.Writer.Create(ctx, stored)
		} else {
			err = r.Writer.Update(ctx, stored)
		}
		if err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) {
				// Changed since it was read, or created meanwhile
				// (AlreadyExists: recorded already, on a cache that lagged): look again.
				log.V(2).Info("CompletionRecord changed while writing it; looking again", "err", err.Error())
				return ctrl.Result{Requeue: true}, nil
			}
			historyWriteFailuresTotal.WithLabelValues(fd.Winner).Inc()
			r.emit(aw, []decision.Event{decision.WarningRecordNotWritten.Event(err)}, decision.EventNow)
			return ctrl.Result{}, fmt.Errorf("writing the CompletionRecord: %w", err)
		}
		r.emit(aw, fd.Events, decision.EventAfterWrite)
		switch {
		case fd.Write != nil:
			log.Info("Recorded outcome", "outcome", fd.Write.Outcome, "message", fd.Write.Message)
			outcomesTotal.WithLabelValues(fd.Write.Rule, string(fd.Write.Outcome)).Inc()
			r.Counters.Add(ctx, fd.Write.Rule, fd.Write.Outcome)
			historyWrittenTotal.WithLabelValues(fd.Write.Rule).Inc()
			switch {
			case fd.Action.Action == wrapupv1alpha1.ActionUpdateStatus:
				actionsTotal.WithLabelValues(fd.Winner, "StatusOnly").Inc()
			case fd.DryRun:
				actionsTotal.WithLabelValues(fd.Winner, wrapupv1alpha1.ReasonWouldDelete).Inc()
			}
		case fd.Clear:
			log.Info("Cleared outcome", "was", fd.Recorded.Outcome)
		default:
			log.V(1).Info("Stamped the action in force", "rule", fd.Stamp.Rule, "action", fd.Stamp.Action.Action, "deleteAfter", fd.Stamp.DueAt)
		}
		fin.Record = stored
		next := decision.Decide(ctx, fin)
		r.observed("written", fin, next)
		if (fd.Write != nil || fd.Clear) && next.Verdict != decision.VerdictDelete {
			r.mirror(ctx, aw, next.Recorded)
		}
		if next.Store != nil {
			// A decision on the record as written writes again: look
			// again, on caches that caught up.
			log.V(2).Info("A decision on the CompletionRecord as written would write again; looking again", "reason", next.Reason)
			return ctrl.Result{Requeue: true}, nil
		}
		fd = next
	}
	if fd.Verdict != decision.VerdictDelete {
		return ctrl.Result{RequeueAfter: fd.Requeue}, nil
	}
	return r.delete(ctx, fin, fd, mem)
}

// mirror shows the run's outcome rec (nil: none) on aw's labels and
// annotations, for people: a merge patch of those keys alone, which no
// decision reads back. A failure only loses the mirror until the next
// outcome.
func (r *appWrapperReconciler) mirror(ctx context.Context, aw *awv1beta2.AppWrapper, rec *decision.Record) {
	labels, annotations := decision.Mirror(rec)
	// The UID makes the patch fail on another AppWrapper of the name.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": aw.UID, "labels": labels, "annotations": annotations}})
	if err == nil {
		err = r.Writer.Patch(ctx, aw.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
	}
	if err != nil && !apierrors.IsNotFound(err) {
		logf.FromContext(ctx).Error(err, "Mirroring the outcome on the AppWrapper's metadata")
	}
}

// decideFresh gathers from the API server and decides. The triggers of
// ahead are read while the rules are listed.
func (r *appWrapperReconciler) decideFresh(ctx context.Context, key types.NamespacedName, mem *awMemory, ahead *read.Ahead) (decision.Input, decision.Decision, error) {
	finalChecksTotal.WithLabelValues().Inc()
	in, err := read.Gather(ctx, r.liveViewAhead(ahead), r.Policies, key, nil, r.input(mem))
	if err != nil || in.AppWrapper == nil {
		return in, decision.Decision{}, err
	}
	// The API server may have another AppWrapper of the name than the
	// cache: nothing remembered of the cache's counts for it.
	mem.scope(in.AppWrapper.UID, &in)
	d := decision.Decide(ctx, in)
	r.observed("fresh", in, d)
	return in, d, nil
}

// observed is called with every decision, for tests.
func (r *appWrapperReconciler) observed(stage string, in decision.Input, d decision.Decision) {
	if r.observe != nil {
		r.observe(stage, in, d)
	}
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
