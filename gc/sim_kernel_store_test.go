package gc

// The simulation kernel's API server: a store of objects of one resource,
// with the semantics of k8s.io/apiserver for the calls wrapup makes (as of
// the module's k8s.io/apiserver v0.35.3):
//
//   - create (pkg/registry/generic/registry/store.go, Store.create;
//     pkg/registry/rest/meta.go, FillObjectMetaSystemFields;
//     pkg/storage/etcd3/store.go, store.Create): a new UID and creation
//     time; AlreadyExists when the name is taken; an object that carries a
//     resourceVersion is refused (storage.ErrResourceVersionSetOnCreate).
//   - update (store.go, Store.Update, in its GuaranteedUpdate): NotFound
//     when there is none (no create on update); Invalid without a
//     resourceVersion (a custom resource allows no unconditional update);
//     Conflict when it is not the current one (OptimisticLockErrorMsg). The
//     UID and creation time stay.
//   - a JSON merge patch (pkg/endpoints/handlers/patch.go,
//     jsonPatcher.applyJSPatch, MergePatchType): the patch applied to the
//     current object, then Store.Update with the result, so that a
//     metadata.resourceVersion the patch carries is a precondition
//     (Conflict when it is not the current one), and a patch without one
//     applies to whatever is current; a metadata.uid it carries that is
//     not the current one is refused (Invalid: the UID is immutable,
//     pkg/api/validation/objectmeta.go, ValidateObjectMetaUpdate).
//   - delete (store.go, Store.Delete; pkg/registry/rest/delete.go,
//     BeforeDelete): NotFound when there is none; Conflict when a
//     precondition does not hold, the UID's checked first, then the
//     resourceVersion's; a custom resource has no graceful deletion, so
//     one without finalizers goes at once, and one with finalizers is
//     marked (store.go, markAsDeleting: a deletionTimestamp,
//     deletionGracePeriodSeconds 0, the generation moved on) and stays
//     until they are removed. A delete of an object already marked changes
//     nothing, and succeeds.
//
// Every change gets the next resourceVersion of the world (a deletion
// too), and is shown to the world's watch (stored, removed): its caches,
// its controllers. Each write takes an admit hook: the world's oracle, shown
// the change after every check of the API server passed, before it lands.

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// simOptimisticLock is the API server's message for a write on an object
// that changed (store.go, OptimisticLockErrorMsg).
const simOptimisticLock = "the object has been modified; please apply your changes to the latest version and try again"

// simStore is the API server's objects of one resource.
type simStore[T client.Object] struct {
	k  *simKernel
	gr schema.GroupResource
	// uidPrefix starts the UIDs of the objects it creates.
	uidPrefix string
	newObj    func() T
	objs      map[types.NamespacedName]T
	// stored and removed, when set, are the world's watch: told of each
	// object stored (created or changed), and of each one removed, as it
	// was.
	stored, removed func(T)
}

func newSimStore[T client.Object](k *simKernel, gr schema.GroupResource, uidPrefix string, newObj func() T) *simStore[T] {
	return &simStore[T]{k: k, gr: gr, uidPrefix: uidPrefix, newObj: newObj, objs: map[types.NamespacedName]T{}}
}

// get is the object key, as stored (not a copy).
func (s *simStore[T]) get(key types.NamespacedName) (T, bool) {
	obj, ok := s.objs[key]
	return obj, ok
}

// put stores obj, as it is, under the next resourceVersion: a write of
// the world's own actors, which the API server lets through.
func (s *simStore[T]) put(obj T) {
	obj.SetResourceVersion(s.k.nextRV())
	s.objs[client.ObjectKeyFromObject(obj)] = obj
	if s.stored != nil {
		s.stored(obj)
	}
}

// remove removes the object key (its finalizers gone, or it never had
// any), if there is one.
func (s *simStore[T]) remove(key types.NamespacedName) {
	obj, ok := s.objs[key]
	if !ok {
		return
	}
	delete(s.objs, key)
	s.k.rv++
	if s.removed != nil {
		s.removed(obj)
	}
}

// create creates obj (a copy of it), as the API server does, and returns
// what it stored.
func (s *simStore[T]) create(obj T, admit func(next T)) (T, error) {
	key := client.ObjectKeyFromObject(obj)
	var none T
	if obj.GetResourceVersion() != "" {
		return none, apierrors.NewInternalError(errors.New("resourceVersion should not be set on objects to be created"))
	}
	if _, ok := s.objs[key]; ok {
		return none, apierrors.NewAlreadyExists(s.gr, key.Name)
	}
	next := obj.DeepCopyObject().(T)
	next.SetUID(s.k.newUID(s.uidPrefix))
	next.SetCreationTimestamp(metav1.NewTime(s.k.now))
	if admit != nil {
		admit(next)
	}
	s.put(next)
	return next, nil
}

// update replaces the stored object of obj's name with a copy of obj, as
// the API server does, and returns what it stored and what it replaced.
func (s *simStore[T]) update(obj T, admit func(old, next T)) (old, next T, err error) {
	key := client.ObjectKeyFromObject(obj)
	old, ok := s.objs[key]
	switch {
	case !ok:
		return old, next, apierrors.NewNotFound(s.gr, key.Name)
	case obj.GetResourceVersion() == "":
		return old, next, apierrors.NewInvalid(schema.GroupKind{Group: s.gr.Group, Kind: s.gr.Resource}, key.Name,
			field.ErrorList{field.Invalid(field.NewPath("metadata").Child("resourceVersion"), 0, "must be specified for an update")})
	case obj.GetResourceVersion() != old.GetResourceVersion():
		return old, next, apierrors.NewConflict(s.gr, key.Name, errors.New(simOptimisticLock))
	}
	next = obj.DeepCopyObject().(T)
	next.SetUID(old.GetUID())
	next.SetCreationTimestamp(old.GetCreationTimestamp())
	if admit != nil {
		admit(old, next)
	}
	s.put(next)
	return old, next, nil
}

// patchPrecondition is the resourceVersion a JSON merge patch carries, its
// precondition; "" when it carries none.
func patchPrecondition(data []byte) string {
	rv, _ := patchMeta(data)
	return rv
}

// patchMeta is the resourceVersion and the UID a JSON merge patch carries
// ("" for none).
func patchMeta(data []byte) (rv string, uid types.UID) {
	var p struct {
		Metadata struct {
			ResourceVersion string    `json:"resourceVersion"`
			UID             types.UID `json:"uid"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(data, &p)
	return p.Metadata.ResourceVersion, p.Metadata.UID
}

// patch applies the JSON merge patch data to the object key, as the API
// server does, and returns the object it applied it to (when there is
// one) and what it stored.
func (s *simStore[T]) patch(key types.NamespacedName, data []byte, admit func(cur, next T)) (cur, next T, err error) {
	cur, ok := s.objs[key]
	if !ok {
		return cur, next, apierrors.NewNotFound(s.gr, key.Name)
	}
	rv, uid := patchMeta(data)
	if rv != "" && rv != cur.GetResourceVersion() {
		return cur, next, apierrors.NewConflict(s.gr, key.Name, errors.New(simOptimisticLock))
	}
	if uid != "" && uid != cur.GetUID() {
		return cur, next, apierrors.NewInvalid(schema.GroupKind{Group: s.gr.Group, Kind: s.gr.Resource}, key.Name,
			field.ErrorList{field.Invalid(field.NewPath("metadata").Child("uid"), uid, "field is immutable")})
	}
	orig, err := json.Marshal(cur)
	if err != nil {
		return cur, next, err
	}
	merged, err := jsonpatch.MergePatch(orig, data)
	if err != nil {
		return cur, next, apierrors.NewBadRequest(err.Error())
	}
	next = s.newObj()
	if err := json.Unmarshal(merged, next); err != nil {
		return cur, next, apierrors.NewBadRequest(err.Error())
	}
	if admit != nil {
		admit(cur, next)
	}
	s.put(next)
	return cur, next, nil
}

// delete deletes the object key, as the API server does, with the
// preconditions pre (nil: none), and returns it as it was. admit is shown
// a deletion that starts (not one of an object already marked).
func (s *simStore[T]) delete(key types.NamespacedName, pre *metav1.Preconditions, admit func(cur T)) (T, error) {
	cur, ok := s.objs[key]
	if !ok {
		return cur, apierrors.NewNotFound(s.gr, key.Name)
	}
	if pre != nil && pre.UID != nil && *pre.UID != cur.GetUID() {
		return cur, apierrors.NewConflict(s.gr, key.Name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *pre.UID, cur.GetUID()))
	}
	if pre != nil && pre.ResourceVersion != nil && *pre.ResourceVersion != cur.GetResourceVersion() {
		return cur, apierrors.NewConflict(s.gr, key.Name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *pre.ResourceVersion, cur.GetResourceVersion()))
	}
	if cur.GetDeletionTimestamp() != nil {
		return cur, nil
	}
	if admit != nil {
		admit(cur)
	}
	if len(cur.GetFinalizers()) == 0 {
		s.remove(key)
		return cur, nil
	}
	next := cur.DeepCopyObject().(T)
	if next.GetGeneration() > 0 {
		next.SetGeneration(next.GetGeneration() + 1)
	}
	next.SetDeletionTimestamp(ptr.To(metav1.NewTime(s.k.now)))
	next.SetDeletionGracePeriodSeconds(ptr.To(int64(0)))
	s.put(next)
	return cur, nil
}

// TestSimStore pins the store's answers to what the API server answers:
// the preconditions that no history can break (wrapup deletes only what it
// read fresh in the same reconcile), and the rest.
func TestSimStore(t *testing.T) {
	k := newSimKernel(1)
	s := newAWStore(&k)
	var stored, removed []string
	s.stored = func(aw *awv1beta2.AppWrapper) { stored = append(stored, aw.Name+"@"+aw.ResourceVersion) }
	s.removed = func(aw *awv1beta2.AppWrapper) { removed = append(removed, aw.Name) }
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	s.put(&awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-a"}})
	rv := s.objs[key].ResourceVersion
	admitted := 0
	admit := func(cur, next *awv1beta2.AppWrapper) {
		admitted++
		if s.objs[key] != cur {
			t.Errorf("admit sees a change that has landed already")
		}
	}
	patch := func(body string) error {
		_, _, err := s.patch(key, []byte(body), admit)
		return err
	}

	if err := patch(`{"metadata":{"resourceVersion":"0","labels":{"x":"1"}}}`); !apierrors.IsConflict(err) {
		t.Errorf("a patch on a stale resourceVersion: %v, want a conflict", err)
	}
	if err := patch(`{"metadata":{"resourceVersion":"` + rv + `","labels":{"x":"1"}}}`); err != nil {
		t.Errorf("a patch on the current resourceVersion: %v", err)
	}
	if aw := s.objs[key]; aw.Labels["x"] != "1" || aw.ResourceVersion == rv || aw.UID != "uid-a" {
		t.Errorf("after the patch: labels %v, resourceVersion %s (was %s), UID %s", aw.Labels, aw.ResourceVersion, rv, aw.UID)
	}
	if err := patch(`{"metadata":{"labels":{"x":null}}}`); err != nil || s.objs[key].Labels["x"] != "" {
		t.Errorf("a patch without a precondition applies to what is current: %v, labels %v", err, s.objs[key].Labels)
	}
	if err := patch(`{"metadata":{"uid":"uid-other","labels":{"x":"2"}}}`); !apierrors.IsInvalid(err) {
		t.Errorf("a patch of another UID: %v, want Invalid", err)
	}
	if err := patch(`{"metadata":{"uid":"uid-a","labels":{"y":"1"}}}`); err != nil || s.objs[key].Labels["y"] != "1" {
		t.Errorf("a patch that names the UID: %v, labels %v", err, s.objs[key].Labels)
	}
	if _, _, err := s.patch(types.NamespacedName{Namespace: "ns", Name: "none"}, []byte(`{}`), admit); !apierrors.IsNotFound(err) {
		t.Errorf("a patch of nothing: %v, want NotFound", err)
	}
	if admitted != 3 {
		t.Errorf("admit saw %d patches, want the 3 that landed", admitted)
	}

	cur := s.objs[key]
	uid, stale := types.UID("uid-other"), "0"
	for _, pre := range []*metav1.Preconditions{{UID: &uid}, {ResourceVersion: &stale}, {UID: &cur.UID, ResourceVersion: &stale}} {
		if _, err := s.delete(key, pre, nil); !apierrors.IsConflict(err) {
			t.Errorf("a delete with the preconditions %+v: %v, want a conflict", pre, err)
		}
	}
	withFinalizer := s.objs[key].DeepCopy()
	withFinalizer.Finalizers = []string{"f"}
	s.put(withFinalizer)
	now := withFinalizer.ResourceVersion
	deletions := 0
	if _, err := s.delete(key, &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &now}, func(*awv1beta2.AppWrapper) { deletions++ }); err != nil {
		t.Errorf("a delete whose preconditions hold: %v", err)
	}
	marked := s.objs[key]
	if marked == nil || marked.DeletionTimestamp == nil || marked.DeletionGracePeriodSeconds == nil || *marked.DeletionGracePeriodSeconds != 0 {
		t.Fatalf("an AppWrapper with a finalizer, deleted: %+v, want it marked and kept", marked)
	}
	again := marked.ResourceVersion
	if _, err := s.delete(key, &metav1.Preconditions{ResourceVersion: &again}, func(*awv1beta2.AppWrapper) { deletions++ }); err != nil || s.objs[key] != marked || deletions != 1 {
		t.Errorf("a delete of an AppWrapper marked already: %v, changed %v, %d deletions started", err, s.objs[key] != marked, deletions)
	}
	s.remove(key)
	if _, ok := s.get(key); ok || len(removed) != 1 {
		t.Errorf("removed: still there %v, removals seen %v", ok, removed)
	}
	if _, err := s.delete(key, nil, nil); !apierrors.IsNotFound(err) {
		t.Errorf("a delete of nothing: %v, want NotFound", err)
	}
	s.put(&awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-b"}})
	if _, err := s.delete(key, nil, nil); err != nil || len(removed) != 2 {
		t.Errorf("a delete without finalizers: %v, removals seen %v", err, removed)
	}
	if len(stored) != 7 {
		t.Errorf("the watch saw %d stores (%v), want 7: a put, 3 patches, a put, a deletion marked, a put", len(stored), stored)
	}

	crs := newSimStore(&k, simCompletionRecords, "crec", func() *wrapupv1alpha1.CompletionRecord { return &wrapupv1alpha1.CompletionRecord{} })
	cr := &wrapupv1alpha1.CompletionRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}
	created, err := crs.create(cr, nil)
	if err != nil || created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
		t.Fatalf("a create: %v, %+v", err, created)
	}
	if _, err := crs.create(cr, nil); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a create of a name taken: %v, want AlreadyExists", err)
	}
	withRV := created.DeepCopy()
	withRV.Name = "r-new"
	if _, err := crs.create(withRV, nil); !apierrors.IsInternalError(err) {
		t.Errorf("a create with a resourceVersion: %v, want the storage's refusal", err)
	}
	if _, _, err := crs.update(cr, nil); !apierrors.IsInvalid(err) {
		t.Errorf("an update without a resourceVersion: %v, want Invalid", err)
	}
	stale2 := created.DeepCopy()
	stale2.ResourceVersion = "0"
	if _, _, err := crs.update(stale2, nil); !apierrors.IsConflict(err) {
		t.Errorf("an update on a stale resourceVersion: %v, want a conflict", err)
	}
	next := created.DeepCopy()
	next.UID, next.Rule = "", "r2"
	if _, got, err := crs.update(next, nil); err != nil || got.UID != created.UID || got.Rule != "r2" || got.ResourceVersion == created.ResourceVersion {
		t.Errorf("an update: %v, %+v", err, got)
	}
}
