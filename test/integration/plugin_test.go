package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// plugin builds kubectl-wrapup once per spec and writes an admin
// kubeconfig for the suite's API server; run runs it.
func plugin() (run func(args ...string) (string, int)) {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	Expect(os.WriteFile(kubeconfig, fwk.Env().KubeConfig, 0o600)).To(Succeed())
	bin := filepath.Join(dir, "kubectl-wrapup")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kubectl-wrapup")
	build.Dir = framework.RepoRoot()
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building kubectl-wrapup: %s", out)
	return func(args ...string) (string, int) {
		GinkgoHelper()
		cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", kubeconfig)...)
		cmd.Dir = framework.RepoRoot()
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
			out = append(out, ee.Stderr...)
		} else {
			Expect(err).NotTo(HaveOccurred())
		}
		return string(out), code
	}
}

var _ = Describe("kubectl wrapup", func() {
	It("lint reports exactly the type-check warnings the controller writes on each rule's status, offline and against the cluster", func() {
		skipWithoutJobSet()
		const file = "test/integration/testdata/lint-agreement.yaml"
		run := plugin()

		By("creating the rules, and waiting for the controller's type check of each")
		data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), file))
		Expect(err).NotTo(HaveOccurred())
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
		var rules []*wrapupv1alpha1.CompletionRule
		for {
			r := &wrapupv1alpha1.CompletionRule{}
			if err := dec.Decode(r); err != nil {
				break
			}
			if r.Name == "" {
				continue
			}
			createSpecRule(r)
			rules = append(rules, r)
		}
		Expect(rules).To(HaveLen(10))
		var fromStatus []string
		for _, r := range rules {
			got := &wrapupv1alpha1.CompletionRule{}
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), got)).To(Succeed())
				g.Expect(got.Status.TypeChecking).NotTo(BeNil(), "rule %s is not type-checked yet: %+v", r.Name, got.Status.Conditions)
				g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			}, util.Timeout, util.Interval).Should(Succeed())
			for _, w := range got.Status.TypeChecking.ExpressionWarnings {
				fromStatus = append(fromStatus, fmt.Sprintf("%s %s: %s", r.Name, w.FieldRef, w.Warning))
			}
		}
		sort.Strings(fromStatus)
		Expect(fromStatus).To(HaveLen(10), strings.Join(fromStatus, "\n"))

		lint := func(args ...string) []string {
			GinkgoHelper()
			out, code := run(append([]string{"lint", "-f", file, "-o", "json"}, args...)...)
			Expect(code).To(Equal(0), out)
			var res struct {
				Findings []struct{ Rule, Field, Message, Severity string }
			}
			Expect(json.Unmarshal([]byte(out), &res)).To(Succeed(), out)
			var got []string
			for _, f := range res.Findings {
				Expect(f.Severity).To(Equal("warning"), "%+v", f)
				got = append(got, fmt.Sprintf("%s %s: %s", f.Rule, f.Field, f.Message))
			}
			sort.Strings(got)
			return got
		}
		By("linting them offline, against the schemas the plugin ships")
		Expect(lint()).To(Equal(fromStatus))
		By("linting them against the cluster's published schemas")
		Expect(lint("--server-schema")).To(Equal(fromStatus))
	})

	It("eval reads the rule, the AppWrapper and its trigger from the cluster, and explain prints the decision as JSON", func() {
		ns := specNamespace("plugin")
		run := plugin()
		rule := util.MakeRule(ns.Name+"-bench").NamespaceLabels(map[string]string{nsLabel: ns.Name}).
			TriggerKind("batch", "Job", "").Message(`'done: ' + string(object.status.?succeeded.orValue(0))`).
			OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).Obj()
		createSpecRule(rule)
		expectRuleReady(rule, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)
		aw := util.MakeAppWrapper("run", ns.Name).
			Component(util.MakeDeployment("run-inference", 1), nil).
			Component(util.MakeJob("run-benchmark").Obj(), nil).Obj()
		job := runJob(aw, "run-benchmark")

		By("eval on the running trigger")
		out, code := run("eval", "--rule", rule.Name, "--appwrapper", ns.Name+"/run")
		Expect(code).To(Equal(0), out)
		Expect(out).To(ContainSubstring("trigger:      batch/v1 Job run-benchmark\n"))
		Expect(out).To(ContainSubstring("outcome:      Running\n"))

		By("eval once the Job completed, with -n and as JSON")
		util.JobComplete(ctx, k8sClient, job)
		out, code = run("eval", "--rule", rule.Name, "--appwrapper", "run", "-n", ns.Name, "-o", "json")
		Expect(code).To(Equal(0), out)
		var ev map[string]any
		Expect(json.Unmarshal([]byte(out), &ev)).To(Succeed(), out)
		Expect(ev).To(HaveKeyWithValue("kind", "Evaluation"))
		Expect(ev).To(HaveKeyWithValue("outcome", "Succeeded"))
		Expect(ev).To(HaveKeyWithValue("message", "done: 1"))

		By("explain -o json says what the controller then did")
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Succeeded"))
		}, util.Timeout, util.Interval).Should(Succeed())
		out, code = run("explain", "run", "-n", ns.Name, "-o", "json")
		Expect(code).To(Equal(0), out)
		var ex map[string]any
		Expect(json.Unmarshal([]byte(out), &ex)).To(Succeed(), out)
		Expect(ex).To(HaveKeyWithValue("kind", "Explanation"))
		Expect(ex).To(HaveKeyWithValue("verdict", "RecordOnly"))
		Expect(ex).To(HaveKeyWithValue("winner", rule.Name))
		Expect(ex["recorded"]).To(HaveKeyWithValue("outcome", "Succeeded"))
		Expect(ex["trigger"]).To(HaveKeyWithValue("name", "run-benchmark"))

		By("plan says that turning the rule to DeleteAll deletes the recorded run at once, and writes nothing")
		edited := &wrapupv1alpha1.CompletionRule{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rule), edited)).To(Succeed())
		edited = &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: edited.Name}, Spec: *edited.Spec.DeepCopy()}
		edited.SetGroupVersionKind(wrapupv1alpha1.GroupVersion.WithKind("CompletionRule"))
		edited.Spec.OnSuccess = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll}
		data, err := yaml.Marshal(edited)
		Expect(err).NotTo(HaveOccurred())
		file := filepath.Join(GinkgoT().TempDir(), "edited.yaml")
		Expect(os.WriteFile(file, data, 0o600)).To(Succeed())
		out, code = run("plan", "-f", file, "-n", ns.Name)
		Expect(code).To(Equal(0), out)
		Expect(out).To(MatchRegexp(`(?m)^%s/run\s+%s\s+RecordOnly\s+%s\s+(Delete|DeleteAfterTTL)\s+deleted at once: `, ns.Name, rule.Name, rule.Name))
		Expect(out).To(ContainSubstring("1 AppWrapper: 1 change, 1 deleted (1 at once), 0 blocked (rules %s)\n", rule.Name))
		out, code = run("plan", "--delete", rule.Name, "-n", ns.Name, "-o", "json")
		Expect(code).To(Equal(0), out)
		var pl struct {
			Items []struct {
				AppWrapper    string
				DeletedAtOnce bool
				After         struct{ Verdict string }
			}
		}
		Expect(json.Unmarshal([]byte(out), &pl)).To(Succeed(), out)
		Expect(pl.Items).To(HaveLen(1), out)
		Expect(pl.Items[0].AppWrapper).To(Equal(ns.Name + "/run"))
		Expect(pl.Items[0].After.Verdict).To(Equal("NoRule"))
		Expect(pl.Items[0].DeletedAtOnce).To(BeFalse())
		Consistently(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rule), got)).To(Succeed())
			g.Expect(got.Spec.OnSuccess.Action).To(Equal(wrapupv1alpha1.ActionUpdateStatus))
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), &awv1beta2.AppWrapper{})).To(Succeed())
		}, "2s", util.Interval).Should(Succeed())

		By("a tenant with rights in their namespace only: explain says which role it needs")
		tenant := "system:serviceaccount:" + ns.Name + ":tenant"
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns.Name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{awv1beta2.GroupVersion.Group}, Resources: []string{"appwrappers"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{wrapupv1alpha1.GroupVersion.Group}, Resources: []string{"completionrecords"}, Verbs: []string{"get", "list"}},
		}}
		Expect(k8sClient.Create(ctx, role)).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns.Name}}})).To(Succeed())
		Eventually(func() string { out, _ = run("explain", "run", "-n", ns.Name, "--as", tenant); return out }, util.Timeout, util.Interval).
			Should(ContainSubstring("ask an admin to bind you the ClusterRole wrapup-explain"))

		By("with the shipped ClusterRole wrapup-explain bound, the tenant's explain decides")
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns.Name + "-tenant-explain"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "wrapup-explain"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns.Name}}}
		Expect(k8sClient.Create(ctx, crb)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, crb) })
		Eventually(func() string { out, _ = run("explain", "run", "-n", ns.Name, "--as", tenant); return out }, util.Timeout, util.Interval).
			Should(ContainSubstring("Verdict:    RecordOnly"))
		// It may not ask what wrapup may list: it says so, and decides with
		// its own view.
		Expect(out).To(ContainSubstring("could not be checked"))

		By("a rule that is not there is an error")
		out, code = run("eval", "--rule", "nope", "--appwrapper", ns.Name+"/run")
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring(`error: reading CompletionRule nope:`))

		By("the AppWrapper gone, the tenant's explain shows how its run ended: its CompletionRecord")
		Expect(k8sClient.Delete(ctx, aw)).To(Succeed())
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		Eventually(func() string { out, _ = run("explain", "run", "-n", ns.Name, "--as", tenant); return out }, util.Timeout, util.Interval).
			Should(And(ContainSubstring("Succeeded"), ContainSubstring(rule.Name)))
		Expect(out).NotTo(ContainSubstring("forbidden"))
	})
})
