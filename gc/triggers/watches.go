// Package triggers keeps the trigger informers: one per trigger kind in
// use, never one per object, claimed by owners (a rule, or an AppWrapper
// for its annotated triggers) and stopped when none needs its kind. The
// AppWrapper controller reads triggers from them; the rule controller
// claims its kind through them; each MultiKueue worker cluster has its own.
package triggers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// Watches keeps one informer per trigger kind in use, never one per object.
// Each informer lists and watches only objects labelled as AppWrapper
// components, and turns every change into a generic event for the
// AppWrapper that owns the object. It keeps of each object, from its start
// and for as long as it runs, the status, what identifies the object and
// its owner, and the top-level fields that its owners at the start read
// (the metadata whole, without managedFields, only when one reads it): for
// the built-ins, the status, and not the spec with its pod template. An
// informer is never replaced: a field that an owner claiming the kind
// later reads and it drops is read from the API server, for each decision
// that reads it (Get says ErrFieldsNotKept, and Keeps tells the rule). With
// Options.Known, it keeps from its start what every rule known then reads.
// Kinds are reference-counted by owner (a rule, or an AppWrapper whose
// annotated component names a kind): an informer stops when no owner needs
// its kind, and the next one keeps what the owners then read.
type Watches struct {
	// cluster names the worker cluster these watches are on; "" for the
	// cluster wrapup runs in, the only one its informer metrics describe.
	cluster   string
	client    dynamic.Interface
	mapper    meta.RESTMapper
	discovery discovery.DiscoveryInterface
	events    chan event.GenericEvent

	mu     sync.Mutex
	owners map[Owner]claim
	// kinds counts the owners of each kind, with the union of the fields
	// they read; it only grows while the kind has owners.
	kinds     map[schema.GroupKind]*kindClaims
	informers map[schema.GroupKind]*kindInformer
	// failed holds why a claimed kind has no informer: not served, or not
	// watchable (cluster-scoped).
	failed map[schema.GroupKind]decision.Kind
	// noStatus holds the kinds served with no status subresource.
	noStatus map[schema.GroupKind]bool
	// access, when set, asks the API server whether wrapup may list and
	// watch a resource in every namespace, before an informer is started
	// for it (an informer that may not list would retry, and log, for as
	// long as it runs); nil: not asked.
	access AccessReview
	// known says what the rules known read of a kind (Options.Known).
	known func(schema.GroupKind) celpolicies.Fields
	clock clock.PassiveClock
	// retryAt says when a kind found not watchable is asked about again.
	retryAt map[schema.GroupKind]time.Time
	// waiters are AppWrappers that read a kind before its informer had
	// listed: each gets an event once it has.
	waiters map[schema.GroupKind]map[types.NamespacedName]struct{}
	ctx     context.Context
	started chan struct{}
	stopped chan struct{}
	// running counts the informers' goroutines: Start returns once they
	// have.
	running sync.WaitGroup
	// gone tells the rule controller about rules whose kind stopped being
	// served while watched, or whose watch state changed.
	gone chan event.GenericEvent
}

// Owner is who claims a trigger kind: a rule, or an AppWrapper for its
// annotated triggers. An AppWrapper owns the kind of its first annotated
// component with no Kind in its Owner (AppWrapperOwner), so that it is
// released without knowing the kind, and each other kind, and every kind
// on a worker cluster, with the kind named (Owner.Of).
type Owner struct {
	// Rule names the rule that claims, or is "" for an AppWrapper.
	Rule string
	// AppWrapper is the AppWrapper that claims.
	AppWrapper types.NamespacedName
	// Kind is the kind an AppWrapper claims besides its first.
	Kind schema.GroupKind
}

// RuleOwner is the owner of the kind the rule name names.
func RuleOwner(name string) Owner { return Owner{Rule: name} }

// AppWrapperOwner is the owner, for the AppWrapper key, of the kind of its
// first annotated component.
func AppWrapperOwner(key types.NamespacedName) Owner { return Owner{AppWrapper: key} }

// Of is the owner, for the same AppWrapper, of the kind gk.
func (o Owner) Of(gk schema.GroupKind) Owner { return Owner{AppWrapper: o.AppWrapper, Kind: gk} }

// String names the owner in logs.
func (o Owner) String() string {
	switch {
	case o.Rule != "":
		return "rule/" + o.Rule
	case o.Kind.Kind != "":
		return "appwrapper/" + o.AppWrapper.String() + "/" + o.Kind.String()
	}
	return "appwrapper/" + o.AppWrapper.String()
}

// claim is what an owner needs watched: a kind, and the fields of it that
// the owner's expressions read.
type claim struct {
	kind   schema.GroupKind
	fields celpolicies.Fields
}

type kindClaims struct {
	owners int
	fields celpolicies.Fields
}

type kindInformer struct {
	gvr      schema.GroupVersionResource
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	// keep are the top-level fields the informer keeps besides metadata.
	keep celpolicies.Fields
	// forbidden is the error of a list that wrapup may not make (RBAC),
	// while the informer has not listed; nil otherwise.
	forbidden error
	// listFailed: a list (or watch) failed before the informer first
	// listed; the reflector tries again with its backoff.
	listFailed atomic.Bool
}

// ErrFieldsNotKept says that the informer of a kind drops a field that the
// caller reads: read the object from the API server instead.
var ErrFieldsNotKept = errors.New("the trigger informer does not keep every field the rule reads")

// Options tune a Watches.
type Options struct {
	// Cluster names the worker cluster the watches are on; "" for the
	// cluster wrapup runs in, the only one the informer metrics describe.
	Cluster string
	// Access, when set, asks whether wrapup may list and watch a kind's
	// resource before its informer starts (SelfAccessReview).
	Access AccessReview
	// Clock defaults to the real clock; it says when a kind found not
	// watchable is asked about again.
	Clock clock.PassiveClock
	// Known, when set, says what the rules known now read of a kind: an
	// informer started for the kind keeps it too, whichever owner claims
	// the kind first.
	Known func(schema.GroupKind) celpolicies.Fields
	// EventBuffer is how many AppWrapper events wait for the controller
	// before the informers' handlers wait too; 0 means 1024.
	EventBuffer int
}

// NewWatches returns a Watches whose events go to Events (the source of
// the AppWrapper controller). disc, when set, is asked (uncached) whether a
// kind is still served before its informer starts, and by Recheck: the
// REST mapper keeps a kind whose CRD was deleted.
func NewWatches(client dynamic.Interface, mapper meta.RESTMapper, disc discovery.DiscoveryInterface, opts Options) *Watches {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.EventBuffer <= 0 {
		opts.EventBuffer = 1024
	}
	return &Watches{
		cluster:   opts.Cluster,
		access:    opts.Access,
		known:     opts.Known,
		clock:     opts.Clock,
		client:    client,
		mapper:    mapper,
		discovery: disc,
		events:    make(chan event.GenericEvent, opts.EventBuffer),
		owners:    map[Owner]claim{},
		kinds:     map[schema.GroupKind]*kindClaims{},
		informers: map[schema.GroupKind]*kindInformer{},
		failed:    map[schema.GroupKind]decision.Kind{},
		noStatus:  map[schema.GroupKind]bool{},
		retryAt:   map[schema.GroupKind]time.Time{},
		waiters:   map[schema.GroupKind]map[types.NamespacedName]struct{}{},
		started:   make(chan struct{}),
		stopped:   make(chan struct{}),
		gone:      make(chan event.GenericEvent, 64),
	}
}

// Gone is where rules arrive whose trigger kind stopped being served, or
// whose watch state changed (the first list, a list refused).
func (w *Watches) Gone() <-chan event.GenericEvent { return w.gone }

// Events is where trigger changes arrive, as the AppWrapper to reconcile.
func (w *Watches) Events() <-chan event.GenericEvent { return w.events }

// Start records the manager's context; informers run until it is done.
func (w *Watches) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
	close(w.started)
	<-ctx.Done()
	w.mu.Lock()
	for gk, inf := range w.informers {
		inf.stop()
		delete(w.informers, gk)
		if w.cluster == "" {
			informersGauge.DeleteLabelValues(gk.String())
			informersSyncedGauge.DeleteLabelValues(gk.String())
		}
	}
	w.mu.Unlock()
	// Their handlers give up an event once their informer is stopped
	// (enqueue), so this does not wait for a reader of Events.
	w.running.Wait()
	close(w.stopped)
	return nil
}

// Started is closed once Start has been called: claims may be made.
func (w *Watches) Started() <-chan struct{} { return w.started }

// Stopped is closed once the watches have stopped: their informers with
// them.
func (w *Watches) Stopped() <-chan struct{} { return w.stopped }

// NeedLeaderElection: triggers are only watched by the acting replica.
func (w *Watches) NeedLeaderElection() bool { return true }

// KindNotFoundError says that a trigger kind is not served (its CRD is not
// installed yet).
type KindNotFoundError struct {
	Kind schema.GroupKind
	Err  error
}

func (e *KindNotFoundError) Error() string {
	return fmt.Sprintf("trigger kind %s is not served by the API server: %v", e.Kind, e.Err)
}

func (e *KindNotFoundError) Unwrap() error { return e.Err }

// Ensure sets the kind that owner needs, and the fields of it that owner
// reads, and starts its informer if it is missing; informers no owner
// needs any more are stopped. It returns a *KindNotFoundError when the
// API server does not serve the kind; the
// owner keeps its claim, so that a later Ensure picks the kind up. The
// REST mapping and discovery happen outside the lock: a slow API server
// never holds up readers of the caches.
func (w *Watches) Ensure(owner Owner, gk schema.GroupKind, fields celpolicies.Fields) error {
	// The controllers and the watches start together; informers need the
	// manager's context.
	select {
	case <-w.started:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("watching %v: the watch manager has not started", gk)
	}
	w.mu.Lock()
	if old, ok := w.owners[owner]; !ok || old.kind != gk || !old.fields.Equal(fields) {
		// The new claim first, so that the informer of a kind the owner
		// keeps is not stopped in between.
		kc := w.kinds[gk]
		if kc == nil {
			kc = &kindClaims{}
			w.kinds[gk] = kc
		}
		kc.owners++
		kc.fields = kc.fields.Union(fields)
		if ok {
			w.releaseLocked(owner)
		}
		w.owners[owner] = claim{kind: gk, fields: fields}
	}
	need := w.needsStartLocked(gk)
	if f, ok := w.failed[gk]; need && ok && f.State == decision.KindNotWatchable && w.clock.Now().Before(w.retryAt[gk]) {
		// Found not watchable a moment ago: not asked again yet.
		w.mu.Unlock()
		return &KindNotWatchableError{Kind: gk, Err: errors.New(f.Message)}
	}
	w.mu.Unlock()
	if !need {
		return nil
	}

	mapping, err := w.resolve(gk)
	var known celpolicies.Fields
	if w.known != nil && err == nil {
		// Read outside the lock, as the mapping is.
		known = w.known(gk)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.kinds[gk] == nil {
		return nil // released meanwhile
	}
	var de *discoveryError
	if errors.As(err, &de) {
		// Not a state of the kind: its owners try again (with the error's
		// backoff), and what was known of it stands.
		return err
	}
	if err != nil {
		var nf *KindNotFoundError
		state := decision.Kind{State: decision.KindNotWatchable, Message: err.Error()}
		if errors.As(err, &nf) {
			state = decision.Kind{State: decision.KindNotServed, Message: err.Error()}
		} else {
			w.retryAt[gk] = w.clock.Now().Add(NotWatchableRecheck)
		}
		w.failed[gk] = state
		return err
	}
	delete(w.failed, gk)
	if !w.needsStartLocked(gk) {
		return nil // started meanwhile
	}
	return w.startLocked(gk, mapping, known)
}

// needsStartLocked says whether gk, claimed, has no informer.
func (w *Watches) needsStartLocked(gk schema.GroupKind) bool {
	_, ok := w.informers[gk]
	return w.kinds[gk] != nil && !ok
}

// Keeps says whether the informer of gk keeps fields; true when none runs
// (the next one keeps what its owners read).
func (w *Watches) Keeps(gk schema.GroupKind, fields celpolicies.Fields) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	inf, ok := w.informers[gk]
	return !ok || inf.keep.Covers(fields)
}

// resolve maps gk to its resource and asks the API server whether it serves
// it, as a namespaced resource.
func (w *Watches) resolve(gk schema.GroupKind) (*meta.RESTMapping, error) {
	mapping, err := w.mapper.RESTMapping(gk)
	switch {
	case meta.IsNoMatchError(err):
		// The API server serves no such kind (its CRD is not installed).
		return nil, &KindNotFoundError{Kind: gk, Err: err}
	case err != nil:
		// Discovery failed (a timeout, an API server restarting): that
		// says nothing of the kind.
		return nil, &discoveryError{kind: gk, err: err}
	}
	status, err := w.servedStatus(mapping.Resource)
	if err != nil {
		if !definitelyGone(err) {
			return nil, &discoveryError{kind: gk, err: err}
		}
		return nil, &KindNotFoundError{Kind: gk, Err: err}
	}
	w.mu.Lock()
	w.noStatus[gk] = !status
	w.mu.Unlock()
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, &KindNotWatchableError{Kind: gk, Err: fmt.Errorf("trigger kind %s is cluster-scoped: AppWrapper components live in the AppWrapper's namespace", gk)}
	}
	if w.access != nil {
		ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
		defer cancel()
		allowed, why, err := w.access(ctx, mapping.Resource)
		switch {
		case err != nil:
			// No answer (a policy refuses access reviews, an endpoint
			// that does not serve them, an API server in trouble): the
			// informer starts, as it would without the question, and
			// its list says whether wrapup may (listForbidden). Never
			// holding a kind unwatched for want of an answer keeps its
			// completions from being lost.
			logf.FromContext(w.ctx).Info("Could not ask whether wrapup may list a trigger kind; watching it", "kind", gk.String(), "err", err.Error())
		case !allowed:
			return nil, &KindNotWatchableError{Kind: gk, Err: errors.New(why)}
		}
	}
	return mapping, nil
}

// NotWatchableRecheck is how long a kind found not watchable (wrapup may not
// list it) stays so before it is asked about again: a grant is picked up
// within it, when an owner of the kind looks again (an AppWrapper whose
// trigger it is comes back after decision.NotWatchableRetry).
const NotWatchableRecheck = time.Minute

// KindNotWatchableError says that triggers of a kind cannot be watched:
// the kind is cluster-scoped, or wrapup may not list and watch it. Its
// owners are told through Kind (KindNotWatchable), as for a kind that is
// not served: it is the state of the kind, not a failure of the reconcile.
type KindNotWatchableError struct {
	Kind schema.GroupKind
	Err  error
}

func (e *KindNotWatchableError) Error() string { return e.Err.Error() }

func (e *KindNotWatchableError) Unwrap() error { return e.Err }

// KindState says whether err, from Ensure, is a state of the kind (not
// served, not watchable) that Kind reports, rather than a failure to retry.
func KindState(err error) bool {
	var nf *KindNotFoundError
	var nw *KindNotWatchableError
	return errors.As(err, &nf) || errors.As(err, &nw)
}

// SelfAccessReview asks the API server, through client, whether the caller
// may list and watch a resource in every namespace (SelfSubjectAccessReview,
// which every authenticated user may create).
func SelfAccessReview(client dynamic.Interface) AccessReview {
	ssar := schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}
	return func(ctx context.Context, gvr schema.GroupVersionResource) (bool, string, error) {
		for _, verb := range []string{"list", "watch"} {
			review := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
				"spec": map[string]any{"resourceAttributes": map[string]any{"verb": verb, "group": gvr.Group, "resource": gvr.Resource}},
			}}
			res, err := client.Resource(ssar).Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				return false, "", err
			}
			if allowed, _, _ := unstructured.NestedBool(res.Object, "status", "allowed"); !allowed {
				return false, DeniedList(verb, gvr.GroupResource()), nil
			}
		}
		return true, "", nil
	}
}

// Release drops every claim of owner.
func (w *Watches) Release(owner Owner) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releaseLocked(owner)
}

// releaseLocked drops the claim of owner, and stops the informer of its
// kind if no other owner needs it.
func (w *Watches) releaseLocked(owner Owner) {
	c, ok := w.owners[owner]
	if !ok {
		return
	}
	delete(w.owners, owner)
	kc := w.kinds[c.kind]
	if kc.owners--; kc.owners > 0 {
		return
	}
	delete(w.kinds, c.kind)
	delete(w.failed, c.kind)
	delete(w.waiters, c.kind)
	if inf, ok := w.informers[c.kind]; ok {
		w.stopLocked(c.kind, inf)
		if w.ctx != nil {
			logf.FromContext(w.ctx).Info("Stopped watching trigger kind", "kind", c.kind.String())
		}
	}
}

func (w *Watches) stopLocked(gk schema.GroupKind, inf *kindInformer) {
	inf.stop()
	delete(w.informers, gk)
	if w.cluster == "" {
		informersGauge.DeleteLabelValues(gk.String())
		informersSyncedGauge.DeleteLabelValues(gk.String())
	}
}

// Kinds lists the kinds with a running informer, sorted.
func (w *Watches) Kinds() []schema.GroupKind {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]schema.GroupKind, 0, len(w.informers))
	for gk := range w.informers {
		out = append(out, gk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Kind says how far triggers of gk can be read: watched once its informer
// has listed, pending before (or before any owner claimed it), not served
// or not watchable when its start or its list failed so.
func (w *Watches) Kind(gk schema.GroupKind) decision.Kind {
	w.mu.Lock()
	defer w.mu.Unlock()
	if inf, ok := w.informers[gk]; ok {
		switch {
		case inf.informer.HasSynced():
			return decision.Kind{State: decision.KindWatched}
		case inf.forbidden != nil:
			return decision.Kind{State: decision.KindNotWatchable, Message: inf.forbidden.Error()}
		}
		return decision.Kind{State: decision.KindPending}
	}
	if k, ok := w.failed[gk]; ok {
		return k
	}
	return decision.Kind{State: decision.KindPending}
}

// Wait asks for an event for the AppWrapper key once the informer of gk
// has listed (at once if it has by now).
func (w *Watches) Wait(gk schema.GroupKind, key types.NamespacedName) {
	w.mu.Lock()
	inf, ok := w.informers[gk]
	if !ok || !inf.informer.HasSynced() {
		ws := w.waiters[gk]
		if ws == nil {
			ws = map[types.NamespacedName]struct{}{}
			w.waiters[gk] = ws
		}
		ws[key] = struct{}{}
		w.mu.Unlock()
		return
	}
	done := w.ctx.Done()
	w.mu.Unlock()
	select {
	case w.events <- AppWrapperEvent(key):
	case <-done:
		// Stopping: nobody may read the events any more.
	}
}

// AppWrapperEvent is the event that reconciles the AppWrapper key.
func AppWrapperEvent(key types.NamespacedName) event.GenericEvent {
	return event.GenericEvent{Object: &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
}

// RuleEvent is the event that reconciles the rule name.
func RuleEvent(name string) event.GenericEvent {
	return event.GenericEvent{Object: &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Get returns the cached trigger object of kind gk, or nil when the
// informer has not seen it (or the kind is not watched). synced is false
// while the kind's informer has not finished its first list. The object
// holds the fields that the informer keeps; when they do not cover
// fields, Get returns ErrFieldsNotKept.
func (w *Watches) Get(gk schema.GroupKind, namespace, name string, fields celpolicies.Fields) (obj *unstructured.Unstructured, synced bool, err error) {
	w.mu.Lock()
	inf, ok := w.informers[gk]
	w.mu.Unlock()
	if !ok {
		return nil, false, nil
	}
	if !inf.informer.HasSynced() {
		return nil, false, nil
	}
	if !inf.keep.Covers(fields) {
		return nil, true, ErrFieldsNotKept
	}
	item, exists, err := inf.informer.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, true, err
	}
	t, ok := item.(*cachedTrigger)
	if !ok {
		return nil, true, fmt.Errorf("trigger informer of %s holds a %T", gk, item)
	}
	obj, err = t.object()
	return obj, true, err
}

// Resource returns the resource that kind gk is watched as.
func (w *Watches) Resource(gk schema.GroupKind) (schema.GroupVersionResource, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	inf, ok := w.informers[gk]
	if !ok {
		return schema.GroupVersionResource{}, false
	}
	return inf.gvr, true
}

func (w *Watches) startLocked(gk schema.GroupKind, mapping *meta.RESTMapping, known celpolicies.Fields) error {
	if err := w.ctx.Err(); err != nil {
		// Stopping: Start waits for the informers it has.
		return fmt.Errorf("watching %s: %w", gk, err)
	}
	// The status always (a built-in, and most rules, read it), and what
	// its owners and the rules known now read.
	keep := w.kinds[gk].fields.Union(known).Union(celpolicies.FieldsOf("status"))
	// No index: triggers are read by key only.
	informer := dynamicinformer.NewFilteredDynamicInformer(w.client, mapping.Resource, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = awv1beta2.AppWrapperLabel }).Informer()
	ctx, cancel := context.WithCancel(w.ctx)
	inf := &kindInformer{gvr: mapping.Resource, informer: informer, stop: cancel, keep: keep}
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if !inf.informer.HasSynced() {
			inf.listFailed.Store(true)
		}
		switch {
		case apierrors.IsNotFound(err):
			// The kind's CRD may have been deleted: stop the informer,
			// instead of retrying forever, and tell the rules.
			go w.recheck(gk, inf)
		case apierrors.IsForbidden(err) && !inf.informer.HasSynced():
			// Said once, as information (listForbidden), and to the
			// owners through Kind: the reflector retries with its
			// backoff, and the error is not logged again each time. (A
			// watch refused after the kind was listed, its RBAC revoked,
			// is logged as the error it is.)
			w.listForbidden(gk, inf, err)
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		cancel()
		return fmt.Errorf("watching %s: %w", gk, err)
	}
	if err := informer.SetTransform(keepFields(keep)); err != nil {
		cancel()
		return fmt.Errorf("watching %s: %w", gk, err)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.enqueue(ctx, obj) },
		UpdateFunc: func(oldObj, obj any) {
			was, _ := oldObj.(*cachedTrigger)
			if t, _ := obj.(*cachedTrigger); was != nil && (t == nil || t.owner != was.owner) {
				// Another AppWrapper's now (a relist found it deleted
				// and made again for another), or none's: the one it was
				// of is told first.
				w.enqueue(ctx, was)
			}
			w.enqueue(ctx, obj)
		},
		DeleteFunc: func(obj any) { w.enqueue(ctx, obj) },
	}); err != nil {
		cancel()
		return fmt.Errorf("watching %s: %w", gk, err)
	}
	w.informers[gk] = inf
	w.running.Add(1)
	go func() {
		defer w.running.Done()
		informer.RunWithContext(ctx)
	}()
	go w.announceSync(ctx, gk, inf)
	if w.cluster == "" {
		informersGauge.WithLabelValues(gk.String()).Set(1)
		informersSyncedGauge.WithLabelValues(gk.String()).Set(0)
	}
	logf.FromContext(w.ctx).Info("Watching trigger kind", "kind", gk.String(), "resource", mapping.Resource.String(), "fields", keep.String())
	return nil
}

// announceSync waits for the first list of inf, then sends an event for
// every AppWrapper that owns a claim on gk or waited for it, and tells the
// rules that claim it: an AppWrapper that looked while the list was under
// way is looked at again, however its own events interleaved with the
// list.
func (w *Watches) announceSync(ctx context.Context, gk schema.GroupKind, inf *kindInformer) {
	if !cache.WaitForCacheSync(ctx.Done(), inf.informer.HasSynced) {
		return
	}
	w.mu.Lock()
	if w.informers[gk] != inf {
		w.mu.Unlock()
		return
	}
	if w.cluster == "" {
		informersSyncedGauge.WithLabelValues(gk.String()).Set(1)
	}
	inf.forbidden = nil
	keys := make([]types.NamespacedName, 0, len(w.waiters[gk]))
	for k := range w.waiters[gk] {
		keys = append(keys, k)
	}
	delete(w.waiters, gk)
	rules, owners := w.ownersLocked(gk)
	keys = append(keys, owners...)
	w.mu.Unlock()
	w.send(ctx, keys, rules)
}

// send sends events for AppWrappers and rules, until ctx ends.
func (w *Watches) send(ctx context.Context, keys []types.NamespacedName, rules []string) {
	for _, k := range keys {
		select {
		case w.events <- AppWrapperEvent(k):
		case <-ctx.Done():
			return
		}
	}
	for _, name := range rules {
		select {
		case w.gone <- RuleEvent(name):
		case <-ctx.Done():
			return
		}
	}
}

// Listing says whether gk's informer runs and has not listed yet, and
// whether a list of it has failed meanwhile (the reflector tries again).
func (w *Watches) Listing(gk schema.GroupKind) (listing, failed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	inf, ok := w.informers[gk]
	if !ok || inf.informer.HasSynced() {
		return false, false
	}
	return true, inf.listFailed.Load()
}

// Claimants are the AppWrappers that claim kinds here.
func (w *Watches) Claimants() []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[types.NamespacedName]bool{}
	var out []types.NamespacedName
	for owner := range w.owners {
		if k := owner.AppWrapper; owner.Rule == "" && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// listForbidden records that wrapup may not list gk (until its informer
// lists after all), and tells the rules and AppWrappers that claim it.
func (w *Watches) listForbidden(gk schema.GroupKind, inf *kindInformer, err error) {
	w.mu.Lock()
	if w.informers[gk] != inf || inf.informer.HasSynced() || inf.forbidden != nil {
		w.mu.Unlock()
		return
	}
	inf.forbidden = err
	rules, keys := w.ownersLocked(gk)
	ctx := w.ctx
	w.mu.Unlock()
	logf.FromContext(ctx).Info("Not allowed to watch trigger kind", "kind", gk.String(), "err", err.Error())
	go w.send(ctx, keys, rules)
}

func (w *Watches) ownersLocked(gk schema.GroupKind) (rules []string, keys []types.NamespacedName) {
	for owner, c := range w.owners {
		if c.kind != gk {
			continue
		}
		if owner.Rule != "" {
			rules = append(rules, owner.Rule)
		} else {
			keys = append(keys, owner.AppWrapper)
		}
	}
	return rules, keys
}

// served asks the API server whether it serves gvr now.
func (w *Watches) served(gvr schema.GroupVersionResource) error {
	_, err := w.servedStatus(gvr)
	return err
}

// servedStatus is served, and says whether the resource's status is a
// subresource of its own (gvr.Resource + "/status" among the group
// version's resources): if not, whoever may update an object may write
// its status too.
func (w *Watches) servedStatus(gvr schema.GroupVersionResource) (status bool, err error) {
	if w.discovery == nil {
		return true, nil
	}
	list, err := w.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false, err
	}
	found := false
	for _, r := range list.APIResources {
		switch r.Name {
		case gvr.Resource:
			found = true
		case gvr.Resource + "/status":
			status = true
		}
	}
	if !found {
		return false, &notServedError{gvr: gvr}
	}
	return status, nil
}

// StatusUnprotected says whether the API server serves gk with no status
// subresource (as of the last time its informer was started): its status
// is written with the object, by whoever may update it.
func (w *Watches) StatusUnprotected(gk schema.GroupKind) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.noStatus[gk]
}

// discoveryError is a failed discovery request while resolving a kind:
// it says neither that the kind is served nor that it is not.
type discoveryError struct {
	kind schema.GroupKind
	err  error
}

func (e *discoveryError) Error() string {
	return fmt.Sprintf("discovering trigger kind %s: %v", e.kind, e.err)
}

func (e *discoveryError) Unwrap() error { return e.err }

type notServedError struct{ gvr schema.GroupVersionResource }

func (e *notServedError) Error() string {
	return fmt.Sprintf("the API server does not serve %s", e.gvr)
}

// definitelyGone says whether an answer of served means that the resource
// is not served: a group version not found, or one that lacks it. Any other
// error (a timeout, an API server restarting) says nothing.
func definitelyGone(err error) bool {
	var ns *notServedError
	return apierrors.IsNotFound(err) || errors.As(err, &ns)
}

// recheck stops the informer inf of gk if the API server definitely no
// longer serves its kind, and tells the rules and AppWrappers that claim
// it. Discovery runs outside the lock.
func (w *Watches) recheck(gk schema.GroupKind, inf *kindInformer) bool {
	err := w.served(inf.gvr)
	if err == nil || !definitelyGone(err) {
		return false
	}
	w.mu.Lock()
	if w.informers[gk] != inf {
		w.mu.Unlock()
		return false
	}
	w.stopLocked(gk, inf)
	w.failed[gk] = decision.Kind{State: decision.KindNotServed, Message: err.Error()}
	rules, keys := w.ownersLocked(gk)
	ctx := w.ctx
	w.mu.Unlock()
	logf.FromContext(ctx).Info("Stopped watching trigger kind: no longer served", "kind", gk.String(), "reason", err.Error())
	w.send(ctx, keys, rules)
	return true
}

// Recheck stops the informers of the kinds that the CRD named crd (plural.group)
// served, if the API server no longer serves them (the CRD was deleted), and
// returns those kinds. Owners keep their claims, so a later Ensure reports
// the kind as not found, and picks it up again when the CRD comes back.
// Only a definite answer stops an informer: a failed discovery request
// leaves it running.
func (w *Watches) Recheck(crd string) []schema.GroupKind {
	type watched struct {
		gk  schema.GroupKind
		inf *kindInformer
	}
	var check []watched
	w.mu.Lock()
	for gk, inf := range w.informers {
		if inf.gvr.Resource+"."+inf.gvr.Group == crd {
			check = append(check, watched{gk, inf})
		}
	}
	w.mu.Unlock()
	var gone []schema.GroupKind
	for _, c := range check {
		if w.recheck(c.gk, c.inf) {
			gone = append(gone, c.gk)
		}
	}
	return gone
}

// WaitForSync waits until the informer of gk has listed, or ctx ends.
func (w *Watches) WaitForSync(ctx context.Context, gk schema.GroupKind) bool {
	w.mu.Lock()
	inf, ok := w.informers[gk]
	w.mu.Unlock()
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), inf.informer.HasSynced)
}

// enqueue sends the event of a trigger's AppWrapper.
func (w *Watches) enqueue(ctx context.Context, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(*cachedTrigger)
	if !ok || t.owner == "" {
		return
	}
	select {
	case w.events <- AppWrapperEvent(types.NamespacedName{Namespace: t.namespace, Name: t.owner}):
	case <-ctx.Done():
		// The informer is stopped: no owner needs the kind any more (the
		// next informer's list, and announceSync, tell its owners of
		// every trigger), or the kind is no longer served.
	}
}

// owningAppWrapper is the AppWrapper that controls a component: its
// controller ownerReference, or failing that the AppWrapper label.
func owningAppWrapper(u *unstructured.Unstructured) string {
	for _, ref := range u.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "AppWrapper" &&
			schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).Group == awv1beta2.GroupVersion.Group {
			return ref.Name
		}
	}
	return u.GetLabels()[awv1beta2.AppWrapperLabel]
}

// keepFields returns an informer transform that keeps what evaluations and
// the owner mapping need, as a *cachedTrigger: apiVersion, kind, the
// top-level fields in keep, and metadata: whole (without managedFields and
// the last-applied annotation) if keep has it, else only what identifies
// the object and its owner.
func keepFields(keep celpolicies.Fields) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // a *cachedTrigger already
		}
		keep.Keep(u.Object)
		if keep.Has("metadata") {
			StripMetadata(u)
			return newCachedTrigger(u)
		}
		return newIdentityTrigger(identityOnly(u))
	}
}

// identityOnly trims the metadata of u to what wrapup reads when no
// expression reads it: the key, uid and resourceVersion, the
// ownerReferences and the AppWrapper label that name the owner, and the
// deletionTimestamp.
func identityOnly(u *unstructured.Unstructured) *unstructured.Unstructured {
	md, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return u
	}
	for k := range md {
		switch k {
		case "name", "namespace", "uid", "resourceVersion", "ownerReferences", "deletionTimestamp":
		case "labels":
			labels, _ := md[k].(map[string]any)
			if v, ok := labels[awv1beta2.AppWrapperLabel]; ok {
				md[k] = map[string]any{awv1beta2.AppWrapperLabel: v}
			} else {
				delete(md, k)
			}
		default:
			delete(md, k)
		}
	}
	return u
}

// UnwatchableClaims describes, for each AppWrapper owner that keep selects,
// the kind it claims if that kind cannot be watched (not served, not
// watchable), as "namespace/name: kind: why".
func (w *Watches) UnwatchableClaims(keep func(types.NamespacedName) bool) []string {
	w.mu.Lock()
	var claims []struct {
		key types.NamespacedName
		gk  schema.GroupKind
	}
	for owner, c := range w.owners {
		if owner.Rule == "" {
			claims = append(claims, struct {
				key types.NamespacedName
				gk  schema.GroupKind
			}{owner.AppWrapper, c.kind})
		}
	}
	w.mu.Unlock()
	var out []string
	for _, c := range claims {
		if k := w.Kind(c.gk); k.State == decision.KindNotServed || k.State == decision.KindNotWatchable {
			if keep(c.key) {
				out = append(out, fmt.Sprintf("%s: %s: %s", c.key, c.gk, k.Message))
			}
		}
	}
	return out
}

// AccessReview says whether wrapup may list and watch a resource in every
// namespace: SelfAccessReview for the controller itself, or a
// SubjectAccessReview for wrapup's ServiceAccount in a tool.
type AccessReview func(ctx context.Context, gvr schema.GroupVersionResource) (allowed bool, why string, err error)

// DeniedList is what wrapup says of a resource it may not verb in every
// namespace: the same words from the controller and from a tool.
func DeniedList(verb string, gr schema.GroupResource) string {
	return fmt.Sprintf("wrapup may not %s %s in every namespace (RBAC); grant it through the ClusterRole label wrapup.dev/aggregate-to-trigger-kinds", verb, gr)
}

// StripMetadata drops managedFields and the last-applied annotation, the
// largest parts of most objects' metadata, which no expression reads.
func StripMetadata(u *unstructured.Unstructured) *unstructured.Unstructured {
	u.SetManagedFields(nil)
	if ann := u.GetAnnotations(); ann != nil {
		if _, ok := ann["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
			u.SetAnnotations(ann)
		}
	}
	return u
}
