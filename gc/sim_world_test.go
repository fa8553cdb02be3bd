package gc

// The world of the decision simulation (sim_test.go): an API server that
// holds AppWrappers and CompletionRecords (the simulation kernel's stores),
// their trigger objects, rules and Namespaces; a model of the AppWrapper
// controller v1.2 and of Kueue; caches that lag the API server; and the
// kernel's clock. wrapup's appWrapperReconciler runs against it through the
// interfaces it has in production: a cache reader, an API reader, a writer,
// a trigger cache and an event recorder.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
	"github.com/wrapup-dev/wrapup/test/util"
)

var (
	simJobGK = schema.GroupKind{Group: "batch", Kind: "Job"}
	simPodGK = schema.GroupKind{Kind: "Pod"}
	// A RayJob's failure the AppWrapper controller does not see (v1.2
	// reads no RayJob status): a failed RayJob leaves its AppWrapper Running.
	simRayJobGK  = schema.GroupKind{Group: "ray.io", Kind: "RayJob"}
	simEvalRunGK = schema.GroupKind{Group: "example.wrapup.dev", Kind: "EvalRun"} // never served
	// wrapup may not list ConfigMaps.
	simConfigMapGK = schema.GroupKind{Kind: "ConfigMap"}
	simStart       = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
)

// simRule is what the world knows of a rule, from which its object is made.
type simRule struct {
	name      string
	priority  int32
	kind      string // "Job", "Pod", "RayJob", "EvalRun" (not served) or "" (the annotated component)
	success   string // "" built-in, "never" (success: false), "error" (a runtime error)
	broken    bool   // does not compile
	badSel    bool   // an appWrapperSelector that does not parse
	benchOnly bool   // appWrapperSelector role=bench
	team      string // namespaceSelector team=..., "" for none
	onSuccess wrapupv1alpha1.ActionSpec
	onFailure wrapupv1alpha1.ActionSpec
	dryRun    bool
	// policy is trigger.policy: "" (unset, One), "One", "All" or "Any".
	policy string
	// noHistory: history.disabled: a record goes with its AppWrapper.
	noHistory bool
	// history is history.ttlSecondsAfterFinished; 0 for the default.
	history int32
}

// historyTTL is how long r keeps a record after its AppWrapper is gone.
func (r simRule) historyTTL() int32 {
	if r.history > 0 {
		return r.history
	}
	return wrapupv1alpha1.DefaultHistoryTTLSeconds
}

// String is r as traces and messages show it: its TTLs by value, not by
// address, so that a seed's trace reads the same from one run to the next.
func (r simRule) String() string {
	return fmt.Sprintf("{name:%s priority:%d kind:%s success:%s broken:%v badSel:%v benchOnly:%v team:%s onSuccess:%s onFailure:%s dryRun:%v policy:%s noHistory:%v history:%d}",
		r.name, r.priority, r.kind, r.success, r.broken, r.badSel, r.benchOnly, r.team, simAction(r.onSuccess), simAction(r.onFailure), r.dryRun, r.policy, r.noHistory, r.history)
}

// simAction is an action as traces show it.
func simAction(a wrapupv1alpha1.ActionSpec) string {
	ttl := "<nil>"
	if a.TTLSecondsAfterFinished != nil {
		ttl = strconv.Itoa(int(*a.TTLSecondsAfterFinished))
	}
	return fmt.Sprintf("{Action:%s TTLSecondsAfterFinished:%s}", a.Action, ttl)
}

// many says whether the rule's policy lets several candidates decide.
func (r simRule) many() bool { return r.policy == "All" || r.policy == "Any" }

func (r simRule) object(gen int64, uid types.UID) *wrapupv1alpha1.CompletionRule {
	o := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: r.name, UID: uid, Generation: gen}}
	s := &o.Spec
	s.Priority = r.priority
	switch r.kind {
	case "Job":
		s.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"}
	case "Pod":
		s.Trigger = wrapupv1alpha1.TriggerSpec{Kind: "Pod"}
	case "RayJob":
		s.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "ray.io", Kind: "RayJob"}
	case "EvalRun":
		s.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: simEvalRunGK.Group, Kind: "EvalRun"}
		s.Success = "object.status.phase == 'Done'"
	}
	switch r.success {
	case "never":
		s.Success = "false"
	case "error":
		s.Success = "object.status.noSuchField == 1"
	}
	if r.broken {
		s.Success = "object.status.("
	}
	if r.benchOnly {
		s.AppWrapperSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"role": "bench"}}
	}
	if r.badSel {
		s.AppWrapperSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "role", Operator: "Bogus"}}}
	}
	if r.team != "" {
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": r.team}}
	}
	s.OnSuccess, s.OnFailure, s.DryRun = r.onSuccess, r.onFailure, r.dryRun
	s.History.Disabled = r.noHistory
	if r.history > 0 {
		s.History.TTLSecondsAfterFinished = ptr.To(r.history)
	}
	s.Trigger.Policy = wrapupv1alpha1.TriggerPolicy(r.policy)
	return o
}

// simTrig is one trigger component of an AppWrapper model: a component
// that a rule may take as its trigger (or as one of its candidates).
type simTrig struct {
	index int    // its index in spec.components
	kind  string // "Job", "Pod" or "RayJob"
	// base is the template's name, or its generateName without the final "-".
	base string
	// generated: the template has a generateName, and each attempt's
	// object its own name.
	generated bool
	annotated bool   // annotated wrapup.dev/trigger: "true"
	name      string // the current object's name; "" before a generated one is created
}

// template is the identity of the component's template.
func (t *simTrig) template() string {
	if t.generated {
		return t.base + "-*"
	}
	return t.base
}

// ref is the component as a record names it.
func (t *simTrig) ref() string { return simGroups[t.kind] + "/" + t.kind + "/" + t.template() }

// simAW is what the AppWrapper controller model keeps of one AppWrapper.
type simAW struct {
	key types.NamespacedName
	uid types.UID
	// trigs are its trigger components (Jobs, Pods, RayJobs), in the order
	// of spec.components: one, or several (of one kind, or annotated ones
	// of several kinds).
	trigs []simTrig
	// alone: no inference component, so the AppWrapper controller marks it
	// Succeeded once its triggers succeeded.
	alone bool
	// configMap: the annotated component is a ConfigMap, a kind wrapup may
	// not watch (any tenant can write one); its one trigger is not annotated.
	configMap bool
	// configIndex is the ConfigMap's index in spec.components.
	configIndex int
	// next is when the AppWrapper controller looks at it again; zero: on a change.
	next time.Time
	// holdStart is when it first started holding the failed AppWrapper
	// (its own condition's time moves on; see awController).
	holdStart time.Time
	// deployed is its condition ResourcesDeployed: its components were
	// created and not yet all deleted.
	deployed bool
	// createdAt is when it last created its components: its cache may
	// not have them yet for a moment (see awController, Running).
	createdAt time.Time
	// deploys counts the deployments it began (Resuming: the first, after
	// a reset, after Kueue admitted it again).
	deploys int
	// inferenceFailed: the inference component failed (until the next attempt).
	inferenceFailed bool
	// mirrors are the mirrors of its record wrapup wrote on its metadata,
	// each as its wrapup.dev/* keys (simMeta): a tenant may put an earlier
	// one back (forge).
	mirrors []map[string]string
	// attempts counts the attempts that named generated objects.
	attempts int
}

// clone is a copy of m that shares nothing with it.
func (m *simAW) clone() simAW {
	c := *m
	c.trigs = append([]simTrig(nil), m.trigs...)
	c.mirrors = nil
	return c
}

// describe says what m wraps, for traces and messages.
func (m *simAW) describe() string {
	parts := make([]string, len(m.trigs))
	for i, t := range m.trigs {
		parts[i] = fmt.Sprintf("%d:%s", t.index, t.kind)
		if t.annotated {
			parts[i] += "(annotated)"
		}
		if t.generated {
			parts[i] += "(generated)"
		}
	}
	return strings.Join(parts, ",")
}

// simSaved is a saved manifest of an AppWrapper.
type simSaved struct {
	aw *awv1beta2.AppWrapper
	m  simAW
}

// recreate creates the AppWrapper of a saved manifest again: metadata
// (wrapup's record with it, if it had one) and spec, a new UID, no status.
func (w *simWorld) recreate(s simSaved) {
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: s.aw.Name, Namespace: s.aw.Namespace,
		Labels: s.aw.Labels, Annotations: s.aw.Annotations, CreationTimestamp: metav1.NewTime(w.now.Truncate(time.Second))}, Spec: s.aw.Spec}
	m := s.m.clone()
	m.uid, m.next, m.holdStart, m.inferenceFailed, m.attempts, m.deployed, m.deploys = w.newUID("aw"), time.Time{}, time.Time{}, false, 0, false, 0
	for i := range m.trigs {
		if m.trigs[i].generated {
			m.trigs[i].name = ""
		}
	}
	aw.UID = m.uid
	w.models[m.uid] = &m
	w.logf("user creates AppWrapper %s (%s) again from its saved manifest, with the metadata %v", m.key, m.uid, simMeta(aw))
	w.aws.put(aw)
}

// simTruth is what happened to a trigger object, by UID.
type simTruth struct {
	aw      types.UID
	outcome wrapupv1alpha1.Outcome // "" while running
}

// simDelivery is a change on its way to a cache.
type simDelivery struct {
	at  time.Time
	seq int
	key string
	obj client.Object // nil: deleted
}

// simCache is a cache of one resource type that lags the API server: each
// change arrives in order, after a random delay, as a watch delivers it.
type simCache struct {
	objs    map[string]client.Object
	pending []simDelivery
	last    time.Time
}

func newSimCache() *simCache { return &simCache{objs: map[string]client.Object{}} }

// simWorld is the simulated cluster.
type simWorld struct {
	simKernel

	// aws are the AppWrappers on the API server (the kernel's store).
	aws   *simStore[*awv1beta2.AppWrapper]
	trigs map[string]*unstructured.Unstructured // kind/namespace/name
	rules map[string]*wrapupv1alpha1.CompletionRule
	nss   map[string]*corev1.Namespace
	// crecs are the CompletionRecords on the API server.
	crecs *simStore[*wrapupv1alpha1.CompletionRecord]
	// goneAWs are the AppWrappers deleted, as they were last, by UID.
	goneAWs map[types.UID]*awv1beta2.AppWrapper
	// kubelet is when the kubelet next acts on each Pod being deleted
	// (by its key): it stops the containers and writes the Pod's terminal
	// phase, then removes it (kubeletTerminate).
	kubelet map[string]time.Time
	// refuseRecords: the API server refuses every CompletionRecord write
	// (a quota, a webhook), for a while: nothing is recorded, and so
	// nothing deleted, until it lets them through.
	refuseRecords bool

	ruleSpecs map[string]simRule
	models    map[types.UID]*simAW
	// saved are manifests users kept of AppWrappers (kubectl get -o yaml),
	// with the model of what they wrap, to create them again.
	saved map[types.NamespacedName]simSaved
	truth map[types.UID]*simTruth

	// crecCache is wrapup's cache of CompletionRecords, which keeps what
	// slimCompletionRecord keeps.
	awCache, trigCache, ruleCache, nsCache, crecCache *simCache
	// blindRng draws the rewrites of checkBlind: a generator of its own,
	// so that the checks leave the world's history as it is.
	blindRng *rand.Rand

	wr *simWrapup

	// harsh adds, when time passes, an admin renaming or deleting rules,
	// breaking or fixing the rule that decides for an AppWrapper with a
	// record, and heavy API faults (TestSimulationHarsh, -sim.harsh).
	harsh bool
	// maxLag bounds the delay of the caches.
	maxLag time.Duration

	checks simChecks
	// explainPolicies compiles rules for the view.Explain checks.
	explainPolicies *celpolicies.Cache
	// perKind: the admin writes one rule per kind (perKindShape).
	perKind bool
}

func newSimWorld(seed int64) *simWorld {
	w := &simWorld{
		simKernel: newSimKernel(seed),
		trigs:     map[string]*unstructured.Unstructured{},
		rules:     map[string]*wrapupv1alpha1.CompletionRule{}, nss: map[string]*corev1.Namespace{},
		goneAWs:   map[types.UID]*awv1beta2.AppWrapper{},
		ruleSpecs: map[string]simRule{}, models: map[types.UID]*simAW{}, truth: map[types.UID]*simTruth{},
		saved: map[types.NamespacedName]simSaved{}, kubelet: map[string]time.Time{},
		awCache: newSimCache(), trigCache: newSimCache(), ruleCache: newSimCache(), nsCache: newSimCache(), crecCache: newSimCache(),
		maxLag: 2 * time.Second, explainPolicies: &celpolicies.Cache{}, blindRng: rand.New(rand.NewSource(seed ^ 0xb1d)),
	}
	w.loseAnswers = true
	w.aws = newAWStore(&w.simKernel)
	// The AppWrapper controller reconciles on every change of an
	// AppWrapper (wrapup's own patches included); wrapup's cache follows.
	w.aws.stored = func(aw *awv1beta2.AppWrapper) {
		w.deliver(w.awCache, client.ObjectKeyFromObject(aw).String(), aw)
		if m := w.models[aw.UID]; m != nil {
			w.wake(m, w.latency())
		}
		w.noteForces()
	}
	w.aws.removed = func(aw *awv1beta2.AppWrapper) {
		w.goneAWs[aw.UID] = aw
		w.deliver(w.awCache, client.ObjectKeyFromObject(aw).String(), nil)
	}
	w.crecs = newSimStore(&w.simKernel, simCompletionRecords, "crec", func() *wrapupv1alpha1.CompletionRecord { return &wrapupv1alpha1.CompletionRecord{} })
	w.crecs.stored = func(cr *wrapupv1alpha1.CompletionRecord) {
		w.deliver(w.crecCache, client.ObjectKeyFromObject(cr).String(), cr)
	}
	w.crecs.removed = func(cr *wrapupv1alpha1.CompletionRecord) {
		w.deliver(w.crecCache, client.ObjectKeyFromObject(cr).String(), nil)
	}
	w.checks.init()
	// A third of the worlds have their rules written one per kind; the
	// choice comes from a generator of its own, so that the histories of
	// the other worlds (and the regression seeds) stay as they were.
	w.perKind = rand.New(rand.NewSource(seed^0x5eed)).Intn(3) == 0
	for _, ns := range []struct{ name, team string }{{"ns-a", "a"}, {"ns-b", "b"}} {
		w.putNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name, Labels: map[string]string{"team": ns.team}}})
	}
	return w
}

// lag is how late a change reaches a cache.
func (w *simWorld) lag() time.Duration {
	if w.maxLag == 0 {
		return 0
	}
	d := time.Duration(w.rng.Int63n(int64(w.maxLag)))
	if w.rng.Intn(20) == 0 {
		d *= 10 // now and then, a watch far behind
	}
	return d
}

// deliver sends a change of obj (nil: deleted) to cache c.
func (w *simWorld) deliver(c *simCache, key string, obj client.Object) {
	at := w.now.Add(w.lag())
	if at.Before(c.last) {
		at = c.last // a watch delivers in order
	}
	c.last = at
	w.seq++
	var cp client.Object
	if obj != nil {
		cp = obj.DeepCopyObject().(client.Object)
	}
	c.pending = append(c.pending, simDelivery{at: at, seq: w.seq, key: key, obj: cp})
}

// watchAhead, now and then, lands in wrapup's AppWrapper cache every
// change on its way there before the API server's answer to wrapup's write
// reaches wrapup: the watch and the answer travel apart, and the watch
// event of a write may come first (client-go's reflector and the client's
// request are separate connections).
func (w *simWorld) watchAhead() {
	if w.rng.Intn(3) != 0 {
		return
	}
	if len(w.awCache.pending) > 0 {
		w.logf("wrapup's AppWrapper cache catches up before the answer")
	}
	for len(w.awCache.pending) > 0 {
		w.applyDelivery(w.awCache)
	}
}

// --- writes to the API server, by the world's actors ---

func (w *simWorld) putNamespace(ns *corev1.Namespace) {
	ns.ResourceVersion = w.nextRV()
	w.nss[ns.Name] = ns
	w.deliver(w.nsCache, ns.Name, ns)
	w.noteForces()
}

func (w *simWorld) putRule(r *wrapupv1alpha1.CompletionRule) {
	r.ResourceVersion = w.nextRV()
	w.rules[r.Name] = r
	w.deliver(w.ruleCache, r.Name, r)
	w.noteForces()
}

func (w *simWorld) deleteRule(name string) {
	delete(w.rules, name)
	delete(w.ruleSpecs, name)
	w.rv++
	w.deliver(w.ruleCache, name, nil)
	w.noteForces()
}

func trigKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

func (w *simWorld) putTrigger(u *unstructured.Unstructured) {
	u.SetResourceVersion(w.nextRV())
	k := trigKey(u.GetKind(), u.GetNamespace(), u.GetName())
	w.trigs[k] = u
	w.deliver(w.trigCache, k, u)
}

func (w *simWorld) deleteTrigger(k string) {
	if _, ok := w.trigs[k]; !ok {
		return
	}
	delete(w.trigs, k)
	w.rv++
	w.deliver(w.trigCache, k, nil)
}

// gracefulDelete deletes the trigger object k as the API server does with
// Background propagation. A Pod is deleted gracefully: it gets a
// deletionTimestamp, and its kubelet stops it, gives it a terminal phase
// and only then removes it (kubeletTerminate). Any other kind goes at
// once: the Job controller puts no finalizer on a Job (k8s v1.37.2
// pkg/controller/job/job_controller.go adds batch.kubernetes.io/job-tracking
// to its pods only), and the garbage collector deletes the pods after it.
// disruption, when not "", is the reason of the DisruptionTarget condition
// the deleter sets first (the eviction API, the scheduler's preemption).
func (w *simWorld) gracefulDelete(k, disruption string) {
	u, ok := w.trigs[k]
	if !ok || u.GetDeletionTimestamp() != nil {
		return
	}
	if u.GetKind() != "Pod" {
		w.deleteTrigger(k)
		return
	}
	u = u.DeepCopy()
	if disruption != "" {
		addPodCondition(u, "DisruptionTarget", disruption)
	}
	ts := metav1.NewTime(w.now)
	u.SetDeletionTimestamp(&ts)
	u.SetDeletionGracePeriodSeconds(ptr.To(int64(30)))
	w.putTrigger(u)
	// The containers stop within the grace period, most at once on SIGTERM.
	w.kubelet[k] = w.now.Add(time.Duration(w.rng.Int63n(int64(3 * time.Second))))
}

// ttlDelete is the TTL-after-finished controller deleting the finished
// Job k once its TTL passed: with Foreground propagation, so that the Job
// stays, with a deletionTimestamp and the foregroundDeletion finalizer,
// until the garbage collector has deleted its pods, then goes (k8s v1.37.2
// pkg/controller/ttlafterfinished/ttlafterfinished_controller.go,
// processJob). The Job controller leaves a finished Job as it is (syncJob
// returns at IsJobFinished).
func (w *simWorld) ttlDelete(k string) {
	u, ok := w.trigs[k]
	if !ok || u.GetDeletionTimestamp() != nil {
		return
	}
	u = u.DeepCopy()
	ts := metav1.NewTime(w.now)
	u.SetDeletionTimestamp(&ts)
	u.SetDeletionGracePeriodSeconds(ptr.To(int64(0)))
	u.SetFinalizers([]string{metav1.FinalizerDeleteDependents})
	uid := u.GetUID()
	w.putTrigger(u)
	w.later(time.Duration(w.rng.Int63n(int64(3*time.Second))), func() {
		if cur, ok := w.trigs[k]; ok && cur.GetUID() == uid {
			w.logf("garbage collector: the pods of Job %s (%s) are gone, so is it", k, uid)
			w.deleteTrigger(k)
		}
	})
}

func addPodCondition(u *unstructured.Unstructured, typ, reason string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	conds = append(conds, map[string]any{"type": typ, "status": "True", "reason": reason})
	_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
}

// kubeletTerminate is the kubelet on a Pod being deleted: once its
// containers stopped, it writes the Pod's terminal phase, Succeeded when
// every container exited 0, whatever the restartPolicy (k8s v1.37.2
// pkg/kubelet/kubelet_pods.go, getPhase with podIsTerminal, from
// SyncTerminatingPod), else Failed (a harness killed by SIGTERM exits 143);
// then it removes the Pod (pkg/kubelet/status/status_manager.go, syncPod
// once canBeDeleted). A terminal phase stays as it was.
func (w *simWorld) kubeletTerminate(k string) {
	delete(w.kubelet, k)
	u, ok := w.trigs[k]
	if !ok {
		return
	}
	switch p, _, _ := unstructured.NestedString(u.Object, "status", "phase"); p {
	case "Succeeded", "Failed":
		w.logf("kubelet removes Pod %s (%s)", k, u.GetUID())
		w.deleteTrigger(k)
		return
	}
	u = u.DeepCopy()
	phase := "Failed"
	if w.rng.Intn(2) == 0 {
		phase = "Succeeded" // the harness exits 0 on SIGTERM
	}
	_ = unstructured.SetNestedField(u.Object, phase, "status", "phase")
	w.logf("kubelet: Pod %s (%s) being deleted stopped: %s", k, u.GetUID(), phase)
	w.checks.tornDown++
	w.putTrigger(u)
	w.kubelet[k] = w.now.Add(time.Duration(w.rng.Int63n(int64(500 * time.Millisecond))))
}

// tornDownTrig says whether a trigger object is being torn down (oracle
// side): being deleted, or a Pod disrupted (DisruptionTarget True).
//
// A Job whose terminal condition is from two seconds or more before its deletion
// began is not torn down: its own TTL removes it.
func tornDownTrig(u *unstructured.Unstructured) bool {
	if u == nil {
		return false
	}
	if ts := u.GetDeletionTimestamp(); ts != nil {
		return !(u.GetKind() == "Job" && trigState(u) != "" && !finishedSecond(u).After(ts.Truncate(time.Second).Add(-2*time.Second)))
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); u.GetKind() == "Pod" && m["type"] == "DisruptionTarget" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// finishedSecond is the time, to the second, of a Job's terminal
// condition; the zero time when it has none.
func finishedSecond(u *unstructured.Unstructured) time.Time {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if (m["type"] == "Complete" || m["type"] == "Failed") && m["status"] == "True" {
			at, _ := time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"]))
			return at
		}
	}
	return time.Time{}
}

// live is the live object of the trigger component t of the AppWrapper
// model m; nil when there is none.
func (w *simWorld) live(m *simAW, t *simTrig) *unstructured.Unstructured {
	if t.name == "" {
		return nil
	}
	return w.trigs[trigKey(t.kind, m.key.Namespace, t.name)]
}

// trigsWhere lists the trigger components of m whose live object is there,
// not torn down, and finished (Succeeded or Failed) or not, as finished
// says.
func (w *simWorld) trigsWhere(m *simAW, finished bool) []*simTrig {
	var out []*simTrig
	for i := range m.trigs {
		if t := w.live(m, &m.trigs[i]); t != nil && !tornDownTrig(t) && (trigState(t) != "") == finished {
			out = append(out, &m.trigs[i])
		}
	}
	return out
}

// --- the AppWrapper controller, as a model ---

// latency is the AppWrapper controller's own delay to react.
func (w *simWorld) latency() time.Duration {
	d := 100*time.Millisecond + time.Duration(w.rng.Int63n(int64(2*time.Second)))
	if w.rng.Intn(8) == 0 {
		// A busy controller (a long queue, a slow API server), up to the
		// slack decisions allow for.
		d += time.Duration(w.rng.Int63n(int64(decision.Slack - 3*time.Second)))
	}
	return d
}

func (w *simWorld) wake(m *simAW, after time.Duration) {
	t := w.now.Add(after)
	if m.next.IsZero() || t.Before(m.next) {
		m.next = t
	}
}

// setCond sets the condition t of aw, its time (to the second, as the API
// server keeps it) moved only when its status changes
// (meta.SetStatusCondition).
func setCond(aw *awv1beta2.AppWrapper, t awv1beta2.AppWrapperCondition, status metav1.ConditionStatus, reason string, now time.Time) {
	c := metav1.Condition{Type: string(t), Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	apimeta.SetStatusCondition(&aw.Status.Conditions, c)
}

func simRetryLimit(aw *awv1beta2.AppWrapper) int32 {
	if v, ok := aw.Annotations[awv1beta2.RetryLimitAnnotation]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return int32(n)
		}
	}
	return 3
}

func simDuration(aw *awv1beta2.AppWrapper, key string, def time.Duration) time.Duration {
	if v, ok := aw.Annotations[key]; ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

// trigState is the state of a trigger object: Running, Succeeded or Failed.
func trigState(u *unstructured.Unstructured) wrapupv1alpha1.Outcome {
	if u == nil {
		return ""
	}
	switch u.GetKind() {
	case "Pod":
		p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		switch p {
		case "Succeeded":
			return wrapupv1alpha1.OutcomeSucceeded
		case "Failed":
			return wrapupv1alpha1.OutcomeFailed
		}
		return ""
	case "RayJob":
		d, _, _ := unstructured.NestedString(u.Object, "status", "jobDeploymentStatus")
		j, _, _ := unstructured.NestedString(u.Object, "status", "jobStatus")
		switch {
		case d == "Complete" && j == "SUCCEEDED":
			return wrapupv1alpha1.OutcomeSucceeded
		case d == "Failed":
			return wrapupv1alpha1.OutcomeFailed
		}
		return ""
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["status"] != "True" {
			continue
		}
		switch m["type"] {
		case "Complete":
			return wrapupv1alpha1.OutcomeSucceeded
		case "Failed":
			return wrapupv1alpha1.OutcomeFailed
		}
	}
	return ""
}

// awController is one reconcile of the AppWrapper controller model (v1.2's
// phases, retries, grace periods and deletion hold), for the AppWrapper of
// m. What it does is read from appwrapper v1.2.2
// internal/controller/appwrapper/appwrapper_controller.go (Reconcile) and
// resource_management.go (deleteComponents), as cited at each step.
func (w *simWorld) awController(m *simAW) {
	m.next = time.Time{}
	aw0, ok := w.aws.get(m.key)
	if !ok || aw0.UID != m.uid {
		delete(w.models, m.uid)
		return
	}
	aw := aw0.DeepCopy()
	transition := func(p awv1beta2.AppWrapperPhase) {
		w.logf("appwrapper controller: %s %s -> %s", m.key.Name, aw.Status.Phase, p)
		aw.Status.Phase = p
		w.aws.put(aw)
	}
	// deleteComponents: every component deleted with Background
	// propagation, the condition DeletingResources True/DeletionInitiated
	// set first; done (DeletingResources False/DeletionComplete) once no
	// component and none of their pods is left, else it looks again in 5 s
	// (deleteComponents, and the phases' requeueAfter(5*time.Second)).
	deleteComponents := func() bool {
		setCond(aw, awv1beta2.DeletingResources, metav1.ConditionTrue, "DeletionInitiated", w.now)
		left := false
		for i := range m.trigs {
			tr := &m.trigs[i]
			if u := w.live(m, tr); u != nil {
				if u.GetDeletionTimestamp() == nil {
					w.logf("appwrapper controller: deletes %s %s", tr.kind, tr.name)
				}
				w.gracefulDelete(trigKey(tr.kind, m.key.Namespace, tr.name), "")
				left = left || w.live(m, tr) != nil
			}
		}
		if left {
			m.next = w.now.Add(5 * time.Second)
			return false
		}
		setCond(aw, awv1beta2.DeletingResources, metav1.ConditionFalse, "DeletionComplete", w.now)
		m.deployed = false
		return true
	}
	// undeploy deletes the components it deployed (ResourcesDeployed
	// True), and says when they are gone (ResourcesDeployed False, with
	// the phase as its reason), as each phase that tears them down does.
	undeploy := func() bool {
		if m.deployed && !deleteComponents() {
			return false
		}
		if apimeta.IsStatusConditionTrue(aw.Status.Conditions, string(awv1beta2.ResourcesDeployed)) {
			setCond(aw, awv1beta2.ResourcesDeployed, metav1.ConditionFalse, string(aw.Status.Phase), w.now)
		}
		return true
	}
	resetOrFail := func() {
		if aw.Status.Retries < simRetryLimit(aw) {
			aw.Status.Retries++
			transition(awv1beta2.AppWrapperResetting)
		} else {
			transition(awv1beta2.AppWrapperFailed)
		}
	}
	if !aw.DeletionTimestamp.IsZero() {
		// Its finalizer: Terminating until the components are gone.
		if !deleteComponents() || !undeploy() {
			if aw.Status.Phase != awv1beta2.AppWrapperTerminating {
				transition(awv1beta2.AppWrapperTerminating)
			}
			return
		}
		w.logf("appwrapper controller: finalizes %s", m.key.Name)
		w.aws.remove(m.key)
		delete(w.models, m.uid)
		return
	}
	switch aw.Status.Phase {
	case awv1beta2.AppWrapperEmpty:
		transition(awv1beta2.AppWrapperSuspended)
	case awv1beta2.AppWrapperSuspended:
		if aw.Spec.Suspend {
			return
		}
		aw.Finalizers = []string{"workload.codeflare.dev/finalizer"}
		setCond(aw, awv1beta2.Unhealthy, metav1.ConditionFalse, "Resuming", w.now)
		// "begin deployment": ResourcesDeployed True, since now.
		setCond(aw, awv1beta2.ResourcesDeployed, metav1.ConditionTrue, "Resuming", w.now)
		m.deploys++
		transition(awv1beta2.AppWrapperResuming)
	case awv1beta2.AppWrapperResuming:
		if aw.Spec.Suspend {
			transition(awv1beta2.AppWrapperSuspending)
			return
		}
		w.createTriggers(m, aw)
		m.deployed, m.createdAt = true, w.now
		transition(awv1beta2.AppWrapperRunning)
		w.wake(m, decision.AppWrapperRecheckPeriod+w.latency())
	case awv1beta2.AppWrapperRunning:
		if aw.Spec.Suspend {
			transition(awv1beta2.AppWrapperSuspending)
			return
		}
		// What it sees of the trigger components (every one of them: it
		// knows no trigger, only components). It reads a Job and a Pod
		// through its informers (the manager's cached client), which may
		// not have a component it just created: it then fails the
		// AppWrapper at once, MissingComponent (Running:
		// getComponentStatus, "Only found N deployed components"); it
		// reads a RayJob (unstructured) from the API server. A component
		// being deleted counts as missing too.
		missing, failedJob, failedPods, failedUnseen, succeeded := false, false, false, false, true
		for i := range m.trigs {
			t := w.live(m, &m.trigs[i])
			state := trigState(t)
			switch {
			case t == nil || t.GetDeletionTimestamp() != nil:
				missing = true
			case m.trigs[i].kind != "RayJob" && w.now.Sub(m.createdAt) < time.Second && w.rng.Intn(20) == 0:
				w.logf("appwrapper controller: its cache has not seen %s %s yet", m.trigs[i].kind, t.GetName())
				missing = true
			case state == wrapupv1alpha1.OutcomeFailed && t.GetKind() == "RayJob":
				failedUnseen = true
			case state == wrapupv1alpha1.OutcomeFailed && t.GetKind() == "Job":
				failedJob = true
			case state == wrapupv1alpha1.OutcomeFailed:
				failedPods = true
			}
			succeeded = succeeded && t != nil && state == wrapupv1alpha1.OutcomeSucceeded
		}
		switch {
		case m.inferenceFailed:
			// Another component failed: a failed component, no grace.
			m.inferenceFailed = false
			setCond(aw, awv1beta2.Unhealthy, metav1.ConditionTrue, "FailedComponent", w.now)
			resetOrFail()
		case missing:
			setCond(aw, awv1beta2.Unhealthy, metav1.ConditionTrue, "MissingComponent", w.now)
			transition(awv1beta2.AppWrapperFailed)
		case failedJob:
			// A failed Job is a failed component: no grace.
			setCond(aw, awv1beta2.Unhealthy, metav1.ConditionTrue, "FailedComponent", w.now)
			resetOrFail()
		case failedPods:
			// Failed pods: the failure grace, from when it saw them.
			if c := apimeta.FindStatusCondition(aw.Status.Conditions, string(awv1beta2.Unhealthy)); c == nil || c.Status != metav1.ConditionTrue {
				setCond(aw, awv1beta2.Unhealthy, metav1.ConditionTrue, "FoundFailedPods", w.now)
				w.aws.put(aw)
			}
			c := apimeta.FindStatusCondition(aw.Status.Conditions, string(awv1beta2.Unhealthy))
			deadline := c.LastTransitionTime.Add(simDuration(aw, awv1beta2.FailureGracePeriodDurationAnnotation, decision.AppWrapperFailureGracePeriod))
			if w.now.Before(deadline) {
				m.next = deadline.Add(w.latency())
				return
			}
			resetOrFail()
		case failedUnseen:
			// A failed RayJob, unseen: it stays Running.
			w.wake(m, decision.AppWrapperRecheckPeriod)
		case succeeded && m.alone:
			transition(awv1beta2.AppWrapperSucceeded)
		default:
			if apimeta.IsStatusConditionTrue(aw.Status.Conditions, string(awv1beta2.Unhealthy)) {
				setCond(aw, awv1beta2.Unhealthy, metav1.ConditionFalse, "FoundNoFailedPods", w.now)
				w.aws.put(aw)
			}
			w.wake(m, decision.AppWrapperRecheckPeriod+w.latency())
		}
	case awv1beta2.AppWrapperSuspending:
		// Undeploys whatever the suspend bit says now.
		if !undeploy() {
			w.aws.put(aw)
			return
		}
		setCond(aw, awv1beta2.Unhealthy, metav1.ConditionFalse, "Suspended", w.now)
		transition(awv1beta2.AppWrapperSuspended)
	case awv1beta2.AppWrapperResetting:
		if aw.Spec.Suspend {
			transition(awv1beta2.AppWrapperSuspending)
			return
		}
		if !undeploy() {
			w.aws.put(aw)
			return
		}
		c := apimeta.FindStatusCondition(aw.Status.Conditions, string(awv1beta2.Unhealthy))
		deadline := w.now
		if c != nil {
			deadline = c.LastTransitionTime.Add(90 * time.Second) // retryPausePeriod
		}
		if w.now.Before(deadline) {
			if !apiequality.Semantic.DeepEqual(aw.Status, aw0.Status) {
				w.aws.put(aw)
			}
			m.next = deadline
			return
		}
		// "Reset complete; resuming": ResourcesDeployed True, since now.
		setCond(aw, awv1beta2.ResourcesDeployed, metav1.ConditionTrue, "Resuming", w.now)
		m.deploys++
		transition(awv1beta2.AppWrapperResuming)
	case awv1beta2.AppWrapperFailed:
		// The deletion hold, as v1.2.2 keeps it: DeletingResources
		// False/DeletionPaused, its time moved only when its status
		// changes (meta.SetStatusCondition), waited from that time. The
		// teardown's DeletionInitiated (True) turns it back to
		// DeletionPaused on the next pass with a new time, so the hold is
		// waited once more after the components were deleted (a bug of
		// v1.2.2: Reconcile, case AppWrapperFailed).
		hold := simDuration(aw, awv1beta2.DeletionOnFailureGracePeriodAnnotation, 0)
		if hold > 0 && !aw.Spec.Suspend {
			setCond(aw, awv1beta2.DeletingResources, metav1.ConditionFalse, "DeletionPaused", w.now)
			c := apimeta.FindStatusCondition(aw.Status.Conditions, string(awv1beta2.DeletingResources))
			if m.holdStart.IsZero() {
				// As the API server keeps it: to the second.
				m.holdStart = c.LastTransitionTime.Time.Truncate(time.Second)
			}
			if end := c.LastTransitionTime.Add(hold); w.now.Before(end) {
				if !apiequality.Semantic.DeepEqual(aw.Status, aw0.Status) {
					w.aws.put(aw)
				}
				m.next = end
				return
			}
		}
		if !undeploy() {
			w.aws.put(aw)
			return
		}
		if !apiequality.Semantic.DeepEqual(aw.Status, aw0.Status) {
			w.aws.put(aw)
		}
	case awv1beta2.AppWrapperSucceeded:
		// Its components stay for successTTL (days).
	}
}

// createTriggers creates the trigger components of aw that do not exist,
// running, each with a new UID.
func (w *simWorld) createTriggers(m *simAW, aw *awv1beta2.AppWrapper) {
	named := false
	for i := range m.trigs {
		tr := &m.trigs[i]
		if tr.name != "" && w.live(m, tr) != nil {
			continue
		}
		if tr.generated {
			// A new object, a new name, which the AppWrapper controller
			// writes in the component's status.
			if !named {
				m.attempts++
				named = true
				if len(aw.Status.ComponentStatus) != len(aw.Spec.Components) {
					aw.Status.ComponentStatus = make([]awv1beta2.AppWrapperComponentStatus, len(aw.Spec.Components))
				}
			}
			tr.name = fmt.Sprintf("%s-%d", tr.base, m.attempts)
			aw.Status.ComponentStatus[tr.index].Name = tr.name
		}
		w.createTrigger(m, aw, tr)
	}
}

// createTrigger creates the trigger component tr of aw, running, with a new UID.
func (w *simWorld) createTrigger(m *simAW, aw *awv1beta2.AppWrapper, tr *simTrig) {
	apiVersion := "batch/v1"
	status := map[string]any{"active": int64(1)}
	switch tr.kind {
	case "Pod":
		apiVersion = "v1"
		status = map[string]any{"phase": "Running"}
	case "RayJob":
		apiVersion = "ray.io/v1"
		status = map[string]any{"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": tr.kind, "status": status}}
	u.SetName(tr.name)
	u.SetNamespace(m.key.Namespace)
	u.SetUID(w.newUID("trig"))
	u.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: m.key.Name})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper",
		Name: m.key.Name, UID: aw.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}})
	w.truth[u.GetUID()] = &simTruth{aw: aw.UID}
	w.logf("appwrapper controller: creates %s %s (%s) of %s", tr.kind, tr.name, u.GetUID(), m.key.Name)
	w.putTrigger(u)
}

// finishTrigger makes a running trigger succeed or fail, as its controller would.
func (w *simWorld) finishTrigger(k string, outcome wrapupv1alpha1.Outcome) {
	u := w.trigs[k].DeepCopy()
	switch u.GetKind() {
	case "Pod":
		_ = unstructured.SetNestedField(u.Object, string(outcome), "status", "phase")
	case "RayJob":
		d, j := "Complete", "SUCCEEDED"
		if outcome == wrapupv1alpha1.OutcomeFailed {
			d, j = "Failed", "FAILED"
		}
		_ = unstructured.SetNestedField(u.Object, d, "status", "jobDeploymentStatus")
		_ = unstructured.SetNestedField(u.Object, j, "status", "jobStatus")
	default:
		first, last := "SuccessCriteriaMet", "Complete"
		if outcome == wrapupv1alpha1.OutcomeFailed {
			first, last = "FailureTarget", "Failed"
		}
		// The Job controller writes the conditions' times to the second
		// (metav1.Time).
		at := metav1.NewTime(w.now).UTC().Format(time.RFC3339)
		_ = unstructured.SetNestedSlice(u.Object, []any{
			map[string]any{"type": first, "status": "True", "lastTransitionTime": at},
			map[string]any{"type": last, "status": "True", "lastTransitionTime": at},
		}, "status", "conditions")
		_ = unstructured.SetNestedField(u.Object, int64(0), "status", "active")
	}
	w.truth[u.GetUID()].outcome = outcome
	w.logf("trigger %s (%s) %s", k, u.GetUID(), outcome)
	w.putTrigger(u)
}

// newAppWrapper creates an AppWrapper with a random shape: one trigger
// component (a Job, a Pod or a RayJob), or several: 2 to 4 of one kind,
// some of them annotated, or an annotated Job and an annotated Pod (and
// perhaps an annotated RayJob), in a random order.
func (w *simWorld) newAppWrapper(key types.NamespacedName) {
	m := &simAW{key: key, uid: w.newUID("aw"), alone: w.rng.Intn(4) == 0}
	generated := func() bool { return w.rng.Intn(4) == 0 }
	switch shape := w.rng.Intn(20); {
	case shape < 11:
		t := simTrig{kind: "Job", base: key.Name + "-trigger", annotated: w.rng.Intn(10) < 7}
		m.configMap = t.annotated && w.rng.Intn(8) == 0
		switch w.rng.Intn(4) {
		case 0:
			t.kind = "Pod"
		case 1:
			t.kind = "RayJob"
		}
		t.generated = generated()
		if m.configMap {
			t.annotated = false // the ConfigMap is
		}
		m.trigs = []simTrig{t}
	case shape < 16:
		kind := []string{"Job", "Pod", "RayJob"}[w.rng.Intn(3)]
		n := 2 + w.rng.Intn(3)
		annotate := w.rng.Intn(6) // 0 to 3: every one; 4: some; 5: none
		for i := range n {
			a := annotate < 4 || annotate == 4 && w.rng.Intn(2) == 0
			m.trigs = append(m.trigs, simTrig{kind: kind, base: fmt.Sprintf("%s-%s%d", key.Name, strings.ToLower(kind), i),
				annotated: a, generated: generated()})
		}
	default:
		kinds := []string{"Job", "Pod"}
		if w.rng.Intn(2) == 0 {
			kinds = append(kinds, "RayJob")
		}
		w.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for _, kind := range kinds {
			m.trigs = append(m.trigs, simTrig{kind: kind, base: key.Name + "-" + strings.ToLower(kind), annotated: true, generated: generated()})
		}
	}
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, UID: m.uid, Labels: map[string]string{}, Annotations: map[string]string{}}}
	if w.rng.Intn(10) < 7 {
		aw.Labels["role"] = "bench"
	}
	if !m.alone {
		aw.Spec.Components = append(aw.Spec.Components, simComponent("apps/v1", "Deployment", key.Name+"-inference", false, nil))
	}
	annotated := map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}
	if m.configMap {
		m.configIndex = len(aw.Spec.Components)
		aw.Spec.Components = append(aw.Spec.Components, simComponent("v1", "ConfigMap", key.Name+"-config", false, annotated))
	}
	for i := range m.trigs {
		t := &m.trigs[i]
		var ann map[string]string
		if t.annotated {
			ann = annotated
		}
		t.index = len(aw.Spec.Components)
		apiVersion := map[string]string{"Job": "batch/v1", "Pod": "v1", "RayJob": "ray.io/v1"}[t.kind]
		if t.generated {
			aw.Spec.Components = append(aw.Spec.Components, simComponent(apiVersion, t.kind, t.base+"-", true, ann))
		} else {
			t.name = t.base
			aw.Spec.Components = append(aw.Spec.Components, simComponent(apiVersion, t.kind, t.name, false, ann))
		}
	}
	switch w.rng.Intn(4) {
	case 0:
		aw.Annotations[awv1beta2.RetryLimitAnnotation] = strconv.Itoa(w.rng.Intn(2))
	}
	switch w.rng.Intn(5) {
	case 0:
		aw.Annotations[awv1beta2.FailureGracePeriodDurationAnnotation] = "10s"
	case 1:
		aw.Annotations[awv1beta2.FailureGracePeriodDurationAnnotation] = "3m"
	}
	if w.rng.Intn(5) == 0 {
		aw.Annotations[awv1beta2.DeletionOnFailureGracePeriodAnnotation] = "2m"
	}
	if w.rng.Intn(30) == 0 {
		aw.Annotations[wrapupv1alpha1.IgnoreAnnotation] = "True"
	}
	if w.rng.Intn(12) == 0 {
		// MultiKueue's copy on a worker cluster, as its AppWrapper
		// adapter labels it: never wrapup's to delete.
		aw.Labels[kueue.MultiKueueOriginLabel] = "manager"
		aw.Labels["kueue.x-k8s.io/prebuilt-workload-name"] = "appwrapper-" + key.Name
	}
	aw.Spec.Suspend = w.rng.Intn(2) == 0
	aw.CreationTimestamp = metav1.NewTime(w.now.Truncate(time.Second))
	if w.rng.Intn(8) == 0 {
		// A user who may only create AppWrappers plants a record at
		// creation.
		shape := w.forgeOn(aw, m)
		w.checks.forgeries++
		w.logf("the user plants %s at the creation of %s", shape, key)
	}
	w.models[m.uid] = m
	w.logf("user creates AppWrapper %s (%s): triggers %s, alone=%v configMap=%v suspend=%v labels=%v annotations=%v",
		key, m.uid, m.describe(), m.alone, m.configMap, aw.Spec.Suspend, aw.Labels, aw.Annotations)
	w.aws.put(aw)
}

// upgrade leaves, as an earlier version of wrapup would have, records on
// some AppWrappers that have none: a CompletionRecord without a rule UID
// (which this version decides afresh on, and replaces when it records)
// and the record on the AppWrapper's metadata that the earlier version
// read (which this one never reads). Their outcome is the world's, or one
// the earlier version took from a tenant's forgery.
func (w *simWorld) upgrade() {
	w.logf("wrapup is an upgrade: the earlier version's records stay")
	for _, key := range sortedNames(w.aws.objs) {
		aw := w.aws.objs[key]
		m := w.models[aw.UID]
		if m == nil || w.recordOf(aw) != nil || !aw.DeletionTimestamp.IsZero() || w.rng.Intn(2) == 0 {
			continue
		}
		t := &m.trigs[w.rng.Intn(len(m.trigs))]
		outcome := wrapupv1alpha1.OutcomeSucceeded
		if w.rng.Intn(3) == 0 {
			outcome = wrapupv1alpha1.OutcomeFailed
		}
		var uid types.UID
		if live := w.live(m, t); live != nil {
			uid = live.GetUID()
			if o := trigState(live); o != "" && w.rng.Intn(2) == 0 {
				outcome = o
			}
		}
		rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "r0"}}
		at := w.now.Add(-time.Duration(w.rng.Int63n(int64(time.Hour))))
		cr := util.MakeRecord(aw, rule, outcome, at).Trigger(t.index, uid).Message("recorded by the earlier version").Obj()
		if _, err := w.crecs.create(cr, nil); err != nil {
			w.fail("the earlier version's record of %s: %v", key, err)
			return
		}
		aw = aw.DeepCopy()
		ww := &util.AppWrapperWrapper{AppWrapper: *aw}
		ww.Recorded(outcome, at, uid).RecordedBy("r0", t.ref()).RecordedOn(aw.UID)
		w.logf("the earlier version's record of %s: %s, and on its metadata %v", key, describeCR(cr), simMeta(&ww.AppWrapper))
		w.aws.put(&ww.AppWrapper)
	}
}

// simForgedMarker is in every message a tenant forges: no record wrapup
// writes may carry it.
const simForgedMarker = "forged by a tenant"

// forge is a tenant's write of wrapup.dev/* metadata on one of its
// AppWrappers (its edit role may patch them): a record of an outcome, in
// the shapes an earlier version read or the mirror wrapup writes now.
// None of it may change what wrapup decides.
func (w *simWorld) forge() {
	aw, m := w.pickAW(func(aw *awv1beta2.AppWrapper, m *simAW) bool { return aw.DeletionTimestamp.IsZero() })
	if aw == nil {
		return
	}
	aw = aw.DeepCopy()
	shape := w.forgeOn(aw, m)
	w.checks.forgeries++
	w.logf("a tenant forges %s on %s: %v", shape, m.key, simMeta(aw))
	w.aws.put(aw)
}

// forgeOn writes on aw (of the model m) the wrapup.dev/* metadata of a
// forgery, and says what it is: a record naming some of several
// candidates (as one of policy All or Any does), with the UIDs of those
// that finished; one with no trigger UID; a record copied from another
// AppWrapper (there or gone); an earlier mirror of the AppWrapper's own
// record put back; its record with a rewritten message and time; one
// naming a live trigger (or a made-up one) and an AppWrapper UID (its own
// or another's); the CompletionRecord's own labels.
func (w *simWorld) forgeOn(aw *awv1beta2.AppWrapper, m *simAW) string {
	ww := &util.AppWrapperWrapper{AppWrapper: *aw}
	if ww.Labels == nil {
		ww.Labels = map[string]string{}
	}
	if ww.Annotations == nil {
		ww.Annotations = map[string]string{}
	}
	outcome := wrapupv1alpha1.OutcomeSucceeded
	if w.rng.Intn(3) == 0 {
		outcome = wrapupv1alpha1.OutcomeFailed
	}
	at := []time.Time{w.now, aw.CreationTimestamp.Add(-time.Hour), time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), w.now.Add(-time.Hour)}[w.rng.Intn(4)]
	rule := []string{"r0", "r1", fmt.Sprintf("made-up-%d", w.rng.Intn(1000))}[w.rng.Intn(3)]
	t := &m.trigs[w.rng.Intn(len(m.trigs))]
	liveUID := func(t *simTrig) types.UID {
		if live := w.live(m, t); live != nil {
			return live.GetUID()
		}
		return w.newUID("forged")
	}
	shape := ""
	switch w.rng.Intn(7) {
	case 0:
		shape = "a record of some of several candidates"
		var cs []util.RecordedCandidate
		for i := range m.trigs {
			if live := w.live(m, &m.trigs[i]); live != nil && (trigState(live) != "" || w.rng.Intn(3) == 0) {
				cs = append(cs, util.RecordedCandidate{Index: m.trigs[i].index, UID: live.GetUID()})
				if o := trigState(live); o != "" {
					outcome = o
				}
			}
		}
		if len(cs) == 0 {
			cs = []util.RecordedCandidate{{Index: t.index, UID: liveUID(t)}}
		}
		policy := []wrapupv1alpha1.TriggerPolicy{wrapupv1alpha1.TriggerPolicyAll, wrapupv1alpha1.TriggerPolicyAny}[w.rng.Intn(2)]
		ww.Recorded(outcome, at, cs[0].UID).RecordedBy(rule, t.ref()).RecordedCandidates(policy, cs...).RecordedOn(aw.UID)
	case 1:
		shape = "a record with no trigger UID"
		ww.Recorded(outcome, at, "").RecordedBy(rule, t.ref()).RecordedOn(aw.UID)
	case 2:
		var from []*awv1beta2.AppWrapper
		for _, o := range w.aws.objs {
			if o.UID != aw.UID && len(simMeta(o)) > 0 {
				from = append(from, o)
			}
		}
		for _, o := range w.goneAWs {
			if len(simMeta(o)) > 0 {
				from = append(from, o)
			}
		}
		if len(from) > 0 {
			sort.Slice(from, func(i, j int) bool { return from[i].UID < from[j].UID })
			o := from[w.rng.Intn(len(from))]
			setMeta(&ww.AppWrapper, simMeta(o))
			*aw = ww.AppWrapper
			return fmt.Sprintf("the record of %s (%s), copied", o.Name, o.UID)
		}
		shape = "a record of another AppWrapper"
		ww.Recorded(outcome, at, liveUID(t)).RecordedBy(rule, t.ref()).RecordedOn(w.newUID("aw"))
	case 3:
		if len(m.mirrors) > 0 {
			i := w.rng.Intn(len(m.mirrors))
			setMeta(&ww.AppWrapper, m.mirrors[i])
			*aw = ww.AppWrapper
			return fmt.Sprintf("wrapup's mirror %d of %d, put back", i+1, len(m.mirrors))
		}
		shape = "a record of a live trigger"
		ww.Recorded(outcome, at, liveUID(t)).RecordedBy(rule, t.ref())
	case 4:
		shape = "the record rewritten: its message and time"
		ww.Annotation(wrapupv1alpha1.FinishedAtAnnotation, at.UTC().Format(time.RFC3339Nano))
		if _, ok := ww.Labels[wrapupv1alpha1.OutcomeLabel]; !ok {
			ww.Label(wrapupv1alpha1.OutcomeLabel, string(outcome))
		}
	case 5:
		shape = "a record of a trigger"
		uid := liveUID(t)
		if w.rng.Intn(3) == 0 {
			uid = w.newUID("forged")
		}
		awUID := aw.UID
		if w.rng.Intn(3) == 0 {
			awUID = w.newUID("aw")
		}
		ww.Recorded(outcome, at, uid).RecordedBy(rule, t.ref()).RecordedOn(awUID)
	case 6:
		shape = "the CompletionRecord's labels"
		ww.Label(wrapupv1alpha1.OutcomeLabel, string(outcome)).Label(wrapupv1alpha1.RecordAppWrapperLabel, "someone-else").Label(wrapupv1alpha1.RecordRuleLabel, rule)
	}
	if w.rng.Intn(4) != 0 {
		ww.RecordedMessage(simForgedMarker)
	}
	*aw = ww.AppWrapper
	return shape
}

// simComponent is a component of the object apiVersion/kind name (or, for
// a name ending in "-" and generated, named by that prefix), with its
// component annotations.
func simComponent(apiVersion, kind, name string, generated bool, annotations map[string]string) awv1beta2.AppWrapperComponent {
	obj := util.MakeObject(apiVersion, kind, name)
	if generated {
		obj.GenerateName(name)
	}
	return util.MakeAppWrapper("", "").Component(obj.Obj(), annotations).Spec.Components[0]
}

// --- what wrapup sees: readers, writer, trigger cache ---

// reader reads the world as wrapup does, through the kernel's reader: the
// API server (fresh), whose calls fail at the world's fault rate unless
// noFaults (view.Explain's, in the checks), or the caches.
func (w *simWorld) reader(fresh, noFaults bool) *simReader {
	r := &simReader{name: "simReader", mapper: simRESTMapper()}
	if fresh && !noFaults {
		r.fail = func(what string) error {
			if w.failNow() {
				w.logf("fault: %s fails", what)
				return simUnavailable()
			}
			return nil
		}
	}
	if fresh {
		r.aw = func(key types.NamespacedName) *awv1beta2.AppWrapper { return w.aws.objs[key] }
		r.ns = func(name string) *corev1.Namespace { return w.nss[name] }
		r.rules = func() []*wrapupv1alpha1.CompletionRule {
			var out []*wrapupv1alpha1.CompletionRule
			for _, name := range sortedKeys(w.rules) {
				out = append(out, w.rules[name])
			}
			return out
		}
	} else {
		r.aw = func(key types.NamespacedName) *awv1beta2.AppWrapper {
			aw, _ := w.awCache.objs[key.String()].(*awv1beta2.AppWrapper)
			return aw
		}
		r.ns = func(name string) *corev1.Namespace {
			ns, _ := w.nsCache.objs[name].(*corev1.Namespace)
			return ns
		}
		r.rules = func() []*wrapupv1alpha1.CompletionRule {
			var out []*wrapupv1alpha1.CompletionRule
			for _, name := range sortedKeys(w.ruleCache.objs) {
				out = append(out, w.ruleCache.objs[name].(*wrapupv1alpha1.CompletionRule))
			}
			return out
		}
	}
	// The trigger objects (an EvalRun is not served), and the
	// CompletionRecords.
	r.other = func(key client.ObjectKey, obj client.Object) error {
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			kind := o.GetKind()
			if kind == simEvalRunGK.Kind {
				return &apimeta.NoKindMatchError{GroupKind: simEvalRunGK}
			}
			var u *unstructured.Unstructured
			if fresh {
				u = w.trigs[trigKey(kind, key.Namespace, key.Name)]
			} else if c, ok := w.trigCache.objs[trigKey(kind, key.Namespace, key.Name)]; ok {
				u = c.(*unstructured.Unstructured)
			}
			if u == nil {
				return apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(kind) + "s"}, key.Name)
			}
			u.DeepCopyInto(o)
			return nil
		case *wrapupv1alpha1.CompletionRecord:
			var cr *wrapupv1alpha1.CompletionRecord
			if fresh {
				cr = w.crecs.objs[key]
			} else if c, ok := w.crecCache.objs[key.String()]; ok {
				cr = c.(*wrapupv1alpha1.CompletionRecord)
			}
			if cr == nil {
				return apierrors.NewNotFound(simCompletionRecords, key.Name)
			}
			cr.DeepCopyInto(o)
			return nil
		}
		return fmt.Errorf("simReader: no %T", obj)
	}
	return r
}

// simRESTMapper lets view.Explain tell served kinds (Job, Pod, RayJob)
// from others.
func simRESTMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "batch", Version: "v1"}, {Version: "v1"}, {Group: "ray.io", Version: "v1"}})
	m.Add(schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayJob"}, apimeta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, apimeta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, apimeta.RESTScopeNamespace)
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// simWriter is wrapup's client.Writer: it writes CompletionRecords,
// patches the mirror on AppWrappers and deletes AppWrappers on the
// kernel's stores, with the world's faults, and checks every write the
// API server lets through: the oracle sees it before it lands.
type simWriter struct {
	simNoWrites
	w *simWorld
}

var _ client.Writer = (*simWriter)(nil)

// Create creates CompletionRecords, with faults; wrapup creates nothing else.
func (s *simWriter) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	cr, ok := obj.(*wrapupv1alpha1.CompletionRecord)
	if !ok {
		return fmt.Errorf("wrapup creates nothing but CompletionRecords, not %T", obj)
	}
	return s.writeRecord(cr, false)
}

// Update replaces CompletionRecords; wrapup updates nothing else.
func (s *simWriter) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	cr, ok := obj.(*wrapupv1alpha1.CompletionRecord)
	if !ok {
		return fmt.Errorf("wrapup updates nothing but CompletionRecords, not %T", obj)
	}
	return s.writeRecord(cr, true)
}

func (s *simWriter) writeRecord(cr *wrapupv1alpha1.CompletionRecord, update bool) error {
	w := s.w
	key := client.ObjectKeyFromObject(cr)
	f := w.fault()
	if f == "refused" || w.refuseRecords {
		w.logf("fault: CompletionRecord write %s refused", key)
		return simUnavailable()
	}
	// The API server keeps what the JSON keeps: a MicroTime to the
	// microsecond, a Time to the second.
	in, err := simRoundTrip(cr)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	var stored *wrapupv1alpha1.CompletionRecord
	outcome := false
	if update {
		w.checks.updates++
		_, stored, err = w.crecs.update(in, func(old, next *wrapupv1alpha1.CompletionRecord) { outcome = w.checkCompletionRecord(next, old) })
	} else {
		w.checks.creates++
		stored, err = w.crecs.create(in, func(next *wrapupv1alpha1.CompletionRecord) { outcome = w.checkCompletionRecord(next, nil) })
		if apierrors.IsAlreadyExists(err) {
			w.checks.alreadyExists++
		}
	}
	if err != nil {
		w.logf("wrapup writes CompletionRecord %s: %v", key, err)
		return err
	}
	w.logf("wrapup writes CompletionRecord %s of %s (%s): %s", key, stored.AppWrapper.Name, stored.AppWrapper.UID, describeCR(stored))
	if f == "lost" {
		w.logf("fault: the answer to the CompletionRecord write %s is lost", key)
		if outcome {
			w.checks.lostAnswers++
		}
		return simLostAnswer()
	}
	w.checks.lastWrite = simWriteMark{stored.AppWrapper.UID, w.now}
	if outcome {
		// wrapup counts it once it has the answer, in this reconcile.
		w.checks.uncounted = append(w.checks.uncounted, stored.Rule+"/"+string(stored.Outcome))
	}
	stored.DeepCopyInto(cr)
	return nil
}

// simRoundTrip is obj as the API server keeps it: through its JSON.
func simRoundTrip[T client.Object](obj T) (T, error) {
	out := obj.DeepCopyObject().(T)
	raw, err := json.Marshal(obj)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(raw, out)
	return out, err
}

// Patch writes the mirror of wrapup's records on AppWrappers: a merge
// patch of the mirror's keys, which the oracle checks.
func (s *simWriter) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
	w := s.w
	in, ok := obj.(*awv1beta2.AppWrapper)
	if !ok {
		return fmt.Errorf("wrapup patches only AppWrappers, not %T", obj)
	}
	key := client.ObjectKeyFromObject(in)
	f := w.fault()
	if f == "refused" {
		w.logf("fault: PATCH %s refused", key)
		return simUnavailable()
	}
	data, err := mergePatchData(obj, patch)
	if err != nil {
		return err
	}
	_, next, err := w.aws.patch(key, data, func(cur, next *awv1beta2.AppWrapper) { w.checkMirror(cur, next, data) })
	if err != nil {
		w.logf("wrapup PATCH %s: %v", key, err)
		return err
	}
	w.logf("wrapup mirrors on %s (%s): %v", key, next.UID, simMeta(next))
	if m := w.models[next.UID]; m != nil {
		m.mirrors = append(m.mirrors, simMeta(next))
	}
	if f == "lost" {
		w.logf("fault: the answer to PATCH %s is lost", key)
		return simLostAnswer()
	}
	next.DeepCopyInto(in)
	return nil
}

// simMeta is aw's wrapup.dev/* labels and annotations (but the opt-out
// and the trigger annotation), as label/key or annotation/key.
func simMeta(aw *awv1beta2.AppWrapper) map[string]string {
	out := map[string]string{}
	for k, v := range aw.Labels {
		if strings.HasPrefix(k, "wrapup.dev/") {
			out["label/"+k] = v
		}
	}
	for k, v := range aw.Annotations {
		if strings.HasPrefix(k, "wrapup.dev/") && k != wrapupv1alpha1.IgnoreAnnotation && k != wrapupv1alpha1.TriggerAnnotation {
			out["annotation/"+k] = v
		}
	}
	return out
}

// setMeta replaces aw's wrapup.dev/* labels and annotations (but the
// opt-out and the trigger annotation) with meta (simMeta's form).
func setMeta(aw *awv1beta2.AppWrapper, meta map[string]string) {
	for k := range simMeta(aw) {
		kind, name, _ := strings.Cut(k, "/")
		if kind == "label" {
			delete(aw.Labels, name)
		} else {
			delete(aw.Annotations, name)
		}
	}
	if aw.Labels == nil {
		aw.Labels = map[string]string{}
	}
	if aw.Annotations == nil {
		aw.Annotations = map[string]string{}
	}
	for k, v := range meta {
		kind, name, _ := strings.Cut(k, "/")
		if kind == "label" {
			aw.Labels[name] = v
		} else {
			aw.Annotations[name] = v
		}
	}
}

// Delete deletes AppWrappers: each deletion with UID and resourceVersion
// preconditions and Background propagation, and asked for once.
func (s *simWriter) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	w := s.w
	key := client.ObjectKeyFromObject(obj)
	do := (&client.DeleteOptions{}).ApplyOptions(opts)
	f := w.fault()
	if f == "refused" {
		w.logf("fault: DELETE %s refused", key)
		return simUnavailable()
	}
	if uid, done := w.checks.deletedKeys[key]; done {
		if cur, ok := w.aws.get(key); !ok || cur.UID == uid {
			w.fail("wrapup asked again to delete %s (%s), whose deletion it had made", key, uid)
		}
	}
	pre := do.Preconditions
	if pre == nil || pre.UID == nil || pre.ResourceVersion == nil {
		w.fail("wrapup deleted %s without UID and resourceVersion preconditions", key)
	}
	if do.PropagationPolicy == nil || *do.PropagationPolicy != metav1.DeletePropagationBackground {
		w.fail("wrapup deleted %s without Background propagation", key)
	}
	cur, err := w.aws.delete(key, pre, func(cur *awv1beta2.AppWrapper) {
		w.checkDelete(cur)
		w.checks.deleted[cur.UID]++
		w.checks.deletedKeys[key] = cur.UID
		if w.checks.deleted[cur.UID] > 1 {
			w.fail("wrapup deleted %s (%s) twice", key, cur.UID)
		}
		w.logf("wrapup DELETE %s (%s)", key, cur.UID)
	})
	if apierrors.IsConflict(err) {
		w.logf("wrapup DELETE %s: precondition failed", key)
	}
	if err != nil {
		return err
	}
	w.watchAhead()
	if f == "lost" {
		w.logf("fault: the answer to DELETE %s is lost", key)
		return simLostAnswer()
	}
	w.wr.deleted[cur.UID] = true
	return nil
}

// simTriggers is the trigger cache: one informer per kind, which lists
// (again) after every restart of wrapup.
type simTriggers struct {
	w       *simWorld
	syncAt  time.Time
	waiters map[types.NamespacedName]bool
	claims  map[triggers.Owner]schema.GroupKind
}

var _ triggerCache = (*simTriggers)(nil)

func (t *simTriggers) synced() bool { return !t.w.now.Before(t.syncAt) }

func (t *simTriggers) Ensure(owner triggers.Owner, gk schema.GroupKind, _ celpolicies.Fields) error {
	t.claims[owner] = gk
	if gk == simEvalRunGK {
		return &triggers.KindNotFoundError{Kind: gk, Err: fmt.Errorf("not served")}
	}
	return nil
}

func (t *simTriggers) Keep(key types.NamespacedName, kinds []schema.GroupKind) {
	for owner, gk := range t.claims {
		if owner.Rule == "" && owner.AppWrapper == key && !slices.Contains(kinds, gk) {
			delete(t.claims, owner)
		}
	}
}

func (t *simTriggers) Get(gk schema.GroupKind, namespace, name string, _ celpolicies.Fields) (*unstructured.Unstructured, bool, error) {
	if gk == simEvalRunGK || gk == simConfigMapGK || !t.synced() {
		return nil, false, nil
	}
	c, ok := t.w.trigCache.objs[trigKey(gk.Kind, namespace, name)]
	if !ok {
		return nil, true, nil
	}
	return c.(*unstructured.Unstructured).DeepCopy(), true, nil
}

func (t *simTriggers) Kind(gk schema.GroupKind) decision.Kind {
	switch {
	case gk == simEvalRunGK:
		return decision.Kind{State: decision.KindNotServed, Message: "not served"}
	case gk == simConfigMapGK:
		return decision.Kind{State: decision.KindNotWatchable, Message: "configmaps is forbidden"}
	case gk != simJobGK && gk != simPodGK && gk != simRayJobGK:
		return decision.Kind{State: decision.KindNotServed, Message: "not served"}
	case !t.synced():
		return decision.Kind{State: decision.KindPending}
	}
	return decision.Kind{State: decision.KindWatched}
}

func (t *simTriggers) Resource(gk schema.GroupKind) (schema.GroupVersionResource, bool) {
	switch gk {
	case simJobGK:
		return schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, true
	case simPodGK:
		return schema.GroupVersionResource{Version: "v1", Resource: "pods"}, true
	case simRayJobGK:
		return schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayjobs"}, true
	}
	return schema.GroupVersionResource{}, false
}

func (t *simTriggers) Wait(_ schema.GroupKind, key types.NamespacedName) {
	if t.synced() {
		t.w.wr.queue.add(key, t.w.now)
		return
	}
	t.waiters[key] = true
}
