// Package triggers keeps the trigger informers: one per trigger kind in
// use (never one per object), claimed by owners, rules or AppWrappers. The
// AppWrapper controller reads triggers from them; the rule controller
// claims its kind through them; each MultiKueue worker cluster has its own.
package triggers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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

// Watches keeps one informer per trigger kind in use. Each watches only
// objects labelled as AppWrapper components, and turns every change into
// an event for the owning AppWrapper. It keeps of each object the status,
// the identity of the object and its owner, and the top-level fields its
// owners at its start (and the rules of Options.Known) read; the metadata
// whole, without managedFields, only when one reads it. It is never
// replaced: a field it drops is read from the API server for each
// decision (Get says ErrFieldsNotKept, Keeps tells the rule). It stops when
// no owner needs its kind; the next keeps what the owners then read.
type Watches struct {
	opts      Options
	client    dynamic.Interface
	mapper    meta.RESTMapper
	discovery discovery.DiscoveryInterface
	events    chan event.GenericEvent
	gone      chan event.GenericEvent // see Gone

	mu     sync.Mutex
	owners map[Owner]claim
	kinds  map[schema.GroupKind]*kindWatch
	// waiters read a kind before its informer had listed (Wait).
	waiters map[schema.GroupKind]map[types.NamespacedName]struct{}
	ctx     context.Context
	started chan struct{}
	stopped chan struct{}
	running sync.WaitGroup // the informers' goroutines, which Start waits for
}

// Owner is who claims a trigger kind: a rule (Rule set), or an
// AppWrapper, for each kind it reads (an annotated component's, or any on
// a worker cluster), which Keep drops.
type Owner struct {
	Rule       string
	AppWrapper types.NamespacedName
	Kind       schema.GroupKind
}

// RuleOwner is the owner of the kind the rule name names.
func RuleOwner(name string) Owner { return Owner{Rule: name} }

// AppWrapperOwner is the owner of the kind gk for the AppWrapper key.
func AppWrapperOwner(key types.NamespacedName, gk schema.GroupKind) Owner {
	return Owner{AppWrapper: key, Kind: gk}
}

// String names the owner in logs.
func (o Owner) String() string {
	if o.Rule != "" {
		return "rule/" + o.Rule
	}
	return "appwrapper/" + o.AppWrapper.String() + "/" + o.Kind.String()
}

// claim is the kind an owner needs watched, and the fields it reads.
type claim struct {
	kind   schema.GroupKind
	fields celpolicies.Fields
}

// kindWatch is a claimed kind. fields, what its owners read, only grows
// while it has owners; failed says why it has no informer (not served, or
// not watchable, to be asked again from retryAt).
type kindWatch struct {
	owners   int
	fields   celpolicies.Fields
	inf      *kindInformer
	failed   *decision.Kind
	retryAt  time.Time
	noStatus bool // see StatusUnprotected
}

type kindInformer struct {
	gvr        schema.GroupVersionResource
	informer   cache.SharedIndexInformer
	stop       context.CancelFunc
	keep       celpolicies.Fields // the top-level fields kept besides metadata
	forbidden  error              // a list refused (RBAC), until the informer lists
	listFailed atomic.Bool        // a list or watch failed before the first list (the reflector retries)
}

// ErrFieldsNotKept says that the informer of a kind drops a field that the
// caller reads: read the object from the API server instead.
var ErrFieldsNotKept = errors.New("the trigger informer does not keep every field the rule reads")

// Options tune a Watches.
type Options struct {
	// Cluster names the worker cluster the watches are on; "" for the
	// cluster wrapup runs in, the only one the informer metrics describe.
	Cluster string
	// Access, when set, is asked before an informer starts (an informer
	// that may not list would retry, and log, for as long as it runs).
	Access AccessReview
	// Clock (default: the real one) times NotWatchableRecheck.
	Clock clock.PassiveClock
	// Known, when set, says what the rules known now read of a kind: an
	// informer keeps it too, whichever owner claims the kind first.
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
	return &Watches{opts: opts, client: client, mapper: mapper, discovery: disc, started: make(chan struct{}), stopped: make(chan struct{}),
		events: make(chan event.GenericEvent, opts.EventBuffer), gone: make(chan event.GenericEvent, 64),
		owners: map[Owner]claim{}, kinds: map[schema.GroupKind]*kindWatch{}, waiters: map[schema.GroupKind]map[types.NamespacedName]struct{}{}}
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
	for gk, k := range w.kinds {
		if k.inf != nil {
			w.stopLocked(gk, k)
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

// Stopped is closed once the watches and their informers have stopped.
func (w *Watches) Stopped() <-chan struct{} { return w.stopped }

// NeedLeaderElection: triggers are only watched by the acting replica.
func (w *Watches) NeedLeaderElection() bool { return true }

// Ensure sets the kind that owner needs, and the fields of it that owner
// reads, starts its informer if it is missing, and stops the informer of
// a kind no owner needs any more. It returns a *KindNotFoundError when the
// API server does not serve the kind; the owner keeps its claim, so that a
// later Ensure picks the kind up. The REST mapping and discovery happen
// outside the lock: a slow API server never holds up readers of the caches.
func (w *Watches) Ensure(owner Owner, gk schema.GroupKind, fields celpolicies.Fields) error {
	select {
	case <-w.started: // informers need the manager's context
	case <-time.After(30 * time.Second):
		return fmt.Errorf("watching %v: the watch manager has not started", gk)
	}
	w.mu.Lock()
	if old, ok := w.owners[owner]; !ok || old.kind != gk || !old.fields.Equal(fields) {
		// The new claim first, so that the informer of a kind the owner
		// keeps is not stopped in between.
		if w.kinds[gk] == nil {
			w.kinds[gk] = &kindWatch{}
		}
		w.kinds[gk].owners++
		w.kinds[gk].fields = w.kinds[gk].fields.Union(fields)
		w.releaseLocked(owner)
		w.owners[owner] = claim{kind: gk, fields: fields}
	}
	k := w.kinds[gk]
	running := k.inf != nil
	if f := k.failed; !running && f != nil && f.State == decision.KindNotWatchable && w.opts.Clock.Now().Before(k.retryAt) {
		w.mu.Unlock()
		return notWatchableError{errors.New(f.Message)}
	}
	w.mu.Unlock()
	if running {
		return nil
	}

	mapping, status, err := w.resolve(gk)
	var known celpolicies.Fields
	if w.opts.Known != nil && err == nil {
		known = w.opts.Known(gk) // outside the lock, as the mapping is
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k = w.kinds[gk]
	var nf *KindNotFoundError
	switch {
	case k == nil:
		return nil // released meanwhile
	case err != nil && !KindState(err):
		return err // discovery failed, which says nothing of the kind: its owners try again
	case errors.As(err, &nf):
		k.failed = &decision.Kind{State: decision.KindNotServed, Message: err.Error()}
		return err
	case err != nil:
		k.failed = &decision.Kind{State: decision.KindNotWatchable, Message: err.Error()}
		k.retryAt = w.opts.Clock.Now().Add(NotWatchableRecheck)
		return err
	}
	k.failed = nil
	if k.inf != nil {
		return nil // started meanwhile
	}
	k.noStatus = !status
	return w.startLocked(gk, k, mapping, known)
}

// Keeps says whether the informer of gk keeps fields; true when none runs.
func (w *Watches) Keeps(gk schema.GroupKind, fields celpolicies.Fields) bool {
	inf := w.informer(gk)
	return inf == nil || inf.keep.Covers(fields)
}

func (w *Watches) informer(gk schema.GroupKind) *kindInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if k := w.kinds[gk]; k != nil {
		return k.inf
	}
	return nil
}

// resolve maps gk to its resource and asks the API server whether it serves
// it, as a namespaced resource, and whether with a status subresource.
func (w *Watches) resolve(gk schema.GroupKind) (*meta.RESTMapping, bool, error) {
	mapping, err := w.mapper.RESTMapping(gk)
	var status, gone bool
	if err == nil {
		status, gone, err = w.servedStatus(mapping.Resource)
	}
	switch {
	case gone || meta.IsNoMatchError(err): // its CRD is not installed
		return nil, false, &KindNotFoundError{Kind: gk, Err: err}
	case err != nil: // a timeout, an API server restarting
		return nil, false, fmt.Errorf("discovering trigger kind %s: %w", gk, err)
	case mapping.Scope.Name() != meta.RESTScopeNameNamespace:
		return nil, false, notWatchableError{fmt.Errorf("trigger kind %s is cluster-scoped: AppWrapper components live in the AppWrapper's namespace", gk)}
	}
	if w.opts.Access != nil {
		ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
		defer cancel()
		allowed, why, err := w.opts.Access(ctx, mapping.Resource)
		switch {
		case err != nil:
			// No answer: the informer starts, and its list says whether
			// wrapup may (listForbidden). Never holding a kind unwatched
			// for want of an answer keeps its completions from being lost.
			logf.FromContext(w.ctx).Info("Could not ask whether wrapup may list a trigger kind; watching it", "kind", gk.String(), "err", err.Error())
		case !allowed:
			return nil, false, notWatchableError{errors.New(why)}
		}
	}
	return mapping, status, nil
}

// NotWatchableRecheck is how long a kind found not watchable stays so: a
// grant is picked up within it, when an owner of the kind looks again (an
// AppWrapper comes back after decision.NotWatchableRetry).
const NotWatchableRecheck = time.Minute

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

// notWatchableError says that triggers of a kind cannot be watched: the
// kind is cluster-scoped, or wrapup may not list and watch it. Like a kind
// not served, it is a state of the kind (Kind), not a failure.
type notWatchableError struct{ error }

func (e notWatchableError) Unwrap() error { return e.error }

// KindState says whether err, from Ensure, is a state of the kind (not
// served, not watchable) that Kind reports, rather than a failure to retry.
func KindState(err error) bool {
	var nf *KindNotFoundError
	var nw notWatchableError
	return errors.As(err, &nf) || errors.As(err, &nw)
}

// servedStatus asks the API server whether it serves gvr now, with a
// status subresource or not; gone: definitely not (its group version not
// found, or lacking it), where an error alone may be a failed request.
func (w *Watches) servedStatus(gvr schema.GroupVersionResource) (status, gone bool, err error) {
	if w.discovery == nil {
		return true, false, nil
	}
	list, err := w.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false, apierrors.IsNotFound(err), err
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
		return false, true, fmt.Errorf("the API server does not serve %s", gvr)
	}
	return status, false, nil
}

// StatusUnprotected says whether the API server serves gk with no status
// subresource, as of its informer's start: whoever may update an object
// writes its status too.
func (w *Watches) StatusUnprotected(gk schema.GroupKind) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := w.kinds[gk]
	return k != nil && k.noStatus
}

// AccessReview says whether wrapup may list and watch a resource in every
// namespace: SelfAccessReview for the controller itself, or a
// SubjectAccessReview for wrapup's ServiceAccount in a tool.
type AccessReview func(ctx context.Context, gvr schema.GroupVersionResource) (allowed bool, why string, err error)

// SelfAccessReview asks the API server, through client, whether the caller
// may list and watch a resource in every namespace (SelfSubjectAccessReview,
// which every authenticated user may create).
func SelfAccessReview(client dynamic.Interface) AccessReview {
	ssar := client.Resource(schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"})
	return func(ctx context.Context, gvr schema.GroupVersionResource) (bool, string, error) {
		for _, verb := range []string{"list", "watch"} {
			res, err := ssar.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
				"spec": map[string]any{"resourceAttributes": map[string]any{"verb": verb, "group": gvr.Group, "resource": gvr.Resource}}}}, metav1.CreateOptions{})
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

// DeniedList is what wrapup says of a resource it may not verb in every
// namespace: the same words from the controller and from a tool.
func DeniedList(verb string, gr schema.GroupResource) string {
	return fmt.Sprintf("wrapup may not %s %s in every namespace (RBAC); grant it through the ClusterRole label wrapup.dev/aggregate-to-trigger-kinds", verb, gr)
}

// Release drops every claim of owner.
func (w *Watches) Release(owner Owner) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releaseLocked(owner)
}

// Keep drops the claims of the AppWrapper key on the kinds not in kinds
// (nil: on every kind).
func (w *Watches) Keep(key types.NamespacedName, kinds []schema.GroupKind) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for gk := range w.kinds {
		if !slices.Contains(kinds, gk) {
			w.releaseLocked(AppWrapperOwner(key, gk))
		}
	}
}

func (w *Watches) releaseLocked(owner Owner) {
	c, ok := w.owners[owner]
	if !ok {
		return
	}
	delete(w.owners, owner)
	k := w.kinds[c.kind]
	if k.owners--; k.owners > 0 {
		return
	}
	delete(w.kinds, c.kind)
	delete(w.waiters, c.kind)
	if k.inf != nil {
		w.stopLocked(c.kind, k)
		logf.FromContext(w.ctx).Info("Stopped watching trigger kind", "kind", c.kind.String())
	}
}

func (w *Watches) stopLocked(gk schema.GroupKind, k *kindWatch) {
	k.inf.stop()
	k.inf = nil
	if w.opts.Cluster == "" {
		informersGauge.DeleteLabelValues(gk.String())
		informersSyncedGauge.DeleteLabelValues(gk.String())
	}
}

// Kinds lists the kinds with a running informer, sorted.
func (w *Watches) Kinds() []schema.GroupKind {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []schema.GroupKind
	for gk, k := range w.kinds {
		if k.inf != nil {
			out = append(out, gk)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Kind says how far triggers of gk can be read: watched once its informer
// has listed, pending before (or before any claim), not served or not
// watchable when its start or its list failed so.
func (w *Watches) Kind(gk schema.GroupKind) decision.Kind {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kindLocked(gk)
}

func (w *Watches) kindLocked(gk schema.GroupKind) decision.Kind {
	k := w.kinds[gk]
	switch {
	case k == nil:
	case k.inf != nil && k.inf.informer.HasSynced():
		return decision.Kind{State: decision.KindWatched}
	case k.inf != nil && k.inf.forbidden != nil:
		return decision.Kind{State: decision.KindNotWatchable, Message: k.inf.forbidden.Error()}
	case k.inf == nil && k.failed != nil:
		return *k.failed
	}
	return decision.Kind{State: decision.KindPending}
}

// Wait asks for an event for the AppWrapper key once the informer of gk
// has listed (at once if it has by now).
func (w *Watches) Wait(gk schema.GroupKind, key types.NamespacedName) {
	w.mu.Lock()
	if k := w.kinds[gk]; k == nil || k.inf == nil || !k.inf.informer.HasSynced() {
		if w.waiters[gk] == nil {
			w.waiters[gk] = map[types.NamespacedName]struct{}{}
		}
		w.waiters[gk][key] = struct{}{}
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.send(w.ctx, []types.NamespacedName{key}, nil)
}

// AppWrapperEvent is the event that reconciles the AppWrapper key.
func AppWrapperEvent(key types.NamespacedName) event.GenericEvent {
	return event.GenericEvent{Object: &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
}

// RuleEvent is the event that reconciles the rule name.
func RuleEvent(name string) event.GenericEvent {
	return event.GenericEvent{Object: &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Get returns the cached trigger object of kind gk, nil when the informer
// has not seen it; synced is false until the informer has listed; the
// error is ErrFieldsNotKept when it does not keep fields.
func (w *Watches) Get(gk schema.GroupKind, namespace, name string, fields celpolicies.Fields) (obj *unstructured.Unstructured, synced bool, err error) {
	inf := w.informer(gk)
	switch {
	case inf == nil || !inf.informer.HasSynced():
		return nil, false, nil
	case !inf.keep.Covers(fields):
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
	if inf := w.informer(gk); inf != nil {
		return inf.gvr, true
	}
	return schema.GroupVersionResource{}, false
}

func (w *Watches) startLocked(gk schema.GroupKind, k *kindWatch, mapping *meta.RESTMapping, known celpolicies.Fields) error {
	if err := w.ctx.Err(); err != nil {
		return fmt.Errorf("watching %s: %w", gk, err) // stopping: Start waits only for the informers it has
	}
	// The status always (a built-in, and most rules, read it), and what
	// its owners and the rules known now read.
	keep := k.fields.Union(known).Union(celpolicies.FieldsOf("status"))
	// No index: triggers are read by key only.
	informer := dynamicinformer.NewFilteredDynamicInformer(w.client, mapping.Resource, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = awv1beta2.AppWrapperLabel }).Informer()
	ctx, cancel := context.WithCancel(w.ctx)
	inf := &kindInformer{gvr: mapping.Resource, informer: informer, stop: cancel, keep: keep}
	if err := w.handle(ctx, gk, inf); err != nil {
		cancel()
		return fmt.Errorf("watching %s: %w", gk, err)
	}
	k.inf = inf
	w.running.Add(1)
	go func() { defer w.running.Done(); informer.RunWithContext(ctx) }()
	go w.announceSync(ctx, gk, inf)
	if w.opts.Cluster == "" {
		informersGauge.WithLabelValues(gk.String()).Set(1)
		informersSyncedGauge.WithLabelValues(gk.String()).Set(0)
	}
	logf.FromContext(w.ctx).Info("Watching trigger kind", "kind", gk.String(), "resource", mapping.Resource.String(), "fields", keep.String())
	return nil
}

// handle hooks wrapup into inf, the informer of gk, which runs until ctx ends.
func (w *Watches) handle(ctx context.Context, gk schema.GroupKind, inf *kindInformer) error {
	if err := inf.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if !inf.informer.HasSynced() {
			inf.listFailed.Store(true)
		}
		switch {
		case apierrors.IsNotFound(err):
			// The kind's CRD may have been deleted: stop the informer,
			// instead of retrying forever, and tell the rules.
			go w.recheck(gk, inf)
		case apierrors.IsForbidden(err) && !inf.informer.HasSynced():
			// Said once (listForbidden), and to the owners through Kind,
			// not logged at each of the reflector's retries. (A watch
			// refused after the first list, RBAC revoked, is an error.)
			w.listForbidden(gk, inf, err)
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return err
	}
	if err := inf.informer.SetTransform(keepFields(inf.keep)); err != nil {
		return err
	}
	_, err := inf.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
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
	})
	return err
}

func (w *Watches) enqueue(ctx context.Context, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if t, ok := obj.(*cachedTrigger); ok && t.owner != "" {
		w.send(ctx, []types.NamespacedName{{Namespace: t.namespace, Name: t.owner}}, nil)
	}
}

// announceSync waits for the first list of inf, then tells gk's owners and
// waiters: one that looked while the list was under way looks again,
// however its own events interleaved with the list.
func (w *Watches) announceSync(ctx context.Context, gk schema.GroupKind, inf *kindInformer) {
	if !cache.WaitForCacheSync(ctx.Done(), inf.informer.HasSynced) {
		return
	}
	rules, keys, ok := w.changeKind(gk, inf, func(*kindWatch) ([]types.NamespacedName, bool) {
		if w.opts.Cluster == "" {
			informersSyncedGauge.WithLabelValues(gk.String()).Set(1)
		}
		inf.forbidden = nil
		waited := slices.Collect(maps.Keys(w.waiters[gk]))
		delete(w.waiters, gk)
		return waited, true
	})
	if ok {
		w.send(ctx, keys, rules)
	}
}

// changeKind applies change to gk, under the lock, if inf still runs for
// it; if change agrees, it returns whom to tell: the rules and AppWrappers
// that claim gk, and the AppWrappers change returns.
func (w *Watches) changeKind(gk schema.GroupKind, inf *kindInformer, change func(*kindWatch) ([]types.NamespacedName, bool)) (rules []string, keys []types.NamespacedName, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := w.kinds[gk]
	if k == nil || k.inf != inf {
		return nil, nil, false
	}
	if keys, ok = change(k); !ok {
		return nil, nil, false
	}
	for owner, c := range w.owners {
		switch {
		case c.kind != gk:
		case owner.Rule != "":
			rules = append(rules, owner.Rule)
		default:
			keys = append(keys, owner.AppWrapper)
		}
	}
	return rules, keys, true
}

// send sends events for AppWrappers and rules until ctx ends: the watches
// or the sending informer stop (no owner needs its kind, or it is no longer
// served; the next informer's list and announceSync tell of every trigger).
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
// whether a list of it has failed meanwhile.
func (w *Watches) Listing(gk schema.GroupKind) (listing, failed bool) {
	if inf := w.informer(gk); inf != nil && !inf.informer.HasSynced() {
		return true, inf.listFailed.Load()
	}
	return false, false
}

// Claimants are the AppWrappers that claim kinds here.
func (w *Watches) Claimants() []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := map[types.NamespacedName]bool{}
	for owner := range w.owners {
		if owner.Rule == "" {
			keys[owner.AppWrapper] = true
		}
	}
	return slices.Collect(maps.Keys(keys))
}

// listForbidden records that wrapup may not list gk (until its informer
// lists after all), and tells the rules and AppWrappers that claim it.
func (w *Watches) listForbidden(gk schema.GroupKind, inf *kindInformer, err error) {
	rules, keys, ok := w.changeKind(gk, inf, func(*kindWatch) ([]types.NamespacedName, bool) {
		if inf.informer.HasSynced() || inf.forbidden != nil {
			return nil, false
		}
		inf.forbidden = err
		return nil, true
	})
	if ok {
		logf.FromContext(w.ctx).Info("Not allowed to watch trigger kind", "kind", gk.String(), "err", err.Error())
		go w.send(w.ctx, keys, rules) // not in the reflector's error handler
	}
}

// recheck stops the informer inf of gk if the API server definitely no
// longer serves its kind, and tells the kind's owners.
func (w *Watches) recheck(gk schema.GroupKind, inf *kindInformer) bool {
	if _, gone, err := w.servedStatus(inf.gvr); gone {
		rules, keys, ok := w.changeKind(gk, inf, func(k *kindWatch) ([]types.NamespacedName, bool) {
			w.stopLocked(gk, k)
			k.failed = &decision.Kind{State: decision.KindNotServed, Message: err.Error()}
			return nil, true
		})
		if ok {
			logf.FromContext(w.ctx).Info("Stopped watching trigger kind: no longer served", "kind", gk.String(), "reason", err.Error())
			w.send(w.ctx, keys, rules)
		}
		return ok
	}
	return false
}

// Recheck stops the informers of the kinds that the CRD crd (plural.group)
// served, if the API server definitely no longer serves them (a failed
// request leaves them running), and returns those kinds. Owners keep their
// claims: a later Ensure says not found, or picks the kind up again.
func (w *Watches) Recheck(crd string) []schema.GroupKind {
	check := map[schema.GroupKind]*kindInformer{}
	w.mu.Lock()
	for gk, k := range w.kinds {
		if k.inf != nil && k.inf.gvr.Resource+"."+k.inf.gvr.Group == crd {
			check[gk] = k.inf
		}
	}
	w.mu.Unlock()
	for gk, inf := range check {
		if !w.recheck(gk, inf) {
			delete(check, gk)
		}
	}
	return slices.Collect(maps.Keys(check))
}

// UnwatchableClaims describes, for each AppWrapper owner that keep selects,
// the kind it claims if that kind cannot be watched (not served, not
// watchable), as "namespace/name: kind: why".
func (w *Watches) UnwatchableClaims(keep func(types.NamespacedName) bool) []string {
	found := map[types.NamespacedName][]string{}
	w.mu.Lock()
	for owner, c := range w.owners {
		if k := w.kindLocked(c.kind); owner.Rule == "" && (k.State == decision.KindNotServed || k.State == decision.KindNotWatchable) {
			found[owner.AppWrapper] = append(found[owner.AppWrapper], fmt.Sprintf("%s: %s: %s", owner.AppWrapper, c.kind, k.Message))
		}
	}
	w.mu.Unlock()
	var out []string
	for key, what := range found { // keep is asked outside the lock
		if keep(key) {
			out = append(out, what...)
		}
	}
	return out
}
