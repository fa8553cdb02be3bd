package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

var (
	flagN = flag.Int("bench.n", envInt("WRAPUP_BENCH_N", 100),
		"AppWrappers for wrapup to finish (default: $WRAPUP_BENCH_N, else 100)")
	flagBaseline = flag.Int("bench.baseline", 0,
		"plain Jobs and Job-only AppWrappers in each baseline (default: bench.n, at most 1000)")
	flagWaves        = flag.Int("bench.waves", 10, "waves the completions are written in")
	flagPerNamespace = flag.Int("bench.per-namespace", 100, "objects of each kind per namespace")
	flagWriters      = flag.Int("bench.writers", 8, "the benchmark's concurrent writers (creating objects, writing status)")
	flagHistory      = flag.Bool("bench.history", true, "the rule writes a CompletionRecord per run")
	flagIdle         = flag.Duration("bench.idle", 3*time.Second,
		"how long wrapup is watched, idle with every AppWrapper tracked, for requests it makes on its own")
	flagOut = flag.String("bench.out", os.Getenv("WRAPUP_BENCH_OUT"),
		"folder for results-N.md and results-N.csv (default: $WRAPUP_BENCH_OUT, else a temporary folder)")
	flagCPUProfile  = flag.String("bench.cpuprofile", "", "write a CPU profile of the completion phase to this file")
	flagHeapProfile = flag.String("bench.heapprofile", "",
		"write heap and goroutine profiles before wrapup starts, once it tracks every AppWrapper and after the idle window, to FILE-before, FILE-tracking and FILE-idle")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestBench(t *testing.T) {
	if *flagHeapProfile != "" {
		// Sample every 4 KiB allocated rather than every 512 KiB, so that
		// the profiles attribute wrapup's few MiB; set before anything of
		// the benchmark allocates.
		goruntime.MemProfileRate = 4096
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "wrapup benchmark")
}

// reconcileFunc is wrapup's AppWrapper reconciler: the writes sent from
// within it are the ones on the way from a finished trigger to the delete.
const reconcileFunc = gc.ReconcileFunc

// modeLabel tells the benchmark's own objects apart: its informers select
// on it, and the CompletionRule selects the wrapup ones.
const modeLabel = "bench.wrapup.dev/mode"

// mode is what completes an item and who notices.
type mode string

const (
	// modeWrapup: an AppWrapper with a Deployment and a trigger Job under
	// the rule; the Job's status is written, wrapup records and deletes.
	modeWrapup mode = "wrapup"
	// modeTTL: a plain Job with ttlSecondsAfterFinished 0; its status is
	// written, kube-controller-manager's TTL-after-finished controller
	// deletes it.
	modeTTL mode = "ttl"
	// modePods: a Job-only AppWrapper no rule matches; its pod is set
	// Succeeded, the AppWrapper controller sets the phase Succeeded.
	modePods mode = "appwrapper"
)

// The components the benchmark's AppWrappers are made of.
func triggerJob(aw string) string   { return aw + "-trigger" }
func serverDeploy(aw string) string { return aw + "-server" }
func baselineJob(aw string) string  { return aw + "-job" }
func podOf(component string) string { return component + "-pod" }

// item is one thing to complete, and the times the benchmark saw for it.
type item struct {
	mode mode
	// key is the AppWrapper (modeWrapup, modePods) or the Job (modeTTL).
	key types.NamespacedName
	// ready: the AppWrapper is Running with PodsReady (setup done).
	ready bool

	sent, acked                  time.Time // the status write
	outcome, deleting, succeeded time.Time // what the informers saw
	seenAsGone                   bool      // deleting is the removal, no deletionTimestamp was seen
}

// done says whether the result of its completion was seen.
func (it *item) done() bool {
	if it.mode == modePods {
		return !it.succeeded.IsZero()
	}
	return !it.deleting.IsZero()
}

// podToCreate is a pod the benchmark creates for a component, as its
// workload controller would.
type podToCreate struct {
	namespace, name, appWrapper string
	owner                       metav1.OwnerReference
	restart                     corev1.RestartPolicy
}

// tracker records what the benchmark's informers see. Its handlers only
// take the time and a lock, so the times are those of the watch events.
type tracker struct {
	mu        sync.Mutex
	aws       map[types.NamespacedName]*item
	jobs      map[types.NamespacedName]*item
	ready     int
	podQueued map[types.NamespacedName]bool
	pods      chan podToCreate
}

func unwrapTombstone(obj any) any {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

func (t *tracker) seeAppWrapper(obj any, deleted bool) {
	now := time.Now()
	aw, ok := unwrapTombstone(obj).(*awv1beta2.AppWrapper)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	it := t.aws[client.ObjectKeyFromObject(aw)]
	if it == nil {
		return
	}
	if !it.ready && aw.Status.Phase == awv1beta2.AppWrapperRunning &&
		apimeta.IsStatusConditionTrue(aw.Status.Conditions, string(awv1beta2.PodsReady)) {
		it.ready = true
		t.ready++
	}
	if it.sent.IsZero() {
		return
	}
	if it.deleting.IsZero() && (aw.DeletionTimestamp != nil || deleted) {
		it.deleting = now
		it.seenAsGone = aw.DeletionTimestamp == nil
	}
	if it.succeeded.IsZero() && aw.Status.Phase == awv1beta2.AppWrapperSucceeded {
		it.succeeded = now
	}
}

// seeRecord records when the CompletionRecord of an AppWrapper's run
// appeared: wrapup recorded its outcome (an AppWrapper deleted at once
// gets no mirror of it on its own metadata).
func (t *tracker) seeRecord(obj any) {
	now := time.Now()
	m, ok := unwrapTombstone(obj).(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	it := t.aws[types.NamespacedName{Namespace: m.Namespace, Name: m.Labels[wrapupv1alpha1.RecordAppWrapperLabel]}]
	if it != nil && !it.sent.IsZero() && it.outcome.IsZero() {
		it.outcome = now
	}
}

// seeComponent queues a pod for each new component of an AppWrapper, and
// records the deletion of the plain Jobs.
func (t *tracker) seeComponent(obj any, gvk schema.GroupVersionKind, added, deleted bool) {
	now := time.Now()
	m, ok := unwrapTombstone(obj).(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(m)
	t.mu.Lock()
	defer t.mu.Unlock()
	if aw := m.Labels[awv1beta2.AppWrapperLabel]; added && aw != "" && !t.podQueued[key] {
		t.podQueued[key] = true
		restart := corev1.RestartPolicyNever
		if gvk.Kind == "Deployment" {
			restart = corev1.RestartPolicyAlways
		}
		// Buffered for every pod the run needs: never blocks the informer.
		t.pods <- podToCreate{
			namespace: m.Namespace, name: podOf(m.Name), appWrapper: aw, restart: restart,
			owner: metav1.OwnerReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: m.Name, UID: m.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
		}
	}
	if gvk.Kind != "Job" {
		return
	}
	if it := t.jobs[key]; it != nil && !it.sent.IsZero() && it.deleting.IsZero() && (deleted || m.DeletionTimestamp != nil) {
		it.deleting = now
	}
}

// pending counts the items of wave whose result has not been seen yet.
func (t *tracker) pending(wave []*item) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, it := range wave {
		if !it.done() {
			n++
		}
	}
	return n
}

func (t *tracker) readyCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready
}

// slim keeps in the benchmark's cache only what it reads (metadata, the
// AppWrapper's phase and conditions), so that its own informers weigh
// little in the process's heap.
func slim(obj any) (any, error) {
	switch o := obj.(type) {
	case *awv1beta2.AppWrapper:
		s := &awv1beta2.AppWrapper{ObjectMeta: o.ObjectMeta}
		s.ManagedFields = nil
		s.Status.Phase = o.Status.Phase
		s.Status.Conditions = o.Status.Conditions
		return s, nil
	case *metav1.PartialObjectMetadata:
		o.ManagedFields = nil
		return o, nil
	}
	return obj, nil
}

// labelled runs f with pprof labels naming a component: every goroutine f
// starts (a manager's controllers, informers, connections) inherits them,
// so a CPU profile can be split by component.
func labelled(ctx context.Context, component string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("component", component), f)
}

func podSpec(restart corev1.RestartPolicy) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                 restart,
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []corev1.Container{{
			Name:      "main",
			Image:     "registry.invalid/wrapup/bench:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		}},
	}
}

// podPhasePatch is the kubelet's status write for phase, as a merge patch
// (no read first, so the benchmark's own requests stay few).
func podPhasePatch(phase corev1.PodPhase, now time.Time) []byte {
	t := metav1.NewTime(now)
	ready := corev1.ConditionFalse
	if phase == corev1.PodRunning {
		ready = corev1.ConditionTrue
	}
	status := map[string]any{
		"phase":      phase,
		"conditions": []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: t}},
	}
	if phase == corev1.PodRunning {
		status["startTime"] = t
	}
	b, err := json.Marshal(map[string]any{"status": status})
	Expect(err).NotTo(HaveOccurred())
	return b
}

// jobCompletePatch is the Job controller's status write for a succeeded
// one-pod Job (as util.JobComplete writes it), as a merge patch.
func jobCompletePatch(now time.Time) []byte {
	t, start := metav1.NewTime(now), metav1.NewTime(now.Add(-time.Second))
	cond := func(typ batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: "CompletionsReached",
			Message: "Reached expected number of succeeded pods", LastProbeTime: t, LastTransitionTime: t}
	}
	b, err := json.Marshal(map[string]any{"status": batchv1.JobStatus{
		StartTime: &start, CompletionTime: &t, Succeeded: 1, Ready: ptr.To[int32](0),
		Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet), cond(batchv1.JobComplete)},
	}})
	Expect(err).NotTo(HaveOccurred())
	return b
}

// gather reads controller-runtime's metrics registry, where client-go's,
// controller-runtime's and wrapup's metrics are.
func gather() map[string]*dto.MetricFamily {
	fams, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	out := make(map[string]*dto.MetricFamily, len(fams))
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// sumBy sums a counter or gauge by the values of some labels.
func sumBy(fams map[string]*dto.MetricFamily, name string, by ...string) map[string]float64 {
	out := map[string]float64{}
	f := fams[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		var key []string
		for _, l := range by {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == l {
					key = append(key, lp.GetValue())
				}
			}
		}
		v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
		out[strings.Join(key, ", ")] += v
	}
	return out
}

// histogramCount is how many observations a histogram has.
func histogramCount(fams map[string]*dto.MetricFamily, name string) uint64 {
	var n uint64
	if f := fams[name]; f != nil {
		for _, m := range f.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// writeHeapProfile writes the heap profile (after a collection) to path,
// and the goroutines, as text, to path.goroutines.
func writeHeapProfile(path string) {
	if path == "" {
		return
	}
	for name, debug := range map[string]int{"heap": 0, "goroutine": 1} {
		p := path
		if name == "goroutine" {
			p += ".goroutines"
		}
		f, err := os.Create(p)
		Expect(err).NotTo(HaveOccurred())
		Expect(pprof.Lookup(name).WriteTo(f, debug)).To(Succeed())
		Expect(f.Close()).To(Succeed())
	}
}

var _ = Describe("wrapup at scale", Ordered, func() {
	var (
		ctx       context.Context
		cancel    context.CancelFunc
		fwk       *framework.Framework
		benchCfg  *rest.Config
		wrapupCfg *rest.Config
		c         client.Client
		requests  *RequestCounter
		trk       *tracker
		logPath   string

		n, nb, waves, writers int
		podsCreated           int64
		podsMu                sync.Mutex
		podErr                error
	)

	BeforeAll(func() {
		n, nb, waves, writers = *flagN, *flagBaseline, *flagWaves, max(1, *flagWriters)
		if nb <= 0 {
			nb = min(n, 1000)
		}
		waves = max(1, min(waves, n, nb))
		ctx, cancel = context.WithCancel(context.Background())

		// Controllers log as they would in production (JSON, info level) to
		// a file: the framework's development logger writes every line into
		// Ginkgo's in-memory buffer, which at this scale would weigh in the
		// heap and RSS being measured. The first SetLogger wins.
		logFile, err := os.CreateTemp("", "wrapup-bench-*.log")
		Expect(err).NotTo(HaveOccurred())
		logPath = logFile.Name()
		DeferCleanup(logFile.Close)
		ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
		fmt.Fprintf(GinkgoWriter, "Controller logs: %s\n", logPath)

		fwk = &framework.Framework{ExtraKubeControllers: []string{"ttl-after-finished"}}
		cfg := fwk.Init()
		benchCfg = OwnConnection(cfg, "wrapup-bench")
		c, err = client.New(benchCfg, client.Options{Scheme: framework.Scheme})
		Expect(err).NotTo(HaveOccurred())

		// wrapup runs as its ServiceAccount with exactly config/rbac, on
		// its own connection, counted; no client-side rate limit, as
		// controller-runtime's GetConfig (the binary's) sets none.
		framework.InstallControllerRBAC(ctx, c)
		requests = NewRequestCounter(reconcileFunc)
		wrapupCfg = gc.RESTConfig(OwnConnection(framework.ServiceAccountConfig(cfg, framework.ControllerNamespace, framework.ControllerServiceAccount), "wrapup"))
		wrapupCfg.QPS, wrapupCfg.Burst = -1, 0
		wrapupCfg.WrapTransport = requests.Wrap

		labelled(ctx, "appwrapper-controller", func(ctx context.Context) {
			fwk.StartManager(ctx, OwnConnection(cfg, "appwrapper-controller"), nil)
		})

		trk = &tracker{
			aws:       map[types.NamespacedName]*item{},
			jobs:      map[types.NamespacedName]*item{},
			podQueued: map[types.NamespacedName]bool{},
			pods:      make(chan podToCreate, 2*n+nb),
		}
		jobGVK := batchv1.SchemeGroupVersion.WithKind("Job")
		deployGVK := appsv1.SchemeGroupVersion.WithKind("Deployment")
		metaOf := func(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(gvk)
			return m
		}
		sel, err := labels.Parse(modeLabel)
		Expect(err).NotTo(HaveOccurred())
		labelled(ctx, "bench", func(ctx context.Context) {
			cache, err := crcache.New(benchCfg, crcache.Options{
				Scheme:           framework.Scheme,
				DefaultTransform: slim,
				ByObject: map[client.Object]crcache.ByObject{
					metaOf(jobGVK):    {Label: sel},
					metaOf(deployGVK): {Label: sel},
				},
			})
			Expect(err).NotTo(HaveOccurred())
			inf, err := cache.GetInformer(ctx, &awv1beta2.AppWrapper{})
			Expect(err).NotTo(HaveOccurred())
			_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { trk.seeAppWrapper(obj, false) },
				UpdateFunc: func(_, obj any) { trk.seeAppWrapper(obj, false) },
				DeleteFunc: func(obj any) { trk.seeAppWrapper(obj, true) },
			})
			Expect(err).NotTo(HaveOccurred())
			recs, err := cache.GetInformer(ctx, metaOf(wrapupv1alpha1.GroupVersion.WithKind("CompletionRecord")))
			Expect(err).NotTo(HaveOccurred())
			_, err = recs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: trk.seeRecord})
			Expect(err).NotTo(HaveOccurred())
			for _, gvk := range []schema.GroupVersionKind{jobGVK, deployGVK} {
				inf, err := cache.GetInformer(ctx, metaOf(gvk))
				Expect(err).NotTo(HaveOccurred())
				_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
					AddFunc:    func(obj any) { trk.seeComponent(obj, gvk, true, false) },
					UpdateFunc: func(_, obj any) { trk.seeComponent(obj, gvk, false, false) },
					DeleteFunc: func(obj any) { trk.seeComponent(obj, gvk, false, true) },
				})
				Expect(err).NotTo(HaveOccurred())
			}
			go func() {
				defer GinkgoRecover()
				Expect(cache.Start(ctx)).To(Succeed())
			}()
			Expect(cache.WaitForCacheSync(ctx)).To(BeTrue())

			// Play the workload controllers: a Running pod for every
			// component, as soon as it appears, so that no AppWrapper
			// waits for its pods (the AppWrapper controller re-checks
			// those every 5 s, which would load the run).
			for range writers {
				go func() {
					defer GinkgoRecover()
					for {
						select {
						case <-ctx.Done():
							return
						case p := <-trk.pods:
							err := createRunningPod(ctx, c, p)
							podsMu.Lock()
							if err != nil && podErr == nil {
								podErr = err
							}
							if err == nil {
								podsCreated++
							}
							podsMu.Unlock()
						}
					}
				}()
			}
		})
	})

	AfterAll(func() {
		if cancel != nil {
			cancel()
		}
		if fwk != nil {
			fwk.Teardown()
		}
		if logPath != "" && !CurrentSpecReport().Failed() {
			_ = os.Remove(logPath)
		}
	})

	It("finishes AppWrappers as fast as the baselines, and says what it costs", func() {
		res := &Results{
			N: n, Baseline: nb, Waves: waves, PerNamespace: *flagPerNamespace, Writers: writers, Idle: *flagIdle, WrapupWorkers: gc.DefaultWorkers, History: *flagHistory,
			When: time.Now(), Machine: ReadMachine(), Versions: Versions(benchCfg),
		}
		By(fmt.Sprintf("creating %d AppWrappers for wrapup, %d Job-only AppWrappers and %d plain Jobs", n, nb, nb))
		setupStart := time.Now()
		rule := util.MakeRule("bench").
			AppWrapperLabels(map[string]string{modeLabel: string(modeWrapup)}).
			TriggerKind("batch", "Job", "").
			OnSuccess(wrapupv1alpha1.ActionDeleteAll, 0).
			Obj()
		rule.Spec.History.Disabled = !*flagHistory
		Expect(c.Create(ctx, rule)).To(Succeed())
		w := buildWorkload(n, nb, *flagPerNamespace)
		Expect(Parallel(writers, w.namespaces, func(name string) error {
			return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})).To(Succeed())
		wrapupItems, ttlItems, podItems := w.wrapup, w.ttl, w.pods
		trk.mu.Lock()
		for _, it := range append(append([]*item{}, wrapupItems...), podItems...) {
			trk.aws[it.key] = it
		}
		for _, it := range ttlItems {
			trk.jobs[it.key] = it
		}
		trk.mu.Unlock()
		Expect(Parallel(writers, w.objects, func(o client.Object) error { return c.Create(ctx, o) })).To(Succeed())

		By("waiting until every AppWrapper runs with its pods ready")
		// A safety net, not a goal: 10,000 take ~15 minutes on 2 busy cores.
		setupTimeout := 5*time.Minute + time.Duration(n+nb)*400*time.Millisecond
		Eventually(func(g Gomega) {
			podsMu.Lock()
			created, err := podsCreated, podErr
			podsMu.Unlock()
			g.Expect(err).NotTo(HaveOccurred(), "creating pods")
			g.Expect(created).To(BeEquivalentTo(2*n+nb), "pods created Running")
			g.Expect(trk.readyCount()).To(Equal(n+nb), "AppWrappers Running with PodsReady")
		}, setupTimeout, time.Second).Should(Succeed())
		res.Setup = time.Since(setupStart)

		By("measuring the heap before wrapup starts")
		res.HeapBefore = ReadHeap()
		writeHeapProfile(suffixed(*flagHeapProfile, "before"))
		var err error
		res.RSSBefore, err = RSS()
		Expect(err).NotTo(HaveOccurred())

		By("starting wrapup and waiting until it tracks every AppWrapper")
		trackStart := time.Now()
		var stopWrapup func()
		labelled(ctx, "wrapup", func(ctx context.Context) {
			mgr := framework.NewBareManager(wrapupCfg, func(o *ctrl.Options) { o.Cache = gc.CacheOptions() })
			Expect(gc.Setup(mgr, gc.Options{})).To(Succeed())
			stopWrapup = framework.RunManager(ctx, mgr)
		})
		DeferCleanup(func() { stopWrapup() })
		Eventually(func(g Gomega) {
			r := &wrapupv1alpha1.CompletionRule{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rule), r)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(r.Status.Conditions, wrapupv1alpha1.ConditionReady)).To(BeTrue(), "rule Ready")
			g.Expect(r.Status.MatchedAppWrappers).To(BeEquivalentTo(n), "matchedAppWrappers")
			g.Expect(sumBy(gather(), "wrapup_trigger_informers")[""]).To(BeEquivalentTo(1), "trigger informers")
		}, util.LongTimeout+time.Duration(n+nb)*10*time.Millisecond, 50*time.Millisecond).Should(Succeed())
		res.Tracking = time.Since(trackStart)
		// Measure once wrapup has nothing left to do: what is live then is
		// what tracking costs, not a reconcile's garbage.
		Eventually(func(g Gomega) {
			fams := gather()
			depth := sumBy(fams, "workqueue_depth", "name")
			active := sumBy(fams, "controller_runtime_active_workers", "controller")
			for _, name := range []string{"wrapup-appwrapper", "wrapup-rule"} {
				g.Expect(depth[name]).To(BeZero(), "%s queue depth", name)
				g.Expect(active[name]).To(BeZero(), "%s active workers", name)
			}
		}, util.LongTimeout, 50*time.Millisecond).Should(Succeed())
		res.WrapupStart = requests.Snapshot()
		res.HeapTracking = ReadHeap()
		writeHeapProfile(suffixed(*flagHeapProfile, "tracking"))
		res.RSSTracking, err = RSS()
		Expect(err).NotTo(HaveOccurred())
		// wrapup caches every AppWrapper and every labelled component of its
		// trigger kind, the baseline ones included.
		res.AppWrappersCached, res.TriggersCached = n+nb, n+nb

		By(fmt.Sprintf("leaving wrapup idle for %s, every AppWrapper tracked", *flagIdle))
		idleBefore := requests.Snapshot()
		// An observation window, not a wait for a condition: the number of
		// requests wrapup makes on its own (polling) in a fixed time is the
		// measurement.
		select {
		case <-ctx.Done():
		case <-time.After(*flagIdle):
		}
		res.WrapupIdle = requests.Snapshot().Sub(idleBefore)
		res.HeapIdle = ReadHeap()
		writeHeapProfile(suffixed(*flagHeapProfile, "idle"))
		fams := gather()
		res.EvaluationsWhileTracking = histogramCount(fams, "wrapup_evaluation_duration_seconds")

		By(fmt.Sprintf("completing the triggers in %d waves", waves))
		inProcBefore := sumBy(fams, "rest_client_requests_total", "method")
		reconcilesBefore := sumBy(fams, "controller_runtime_reconcile_total", "controller", "result")
		reqBefore := requests.Snapshot()
		if *flagCPUProfile != "" {
			f, err := os.Create(*flagCPUProfile)
			Expect(err).NotTo(HaveOccurred())
			if err := pprof.StartCPUProfile(f); err != nil {
				// -cpuprofile profiles the whole run already.
				fmt.Fprintf(GinkgoWriter, "Not profiling the completion phase: %v\n", err)
				_ = f.Close()
			} else {
				DeferCleanup(f.Close)
				DeferCleanup(pprof.StopCPUProfile)
			}
		}
		cpuBefore, err := SampleCPU()
		Expect(err).NotTo(HaveOccurred())
		completionStart := time.Now()
		wrapupWaves, ttlWaves, podWaves := chunks(wrapupItems, waves), chunks(ttlItems, waves), chunks(podItems, waves)
		for w := range waves {
			wave := interleave(wrapupWaves[w], ttlWaves[w], podWaves[w])
			Expect(Parallel(writers, wave, func(it *item) error { return complete(ctx, c, trk, it) })).To(Succeed())
			Eventually(func() int { return trk.pending(wave) }, 2*time.Minute+time.Duration(len(wave))*100*time.Millisecond, 10*time.Millisecond).
				Should(BeZero(), "results of wave %d not seen", w)
		}
		res.Completion = time.Since(completionStart)
		cpuAfter, err := SampleCPU()
		Expect(err).NotTo(HaveOccurred())
		res.CPU = cpuAfter.Since(cpuBefore)
		res.Completions = n + 2*nb
		fams = gather()
		res.InProcess = subCounts(sumBy(fams, "rest_client_requests_total", "method"), inProcBefore)
		res.Reconciles = subCounts(sumBy(fams, "controller_runtime_reconcile_total", "controller", "result"), reconcilesBefore)
		informers := sumBy(fams, "wrapup_trigger_informers", "kind")
		res.InformerKinds = sortedKeys(informers)
		for _, v := range informers {
			res.Informers += v
		}

		By("waiting until wrapup has forgotten every AppWrapper it deleted, to count all its requests")
		// matchedAppWrappers drops as wrapup sees the deletions; the rule
		// reconciler writes it from a channel that may drop an update when
		// it is behind (then the count stays stale until the next change):
		// a count that does not reach 0 is reported, not failed on.
		stale := InterceptGomegaFailures(func() {
			Eventually(func(g Gomega) {
				r := &wrapupv1alpha1.CompletionRule{}
				g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rule), r)).To(Succeed())
				g.Expect(r.Status.MatchedAppWrappers).To(BeZero())
			}, util.LongTimeout, 100*time.Millisecond).Should(Succeed())
		})
		if len(stale) > 0 {
			fmt.Fprintf(GinkgoWriter, "matchedAppWrappers did not reach 0: %v\n", stale)
		}
		res.WrapupCompletion = requests.Snapshot().Sub(reqBefore)
		res.RSSEnd, err = RSS()
		Expect(err).NotTo(HaveOccurred())
		res.LoadEnd = LoadAvg()

		var missingOutcome int
		res.Latency, res.DeletesSeenAsGone, missingOutcome = trk.summarize(wrapupItems, ttlItems, podItems)

		By("writing the results")
		out := *flagOut
		if out == "" {
			out = GinkgoT().TempDir()
		}
		md, csvPath := writeResults(res, out)

		By("checking that every measurement was taken (never how fast)")
		Expect(missingOutcome).To(BeZero(), "AppWrappers deleted without their CompletionRecord seen")
		for name, s := range res.Latency {
			want := n
			switch name {
			case SeriesTTLDelete, SeriesPodsSucceeded:
				want = nb
			case SeriesWriteRTT:
				want = n + 2*nb
			}
			Expect(s.Count).To(Equal(want), name)
			Expect(s.P50).To(BeNumerically(">", 0), name)
		}
		Expect(res.HeapBefore.Inuse).To(BeNumerically(">", 0))
		Expect(res.RSSTracking).To(BeNumerically(">", 0))
		Expect(res.CPU.Self).To(BeNumerically(">", 0))
		Expect(res.Informers).To(BeNumerically(">=", 1), "wrapup_trigger_informers gauge read")
		_, writes := res.WrapupCompletion.Total()
		Expect(writes).To(BeNumerically(">=", n), "wrapup's writes counted on its transport")
		Expect(res.InProcess).NotTo(BeEmpty(), "rest_client_requests_total read")
		for _, p := range []string{md, csvPath} {
			st, err := os.Stat(p)
			Expect(err).NotTo(HaveOccurred())
			Expect(st.Size()).To(BeNumerically(">", 0), p)
		}
	})
})

// workload is what the benchmark creates: namespaces, then objects, and the
// items to complete.
type workload struct {
	namespaces        []string
	objects           []client.Object
	wrapup, ttl, pods []*item
}

// buildWorkload makes n AppWrappers for wrapup and nb of each baseline,
// perNamespace of each kind to a namespace: the AppWrapper controller
// lists pods by namespace, so one namespace of thousands would make it
// quadratic.
func buildWorkload(n, nb, perNamespace int) workload {
	perNamespace = max(1, perNamespace)
	var w workload
	for i := range max(n, nb) {
		ns := fmt.Sprintf("bench-%03d", i/perNamespace)
		if i%perNamespace == 0 {
			w.namespaces = append(w.namespaces, ns)
		}
		if i < n {
			name := fmt.Sprintf("w-%05d", i)
			deploy := util.MakeDeployment(serverDeploy(name), 1)
			deploy.Labels = map[string]string{modeLabel: string(modeWrapup)}
			job := util.MakeJob(triggerJob(name)).Obj()
			job.Labels = map[string]string{modeLabel: string(modeWrapup)}
			w.objects = append(w.objects, benchAppWrapper(name, ns, modeWrapup).Component(deploy, nil).Component(job, nil).Obj())
			w.wrapup = append(w.wrapup, &item{mode: modeWrapup, key: types.NamespacedName{Namespace: ns, Name: name}})
		}
		if i < nb {
			name := fmt.Sprintf("a-%05d", i)
			job := util.MakeJob(baselineJob(name)).Obj()
			job.Labels = map[string]string{modeLabel: string(modePods)}
			w.objects = append(w.objects, benchAppWrapper(name, ns, modePods).Component(job, nil).Obj())
			w.pods = append(w.pods, &item{mode: modePods, key: types.NamespacedName{Namespace: ns, Name: name}})

			name = fmt.Sprintf("t-%05d", i)
			plain := util.MakeJob(name).Obj()
			plain.Namespace = ns
			plain.Labels = map[string]string{modeLabel: string(modeTTL)}
			plain.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
			w.objects = append(w.objects, plain)
			w.ttl = append(w.ttl, &item{mode: modeTTL, key: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return w
}

// summarize turns the times seen into the latency series; it also counts
// the deletions seen only as removals and the outcomes never seen.
func (t *tracker) summarize(wrapupItems, ttlItems, podItems []*item) (latency map[string]Summary, seenAsGone, missingOutcome int) {
	var record, del, recToDel, ttl, pods, rtt []time.Duration
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, it := range wrapupItems {
		record = append(record, it.outcome.Sub(it.sent))
		del = append(del, it.deleting.Sub(it.sent))
		recToDel = append(recToDel, it.deleting.Sub(it.outcome))
		if it.seenAsGone {
			seenAsGone++
		}
		if it.outcome.IsZero() {
			missingOutcome++
		}
	}
	for _, it := range ttlItems {
		ttl = append(ttl, it.deleting.Sub(it.sent))
	}
	for _, it := range podItems {
		pods = append(pods, it.succeeded.Sub(it.sent))
	}
	for _, items := range [][]*item{wrapupItems, ttlItems, podItems} {
		for _, it := range items {
			rtt = append(rtt, it.acked.Sub(it.sent))
		}
	}
	return map[string]Summary{
		SeriesWrapupRecord:   Summarize(record),
		SeriesWrapupDelete:   Summarize(del),
		SeriesWrapupRecToDel: Summarize(recToDel),
		SeriesTTLDelete:      Summarize(ttl),
		SeriesPodsSucceeded:  Summarize(pods),
		SeriesWriteRTT:       Summarize(rtt),
	}, seenAsGone, missingOutcome
}

// writeResults writes results-N.md and results-N.csv into out, shows the
// table in the test's output, and returns the two paths.
func writeResults(res *Results, out string) (md, csvPath string) {
	Expect(os.MkdirAll(out, 0o755)).To(Succeed())
	md = filepath.Join(out, fmt.Sprintf("results-%d.md", res.N))
	csvPath = filepath.Join(out, fmt.Sprintf("results-%d.csv", res.N))
	var table strings.Builder
	Expect(res.WriteMarkdown(&table)).To(Succeed())
	Expect(os.WriteFile(md, []byte(table.String()), 0o644)).To(Succeed())
	f, err := os.Create(csvPath)
	Expect(err).NotTo(HaveOccurred())
	Expect(res.WriteCSV(f)).To(Succeed())
	Expect(f.Close()).To(Succeed())
	fmt.Fprintf(GinkgoWriter, "%s\nWrote %s and %s\n", table.String(), md, csvPath)
	AddReportEntry("results", table.String())
	return md, csvPath
}

// benchAppWrapper starts an AppWrapper of the benchmark. Its grace periods
// are long so that an AppWrapper whose pods the benchmark has not created
// yet (setup at 10,000 takes minutes) is not reset by its controller.
func benchAppWrapper(name, ns string, m mode) *util.AppWrapperWrapper {
	return util.MakeAppWrapper(name, ns).
		Label(modeLabel, string(m)).
		Annotation(awv1beta2.AdmissionGracePeriodDurationAnnotation, "2h").
		Annotation(awv1beta2.WarmupGracePeriodDurationAnnotation, "2h")
}

// createRunningPod creates p and writes its phase Running.
func createRunningPod(ctx context.Context, c client.Client, p podToCreate) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.name, Namespace: p.namespace,
			Labels:          map[string]string{awv1beta2.AppWrapperLabel: p.appWrapper, modeLabel: "pod"},
			OwnerReferences: []metav1.OwnerReference{p.owner},
		},
		Spec: podSpec(p.restart),
	}
	if err := c.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating pod %s/%s: %w", p.namespace, p.name, err)
	}
	if err := c.Status().Patch(ctx, pod, client.RawPatch(types.MergePatchType, podPhasePatch(corev1.PodRunning, time.Now()))); err != nil {
		return fmt.Errorf("writing pod %s/%s Running: %w", p.namespace, p.name, err)
	}
	return nil
}

// complete writes the status that finishes it, as the Job controller or the
// kubelet would, and records when the write was sent and acknowledged.
func complete(ctx context.Context, c client.Client, trk *tracker, it *item) error {
	var obj client.Object
	var patch []byte
	now := time.Now()
	switch it.mode {
	case modeWrapup:
		obj = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: it.key.Namespace, Name: triggerJob(it.key.Name)}}
		patch = jobCompletePatch(now)
	case modeTTL:
		obj = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: it.key.Namespace, Name: it.key.Name}}
		patch = jobCompletePatch(now)
	case modePods:
		obj = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: it.key.Namespace, Name: podOf(baselineJob(it.key.Name))}}
		patch = podPhasePatch(corev1.PodSucceeded, now)
	}
	trk.mu.Lock()
	it.sent = time.Now()
	trk.mu.Unlock()
	if err := c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("completing %s %s: %w", it.mode, it.key, err)
	}
	trk.mu.Lock()
	it.acked = time.Now()
	trk.mu.Unlock()
	return nil
}

// chunks splits items into n consecutive parts of near-equal size.
func chunks(items []*item, n int) [][]*item {
	out := make([][]*item, n)
	for i := range n {
		out[i] = items[i*len(items)/n : (i+1)*len(items)/n]
	}
	return out
}

// interleave merges lists round-robin, so that each kind is written
// throughout a wave rather than one after the other.
func interleave(lists ...[]*item) []*item {
	var out []*item
	for i := 0; ; i++ {
		added := false
		for _, l := range lists {
			if i < len(l) {
				out = append(out, l[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// suffixed names FILE-suffix, or "" when path is empty.
func suffixed(path, suffix string) string {
	if path == "" {
		return ""
	}
	return path + "-" + suffix
}
