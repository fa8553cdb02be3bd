package gc

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ownWrites remembers, per AppWrapper, the last of wrapup's own writes
// whose watch event needs no decision, until that event comes: the record
// patch a reconcile made on its way to a delete (that reconcile goes on to
// the delete, or asks to be called again), and the delete itself. A
// successful delete cannot be undone: the AppWrapper is going, and a
// decision on it would only say so (decision.VerdictBeingDeleted), after a
// final check against the API server when the caches lag.
//
// The AppWrapper controller's watch drops those events (ownEcho); a
// reconcile for any other reason (a trigger's event) finds an AppWrapper
// wrapup deleted gone (cacheView.AppWrapper). An entry lives from the write
// to the AppWrapper's next event, its deletion's at the latest.
type ownWrites struct {
	mu sync.Mutex
	m  map[types.NamespacedName]ownWrite
}

type ownWrite struct {
	uid types.UID
	// rv is the resourceVersion the API server answered the record patch
	// with; "" once the AppWrapper is deleted.
	rv string
	// deleted says that wrapup's delete of the AppWrapper uid succeeded.
	deleted bool
}

// patched remembers the record patch of the AppWrapper key, whose answer
// carried rv, made by a reconcile that goes on to delete it or is called
// again.
func (o *ownWrites) patched(key types.NamespacedName, uid types.UID, rv string) {
	o.set(key, ownWrite{uid: uid, rv: rv})
}

// deleted remembers that wrapup deleted the AppWrapper key, uid.
func (o *ownWrites) deleted(key types.NamespacedName, uid types.UID) {
	o.set(key, ownWrite{uid: uid, deleted: true})
}

func (o *ownWrites) set(key types.NamespacedName, w ownWrite) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[types.NamespacedName]ownWrite{}
	}
	o.m[key] = w
}

// isDeleted says whether wrapup deleted the AppWrapper key, uid.
func (o *ownWrites) isDeleted(key types.NamespacedName, uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.m[key]
	return ok && w.deleted && w.uid == uid
}

// gone forgets the AppWrapper key, which the cache no longer holds.
func (o *ownWrites) gone(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, key)
}

// echo says whether the watch event that changed an AppWrapper from old to
// obj (nil when it is created, or deleted) only brings back wrapup's own
// write: the version its record patch answered, or any change of an
// AppWrapper it deleted. An event for a change it did not make ends what is
// remembered, unless it is deleting what wrapup deleted.
func (o *ownWrites) echo(old, obj client.Object) bool {
	cur := obj
	if cur == nil {
		cur = old
	}
	key := client.ObjectKeyFromObject(cur)
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.m[key]
	if !ok {
		return false
	}
	switch {
	case w.uid != cur.GetUID():
		// Another AppWrapper under the same name.
		delete(o.m, key)
		return false
	case obj == nil:
		delete(o.m, key)
		return w.deleted
	case w.deleted:
		return true
	default:
		delete(o.m, key)
		return cur.GetResourceVersion() == w.rv
	}
}

// ownEcho is the predicate of the AppWrapper watch that drops the echoes
// of wrapup's own writes (ownWrites.echo).
func ownEcho(o *ownWrites) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return !o.echo(nil, e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return !o.echo(e.ObjectOld, e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return !o.echo(e.Object, nil) },
		GenericFunc: func(event.GenericEvent) bool { return true },
	}
}
