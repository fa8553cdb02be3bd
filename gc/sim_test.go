package gc

// A deterministic simulation of wrapup in a world of AppWrappers (the
// AppWrapper controller's phases and retries, Kueue suspending and
// re-admitting, triggers finishing, rules created, edited, broken and
// deleted, namespaces relabelled, caches lagging the API server, API errors
// and lost answers, wrapup restarting). An AppWrapper has one trigger
// component or several (of one kind, or annotated ones of several kinds),
// each finishing on its own, and rules take them under the trigger policy
// One, All or Any. Random histories, seeded and reproducible; after every
// write wrapup makes, and once the world stops changing, the invariants are
// checked against the world's truth, by an oracle written apart from the
// decision code (sim_oracle_test.go), which judges each CompletionRecord
// write when it is made and never takes a record's word:
//
//   - never a wrong delete: only of an AppWrapper whose winning rule
//     deletes after an outcome the world showed when it was recorded (the
//     rule's policy over all its candidates, final), which still stands,
//     and no sooner than its TTL, the changes of the action in force since
//     (counted from when each was made) and its own hold allow;
//   - never a lost completion;
//   - one CompletionRecord per AppWrapper, a new outcome only by a create
//     or in place of a cleared or failed one, no record cleared or
//     restamped without cause, each outcome counted once, at its write;
//   - the mirror on the AppWrapper is the record just written, and
//     nothing else; the tenants' writes of wrapup.dev/* metadata (forged
//     records of every shape) change nothing, and every decision, decided
//     again on that metadata rewritten at random, is the same;
//   - view.Explain, on the same observations, gives the controller's verdict;
//   - no polling, and what the controller remembers (and watches) is
//     bounded by the AppWrappers there are.
//
// go test ./gc -run TestSimulation -sim.histories=100000 runs more; a
// failing history prints its seed and the shortest prefix of it that
// still fails, with its trace; -sim.seed=N replays one.

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

var (
	simHistories = flag.Int("sim.histories", 2000, "how many random histories TestSimulation runs")
	simSteps     = flag.Int("sim.steps", 150, "how many random events a history has")
	simSeed      = flag.Int64("sim.seed", 0, "run only the history of this seed, and print its trace")
	simFirstSeed = flag.Int64("sim.first", 1, "the seed of the first history")
	simHarsh     = flag.Bool("sim.harsh", false, "TestSimulation and -sim.seed run harsh histories: rules renamed, deleted, broken and fixed under pending records, and heavy API faults")
	simHarshN    = flag.Int("sim.harsh-histories", 500, "how many harsh histories TestSimulationHarsh runs")
)

// simWrapup is wrapup in the simulated world: its AppWrapper reconciler and
// its work queue (the kernel's).
type simWrapup struct {
	w *simWorld
	// deleted are the AppWrappers this process deleted and was told so:
	// it decides on none of them again.
	deleted  map[types.UID]bool
	r        *appWrapperReconciler
	triggers *simTriggers
	clock    *clocktesting.FakeClock
	queue    *simQueue
	restarts int
}

func (w *simWorld) startWrapup() {
	if w.wr != nil {
		w.wr.restarts++
	}
	restarts := 0
	if w.wr != nil {
		restarts = w.wr.restarts
	}
	clock := clocktesting.NewFakeClock(w.now)
	triggers := &simTriggers{w: w, syncAt: w.now.Add(time.Duration(w.rng.Int63n(int64(3 * time.Second)))),
		waiters: map[types.NamespacedName]bool{}, claims: map[triggers.Owner]schema.GroupKind{}}
	wr := &simWrapup{w: w, deleted: map[types.UID]bool{}, triggers: triggers, clock: clock, queue: newSimQueue(func() time.Time { return w.now }), restarts: restarts}
	wr.r = &appWrapperReconciler{
		Cache:     w.reader(false, false),
		Writer:    &simWriter{w: w},
		APIReader: w.reader(true, false),
		Recorder:  simRecorder{&w.simKernel},
		// What a rule compiles to does not depend on the process: one
		// cache for the world saves compiling again after each restart.
		Policies: w.explainPolicies,
		Triggers: triggers,
		Assign:   newAssignments(),
		Counters: simWorldCounters{w},
		Clock:    clock,
		// The final check's reads ahead are sent at once, before the
		// rules' LIST: a world does not change within a reconcile, and the
		// faults are drawn in one order, so that a seed replays.
		readAhead: func(read func()) { read() },
	}
	wr.r.defaults()
	wr.r.observe = w.checkDecision
	wr.r.stored = func(key types.NamespacedName) (types.UID, bool) {
		o, ok := w.awCache.objs[key.String()]
		if !ok {
			return "", false
		}
		return o.GetUID(), true
	}
	w.wr = wr
	// A new process lists everything afresh: its caches start from the
	// API server, and every AppWrapper is reconciled.
	w.resync(w.awCache, func() map[string]any { return anyMap(w.aws.objs) })
	w.resync(w.trigCache, func() map[string]any { return anyMap(w.trigs) })
	w.resync(w.ruleCache, func() map[string]any { return anyMap(w.rules) })
	w.resync(w.nsCache, func() map[string]any { return anyMap(w.nss) })
	w.resync(w.crecCache, func() map[string]any { return anyMap(w.crecs.objs) })
	for key := range w.aws.objs {
		wr.queue.add(key, w.now)
	}
}

func anyMap[K comparable, V any](m map[K]V) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[fmt.Sprint(k)] = v
	}
	return out
}

func (w *simWorld) resync(c *simCache, objs func() map[string]any) {
	c.objs = map[string]client.Object{}
	c.pending = nil
	c.last = time.Time{}
	for k, v := range objs() {
		c.objs[k] = slimmed(v.(client.Object).DeepCopyObject().(client.Object))
	}
}

// slimmed is obj as wrapup's cache keeps it (CacheOptions).
func slimmed(obj client.Object) client.Object {
	var out any = obj
	switch o := obj.(type) {
	case *awv1beta2.AppWrapper:
		out, _ = slimAppWrapper(o)
	case *wrapupv1alpha1.CompletionRecord:
		out, _ = slimCompletionRecord(o)
	}
	return out.(client.Object)
}

// simWorldCounters is the rules' counters: it traces each outcome
// counted, and fails the history on one that is not of an outcome wrapup
// recorded, and had answered, in the reconcile under way.
type simWorldCounters struct{ w *simWorld }

func (c simWorldCounters) Add(_ context.Context, rule string, outcome wrapupv1alpha1.Outcome) {
	w := c.w
	w.counted++
	w.logf("counter %s %s +1", rule, outcome)
	i := slices.Index(w.checks.uncounted, rule+"/"+string(outcome))
	if i < 0 {
		w.fail("wrapup counted %s %s, which it did not record in this reconcile (recorded: %v)", rule, outcome, w.checks.uncounted)
		return
	}
	w.checks.uncounted = slices.Delete(w.checks.uncounted, i, i+1)
}

func (wr *simWrapup) reconcile(key types.NamespacedName) {
	w := wr.w
	wr.queue.take(key)
	// A hot loop: the same AppWrapper reconciled over and over within one
	// simulated second.
	if w.now.Sub(w.checks.loopStart) > time.Second {
		w.checks.loopStart, w.checks.loopCount = w.now, 0
	}
	if w.checks.loopCount++; w.checks.loopCount > 2000 {
		w.fail("hot loop: %d reconciles within a second, the last of %s", w.checks.loopCount, key)
		return
	}
	if w.checks.polls != nil {
		// No polling: in the last hour of a world that stands still, an
		// AppWrapper is looked at only by the rare backstops (every 5 min).
		if w.checks.polls[key]++; w.checks.polls[key] > 20 {
			w.fail("polling: %s reconciled %d times in an hour in which nothing changed", key, w.checks.polls[key])
			return
		}
	}
	if backoff, err := wr.queue.reconcile(&w.simKernel, wr.r, wr.clock, key); err != nil {
		w.logf("wrapup reconcile %s: error %v (again in %s)", key, err, backoff)
	}
	if len(w.checks.uncounted) > 0 {
		w.fail("wrapup recorded %v in a reconcile of %s, and did not count it", w.checks.uncounted, key)
	}
}

// --- the loop ---

// runUntil advances the world to t, doing in order whatever falls due:
// cache deliveries, the AppWrapper controller, the trigger informer's first
// list, wrapup's queue.
func (w *simWorld) runUntil(t time.Time) {
	w.advance(t, w.nextThing, func() bool {
		if w.checks.things++; w.checks.things > 2_000_000 {
			w.fail("the world does not settle: %d things done", w.checks.things)
			return false
		}
		return true
	})
}

// nextThing is the earliest thing due, and what doing it means.
func (w *simWorld) nextThing() (time.Time, func()) {
	var at time.Time
	var do func()
	consider := func(t time.Time, f func()) {
		if do == nil || t.Before(at) {
			at, do = t, f
		}
	}
	if t, f := w.nextEvent(); f != nil {
		consider(t, f)
	}
	for _, c := range []*simCache{w.awCache, w.trigCache, w.ruleCache, w.nsCache, w.crecCache} {
		if len(c.pending) > 0 {
			c := c
			consider(c.pending[0].at, func() { w.applyDelivery(c) })
		}
	}
	uids := make([]string, 0, len(w.models))
	for uid := range w.models {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	for _, uid := range uids {
		m := w.models[types.UID(uid)]
		if !m.next.IsZero() {
			consider(m.next, func() { w.awController(m) })
		}
	}
	for _, k := range sortedKeys(w.kubelet) {
		consider(w.kubelet[k], func() { w.kubeletTerminate(k) })
	}
	if tr := w.wr.triggers; len(tr.waiters) > 0 || !tr.synced() {
		consider(tr.syncAt, func() { w.triggersSynced() })
	}
	if key, t, ok := w.wr.queue.next(); ok {
		consider(t, func() { w.wr.reconcile(key) })
	}
	return at, do
}

func (w *simWorld) triggersSynced() {
	tr := w.wr.triggers
	keys := make([]types.NamespacedName, 0, len(tr.waiters))
	for k := range tr.waiters {
		keys = append(keys, k)
	}
	tr.waiters = map[types.NamespacedName]bool{}
	for _, k := range keys {
		w.wr.queue.add(k, w.now)
	}
	if tr.syncAt.After(w.now) {
		w.now = tr.syncAt
	}
}

// applyDelivery lands the first pending change of c in c, and queues what
// wrapup's watches would queue for it.
func (w *simWorld) applyDelivery(c *simCache) {
	d := c.pending[0]
	c.pending = c.pending[1:]
	old := c.objs[d.key]
	if d.obj == nil {
		delete(c.objs, d.key)
	} else {
		// wrapup's own cache keeps only what it reads (CacheOptions).
		c.objs[d.key] = slimmed(d.obj.DeepCopyObject().(client.Object))
	}
	switch c {
	case w.awCache:
		// The watch drops the events of wrapup's own writes that need no
		// decision (ownEcho).
		var obj client.Object
		if d.obj != nil {
			obj = c.objs[d.key]
		}
		ns, name, _ := strings.Cut(d.key, "/")
		key := types.NamespacedName{Namespace: ns, Name: name}
		if w.wr.r.own.echo(old, obj) {
			w.checks.echoes++
			return
		}
		w.wr.queue.add(key, w.now)
	case w.trigCache:
		// The owner by label, as the watch maps it.
		src := d.obj
		if src == nil {
			src = old
		}
		if src != nil {
			// The trigger watches' predicate drops the events of an
			// AppWrapper the cache does not hold, or wrapup deleted
			// (triggerWanted).
			if owner := src.GetLabels()[awv1beta2.AppWrapperLabel]; owner != "" &&
				w.wr.r.triggerWanted(triggers.AppWrapperEvent(types.NamespacedName{Namespace: src.GetNamespace(), Name: owner}).Object) {
				w.wr.queue.add(types.NamespacedName{Namespace: src.GetNamespace(), Name: owner}, w.now)
			}
		}
	case w.ruleCache, w.nsCache:
		for key := range w.aws.objs {
			w.wr.queue.add(key, w.now)
		}
	case w.crecCache:
		// The AppWrapper controller watches the changes and deletions of
		// CompletionRecords, not their creates: a decision on a cache
		// behind a record is made again once the cache has it
		// (recordsAppWrapper).
		if old == nil {
			return
		}
		for _, o := range []client.Object{old, d.obj} {
			if cr, ok := o.(*wrapupv1alpha1.CompletionRecord); ok && cr.AppWrapper.Name != "" {
				w.wr.queue.add(types.NamespacedName{Namespace: cr.Namespace, Name: cr.AppWrapper.Name}, w.now)
			}
		}
	}
}

// --- random events ---

func (w *simWorld) pickAW(filter func(*awv1beta2.AppWrapper, *simAW) bool) (*awv1beta2.AppWrapper, *simAW) {
	keys := make([]string, 0, len(w.aws.objs))
	for k := range w.aws.objs {
		keys = append(keys, k.String())
	}
	sort.Strings(keys)
	var cands []types.NamespacedName
	for _, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		key := types.NamespacedName{Namespace: ns, Name: name}
		aw := w.aws.objs[key]
		if m := w.models[aw.UID]; m != nil && (filter == nil || filter(aw, m)) {
			cands = append(cands, key)
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	aw := w.aws.objs[cands[w.rng.Intn(len(cands))]]
	return aw, w.models[aw.UID]
}

func (w *simWorld) randomRule(name string) simRule {
	r := simRule{name: name, priority: int32(w.rng.Intn(5) * 10)}
	r.kind = []string{"Job", "Job", "Job", "Pod", "Pod", "RayJob", "RayJob", "", "", "", "", "", "", "EvalRun"}[w.rng.Intn(14)]
	if w.rng.Intn(5) == 0 {
		r.success = []string{"never", "error"}[w.rng.Intn(2)]
	}
	if r.kind == "EvalRun" {
		r.success = ""
	}
	r.broken = w.rng.Intn(15) == 0
	r.badSel = w.rng.Intn(40) == 0
	r.benchOnly = w.rng.Intn(2) == 0
	if w.rng.Intn(3) == 0 {
		r.team = []string{"a", "b"}[w.rng.Intn(2)]
	}
	r.onSuccess = w.randomAction()
	r.onFailure = w.randomAction()
	r.dryRun = w.rng.Intn(6) == 0
	r.policy = w.randomPolicy()
	r.noHistory = w.rng.Intn(5) == 0
	if w.rng.Intn(4) == 0 {
		r.history = []int32{60, 3600}[w.rng.Intn(2)]
	}
	return r
}

// simLongName is the end of an AppWrapper name longer than a label value
// (63 characters): its record carries no wrapup.dev/appwrapper label.
const simLongName = "-a-benchmark-run-whose-name-is-longer-than-any-label-value-may-be"

// perKindShape gives r, in a world of rules written one per kind (as
// docs/writing-rules.md shows them), the shape of its name there: r0 takes
// Jobs, r1 Pods, r2 RayJobs, all at priority 10 with no selectors, and r3
// annotated components at priority 0. Elsewhere r is as it is.
func (w *simWorld) perKindShape(r simRule) simRule {
	if !w.perKind {
		return r
	}
	r.kind = map[string]string{"r0": "Job", "r1": "Pod", "r2": "RayJob", "r3": ""}[r.name]
	r.priority = 10
	if r.kind == "" {
		r.priority = 0
	}
	r.benchOnly, r.team = false, ""
	return r
}

// randomPolicy is a trigger policy: unset, One, All or Any.
func (w *simWorld) randomPolicy() string {
	return []string{"", "One", "All", "All", "Any", "Any"}[w.rng.Intn(6)]
}

func (w *simWorld) randomAction() wrapupv1alpha1.ActionSpec {
	a := wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll}
	if w.rng.Intn(4) == 0 {
		a.Action = wrapupv1alpha1.ActionUpdateStatus
	}
	switch w.rng.Intn(4) {
	case 0:
		a.TTLSecondsAfterFinished = ptr.To[int32](30)
	case 1:
		a.TTLSecondsAfterFinished = ptr.To[int32](300)
	}
	return a
}

func (w *simWorld) setRule(r simRule) {
	gen, uid := int64(1), w.newUID("rule")
	created := metav1.NewTime(w.now.Truncate(time.Second))
	var status wrapupv1alpha1.CompletionRuleStatus
	old, edited := w.rules[r.name]
	if edited {
		gen, uid, created, status = old.Generation+1, old.UID, old.CreationTimestamp, *old.Status.DeepCopy()
	}
	w.ruleSpecs[r.name] = r
	w.logf("admin sets rule %+v", r)
	obj := r.object(gen, uid)
	obj.CreationTimestamp, obj.Status = created, status
	w.putRule(obj)
}

// step makes one random thing happen in the world.
func (w *simWorld) step() {
	switch n := w.rng.Intn(100); {
	case n < 12: // a user creates an AppWrapper
		if len(w.aws.objs) < 5 {
			ns := []string{"ns-a", "ns-b"}[w.rng.Intn(2)]
			key := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("aw-%d", w.rng.Intn(6))}
			if w.rng.Intn(8) == 0 {
				key.Name += simLongName
			}
			if _, ok := w.aws.get(key); !ok {
				w.newAppWrapper(key)
			}
		}
	case n < 34: // a running trigger finishes
		_, m := w.pickAW(func(aw *awv1beta2.AppWrapper, m *simAW) bool { return len(w.trigsWhere(m, false)) > 0 })
		if m != nil {
			running := w.trigsWhere(m, false)
			t := running[w.rng.Intn(len(running))]
			o := wrapupv1alpha1.OutcomeSucceeded
			if w.rng.Intn(3) == 0 {
				o = wrapupv1alpha1.OutcomeFailed
			}
			w.finishTrigger(trigKey(t.kind, m.key.Namespace, t.name), o)
		}
	case n < 35: // the inference component of a running AppWrapper fails
		aw, m := w.pickAW(func(aw *awv1beta2.AppWrapper, m *simAW) bool {
			return !m.alone && aw.Status.Phase == awv1beta2.AppWrapperRunning
		})
		if aw != nil {
			w.logf("the inference component of %s fails", m.key)
			m.inferenceFailed = true
			w.wake(m, decision.AppWrapperRecheckPeriod)
		}
	case n < 37: // a finished trigger deletes itself (its own TTL)
		_, m := w.pickAW(func(aw *awv1beta2.AppWrapper, m *simAW) bool { return len(w.trigsWhere(m, true)) > 0 })
		if m != nil {
			finished := w.trigsWhere(m, true)
			t := finished[w.rng.Intn(len(finished))]
			w.logf("trigger %s/%s deleted by its own TTL", m.key, t.name)
			if k := trigKey(t.kind, m.key.Namespace, t.name); t.kind == "Job" {
				w.ttlDelete(k)
			} else {
				w.gracefulDelete(k, "")
			}
		}
	case n < 47: // Kueue admits a queued AppWrapper
		aw, _ := w.pickAW(func(aw *awv1beta2.AppWrapper, m *simAW) bool { return aw.Spec.Suspend && aw.DeletionTimestamp.IsZero() })
		if aw != nil {
			aw = aw.DeepCopy()
			aw.Spec.Suspend = false
			w.logf("kueue admits %s", client.ObjectKeyFromObject(aw))
			w.aws.put(aw)
		}
	case n < 51: // Kueue preempts an admitted AppWrapper
		aw, _ := w.pickAW(func(aw *awv1beta2.AppWrapper, m *simAW) bool {
			return !aw.Spec.Suspend && aw.DeletionTimestamp.IsZero()
		})
		if aw != nil {
			aw = aw.DeepCopy()
			aw.Spec.Suspend = true
			w.logf("kueue preempts %s", client.ObjectKeyFromObject(aw))
			w.aws.put(aw)
		}
	case n < 63: // an admin creates or edits a rule
		names := 3
		if w.perKind {
			names = 4
		}
		name := fmt.Sprintf("r%d", w.rng.Intn(names))
		r, ok := w.ruleSpecs[name]
		if !ok || w.rng.Intn(3) == 0 {
			r = w.randomRule(name)
		} else {
			switch w.rng.Intn(8) {
			case 0:
				r.dryRun = !r.dryRun
				if w.rng.Intn(2) == 0 {
					r.noHistory = !r.noHistory
				}
			case 1:
				r.broken = !r.broken
			case 2:
				r.priority = int32(w.rng.Intn(5) * 10)
			case 3:
				r.onSuccess, r.onFailure = w.randomAction(), w.randomAction()
			case 4:
				r.benchOnly = !r.benchOnly
			case 5:
				r.success = []string{"", "", "never", "error"}[w.rng.Intn(4)]
				if r.kind == "EvalRun" {
					r.success = ""
				}
			case 6:
				r.kind = []string{"Job", "Pod", "RayJob", ""}[w.rng.Intn(4)]
			case 7:
				r.policy = w.randomPolicy()
			}
		}
		w.setRule(w.perKindShape(r))
	case n < 66: // an admin deletes a rule
		names := sortedKeys(w.rules)
		if len(names) > 0 {
			name := names[w.rng.Intn(len(names))]
			w.logf("admin deletes rule %s", name)
			w.deleteRule(name)
		}
	case n < 69: // an admin relabels a namespace
		ns := w.nss[[]string{"ns-a", "ns-b"}[w.rng.Intn(2)]].DeepCopy()
		ns.Labels = map[string]string{}
		if t := w.rng.Intn(3); t < 2 {
			ns.Labels["team"] = []string{"a", "b"}[t]
		}
		w.logf("admin relabels namespace %s: %v", ns.Name, ns.Labels)
		w.putNamespace(ns)
	case n < 71: // a user deletes an AppWrapper
		aw, _ := w.pickAW(func(aw *awv1beta2.AppWrapper, m *simAW) bool { return aw.DeletionTimestamp.IsZero() })
		if aw != nil {
			w.logf("user deletes %s", client.ObjectKeyFromObject(aw))
			_, _ = w.aws.delete(client.ObjectKeyFromObject(aw), nil, nil)
		}
	case n < 72: // a user saves an AppWrapper's manifest, or creates it again from it
		if w.rng.Intn(2) == 0 {
			aw, m := w.pickAW(nil)
			if aw != nil {
				w.saved[m.key] = simSaved{aw: aw.DeepCopy(), m: m.clone()}
				w.logf("user saves the manifest of %s, with the metadata %v", m.key, simMeta(aw))
			}
		} else {
			for _, k := range sortedKeys(anyMap(w.saved)) {
				ns, name, _ := strings.Cut(k, "/")
				key := types.NamespacedName{Namespace: ns, Name: name}
				if _, ok := w.aws.get(key); !ok {
					w.recreate(w.saved[key])
					delete(w.saved, key)
					break
				}
			}
		}
	case n < 73: // a user toggles the opt-out
		aw, _ := w.pickAW(nil)
		if aw != nil {
			aw = aw.DeepCopy()
			if aw.Annotations == nil {
				aw.Annotations = map[string]string{}
			}
			if _, ok := aw.Annotations[wrapupv1alpha1.IgnoreAnnotation]; ok {
				delete(aw.Annotations, wrapupv1alpha1.IgnoreAnnotation)
			} else {
				aw.Annotations[wrapupv1alpha1.IgnoreAnnotation] = "yes"
			}
			w.logf("user toggles %s on %s", wrapupv1alpha1.IgnoreAnnotation, client.ObjectKeyFromObject(aw))
			w.aws.put(aw)
		}
	case n < 78: // wrapup restarts
		if w.rng.Intn(4) == 0 {
			w.upgrade()
		}
		w.logf("wrapup restarts")
		w.startWrapup()
	case n < 82: // the API server starts or stops failing requests
		w.faults = []float64{0, 0, 0.05, 0.2}[w.rng.Intn(4)]
		w.logf("API faults at %.2f", w.faults)
		if w.rng.Intn(6) == 0 {
			w.refuseRecords = !w.refuseRecords
			w.logf("the API server refuses CompletionRecord writes: %v", w.refuseRecords)
		}
	case n < 85: // the caches' lag changes
		w.maxLag = []time.Duration{0, 500 * time.Millisecond, 2 * time.Second, 10 * time.Second}[w.rng.Intn(4)]
		w.logf("cache lag up to %s", w.maxLag)
	case n < 87: // a node fails: the running triggers of an AppWrapper fail together
		_, m := w.pickAW(func(aw *awv1beta2.AppWrapper, m *simAW) bool { return len(w.trigsWhere(m, false)) > 1 })
		if m != nil {
			w.logf("a node of %s fails", m.key)
			for _, t := range w.trigsWhere(m, false) {
				w.finishTrigger(trigKey(t.kind, m.key.Namespace, t.name), wrapupv1alpha1.OutcomeFailed)
			}
		}
	case n < 89: // a Pod trigger is evicted (drain, the scheduler's preemption) or killed by its node's kubelet
		_, m := w.pickAW(func(aw *awv1beta2.AppWrapper, m *simAW) bool {
			for _, t := range w.trigsWhere(m, false) {
				if t.kind == "Pod" {
					return true
				}
			}
			return false
		})
		if m != nil {
			for _, t := range w.trigsWhere(m, false) {
				if t.kind != "Pod" {
					continue
				}
				k := trigKey(t.kind, m.key.Namespace, t.name)
				if w.rng.Intn(3) == 0 {
					// Node-pressure eviction: the kubelet fails the Pod
					// and leaves it (k8s v1.37.2 pkg/kubelet/eviction,
					// synchronize: DisruptionTarget TerminationByKubelet).
					u := w.trigs[k].DeepCopy()
					addPodCondition(u, "DisruptionTarget", "TerminationByKubelet")
					_ = unstructured.SetNestedField(u.Object, "Failed", "status", "phase")
					w.logf("kubelet evicts Pod %s (%s) under node pressure: Failed", k, u.GetUID())
					w.putTrigger(u)
				} else {
					// The eviction API and the scheduler's preemption set
					// DisruptionTarget, then delete the Pod gracefully
					// (pkg/registry/core/pod/storage/eviction.go,
					// pkg/scheduler/framework/preemption/executor.go).
					reason := []string{"EvictionByEvictionAPI", "PreemptionByScheduler"}[w.rng.Intn(2)]
					w.logf("Pod %s (%s) is evicted: %s", k, w.trigs[k].GetUID(), reason)
					w.gracefulDelete(k, reason)
				}
				break
			}
		}
	case n < 92: // a tenant (the edit role: patch on AppWrappers) writes wrapup.dev/* metadata
		w.forge()
	default: // time passes
		if w.harsh {
			w.harshStep()
		}
	}
}

// harshStep is what a harsh history adds when time passes: an admin
// renaming a rule (its spec under a new name, the old one often deleted),
// breaking or fixing the rule that decides for an AppWrapper with a
// record, or heavy API faults.
func (w *simWorld) harshStep() {
	switch w.rng.Intn(4) {
	case 0: // an admin renames a rule: its spec under a new name, the old one (often) deleted
		names := sortedKeys(w.rules)
		if len(names) > 0 {
			old := names[w.rng.Intn(len(names))]
			r := w.ruleSpecs[old]
			r.name = fmt.Sprintf("r%d", 3+w.rng.Intn(3))
			if _, ok := w.rules[r.name]; !ok {
				w.logf("admin renames rule %s to %s", old, r.name)
				w.setRule(r)
				if w.rng.Intn(2) == 0 {
					w.deleteRule(old)
				}
			}
		}
	case 1: // an admin breaks (or fixes) the rule that decides for an AppWrapper with a record
		aw, _ := w.pickAW(func(aw *awv1beta2.AppWrapper, m *simAW) bool { return w.open(aw.UID) != nil })
		if aw != nil {
			if r, found, _ := w.winner(aw); found {
				r.broken = !r.broken
				w.logf("admin toggles broken on %s while %s carries a record", r.name, client.ObjectKeyFromObject(aw))
				w.setRule(r)
			}
		}
	case 2:
		w.faults = []float64{0.5, 0.9, 1}[w.rng.Intn(3)]
		w.logf("API faults at %.2f", w.faults)
	case 3: // a tenant forges a record on an AppWrapper's metadata
		w.forge()
	}
}

// dt is how far the clock moves between two events.
func (w *simWorld) dt() time.Duration {
	switch w.rng.Intn(10) {
	case 0:
		return time.Duration(w.rng.Int63n(int64(5 * time.Minute)))
	case 1, 2:
		return time.Duration(w.rng.Int63n(int64(time.Minute)))
	}
	return time.Duration(w.rng.Int63n(int64(5 * time.Second)))
}

// run plays a history of steps random events, then lets the world settle.
func (w *simWorld) run(steps int) {
	w.startWrapup()
	for i := 0; i < steps && w.violation == ""; i++ {
		w.step()
		w.runUntil(w.now.Add(w.dt()))
	}
	if w.violation != "" {
		return
	}
	// The world stops changing: no faults, caches catch up, every
	// controller runs until it has nothing left to do.
	w.logf("the world settles")
	w.faults = 0
	w.maxLag = 0
	w.refuseRecords = false
	end := w.now.Add(6 * time.Hour)
	quiet := end.Add(-time.Hour)
	for w.violation == "" {
		at, do := w.nextThing()
		if do == nil || at.After(end) {
			break
		}
		if w.checks.polls == nil && !at.Before(quiet) {
			// From now on, count what wrapup does in a world that stands still.
			w.checks.polls = map[types.NamespacedName]int{}
		}
		w.runUntil(at)
	}
	if w.violation == "" {
		w.checkSettled()
	}
}

// regressionSeeds are histories that once failed, run by every test run
// whatever -sim.histories says (each with a comment on what it found).
// A change of the world's draws makes them other histories: find them
// again when it does.
var regressionSeeds = []int64{
	// Another rule takes over a run, its TTL from the finish not before
	// the stamped due time, but past when it takes over: deleted at once
	// (the rule that no change makes a deletion sooner counts its TTL
	// from the takeover).
	63, 77, 116, 427, 433,
	// A failure recorded under a rule of one component; a rule of another
	// wins, and the AppWrapper controller makes a new attempt (a reset,
	// or a deployment after Kueue admitted it again): the failure stood,
	// and the new attempt was lost (a new attempt is one whichever
	// component the rule takes).
	2980, 4402,
}

// harshRegressionSeeds are harsh histories that once failed.
var harshRegressionSeeds = []int64{
	// A success recorded, then the rule that decides is one that takes the
	// annotated ConfigMap (a kind wrapup may not watch) while the
	// AppWrapper is Suspended (its components gone): the record decides,
	// and the run, started again, is deleted (the oracle held that no rule
	// could act on it).
	1000140,
	1000240, 1000261, // a takeover, as above
}

// simWorldFor is the world of one history, harsh or not.
func simWorldFor(seed int64, harsh bool) *simWorld {
	w := newSimWorld(seed)
	w.harsh = harsh
	return w
}

func TestSimulationRegressions(t *testing.T) {
	logf.SetLogger(logr.Discard())
	for _, seeds := range []struct {
		seeds []int64
		harsh bool
	}{{regressionSeeds, false}, {harshRegressionSeeds, true}} {
		for _, seed := range seeds.seeds {
			w := simWorldFor(seed, seeds.harsh)
			w.run(*simSteps)
			if w.violation != "" {
				t.Errorf("seed %d (harsh %v): %s\nreplay: go test ./gc -run TestSimulation -sim.seed=%d -sim.harsh=%v -v", seed, seeds.harsh, w.violation, seed, seeds.harsh)
			}
		}
	}
}

func TestSimulation(t *testing.T) {
	if *simSeed != 0 {
		w := simWorldFor(*simSeed, *simHarsh)
		w.run(*simSteps)
		t.Log("\n" + strings.Join(w.trace, "\n"))
		if w.violation != "" {
			t.Fatalf("seed %d: %s", *simSeed, w.violation)
		}
		return
	}
	simulate(t, *simFirstSeed, *simHistories, *simHarsh)
}

// TestSimulationHarsh runs harsh histories (rules renamed, deleted, broken
// and fixed under pending records, heavy API faults), on seeds of their
// own.
func TestSimulationHarsh(t *testing.T) {
	simulate(t, 1_000_001, *simHarshN, true)
}

// simulate runs n histories from seed first on every core, and fails with
// the shortest trace of the first that breaks an invariant.
func simulate(t *testing.T, first int64, n int, harsh bool) {
	// The histories allocate much and keep little.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	logf.SetLogger(logr.Discard())
	if testing.Short() {
		n = min(n, 50)
	}
	var next atomic.Int64
	next.Store(first)
	last := first + int64(n)
	var mu sync.Mutex
	var failed []int64
	var wg sync.WaitGroup
	start := time.Now()
	var stats simChecks
	stats.init()
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seed := next.Add(1) - 1
				if seed >= last {
					return
				}
				w := simWorldFor(seed, harsh)
				w.run(*simSteps)
				mu.Lock()
				stats.add(&w.checks)
				if w.violation != "" {
					failed = append(failed, seed)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d histories (harsh %v) of %d steps in %s: %s", n, harsh, *simSteps, time.Since(start).Round(time.Millisecond), stats.summary())
	if len(failed) == 0 {
		return
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i] < failed[j] })
	seed := failed[0]
	steps := shortestFailing(seed, *simSteps, harsh)
	w := simWorldFor(seed, harsh)
	w.run(steps)
	t.Fatalf("%d of %d histories failed (seeds %v). The first, seed %d, fails after %d steps: %s\n"+
		"replay: go test ./gc -run TestSimulation -sim.seed=%d -sim.steps=%d -sim.harsh=%v -v\n%s",
		len(failed), n, failed[:min(len(failed), 10)], seed, steps, w.violation, seed, steps, harsh, strings.Join(w.trace, "\n"))
}

// shortestFailing is the fewest steps of the history of seed that still
// fail (a history's first k steps are the same whatever its length).
func shortestFailing(seed int64, steps int, harsh bool) int {
	lo, hi := 0, steps // hi fails
	for lo+1 < hi {
		mid := (lo + hi) / 2
		w := simWorldFor(seed, harsh)
		w.run(mid)
		if w.violation != "" {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
