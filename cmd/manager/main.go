// Command manager runs wrapup's controllers: it finishes AppWrappers when
// their trigger component finishes, as CompletionRules say.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
)

// version is the release, set with -ldflags "-X main.version=v0.4.0" (the
// Dockerfile's VERSION); otherwise the module's version.
var version = ""

func managerVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// managerFlags are the manager's command-line flags.
type managerFlags struct {
	metricsAddr        string
	probeAddr          string
	metricsSecure      bool
	metricsCertDir     string
	leaderElect        bool
	leaderElectionNS   string
	namespace          string
	failureGracePeriod time.Duration
	workers            int
	qps                float64
	burst              int
	enableHTTP2        bool
	compression        bool
	multiKueue         bool
	showVersion        bool
	wh                 webhookOptions
	zap                zap.Options
}

// bind defines f's flags in fs.
func (f *managerFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true,
		"Serve the metrics over HTTPS, to clients the API server authenticates (TokenReview) and authorizes to get /metrics (SubjectAccessReview); false: plain HTTP to anyone.")
	fs.StringVar(&f.metricsCertDir, "metrics-cert-dir", "", "Folder of the metrics endpoint's tls.crt and tls.key (default: a self-signed certificate).")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address the health and readiness probes bind to.")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "Elect a leader, so that only one replica acts.")
	fs.StringVar(&f.namespace, "namespace", "", "The namespace wrapup runs in: its webhook's Secret and Service, and its leader-election Lease (default: the pod's).")
	fs.StringVar(&f.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader-election Lease (default: --namespace).")
	fs.DurationVar(&f.failureGracePeriod, "failure-grace-period", gc.DefaultFailureGracePeriod,
		"How long a Running AppWrapper whose trigger failed, and which its controller does not report Unhealthy, is given to start a retry before the failure is final: the AppWrapper controller's failureGracePeriod, plus its 1m recheck period, plus slack for its latency.")
	fs.IntVar(&f.workers, "workers", gc.DefaultWorkers, "How many AppWrappers are reconciled at once.")
	fs.Float64Var(&f.qps, "kube-api-qps", -1, "Requests per second to the API server; negative: no client-side limit, the API server's priority and fairness decides (controller-runtime's default).")
	fs.IntVar(&f.burst, "kube-api-burst", 0, "Burst above --kube-api-qps, when that is positive.")
	fs.BoolVar(&f.compression, "kube-api-compression", false,
		"Leave gzip to the kubeconfig, as client-go does (the API server then compresses large answers and each informer's first watch); off by default: wrapup runs beside the API server, in its cluster, where compression costs CPU at both ends for bandwidth it does not need.")
	fs.BoolVar(&f.enableHTTP2, "enable-http2", false,
		"Serve the metrics and the webhook over HTTP/2 too; off by default, as in Kubernetes' own components, for HTTP/2's stream-reset and rapid-reset weaknesses (CVE-2023-44487, CVE-2023-39325).")
	fs.BoolVar(&f.multiKueue, "multikueue", false,
		"On a MultiKueue manager cluster: finish the AppWrappers that MultiKueue dispatches to worker clusters, reading each worker through the kubeconfig Secret named after its MultiKueueCluster in --namespace (see docs/multikueue.md).")
	f.wh.bindFlags(fs)
	fs.BoolVar(&f.showVersion, "version", false, "Print the version and exit.")
	f.zap.BindFlags(fs)
}

// settle fills in the namespaces a flag left to their defaults, and
// checks that the flags go together.
func (f *managerFlags) settle() error {
	if f.namespace == "" {
		f.namespace = podNamespace()
	}
	if f.leaderElectionNS == "" {
		f.leaderElectionNS = f.namespace
	}
	if f.leaderElect && f.leaderElectionNS == "" {
		return errors.New("outside a pod, leader election needs --namespace or --leader-election-namespace (or --leader-elect=false)")
	}
	return f.wh.check(f.namespace)
}

func main() {
	var f managerFlags
	f.bind(flag.CommandLine)
	flag.Parse()
	if f.showVersion {
		fmt.Println("wrapup manager", managerVersion())
		return
	}
	logger := quieten(zap.New(zap.UseFlagOptions(&f.zap)))
	ctrl.SetLogger(logger)
	// client-go's leader election and other klog lines in the same format.
	klog.SetLogger(logger)
	log := ctrl.Log.WithName("setup")
	log.Info("wrapup manager", "version", managerVersion())
	if err := f.settle(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	if err := run(ctrl.SetupSignalHandler(), f, log); err != nil {
		log.Error(err, "Exiting")
		os.Exit(1)
	}
}

// run runs the manager until ctx ends.
func run(ctx context.Context, f managerFlags, log logr.Logger) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(awv1beta2.AddToScheme(scheme))
	utilruntime.Must(wrapupv1alpha1.AddToScheme(scheme))
	utilruntime.Must(kueue.AddToScheme(scheme))

	cfg := ctrl.GetConfigOrDie()
	if !f.compression {
		cfg = gc.RESTConfig(cfg)
	}
	cfg.QPS, cfg.Burst = float32(f.qps), f.burst
	if err := waitForAppWrappers(ctx, cfg, f.probeAddr, log); err != nil {
		if ctx.Err() != nil {
			// Stopped while waiting: a clean exit.
			return nil
		}
		return fmt.Errorf("waiting for the AppWrapper CRD: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// wrapup runs alone in this manager: its cache may drop what it
		// never reads.
		Cache:                   cacheOptions(f.multiKueue),
		Metrics:                 metricsOptions(f.metricsAddr, f.metricsSecure, f.metricsCertDir, tlsOptions(f.enableHTTP2)),
		HealthProbeBindAddress:  f.probeAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "wrapup.dev",
		LeaderElectionNamespace: f.leaderElectionNS,
		// The process exits when it loses the lease, so that a new leader
		// never races an old one.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.NewServer(webhook.Options{Port: f.wh.port, CertDir: f.wh.certDir, TLSOpts: tlsOptions(f.enableHTTP2)}),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := gc.Setup(mgr, gc.Options{FailureGracePeriod: f.failureGracePeriod, Workers: f.workers, MultiKueue: f.multiKueue, Namespace: f.namespace}); err != nil {
		return fmt.Errorf("setting up the controllers: %w", err)
	}
	webhookReady, err := f.wh.setup(ctx, mgr, f.namespace, log)
	if err != nil {
		return fmt.Errorf("setting up the webhook: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	// Ready once the webhook serves (a Service routes admission requests
	// only to ready replicas). The controllers do not wait for it.
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !f.wh.enabled {
			return nil
		}
		select {
		case <-webhookReady:
			return mgr.GetWebhookServer().StartedChecker()(req)
		default:
			return errors.New("the webhook's certificate is not ready")
		}
	}); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	log.Info("Starting wrapup")
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

// cacheOptions are the manager's cache options: gc's, with Kueue's
// Workloads for --multikueue.
func cacheOptions(multiKueue bool) cache.Options {
	if multiKueue {
		return gc.WithMultiKueue(gc.CacheOptions())
	}
	return gc.CacheOptions()
}

// podNamespace is the namespace of the pod the manager runs in, or "" out of
// a pod.
func podNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// The secure metrics endpoint asks the API server who a client is and
// whether it may get /metrics.

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions serves the metrics at addr: over HTTPS to clients
// authenticated and authorized by the API server, unless secure is false.
func metricsOptions(addr string, secure bool, certDir string, tlsOpts []func(*tls.Config)) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if secure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.CertDir = certDir
		o.TLSOpts = tlsOpts
	}
	return o
}

// tlsOptions offer only HTTP/1.1 in the TLS handshake unless http2.
func tlsOptions(http2 bool) []func(*tls.Config) {
	if http2 {
		return nil
	}
	return []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
}

// waitForAppWrappers waits until the API server serves AppWrappers: wrapup
// needs the AppWrapper controller's CRD, and says so, rather than exiting
// with a REST-mapper error. Meanwhile it serves the probes at probeAddr:
// alive, not ready (so that the kubelet does not restart it in a loop).
func waitForAppWrappers(ctx context.Context, cfg *rest.Config, probeAddr string, log logr.Logger) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	gv := awv1beta2.GroupVersion.String()
	if _, err := dc.ServerResourcesForGroupVersion(gv); err == nil {
		return nil
	}
	if probeAddr != "" && probeAddr != "0" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "waiting for the AppWrapper CRD ("+gv+")", http.StatusServiceUnavailable)
		})
		srv := &http.Server{Addr: probeAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.ListenAndServe() }()
		defer func() { _ = srv.Close() }()
	}
	for {
		_, err := dc.ServerResourcesForGroupVersion(gv)
		switch {
		case err == nil:
			log.Info("The AppWrapper CRD is installed", "groupVersion", gv)
			return nil
		case apierrors.IsNotFound(err):
			log.Info("Waiting for the AppWrapper CRD: install the AppWrapper controller (project-codeflare/appwrapper) first", "groupVersion", gv)
		default:
			log.Error(err, "Reading the API server's discovery; retrying", "groupVersion", gv)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
}
