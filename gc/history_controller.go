package gc

import (
	"context"
	"fmt"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// historyReconciler keeps CompletionRecords as long as their retention
// says: each is deleted ttlSecondsAfterFinished after its run finished
// (a requeue at that instant, never a sweep), and past limitPerNamespace
// records of one rule in a namespace, the oldest go first (looked at
// whenever a record is written).
type historyReconciler struct {
	// Client reads from the manager's cache and deletes.
	Client client.Client
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
}

// SetupWithManager registers the reconciler.
func (r *historyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("wrapup-history").
		For(&wrapupv1alpha1.CompletionRecord{}).
		Complete(r)
}

// Reconcile applies the retention of one CompletionRecord, and the count
// limit of its rule in its namespace.
func (r *historyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cr := &wrapupv1alpha1.CompletionRecord{}
	if err := r.Client.Get(ctx, req.NamespacedName, cr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	expires := cr.FinishedAt.Add(time.Duration(cr.Retention.TTLSecondsAfterFinished) * time.Second)
	if !now.Before(expires) {
		return ctrl.Result{}, r.expire(ctx, cr, "TTL")
	}

	var list wrapupv1alpha1.CompletionRecordList
	// Read-only, from the cache: no copy of every record on every event.
	if err := r.Client.List(ctx, &list, client.InNamespace(cr.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing CompletionRecords: %w", err)
	}
	var same []*wrapupv1alpha1.CompletionRecord
	for i := range list.Items {
		if o := &list.Items[i]; o.Rule == cr.Rule && o.DeletionTimestamp.IsZero() {
			same = append(same, o)
		}
	}
	// Newest first; the newest record's limit is the rule's.
	sort.Slice(same, func(i, j int) bool { return newerRecord(same[i], same[j]) })
	if len(same) > 0 {
		if limit := int(same[0].Retention.LimitPerNamespace); limit > 0 && len(same) > limit {
			for _, o := range same[limit:] {
				if err := r.expire(ctx, o.DeepCopy(), "Limit"); err != nil {
					return ctrl.Result{}, err
				}
			}
		}
	}
	return ctrl.Result{RequeueAfter: expires.Sub(now)}, nil
}

// newerRecord says whether a comes before b in a rule's count limit: the
// later finish first, ties by name.
func newerRecord(a, b *wrapupv1alpha1.CompletionRecord) bool {
	if !a.FinishedAt.Equal(&b.FinishedAt) {
		return b.FinishedAt.Before(&a.FinishedAt)
	}
	return a.Name < b.Name
}

// expire deletes cr, as it was read (a record replaced since is kept).
func (r *historyReconciler) expire(ctx context.Context, cr *wrapupv1alpha1.CompletionRecord, reason string) error {
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
