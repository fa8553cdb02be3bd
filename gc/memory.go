package gc

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// remember keeps in mem what the decision d on the caches says to
// remember, and does what it allows before any write: the rule assigned,
// the watches claimed and released, the Warnings said once, the
// evaluation metrics. It returns ctx with the deciding rule in its logger.
func (r *appWrapperReconciler) remember(ctx context.Context, in decision.Input, d decision.Decision, mem *awMemory) context.Context {
	aw := in.AppWrapper
	key := client.ObjectKeyFromObject(aw)
	r.Assign.Set(key, d.Assigned)
	mem.update(aw.UID, d)
	r.Triggers.Keep(key, d.Claims)
	if d.Winner != "" {
		ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("rule", d.Winner))
	}
	if d.Worker == nil || d.Worker.Cluster != mem.worker {
		// Not dispatched there (any more): its triggers there are not watched for it.
		r.releaseWorker(key, mem)
	}
	// The Warnings d says now (decision.Decide leaves out those said after
	// the previous decision).
	r.emit(aw, d.Events, decision.EventNow)
	if d.Winner != "" && hasReason(mem.warned, wrapupv1alpha1.ReasonTriggerKindNotWatched) != hasReason(d.Warned, wrapupv1alpha1.ReasonTriggerKindNotWatched) {
		// The rule reports the AppWrappers whose trigger kind it cannot watch.
		r.Assign.Touch(d.Winner)
	}
	mem.warned = d.Warned
	mem.unreachable = d.WorkerFailures
	if d.Verdict == decision.VerdictWorkerUnreachable {
		return ctx
	}
	for _, e := range d.Evaluations() {
		if !e.FromAppWrapperPhase {
			evaluationSeconds.Observe(e.Took.Seconds())
			if e.Error != "" {
				evaluationErrorsTotal.WithLabelValues(d.Winner).Inc()
			}
		}
	}
	return ctx
}

// hasReason says whether keys (reason and message) hold one of reason.
func hasReason(keys []string, reason string) bool {
	return slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, reason+"\x00") })
}

// forget drops what is held for the AppWrapper key, which is gone or
// going: its watch claims, here and on its worker, its rule assignment and
// its memory entry.
func (r *appWrapperReconciler) forget(key types.NamespacedName, mem *awMemory) {
	r.Triggers.Keep(key, nil)
	r.releaseWorker(key, mem)
	r.Assign.Set(key, "")
	*mem = awMemory{}
}

// memory is what the controller remembers of each AppWrapper between
// reconciles, one entry per AppWrapper, dropped when it goes: lost on a
// restart, which only delays (a failure's grace starts again; a Warning is
// said once more). A reconcile takes its AppWrapper's entry once, changes
// it through the pointer, and settles it once when it returns; the
// controller never reconciles one AppWrapper in two workers at a time.
type memory struct {
	mu sync.Mutex
	m  map[types.NamespacedName]awMemory
}

type awMemory struct {
	uid types.UID
	// failure is when the trigger was first seen failed.
	failure decision.FailureSeen
	// holdStart is when its failure hold was first seen.
	holdStart time.Time
	// warned are the Warnings last emitted, as reason and message.
	warned []string
	// worker is the worker cluster MultiKueue dispatched it to whose
	// watches it claims kinds on.
	worker string
	// unreachable counts the decisions in a row that found its worker
	// cluster unreadable: the wait before the next grows with it.
	unreachable int
}

// empty is true when e remembers nothing but the AppWrapper's UID, which
// update compares only to reset what else is remembered.
func (e *awMemory) empty() bool {
	return e.failure == (decision.FailureSeen{}) && e.holdStart.IsZero() && len(e.warned) == 0 &&
		e.worker == "" && e.unreachable == 0
}

// take returns the entry of the AppWrapper key for one reconcile to
// change: a copy, which settle keeps.
func (m *memory) take(key types.NamespacedName) *awMemory {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.m[key]
	return &e
}

// settle keeps e as the entry of key; an entry that holds nothing but the
// UID is dropped instead, as take's zero value means the same: most
// AppWrappers (running, their trigger not done) need no entry, and an
// entry weighs as much as a cached AppWrapper's spec.
func (m *memory) settle(key types.NamespacedName, e *awMemory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.empty() {
		delete(m.m, key)
		return
	}
	if m.m == nil {
		m.m = map[types.NamespacedName]awMemory{}
	}
	m.m[key] = *e
}

// scope leaves out of in what e remembers of another AppWrapper than uid
// (one deleted, and created again under the same name): its failure and
// hold clocks, its worker's failures and its Warnings. A hold started for
// the AppWrapper deleted must never shorten the new one's.
func (e *awMemory) scope(uid types.UID, in *decision.Input) {
	if e.uid != uid {
		in.FailureSeen, in.HoldStart, in.WorkerFailures, in.Warned = decision.FailureSeen{}, time.Time{}, 0, nil
	}
}

// update keeps what d, decided on the AppWrapper uid, says to remember.
func (e *awMemory) update(uid types.UID, d decision.Decision) {
	if e.uid != uid {
		// Watches are claimed by name: an AppWrapper created again under
		// the same name takes its claims over.
		*e = awMemory{uid: uid, worker: e.worker}
	}
	e.failure = decision.FailureSeen{}
	if d.FailureSeen != nil {
		e.failure = *d.FailureSeen
	}
	e.holdStart = d.HoldStart
}

// Len is how many AppWrappers the controller remembers something of.
func (m *memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}

// releaseWorker drops the claims of the AppWrapper key on its worker.
func (r *appWrapperReconciler) releaseWorker(key types.NamespacedName, mem *awMemory) {
	if mem.worker != "" && r.Clusters != nil {
		r.Clusters.release(mem.worker, key)
	}
	mem.worker = ""
}
