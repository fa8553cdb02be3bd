package util

import (
	"context"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// QueueNameLabel puts an AppWrapper in a Kueue LocalQueue.
const QueueNameLabel = "kueue.x-k8s.io/queue-name"

// MakeResourceFlavor returns an empty ResourceFlavor.
func MakeResourceFlavor(name string) *kueue.ResourceFlavor {
	return &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// MakeClusterQueue returns a ClusterQueue for every namespace with a CPU
// quota in one flavor.
func MakeClusterQueue(name, flavor, cpu string) *kueue.ClusterQueue {
	return &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
				Flavors: []kueue.FlavorQuotas{{
					Name: kueue.ResourceFlavorReference(flavor),
					Resources: []kueue.ResourceQuota{{
						Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(cpu),
					}},
				}},
			}},
		},
	}
}

// MakeLocalQueue returns a LocalQueue pointing at a ClusterQueue.
func MakeLocalQueue(name, ns, clusterQueue string) *kueue.LocalQueue {
	return &kueue.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(clusterQueue)},
	}
}

// WorkloadFor returns the Kueue Workload owned by aw, or nil.
func WorkloadFor(ctx context.Context, c client.Client, aw *awv1beta2.AppWrapper) (*kueue.Workload, error) {
	var list kueue.WorkloadList
	if err := c.List(ctx, &list, client.InNamespace(aw.Namespace)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		for _, ref := range list.Items[i].OwnerReferences {
			if ref.UID == aw.UID {
				return &list.Items[i], nil
			}
		}
	}
	return nil, nil
}

// ExpectWorkloadCondition waits until aw's Workload has condition t with status.
func ExpectWorkloadCondition(ctx context.Context, c client.Client, aw *awv1beta2.AppWrapper, t string, status metav1.ConditionStatus) *kueue.Workload {
	ginkgo.GinkgoHelper()
	var wl *kueue.Workload
	gomega.Eventually(func(g gomega.Gomega) {
		var err error
		wl, err = WorkloadFor(ctx, c, aw)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(wl).NotTo(gomega.BeNil(), "no Workload for AppWrapper %s yet", aw.Name)
		cond := findCondition(wl.Status.Conditions, t)
		g.Expect(cond).NotTo(gomega.BeNil(), "Workload %s has no %s condition", wl.Name, t)
		g.Expect(cond.Status).To(gomega.Equal(status), "%s: %s", t, cond.Message)
	}, LongTimeout, Interval).Should(gomega.Succeed())
	return wl
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// MakeGPUFlavor returns a ResourceFlavor for the nodes labelled
// label=value (Kueue injects that node selector into admitted pods).
func MakeGPUFlavor(name, label, value string) *kueue.ResourceFlavor {
	return &kueue.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kueue.ResourceFlavorSpec{NodeLabels: map[string]string{label: value}},
	}
}

// MakeGPUClusterQueue returns a ClusterQueue for every namespace with a
// quota of gpus GPUs (and cpu CPUs) in one flavor.
func MakeGPUClusterQueue(name, flavor, cpu string, gpus int64) *kueue.ClusterQueue {
	return &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, GPU},
				Flavors: []kueue.FlavorQuotas{{
					Name: kueue.ResourceFlavorReference(flavor),
					Resources: []kueue.ResourceQuota{
						{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(cpu)},
						{Name: GPU, NominalQuota: *resource.NewQuantity(gpus, resource.DecimalSI)},
					},
				}},
			}},
		},
	}
}
