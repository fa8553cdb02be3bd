// Package multikueue runs wrapup across three clusters in one process, as
// Kueue's own MultiKueue integration suite does: a manager cluster (Kueue
// with the MultiKueue admission check and its AppWrapper adapter, the
// AppWrapper controller, wrapup with --multikueue) and two worker clusters
// (Kueue's core with its AppWrapper integration, the real AppWrapper
// controller). Each cluster is its own kube-apiserver and etcd, with
// kube-controller-manager's garbage collector; MultiKueue reaches the
// workers through kubeconfig Secrets made from their configs, and wrapup
// through Secrets of its own, acting as a read-only ServiceAccount there
// (config/multikueue/worker).
package multikueue

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/gc/read"
	"github.com/wrapup-dev/wrapup/test/framework"
)

const (
	// kueueNamespace holds Kueue's MultiKueueCluster Secrets on the manager.
	kueueNamespace = "kueue-system"
	// readerAccount is wrapup's read-only ServiceAccount on each worker.
	readerAccount  = "system:serviceaccount:wrapup-system:wrapup-worker-reader"
	admissionCheck = "multikueue"
)

// cluster is one of the three control planes.
type cluster struct {
	name   string
	fwk    *framework.Framework
	cfg    *rest.Config
	client client.Client
}

var (
	ctx     context.Context
	cancel  context.CancelFunc
	manager cluster
	workers []*cluster
	// stopWrapup stops wrapup on the manager.
	stopWrapup func()
)

func TestMultiKueue(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "MultiKueue Suite (manager and two workers: Kueue, MultiKueue, AppWrapper, wrapup)")
}

func startCluster(name string) cluster {
	GinkgoHelper()
	c := cluster{name: name, fwk: &framework.Framework{CRDPaths: []string{framework.KueueCRDs()}, AuditLog: true}}
	c.cfg = c.fwk.Init()
	var err error
	c.client, err = client.New(c.cfg, client.Options{Scheme: framework.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	manager = startCluster("manager")
	for _, name := range []string{"worker-1", "worker-2"} {
		w := startCluster(name)
		workers = append(workers, &w)
	}

	By("running Kueue with its AppWrapper integration and the AppWrapper controller on each worker")
	for _, w := range workers {
		w.fwk.StartManager(ctx, w.cfg, func(ctx context.Context, mgr ctrl.Manager) error {
			return framework.SetupKueue(ctx, mgr)
		})
		framework.ApplyManifests(ctx, w.client, filepath.Join(framework.RepoRoot(), "config", "multikueue", "worker", "reader.yaml"))
	}

	By("running Kueue with MultiKueue and the AppWrapper controller on the manager")
	Expect(manager.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kueueNamespace}})).To(Succeed())
	manager.fwk.StartManager(ctx, manager.cfg, func(ctx context.Context, mgr ctrl.Manager) error {
		return framework.SetupMultiKueueManager(ctx, mgr, framework.MultiKueueOptions{ConfigNamespace: kueueNamespace, GCInterval: 5 * time.Second})
	})
	framework.InstallControllerRBAC(ctx, manager.client)
	framework.ApplyManifests(ctx, manager.client, filepath.Join(framework.RepoRoot(), "config", "multikueue", "manager", "worker_kubeconfigs_role.yaml"))
	framework.ApplyManifests(ctx, manager.client, filepath.Join(framework.RepoRoot(), "config", "multikueue", "manager", "workloads_role.yaml"))
	var clusters []string
	for _, w := range workers {
		admin, err := framework.Kubeconfig(w.cfg, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(manager.client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: kueueNamespace},
			Data: map[string][]byte{"kubeconfig": admin}})).To(Succeed())
		setWrapupSecret(w, nil)
		Expect(manager.client.Create(ctx, &kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: w.name},
			Spec: kueue.MultiKueueClusterSpec{ClusterSource: kueue.ClusterSource{KubeConfig: &kueue.KubeConfig{Location: w.name, LocationType: kueue.SecretLocationType}}}})).To(Succeed())
		clusters = append(clusters, w.name)
	}
	Expect(manager.client.Create(ctx, &kueue.MultiKueueConfig{ObjectMeta: metav1.ObjectMeta{Name: "workers"},
		Spec: kueue.MultiKueueConfigSpec{Clusters: clusters}})).To(Succeed())
	Expect(manager.client.Create(ctx, &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: admissionCheck},
		Spec: kueue.AdmissionCheckSpec{ControllerName: kueue.MultiKueueControllerName,
			Parameters: &kueue.AdmissionCheckParametersReference{APIGroup: kueue.GroupVersion.Group, Kind: "MultiKueueConfig", Name: "workers"}}})).To(Succeed())
	Eventually(func(g Gomega) {
		ac := &kueue.AdmissionCheck{}
		g.Expect(manager.client.Get(ctx, client.ObjectKey{Name: admissionCheck}, ac)).To(Succeed())
		c := findCondition(ac.Status.Conditions, kueue.AdmissionCheckActive)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}, time.Minute, 250*time.Millisecond).Should(Succeed())

	By("running wrapup on the manager, as its ServiceAccount, with --multikueue")
	stopWrapup = startWrapup(manager, true)
})

var _ = AfterSuite(func() {
	if stopWrapup != nil {
		stopWrapup()
	}
	if cancel != nil {
		cancel()
	}
	for _, c := range append([]*cluster{&manager}, workers...) {
		if c.fwk != nil {
			c.fwk.Teardown()
		}
	}
})

// startWrapup runs wrapup on c as its ServiceAccount (with config/rbac
// installed there), finishing AppWrappers dispatched to workers when
// multiKueue is set; the returned function stops it.
func startWrapup(c cluster, multiKueue bool) (stop func()) {
	GinkgoHelper()
	framework.InstallControllerRBAC(ctx, c.client)
	sa := framework.ServiceAccountConfig(c.cfg, framework.ControllerNamespace, framework.ControllerServiceAccount)
	mgr := framework.NewBareManager(sa, func(o *ctrl.Options) {
		o.Cache = gc.CacheOptions()
		if multiKueue {
			o.Cache = gc.WithMultiKueue(o.Cache)
		}
	})
	// A worker's Secret is read again after 1s (30s by default), so that
	// a spec may take it away.
	Expect(gc.Setup(mgr, gc.Options{FailureGracePeriod: 2 * time.Second, MultiKueue: multiKueue, Namespace: framework.ControllerNamespace,
		WorkerSecretRecheck: time.Second})).To(Succeed())
	return framework.RunManager(ctx, mgr)
}

// setWrapupSecret writes wrapup's kubeconfig Secret for worker w on the
// manager: acting as the worker's read-only ServiceAccount, at the
// worker's address, or at server when set.
func setWrapupSecret(w *cluster, mutate func(*rest.Config)) {
	GinkgoHelper()
	cfg := rest.CopyConfig(w.cfg)
	if mutate != nil {
		mutate(cfg)
	}
	kc, err := framework.Kubeconfig(cfg, readerAccount)
	Expect(err).NotTo(HaveOccurred())
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: framework.ControllerNamespace}}
	err = manager.client.Get(ctx, client.ObjectKeyFromObject(s), s)
	if apierrors.IsNotFound(err) {
		s.Data = map[string][]byte{read.KubeconfigKey: kc}
		Expect(manager.client.Create(ctx, s)).To(Succeed())
		return
	}
	Expect(err).NotTo(HaveOccurred())
	s.Data = map[string][]byte{read.KubeconfigKey: kc}
	Expect(manager.client.Update(ctx, s)).To(Succeed())
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
