package integration

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// The API server itself, through the CRD's schema and validation rules,
// rejects rules that can never work. Server-side dry runs: nothing is stored,
// so the samples do not act on the other specs' AppWrappers.
var _ = Describe("CompletionRule validation by the API server", func() {
	create := func(r *wrapupv1alpha1.CompletionRule) error {
		return k8sClient.Create(ctx, r, client.DryRunAll)
	}

	DescribeTable("rejects",
		func(r *wrapupv1alpha1.CompletionRule, wantMessage string) {
			err := create(r)
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			Expect(err.Error()).To(ContainSubstring(wantMessage))
		},
		Entry("trigger.name without trigger.kind",
			util.MakeRule("v-name").TriggerKind("", "", "bench").Obj(), "trigger.name needs trigger.kind"),
		Entry("trigger.apiGroup without trigger.kind",
			util.MakeRule("v-group").TriggerKind("batch", "", "").Obj(), "trigger.apiGroup needs trigger.kind"),
		Entry("a kind with no built-in expression and no success",
			util.MakeRule("v-custom").TriggerKind("example.com", "EvalRun", "").Obj(), "needs spec.success"),
		Entry("a built-in kind name in the wrong group",
			util.MakeRule("v-group-kind").TriggerKind("example.com", "Job", "").Obj(), "needs spec.success"),
		Entry("an unknown action",
			func() *wrapupv1alpha1.CompletionRule {
				r := util.MakeRule("v-action").Obj()
				r.Spec.OnSuccess.Action = "DeleteSome"
				return r
			}(), "Unsupported value"),
		Entry("a negative TTL",
			func() *wrapupv1alpha1.CompletionRule {
				r := util.MakeRule("v-ttl").Obj()
				r.Spec.OnFailure.TTLSecondsAfterFinished = ptr.To[int32](-1)
				return r
			}(), "ttlSecondsAfterFinished"),
		Entry("a TTL over 30 days",
			func() *wrapupv1alpha1.CompletionRule {
				r := util.MakeRule("v-ttl-max").Obj()
				r.Spec.OnSuccess.TTLSecondsAfterFinished = ptr.To[int32](2592001)
				return r
			}(), "ttlSecondsAfterFinished"),
		Entry("an expression over 4096 characters",
			util.MakeRule("v-long").Success(strings.Repeat("true && ", 600)+"true").Obj(), "spec.success"),
		Entry("a message over 4096 characters",
			util.MakeRule("v-long-msg").Message("'"+strings.Repeat("x", 4100)+"'").Obj(), "spec.message"),
		Entry("more than 16 variables",
			func() *wrapupv1alpha1.CompletionRule {
				w := util.MakeRule("v-vars")
				for i := 0; i < 17; i++ {
					w.Variable("v"+strings.Repeat("x", i), "1")
				}
				return w.Obj()
			}(), "spec.variables"),
		Entry("two variables with one name",
			util.MakeRule("v-dup").Variable("a", "1").Variable("a", "2").Obj(), "Duplicate value"),
		Entry("a variable name that is not an identifier",
			util.MakeRule("v-ident").Variable("my-var", "1").Obj(), "spec.variables[0].name"),
		Entry("an empty variable expression",
			util.MakeRule("v-empty").Variable("a", "").Obj(), "spec.variables[0].expression"),
		Entry("a priority out of range",
			util.MakeRule("v-prio").Priority(2000000).Obj(), "spec.priority"),
		Entry("a kind that is not a Kind",
			util.MakeRule("v-kind").TriggerKind("batch", "job", "").Obj(), "spec.trigger.kind"),
		Entry("an API group that is not a DNS name",
			util.MakeRule("v-apigroup").TriggerKind("Batch_Group", "Job", "").Success("true").Obj(), "spec.trigger.apiGroup"),
		Entry("a trigger policy that is not One, All or Any",
			util.MakeRule("v-policy").TriggerKind("batch", "Job", "").Policy("Most").Obj(), "spec.trigger.policy"),
	)

	It("defaults the trigger policy to One, and takes All and Any", func() {
		r := util.MakeRule("v-policy-default").TriggerKind("batch", "Job", "").Obj()
		Expect(create(r)).To(Succeed())
		Expect(r.Spec.Trigger.Policy).To(Equal(wrapupv1alpha1.TriggerPolicyOne))
		for _, p := range []wrapupv1alpha1.TriggerPolicy{wrapupv1alpha1.TriggerPolicyAll, wrapupv1alpha1.TriggerPolicyAny} {
			Expect(create(util.MakeRule("v-policy-" + strings.ToLower(string(p))).Policy(p).Obj())).To(Succeed())
		}
	})

	It("accepts every rule in config/samples and config/rules", func() {
		files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "config", "samples", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		shipped, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "config", "rules", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		files = append(files, shipped...)
		n := 0
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			r := &wrapupv1alpha1.CompletionRule{}
			Expect(yaml.UnmarshalStrict(data, r)).To(Succeed(), f)
			Expect(create(r)).To(Succeed(), f)
			n++
		}
		Expect(n).To(BeNumerically(">=", 4))
	})

	It("accepts a rule for a built-in kind with no expressions, and defaults its actions", func() {
		r := util.MakeRule("v-defaults").TriggerKind("batch", "Job", "").Obj()
		Expect(create(r)).To(Succeed())
		Expect(r.Spec.OnSuccess.Action).To(Equal(wrapupv1alpha1.ActionDeleteAll))
		Expect(r.Spec.OnFailure.Action).To(Equal(wrapupv1alpha1.ActionDeleteAll))
	})

	It("accepts a rule for a core-group Pod trigger", func() {
		Expect(create(util.MakeRule("v-pod").TriggerKind("", "Pod", "").Obj())).To(Succeed())
	})
})
