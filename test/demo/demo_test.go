// Package demo tells wrapup's main story on a local control plane that runs
// pods, with Kueue: two llm-d style benchmark AppWrappers (two vLLM
// Deployments that never finish, a ConfigMap and a guidellm Job, all asking
// for GPUs) queue for a GPU node that fits one. The real scheduler binds
// their pods to a fake GPU node that kwok runs; when the first one's
// guidellm pod succeeds and the Job controller completes its Job, wrapup
// finishes it, its pods terminate, and Kueue admits the second, whose pods
// run on the freed GPUs. Nothing in it writes a pod's or a Job's status.
// Run it with `make demo`; it is also part of `make test`.
package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

func TestDemo(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "wrapup demo")
}

var start = time.Now()

// said is every line the demo printed, for the README's check.
var said []string

func say(format string, args ...any) {
	line := fmt.Sprintf("[%6.2fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	said = append(said, line)
	fmt.Fprintln(os.Stdout, line)
}

// shape is a demo line without what changes from run to run: times,
// durations, counts of milliseconds and the generated parts of pod names.
func shape(line string) string {
	line = regexp.MustCompile(`-[a-z0-9]{5,10}\b`).ReplaceAllString(line, "-x")
	line = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`).ReplaceAllString(line, "0")
	// "+  49ms" and "+1483ms": the padding of a width the number may fill.
	line = regexp.MustCompile(`\+\s+`).ReplaceAllString(line, "+")
	return strings.Join(strings.Fields(line), " ")
}

// readmeDemo is the demo's output as the README shows it.
func readmeDemo() []string {
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "README.md"))
	Expect(err).NotTo(HaveOccurred())
	_, rest, ok := strings.Cut(string(data), "What `make demo` shows")
	Expect(ok).To(BeTrue(), "README.md: no demo output")
	_, rest, ok = strings.Cut(rest, "```\n")
	Expect(ok).To(BeTrue())
	block, _, ok := strings.Cut(rest, "```")
	Expect(ok).To(BeTrue())
	return strings.Split(strings.TrimSpace(block), "\n")
}

// nodeGPUs is the GPU node's size: one benchmark (2+2+4 GPUs) fills it.
const nodeGPUs = 8

// demoTimeout bounds each step, which the whole chain of controllers takes.
const demoTimeout = 2 * time.Minute

var _ = Describe("wrapup", Ordered, func() {
	var (
		fwk    *framework.Framework
		c      client.Client
		ctx    context.Context
		cancel context.CancelFunc
	)
	BeforeAll(func() {
		ctx, cancel = context.WithCancel(context.Background())
		say("Starting a local control plane that runs pods: etcd, kube-apiserver, kube-scheduler, kwok (the kubelet of")
		say("fake GPU nodes) and kube-controller-manager (Job, ReplicaSet, Deployment, node lifecycle, garbage collector),")
		say("with Kueue, the AppWrapper controller and wrapup running against it")
		fwk = &framework.Framework{CRDPaths: []string{framework.KueueCRDs()}, Pods: true}
		cfg := fwk.Init()
		var err error
		c, err = client.New(cfg, client.Options{Scheme: framework.Scheme})
		Expect(err).NotTo(HaveOccurred())
		fwk.StartManager(ctx, cfg, framework.KueueAndWrapup(gc.Options{}))
		say("Control plane up")
	})
	AfterAll(func() {
		cancel()
		fwk.Teardown()
		say("Control plane stopped; every process it started has exited")
		// The README shows this output: the same lines, times and names
		// aside, so that it cannot drift from what make demo prints.
		var want, got []string
		for _, l := range readmeDemo() {
			want = append(want, shape(l))
		}
		for _, l := range said {
			got = append(got, shape(l))
		}
		Expect(got).To(Equal(want), "README.md's demo output differs from what the demo printed:\n%s", strings.Join(said, "\n"))
	})

	It("hands a finished benchmark's GPUs to the next queued one", func() {
		ns := framework.CreateNamespace(ctx, c, "llm-d", nil)
		node := framework.CreateGPUNodes(ctx, c, "gpu-node", "h100", 1, nodeGPUs)[0].Name
		say("Node %s Ready (kwok): %d x %s", node, nodeGPUs, util.GPU)
		Expect(c.Create(ctx, util.MakeGPUFlavor("h100", framework.GPUNodeLabel, "h100"))).To(Succeed())
		Expect(c.Create(ctx, util.MakeGPUClusterQueue("gpu-pool", "h100", "32", nodeGPUs))).To(Succeed())
		Expect(c.Create(ctx, util.MakeLocalQueue("benchmarks", ns.Name, "gpu-pool"))).To(Succeed())
		say("Kueue: ClusterQueue gpu-pool with %d GPUs of flavor h100: one benchmark at a time", nodeGPUs)

		rule := util.MakeRule("benchmarks").
			AppWrapperLabels(map[string]string{"llm-d.ai/role": "benchmark"}).
			TriggerKind("batch", "Job", "").
			Message(`'guidellm finished: ' + string(object.status.?succeeded.orValue(0)) + ' pod(s) succeeded'`).
			Obj()
		Expect(c.Create(ctx, rule)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rule), rule)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(rule.Status.Conditions, wrapupv1alpha1.ConditionReady)).To(BeTrue())
		}, util.Timeout, util.Interval).Should(Succeed(), "the CompletionRule did not become Ready")
		ready := apimeta.FindStatusCondition(rule.Status.Conditions, wrapupv1alpha1.ConditionReady)
		say("CompletionRule %q: Ready=%s: %s", rule.Name, ready.Status, ready.Message)

		submit := func(name string) *awv1beta2.AppWrapper {
			aw := util.GPUBenchmark(ns.Name, "benchmarks", name, map[string]string{framework.RunTimeAnnotation: "3s"}).Obj()
			Expect(c.Create(ctx, aw)).To(Succeed())
			return aw
		}
		showPods := func(aw string, pods []corev1.Pod) {
			var parts []string
			for _, p := range pods {
				parts = append(parts, fmt.Sprintf("%s on %s (%d GPU)", strings.TrimPrefix(p.Name, aw+"-"), p.Spec.NodeName,
					p.Spec.Containers[0].Resources.Requests.Name(util.GPU, "").Value()))
			}
			say("  pods of %s: %s", aw, strings.Join(parts, ", "))
		}

		first := submit("llama-8b-sweep")
		say("Submitted AppWrapper %s: Deployments -prefill and -decode (vLLM, 2 GPUs each), a ConfigMap, Job -guidellm (4 GPUs, runs 3 s)", first.Name)
		util.ExpectWorkloadCondition(ctx, c, first, kueue.WorkloadAdmitted, metav1.ConditionTrue)
		say("Kueue admitted %s", first.Name)
		pods, _ := util.ExpectPodsRunning(ctx, c, ns.Name, first.Name, node, 3, demoTimeout)
		say("The AppWrapper controller deployed it; the scheduler bound its pods; they run:")
		showPods(first.Name, pods)
		say("GPUs in use on %s: %d/%d", node, util.GPUsInUse(ctx, c, node), nodeGPUs)

		second := submit("qwen-32b-sweep")
		util.ExpectWorkloadCondition(ctx, c, second, kueue.WorkloadQuotaReserved, metav1.ConditionFalse)
		say("Submitted AppWrapper %s: waiting, no GPUs left (its Workload is pending)", second.Name)

		job := types.NamespacedName{Namespace: ns.Name, Name: first.Name + "-guidellm"}
		seen := util.AwaitJobComplete(ctx, c, job, demoTimeout)
		say("guidellm's pod succeeded; the Job controller marked the Job Complete; the vLLM servers would run forever")
		since := func() int64 { return time.Since(seen).Milliseconds() }

		var recorded, deleted bool
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			err := c.Get(ctx, client.ObjectKeyFromObject(first), got)
			cr := &wrapupv1alpha1.CompletionRecord{}
			if !recorded && c.Get(ctx, types.NamespacedName{Namespace: first.Namespace, Name: wrapupv1alpha1.RecordName(first.Name, first.UID)}, cr) == nil {
				recorded = true
				say("  +%4dms wrapup recorded the outcome in the run's CompletionRecord %s: %s, %q", since(), cr.Name, cr.Outcome, cr.Message)
			}
			if err == nil && !deleted && !got.DeletionTimestamp.IsZero() {
				deleted = true
				say("  +%4dms wrapup deleted the AppWrapper; its controller tears the components down", since())
			}
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred(), "the finished AppWrapper still exists")
		}, demoTimeout, 10*time.Millisecond).Should(Succeed())
		say("  +%4dms AppWrapper %s and its components gone", since(), first.Name)
		Expect(recorded).To(BeTrue(), "the AppWrapper went before its CompletionRecord was seen")
		Eventually(func() []corev1.Pod { return util.PodsOf(ctx, c, ns.Name, first.Name) }, demoTimeout, 10*time.Millisecond).Should(BeEmpty())
		say("  +%4dms its pods terminated; GPUs in use on %s: %d/%d", since(), node, util.GPUsInUse(ctx, c, node), nodeGPUs)

		util.ExpectWorkloadCondition(ctx, c, second, kueue.WorkloadAdmitted, metav1.ConditionTrue)
		say("  +%4dms Kueue admitted %s: the GPUs came back without anyone tearing anything down", since(), second.Name)
		pods, _ = util.ExpectPodsRunning(ctx, c, ns.Name, second.Name, node, 3, demoTimeout)
		say("  +%4dms %s's pods Running on the freed GPUs: the GPUs were idle that long after the Job completed (as this demo saw both)",
			since(), second.Name)
		showPods(second.Name, pods)
		say("GPUs in use on %s: %d/%d", node, util.GPUsInUse(ctx, c, node), nodeGPUs)

		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rule), rule)).To(Succeed())
			g.Expect(rule.Status.Succeeded).To(BeNumerically(">=", 1))
		}, util.Timeout, util.Interval).Should(Succeed())
		say("CompletionRule %q: succeeded=%d failed=%d matched=%d", rule.Name, rule.Status.Succeeded, rule.Status.Failed, rule.Status.MatchedAppWrappers)
	})
})
