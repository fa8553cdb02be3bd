package integration

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/util"
)

// Explain reads what the controller reads, from the real API server, and
// must say what the controller then does: where the controller acts, the
// specs check that it acted as explained.
var _ = Describe("kubectl wrapup explain", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = specNamespace("explain") })

	// createRule creates a rule for batch Jobs, scoped to the spec's
	// namespace, that records outcomes only unless the test says otherwise.
	createRule := func(name string, priority int32, mods ...func(*util.RuleWrapper)) *wrapupv1alpha1.CompletionRule {
		GinkgoHelper()
		w := util.MakeRule(name).
			TriggerKind("batch", "Job", "").
			Priority(priority).
			OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).
			OnFailure(wrapupv1alpha1.ActionUpdateStatus, 0)
		for _, m := range mods {
			m(w)
		}
		return createReadyRule(ns, w)
	}
	// runningAppWrapper creates an AppWrapper with an inference Deployment
	// and a benchmark Job, and waits until the Job runs.
	runningAppWrapper := func(name string, mods ...func(*util.AppWrapperWrapper)) (*awv1beta2.AppWrapper, types.NamespacedName) {
		GinkgoHelper()
		w := util.MakeAppWrapper(name, ns.Name).
			Component(util.MakeDeployment(name+"-inference", 1), nil).
			Component(util.MakeJob(name+"-benchmark").Obj(), nil)
		for _, m := range mods {
			m(w)
		}
		aw := w.Obj()
		return aw, runJob(aw, name+"-benchmark")
	}
	explain := func(aw *awv1beta2.AppWrapper) *view.Explanation {
		GinkgoHelper()
		ex, err := view.Explain(ctx, k8sClient, &celpolicies.Cache{}, client.ObjectKeyFromObject(aw), time.Now())
		Expect(err).NotTo(HaveOccurred())
		return ex
	}
	ruleVerdict := func(ex *view.Explanation, name string) decision.RuleStanding {
		GinkgoHelper()
		for _, v := range ex.Rules {
			if v.Name == name {
				return v
			}
		}
		Fail(fmt.Sprintf("rule %s is not in the explanation:\n%s", name, ex))
		return decision.RuleStanding{}
	}

	It("names the winning rule and a running trigger, through the kubectl plugin too", func() {
		rule := createRule("bench", 0)
		aw, job := runningAppWrapper("run1")

		ex := explain(aw)
		Expect(ex.Verdict).To(Equal(decision.VerdictWaitingForTrigger), ex.String())
		Expect(ex.Winner).To(Equal(rule.Name))
		Expect(ex.Phase).To(Equal(awv1beta2.AppWrapperRunning))
		Expect(ex.Trigger).NotTo(BeNil())
		Expect(ex.Trigger.Name).To(Equal(job.Name))
		Expect(ex.Trigger.Index).To(Equal(1))
		live := &batchv1.Job{}
		Expect(k8sClient.Get(ctx, job, live)).To(Succeed())
		Expect(ex.Trigger.UID).To(Equal(live.UID))
		Expect(ex.Evaluation).NotTo(BeNil())
		Expect(ex.Evaluation.Outcome).To(Equal(celpolicies.OutcomeRunning))
		Expect(ex.Evaluation.BuiltinSuccess).To(BeTrue())
		Expect(ex.Recorded).To(BeNil())

		By("running kubectl-wrapup explain against the same API server")
		out, code := plugin()("explain", aw.Name, "-n", ns.Name)
		Expect(code).To(Equal(0), out)
		Expect(out).To(ContainSubstring("AppWrapper: %s/%s (phase Running)", ns.Name, aw.Name))
		Expect(out).To(ContainSubstring("Verdict:    WaitingForTrigger\n"))
		Expect(out).To(MatchRegexp(`\* %s\s+priority 0\s+Ready True/Compiled\s+wins`, rule.Name))
		Expect(out).To(ContainSubstring("Trigger:    batch/v1 Job %s, component 1 (by kind), uid %s", job.Name, live.UID))
		Expect(out).To(ContainSubstring("Evaluation: Running (cost 0; success built-in, failure built-in)"))
	})

	It("names the winner and the loser, and the controller records what it said", func() {
		low := createRule("low", 1)
		high := createRule("high", 10, func(w *util.RuleWrapper) {
			w.Message(`'benchmark ' + object.metadata.name + ' done'`)
		})
		aw, job := runningAppWrapper("run2")

		ex := explain(aw)
		Expect(ex.Winner).To(Equal(high.Name), ex.String())
		Expect(ex.Rules[0].Name).To(Equal(high.Name))
		Expect(ruleVerdict(ex, high.Name).Wins).To(BeTrue())
		loser := ruleVerdict(ex, low.Name)
		Expect(loser.Wins).To(BeFalse())
		Expect(loser.Matches).To(BeTrue())
		Expect(loser.Why).To(Equal(fmt.Sprintf("loses to %s: lower priority (1 < 10)", high.Name)))

		By("the trigger finishing: explain says UpdateStatus before the controller acts or after")
		util.JobComplete(ctx, k8sClient, job)
		Eventually(func(g Gomega) {
			ex, err := view.Explain(ctx, k8sClient, nil, client.ObjectKeyFromObject(aw), time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ex.Verdict).To(Equal(decision.VerdictRecordOnly), ex.String())
			g.Expect(ex.Outcome).To(Equal(wrapupv1alpha1.OutcomeSucceeded))
			g.Expect(ex.Evaluation.Message).To(Equal("benchmark run2-benchmark done"))
			// Once the controller recorded the outcome, the record is the one
			// explain predicted.
			g.Expect(ex.WillRecord()).To(BeFalse())
			g.Expect(ex.Recorded).NotTo(BeNil())
			g.Expect(ex.Recorded.Rule).To(Equal(high.Name))
			g.Expect(ex.Recorded.Message).To(Equal("benchmark run2-benchmark done"))
		}, util.Timeout, util.Interval).Should(Succeed())
		expectKept(aw, util.ConsistentDuration)
	})

	It("counts down a DeleteAll TTL that the controller is waiting out", func() {
		rule := createRule("ttl", 0, func(w *util.RuleWrapper) { w.OnSuccess(wrapupv1alpha1.ActionDeleteAll, 600) })
		aw, job := runningAppWrapper("run3")
		util.JobComplete(ctx, k8sClient, job)
		Eventually(func(g Gomega) {
			ex, err := view.Explain(ctx, k8sClient, nil, client.ObjectKeyFromObject(aw), time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ex.Recorded).NotTo(BeNil(), ex.String())
			g.Expect(ex.Verdict).To(Equal(decision.VerdictDeleteAfterTTL), ex.String())
			g.Expect(ex.Winner).To(Equal(rule.Name))
			g.Expect(ex.After).To(BeNumerically(">", 500*time.Second))
			g.Expect(ex.After).To(BeNumerically("<=", 600*time.Second))
		}, util.Timeout, util.Interval).Should(Succeed())
		By("the action in force, as the run's CompletionRecord keeps it")
		cr := expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded)
		Expect(cr.Action.Since).NotTo(BeNil())
		Expect(explain(aw).String()).To(ContainSubstring("In force:   rule %s's DeleteAll, deleting from %s (the run's CompletionRecord)\n",
			rule.Name, cr.Action.Since.Add(600*time.Second).UTC().Format(time.RFC3339Nano)))
		Consistently(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
		}, util.ConsistentDuration, util.Interval).Should(Succeed())
	})

	It("says an ignored AppWrapper is left alone, as the controller leaves it", func() {
		rule := createRule("all", 0)
		aw, job := runningAppWrapper("run4", func(w *util.AppWrapperWrapper) {
			w.Annotation(wrapupv1alpha1.IgnoreAnnotation, "true")
		})
		ex := explain(aw)
		Expect(ex.Verdict).To(Equal(decision.VerdictIgnored), ex.String())
		Expect(ex.Reason).To(ContainSubstring(wrapupv1alpha1.IgnoreAnnotation))
		Expect(ex.Winner).To(Equal(rule.Name))
		Expect(ex.Evaluation).To(BeNil())

		util.JobComplete(ctx, k8sClient, job)
		expectNotRecorded(aw)
		Expect(explain(aw).Verdict).To(Equal(decision.VerdictIgnored))
	})

	It("says why two Jobs under a kind rule are no trigger, as the controller's Warning does", func() {
		rule := createRule("jobs", 0)
		aw := util.MakeAppWrapper("run5", ns.Name).
			Component(util.MakeJob("first").Obj(), nil).
			Component(util.MakeJob("second").Obj(), nil).Obj()
		createRunning(aw)

		ex := explain(aw)
		Expect(ex.Verdict).To(Equal(decision.VerdictNoTrigger), ex.String())
		Expect(ex.Winner).To(Equal(rule.Name))
		Expect(ex.Trigger).To(BeNil())
		Expect(ex.Reason).To(ContainSubstring("has 2 (components 0, 1)"))
		Expect(ex.Events).To(ContainElement(HaveField("Reason", wrapupv1alpha1.ReasonAmbiguousTrigger)))
		expectEvent(aw, "", "AmbiguousTrigger", "has 2 (components 0, 1)")
	})

	It("says which rule is invalid and that it blocks every rule below it", func() {
		bad := util.MakeRule(ns.Name+"-bad").NamespaceLabels(map[string]string{nsLabel: ns.Name}).
			TriggerKind("batch", "Job", "").Success(`object.status.succeeded + 1`).Obj()
		createSpecRule(bad)
		expectRuleReady(bad, metav1.ConditionFalse, wrapupv1alpha1.ReasonInvalidExpression)
		aw, _ := runningAppWrapper("run6")

		ex := explain(aw)
		Expect(ex.Verdict).To(Equal(decision.VerdictBlocked), ex.String())
		Expect(ex.Winner).To(Equal(bad.Name))
		v := ruleVerdict(ex, bad.Name)
		Expect(v.Valid).To(BeFalse())
		Expect(v.Wins).To(BeTrue())
		Expect(v.Ready).To(Equal("False/" + wrapupv1alpha1.ReasonInvalidExpression))
		Expect(v.Why).To(ContainSubstring("spec.success"))
	})
})
