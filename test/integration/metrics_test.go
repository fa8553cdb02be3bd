package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

var _ = Describe("Metrics", func() {
	It("serves outcomes, actions, evaluations and informers on the metrics endpoint", func() {
		ns := specNamespace("metrics")

		By("running wrapup with its metrics endpoint on a free port")
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr := l.Addr().String()
		Expect(l.Close()).To(Succeed())
		stopWrapup()
		mgr, err := ctrl.NewManager(wrapupCfg, ctrl.Options{
			Scheme:                 framework.Scheme,
			Metrics:                metricsserver.Options{BindAddress: addr},
			HealthProbeBindAddress: "0",
			Cache:                  gc.CacheOptions(),
			Controller:             crconfig.Controller{SkipNameValidation: ptr.To(true)},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(gc.Setup(mgr, gc.Options{FailureGracePeriod: failureGracePeriod})).To(Succeed())
		stop := framework.RunManager(ctx, mgr)
		DeferCleanup(func() {
			stop()
			startWrapup()
		})

		rule := util.MakeRule(ns.Name+"-metrics").TriggerKind("batch", "Job", "").
			NamespaceLabels(map[string]string{nsLabel: ns.Name}).Obj()
		Expect(k8sClient.Create(ctx, rule)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, rule))).To(Succeed()) })
		// A rule that does not compile, selecting nothing.
		broken := util.MakeRule(ns.Name+"-broken").TriggerKind("batch", "Job", "").Success("undeclared == 1").
			NamespaceLabels(map[string]string{nsLabel: ns.Name + "-none"}).Obj()
		Expect(k8sClient.Create(ctx, broken)).To(Succeed())
		aw := util.MakeAppWrapper("measured", ns.Name).Component(util.MakeJob("measured-job").Obj(), nil).Obj()
		createRunning(aw)
		job := types.NamespacedName{Namespace: ns.Name, Name: "measured-job"}
		expectJob(job)
		util.JobComplete(ctx, k8sClient, job)
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)

		By("scraping the endpoint")
		Eventually(func(g Gomega) {
			resp, err := http.Get("http://" + addr + "/metrics")
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
			body, err := io.ReadAll(resp.Body)
			g.Expect(err).NotTo(HaveOccurred())
			text := string(body)
			for _, want := range []string{
				fmt.Sprintf(`wrapup_outcomes_total{outcome="Succeeded",rule=%q} 1`, rule.Name),
				fmt.Sprintf(`wrapup_actions_total{action="Deleted",rule=%q} 1`, rule.Name),
				`wrapup_trigger_informers{kind="Job.batch"} 1`,
				fmt.Sprintf(`wrapup_trigger_to_action_seconds_count{rule=%q} 1`, rule.Name),
				fmt.Sprintf(`wrapup_deletion_lateness_seconds_count{rule=%q} 1`, rule.Name),
				`wrapup_trigger_informer_synced{kind="Job.batch"} 1`,
				fmt.Sprintf(`wrapup_rule_ready{rule=%q} 1`, rule.Name),
				fmt.Sprintf(`wrapup_rule_ready{rule=%q} 0`, broken.Name),
			} {
				g.Expect(text).To(ContainSubstring(want))
			}
			g.Expect(strings.Contains(text, "controller_runtime_reconcile_total")).To(BeTrue())
			// The Job was evaluated (Running, then Complete): observed.
			count := regexp.MustCompile(`(?m)^wrapup_evaluation_duration_seconds_count (\d+)$`).FindStringSubmatch(text)
			g.Expect(count).To(HaveLen(2), "no wrapup_evaluation_duration_seconds_count")
			g.Expect(count[1]).NotTo(Equal("0"), "wrapup_evaluation_duration_seconds is never observed")
		}, util.Timeout, util.Interval).Should(Succeed())

		By("dropping a deleted rule's series")
		Expect(k8sClient.Delete(ctx, broken)).To(Succeed())
		Eventually(func(g Gomega) {
			resp, err := http.Get("http://" + addr + "/metrics")
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(body)).NotTo(ContainSubstring(fmt.Sprintf(`wrapup_rule_ready{rule=%q}`, broken.Name)))
		}, util.Timeout, util.Interval).Should(Succeed())
	})
})
