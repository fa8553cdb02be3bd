// Package bed starts the local cluster that `make up` leaves running and
// `make demo` tells its story on: the test framework's bed that runs pods
// (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok GPU
// nodes), with Kueue and the AppWrapper controller in one manager, wrapup in
// another as its ServiceAccount (config/rbac), wrapup's default rules (config/rules), and a Kueue ClusterQueue of the
// node's GPUs that the namespace "default" queues to.
//
// It runs outside a Ginkgo suite: Catch turns the framework's failed
// expectations into errors.
package bed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// What the bed sets up for the samples in config/samples/appwrappers.
const (
	// Namespace holds the LocalQueue.
	Namespace = "default"
	// LocalQueue is the queue the sample AppWrappers name.
	LocalQueue = "benchmarks"
	// ClusterQueue holds the GPU quota.
	ClusterQueue = "gpu-pool"
	// Flavor is the GPU nodes' Kueue ResourceFlavor.
	Flavor = "h100"
	// NodeGPUs is the GPU node's size and the ClusterQueue's GPU quota: one
	// sample benchmark (2+2+4 GPUs) fills it.
	NodeGPUs = 8
)

// setupTimeout bounds each wait while the bed starts, on a loaded machine.
const setupTimeout = 3 * time.Minute

// Bed is a running local cluster.
type Bed struct {
	// Kubeconfig is the path of an admin kubeconfig for it.
	Kubeconfig string
	// Client is an admin client.
	Client client.Client
	// Node is the GPU node's name.
	Node string

	fwk        *framework.Framework
	cancel     context.CancelFunc
	stopWrapup func()
}

// Start starts the bed and writes its kubeconfig into dir. The processes
// keep their files under TMPDIR; the binaries come from KUBEBUILDER_ASSETS.
// It fails through gomega (see Catch); Stop then stops what it started.
func Start(ctx context.Context, dir string, b *Bed) {
	ginkgo.GinkgoHelper()
	ctx, b.cancel = context.WithCancel(ctx)
	b.fwk = &framework.Framework{CRDPaths: []string{framework.KueueCRDs()}, Pods: true}
	cfg := b.fwk.Init()
	var err error
	b.Client, err = client.New(cfg, client.Options{Scheme: framework.Scheme})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	b.Kubeconfig = filepath.Join(dir, "kubeconfig")
	gomega.Expect(os.WriteFile(b.Kubeconfig, b.fwk.Env().KubeConfig, 0o600)).To(gomega.Succeed())

	c := b.Client
	// wrapup runs as its ServiceAccount with exactly the RBAC of
	// config/rbac, as an install runs it; Kueue and the AppWrapper
	// controller run as admin, in a manager of their own.
	framework.InstallControllerRBAC(ctx, c)
	b.fwk.StartManager(ctx, cfg, framework.SetupKueue)
	mgr := framework.NewBareManager(framework.ServiceAccountConfig(cfg, framework.ControllerNamespace, framework.ControllerServiceAccount),
		func(o *ctrl.Options) {
			o.Cache = gc.CacheOptions()
			o.Logger = ctrl.Log.WithName("wrapup")
		})
	gomega.Expect(gc.Setup(mgr, gc.Options{})).To(gomega.Succeed())
	b.stopWrapup = framework.RunManager(ctx, mgr)
	b.Node = framework.CreateGPUNodes(ctx, c, "gpu-node", Flavor, 1, NodeGPUs)[0].Name

	gomega.Eventually(func() error {
		return c.Get(ctx, client.ObjectKey{Name: Namespace}, &corev1.Namespace{})
	}, setupTimeout, util.Interval).Should(gomega.Succeed(), "the API server did not create the namespace %s", Namespace)
	gomega.Expect(c.Create(ctx, util.MakeGPUFlavor(Flavor, framework.GPUNodeLabel, Flavor))).To(gomega.Succeed())
	cq := util.MakeGPUClusterQueue(ClusterQueue, Flavor, "32", NodeGPUs)
	gomega.Expect(c.Create(ctx, cq)).To(gomega.Succeed())
	gomega.Expect(c.Create(ctx, util.MakeLocalQueue(LocalQueue, Namespace, ClusterQueue))).To(gomega.Succeed())
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cq), cq)).To(gomega.Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive)).To(gomega.BeTrue())
	}, setupTimeout, util.Interval).Should(gomega.Succeed(), "the ClusterQueue %s did not become Active", ClusterQueue)

	for _, rule := range DefaultRules() {
		gomega.Expect(c.Create(ctx, rule)).To(gomega.Succeed(), "creating the rule %s", rule.Name)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rule), rule)).To(gomega.Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(rule.Status.Conditions, wrapupv1alpha1.ConditionReady)).To(gomega.BeTrue())
		}, setupTimeout, util.Interval).Should(gomega.Succeed(), "the rule %s did not become Ready", rule.Name)
	}
}

// DefaultRules are the rules of the default install, config/rules.
func DefaultRules() []*wrapupv1alpha1.CompletionRule {
	ginkgo.GinkgoHelper()
	dir := filepath.Join(framework.RepoRoot(), "config", "rules")
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var k struct {
		Resources []string `json:"resources"`
	}
	gomega.Expect(yaml.Unmarshal(data, &k)).To(gomega.Succeed())
	var rules []*wrapupv1alpha1.CompletionRule
	for _, f := range k.Resources {
		data, err := os.ReadFile(filepath.Join(dir, f))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		r := &wrapupv1alpha1.CompletionRule{}
		gomega.Expect(yaml.UnmarshalStrict(data, r)).To(gomega.Succeed(), f)
		rules = append(rules, r)
	}
	gomega.Expect(rules).NotTo(gomega.BeEmpty())
	return rules
}

// Stop stops the manager and every process of the bed, and waits for them.
func (b *Bed) Stop() {
	ginkgo.GinkgoHelper()
	if b.stopWrapup != nil {
		b.stopWrapup()
	}
	if b.cancel != nil {
		b.cancel()
	}
	if b.fwk != nil {
		b.fwk.Teardown()
	}
}

// Children are the processes this one started and that still run (the
// bed's etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok), each with its command line.
func Children() map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name in parentheses may hold spaces: the fields
		// that follow it are "state ppid ...".
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

// WritePids writes the pids of Children into path, one per line, sorted.
func WritePids(path string) error {
	var pids []int
	for pid := range Children() {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	var b strings.Builder
	for _, pid := range pids {
		fmt.Fprintln(&b, pid)
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// failure is a failed expectation, carried by a panic to Catch.
type failure struct{ message string }

var registerFailHandler sync.Once

// Catch runs f with gomega's failures turned into a returned error. Each
// goroutine that expects through gomega runs under a Catch of its own.
func Catch(f func()) (err error) {
	registerFailHandler.Do(func() {
		gomega.RegisterFailHandler(func(message string, _ ...int) { panic(failure{message}) })
	})
	defer func() {
		if r := recover(); r != nil {
			fail, ok := r.(failure)
			if !ok {
				panic(r)
			}
			err = errors.New(fail.message)
		}
	}()
	f()
	return nil
}

// TruncateLogBuffer drops what the framework's log writer keeps in memory
// (outside a Ginkgo suite it writes to stdout and keeps a copy too), every
// interval until ctx ends: a bed that runs for hours would otherwise hold
// all of its log.
func TruncateLogBuffer(ctx context.Context, interval time.Duration) {
	w, ok := ginkgo.GinkgoWriter.(interface{ Truncate() })
	if !ok {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Truncate()
		}
	}
}
