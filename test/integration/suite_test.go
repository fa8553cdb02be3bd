package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// failureGracePeriod is short so that the suite can show a failure that the
// AppWrapper controller does not retry becoming final.
const failureGracePeriod = 2 * time.Second

var (
	fwk       *framework.Framework
	cfg       *rest.Config
	k8sClient client.Client
	// wrapupCfg acts as wrapup's ServiceAccount.
	wrapupCfg  *rest.Config
	stopWrapup func()
	ctx        context.Context
	cancel     context.CancelFunc
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Integration Suite")
}

// withoutJobSet leaves JobSet's CRD out, and skips the specs of JobSet
// triggers, on a Kubernetes minor that refuses that CRD (make test-oldest:
// JobSet v0.11.1's CRD has a CEL rule on its embedded templates'
// metadata.namespace, which v1.30 does not compile).
var withoutJobSet = os.Getenv("WRAPUP_TEST_WITHOUT_JOBSET") == "1"

// skipWithoutJobSet skips the running spec when withoutJobSet is set.
func skipWithoutJobSet() {
	if withoutJobSet {
		Skip("WRAPUP_TEST_WITHOUT_JOBSET=1: no JobSet CRD")
	}
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	crds := []string{
		filepath.Join(framework.ModuleDir("github.com/kubeflow/training-operator"), "manifests", "base", "crds", "kubeflow.org_pytorchjobs.yaml"),
		filepath.Join(framework.ModuleDir("github.com/ray-project/kuberay/ray-operator"), "config", "crd", "bases", "ray.io_rayjobs.yaml"),
		filepath.Join("testdata", "crds"),
	}
	if !withoutJobSet {
		crds = append(crds, filepath.Join(framework.ModuleDir("sigs.k8s.io/jobset"), "config", "components", "crd", "bases"))
	}
	fwk = &framework.Framework{
		CRDPaths: crds,
		// Specs count wrapup's writes in the API server's audit log.
		AuditLog: true,
		// Knobs that prove the bed is real: with either set, the smoke test fails.
		WithoutGarbageCollector:     os.Getenv("WRAPUP_TEST_WITHOUT_GC") == "1",
		WithoutAppWrapperController: os.Getenv("WRAPUP_TEST_WITHOUT_APPWRAPPER_CONTROLLER") == "1",
	}
	cfg = fwk.Init()
	var err error
	k8sClient, err = client.New(cfg, client.Options{Scheme: framework.Scheme})
	Expect(err).NotTo(HaveOccurred())

	// wrapup runs as its ServiceAccount with exactly the RBAC of
	// config/rbac, so a missing permission fails the suite; read access to
	// the suite's custom trigger kinds comes through the aggregation label,
	// as the docs tell admins to grant it.
	framework.InstallControllerRBAC(ctx, k8sClient)
	Expect(k8sClient.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "wrapup-test-trigger-kinds", Labels: map[string]string{"wrapup.dev/aggregate-to-trigger-kinds": "true"}},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"example.wrapup.dev", "late.wrapup.dev"},
			Resources: []string{"evalruns", "lateruns", "openruns"},
			Verbs:     []string{"get", "list", "watch"},
		}},
	})).To(Succeed())
	wrapupCfg = framework.ServiceAccountConfig(cfg, framework.ControllerNamespace, framework.ControllerServiceAccount)

	// The AppWrapper controller (admin) and wrapup (its ServiceAccount) run
	// in managers of their own.
	fwk.StartManager(ctx, cfg, nil)
	startWrapup()
})

// wrapupLogger names the logger of the manager startWrapup runs.
const wrapupLogger = "wrapup"

// startWrapup runs wrapup in a manager of its own, as its ServiceAccount,
// logging under wrapupLogger.
func startWrapup() {
	GinkgoHelper()
	mgr := framework.NewBareManager(wrapupCfg, func(o *ctrl.Options) {
		o.Cache = gc.CacheOptions()
		o.Logger = ctrl.Log.WithName(wrapupLogger)
	})
	Expect(gc.Setup(mgr, gc.Options{FailureGracePeriod: failureGracePeriod})).To(Succeed())
	stopWrapup = framework.RunManager(ctx, mgr)
}

// wrapup retries its own write conflicts (or avoids them): none may reach
// its logs as errors, whatever the AppWrapper controller writes meanwhile.
// wrapup's controllers are named wrapup-... (the spec namespaces' names
// start so too: the AppWrapper controller's own conflicts in them, such as
// v1.30's answer to its write of an AppWrapper just deleted, are not
// wrapup's).
var _ = AfterEach(func() {
	Expect(fwk.Errors.Conflicts("[controller wrapup-")).To(BeEmpty(), "wrapup logged write conflicts")
})

var _ = AfterSuite(func() {
	if stopWrapup != nil {
		stopWrapup()
	}
	if cancel != nil {
		cancel()
	}
	if fwk != nil {
		fwk.Teardown()
	}
})

// specNamespace creates a namespace for the running spec, labelled nsLabel
// with its own name: rules are cluster-scoped, and each spec's rules select
// its namespace alone. It is deleted after the spec.
func specNamespace(prefix string) *corev1.Namespace {
	GinkgoHelper()
	ns := framework.CreateNamespace(ctx, k8sClient, prefix, nil)
	ns.Labels = map[string]string{nsLabel: ns.Name}
	Expect(k8sClient.Update(ctx, ns)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed()) })
	return ns
}

// createReadyRule makes w's rule the spec's own, named after the spec's
// namespace ns and selecting it alone; it creates the rule (deleted when
// the spec ends) and waits until the rule controller reports it Ready.
func createReadyRule(ns *corev1.Namespace, w *util.RuleWrapper) *wrapupv1alpha1.CompletionRule {
	GinkgoHelper()
	r := w.NamespaceLabels(map[string]string{nsLabel: ns.Name}).Obj()
	r.Name = ns.Name + "-" + r.Name
	createSpecRule(r)
	expectRuleReady(r, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)
	return r
}

// createSpecRule creates rule, and deletes it after the spec.
func createSpecRule(rule *wrapupv1alpha1.CompletionRule) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, rule)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, rule))).To(Succeed()) })
}

// createRunning creates aw and waits until the AppWrapper controller runs
// it.
func createRunning(aw *awv1beta2.AppWrapper) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, aw)).To(Succeed())
	util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
}

// expectJob waits until the Job key exists (the AppWrapper controller
// creates it), and returns it.
func expectJob(key types.NamespacedName) *batchv1.Job {
	GinkgoHelper()
	job := &batchv1.Job{}
	Eventually(func() error { return k8sClient.Get(ctx, key, job) }, util.Timeout, util.Interval).Should(Succeed())
	return job
}

// runJob creates aw, waits until it runs and its Job jobName exists, and
// plays the Job controller starting the Job's pods. It returns the Job's
// key.
func runJob(aw *awv1beta2.AppWrapper, jobName string) types.NamespacedName {
	GinkgoHelper()
	createRunning(aw)
	job := types.NamespacedName{Namespace: aw.Namespace, Name: jobName}
	expectJob(job)
	util.JobStarted(ctx, k8sClient, job)
	return job
}

// expectKept checks that aw is not deleted for the duration within.
func expectKept(aw *awv1beta2.AppWrapper, within any, description ...any) {
	GinkgoHelper()
	Consistently(func() error {
		return k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), &awv1beta2.AppWrapper{})
	}, within, util.Interval).Should(Succeed(), description...)
}

// recordKey is the key of the CompletionRecord of aw's run.
func recordKey(aw *awv1beta2.AppWrapper) types.NamespacedName {
	return types.NamespacedName{Namespace: aw.Namespace, Name: wrapupv1alpha1.RecordName(aw.Name, aw.UID)}
}

// recordedOutcome is the outcome the CompletionRecord of aw's run holds:
// "" when there is none, or it was cleared.
func recordedOutcome(g Gomega, aw *awv1beta2.AppWrapper) wrapupv1alpha1.Outcome {
	cr := &wrapupv1alpha1.CompletionRecord{}
	err := k8sClient.Get(ctx, recordKey(aw), cr)
	if apierrors.IsNotFound(err) {
		return ""
	}
	g.Expect(err).NotTo(HaveOccurred())
	if cr.Cleared != nil {
		return ""
	}
	return cr.Outcome
}

// expectRecord waits until the CompletionRecord of aw's run holds outcome
// (not cleared), and returns it.
func expectRecord(aw *awv1beta2.AppWrapper, outcome wrapupv1alpha1.Outcome) *wrapupv1alpha1.CompletionRecord {
	GinkgoHelper()
	cr := &wrapupv1alpha1.CompletionRecord{}
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, recordKey(aw), cr)).To(Succeed())
		g.Expect(cr.Cleared).To(BeNil())
		g.Expect(cr.Outcome).To(Equal(outcome))
	}, util.Timeout, util.Interval).Should(Succeed())
	return cr
}

// expectNotRecorded checks that aw stays, with no outcome recorded (no
// CompletionRecord holding one, none mirrored on its metadata), for
// util.ConsistentDuration.
func expectNotRecorded(aw *awv1beta2.AppWrapper) {
	GinkgoHelper()
	Consistently(func(g Gomega) {
		got := &awv1beta2.AppWrapper{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
		g.Expect(got.Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel))
		g.Expect(recordedOutcome(g, got)).To(BeEmpty())
	}, util.ConsistentDuration, util.Interval).Should(Succeed())
}

// expectUndecided checks that aw stays, neither being deleted nor with an
// outcome recorded, for util.ConsistentDuration.
func expectUndecided(aw *awv1beta2.AppWrapper) {
	GinkgoHelper()
	Consistently(func(g Gomega) {
		got := &awv1beta2.AppWrapper{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
		g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
		g.Expect(got.Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel))
		g.Expect(recordedOutcome(g, got)).To(BeEmpty())
	}, util.ConsistentDuration, util.Interval).Should(Succeed())
}
