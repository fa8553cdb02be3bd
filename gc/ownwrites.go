package gc

import (
	"sync"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/wrapup-dev/wrapup/gc/decision"
)

// ownWrites remembers, per AppWrapper, the last of wrapup's own writes
// whose watch event needs no decision, until that event comes: the record
// patch a reconcile made on its way to a delete (that reconcile goes on to
// the delete, or asks to be called again), and the delete itself. A
// successful delete cannot be undone: the AppWrapper is going, and a
// decision on it would only say so (decision.VerdictBeingDeleted), after a
// final check against the API server when the caches lag.
//
// A write is remembered from before it is sent: its watch event may come
// before its answer. Until the answer, the record patch's event is known
// by what it changes (from the resourceVersion the patch was sent on, to
// the record it writes), and the delete's by the deletion it shows.
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
	// with; "" while it has not answered, and once the AppWrapper is
	// deleted.
	rv string
	// from and rec are the resourceVersion a record patch not answered
	// yet was sent on, and the record it writes; rec is nil once its
	// event came (seen).
	from string
	rec  *decision.Record
	seen bool
	// deleting says that wrapup's delete of the AppWrapper uid is under
	// way; vanished, that the AppWrapper's deletion event came meanwhile.
	deleting, vanished bool
	// deleted says that wrapup's delete of the AppWrapper uid succeeded.
	deleted bool
}

// patching remembers the record patch of rec on the AppWrapper key, uid,
// at resourceVersion from, about to be sent by a reconcile that goes on to
// delete it or is called again.
func (o *ownWrites) patching(key types.NamespacedName, uid types.UID, from string, rec *decision.Record) {
	o.set(key, ownWrite{uid: uid, from: from, rec: rec})
}

// patched says the record patch of the AppWrapper key, uid, was answered
// with rv.
func (o *ownWrites) patched(key types.NamespacedName, uid types.UID, rv string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.m[key]
	switch {
	case !ok || w.uid != uid:
		// Its event came, and a later one: nothing left to wait for.
	case w.seen:
		delete(o.m, key)
	default:
		o.m[key] = ownWrite{uid: uid, rv: rv}
	}
}

// deleting remembers the delete of the AppWrapper key, uid, about to be
// sent.
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
	case !ok || w.uid != uid:
		// An event of another AppWrapper under the name came: this one
		// is gone.
	case w.vanished:
		// Its deletion's event came already: nothing left to wait for.
		delete(o.m, key)
	default:
		o.m[key] = ownWrite{uid: uid, deleted: true}
	}
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

// gone forgets the AppWrapper key: the cache no longer holds it, or
// wrapup's write failed.
func (o *ownWrites) gone(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, key)
}

// echo says whether the watch event that changed an AppWrapper from old to
// obj (nil when it is created, or deleted) only brings back wrapup's own
// write: its record patch (the version the patch answered, or, before the
// answer, the change from the version it was sent on to its record), or a
// deletion of an AppWrapper it deletes or deleted (and any change of one it
// deleted). An event for a change it did not make ends what is remembered,
// unless it is deleting what wrapup deleted or a write is still
// unanswered.
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
	case w.rec != nil:
		if old != nil && old.GetResourceVersion() == w.from && ownRecord(obj, w.rec) {
			w.rec, w.seen = nil, true
			o.m[key] = w
			return true
		}
		// An event from before the patch: the patch's is still to come.
		return false
	case w.rv != "" && cur.GetResourceVersion() == w.rv:
		// The version the record patch answered.
		if w.deleting {
			w.rv = ""
			o.m[key] = w
		} else {
			delete(o.m, key)
		}
		return true
	case w.seen || w.deleting:
		// The patch's event came, or the delete is unanswered: this one
		// is of another change.
		return false
	default:
		delete(o.m, key)
		return false
	}
}

// ownRecord says whether obj carries the record rec.
func ownRecord(obj client.Object, rec *decision.Record) bool {
	aw, ok := obj.(*awv1beta2.AppWrapper)
	return ok && decision.ReadRecord(aw).Same(rec)
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
