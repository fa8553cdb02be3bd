package gc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// Watches keeps one informer per trigger kind in use, never one per object.
// Each informer lists and watches only objects labelled as AppWrapper
// components, and turns every change into a generic event for the
// AppWrapper that owns the object. It keeps of each object its metadata
// (without managedFields) and only the top-level fields that its owners'
// expressions read: for the built-ins, the status, and not the spec with
// its pod template. Kinds are reference-counted by owner (a rule, or an
// AppWrapper whose annotated component names a kind): an informer stops
// when no owner needs its kind, and is started again, keeping more, when an
// owner reads a field it drops.
type Watches struct {
	client    dynamic.Interface
	mapper    meta.RESTMapper
	discovery discovery.DiscoveryInterface
	events    chan event.GenericEvent

	mu     sync.Mutex
	owners map[string]claim
	// kinds counts the owners of each kind, with the union of the fields
	// they read; it only grows while the kind has owners.
	kinds     map[schema.GroupKind]*kindClaims
	informers map[schema.GroupKind]*kindInformer
	ctx       context.Context
	started   chan struct{}
	// gone tells the rule controller about rules whose kind stopped being
	// served while watched.
	gone chan event.GenericEvent
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
}

// ErrFieldsNotKept says that the informer of a kind drops a field that the
// caller reads: read the object from the API server instead.
var ErrFieldsNotKept = errors.New("the trigger informer does not keep every field the rule reads")

// NewWatches returns a Watches whose events go to the returned channel
// (the source of the AppWrapper controller). disc, when set, is asked
// (uncached) whether a kind is still served before its informer starts, and
// by Recheck: the REST mapper keeps a kind whose CRD was deleted.
func NewWatches(client dynamic.Interface, mapper meta.RESTMapper, disc discovery.DiscoveryInterface) *Watches {
	return &Watches{
		client:    client,
		mapper:    mapper,
		discovery: disc,
		events:    make(chan event.GenericEvent, 1024),
		owners:    map[string]claim{},
		kinds:     map[schema.GroupKind]*kindClaims{},
		informers: map[schema.GroupKind]*kindInformer{},
		started:   make(chan struct{}),
		gone:      make(chan event.GenericEvent, 64),
	}
}

// Gone is where rules whose trigger kind stopped being served arrive.
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
	defer w.mu.Unlock()
	for gk, inf := range w.informers {
		inf.stop()
		delete(w.informers, gk)
		informersGauge.DeleteLabelValues(gk.String())
	}
	return nil
}

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
// reads, and starts its informer if it is missing or drops one of those
// fields; informers no owner needs any more are stopped. It returns a
// *KindNotFoundError when the API server does not serve the kind; the
// owner keeps its claim, so that a later Ensure picks the kind up.
func (w *Watches) Ensure(owner string, gk schema.GroupKind, fields celpolicies.Fields) error {
	// The controllers and the watches start together; informers need the
	// manager's context.
	select {
	case <-w.started:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("watching %v: the watch manager has not started", gk)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
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
	return w.startLocked(gk)
}

// Release drops every claim of owner.
func (w *Watches) Release(owner string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releaseLocked(owner)
}

// releaseLocked drops the claim of owner, and stops the informer of its
// kind if no other owner needs it.
func (w *Watches) releaseLocked(owner string) {
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
	if inf, ok := w.informers[c.kind]; ok {
		inf.stop()
		delete(w.informers, c.kind)
		informersGauge.DeleteLabelValues(c.kind.String())
		if w.ctx != nil {
			logf.FromContext(w.ctx).Info("Stopped watching trigger kind", "kind", c.kind.String())
		}
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

func (w *Watches) startLocked(gk schema.GroupKind) error {
	var keep celpolicies.Fields
	if kc := w.kinds[gk]; kc != nil {
		keep = kc.fields
	}
	if inf, ok := w.informers[gk]; ok {
		if inf.keep.Covers(keep) {
			return nil
		}
		// An owner reads a field this informer drops: list again, keeping
		// it. Until the new informer has listed, readers wait (not synced).
		inf.stop()
		delete(w.informers, gk)
		logf.FromContext(w.ctx).Info("Watching trigger kind again, to keep more fields", "kind", gk.String(), "fields", keep.String(), "was", inf.keep.String())
	}
	if w.ctx == nil {
		return fmt.Errorf("watching %s: the watch manager has not started", gk)
	}
	mapping, err := w.mapper.RESTMapping(gk)
	if err != nil {
		// No match, or discovery of a group that does not exist (yet).
		return &KindNotFoundError{Kind: gk, Err: err}
	}
	if err := w.served(mapping.Resource); err != nil {
		return &KindNotFoundError{Kind: gk, Err: err}
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return fmt.Errorf("trigger kind %s is cluster-scoped: AppWrapper components live in the AppWrapper's namespace", gk)
	}
	informer := dynamicinformer.NewFilteredDynamicInformer(w.client, mapping.Resource, metav1.NamespaceAll, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) { o.LabelSelector = awv1beta2.AppWrapperLabel }).Informer()
	// A watch that fails with NotFound means the kind's CRD was deleted:
	// stop the informer, instead of retrying forever, and tell the rules.
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsNotFound(err) {
			go w.kindGone(gk)
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return fmt.Errorf("watching %s: %w", gk, err)
	}
	if err := informer.SetTransform(keepFields(keep)); err != nil {
		return fmt.Errorf("watching %s: %w", gk, err)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.enqueue,
		UpdateFunc: func(_, obj any) { w.enqueue(obj) },
		DeleteFunc: w.enqueue,
	}); err != nil {
		return fmt.Errorf("watching %s: %w", gk, err)
	}
	ctx, cancel := context.WithCancel(w.ctx)
	w.informers[gk] = &kindInformer{gvr: mapping.Resource, informer: informer, stop: cancel, keep: keep}
	go informer.RunWithContext(ctx)
	informersGauge.WithLabelValues(gk.String()).Set(1)
	logf.FromContext(w.ctx).Info("Watching trigger kind", "kind", gk.String(), "resource", mapping.Resource.String(), "fields", keep.String())
	return nil
}

// served asks the API server whether it serves gvr now.
func (w *Watches) served(gvr schema.GroupVersionResource) error {
	if w.discovery == nil {
		return nil
	}
	list, err := w.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return nil
		}
	}
	return fmt.Errorf("the API server does not serve %s", gvr)
}

// kindGone stops the informer of gk if its kind is no longer served, and
// asks the rules that claim it to report that.
func (w *Watches) kindGone(gk schema.GroupKind) {
	w.mu.Lock()
	inf, ok := w.informers[gk]
	if !ok || w.served(inf.gvr) == nil {
		w.mu.Unlock()
		return
	}
	inf.stop()
	delete(w.informers, gk)
	informersGauge.DeleteLabelValues(gk.String())
	var rules []string
	for owner, c := range w.owners {
		if c.kind == gk && strings.HasPrefix(owner, "rule/") {
			rules = append(rules, strings.TrimPrefix(owner, "rule/"))
		}
	}
	ctx := w.ctx
	w.mu.Unlock()
	logf.FromContext(ctx).Info("Stopped watching trigger kind: no longer served", "kind", gk.String())
	for _, name := range rules {
		select {
		case w.gone <- event.GenericEvent{Object: &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: name}}}:
		case <-ctx.Done():
			return
		}
	}
}

// Recheck stops the informers of kinds the API server no longer serves (a
// CRD was deleted), and returns those kinds. Owners keep their claims, so a
// later Ensure reports the kind as not found, and picks it up again when
// the CRD comes back.
func (w *Watches) Recheck() []schema.GroupKind {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gone []schema.GroupKind
	for gk, inf := range w.informers {
		if err := w.served(inf.gvr); err != nil {
			inf.stop()
			delete(w.informers, gk)
			informersGauge.DeleteLabelValues(gk.String())
			gone = append(gone, gk)
			if w.ctx != nil {
				logf.FromContext(w.ctx).Info("Stopped watching trigger kind: no longer served", "kind", gk.String(), "reason", err.Error())
			}
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

func (w *Watches) enqueue(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(*cachedTrigger)
	if !ok || t.owner == "" {
		return
	}
	w.events <- event.GenericEvent{Object: &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Namespace: t.namespace, Name: t.owner}}}
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
			stripMetadata(u)
		} else {
			identityOnly(u)
		}
		return newCachedTrigger(u)
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

// stripMetadata drops managedFields and the last-applied annotation, the
// largest parts of most objects' metadata, which no expression reads.
func stripMetadata(u *unstructured.Unstructured) *unstructured.Unstructured {
	u.SetManagedFields(nil)
	if ann := u.GetAnnotations(); ann != nil {
		if _, ok := ann["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
			u.SetAnnotations(ann)
		}
	}
	return u
}
