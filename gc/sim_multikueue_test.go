package gc

// The simulation of AppWrappers that MultiKueue dispatches: a manager
// cluster (the AppWrappers, their Workloads) and two worker clusters (the
// copies MultiKueue creates there, their benchmark Jobs), in the manner of
// sim_test.go but on its own world. MultiKueue dispatches, evicts and
// dispatches again (to the same worker or the other), copies each copy's
// status back late, and removes what a deleted AppWrapper left on a
// worker once it can reach it; workers go down and come back; users
// delete an AppWrapper and create it again under the same name (a stale
// copy of the old one may still be on a worker); worker reads fail now and
// then; wrapup restarts. wrapup's appWrapperReconciler runs against it
// through the interfaces it has in production (workerSource for the
// workers). The oracle, written apart from the decision code, checks:
//
//   - never a wrong delete: wrapup deletes only a manager's AppWrapper
//     whose CompletionRecord names a Job that MultiKueue's copy of that
//     AppWrapper controlled and that finished so, under a rule that deletes
//     on it, and never while the worker it is dispatched to is down;
//   - every outcome recorded names such a Job, with its outcome, and the
//     mirror on the AppWrapper is the record's and nothing more;
//   - rewriting the AppWrapper's wrapup.dev/* metadata changes no decision;
//   - never a lost completion: once the world settles (every worker up),
//     every AppWrapper whose Job on its worker finished is deleted (or,
//     under UpdateStatus, recorded).

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

var (
	simMKHistories = flag.Int("sim.mk-histories", 400, "how many MultiKueue histories TestSimulationMultiKueue runs")
	simMKSeed      = flag.Int64("sim.mk-seed", 0, "run only the MultiKueue history of this seed, and print its trace")
)

// mkWorkload is the manager's Workload of an AppWrapper.
type mkWorkload struct {
	name    string
	owner   types.UID
	cluster string
}

// mkTruth is what happened to a Job on a worker.
type mkTruth struct {
	// aw is the manager's AppWrapper whose copy controlled it.
	aw      types.UID
	outcome wrapupv1alpha1.Outcome
}

// mkWorker is one worker cluster.
type mkWorker struct {
	name   string
	up     bool
	copies map[types.NamespacedName]*awv1beta2.AppWrapper
	jobs   map[types.NamespacedName]*unstructured.Unstructured
	// cache is wrapup's informer of Jobs there, which lags.
	cache  map[types.NamespacedName]*unstructured.Unstructured
	claims map[triggers.Owner]bool
	syncAt time.Time
	// last is when the latest change reaches the informer: a watch
	// delivers in order.
	last time.Time
}

type mkWorld struct {
	simKernel

	// aws are the manager's AppWrappers (the kernel's store); crecs, the
	// CompletionRecords there.
	aws     *simStore[*awv1beta2.AppWrapper]
	crecs   *simStore[*wrapupv1alpha1.CompletionRecord]
	wls     map[types.NamespacedName]*mkWorkload
	wlCache map[types.NamespacedName]mkWorkload
	wlLast  time.Time
	workers map[string]*mkWorker
	truth   map[types.UID]mkTruth
	rule    *wrapupv1alpha1.CompletionRule
	ns      *corev1.Namespace

	r       *appWrapperReconciler
	clock   *clocktesting.FakeClock
	queue   *simQueue
	deleted map[types.UID]bool

	// deletes and records count what wrapup did, for the summary.
	deletes, records int
	// blindRng draws the rewrites of checkTenantBlind.
	blindRng *rand.Rand
}

func newMKWorld(seed int64) *mkWorld {
	w := &mkWorld{simKernel: newSimKernel(seed),
		wls:     map[types.NamespacedName]*mkWorkload{},
		wlCache: map[types.NamespacedName]mkWorkload{}, workers: map[string]*mkWorker{},
		truth: map[types.UID]mkTruth{}, deleted: map[types.UID]bool{},
		ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, blindRng: rand.New(rand.NewSource(seed ^ 0xb1d))}
	w.aws = newAWStore(&w.simKernel)
	w.crecs = newSimStore(&w.simKernel, simCompletionRecords, "crec", func() *wrapupv1alpha1.CompletionRecord { return &wrapupv1alpha1.CompletionRecord{} })
	// wrapup's cache sees each change late, and reconciles; the garbage
	// collector removes the Workload of an AppWrapper deleted.
	w.aws.stored = func(aw *awv1beta2.AppWrapper) { w.queue.add(client.ObjectKeyFromObject(aw), w.now.Add(w.lag())) }
	w.aws.removed = func(aw *awv1beta2.AppWrapper) { w.setWorkload(client.ObjectKeyFromObject(aw), nil) }
	for _, name := range []string{"worker-1", "worker-2"} {
		w.workers[name] = &mkWorker{name: name, up: true, copies: map[types.NamespacedName]*awv1beta2.AppWrapper{},
			jobs: map[types.NamespacedName]*unstructured.Unstructured{}, cache: map[types.NamespacedName]*unstructured.Unstructured{},
			claims: map[triggers.Owner]bool{}}
	}
	action := func() wrapupv1alpha1.ActionSpec {
		a := wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll}
		switch w.rng.Intn(5) {
		case 0:
			a.Action = wrapupv1alpha1.ActionUpdateStatus
		case 1:
			a.TTLSecondsAfterFinished = ptr.To[int32](30)
		}
		return a
	}
	w.rule = simRule{name: "benchmarks", kind: "Job", onSuccess: action(), onFailure: action(), noHistory: true}.object(1, "rule-uid")
	// Created before the first run.
	w.rule.CreationTimestamp = metav1.NewTime(w.now.Add(-time.Hour))
	w.faults = []float64{0, 0.05, 0.2}[w.rng.Intn(3)]
	w.startWrapup()
	return w
}

func (w *mkWorld) lag() time.Duration { return time.Duration(w.rng.Int63n(int64(2 * time.Second))) }

// --- the manager: AppWrappers, Workloads, MultiKueue ---

// setWorkload changes a Workload; wrapup's cache of it follows late.
func (w *mkWorld) setWorkload(key types.NamespacedName, wl *mkWorkload) {
	if wl == nil {
		delete(w.wls, key)
	} else {
		w.wls[key] = wl
	}
	var snap *mkWorkload
	if wl != nil {
		c := *wl
		snap = &c
	}
	// A watch delivers in order.
	at := w.now.Add(w.lag())
	if at.Before(w.wlLast) {
		at = w.wlLast
	}
	w.wlLast = at
	w.later(at.Sub(w.now), func() {
		old, had := w.wlCache[key]
		if snap == nil {
			delete(w.wlCache, key)
		} else {
			w.wlCache[key] = *snap
		}
		// The AppWrapper controller watches Workloads whose cluster changes.
		if snap != nil && (!had || old.cluster != snap.cluster) {
			w.queue.add(key, w.now)
		}
	})
}

func (w *mkWorld) newAppWrapper(name string) {
	key := types.NamespacedName{Namespace: "ns", Name: name}
	uid := w.newUID("aw")
	aw := &awv1beta2.AppWrapper{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid, CreationTimestamp: metav1.NewTime(w.now.Truncate(time.Second))},
		Spec: awv1beta2.AppWrapperSpec{ManagedBy: ptr.To(kueue.MultiKueueControllerName), Suspend: true, Components: []awv1beta2.AppWrapperComponent{
			simComponent("apps/v1", "Deployment", name+"-inference", false, nil),
			simComponent("batch/v1", "Job", name+"-bench", false, nil),
		}},
	}
	w.logf("user creates AppWrapper %s (%s)", key, uid)
	w.aws.put(aw)
	w.setWorkload(key, &mkWorkload{name: "appwrapper-" + name + "-" + string(uid), owner: uid})
}

// dispatch: MultiKueue dispatches the Workload of key to worker wk, which
// creates its copy there (or finds a copy of that name already there, as
// its adapter does) and the copy's Job.
func (w *mkWorld) dispatch(key types.NamespacedName, wk *mkWorker) {
	wl := *w.wls[key]
	wl.cluster = wk.name
	w.setWorkload(key, &wl)
	cp, ok := wk.copies[key]
	if !ok {
		cp = &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, UID: w.newUID("copy"),
			Labels: map[string]string{decision.PrebuiltWorkloadLabel: wl.name, kueue.MultiKueueOriginLabel: "multikueue"}},
			Spec: w.aws.objs[key].Spec}
		cp.Spec.ManagedBy = nil
		cp.Status.Phase = awv1beta2.AppWrapperSuspended
		wk.copies[key] = cp
	}
	w.logf("MultiKueue dispatches %s (%s) to %s: copy %s (workload label %s)", key, w.aws.objs[key].UID, wk.name, cp.UID, cp.Labels[decision.PrebuiltWorkloadLabel])
	w.later(w.lag(), func() { w.mirror(key) })
	// The worker's Kueue admits it, and its AppWrapper controller creates
	// the components.
	w.later(w.lag(), func() {
		if wk.copies[key] != cp || cp.Status.Phase != awv1beta2.AppWrapperSuspended {
			return
		}
		cp.Status.Phase = awv1beta2.AppWrapperRunning
		jobKey := types.NamespacedName{Namespace: key.Namespace, Name: key.Name + "-bench"}
		if _, ok := wk.jobs[jobKey]; !ok {
			job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "status": map[string]any{"active": int64(1)}}}
			job.SetName(jobKey.Name)
			job.SetNamespace(jobKey.Namespace)
			job.SetUID(w.newUID("job"))
			job.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: key.Name})
			job.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "workload.codeflare.dev/v1beta2", Kind: "AppWrapper", Name: key.Name, UID: cp.UID, Controller: ptr.To(true)}})
			if owner := w.ownerOfCopy(cp); owner != "" {
				w.truth[job.GetUID()] = mkTruth{aw: owner}
			}
			w.putJob(wk, job)
		}
		w.later(w.lag(), func() { w.mirror(key) })
	})
	w.later(w.lag(), func() { w.mirror(key) })
}

// ownerOfCopy is the manager's AppWrapper a copy was made for: the one
// whose Workload its label names (alive or not).
func (w *mkWorld) ownerOfCopy(cp *awv1beta2.AppWrapper) types.UID {
	name := cp.Labels[decision.PrebuiltWorkloadLabel]
	if i := strings.LastIndex(name, "-aw-"); i >= 0 {
		return types.UID(name[i+1:])
	}
	return ""
}

// mirror: MultiKueue copies the status of the copy on the dispatched
// worker to the manager's AppWrapper.
func (w *mkWorld) mirror(key types.NamespacedName) {
	aw, wl := w.aws.objs[key], w.wls[key]
	if aw == nil || wl == nil || wl.cluster == "" {
		return
	}
	wk := w.workers[wl.cluster]
	cp := wk.copies[key]
	if !wk.up || cp == nil || cp.Status.Phase == aw.Status.Phase {
		return
	}
	next := aw.DeepCopy()
	next.Status = cp.Status
	w.logf("MultiKueue copies %s's phase %s from %s", key, cp.Status.Phase, wk.name)
	w.aws.put(next)
}

func (w *mkWorld) putJob(wk *mkWorker, job *unstructured.Unstructured) {
	key := client.ObjectKeyFromObject(job)
	job.SetResourceVersion(w.nextRV())
	wk.jobs[key] = job
	w.deliver(wk, key, job.DeepCopy())
}

func (w *mkWorld) deleteJob(wk *mkWorker, key types.NamespacedName) {
	delete(wk.jobs, key)
	w.deliver(wk, key, nil)
}

// deliver brings a Job change to wrapup's informer on wk, late, if wk is
// up then (else its relist, when it is back, brings it).
func (w *mkWorld) deliver(wk *mkWorker, key types.NamespacedName, job *unstructured.Unstructured) {
	at := w.now.Add(w.lag())
	if at.Before(wk.last) {
		at = wk.last
	}
	wk.last = at
	w.later(at.Sub(w.now), func() {
		if !wk.up {
			return
		}
		if job == nil {
			delete(wk.cache, key)
		} else {
			wk.cache[key] = job
		}
		if len(wk.claims) > 0 {
			w.queue.add(types.NamespacedName{Namespace: key.Namespace, Name: strings.TrimSuffix(key.Name, "-bench")}, w.now)
		}
	})
}

// finishJob: the benchmark finishes on its worker; the worker's AppWrapper
// controller (no retries) fails a copy whose Job failed.
func (w *mkWorld) finishJob(wk *mkWorker, key types.NamespacedName, outcome wrapupv1alpha1.Outcome) {
	job := wk.jobs[key].DeepCopy()
	cond := map[wrapupv1alpha1.Outcome][2]string{wrapupv1alpha1.OutcomeSucceeded: {"SuccessCriteriaMet", "Complete"}, wrapupv1alpha1.OutcomeFailed: {"FailureTarget", "Failed"}}[outcome]
	job.Object["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": cond[0], "status": "True"}, map[string]any{"type": cond[1], "status": "True"}}}
	if t, ok := w.truth[job.GetUID()]; ok {
		t.outcome = outcome
		w.truth[job.GetUID()] = t
	}
	w.logf("Job %s (%s) on %s: %s", key, job.GetUID(), wk.name, outcome)
	w.putJob(wk, job)
	awKey := types.NamespacedName{Namespace: key.Namespace, Name: strings.TrimSuffix(key.Name, "-bench")}
	if outcome == wrapupv1alpha1.OutcomeFailed {
		if cp := wk.copies[awKey]; cp != nil {
			// The worker's own controllers run whether or not the
			// manager reaches the worker.
			w.later(w.lag(), func() {
				if wk.copies[awKey] == cp {
					cp.Status.Phase = awv1beta2.AppWrapperFailed
					w.later(w.lag(), func() { w.mirror(awKey) })
				}
			})
		}
	}
}

// gcWorkers: MultiKueue removes, from each worker it reaches, the copies
// (and so the Jobs) of Workloads that are gone or dispatched elsewhere.
func (w *mkWorld) gcWorkers() {
	for _, wk := range w.sortedWorkers() {
		if !wk.up {
			continue
		}
		for _, key := range sortedNames(wk.copies) {
			cp := wk.copies[key]
			wl := w.wls[key]
			if wl != nil && wl.cluster == wk.name && wl.name == cp.Labels[decision.PrebuiltWorkloadLabel] {
				continue
			}
			w.logf("MultiKueue removes the copy of %s (%s) from %s", key, cp.UID, wk.name)
			delete(wk.copies, key)
			jk := types.NamespacedName{Namespace: key.Namespace, Name: key.Name + "-bench"}
			if _, ok := wk.jobs[jk]; ok {
				w.deleteJob(wk, jk)
			}
		}
	}
}

func (w *mkWorld) sortedWorkers() []*mkWorker {
	return []*mkWorker{w.workers["worker-1"], w.workers["worker-2"]}
}

func (w *mkWorld) sortedAWs() []*awv1beta2.AppWrapper {
	var out []*awv1beta2.AppWrapper
	for _, aw := range w.aws.objs {
		out = append(out, aw)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// --- wrapup ---

func (w *mkWorld) startWrapup() {
	w.clock = clocktesting.NewFakeClock(w.now)
	w.queue = newSimQueue(func() time.Time { return w.now })
	for _, wk := range w.sortedWorkers() {
		wk.claims = map[triggers.Owner]bool{}
		wk.cache = map[types.NamespacedName]*unstructured.Unstructured{}
		wk.syncAt = w.now.Add(time.Duration(w.rng.Int63n(int64(3 * time.Second))))
		if wk.up {
			for k, j := range wk.jobs {
				wk.cache[k] = j.DeepCopy()
			}
		}
	}
	w.r = &appWrapperReconciler{
		Cache: w.reader(), Writer: &mkWriter{w: w}, APIReader: w.reader(),
		Recorder: simRecorder{&w.simKernel}, Policies: &celpolicies.Cache{}, Triggers: mkNoTriggers{}, Assign: newAssignments(),
		Counters: simCounters{&w.simKernel}, Clock: w.clock, Clusters: &mkSource{w: w},
		readAhead: func(read func()) { read() },
	}
	w.r.defaults()
	w.r.observe = func(stage string, in decision.Input, d decision.Decision) {
		// Every decision asks for no more than its verdict allows.
		if err := decision.CheckVerdict(d); err != nil {
			w.fail("a %s decision on %s: %v", stage, client.ObjectKeyFromObject(in.AppWrapper), err)
		}
		// No write of the tenant's on the manager's AppWrapper changes it.
		checkTenantBlind(&w.simKernel, w.blindRng, stage, in, d, nil)
		where := ""
		if d.Worker != nil {
			where = " on " + d.Worker.Cluster
		}
		w.logf("wrapup decides (%s) %s%s: %s: %s", stage, client.ObjectKeyFromObject(in.AppWrapper), where, d.Verdict, d.Reason)
	}
	for key := range w.aws.objs {
		w.queue.add(key, w.now)
	}
}

func (w *mkWorld) reconcile(key types.NamespacedName) {
	w.queue.take(key)
	_, _ = w.queue.reconcile(&w.simKernel, w.r, w.clock, key)
}

// runUntil does what falls due up to t: world events, then wrapup's queue.
func (w *mkWorld) runUntil(t time.Time) {
	n := 0
	w.advance(t, w.nextThing, func() bool {
		if n > 200000 {
			w.fail("the world does not settle")
			return false
		}
		n++
		return true
	})
}

// nextThing is the earliest thing due: a world event, or else (at the same
// time) wrapup's queue.
func (w *mkWorld) nextThing() (time.Time, func()) {
	at, do := w.nextEvent()
	if key, qt, ok := w.queue.next(); ok && (do == nil || qt.Before(at)) {
		at, do = qt, func() { w.reconcile(key) }
	}
	return at, do
}

// step makes one random change, then lets time pass.
func (w *mkWorld) step() {
	aws := w.sortedAWs()
	switch x := w.rng.Intn(100); {
	case x < 12 && len(aws) < 3:
		for {
			name := fmt.Sprintf("bench-%d", w.rng.Intn(3))
			if _, taken := w.aws.get(types.NamespacedName{Namespace: "ns", Name: name}); !taken {
				w.newAppWrapper(name)
				break
			}
		}
	case x < 30:
		// MultiKueue dispatches a queued Workload to a worker it reaches.
		for _, aw := range aws {
			if wl := w.wls[client.ObjectKeyFromObject(aw)]; wl != nil && wl.cluster == "" {
				var up []*mkWorker
				for _, wk := range w.sortedWorkers() {
					if wk.up {
						up = append(up, wk)
					}
				}
				if len(up) > 0 {
					w.dispatch(client.ObjectKeyFromObject(aw), up[w.rng.Intn(len(up))])
				}
				break
			}
		}
	case x < 50:
		// A benchmark finishes.
		for _, wk := range w.sortedWorkers() {
			keys := make([]types.NamespacedName, 0, len(wk.jobs))
			for k := range wk.jobs {
				keys = append(keys, k)
			}
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			for _, k := range keys {
				if _, done := w.truth[wk.jobs[k].GetUID()]; done && w.truth[wk.jobs[k].GetUID()].outcome == "" && wk.up && w.rng.Intn(2) == 0 {
					outcome := wrapupv1alpha1.OutcomeSucceeded
					if w.rng.Intn(3) == 0 {
						outcome = wrapupv1alpha1.OutcomeFailed
					}
					w.finishJob(wk, k, outcome)
					return
				}
			}
		}
	case x < 60:
		// A worker goes down, or comes back (its informer lists again).
		wk := w.sortedWorkers()[w.rng.Intn(2)]
		wk.up = !wk.up
		w.logf("%s is %s", wk.name, map[bool]string{true: "back", false: "down"}[wk.up])
		if wk.up {
			wk.cache = map[types.NamespacedName]*unstructured.Unstructured{}
			for _, k := range sortedNames(wk.jobs) {
				wk.cache[k] = wk.jobs[k].DeepCopy()
				if len(wk.claims) > 0 {
					w.queue.add(types.NamespacedName{Namespace: k.Namespace, Name: strings.TrimSuffix(k.Name, "-bench")}, w.now.Add(w.lag()))
				}
			}
		}
	case x < 68:
		// MultiKueue evicts a dispatched Workload (its worker lost, or
		// preempted) and queues it again.
		for _, aw := range aws {
			key := client.ObjectKeyFromObject(aw)
			if wl := w.wls[key]; wl != nil && wl.cluster != "" && w.rng.Intn(2) == 0 {
				w.logf("MultiKueue evicts %s from %s", key, wl.cluster)
				c := *wl
				c.cluster = ""
				w.setWorkload(key, &c)
				break
			}
		}
	case x < 74 && len(aws) > 0:
		// A user deletes an AppWrapper (to create it again later).
		aw := aws[w.rng.Intn(len(aws))]
		key := client.ObjectKeyFromObject(aw)
		w.logf("user deletes %s (%s)", key, aw.UID)
		_, _ = w.aws.delete(key, nil, nil)
	case x < 78:
		w.logf("wrapup restarts")
		w.startWrapup()
	case x < 85:
		w.gcWorkers()
	default:
		for _, aw := range aws {
			w.later(w.lag(), func() { w.mirror(client.ObjectKeyFromObject(aw)) })
		}
	}
	w.runUntil(w.now.Add(time.Duration(w.rng.Int63n(int64(20 * time.Second)))))
}

// settle brings every worker back and lets MultiKueue and wrapup finish.
func (w *mkWorld) settle() {
	for _, wk := range w.sortedWorkers() {
		if !wk.up {
			wk.up = true
			w.logf("%s is back (settling)", wk.name)
			for k, j := range wk.jobs {
				wk.cache[k] = j.DeepCopy()
				w.queue.add(types.NamespacedName{Namespace: k.Namespace, Name: strings.TrimSuffix(k.Name, "-bench")}, w.now)
			}
		}
	}
	w.faults = 0
	for i := 0; i < 30 && w.violation == ""; i++ {
		for _, aw := range w.sortedAWs() {
			w.mirror(client.ObjectKeyFromObject(aw))
		}
		w.gcWorkers()
		w.runUntil(w.now.Add(20 * time.Second))
	}
	w.checkSettled()
}

// --- the oracle ---

func (w *mkWorld) actionFor(o wrapupv1alpha1.Outcome) wrapupv1alpha1.ActionSpec {
	return decision.ActionFor(w.rule, o)
}

// recordedJob is the outcome cr records for aw and the Job it names
// ("" when the AppWrapper's phase decided without one); ok is false when
// cr records no standing outcome of aw.
func recordedJob(cr *wrapupv1alpha1.CompletionRecord, aw *awv1beta2.AppWrapper) (o wrapupv1alpha1.Outcome, job types.UID, ok bool) {
	if !standing(cr, aw) {
		return "", "", false
	}
	for _, t := range cr.Triggers {
		if t.Decided {
			job = t.UID
		}
	}
	return cr.Outcome, job, true
}

// describeMK says what cr records of aw.
func describeMK(cr *wrapupv1alpha1.CompletionRecord) string { return describeCR(cr) }

// checkRecord: a record names a Job that MultiKueue's copy of this
// AppWrapper controlled and that finished with the recorded outcome (or,
// with no Job named, the AppWrapper's copied phase says so).
func (w *mkWorld) checkRecord(aw *awv1beta2.AppWrapper, cr *wrapupv1alpha1.CompletionRecord) {
	outcome, job, ok := recordedJob(cr, aw)
	if !ok {
		return
	}
	if cp := w.ownCopy(aw); job == "" || outcome == wrapupv1alpha1.OutcomeFailed && cp != nil && cp.Status.Phase == awv1beta2.AppWrapperFailed {
		// Decided by the AppWrapper controller's phase: Failed is final
		// whatever the trigger says, as in one cluster; but only the phase
		// of this AppWrapper's own copy, on the worker it is dispatched to.
		if cp == nil || cp.Status.Phase != awv1beta2.AppWrapperFailed && cp.Status.Phase != awv1beta2.AppWrapperSucceeded {
			phase := awv1beta2.AppWrapperPhase("no copy")
			if cp != nil {
				phase = cp.Status.Phase
			}
			w.fail("%s (%s): record %s is decided by a phase, and its own copy is %s (the manager's status says %s)", aw.Name, aw.UID, describeMK(cr), phase, aw.Status.Phase)
		}
		return
	}
	t, ok := w.truth[job]
	switch {
	case !ok:
		w.fail("%s (%s): record %s names a Job that no copy of it controlled", aw.Name, aw.UID, describeMK(cr))
	case t.aw != aw.UID:
		w.fail("%s (%s): record %s names a Job of the copy of another AppWrapper (%s)", aw.Name, aw.UID, describeMK(cr), t.aw)
	case t.outcome != outcome:
		w.fail("%s: record %s, but the Job's outcome is %q", aw.Name, describeMK(cr), t.outcome)
	}
}

// recordOf is the stored CompletionRecord of aw; nil when none.
func (w *mkWorld) recordOf(aw *awv1beta2.AppWrapper) *wrapupv1alpha1.CompletionRecord {
	cr, _ := w.crecs.get(types.NamespacedName{Namespace: aw.Namespace, Name: RecordName(aw.Name, string(aw.UID))})
	return cr
}

// ownCopy is MultiKueue's copy of aw on the worker it is dispatched to,
// when that worker holds one made for aw.
func (w *mkWorld) ownCopy(aw *awv1beta2.AppWrapper) *awv1beta2.AppWrapper {
	key := client.ObjectKeyFromObject(aw)
	wl := w.wls[key]
	if wl == nil || wl.cluster == "" {
		return nil
	}
	if cp := w.workers[wl.cluster].copies[key]; cp != nil && cp.Labels[decision.PrebuiltWorkloadLabel] == wl.name {
		return cp
	}
	return nil
}

func (w *mkWorld) checkDelete(aw *awv1beta2.AppWrapper) {
	cr := w.recordOf(aw)
	outcome, _, ok := recordedJob(cr, aw)
	if !ok {
		w.fail("wrapup deleted %s (%s), whose run has no outcome recorded (%s)", aw.Name, aw.UID, describeMK(cr))
		return
	}
	w.checkRecord(aw, cr)
	if a := w.actionFor(outcome); a.Action != wrapupv1alpha1.ActionDeleteAll {
		w.fail("wrapup deleted %s on %s, whose action is %s", aw.Name, outcome, a.Action)
	}
	// A recorded success (checked above against what ran) is final, and
	// deleted when due, the worker read or not; a failure may be cleared
	// by a retry there, which only the worker shows.
	if wl := w.wls[client.ObjectKeyFromObject(aw)]; wl != nil && wl.cluster != "" && !w.workers[wl.cluster].up && outcome != wrapupv1alpha1.OutcomeSucceeded {
		w.fail("wrapup deleted %s on a recorded %s while its worker %s was down", aw.Name, outcome, wl.cluster)
	}
}

// checkSettled: no completion is lost.
func (w *mkWorld) checkSettled() {
	for _, aw := range w.sortedAWs() {
		key := client.ObjectKeyFromObject(aw)
		wl := w.wls[key]
		if wl == nil || wl.cluster == "" {
			continue
		}
		wk := w.workers[wl.cluster]
		job := wk.jobs[types.NamespacedName{Namespace: key.Namespace, Name: key.Name + "-bench"}]
		cp := wk.copies[key]
		if job == nil || cp == nil || cp.Labels[decision.PrebuiltWorkloadLabel] != wl.name {
			continue
		}
		t := w.truth[job.GetUID()]
		if t.aw != aw.UID || t.outcome == "" {
			continue
		}
		cr := w.recordOf(aw)
		rec, recJob, recorded := recordedJob(cr, aw)
		outcome := t.outcome
		if recorded && rec == wrapupv1alpha1.OutcomeSucceeded && w.truth[recJob].aw == aw.UID {
			// A recorded success is final: a run again after it (a
			// re-dispatch) does not change what is done.
			outcome = rec
		}
		switch a := w.actionFor(outcome); {
		case a.Action == wrapupv1alpha1.ActionDeleteAll:
			w.fail("lost completion: %s (%s), whose Job %s on %s %s, still exists (record %s)", key, aw.UID, job.GetUID(), wk.name, t.outcome, describeMK(cr))
		case !recorded || rec != outcome:
			w.fail("lost completion: %s, whose Job on %s %s, has record %s", key, wk.name, t.outcome, describeMK(cr))
		}
	}
}

// --- what wrapup sees ---

// reader is what wrapup reads of the manager, through the kernel's reader:
// its AppWrappers, as they are (the cache and the API server alike), the
// one Namespace, the one rule; no call fails.
func (w *mkWorld) reader() *simReader {
	return &simReader{name: "the manager reader",
		aw:    func(key types.NamespacedName) *awv1beta2.AppWrapper { return w.aws.objs[key] },
		ns:    func(string) *corev1.Namespace { return w.ns },
		rules: func() []*wrapupv1alpha1.CompletionRule { return []*wrapupv1alpha1.CompletionRule{w.rule} },
		aws:   w.sortedAWs,
		other: func(key client.ObjectKey, obj client.Object) error {
			o, ok := obj.(*wrapupv1alpha1.CompletionRecord)
			if !ok {
				return fmt.Errorf("the manager reader does not read %T", obj)
			}
			cr, ok := w.crecs.get(key)
			if !ok {
				return apierrors.NewNotFound(simCompletionRecords, key.Name)
			}
			cr.DeepCopyInto(o)
			return nil
		},
	}
}

// mkWriter is wrapup's client.Writer on the manager: it writes
// CompletionRecords, patches the mirror on AppWrappers and deletes them on
// the kernel's stores, which refuse a call at the world's fault rate, and
// checks each write that lands. A deletion must carry its preconditions.
type mkWriter struct {
	simNoWrites
	w *mkWorld
}

func (s *mkWriter) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	return s.writeRecord(obj, false)
}

func (s *mkWriter) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return s.writeRecord(obj, true)
}

func (s *mkWriter) writeRecord(obj client.Object, update bool) error {
	w := s.w
	cr, ok := obj.(*wrapupv1alpha1.CompletionRecord)
	if !ok {
		return fmt.Errorf("wrapup writes nothing but CompletionRecords, not %T", obj)
	}
	if w.fault() != "" {
		return simUnavailable()
	}
	check := func(next *wrapupv1alpha1.CompletionRecord) {
		aw, ok := w.aws.get(types.NamespacedName{Namespace: next.Namespace, Name: next.AppWrapper.Name})
		if !ok || aw.UID != next.AppWrapper.UID || next.Name != RecordName(aw.Name, string(aw.UID)) {
			w.fail("wrapup wrote the CompletionRecord %s of %s (%s), which does not exist", next.Name, next.AppWrapper.Name, next.AppWrapper.UID)
			return
		}
		w.checkRecord(aw, next)
		if standing(next, aw) {
			w.records++
		}
		w.logf("wrapup records on %s (%s): %s", aw.Name, aw.UID, describeMK(next))
	}
	in := cr.DeepCopy()
	in.FinishedAt = metav1.NewMicroTime(in.FinishedAt.Truncate(time.Microsecond))
	var stored *wrapupv1alpha1.CompletionRecord
	var err error
	if update {
		_, stored, err = w.crecs.update(in, func(_, next *wrapupv1alpha1.CompletionRecord) { check(next) })
	} else {
		stored, err = w.crecs.create(in, check)
	}
	if err != nil {
		return err
	}
	stored.DeepCopyInto(cr)
	return nil
}

// Patch writes the mirror: the keys of it, and no resourceVersion.
func (s *mkWriter) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
	w := s.w
	key := client.ObjectKeyFromObject(obj)
	if w.fault() != "" {
		return simUnavailable()
	}
	data, err := mergePatchData(obj, patch)
	if err != nil {
		return err
	}
	if rv := patchPrecondition(data); rv != "" {
		w.fail("wrapup's mirror on %s carries the resourceVersion %s: %s", key, rv, data)
	}
	_, next, err := w.aws.patch(key, data, func(cur, next *awv1beta2.AppWrapper) {
		if a, b := simMeta(next), simMeta(cur); len(a) > 4 || len(b) > 4 {
			w.fail("wrapup's mirror on %s writes more than its keys: %s", key, data)
		}
		outcome, _, ok := recordedJob(w.recordOf(cur), cur)
		if got := next.Labels[wrapupv1alpha1.OutcomeLabel]; got != string(outcome) || !ok && got != "" {
			w.fail("wrapup's mirror on %s says %q, its record %s", key, got, describeMK(w.recordOf(cur)))
		}
	})
	if err != nil {
		return err
	}
	next.DeepCopyInto(obj.(*awv1beta2.AppWrapper))
	return nil
}

func (s *mkWriter) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	w := s.w
	key := client.ObjectKeyFromObject(obj)
	if w.fault() != "" {
		return simUnavailable()
	}
	pre := (&client.DeleteOptions{}).ApplyOptions(opts).Preconditions
	if pre == nil || pre.UID == nil || pre.ResourceVersion == nil {
		w.fail("wrapup deleted %s without UID and resourceVersion preconditions", key)
	}
	_, err := w.aws.delete(key, pre, func(cur *awv1beta2.AppWrapper) {
		w.checkDelete(cur)
		if w.deleted[cur.UID] {
			w.fail("wrapup deleted %s (%s) twice", key, cur.UID)
		}
		w.deleted[cur.UID] = true
		w.deletes++
		w.logf("wrapup DELETE %s (%s)", key, cur.UID)
	})
	return err
}

// mkSource is the worker clusters as workerClusters gives them.
type mkSource struct{ w *mkWorld }

func (s *mkSource) workload(_ context.Context, aw *awv1beta2.AppWrapper, live bool) (*kueue.Workload, error) {
	key := client.ObjectKeyFromObject(aw)
	var wl mkWorkload
	if live {
		cur := s.w.wls[key]
		if cur == nil {
			return nil, nil
		}
		wl = *cur
	} else {
		cur, ok := s.w.wlCache[key]
		if !ok {
			return nil, nil
		}
		wl = cur
	}
	if wl.owner != aw.UID {
		// The index is by controller UID: another AppWrapper's Workload.
		return nil, nil
	}
	out := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: wl.name, Namespace: key.Namespace}}
	if wl.cluster != "" {
		out.Status.ClusterName = ptr.To(wl.cluster)
	}
	return out, nil
}

func (s *mkSource) conn(_ context.Context, cluster string) (*workerConn, error) {
	wk := s.w.workers[cluster]
	return &workerConn{cluster: cluster, reader: s.w.workerReader(wk), triggers: &mkWorkerTriggers{w: s.w, wk: wk}}, nil
}

func (s *mkSource) release(cluster string, key types.NamespacedName) {
	for owner := range s.w.workers[cluster].claims {
		if owner.Rule == "" && owner.AppWrapper == key {
			delete(s.w.workers[cluster].claims, owner)
		}
	}
}

// workerReader is what wrapup reads of the worker wk, through the
// kernel's reader: MultiKueue's copies there and their Jobs; a call fails
// while wk is down, and at the world's fault rate.
func (w *mkWorld) workerReader(wk *mkWorker) *simReader {
	return &simReader{name: "the worker reader",
		fail: func(string) error {
			if !wk.up {
				return fmt.Errorf("dial tcp %s: connection refused", wk.name)
			}
			if w.failNow() {
				return simUnavailable()
			}
			return nil
		},
		aw: func(key types.NamespacedName) *awv1beta2.AppWrapper { return wk.copies[key] },
		other: func(key client.ObjectKey, obj client.Object) error {
			o, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return fmt.Errorf("the worker reader does not read %T", obj)
			}
			job, ok := wk.jobs[key]
			if !ok {
				return apierrors.NewNotFound(schema.GroupResource{Group: "batch", Resource: "jobs"}, key.Name)
			}
			o.Object = job.DeepCopy().Object
			return nil
		},
	}
}

type mkWorkerTriggers struct {
	w  *mkWorld
	wk *mkWorker
}

func (t *mkWorkerTriggers) Ensure(owner triggers.Owner, _ schema.GroupKind, _ celpolicies.Fields) error {
	t.wk.claims[owner] = true
	return nil
}
func (t *mkWorkerTriggers) Keep(key types.NamespacedName, kinds []schema.GroupKind) {
	for owner := range t.wk.claims {
		if owner.Rule == "" && owner.AppWrapper == key && !slices.Contains(kinds, owner.Kind) {
			delete(t.wk.claims, owner)
		}
	}
}
func (t *mkWorkerTriggers) Get(_ schema.GroupKind, namespace, name string, _ celpolicies.Fields) (*unstructured.Unstructured, bool, error) {
	if t.w.now.Before(t.wk.syncAt) {
		return nil, false, nil
	}
	if j, ok := t.wk.cache[types.NamespacedName{Namespace: namespace, Name: name}]; ok {
		return j.DeepCopy(), true, nil
	}
	return nil, true, nil
}
func (t *mkWorkerTriggers) Kind(schema.GroupKind) decision.Kind {
	return decision.Kind{State: decision.KindWatched}
}
func (t *mkWorkerTriggers) Resource(schema.GroupKind) (schema.GroupVersionResource, bool) {
	return schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, true
}
func (t *mkWorkerTriggers) Wait(_ schema.GroupKind, key types.NamespacedName) {
	t.w.later(t.wk.syncAt.Sub(t.w.now), func() { t.w.queue.add(key, t.w.now) })
}

// The manager's own trigger watches: an AppWrapper that MultiKueue
// dispatches has no trigger here.
type mkNoTriggers struct{}

func (mkNoTriggers) Ensure(triggers.Owner, schema.GroupKind, celpolicies.Fields) error { return nil }
func (mkNoTriggers) Keep(types.NamespacedName, []schema.GroupKind)                     {}
func (mkNoTriggers) Get(schema.GroupKind, string, string, celpolicies.Fields) (*unstructured.Unstructured, bool, error) {
	return nil, true, nil
}
func (mkNoTriggers) Kind(schema.GroupKind) decision.Kind {
	return decision.Kind{State: decision.KindWatched}
}
func (mkNoTriggers) Resource(schema.GroupKind) (schema.GroupVersionResource, bool) {
	return schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, true
}
func (mkNoTriggers) Wait(schema.GroupKind, types.NamespacedName) {}

// --- the test ---

func runMKHistory(seed int64, steps int) *mkWorld {
	w := newMKWorld(seed)
	for i := 0; i < steps && w.violation == ""; i++ {
		w.step()
	}
	if w.violation == "" {
		w.settle()
	}
	return w
}

// TestSimulationMultiKueue runs random MultiKueue histories (seeded) and
// checks the oracle's invariants in each.
func TestSimulationMultiKueue(t *testing.T) {
	logf.SetLogger(logr.Discard())
	if *simMKSeed != 0 {
		w := runMKHistory(*simMKSeed, *simSteps)
		t.Log("\n" + strings.Join(w.trace, "\n"))
		if w.violation != "" {
			t.Fatalf("seed %d: %s", *simMKSeed, w.violation)
		}
		return
	}
	deletes, records := 0, 0
	for seed := int64(1); seed <= int64(*simMKHistories); seed++ {
		w := runMKHistory(seed, *simSteps)
		if w.violation != "" {
			t.Fatalf("seed %d: %s (replay: go test ./gc -run TestSimulationMultiKueue -sim.mk-seed=%d)\n%s", seed, w.violation, seed,
				strings.Join(w.trace[max(0, len(w.trace)-60):], "\n"))
		}
		deletes += w.deletes
		records += w.records
	}
	if deletes == 0 || records == 0 {
		t.Fatalf("%d histories made %d deletes and %d records: the world never finishes a benchmark", *simMKHistories, deletes, records)
	}
	t.Logf("%d histories: %d records, %d deletes of manager AppWrappers", *simMKHistories, records, deletes)
}

func sortedNames[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	keys := make([]types.NamespacedName, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}
