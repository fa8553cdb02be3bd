// Package framework starts the local control plane that wrapup's integration
// and end-to-end suites run against: a real kube-apiserver and etcd (through
// controller-runtime's envtest, with binaries the project builds itself, see
// test/controlplane), kube-controller-manager's garbage collector, and a
// controller manager running the real AppWrapper controller beside whatever
// the suite adds (wrapup itself, Kueue).
package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	awconfig "github.com/project-codeflare/appwrapper/pkg/config"
	awcontroller "github.com/project-codeflare/appwrapper/pkg/controller"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// Scheme knows every type the suites use.
var Scheme = k8sruntime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
	utilruntime.Must(awv1beta2.AddToScheme(Scheme))
	utilruntime.Must(wrapupv1alpha1.AddToScheme(Scheme))
}

// ManagerSetup adds controllers to the suite's manager before it starts.
type ManagerSetup func(ctx context.Context, mgr ctrl.Manager) error

// Framework is one control plane for one suite.
type Framework struct {
	// CRDPaths are extra CRD folders or files (wrapup's and AppWrapper's are always installed).
	CRDPaths []string
	// WithoutGarbageCollector skips kube-controller-manager: nothing is then
	// ever garbage-collected, which a test of the bed itself uses.
	WithoutGarbageCollector bool
	// WithoutAppWrapperController leaves the AppWrapper controller out of the manager.
	WithoutAppWrapperController bool
	// WebhookPaths are webhook configuration manifests to install; the
	// managers from NewManager then serve webhooks where envtest points the
	// API server.
	WebhookPaths []string
	// ExtraKubeControllers are further kube-controller-manager controllers
	// to run (e.g. "ttl-after-finished" for a benchmark baseline).
	ExtraKubeControllers []string
	// Pods makes the bed run pods: kube-scheduler, kwok (fake nodes, see
	// CreateGPUNodes) and kube-controller-manager's Job, ReplicaSet,
	// Deployment and node-lifecycle controllers. Nothing in a test then
	// writes a pod's or a Job's status.
	Pods bool
	// AuditLog makes kube-apiserver log the writes to AppWrappers (see
	// AuditedAppWrapperRequests). Off by default: a benchmark would pay a
	// file write per AppWrapper write.
	AuditLog bool

	// Errors records the errors the controllers log.
	Errors ErrorLog

	env *envtest.Environment
	// cfg is the admin config Init returned.
	cfg *rest.Config
	// auditLog is the API server's audit log (see AuditedAppWrapperRequests).
	auditLog string
	tmpDir   string
	// kcm is kube-controller-manager; scheduler and kwok run with Pods.
	kcm, scheduler, kwok *process

	cancel  context.CancelFunc
	mgrDone sync.WaitGroup
}

// Init starts etcd, kube-apiserver and (unless disabled) the garbage
// collector, installs the CRDs and returns an admin config.
func (f *Framework) Init() *rest.Config {
	ginkgo.GinkgoHelper()
	base := zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true))
	ctrl.SetLogger(logr.New(&recordingSink{LogSink: base.GetSink(), log: &f.Errors}))

	assets := os.Getenv("KUBEBUILDER_ASSETS")
	gomega.Expect(assets).NotTo(gomega.BeEmpty(),
		"KUBEBUILDER_ASSETS is not set: run the suites with `make test`, which builds the local control plane (test/controlplane/build.sh)")

	crds := append([]string{
		filepath.Join(RepoRoot(), "config", "crd", "bases"),
		filepath.Join(ModuleDir("github.com/project-codeflare/appwrapper"), "config", "crd", "bases"),
	}, f.CRDPaths...)

	var err error
	f.tmpDir, err = os.MkdirTemp("", "wrapup-framework-")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())

	f.env = &envtest.Environment{
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: f.WebhookPaths},
		// Stopping takes a few seconds (see configureAPIServer); the
		// margin is for a loaded machine.
		ControlPlaneStopTimeout: time.Minute,
	}
	f.configureAPIServer()
	cfg, err := f.env.Start()
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "starting the local control plane")
	cfg.QPS, cfg.Burst = 500, 1000
	f.cfg = cfg

	if !f.WithoutGarbageCollector || f.Pods {
		f.startGarbageCollector(assets)
	}
	if f.Pods {
		f.startPodBed(assets)
	}
	return cfg
}

// Env is the running envtest environment.
func (f *Framework) Env() *envtest.Environment { return f.env }

// startGarbageCollector runs kube-controller-manager with only the garbage
// collector, so that ownerReference cascades happen as in a real cluster.
func (f *Framework) startGarbageCollector(assets string, extra ...string) {
	ginkgo.GinkgoHelper()
	path := f.adminKubeconfig("gc")
	f.kcm = f.startProcess(filepath.Join(assets, "kube-controller-manager"), append([]string{
		"--kubeconfig=" + path,
		"--authentication-kubeconfig=" + path,
		"--authorization-kubeconfig=" + path,
		// The garbage collector makes ownerReference cascades real; the
		// ClusterRole aggregation makes aggregated roles (such as wrapup's
		// trigger-kinds role) get their rules.
		"--controllers=" + strings.Join(f.kubeControllers(), ","),
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	}, extra...)...)
}

// RestartKubeControllerManager stops kube-controller-manager and starts it
// again with its usual flags and extra (e.g. "--kube-api-qps=1000", which
// lifts its client-side limit of 20 requests per second).
func (f *Framework) RestartKubeControllerManager(extra ...string) {
	ginkgo.GinkgoHelper()
	gomega.Expect(f.kcm).NotTo(gomega.BeNil(), "kube-controller-manager is not running")
	f.kcm.stop()
	f.startGarbageCollector(os.Getenv("KUBEBUILDER_ASSETS"), extra...)
}

// StopKubeControllerManager stops kube-controller-manager until
// RestartKubeControllerManager.
func (f *Framework) StopKubeControllerManager() {
	ginkgo.GinkgoHelper()
	f.kcm.stop()
}

// kubeControllers are the kube-controller-manager controllers to run.
func (f *Framework) kubeControllers() []string {
	controllers := append([]string{"garbagecollector", "clusterrole-aggregation"}, f.ExtraKubeControllers...)
	if f.Pods {
		controllers = append(controllers, podControllers...)
	}
	return controllers
}

// NewManager returns a manager on cfg with the suite's scheme, no metrics
// listener and no leader election, with the AppWrapper controller set up
// unless the framework leaves it out.
func (f *Framework) NewManager(cfg *rest.Config) ctrl.Manager {
	ginkgo.GinkgoHelper()
	var opts []func(*ctrl.Options)
	if len(f.WebhookPaths) > 0 {
		w := &f.env.WebhookInstallOptions
		opts = append(opts, func(o *ctrl.Options) {
			o.WebhookServer = webhook.NewServer(webhook.Options{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir})
		})
	}
	if !f.WithoutAppWrapperController {
		// The AppWrapper controller (v1.2.2 appwrapper_controller.go,
		// Reconcile, phase Running, and getComponentStatus) counts the
		// components it just created through the manager's cache, and marks
		// the AppWrapper Failed (MissingComponent, no retry) when that
		// cache has not seen them yet: on a loaded machine, right after
		// Running. It is a race of that controller's, which wrapup takes as
		// any Failed AppWrapper (the simulation plays it); the bed reads
		// components from the API server, so that no spec's run is lost to
		// it. (Kueue and wrapup read none of these kinds through this
		// client: wrapup's triggers come from its own informers.)
		opts = append(opts, func(o *ctrl.Options) {
			o.Client.Cache = &client.CacheOptions{DisableFor: []client.Object{
				&batchv1.Job{}, &appsv1.Deployment{}, &corev1.ConfigMap{}, &corev1.Service{}, &corev1.Pod{},
			}}
		})
	}
	mgr := NewBareManager(cfg, opts...)
	if !f.WithoutAppWrapperController {
		awCfg := awconfig.NewAppWrapperConfig()
		awCfg.Autopilot.MonitorNodes = false
		awCfg.Autopilot.InjectAntiAffinities = false
		gomega.Expect(awcontroller.SetupControllers(mgr, awCfg)).To(gomega.Succeed(), "setting up the AppWrapper controller")
	}
	return mgr
}

// NewBareManager returns a manager on cfg with the suite's scheme, no
// metrics listener, no leader election and no controllers.
func NewBareManager(cfg *rest.Config, opts ...func(*ctrl.Options)) ctrl.Manager {
	ginkgo.GinkgoHelper()
	o := ctrl.Options{
		Scheme:                 Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		// Suites stop and start managers (a controller restart) in one process.
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)},
	}
	for _, opt := range opts {
		opt(&o)
	}
	mgr, err := ctrl.NewManager(cfg, o)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "creating the manager")
	return mgr
}

// RunManager starts mgr in the background; the returned function stops it
// and waits until it has.
func RunManager(ctx context.Context, mgr ctrl.Manager) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer ginkgo.GinkgoRecover()
		defer close(done)
		gomega.Expect(mgr.Start(ctx)).To(gomega.Succeed(), "running a manager")
	}()
	return func() {
		cancel()
		<-done
	}
}

// StartManager creates a manager (see NewManager), runs setup on it and
// starts it in the background until Teardown or StopManager.
func (f *Framework) StartManager(ctx context.Context, cfg *rest.Config, setup ManagerSetup) ctrl.Manager {
	ginkgo.GinkgoHelper()
	mgr := f.NewManager(cfg)
	ctx, f.cancel = context.WithCancel(ctx)
	if setup != nil {
		gomega.Expect(setup(ctx, mgr)).To(gomega.Succeed())
	}
	f.mgrDone.Add(1)
	go func() {
		defer ginkgo.GinkgoRecover()
		defer f.mgrDone.Done()
		gomega.Expect(mgr.Start(ctx)).To(gomega.Succeed(), "running the manager")
	}()
	return mgr
}

// StopManager stops the manager started by StartManager and waits for it.
func (f *Framework) StopManager() {
	if f.cancel != nil {
		f.cancel()
		f.mgrDone.Wait()
		f.cancel = nil
	}
}

// Teardown stops the manager, the garbage collector and the control plane.
func (f *Framework) Teardown() {
	ginkgo.GinkgoHelper()
	f.StopManager()
	f.kwok.stop()
	f.scheduler.stop()
	f.kcm.stop()
	if f.env != nil {
		gomega.Expect(f.env.Stop()).To(gomega.Succeed(), "stopping the local control plane")
	}
	if f.tmpDir != "" {
		_ = os.RemoveAll(f.tmpDir)
	}
}

// GarbageCollectorRunning reports whether kube-controller-manager is still up.
func (f *Framework) GarbageCollectorRunning() bool { return f.kcm.running() }

// CreateNamespace makes a fresh namespace for one spec; the returned
// function deletes it.
func CreateNamespace(ctx context.Context, c client.Client, prefix string, labels map[string]string) *corev1.Namespace {
	ginkgo.GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}
	gomega.Expect(c.Create(ctx, ns)).To(gomega.Succeed())
	return ns
}

// RepoRoot is the folder of the project's go.mod.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	moduleDirsMu sync.Mutex
	moduleDirs   = map[string]string{}
)

// ModuleDir is where the Go toolchain keeps the source of a module the
// project requires, for CRDs that ship inside modules (AppWrapper, Kueue).
func ModuleDir(module string) string {
	ginkgo.GinkgoHelper()
	moduleDirsMu.Lock()
	defer moduleDirsMu.Unlock()
	if d, ok := moduleDirs[module]; ok {
		return d
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), fmt.Sprintf("locating module %s", module))
	d := strings.TrimSpace(string(out))
	if d == "" {
		// Required but not downloaded yet (a module the build does not compile).
		cmd = exec.Command("go", "mod", "download", "-json", module)
		cmd.Dir = RepoRoot()
		out, err = cmd.Output()
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), fmt.Sprintf("downloading module %s", module))
		var info struct{ Dir string }
		gomega.Expect(json.Unmarshal(out, &info)).To(gomega.Succeed())
		d = info.Dir
	}
	gomega.Expect(d).NotTo(gomega.BeEmpty(), "module %s is not in the module graph", module)
	moduleDirs[module] = d
	return d
}
