package gc

// The simulation kernel, under both simulated worlds (simWorld, sim_test.go;
// mkWorld, sim_multikueue_test.go): the seeded generator, the clock, the
// trace and the first violation; the API server's counters and its faults;
// the world's timed events and the loop that runs them; wrapup's work
// queue. The API server's objects are in sim_kernel_store_test.go, what
// wrapup reads and writes through in sim_kernel_client_test.go. A world
// keeps only its model (what its actors do) and its oracle (what must hold
// of wrapup's acts).

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
)

// simKernel is what both simulated worlds run on.
type simKernel struct {
	rng  *rand.Rand
	now  time.Time
	rv   int64
	seq  int
	uids int

	// faults is the probability that an API call fails; loseAnswers: a
	// write that fails may have been applied, its answer lost (else every
	// fault refuses the call).
	faults      float64
	loseAnswers bool

	// agenda is what is to happen, and when (later).
	agenda []simEvent

	// emitted counts the Events wrapup emitted, by namespace/name/reason;
	// counted, what it added to the rules' counters.
	emitted map[string]int
	counted int

	trace     []string
	violation string
}

func newSimKernel(seed int64) simKernel {
	return simKernel{rng: rand.New(rand.NewSource(seed)), now: simStart, emitted: map[string]int{}}
}

// logf adds a line to the trace, at the world's time.
func (k *simKernel) logf(format string, args ...any) {
	k.trace = append(k.trace, fmt.Sprintf("%8.1fs ", k.now.Sub(simStart).Seconds())+fmt.Sprintf(format, args...))
}

// fail records the first violation, which ends the history.
func (k *simKernel) fail(format string, args ...any) {
	if k.violation == "" {
		k.violation = fmt.Sprintf(format, args...)
		k.logf("VIOLATION: %s", k.violation)
	}
}

// newUID is a UID the API server would give, unique in the world.
func (k *simKernel) newUID(prefix string) types.UID {
	k.uids++
	return types.UID(fmt.Sprintf("%s-%d", prefix, k.uids))
}

// nextRV is the API server's next resourceVersion.
func (k *simKernel) nextRV() string {
	k.rv++
	return strconv.FormatInt(k.rv, 10)
}

// --- faults ---

// failNow says whether an API call fails now, at the world's rate.
func (k *simKernel) failNow() bool {
	return k.faults > 0 && k.rng.Float64() < k.faults
}

// fault says how an API write fails now: "" (it does not), "refused" (not
// applied) or, in a world that loses answers, "lost" (applied, but the
// answer is lost).
func (k *simKernel) fault() string {
	if !k.failNow() {
		return ""
	}
	if !k.loseAnswers || k.rng.Intn(2) == 0 {
		return "refused"
	}
	return "lost"
}

// --- the timed events, and the loop ---

// simEvent is something that is to happen at a time.
type simEvent struct {
	at  time.Time
	seq int
	do  func()
}

// later has do happen after d: after what is due before, and after what
// was scheduled earlier for the same time.
func (k *simKernel) later(d time.Duration, do func()) {
	k.seq++
	k.agenda = append(k.agenda, simEvent{at: k.now.Add(d), seq: k.seq, do: do})
}

// nextEvent is the earliest event, and what doing it means (nil when none
// is scheduled): it leaves the agenda, then happens.
func (k *simKernel) nextEvent() (time.Time, func()) {
	first := -1
	for i, e := range k.agenda {
		if first < 0 || e.at.Before(k.agenda[first].at) || e.at.Equal(k.agenda[first].at) && e.seq < k.agenda[first].seq {
			first = i
		}
	}
	if first < 0 {
		return time.Time{}, nil
	}
	e := k.agenda[first]
	return e.at, func() {
		for i := range k.agenda {
			if k.agenda[i].seq == e.seq {
				k.agenda = append(k.agenda[:i], k.agenda[i+1:]...)
				break
			}
		}
		e.do()
	}
}

// advance moves the clock to t, doing in the order of time whatever falls
// due until then: next is the world's earliest thing due and what doing it
// means (nil when nothing is); tick is told of each thing about to be done,
// and says false to stop a world that does not settle (having failed it).
// A violation stops it too.
func (k *simKernel) advance(t time.Time, next func() (time.Time, func()), tick func() bool) {
	for k.violation == "" {
		if !tick() {
			return
		}
		at, do := next()
		if do == nil || at.After(t) {
			break
		}
		if at.After(k.now) {
			k.now = at
		}
		do()
	}
	if t.After(k.now) {
		k.now = t
	}
}

// --- wrapup's work queue ---

// simQueue is wrapup's work queue, as controller-runtime's (client-go's
// delaying, rate-limiting queue): an event adds its AppWrapper at once, at
// most once however many come before it is reconciled; a reconcile that
// asks to be called again after a while (RequeueAfter), or that fails or
// asks to be requeued (a backoff of 5 ms that doubles with each failure in
// a row, up to 5 ms<<13), adds it after that delay, which waits apart:
// of the delayed adds of one AppWrapper only the earliest is kept, and a
// reconcile before it is due leaves it due (client-go
// util/workqueue/delaying_queue.go, waitingLoop: an entry waiting is
// replaced only by an earlier one, and is added when ready whatever
// was processed meanwhile). A reconcile that succeeds forgets the
// failures.
type simQueue struct {
	now func() time.Time
	// ready are the AppWrappers added, and when; waiting, those added
	// after a delay, and when that ends.
	ready, waiting map[types.NamespacedName]time.Time
	failures       map[types.NamespacedName]int
}

func newSimQueue(now func() time.Time) *simQueue {
	return &simQueue{now: now, ready: map[types.NamespacedName]time.Time{}, waiting: map[types.NamespacedName]time.Time{},
		failures: map[types.NamespacedName]int{}}
}

// add queues key at at: at once when at is now (or past), else after the
// delay, unless it waits already for an earlier time.
func (q *simQueue) add(key types.NamespacedName, at time.Time) {
	m := q.ready
	if at.After(q.now()) {
		m = q.waiting
	}
	if cur, ok := m[key]; !ok || at.Before(cur) {
		m[key] = at
	}
}

// next is the entry due first (of those due together, the first by key).
func (q *simQueue) next() (types.NamespacedName, time.Time, bool) {
	var best types.NamespacedName
	var at time.Time
	found := false
	for _, m := range []map[types.NamespacedName]time.Time{q.ready, q.waiting} {
		for k, t := range m {
			if !found || t.Before(at) || t.Equal(at) && k.String() < best.String() {
				best, at, found = k, t, true
			}
		}
	}
	return best, at, found
}

// take takes key off the queue, to reconcile it: it is added no more,
// and its delayed add is done if it was due.
func (q *simQueue) take(key types.NamespacedName) {
	delete(q.ready, key)
	if t, ok := q.waiting[key]; ok && !t.After(q.now()) {
		delete(q.waiting, key)
	}
}

// reconcile runs r on key at the kernel's time, which clock shows it, and
// queues key again as the result asks. It returns, when it failed, the
// backoff, and the reconcile's error.
func (q *simQueue) reconcile(k *simKernel, r *appWrapperReconciler, clock *clocktesting.FakeClock, key types.NamespacedName) (time.Duration, error) {
	clock.SetTime(k.now)
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil || res.Requeue {
		n := q.failures[key]
		q.failures[key] = n + 1
		backoff := 5 * time.Millisecond << min(n, 13)
		q.add(key, k.now.Add(backoff))
		return backoff, err
	}
	delete(q.failures, key)
	if res.RequeueAfter > 0 {
		q.add(key, k.now.Add(res.RequeueAfter))
	}
	return 0, nil
}
