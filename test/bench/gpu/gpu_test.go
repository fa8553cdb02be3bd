// Package gpu is the GPU-utilization benchmark: on the bed that runs pods
// (kube-scheduler, kwok GPU nodes, the Job and Deployment controllers),
// Kueue admits a queue of llm-d style benchmark AppWrappers, each filling
// one node's GPUs, whose guidellm Jobs run for seeded times. It measures how
// long GPUs sit idle between one benchmark's end and the next one's pods
// running, and the GPU utilization over the run, with wrapup finishing each
// AppWrapper when its Job completes, with what a user has without it:
// Kueue's maximum execution time, set to 1.5 times a guess of each run's
// length, and with the floor: each benchmark a plain batch/v1 Job of the
// same GPUs and run time, no AppWrapper, which Kueue finishes itself. `make bench-gpu` writes test/bench/results/gpu-*.md; `make test`
// runs it at a smoke size.
package gpu

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/bench"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

var (
	flagNodes      = flag.Int("gpu.nodes", 1, "fake nodes of 8 GPUs")
	flagBenchmarks = flag.Int("gpu.benchmarks", 3, "benchmark AppWrappers queued (each fills a node)")
	flagMin        = flag.Duration("gpu.min", 2*time.Second, "shortest guidellm run")
	flagMax        = flag.Duration("gpu.max", 4*time.Second, "longest guidellm run")
	flagSeed       = flag.Uint64("gpu.seed", 1, "seed of the run times")
	flagOut        = flag.String("gpu.out", "", "folder to write gpu-<nodes>x<benchmarks>.md into")
)

const (
	nodeGPUs = 8
	// slack is how much longer a variant may take than its ideal makespan
	// before the benchmark gives up.
	slack = 3
)

func TestGPU(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "GPU-utilization benchmark")
}

var _ = Describe("GPU utilization", Ordered, func() {
	var (
		fwk    *framework.Framework
		c      client.Client
		ctx    context.Context
		cancel context.CancelFunc
		rec    *recorder
		nodes  []string
	)
	BeforeAll(func() {
		ctx, cancel = context.WithCancel(context.Background())
		fwk = &framework.Framework{CRDPaths: []string{framework.KueueCRDs()}, Pods: true}
		cfg := fwk.Init()
		var err error
		c, err = client.New(cfg, client.Options{Scheme: framework.Scheme})
		Expect(err).NotTo(HaveOccurred())
		fwk.StartManager(ctx, cfg, framework.KueueWithJobsAndWrapup(gc.Options{}))
		for _, n := range framework.CreateGPUNodes(ctx, c, "gpu", "h100", *flagNodes, nodeGPUs) {
			nodes = append(nodes, n.Name)
		}
		Expect(c.Create(ctx, util.MakeGPUFlavor("h100", framework.GPUNodeLabel, "h100"))).To(Succeed())
		rec = newRecorder(ctx, cfg)
	})
	AfterAll(func() {
		cancel()
		fwk.Teardown()
	})

	It("measures the GPU-idle gap and utilization with wrapup, with Kueue's maximum execution time, and with plain Jobs", func() {
		rng := rand.New(rand.NewPCG(*flagSeed, 0))
		runs := make([]time.Duration, *flagBenchmarks)
		for i := range runs {
			span := *flagMax - *flagMin
			runs[i] = (*flagMin + time.Duration(rng.Int64N(int64(span)+1))).Round(100 * time.Millisecond)
		}
		var results []*result
		for _, v := range []variant{withWrapup, withMaxExecTime, withPlainJobs, withWrapupBinPack} {
			if v == withWrapupBinPack {
				// The last variant, so that the scheduler is restarted once.
				By("restarting kube-scheduler with a profile that packs GPUs")
				fwk.RestartScheduler(framework.BinPackGPUs)
			}
			results = append(results, runVariant(ctx, c, rec, v, runs, len(nodes)))
		}
		report := render(results, runs, len(nodes))
		fmt.Fprintln(GinkgoWriter, report)
		if *flagOut != "" {
			path := filepath.Join(*flagOut, fmt.Sprintf("gpu-%dx%d.md", len(nodes), len(runs)))
			Expect(os.WriteFile(path, []byte(report), 0o644)).To(Succeed())
			fmt.Fprintln(os.Stdout, "wrote", path)
		}
		for _, r := range results {
			Expect(r.finished).To(Equal(len(runs)), "%s: %d of %d benchmarks finished", r.variant, r.finished, len(runs))
		}
	})
})

type variant string

const (
	withWrapup      variant = "wrapup"
	withMaxExecTime variant = "Kueue max-exec-time (1.5 x run time)"
	// withPlainJobs is Kueue's own handoff, the floor: a plain Job per
	// benchmark, one pod of the node's GPUs, finished by Kueue itself.
	withPlainJobs variant = "plain Jobs, Kueue alone (no AppWrapper)"
	// withWrapupBinPack is withWrapup with kube-scheduler packing GPUs
	// (framework.BinPackGPUs), run last: the share of the gap that is the
	// scheduler's placement of a benchmark's three pods.
	withWrapupBinPack variant = "wrapup, scheduler packing GPUs"
)

// result is one variant's timeline, by benchmark.
type result struct {
	variant  variant
	start    time.Time
	end      time.Time
	finished int
	// per benchmark (index in runs)
	admitted, firstRunning, running, complete, released, quotaFreed, podsGone []time.Time
	// unschedulable: a pod of the benchmark was found to fit no node.
	unschedulable   []bool
	cpu             time.Duration
	heap            int64
	wrapupReconcile time.Duration
}

// runVariant queues every benchmark at once in a ClusterQueue of the nodes'
// GPUs and waits until each has run and given its GPUs back.
func runVariant(ctx context.Context, c client.Client, rec *recorder, v variant, runs []time.Duration, nodes int) *result {
	GinkgoHelper()
	name := map[variant]string{withWrapup: "wrapup", withMaxExecTime: "maxexec", withPlainJobs: "plainjobs", withWrapupBinPack: "binpack"}[v]
	ns := framework.CreateNamespace(ctx, c, name, map[string]string{"wrapup.bench/variant": name})
	cq := util.MakeGPUClusterQueue(name, "h100", fmt.Sprint(32*nodes), int64(nodes*nodeGPUs))
	Expect(c.Create(ctx, cq)).To(Succeed())
	Expect(c.Create(ctx, util.MakeLocalQueue("benchmarks", ns.Name, cq.Name))).To(Succeed())
	if v == withWrapup || v == withWrapupBinPack {
		rule := util.MakeRule("gpu-bench-"+name).NamespaceLabels(map[string]string{"wrapup.bench/variant": name}).
			TriggerKind("batch", "Job", "").Obj()
		Expect(c.Create(ctx, rule)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rule), rule)).To(Succeed())
			g.Expect(rule.Status.Conditions).To(ContainElement(HaveField("Type", wrapupv1alpha1.ConditionReady)))
		}, util.Timeout, util.Interval).Should(Succeed())
	}
	n := len(runs)
	r := &result{variant: v, admitted: make([]time.Time, n), firstRunning: make([]time.Time, n), running: make([]time.Time, n),
		complete: make([]time.Time, n), released: make([]time.Time, n), quotaFreed: make([]time.Time, n),
		podsGone: make([]time.Time, n), unschedulable: make([]bool, n)}
	names := make([]string, n)
	// The forced collection is before the CPU count starts and after it ends.
	heap0 := bench.ReadHeap().Live
	cpu0, rec0 := selfCPU(), reconcileTime()
	r.start = time.Now()
	for i, run := range runs {
		names[i] = fmt.Sprintf("bench-%03d", i)
		if v == withPlainJobs {
			Expect(c.Create(ctx, util.GPUJob(ns.Name, "benchmarks", names[i], nodeGPUs, map[string]string{framework.RunTimeAnnotation: run.String()}))).To(Succeed())
			continue
		}
		w := util.GPUBenchmark(ns.Name, "benchmarks", names[i], map[string]string{framework.RunTimeAnnotation: run.String()})
		if v == withMaxExecTime {
			w.Label("kueue.x-k8s.io/max-exec-time-seconds", fmt.Sprint(maxExecSeconds(run)))
		}
		Expect(c.Create(ctx, w.Obj())).To(Succeed())
	}
	// Polled without failing, so that a variant that does not finish still
	// reports what it did; the test fails after the report.
	deadline := time.Now().Add(time.Duration(slack)*idealMakespan(runs, nodes) + 2*time.Minute)
	for time.Now().Before(deadline) {
		r.finished = 0
		for i := range names {
			if rec.done(ns.Name, names[i]) {
				r.finished++
			}
		}
		if r.finished == n {
			break
		}
		select {
		case <-ctx.Done():
			return r
		case <-time.After(time.Second):
		}
	}
	r.cpu, r.wrapupReconcile = selfCPU()-cpu0, reconcileTime()-rec0
	r.heap = int64(bench.ReadHeap().Live) - int64(heap0)
	for i := range names {
		t := rec.timeline(ns.Name, names[i])
		r.admitted[i], r.firstRunning[i], r.running[i], r.complete[i] = t.admitted, t.firstRunning, t.lastRunning, t.complete
		r.released[i], r.quotaFreed[i], r.podsGone[i] = t.released, t.quotaFreed, t.podsGone
		r.unschedulable[i] = t.unschedulable
		// The end is when the last pods went, not when the poll saw it.
		if r.podsGone[i].After(r.end) {
			r.end = r.podsGone[i]
		}
	}
	return r
}

// maxExecSeconds is the max-exec-time label for a run: 1.5 times its
// length, rounded up to whole seconds. Kueue counts it from the Workload's
// admission (a whole-second timestamp), so it also covers the start: the
// AppWrapper resumed, its pods created, scheduled and started.
func maxExecSeconds(run time.Duration) int { return int(math.Ceil(1.5 * run.Seconds())) }

// idealMakespan is the makespan of runs, in their order, on the nodes,
// with no time between one run and the next (list scheduling).
func idealMakespan(runs []time.Duration, nodes int) time.Duration {
	free := make([]time.Duration, nodes)
	var end time.Duration
	for _, run := range runs {
		sort.Slice(free, func(i, j int) bool { return free[i] < free[j] })
		free[0] += run
		end = max(end, free[0])
	}
	return end
}

// idealInAdmissionOrder is idealMakespan in the order Kueue admitted the
// variant's benchmarks (it breaks ties of same-second Workloads by UID, so
// the order is not the creation order).
func idealInAdmissionOrder(r *result, runs []time.Duration, nodes int) time.Duration {
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ta, tb := r.admitted[order[a]], r.admitted[order[b]]
		if ta.IsZero() != tb.IsZero() {
			return !ta.IsZero()
		}
		return ta.Before(tb)
	})
	ordered := make([]time.Duration, len(runs))
	for k, i := range order {
		ordered[k] = runs[i]
	}
	return idealMakespan(ordered, nodes)
}

// recorder timestamps, as its watches see them, what happens to each
// benchmark: admitted (its AppWrapper, or its plain Job, unsuspended), its
// pods Running (the first and the last of three, or its one pod), its Job
// Complete, its GPUs released (the AppWrapper's deletion requested, or it
// suspended again by Kueue; for a plain Job, its Workload finished), its
// quota freed (its Workload deactivated, finished or deleted), and its pods
// gone (deleted; a plain Job's pod, which stays, once it has terminated).
type recorder struct {
	mu   sync.Mutex
	seen map[string]*timeline
}

type timeline struct {
	// plain: the benchmark is a plain Job (withPlainJobs), of one pod.
	plain                                              bool
	admitted, complete, released, quotaFreed, podsGone time.Time
	firstRunning, lastRunning                          time.Time
	// unschedulable: kube-scheduler found a pod of it to fit no node (its
	// PodScheduled condition False, reason Unschedulable).
	unschedulable bool
	pods          map[string]bool // seen Running
	live          map[string]bool
}

func newRecorder(ctx context.Context, cfg *rest.Config) *recorder {
	GinkgoHelper()
	r := &recorder{seen: map[string]*timeline{}}
	cc, err := cache.New(cfg, cache.Options{Scheme: framework.Scheme})
	Expect(err).NotTo(HaveOccurred())
	for _, o := range []client.Object{&awv1beta2.AppWrapper{}, &corev1.Pod{}, &batchv1.Job{}, &kueue.Workload{}} {
		inf, err := cc.GetInformer(ctx, o)
		Expect(err).NotTo(HaveOccurred())
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.observe(obj, false) },
			UpdateFunc: func(_, obj any) { r.observe(obj, false) },
			DeleteFunc: func(obj any) { r.observe(obj, true) },
		})
		Expect(err).NotTo(HaveOccurred())
	}
	go func() { _ = cc.Start(ctx) }()
	Expect(cc.WaitForCacheSync(ctx)).To(BeTrue())
	return r
}

func (r *recorder) get(ns, aw string) *timeline {
	k := ns + "/" + aw
	t := r.seen[k]
	if t == nil {
		t = &timeline{pods: map[string]bool{}, live: map[string]bool{}}
		r.seen[k] = t
	}
	return t
}

func (r *recorder) observe(obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch o := obj.(type) {
	case *awv1beta2.AppWrapper:
		t := r.get(o.Namespace, o.Name)
		if !o.Spec.Suspend && t.admitted.IsZero() {
			t.admitted = now
		}
		released := deleted || !o.DeletionTimestamp.IsZero() || (o.Spec.Suspend && !t.admitted.IsZero())
		if released && t.released.IsZero() && !t.admitted.IsZero() {
			t.released = now
		}
	case *kueue.Workload:
		var aw string
		plain := false
		for _, ref := range o.OwnerReferences {
			if ref.Kind == "AppWrapper" || ref.Kind == "Job" {
				aw, plain = ref.Name, ref.Kind == "Job"
			}
		}
		if aw == "" {
			return
		}
		t := r.get(o.Namespace, aw)
		t.plain = t.plain || plain
		admitted := false
		finished := false
		for _, cond := range o.Status.Conditions {
			admitted = admitted || cond.Type == kueue.WorkloadAdmitted && cond.Status == "True"
			finished = finished || cond.Type == kueue.WorkloadFinished && cond.Status == "True"
		}
		inactive := o.Spec.Active != nil && !*o.Spec.Active
		if t.quotaFreed.IsZero() && !t.admitted.IsZero() && (deleted || finished || inactive || !admitted) {
			t.quotaFreed = now
		}
		if t.plain && finished && t.released.IsZero() {
			// Kueue finished the plain Job's Workload: its GPUs are given back.
			t.released = now
		}
	case *batchv1.Job:
		aw := o.Labels[awv1beta2.AppWrapperLabel]
		if _, queued := o.Labels[util.QueueNameLabel]; aw == "" && queued {
			// A plain Job, queued for Kueue itself.
			aw = o.Name
			t := r.get(o.Namespace, aw)
			t.plain = true
			if o.Spec.Suspend != nil && !*o.Spec.Suspend && t.admitted.IsZero() {
				t.admitted = now
			}
		}
		if aw == "" {
			return
		}
		t := r.get(o.Namespace, aw)
		for _, cond := range o.Status.Conditions {
			if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue && t.complete.IsZero() {
				t.complete = now
			}
		}
	case *corev1.Pod:
		aw := o.Labels[awv1beta2.AppWrapperLabel]
		terminal := false
		if job := o.Labels[batchv1.JobNameLabel]; aw == "" && job != "" {
			// A plain Job's pod: it stays once it has terminated, and holds
			// no GPU for the scheduler from then on.
			aw = job
			terminal = o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed
		}
		if aw == "" {
			return
		}
		t := r.get(o.Namespace, aw)
		t.plain = t.plain || o.Labels[awv1beta2.AppWrapperLabel] == ""
		if terminal && !t.pods[o.Name] {
			// It ran, though the watch saw it only once it had ended.
			t.pods[o.Name] = true
			if t.firstRunning.IsZero() {
				t.firstRunning = now
			}
			if t.lastRunning.IsZero() {
				t.lastRunning = now
			}
		}
		if deleted || terminal {
			delete(t.live, o.Name)
			if len(t.live) == 0 && len(t.pods) > 0 && (!t.plain || t.podsGone.IsZero()) {
				t.podsGone = now
			}
			return
		}
		t.live[o.Name] = true
		for _, cond := range o.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				t.unschedulable = true
			}
		}
		if o.Status.Phase == corev1.PodRunning && !t.pods[o.Name] {
			t.pods[o.Name] = true
			if t.firstRunning.IsZero() {
				t.firstRunning = now
			}
			if len(t.pods) == 3 || t.plain && len(t.pods) == 1 {
				t.lastRunning = now
			}
		}
	}
}

// done: the benchmark's GPUs were released and every pod it ran is gone
// (whether or not all three ran: max-exec-time may cut one short first).
func (r *recorder) done(ns, aw string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.get(ns, aw)
	return !t.released.IsZero() && len(t.pods) > 0 && len(t.live) == 0 && !t.podsGone.IsZero()
}

// timeline is a copy of what the recorder saw of a benchmark.
func (r *recorder) timeline(ns, aw string) timeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	return *r.get(ns, aw)
}

// selfCPU is the CPU this process has used.
func selfCPU() time.Duration {
	s, _ := bench.SampleCPU()
	return s.Self
}

// reconcileTime is the time wrapup's AppWrapper controller has spent in
// reconciles (controller-runtime's controller_runtime_reconcile_time_seconds).
func reconcileTime() time.Duration {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "wrapup-appwrapper" {
					return time.Duration(m.GetHistogram().GetSampleSum() * float64(time.Second))
				}
			}
		}
	}
	return 0
}

// handoff is one benchmark's GPUs going to the next: times after the
// previous benchmark's Job completed.
type handoff struct {
	released, quotaFreed, podsGone, admitted, firstRunning, running time.Duration
	// overlap: the next benchmark's first pod ran before the previous one's
	// pods were all gone (its Job pod freed GPUs its Deployments did not).
	overlap bool
	// waited: a pod of the next benchmark was found to fit no node.
	waited bool
}

// cut reports whether benchmark i's GPUs were taken back before its Job
// completed (a max-exec-time guess too short for the run and its start).
func (r *result) cut(i int) bool {
	return r.complete[i].IsZero() || (!r.released[i].IsZero() && r.complete[i].After(r.released[i]))
}

// handoffs pairs the k-th benchmark to free its quota with the
// (nodes+k)-th to be admitted, which Kueue admitted into that quota (one
// benchmark fills a node's worth of quota, and Kueue admits one per freed
// share, whatever the order it picks). A pair whose first benchmark was
// cut short has no completion to count from, and is left out.
func handoffs(r *result, nodes int) []handoff {
	var freed, admitted []int
	for i := range r.quotaFreed {
		if !r.quotaFreed[i].IsZero() {
			freed = append(freed, i)
		}
		if !r.admitted[i].IsZero() {
			admitted = append(admitted, i)
		}
	}
	sort.Slice(freed, func(a, b int) bool { return r.quotaFreed[freed[a]].Before(r.quotaFreed[freed[b]]) })
	sort.Slice(admitted, func(a, b int) bool { return r.admitted[admitted[a]].Before(r.admitted[admitted[b]]) })
	var out []handoff
	for k := 0; k < len(freed) && nodes+k < len(admitted); k++ {
		prev, next := freed[k], admitted[nodes+k]
		if r.cut(prev) || r.running[next].IsZero() {
			continue
		}
		done := r.complete[prev]
		out = append(out, handoff{
			released:     r.released[prev].Sub(done),
			quotaFreed:   r.quotaFreed[prev].Sub(done),
			podsGone:     r.podsGone[prev].Sub(done),
			admitted:     r.admitted[next].Sub(done),
			firstRunning: r.firstRunning[next].Sub(done),
			running:      r.running[next].Sub(done),
			overlap:      r.firstRunning[next].Before(r.podsGone[prev]),
			waited:       r.unschedulable[next],
		})
	}
	return out
}

// cutShort counts the benchmarks cut short.
func cutShort(r *result) int {
	n := 0
	for i := range r.complete {
		if r.cut(i) {
			n++
		}
	}
	return n
}

func field(hs []handoff, f func(handoff) time.Duration) bench.Summary {
	d := make([]time.Duration, len(hs))
	for i, h := range hs {
		d[i] = f(h)
	}
	return bench.Summarize(d)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }

// render writes the results as the markdown of test/bench/results.
func render(results []*result, runs []time.Duration, nodes int) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	var sum time.Duration
	for _, r := range runs {
		sum += r
	}
	p("# GPU-utilization benchmark: %d nodes x %d GPUs, %d benchmarks\n\n", nodes, nodeGPUs, len(runs))
	p("Run %s; reproduce with `make bench-gpu` (test flags `-gpu.nodes=%d -gpu.benchmarks=%d -gpu.min=%s -gpu.max=%s -gpu.seed=%d`).\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), nodes, len(runs), *flagMin, *flagMax, *flagSeed)
	m := bench.ReadMachine()
	p("- **Machine**: %d cores (%s), %.1f GiB, %s; load average at the end %s.\n", m.Cores, m.CPUModel, float64(m.MemTotal)/(1<<30), runtime.Version(), m.LoadAvg)
	p("- **Bed**: kube-apiserver, etcd, kube-scheduler, kwok (fake nodes, `test/framework/kwok/stages.yaml`; a pod stops at once when deleted) and kube-controller-manager (Job, ReplicaSet, Deployment, node lifecycle, garbage collector) as processes; Kueue v0.17.0, the AppWrapper controller v1.2.2 and wrapup in the benchmark's process. Nothing writes a pod's or a Job's status.\n")
	p("- **Workload**: %d AppWrappers queued at once in one ClusterQueue of %d GPUs; each has two vLLM Deployments of 2 GPUs and a guidellm Job of 4 GPUs (a whole node), whose pod runs for a time drawn uniformly in [%s, %s] (seed %d; %s of runs in all).\n",
		len(runs), nodes*nodeGPUs, *flagMin, *flagMax, *flagSeed, sum.Round(time.Second))
	p("- **Variants**, one after the other on the same bed, in this order: **%s**, a CompletionRule on the guidellm Job (DeleteAll, TTL 0); **%s**, no rule, each AppWrapper labelled `kueue.x-k8s.io/max-exec-time-seconds` with 1.5 times its run time rounded up to a second: a guess right within 50 %%, which Kueue counts from the Workload's admission (a whole-second timestamp), so that it also covers the start (the AppWrapper resumed, its pods created, scheduled and started); past it, Kueue deactivates the Workload and the AppWrapper controller removes the components; **%s**, the floor: each benchmark one plain batch/v1 Job of one pod of the node's %d GPUs and the same run time, queued for Kueue with no AppWrapper and no rule, whose Workload Kueue's Job integration finishes when the Job completes (its pod stays, terminated, and holds no GPU from then on); **%s**, last, as the first but with kube-scheduler restarted with a profile that packs GPUs (NodeResourcesFit scoring MostAllocated on `nvidia.com/gpu`; `framework.BinPackGPUs`). The other variants run with kube-scheduler's default profile, which scores CPU and memory alone, least allocated first: it spreads a benchmark's three pods (1 CPU each) over the nodes, so that the GPUs a benchmark frees may be split in a way the next benchmark's 4-GPU pod does not fit.\n", withWrapup, withMaxExecTime, withPlainJobs, nodeGPUs, withWrapupBinPack)
	p("- Times are when the benchmark's watches saw each change (ms), not the objects' second-granular timestamps. A handoff pairs the k-th benchmark to free its quota with the (nodes+k)-th that Kueue admitted: the one that took that quota.\n\n")

	p("## GPU-idle gap per handoff (ms)\n\nFrom a benchmark's guidellm Job Complete to the benchmark admitted into its quota having all its pods Running.\n\n")
	p("| variant | handoffs | p50 | p90 | p99 | max | next's first pod ran before the previous pods were gone | next's pods found no node at first | p50 / p99 of the others | runs cut short before their Job completed |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	sums := map[variant]bench.Summary{}
	for _, r := range results {
		hs := handoffs(r, nodes)
		s := field(hs, func(h handoff) time.Duration { return h.running })
		sums[r.variant] = s
		overlaps, waited := 0, 0
		var fit []handoff
		for _, h := range hs {
			if h.overlap {
				overlaps++
			}
			if h.waited {
				waited++
			} else {
				fit = append(fit, h)
			}
		}
		f := field(fit, func(h handoff) time.Duration { return h.running })
		p("| %s | %d | %s | %s | %s | %s | %d | %d | %s / %s | %d |\n", r.variant, s.Count, ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max), overlaps, waited, ms(f.P50), ms(f.P99), cutShort(r))
	}
	if a, z := sums[withWrapup], sums[withMaxExecTime]; a.Count > 0 && z.Count > 0 && z.P50 > 0 {
		p("\nwrapup ÷ max-exec-time: p50 %.3f, p99 %.3f.\n", float64(a.P50)/float64(z.P50), float64(a.P99)/float64(z.P99))
	}
	if a, z := sums[withWrapup], sums[withPlainJobs]; a.Count > 0 && z.Count > 0 && z.P50 > 0 {
		p("wrapup ÷ plain Jobs (Kueue's own handoff): p50 %.3f, p99 %.3f.\n", float64(a.P50)/float64(z.P50), float64(a.P99)/float64(z.P99))
	}
	if a, z := sums[withWrapupBinPack], sums[withPlainJobs]; a.Count > 0 && z.Count > 0 && z.P50 > 0 {
		p("wrapup with the scheduler packing GPUs ÷ plain Jobs: p50 %.3f, p99 %.3f.\n", float64(a.P50)/float64(z.P50), float64(a.P99)/float64(z.P99))
	}
	p("\n*Found no node at first*: a pod of the next benchmark was marked Unschedulable by kube-scheduler (no node had its GPUs free), and waited for GPUs to be freed and for the scheduler to try it again. *The others*: the handoffs whose pods all fitted a node at the first try.\n")
	p("\n## Where the gap goes (ms after the Job's completion, p50 / p99)\n\n")
	p("| variant | AppWrapper released | its quota freed | its pods gone | next admitted | next's first pod Running | next's pods all Running |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		hs := handoffs(r, nodes)
		cell := func(f func(handoff) time.Duration) string {
			s := field(hs, f)
			return ms(s.P50) + " / " + ms(s.P99)
		}
		p("| %s | %s | %s | %s | %s | %s | %s |\n", r.variant,
			cell(func(h handoff) time.Duration { return h.released }), cell(func(h handoff) time.Duration { return h.quotaFreed }),
			cell(func(h handoff) time.Duration { return h.podsGone }), cell(func(h handoff) time.Duration { return h.admitted }),
			cell(func(h handoff) time.Duration { return h.firstRunning }), cell(func(h handoff) time.Duration { return h.running }))
	}
	p("\n- *Released*: with wrapup, its delete request (seen as the deletion timestamp): wrapup's part. With max-exec-time, the AppWrapper suspended by Kueue; this can come before the Job's completion (negative). With plain Jobs, the Workload finished by Kueue.\n")
	p("- *Quota freed*: its Workload deactivated, finished or deleted. With wrapup, after the AppWrapper controller has removed the components and their pods, and the garbage collector the Workload; with max-exec-time, at the deactivation, before the teardown; with plain Jobs, at the Workload's finish. *Pods gone*: deleted; a plain Job's pod, once it has terminated.\n")
	p("- From the quota freed to the next admitted is Kueue. From there to the pods Running: the AppWrapper controller creates the components, the Deployment and Job controllers the pods, the scheduler binds them once the node's GPUs are free, and kwok starts them. A plain Job has one pod, which the Job controller makes once Kueue unsuspends it.\n")

	p("\n## Utilization\n\n| variant | makespan (s) | ideal in its admission order (s) | ÷ ideal | useful GPU utilization | GPUs allocated |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		makespan := r.end.Sub(r.start)
		ideal := idealInAdmissionOrder(r, runs, nodes)
		var held, useful time.Duration
		for i := range runs {
			if !r.podsGone[i].IsZero() && !r.running[i].IsZero() {
				held += r.podsGone[i].Sub(r.running[i])
			}
			if !r.cut(i) {
				useful += runs[i]
			}
		}
		capacity := float64(nodes) * makespan.Seconds()
		p("| %s | %.1f | %.1f | %.2f | %.1f %% | %.1f %% |\n", r.variant, makespan.Seconds(), ideal.Seconds(), makespan.Seconds()/ideal.Seconds(),
			100*useful.Seconds()/capacity, 100*held.Seconds()/capacity)
	}
	p("\n- Every benchmark holds a whole node, so GPU-seconds are node-seconds times 8 and the ratios are the same.\n")
	p("- *Makespan*: from the first submission to the last benchmark's pods gone. *Ideal*: the same runs, in the order Kueue admitted them in that variant, on the same nodes, with no time between runs.\n")
	p("- *Useful*: the configured run times of the runs that completed, over the nodes' time during the makespan. *Allocated*: the time pods held the nodes, from a benchmark's last pod Running to its pods gone (it leaves out the start).\n")

	p("\n## Resources of the benchmark's process during each variant\n\n| variant | CPU (s) | live heap change (MiB) | wall time in wrapup's AppWrapper reconciles (s) |\n|---|---:|---:|---:|\n")
	for _, r := range results {
		p("| %s | %.1f | %.1f | %.2f |\n", r.variant, r.cpu.Seconds(), float64(r.heap)/(1<<20), r.wrapupReconcile.Seconds())
	}
	p("\nThe process runs Kueue, the AppWrapper controller, wrapup and the benchmark's watches: its CPU and heap are theirs together. The last column is the wall time of wrapup's AppWrapper reconciles only (not CPU; not its rule controller or watches).\n")
	return b.String()
}
