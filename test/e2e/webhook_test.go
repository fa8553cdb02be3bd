package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wrapup-dev/wrapup/test/util"
)

// With the validating webhook served, `kubectl apply` of a rule whose CEL
// does not compile fails with the compile error, and nothing is stored.
var _ = Describe("The rule admission webhook", func() {
	It("rejects a rule whose CEL does not compile, saying which expression and where", func() {
		bad := util.MakeRule("webhook-bad").TriggerKind("batch", "Job", "").
			Success(`object.status.?succeeded.orValue(0) + 1`).
			Variable("n", `object.status.(`).Obj()
		err := k8sClient.Create(ctx, bad)
		Expect(err).To(HaveOccurred())
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.success"))
		Expect(err.Error()).To(ContainSubstring("must evaluate to bool"))
		Expect(err.Error()).To(ContainSubstring("spec.variables[0].expression"))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(bad), bad))).To(BeTrue())
	})

	It("rejects what the controller could never act on: a selector that does not parse, a kind not in the group it names", func() {
		bad := util.MakeRule("webhook-selector").TriggerKind("batch", "Job", "").Obj()
		bad.Spec.AppWrapperSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
		err := k8sClient.Create(ctx, bad)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.appWrapperSelector"))

		core := util.MakeRule("webhook-core-job").TriggerKind("", "Job", "").Success("true").Obj()
		err = k8sClient.Create(ctx, core)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("did you mean apiGroup: batch?"))
	})

	It("admits a rule that compiles, and a fix of a rule", func() {
		good := util.MakeRule("webhook-good").TriggerKind("batch", "Job", "").
			AppWrapperLabels(map[string]string{"wrapup.test/none": "x"}).
			Success(`object.status.?succeeded.orValue(0) >= 1`).Obj()
		Expect(k8sClient.Create(ctx, good)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, good))).To(Succeed()) })
		good.Spec.Success = `object.status.?succeeded.orValue(0) >`
		Expect(apierrors.IsInvalid(k8sClient.Update(ctx, good))).To(BeTrue())
	})
})
