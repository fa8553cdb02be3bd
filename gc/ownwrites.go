package gc

import (
	"cmp"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ownWrites remembers, per AppWrapper, wrapup's delete of it, whose watch
// events need no decision: a successful delete cannot be undone, and a
// decision would only say the AppWrapper is going
// (decision.VerdictBeingDeleted), after a final check against the API
// server when the caches lag. The delete is remembered from before it is
// sent, as its watch event may come before its answer. The AppWrapper
// controller's watch drops those events (ownEcho); a reconcile for another
// reason (a trigger's event) finds an AppWrapper wrapup deleted gone
// (cacheView.AppWrapper). An entry lives from the delete to the
// AppWrapper's deletion event, or until the delete failed.
type ownWrites struct {
	mu sync.Mutex
	m  map[types.NamespacedName]ownWrite
}

// ownWrite is what is remembered of the AppWrapper uid: wrapup's delete of
// it is under way (deleting) or succeeded (deleted); its deletion event
// came while the delete was under way (vanished).
type ownWrite struct {
	uid                         types.UID
	deleting, vanished, deleted bool
}

// deleting remembers the delete of the AppWrapper key, uid, about to be sent.
func (o *ownWrites) deleting(key types.NamespacedName, uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.m[key]
	if w.uid != uid {
		w = ownWrite{uid: uid}
	}
	w.deleting = true
	if o.m == nil {
		o.m = map[types.NamespacedName]ownWrite{}
	}
	o.m[key] = w
}

// deleted remembers that wrapup deleted the AppWrapper key, uid.
func (o *ownWrites) deleted(key types.NamespacedName, uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch w, ok := o.m[key]; {
	case !ok || w.uid != uid: // an event of another AppWrapper under the name ended the entry
	case w.vanished: // its deletion's event came already: nothing left to wait for
		delete(o.m, key)
	default:
		o.m[key] = ownWrite{uid: uid, deleted: true}
	}
}

// isDeleted says whether wrapup deleted the AppWrapper key, uid.
func (o *ownWrites) isDeleted(key types.NamespacedName, uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.m[key]
	return ok && w.deleted && w.uid == uid
}

// gone forgets the AppWrapper key: the cache no longer holds it, or
// wrapup's write failed.
func (o *ownWrites) gone(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, key)
}

// echo says whether the watch event that changed an AppWrapper from old to
// obj (nil when it is created, or deleted) only brings back wrapup's own
// delete: the deletion of an AppWrapper it deletes or deleted (and any
// change of one it deleted). Any other event of it ends what is
// remembered, unless the delete is still unanswered.
func (o *ownWrites) echo(old, obj client.Object) bool {
	cur := cmp.Or(obj, old)
	key := client.ObjectKeyFromObject(cur)
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.m[key]
	if !ok {
		return false
	}
	switch {
	case w.uid != cur.GetUID(): // another AppWrapper under the same name
		delete(o.m, key)
		return false
	case obj == nil && w.deleting:
		// Deleted while wrapup's delete is unanswered: whoever deleted
		// it, it is gone, and needs no decision.
		w.vanished = true
		o.m[key] = w
		return true
	case obj == nil:
		delete(o.m, key)
		return w.deleted
	case w.deleted, w.deleting && obj.GetDeletionTimestamp() != nil:
		return true
	case w.deleting: // another change while the delete is unanswered
		return false
	default:
		delete(o.m, key)
		return false
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
