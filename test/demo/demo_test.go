// Package demo tells wrapup's main story on a local control plane: an llm-d
// style benchmark AppWrapper (two inference Deployments that never finish, a
// ConfigMap and a guidellm Job) is finished by its Job, and everything in it
// goes. Run it with `make demo`; it is also part of `make test`.
package demo

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

func say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "[%6.2fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

var _ = Describe("wrapup", Ordered, func() {
	var (
		fwk    *framework.Framework
		c      client.Client
		ctx    context.Context
		cancel context.CancelFunc
	)
	BeforeAll(func() {
		ctx, cancel = context.WithCancel(context.Background())
		say("Starting a local control plane: etcd, kube-apiserver, kube-controller-manager (garbage collector),")
		say("the AppWrapper controller and wrapup, all real, in this process or beside it")
		fwk = &framework.Framework{}
		cfg := fwk.Init()
		var err error
		c, err = client.New(cfg, client.Options{Scheme: framework.Scheme})
		Expect(err).NotTo(HaveOccurred())
		fwk.StartManager(ctx, cfg, func(_ context.Context, mgr ctrl.Manager) error {
			return gc.Setup(mgr, gc.Options{})
		})
		say("Control plane up")
	})
	AfterAll(func() {
		cancel()
		fwk.Teardown()
		say("Control plane stopped")
	})

	It("finishes a benchmark AppWrapper when its Job completes, and frees everything in it", func() {
		ns := framework.CreateNamespace(ctx, c, "llm-d", nil)

		rule := util.MakeRule("benchmarks").
			AppWrapperLabels(map[string]string{"llm-d.ai/role": "benchmark"}).
			TriggerKind("batch", "Job", "").
			Message(`'guidellm finished: ' + string(object.status.?succeeded.orValue(0)) + ' pod(s) succeeded'`).
			Obj()
		Expect(c.Create(ctx, rule)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rule), rule)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(rule.Status.Conditions, wrapupv1alpha1.ConditionReady)).To(BeTrue())
		}, util.Timeout, util.Interval).Should(Succeed())
		ready := apimeta.FindStatusCondition(rule.Status.Conditions, wrapupv1alpha1.ConditionReady)
		say("CompletionRule %q: Ready=%s (%s): %s", rule.Name, ready.Status, ready.Reason, ready.Message)

		aw := util.MakeAppWrapper("llama-8b-sweep", ns.Name).
			Label("llm-d.ai/role", "benchmark").
			Component(util.MakeDeployment("vllm-prefill", 1), nil).
			Component(util.MakeDeployment("vllm-decode", 1), nil).
			Component(util.MakeConfigMap("guidellm-config", map[string]string{"rate": "sweep"}), nil).
			Component(util.MakeJob("guidellm").Obj(), nil).
			Obj()
		Expect(c.Create(ctx, aw)).To(Succeed())
		say("Submitted AppWrapper %s: Deployments vllm-prefill and vllm-decode, ConfigMap guidellm-config, Job guidellm", aw.Name)
		util.ExpectAppWrapperPhase(ctx, c, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
		say("The AppWrapper controller deployed the components: phase Running")

		var pods []*corev1.Pod
		for _, name := range []string{"vllm-prefill", "vllm-decode"} {
			d := &appsv1.Deployment{}
			Eventually(func() error {
				return c.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: name}, d)
			}, util.Timeout, util.Interval).Should(Succeed())
			d.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
			pods = append(pods, util.CreatePod(ctx, c, ns.Name, name+"-0", aw.Name, d, corev1.PodRunning))
		}
		job := types.NamespacedName{Namespace: ns.Name, Name: "guidellm"}
		Eventually(func() error { return c.Get(ctx, job, &batchv1.Job{}) }, util.Timeout, util.Interval).Should(Succeed())
		util.JobStarted(ctx, c, job)
		say("Inference pods Running; guidellm drives load against them (the servers never finish on their own)")

		Consistently(func() error {
			return c.Get(ctx, client.ObjectKeyFromObject(aw), &awv1beta2.AppWrapper{})
		}, "2s", util.Interval).Should(Succeed())
		say("While guidellm runs, wrapup does nothing")

		util.JobComplete(ctx, c, job)
		completed := time.Now()
		say("guidellm Job Complete")

		var recordedAfter, deletedAfter time.Duration
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			err := c.Get(ctx, client.ObjectKeyFromObject(aw), got)
			if err == nil && recordedAfter == 0 && got.Labels[wrapupv1alpha1.OutcomeLabel] != "" {
				recordedAfter = time.Since(completed)
				say("wrapup recorded the outcome (+%dms): %s=%s, %s=%q", recordedAfter.Milliseconds(),
					wrapupv1alpha1.OutcomeLabel, got.Labels[wrapupv1alpha1.OutcomeLabel],
					wrapupv1alpha1.MessageAnnotation, got.Annotations[wrapupv1alpha1.MessageAnnotation])
			}
			if err == nil && deletedAfter == 0 && !got.DeletionTimestamp.IsZero() {
				deletedAfter = time.Since(completed)
				say("wrapup deleted the AppWrapper (+%dms); its controller tears the components down", deletedAfter.Milliseconds())
			}
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred(), "the AppWrapper still exists")
		}, util.LongTimeout, 10*time.Millisecond).Should(Succeed())
		say("AppWrapper gone (+%dms)", time.Since(completed).Milliseconds())

		for _, obj := range []client.Object{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "vllm-prefill"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "vllm-decode"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "guidellm-config"}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "guidellm"}},
			pods[0], pods[1],
		} {
			util.ExpectGone(ctx, c, obj, util.LongTimeout)
		}
		say("Components and inference pods gone (+%dms): the GPUs and quota are free for the next run", time.Since(completed).Milliseconds())

		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rule), rule)).To(Succeed())
			g.Expect(rule.Status.Succeeded).To(Equal(int64(1)))
		}, util.Timeout, util.Interval).Should(Succeed())
		say("CompletionRule %q: succeeded=%d failed=%d", rule.Name, rule.Status.Succeeded, rule.Status.Failed)
	})
})
