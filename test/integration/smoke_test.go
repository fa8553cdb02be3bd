package integration

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// The bed itself: the real AppWrapper controller deploys the components and
// tears them down through its finalizer, and the garbage collector removes
// what the components own.
var _ = Describe("The local control plane", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = framework.CreateNamespace(ctx, k8sClient, "smoke", nil)
	})
	AfterEach(func() {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed())
	})

	It("deploys an AppWrapper's components and removes them, with their pods, when it is deleted", func() {
		aw := util.MakeAppWrapper("smoke", ns.Name).
			Component(util.MakeDeployment("inference", 1), nil).
			Component(util.MakeJob("benchmark").Obj(), nil).
			Obj()
		createRunning(aw)

		deploy := &appsv1.Deployment{}
		job := &batchv1.Job{}
		By("the AppWrapper controller creating both components, labelled and controller-owned")
		for _, obj := range []client.Object{deploy, job} {
			name := "inference"
			if obj == client.Object(job) {
				name = "benchmark"
			}
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: name}, obj)).To(Succeed())
				g.Expect(obj.GetLabels()).To(HaveKeyWithValue(awv1beta2.AppWrapperLabel, aw.Name))
				ref := metav1.GetControllerOf(obj)
				g.Expect(ref).NotTo(BeNil())
				g.Expect(ref.Kind).To(Equal("AppWrapper"))
				g.Expect(ref.UID).To(Equal(aw.UID))
			}, util.Timeout, util.Interval).Should(Succeed())
		}

		By("playing the workload controllers and the kubelet: pods owned by the components")
		job.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
		deploy.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
		jobPod := util.CreatePod(ctx, k8sClient, ns.Name, "benchmark-pod", aw.Name, job, corev1.PodRunning)
		deployPod := util.CreatePod(ctx, k8sClient, ns.Name, "inference-pod", aw.Name, deploy, corev1.PodRunning)

		By("deleting the AppWrapper")
		Expect(k8sClient.Delete(ctx, aw, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		for _, obj := range []client.Object{job, deploy, jobPod, deployPod, aw} {
			util.ExpectGone(ctx, k8sClient, obj, util.LongTimeout)
		}
	})
})
