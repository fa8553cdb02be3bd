package gc

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// historyReconciler keeps CompletionRecords as long as their retention
// says, and never deletes a record while its AppWrapper exists: the record
// is the run's memory. Once the AppWrapper is gone, a record is deleted
// ttlSecondsAfterFinished after the later of its run's finish and the
// AppWrapper's end (a requeue at that instant, never a sweep), and past
// limitPerNamespace records of one rule in a namespace, the oldest of
// those whose AppWrapper is gone go first (looked at once a record is
// written, at most once per limitDelay for one rule in one namespace,
// however many records it writes there meanwhile). A record whose rule
// keeps no history has an ownerReference to its AppWrapper instead: the
// garbage collector deletes it with the AppWrapper.
type historyReconciler struct {
	// Client reads from the manager's cache and deletes.
	Client client.Client
	// Clock defaults to the real clock.
	Clock clock.PassiveClock

	// gone is when this process first saw the AppWrapper of a record gone,
	// by the record's name and UID, until the record goes: lost on a
	// restart, which only keeps records longer (the count limit bounds
	// them).
	mu   sync.Mutex
	gone map[types.NamespacedName]seenGone
}

type seenGone struct {
	uid types.UID
	at  time.Time
}

const (
	// limitDelay is how long after a record is written the count limit of
	// its rule in its namespace is applied: the records written meanwhile
	// share one look.
	limitDelay = time.Second
	// limitPrefix starts the name of a request for the count limit of a
	// rule in a namespace: no record's name has a colon.
	limitPrefix = "limit:"
)

// SetupWithManager registers the reconciler.
func (r *historyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("wrapup-history").
		For(&wrapupv1alpha1.CompletionRecord{}).
		Watches(&wrapupv1alpha1.CompletionRecord{}, limitRequests).
		Watches(&awv1beta2.AppWrapper{}, handler.Funcs{DeleteFunc: recordOfDeleted}).
		Complete(r)
}

// limitRequests asks, limitDelay after a record is created or replaced,
// for the count limit of its rule in its namespace.
var limitRequests = handler.Funcs{
	CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		askLimit(e.Object, q)
	},
	UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		askLimit(e.ObjectNew, q)
	},
}

// askLimit asks for the count limit of the rule of the record obj.
func askLimit(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if rec, ok := obj.(*wrapupv1alpha1.CompletionRecord); ok && rec.Rule != "" {
		q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rec.Namespace, Name: limitPrefix + rec.Rule}}, limitDelay)
	}
}

// recordOfDeleted asks, when an AppWrapper is deleted, for its record: its
// retention starts.
func recordOfDeleted(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: RecordName(e.Object.GetName(), string(e.Object.GetUID()))}})
}

// Reconcile applies the retention of one CompletionRecord, or the count
// limit of a rule in a namespace.
func (r *historyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if rule, ok := strings.CutPrefix(req.Name, limitPrefix); ok {
		return ctrl.Result{}, r.limit(ctx, req.Namespace, rule)
	}
	cr := &wrapupv1alpha1.CompletionRecord{}
	if err := r.Client.Get(ctx, req.NamespacedName, cr); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetGone(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cr.Retention.TTLSecondsAfterFinished <= 0 && len(cr.OwnerReferences) > 0 {
		// Gone with its AppWrapper (the garbage collector).
		return ctrl.Result{}, nil
	}
	gone, err := r.goneAt(ctx, cr)
	if err != nil || gone.IsZero() {
		// Its AppWrapper exists: its deletion brings the record back.
		return ctrl.Result{}, err
	}
	now := r.Clock.Now()
	from := cr.FinishedAt.Time
	if gone.After(from) {
		from = gone
	}
	expires := from.Add(time.Duration(cr.Retention.TTLSecondsAfterFinished) * time.Second)
	if !now.Before(expires) {
		return ctrl.Result{}, r.expire(ctx, cr, "TTL")
	}
	return ctrl.Result{RequeueAfter: expires.Sub(now)}, nil
}

// goneAt is when cr's AppWrapper ended, at the earliest: zero while it
// exists; else when this process first saw it gone (its deletion's
// event, or a look after a restart), which is never before it ended. (The
// record's deleteAfter is not: a deletion can come long after it was due.)
func (r *historyReconciler) goneAt(ctx context.Context, cr *wrapupv1alpha1.CompletionRecord) (time.Time, error) {
	aw := &awv1beta2.AppWrapper{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: cr.Namespace, Name: cr.AppWrapper.Name}, aw)
	key := client.ObjectKeyFromObject(cr)
	switch {
	case err == nil && aw.UID == cr.AppWrapper.UID:
		// (A time seen while the cache lagged behind the AppWrapper is
		// dropped.)
		r.forgetGone(key)
		return time.Time{}, nil
	case err != nil && !apierrors.IsNotFound(err):
		return time.Time{}, fmt.Errorf("reading the AppWrapper of CompletionRecord %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone == nil {
		r.gone = map[types.NamespacedName]seenGone{}
	}
	g, ok := r.gone[key]
	if !ok || g.uid != cr.UID {
		g = seenGone{uid: cr.UID, at: r.Clock.Now()}
		r.gone[key] = g
	}
	return g.at, nil
}

func (r *historyReconciler) forgetGone(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.gone, key)
}

// limit deletes the oldest records of rule in namespace past the rule's
// count limit: the limitPerNamespace of its newest record there.
func (r *historyReconciler) limit(ctx context.Context, namespace, rule string) error {
	var list wrapupv1alpha1.CompletionRecordList
	// Read-only, from the cache: no copy of every record.
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing CompletionRecords: %w", err)
	}
	var same []*wrapupv1alpha1.CompletionRecord
	for i := range list.Items {
		if o := &list.Items[i]; o.Rule == rule && o.DeletionTimestamp.IsZero() {
			same = append(same, o)
		}
	}
	// Newest first (the later finish, ties by name); the newest record's
	// limit is the rule's.
	slices.SortFunc(same, func(a, b *wrapupv1alpha1.CompletionRecord) int {
		return cmp.Or(b.FinishedAt.Compare(a.FinishedAt.Time), strings.Compare(a.Name, b.Name))
	})
	if len(same) == 0 || same[0].Retention.LimitPerNamespace <= 0 {
		return nil
	}
	for _, o := range same[min(int(same[0].Retention.LimitPerNamespace), len(same)):] {
		if gone, err := r.goneAt(ctx, o); err != nil || gone.IsZero() {
			// Its AppWrapper exists: kept.
			continue
		}
		if err := r.expire(ctx, o.DeepCopy(), "Limit"); err != nil {
			return err
		}
	}
	return nil
}

// expire deletes cr, as it was read (a record replaced since is kept).
func (r *historyReconciler) expire(ctx context.Context, cr *wrapupv1alpha1.CompletionRecord, reason string) error {
	r.forgetGone(client.ObjectKeyFromObject(cr))
	rv := cr.ResourceVersion
	err := r.Client.Delete(ctx, cr, client.Preconditions{UID: &cr.UID, ResourceVersion: &rv})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	case err != nil:
		return fmt.Errorf("deleting CompletionRecord %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	historyExpiredTotal.WithLabelValues(cr.Rule, reason).Inc()
	logf.FromContext(ctx).V(1).Info("CompletionRecord expired", "record", client.ObjectKeyFromObject(cr), "reason", reason)
	return nil
}

// RecordName is decision.RecordName, the name of an AppWrapper's
// CompletionRecord.
func RecordName(name, uid string) string { return decision.RecordName(name, uid) }
