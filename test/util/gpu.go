package util

import (
	"context"
	"sort"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Builders and checks for the test bed that runs pods (framework.Pods):
// GPU benchmarks whose pods the real controllers make, the scheduler binds
// and kwok runs.

// GPU is the extended resource of the bed's fake nodes.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// GPUPod is a pod spec asking for gpus GPUs and one CPU.
func GPUPod(gpus int64) corev1.PodSpec {
	q := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"),
		GPU:                *resource.NewQuantity(gpus, resource.DecimalSI),
	}
	return corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []corev1.Container{{
			Name: "main", Image: "registry.invalid/wrapup/test:1",
			Resources: corev1.ResourceRequirements{Requests: q, Limits: q},
		}},
	}
}

// GPUBenchmark is an llm-d style benchmark AppWrapper queued for Kueue: two
// vLLM Deployments of 2 GPUs each (-prefill, -decode), a ConfigMap and a
// guidellm Job of 4 GPUs (-guidellm) whose pod template carries
// jobAnnotations (the bed's run time and failure annotations).
func GPUBenchmark(ns, queue, name string, jobAnnotations map[string]string) *AppWrapperWrapper {
	job := MakeJob(name + "-guidellm").Obj()
	job.Spec.Template.Spec = GPUPod(4)
	job.Spec.Template.Annotations = jobAnnotations
	w := MakeAppWrapper(name, ns).
		Label("llm-d.ai/role", "benchmark").
		Label(QueueNameLabel, queue).
		Suspend(true)
	for _, role := range []string{"prefill", "decode"} {
		d := MakeDeployment(name+"-"+role, 1)
		d.Spec.Template.Spec = GPUPod(2)
		d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		w.Component(d, nil)
	}
	return w.Component(MakeConfigMap(name+"-config", map[string]string{"rate": "sweep"}), nil).Component(job, nil)
}

// GPUJob is a benchmark without an AppWrapper: a plain batch/v1 Job of one
// pod of gpus GPUs, queued for Kueue (created suspended, with the
// queue-name label), whose pod template carries podAnnotations (the bed's
// run time). Kueue admits it and finishes its Workload when it completes.
func GPUJob(ns, queue, name string, gpus int64, podAnnotations map[string]string) *batchv1.Job {
	job := MakeJob(name).Obj()
	job.Namespace = ns
	job.Labels = map[string]string{QueueNameLabel: queue}
	job.Spec.Suspend = ptr.To(true)
	job.Spec.Template.Spec = GPUPod(gpus)
	job.Spec.Template.Annotations = podAnnotations
	return job
}

// PodsOf lists the pods of an AppWrapper's components, by name.
func PodsOf(ctx context.Context, c client.Client, ns, aw string) []corev1.Pod {
	ginkgo.GinkgoHelper()
	var pods corev1.PodList
	gomega.Expect(c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{awv1beta2.AppWrapperLabel: aw})).To(gomega.Succeed())
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	return pods.Items
}

// ExpectPodsRunning waits until the AppWrapper's n pods are Running on
// node, and returns them and when the last of them started.
func ExpectPodsRunning(ctx context.Context, c client.Client, ns, aw, node string, n int, timeout time.Duration) ([]corev1.Pod, time.Time) {
	ginkgo.GinkgoHelper()
	var (
		last time.Time
		pods []corev1.Pod
	)
	gomega.Eventually(func(g gomega.Gomega) {
		var list corev1.PodList
		g.Expect(c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{awv1beta2.AppWrapperLabel: aw})).To(gomega.Succeed())
		g.Expect(list.Items).To(gomega.HaveLen(n), "pods of %s", aw)
		last = time.Time{}
		for _, p := range list.Items {
			g.Expect(p.Spec.NodeName).To(gomega.Equal(node), "pod %s", p.Name)
			g.Expect(p.Status.Phase).To(gomega.Equal(corev1.PodRunning), "pod %s", p.Name)
			g.Expect(p.Status.StartTime).NotTo(gomega.BeNil())
			if t := p.Status.StartTime.Time; t.After(last) {
				last = t
			}
		}
		pods = list.Items
	}, timeout, Interval).Should(gomega.Succeed())
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, last
}

// GPUsInUse sums the GPUs that the pods bound to node and not finished ask
// for, in every namespace.
func GPUsInUse(ctx context.Context, c client.Client, node string) int64 {
	ginkgo.GinkgoHelper()
	var pods corev1.PodList
	gomega.Expect(c.List(ctx, &pods)).To(gomega.Succeed())
	var n int64
	for _, p := range pods.Items {
		if p.Spec.NodeName != node || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			n += ctr.Resources.Requests.Name(GPU, resource.DecimalSI).Value()
		}
	}
	return n
}

// AwaitJobComplete waits, polling every 10 ms, until the Job key has a true
// Complete condition (the Job controller's), and returns when it saw it.
func AwaitJobComplete(ctx context.Context, c client.Client, key types.NamespacedName, timeout time.Duration) time.Time {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		job := &batchv1.Job{}
		g.Expect(c.Get(ctx, key, job)).To(gomega.Succeed())
		g.Expect(job.Status.Conditions).To(gomega.ContainElement(gomega.And(
			gomega.HaveField("Type", batchv1.JobComplete), gomega.HaveField("Status", corev1.ConditionTrue))),
			"the Job %s is not Complete", key)
	}, timeout, 10*time.Millisecond).Should(gomega.Succeed())
	return time.Now()
}
