package framework

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/wrapup-dev/wrapup/test/util"
)

// The bed that runs pods (Framework.Pods): kube-scheduler binds them, kwok
// plays the kubelet of fake GPU nodes (kwok/stages.yaml), and
// kube-controller-manager's Job, ReplicaSet and Deployment controllers
// make and finish them; nothing in a test writes a pod's or a Job's status.

//go:embed kwok/stages.yaml
var kwokStages []byte

const (
	// GPUNodeLabel marks the fake GPU nodes, for a Kueue ResourceFlavor's
	// nodeLabels.
	GPUNodeLabel = "wrapup.test/gpu-node"
	// kwokNodeAnnotation is what kwok manages a node by.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	// RunTimeAnnotation on a Job's pod template sets how long its pod runs
	// before it succeeds (or fails): a duration, such as "3s".
	RunTimeAnnotation = "pod-complete.stage.kwok.x-k8s.io/delay"
	// FailAnnotation ("true") on a Job's pod template makes its pod fail.
	FailAnnotation = "wrapup.test/fail"
)

// podControllers are the kube-controller-manager controllers that make and
// finish pods (statefulset for the groups of a LeaderWorkerSet, see
// StartLeaderWorkerSet); nodelifecycle removes the not-ready taint the API
// server puts on new nodes.
var podControllers = []string{"job", "replicaset", "deployment", "statefulset", "nodelifecycle"}

// startPodBed starts kube-scheduler and kwok.
func (f *Framework) startPodBed(assets string) {
	ginkgo.GinkgoHelper()
	kubeconfig := f.adminKubeconfig("pods")
	stages := filepath.Join(f.tmpDir, "kwok-stages.yaml")
	gomega.Expect(os.WriteFile(stages, kwokStages, 0o600)).To(gomega.Succeed())
	f.startScheduler(assets, "")
	f.kwok = f.startProcess(filepath.Join(assets, "kwok"),
		"--kubeconfig="+kubeconfig,
		"--config="+stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"=fake",
		"--cidr=10.0.0.1/24",
		"--node-ip=10.0.0.1",
		"--server-address=",
	)
}

// BinPackGPUs is a kube-scheduler profile that packs pods onto the nodes
// whose GPUs are the most allocated (NodeResourcesFit's MostAllocated
// scoring strategy on GPUs alone), as GPU clusters are often configured.
// The default profile scores only CPU and memory, least allocated first
// (k8s.io/kubernetes pkg/scheduler/apis/config/v1 defaults.go,
// SetDefaults_NodeResourcesFitArgs), which spreads a GPU workload's pods
// over the nodes.
const BinPackGPUs = `profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: nvidia.com/gpu
          weight: 1
`

// startScheduler starts kube-scheduler: with its default profile when
// profiles is empty, else with those profiles (the YAML of a
// KubeSchedulerConfiguration's profiles field, such as BinPackGPUs).
func (f *Framework) startScheduler(assets, profiles string) {
	ginkgo.GinkgoHelper()
	kubeconfig := f.adminKubeconfig("scheduler")
	args := []string{
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--secure-port=0",
		"--v=1",
	}
	if profiles == "" {
		args = append(args, "--kubeconfig="+kubeconfig, "--leader-elect=false")
	} else {
		// With --config, kube-scheduler ignores its deprecated flags
		// (--kubeconfig among them, cmd/kube-scheduler/app/options
		// Options.ApplyTo): the file says where the API server is.
		config := filepath.Join(f.tmpDir, "kube-scheduler.yaml")
		body := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" +
			"clientConnection:\n  kubeconfig: " + kubeconfig + "\nleaderElection:\n  leaderElect: false\n" + profiles
		gomega.Expect(os.WriteFile(config, []byte(body), 0o600)).To(gomega.Succeed())
		args = append(args, "--config="+config)
	}
	f.scheduler = f.startProcess(filepath.Join(assets, "kube-scheduler"), args...)
}

// RestartScheduler stops kube-scheduler and starts it again with profiles
// (see startScheduler; empty for its default profile). Pods it had not
// bound yet are bound by the new one.
func (f *Framework) RestartScheduler(profiles string) {
	ginkgo.GinkgoHelper()
	gomega.Expect(f.scheduler).NotTo(gomega.BeNil(), "kube-scheduler is not running")
	f.scheduler.stop()
	f.startScheduler(os.Getenv("KUBEBUILDER_ASSETS"), profiles)
}

// adminKubeconfig writes a kubeconfig of a system:masters user named for
// the component.
func (f *Framework) adminKubeconfig(component string) string {
	ginkgo.GinkgoHelper()
	user, err := f.env.AddUser(envtest.User{Name: "wrapup-test-" + component, Groups: []string{"system:masters"}}, nil)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	path := filepath.Join(f.tmpDir, component+".kubeconfig")
	gomega.Expect(os.WriteFile(path, kubeconfig, 0o600)).To(gomega.Succeed())
	return path
}

// process is a control-plane process the framework started.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startProcess starts a binary that logs to the suite's output and dies
// with the test process, even when that is killed.
func (f *Framework) startProcess(bin string, args ...string) *process {
	ginkgo.GinkgoHelper()
	cmd := exec.Command(bin, args...)
	cmd.Stdout = ginkgo.GinkgoWriter
	cmd.Stderr = ginkgo.GinkgoWriter
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	gomega.Expect(cmd.Start()).To(gomega.Succeed(), "starting %s", filepath.Base(bin))
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		// Said where the suite's output shows it, however it ended.
		fmt.Fprintf(ginkgo.GinkgoWriter, "%s exited: %v\n", filepath.Base(bin), err)
		close(p.done)
	}()
	return p
}

// running reports whether the process is still up.
func (p *process) running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// PodBedRunning reports whether kube-scheduler and kwok are still up.
func (f *Framework) PodBedRunning() bool { return f.scheduler.running() && f.kwok.running() }

// stop sends SIGTERM, and SIGKILL after 10 s.
func (p *process) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// CreateGPUNodes creates n fake nodes named prefix-0... with gpus GPUs, 32
// CPUs and 256 GiB each, labelled GPUNodeLabel=flavor, and waits until kwok
// has made them Ready and the scheduler may use them (no taints left).
func CreateGPUNodes(ctx context.Context, c client.Client, prefix, flavor string, n, gpus int) []*corev1.Node {
	ginkgo.GinkgoHelper()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		util.GPU:              *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	var nodes []*corev1.Node
	for i := range n {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("%s-%d", prefix, i),
				Labels:      map[string]string{GPUNodeLabel: flavor, corev1.LabelHostname: fmt.Sprintf("%s-%d", prefix, i)},
				Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		// The API server keeps a new Node's status (as a kubelet's
		// registration sends it); kwok fills in the rest.
		gomega.Expect(c.Create(ctx, node)).To(gomega.Succeed())
		nodes = append(nodes, node)
	}
	for _, node := range nodes {
		gomega.Eventually(func(g gomega.Gomega) {
			got := &corev1.Node{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(node), got)).To(gomega.Succeed())
			ready := false
			for _, cond := range got.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			g.Expect(ready).To(gomega.BeTrue(), "node %s is not Ready", node.Name)
			g.Expect(got.Spec.Taints).To(gomega.BeEmpty(), "node %s still has taints", node.Name)
			g.Expect(got.Status.Allocatable.Name(util.GPU, resource.DecimalSI).Value()).To(gomega.Equal(int64(gpus)))
		}, 2*time.Minute, 200*time.Millisecond).Should(gomega.Succeed())
	}
	return nodes
}
