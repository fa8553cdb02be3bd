package integration

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

var _ = Describe("Two wrapup replicas with leader election", func() {
	var ns *corev1.Namespace

	BeforeEach(func() {
		ns = specNamespace("leader")

		// The replicas below are the only wrapup running.
		stopWrapup()
		DeferCleanup(startWrapup)
	})

	// replica starts a wrapup manager with leader election on a short
	// lease. Its cancel function is a crash: the lease is not released.
	replica := func() (ctrl.Manager, context.CancelFunc, chan struct{}) {
		GinkgoHelper()
		mgr, err := ctrl.NewManager(wrapupCfg, ctrl.Options{
			Scheme:                  framework.Scheme,
			Cache:                   gc.CacheOptions(),
			Metrics:                 metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress:  "0",
			LeaderElection:          true,
			LeaderElectionID:        "wrapup-" + ns.Name,
			LeaderElectionNamespace: framework.ControllerNamespace,
			LeaseDuration:           ptr.To(2 * time.Second),
			RenewDeadline:           ptr.To(1500 * time.Millisecond),
			RetryPeriod:             ptr.To(200 * time.Millisecond),
			Controller:              crconfig.Controller{SkipNameValidation: ptr.To(true)},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(gc.Setup(mgr, gc.Options{FailureGracePeriod: failureGracePeriod})).To(Succeed())
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		return mgr, cancel, done
	}

	It("acts only through the leader, and the other takes over without duplicate or lost actions", func() {
		rule := util.MakeRule(ns.Name+"-leader").TriggerKind("batch", "Job", "").
			NamespaceLabels(map[string]string{nsLabel: ns.Name}).Obj()
		Expect(k8sClient.Create(ctx, rule)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, rule))).To(Succeed()) })

		const n = 6
		var aws []*awv1beta2.AppWrapper
		for i := 0; i < n; i++ {
			aw := util.MakeAppWrapper(fmt.Sprintf("run%d", i), ns.Name).
				Component(util.MakeJob(fmt.Sprintf("run%d-job", i)).Obj(), nil).Obj()
			Expect(k8sClient.Create(ctx, aw)).To(Succeed())
			aws = append(aws, aw)
		}
		for _, aw := range aws {
			util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
			Eventually(func() error {
				return k8sClient.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: aw.Name + "-job"}, &batchv1.Job{})
			}, util.Timeout, util.Interval).Should(Succeed())
		}
		complete := func(aw *awv1beta2.AppWrapper) {
			util.JobComplete(ctx, k8sClient, types.NamespacedName{Namespace: ns.Name, Name: aw.Name + "-job"})
		}

		By("starting replica A, then replica B")
		a, stopA, doneA := replica()
		Eventually(a.Elected(), util.Timeout, util.Interval).Should(BeClosed())
		_, stopB, doneB := replica()
		DeferCleanup(func() { stopB(); <-doneB })
		expectRuleReady(rule, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)

		By("the leader finishing the first half")
		for _, aw := range aws[:n/2] {
			complete(aw)
		}
		for _, aw := range aws[:n/2] {
			util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		}

		By("the leader crashing (its lease is not released) while triggers keep finishing")
		stopA()
		<-doneA
		for _, aw := range aws[n/2:] {
			complete(aw)
		}
		for _, aw := range aws[n/2:] {
			util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		}

		By("every AppWrapper recorded and deleted exactly once")
		for _, aw := range aws {
			Eventually(func() int { return countEvents(aw, wrapupv1alpha1.ReasonDeleted) }, util.Timeout, util.Interval).Should(Equal(1), aw.Name)
			Expect(countEvents(aw, wrapupv1alpha1.ReasonTriggerSucceeded)).To(Equal(1), aw.Name)
		}
		// A second Event with the same reason, action and reporter on the
		// same object only extends the first one's series (events API):
		// the audit log counts the requests themselves.
		expectActedOnceEach(ns.Name, aws, nil, nil)
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rule), got)).To(Succeed())
			g.Expect(got.Status.Succeeded).To(Equal(int64(n)))
		}, util.Timeout, util.Interval).Should(Succeed())
	})
})
