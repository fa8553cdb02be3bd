package multikueue

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/wrapup-dev/wrapup/test/bench"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

var (
	latencyRuns = flag.Int("mk.runs", 3, "benchmark runs per setup in the latency measure (make test: a smoke size; make bench-multikueue: 100)")
	latencyOut  = flag.String("mk.out", "", "folder to write the latency results to (multikueue-RUNS.md); empty: only log them")
)

// latencies are one setup's measured runs.
type latencies struct {
	toDelete, toAdmitted []time.Duration
	// stalled counts the runs whose next AppWrapper Kueue did not admit
	// within stallAfter of the trigger (not in toAdmitted).
	stalled int
}

// stallAfter is when a next AppWrapper not admitted yet counts as stalled.
const stallAfter = 15 * time.Second

// The latency measure: benchmark AppWrappers queued one behind the other
// (the ClusterQueue holds one at a time), each finished by its trigger.
// For each run: the trigger's status write (Complete) → wrapup's delete
// request of the AppWrapper that holds the quota (as the audit log
// received it), and → the next AppWrapper admitted (as a watch of the
// Workloads sees it). Once through MultiKueue (the trigger on a worker,
// the quota and the next admission on the manager), once in one cluster
// (worker-1 alone, with wrapup there), on the same machine in the same run.
var _ = Describe("Latency from a trigger on a worker to the manager's quota", Ordered, func() {
	var multi, single latencies
	started := time.Now()

	It("measures it through MultiKueue", func() {
		ns := latencyNamespace("lat-mk")
		createLatencyRule(&manager)
		multi = measureLatency(&manager, ns, true, *latencyRuns)
	})

	It("measures it in one cluster", func() {
		stop := startWrapup(*workers[0], false)
		defer stop()
		ns := latencyNamespace("lat-one")
		createLatencyRule(workers[0])
		single = measureLatency(workers[0], ns, false, *latencyRuns)
	})

	AfterAll(func() {
		if len(multi.toDelete) == 0 || len(single.toDelete) == 0 {
			return
		}
		report := latencyReport(multi, single, time.Since(started))
		GinkgoWriter.Println(report)
		AddReportEntry("latency", report)
		if *latencyOut != "" {
			path := filepath.Join(*latencyOut, fmt.Sprintf("multikueue-%d.md", *latencyRuns))
			Expect(os.WriteFile(path, []byte(report), 0o644)).To(Succeed())
		}
	})
})

// latencyNamespace makes a namespace of the same name on every cluster,
// with a flavor and a ClusterQueue for one benchmark on each (the manager's
// through the MultiKueue admission check), and room for several on the
// workers.
func latencyNamespace(prefix string) string {
	GinkgoHelper()
	ns := framework.CreateNamespace(ctx, manager.client, prefix, nil).Name
	for _, c := range append([]*cluster{&manager}, workers...) {
		if c != &manager {
			Expect(c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		}
		quota := managerQuota
		if c != &manager && strings.HasPrefix(prefix, "lat-mk") {
			quota = workerQuota
		}
		Expect(c.client.Create(ctx, util.MakeResourceFlavor(ns))).To(Succeed())
		cq := util.MakeClusterQueue(ns, ns, quota)
		if c == &manager {
			cq.Spec.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: admissionCheck}}}
		}
		Expect(c.client.Create(ctx, cq)).To(Succeed())
		Expect(c.client.Create(ctx, util.MakeLocalQueue("benchmarks", ns, cq.Name))).To(Succeed())
		cl := c.client
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			Expect(client.IgnoreNotFound(cl.Delete(ctx, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "benchmarks"}}))).To(Succeed())
			Expect(client.IgnoreNotFound(cl.Delete(ctx, &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			Expect(client.IgnoreNotFound(cl.Delete(ctx, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		})
	}
	return ns
}

func createLatencyRule(c *cluster) {
	GinkgoHelper()
	r := util.MakeRule("").AppWrapperLabels(map[string]string{"llm-d.ai/role": "benchmark"}).TriggerKind("batch", "Job", "").Obj()
	r.Name = "latency-benchmarks"
	Expect(c.client.Create(ctx, r)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(c.client.Delete(ctx, r))).To(Succeed()) })
}

// measureLatency runs runs benchmarks through home's queue in ns, each
// behind the one before, and measures each trigger's completion to the
// delete request of its AppWrapper and to the next one's admission.
func measureLatency(home *cluster, ns string, managed bool, runs int) latencies {
	GinkgoHelper()
	wc, err := client.NewWithWatch(home.cfg, client.Options{Scheme: framework.Scheme})
	Expect(err).NotTo(HaveOccurred())
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wi, err := wc.Watch(wctx, &kueue.WorkloadList{}, client.InNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	admitted := map[string]time.Time{}
	// seen is told of each admission the watch records.
	seen := make(chan struct{}, 1)
	go func() {
		defer GinkgoRecover()
		for e := range wi.ResultChan() {
			wl, ok := e.Object.(*kueue.Workload)
			if !ok || e.Type == watch.Deleted || !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
				continue
			}
			if ref := metav1.GetControllerOf(wl); ref != nil {
				mu.Lock()
				if _, ok := admitted[ref.Name]; !ok {
					admitted[ref.Name] = time.Now()
					select {
					case seen <- struct{}{}:
					default:
					}
				}
				mu.Unlock()
			}
		}
	}()

	name := func(i int) string { return fmt.Sprintf("bench-%03d", i) }
	aws := []*awv1beta2.AppWrapper{submitTo(home, ns, name(0), managed, nil), submitTo(home, ns, name(1), managed, nil)}
	var out latencies
	for i := 0; i < runs; i++ {
		aw := aws[i]
		w := home
		if managed {
			w = dispatchedTo(aw)
		}
		job := runOn(w, aw, home)
		// One AppWrapper waits behind it, no more: Kueue's BestEffortFIFO
		// would admit any of several, not the first.
		t0 := time.Now()
		util.JobComplete(ctx, w.client, job)
		var deleted time.Time
		Eventually(func(g Gomega) {
			for _, r := range home.fwk.AuditedAppWrapperRequests("delete", wrapupUser, ns) {
				if r.Name == aw.Name {
					deleted = r.Received
				}
			}
			g.Expect(deleted).NotTo(BeZero(), "no delete request of %s yet", aw.Name)
		}, util.LongTimeout, 20*time.Millisecond).Should(Succeed())
		// admittedAt waits up to timeout for the watch to see the next one admitted.
		admittedAt := func(timeout time.Duration) time.Time {
			timer := time.NewTimer(timeout)
			defer timer.Stop()
			for {
				mu.Lock()
				at := admitted[aws[i+1].Name]
				mu.Unlock()
				if !at.IsZero() {
					return at
				}
				select {
				case <-seen:
				case <-timer.C:
					return time.Time{}
				}
			}
		}
		out.toDelete = append(out.toDelete, deleted.Sub(t0))
		if next := admittedAt(stallAfter); !next.IsZero() {
			out.toAdmitted = append(out.toAdmitted, next.Sub(t0))
		} else {
			// Not admitted in time: counted as stalled, not measured, and a
			// change of its ClusterQueue makes Kueue look at it again (it
			// requeues a Workload found inadmissible on such events; see
			// kubernetes-sigs/kueue#8653 for the ones it may miss).
			out.stalled++
			cq := &kueue.ClusterQueue{}
			Expect(home.client.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
			if cq.Annotations == nil {
				cq.Annotations = map[string]string{}
			}
			cq.Annotations["wrapup.test/requeue"] = fmt.Sprint(i)
			Expect(home.client.Update(ctx, cq)).To(Succeed())
			if admittedAt(util.LongTimeout).IsZero() {
				var wls kueue.WorkloadList
				Expect(home.client.List(ctx, &wls, client.InNamespace(ns))).To(Succeed())
				var state []string
				for _, wl := range wls.Items {
					var conds []string
					for _, c := range wl.Status.Conditions {
						conds = append(conds, c.Type+"="+string(c.Status)+"("+c.Reason+")")
					}
					state = append(state, fmt.Sprintf("%s deleting=%v finalizers=%v %v", wl.Name, wl.DeletionTimestamp != nil, wl.Finalizers, conds))
				}
				Expect(home.client.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
				Fail(fmt.Sprintf("%s not admitted, even after its ClusterQueue changed; Workloads: %s; ClusterQueue usage %+v pending %d admitted %d",
					aws[i+1].Name, strings.Join(state, "; "), cq.Status.FlavorsUsage, cq.Status.PendingWorkloads, cq.Status.AdmittedWorkloads))
			}
		}
		util.ExpectGone(ctx, home.client, aw.DeepCopy(), util.LongTimeout)
		if i+2 <= runs {
			aws = append(aws, submitTo(home, ns, name(i+2), managed, nil))
		}
	}
	return out
}

// latencyReport renders the two setups side by side.
func latencyReport(multi, single latencies, took time.Duration) string {
	md, ma := bench.Summarize(multi.toDelete), bench.Summarize(multi.toAdmitted)
	sd, sa := bench.Summarize(single.toDelete), bench.Summarize(single.toAdmitted)
	ms := func(d time.Duration) string { return fmt.Sprintf("%d", d.Milliseconds()) }
	var b strings.Builder
	fmt.Fprintf(&b, "# Trigger on a worker to the manager's quota: %d runs per setup\n\n", len(multi.toDelete))
	fmt.Fprintf(&b, "Machine: %d cores, %s; three control planes (a manager, two workers) in one test process (test/multikueue, `make bench-multikueue`), one run; %s in all.\n\n",
		runtime.NumCPU(), runtime.Version(), took.Round(time.Second))
	b.WriteString("Each run: a benchmark AppWrapper (two Deployments, a ConfigMap, the benchmark Job) holds the ClusterQueue's quota, the next waits behind it; the trigger's status write (Complete) starts the clock. " +
		"**→ delete** is wrapup's delete request of the AppWrapper that holds the quota, as the API server's audit log received it; **→ next admitted** is the next AppWrapper's Workload Admitted, as a watch sees it. " +
		"Through MultiKueue, the Job is on a worker and the quota, the delete and the next admission on the manager; in one cluster (worker-1 alone, with wrapup there), everything is on one API server.\n\n")
	b.WriteString("| setup | → delete p50 / p99 / max (ms) | → next admitted p50 / p99 / max (ms) |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| MultiKueue (manager, 2 workers) | %s / %s / %s | %s / %s / %s |\n", ms(md.P50), ms(md.P99), ms(md.Max), ms(ma.P50), ms(ma.P99), ms(ma.Max))
	fmt.Fprintf(&b, "| one cluster | %s / %s / %s | %s / %s / %s |\n", ms(sd.P50), ms(sd.P99), ms(sd.Max), ms(sa.P50), ms(sa.P99), ms(sa.Max))
	rd, ra := bench.RatioOf(md, sd), bench.RatioOf(ma, sa)
	fmt.Fprintf(&b, "| ratio MultiKueue ÷ one cluster | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f |\n", rd.P50, rd.P99, rd.Max, ra.P50, ra.P99, ra.Max)
	fmt.Fprintf(&b, "\nRuns whose next AppWrapper was not admitted within %s of the trigger (left out of → next admitted; a change of the ClusterQueue then makes Kueue look at it again): MultiKueue %d of %d, one cluster %d of %d.\n",
		stallAfter, multi.stalled, len(multi.toDelete), single.stalled, len(single.toDelete))
	return b.String()
}
