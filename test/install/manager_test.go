//go:build linux

package install

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	awconfig "github.com/project-codeflare/appwrapper/pkg/config"
	awcontroller "github.com/project-codeflare/appwrapper/pkg/controller"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// TestManagerBinary runs cmd/manager as a process, as it runs in a pod
// (with the install's RBAC and only its ServiceAccount's token), against a
// fresh API server: it waits, and says so, until the AppWrapper CRD is
// installed; then it takes the leader-election Lease and serves its probes
// and its metrics; it finishes a benchmark (the AppWrapper controller runs
// in the test); on SIGTERM it exits 0 and releases the Lease. It needs the
// control plane (make test); make test-unit skips it.
func TestManagerBinary(t *testing.T) {
	cfg, c, kubeconfig := managerTestServerKubeconfig(t)
	m := startManager(t, cfg, c, nil)
	cmd, logs, done, probes, metrics, certDir := m.cmd, m.logs, m.done, m.probes, m.metrics, m.certDir

	logs.await(t, "Waiting for the AppWrapper CRD: install the AppWrapper controller")
	// Alive and not ready while it waits, so that the kubelet does not
	// restart it in a loop.
	if code := get(t, "http://"+probes+"/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz while waiting: %d, want 200", code)
	}
	if code := get(t, "http://"+probes+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz while waiting: %d, want 503", code)
	}
	installCRDs(t, cfg)
	// The kubelet's part: it projects the webhook's Secret, once the
	// manager has written the certificate, into the container's folder.
	go projectSecret(t, c, types.NamespacedName{Namespace: framework.ControllerNamespace, Name: "wrapup-webhook-server-cert"}, certDir)
	logs.await(t, "The AppWrapper CRD is installed")
	logs.await(t, "Successfully acquired lease")
	lease := &coordinationv1.Lease{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: framework.ControllerNamespace, Name: "wrapup.dev"}, lease); err != nil {
		t.Fatalf("reading the leader-election Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("the Lease has no holder: %+v", lease.Spec)
	}
	if code := get(t, "http://"+probes+"/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz: %d", code)
	}
	// Ready once the webhook serves with its certificate.
	gomega.NewWithT(t).Eventually(func() int { return get(t, "http://"+probes+"/readyz") }, util.LongTimeout, util.Interval).
		Should(gomega.Equal(http.StatusOK), "GET /readyz")
	logs.await(t, "Serving the webhook")
	checkWebhook(t, c)
	checkWebhookDoc(t, kubeconfig)
	// The metrics: HTTPS, for whom the API server says may get /metrics
	// (a ServiceAccount bound to the install's wrapup-metrics-reader).
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
	metricsGet := func(token string) int {
		t.Helper()
		code := 0
		gomega.NewWithT(t).Eventually(func() error {
			req, _ := http.NewRequest(http.MethodGet, "https://"+metrics+"/metrics", nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := insecure.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			code = resp.StatusCode
			return nil
		}, util.LongTimeout, util.Interval).Should(gomega.Succeed(), "GET /metrics")
		return code
	}
	reader, stranger := serviceAccountToken(t, c, cfg, "prometheus", true), serviceAccountToken(t, c, cfg, "stranger", false)
	if code := metricsGet(""); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %d, want 401", code)
	}
	if code := metricsGet(stranger); code != http.StatusForbidden {
		t.Errorf("GET /metrics as a ServiceAccount not bound to wrapup-metrics-reader: %d, want 403", code)
	}
	if code := metricsGet(reader); code != http.StatusOK {
		t.Errorf("GET /metrics as a ServiceAccount bound to wrapup-metrics-reader: %d, want 200", code)
	}
	// HTTP/2 is off unless asked for (--enable-http2): a client that offers
	// it gets HTTP/1.1.
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}, Timeout: 10 * time.Second}
	req, _ := http.NewRequest(http.MethodGet, "https://"+metrics+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+reader)
	if resp, err := h2.Do(req); err != nil {
		t.Errorf("GET /metrics offering HTTP/2: %v", err)
	} else {
		resp.Body.Close()
		if resp.Proto != "HTTP/1.1" {
			t.Errorf("the metrics endpoint answered over %s; HTTP/2 should be off unless --enable-http2", resp.Proto)
		}
	}
	completeThroughTheBinary(t, cfg, c, logs)
	for _, l := range logs.all() {
		// The ServiceAccount's RBAC is enough for every watch and write.
		if strings.Contains(l, "forbidden") {
			t.Errorf("the manager was refused something: %s", l)
		}
		if !json.Valid([]byte(l)) {
			t.Errorf("a log line that is not JSON: %q", l)
		}
		// A fresh start that goes well logs no error: an admin's alert on
		// error lines would fire at every install.
		var entry struct{ Level string }
		if json.Unmarshal([]byte(l), &entry) == nil && entry.Level == "error" {
			t.Errorf("an error line in a start that went well: %s", l)
		}
	}

	// For docs/install.md's sizing: the process's resident memory with
	// nothing to track (measured, not asserted).
	if status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "status")); err == nil {
		for _, l := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				t.Logf("manager resident memory after a completion: %s", strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:")))
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the manager exited with %v on SIGTERM", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the manager did not exit within 60s of SIGTERM")
	}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: framework.ControllerNamespace, Name: "wrapup.dev"}, lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("the Lease is still held by %s after the manager exited", *lease.Spec.HolderIdentity)
	}
}

// managerTestServer starts a fresh API server for a manager test, or skips
// it without the control plane (make test-unit).
func managerTestServer(t *testing.T) (*rest.Config, client.Client) {
	cfg, c, _ := managerTestServerKubeconfig(t)
	return cfg, c
}

// managerTestServerKubeconfig is managerTestServer, with an admin
// kubeconfig file for kubectl.
func managerTestServerKubeconfig(t *testing.T) (*rest.Config, client.Client, string) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Skip("needs the local control plane (KUBEBUILDER_ASSETS, as make test sets it)")
	}
	cfg, kubeconfig := freshAPIServer(t, assets)
	c, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c, kubeconfig
}

// managerProcess is cmd/manager running as a process.
type managerProcess struct {
	cmd                      *exec.Cmd
	logs                     *lines
	done                     chan error
	probes, metrics, certDir string
}

// startManager starts cmd/manager as it runs in a pod: the install's
// Namespace and RBAC (and its other objects, but what omit names, such as
// "Secret wrapup-webhook-server-cert"), a kubeconfig holding only a token of
// the controller's ServiceAccount, and the Deployment's flags.
func startManager(t *testing.T, cfg *rest.Config, c client.Client, omit []string, extraArgs ...string) *managerProcess {
	t.Helper()
	objs := render(t)
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return cmpBool(b.GetKind() == "Namespace", a.GetKind() == "Namespace")
	})
	m := &managerProcess{probes: freePort(t), metrics: freePort(t), certDir: t.TempDir(), logs: &lines{}, done: make(chan error, 1)}
	webhookPort := freePort(t)
	var args []string
	for _, o := range objs {
		if slices.Contains(omit, o.GetKind()+" "+o.GetName()) {
			continue
		}
		switch o.GetKind() {
		case "Deployment":
			args = containerArgs(t, o)
			continue
		case "CustomResourceDefinition", "PodDisruptionBudget", "Service":
			continue
		case "ValidatingWebhookConfiguration":
			// The API server reaches the webhook at the process's port,
			// as it would reach the Service in a cluster.
			reachByURL(t, o, "https://localhost:"+portOf(webhookPort))
		}
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if len(args) == 0 {
		t.Fatal("no Deployment with the manager's args in config/default")
	}
	kubeconfig := serviceAccountKubeconfig(t, cfg, framework.ControllerNamespace, framework.ControllerServiceAccount)
	// go test caches a result by the files the test reads: reading the
	// binary's own sources (the packages it shares with this test are
	// imported) makes a change to them run the test again.
	sources, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "cmd", "manager", "*.go"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("cmd/manager's sources: %v", err)
	}
	for _, f := range sources {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = framework.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building cmd/manager: %v\n%s", err, out)
	}
	// The Deployment's flags, then what differs in a process beside others:
	// the namespace a pod would give, ports of its own, and the name the
	// API server reaches its webhook by.
	args = append(args, "--kubeconfig", kubeconfig, "--namespace="+framework.ControllerNamespace,
		"--metrics-bind-address="+m.metrics, "--health-probe-bind-address="+m.probes,
		"--webhook-port="+portOf(webhookPort), "--webhook-cert-dir="+m.certDir, "--webhook-extra-dns-names=localhost")
	m.cmd = exec.Command(bin, append(args, extraArgs...)...)
	// The manager dies with the test, even one killed by its timeout.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m.cmd.Stderr = m.cmd.Stdout
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go m.logs.read(out)
	go func() { m.done <- m.cmd.Wait() }()
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("manager log:\n%s", m.logs.String())
		}
	})
	return m
}

// installCRDs installs wrapup's CRDs, then the AppWrapper CRD: once that is
// served the manager starts, and it needs the CompletionRecord CRD then
// (a run's record is wrapup's memory of it).
func installCRDs(t *testing.T, cfg *rest.Config) {
	t.Helper()
	mod, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/project-codeflare/appwrapper").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(framework.RepoRoot(), "config", "crd", "bases"), filepath.Join(strings.TrimSpace(string(mod)), "config", "crd", "bases")} {
		if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{p}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestManagerWithoutItsWebhookSecret: with the webhook's Secret missing,
// the certificate cannot be made. The manager says so and stays not Ready,
// but keeps running, and its controllers work (a rule is reported Ready):
// the webhook's failure never stops wrapup from finishing AppWrappers.
func TestManagerWithoutItsWebhookSecret(t *testing.T) {
	t.Parallel()
	cfg, c := managerTestServer(t)
	m := startManager(t, cfg, c, []string{"Secret wrapup-webhook-server-cert"})
	installCRDs(t, cfg)
	m.logs.await(t, "The webhook's certificate failed")
	m.logs.await(t, "Successfully acquired lease")
	m.expectControllersWithoutWebhook(t, c)
	if code := get(t, "http://"+m.probes+"/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz without a webhook certificate: %d, want 200 (alive: a restart would not help)", code)
	}
}

// expectControllersWithoutWebhook checks a manager whose webhook's
// certificate failed: its rule controller reports a new rule Ready, it has
// not exited, and it is not Ready.
func (m *managerProcess) expectControllersWithoutWebhook(t *testing.T, c client.Client) {
	t.Helper()
	rule := util.MakeRule("works").TriggerKind("batch", "Job", "").DryRun().Obj()
	if err := c.Create(context.Background(), rule); err != nil {
		t.Fatal(err)
	}
	gomega.NewWithT(t).Eventually(func() bool {
		got := &wrapupv1alpha1.CompletionRule{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(rule), got); err != nil {
			return false
		}
		return apimeta.IsStatusConditionTrue(got.Status.Conditions, wrapupv1alpha1.ConditionReady)
	}, util.LongTimeout, util.Interval).Should(gomega.BeTrue(), "the rule controller did not report the rule Ready")
	select {
	case err := <-m.done:
		t.Fatalf("the manager exited (%v) because its webhook's certificate failed", err)
	default:
	}
	if code := get(t, "http://"+m.probes+"/readyz"); code < 400 {
		t.Errorf("GET /readyz without a webhook certificate: %d, want a failure (not Ready)", code)
	}
}

// TestManagerWithoutItsWebhookRole: without the Role that lets it list its
// Secret (an install that dropped it, or RBAC applied late),
// cert-controller's controller gives up when its cache cannot sync, two
// minutes after the start. The manager logs that and stays not Ready, but
// keeps running its controllers.
func TestManagerWithoutItsWebhookRole(t *testing.T) {
	t.Parallel()
	cfg, c := managerTestServer(t)
	m := startManager(t, cfg, c, []string{"Role wrapup-webhook-certs", "RoleBinding wrapup-webhook-certs"})
	installCRDs(t, cfg)
	m.logs.await(t, "Successfully acquired lease")
	// cert-controller's controller waits two minutes (its default cache
	// sync timeout) before it fails.
	m.logs.awaitWithin(t, "The webhook's certificate failed", 4*time.Minute)
	m.expectControllersWithoutWebhook(t, c)
}

// TestManagerWithExternalCertificates: with --webhook-cert-management=
// external (cert-manager's variant), the manager runs its controllers and
// waits, not Ready, for the certificate another component mounts; once it
// is there, the webhook serves and the replica is Ready.
func TestManagerWithExternalCertificates(t *testing.T) {
	t.Parallel()
	cfg, c := managerTestServer(t)
	m := startManager(t, cfg, c, []string{"Secret wrapup-webhook-server-cert", "Role wrapup-webhook-certs", "RoleBinding wrapup-webhook-certs"},
		"--webhook-cert-management=external")
	installCRDs(t, cfg)
	m.logs.await(t, "Waiting for the webhook's certificate (another component writes it)")
	m.logs.await(t, "Successfully acquired lease")
	if code := get(t, "http://"+m.probes+"/readyz"); code < 400 {
		t.Errorf("GET /readyz before the certificate is mounted: %d, want a failure (not Ready)", code)
	}
	writeServingCert(t, m.certDir, "localhost")
	m.logs.await(t, "Serving the webhook")
	gomega.NewWithT(t).Eventually(func() int { return get(t, "http://"+m.probes+"/readyz") }, util.LongTimeout, util.Interval).
		Should(gomega.Equal(http.StatusOK), "GET /readyz once the certificate is mounted")
	select {
	case err := <-m.done:
		t.Fatalf("the manager exited: %v", err)
	default:
	}
}

// writeServingCert writes a self-signed tls.crt and tls.key for host into
// dir, as cert-manager's Secret projected by the kubelet would be.
func writeServingCert(t *testing.T, dir, host string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}, "tls.crt": {Type: "CERTIFICATE", Bytes: der}} {
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// serviceAccountToken makes a ServiceAccount in default, bound to the
// install's wrapup-metrics-reader ClusterRole when reads, and returns a
// token of it.
func serviceAccountToken(t *testing.T, c client.Client, cfg *rest.Config, name string, reads bool) string {
	t.Helper()
	ctx := context.Background()
	for _, o := range render(t) {
		if o.GetKind() == "ClusterRole" && o.GetName() == "wrapup-metrics-reader" {
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	if err := c.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if reads {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-metrics"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "wrapup-metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}}}
		if err := c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of ServiceAccount %s: %v", name, err)
	}
	return tr.Status.Token
}

// completeThroughTheBinary runs the AppWrapper controller in the test and
// finishes a benchmark through the manager process: a rule, an AppWrapper
// with an inference Deployment and a benchmark Job; the Job completes; the
// manager records the outcome and deletes the AppWrapper.
func completeThroughTheBinary(t *testing.T, cfg *rest.Config, c client.Client, logs *lines) {
	t.Helper()
	gomega.RegisterTestingT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	awMgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: framework.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	awCfg := awconfig.NewAppWrapperConfig()
	awCfg.Autopilot.MonitorNodes = false
	awCfg.Autopilot.InjectAntiAffinities = false
	if err := awcontroller.SetupControllers(awMgr, awCfg); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = awMgr.Start(ctx) }()
	defer func() { cancel(); <-stopped }()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench", Labels: map[string]string{"wrapup.test/namespace": "bench"}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	rule := util.MakeRule("bench").NamespaceLabels(map[string]string{"wrapup.test/namespace": "bench"}).TriggerKind("batch", "Job", "").Obj()
	if err := c.Create(ctx, rule); err != nil {
		t.Fatal(err)
	}
	aw := util.MakeAppWrapper("run", "bench").
		Component(util.MakeDeployment("run-inference", 1), nil).
		Component(util.MakeJob("run-benchmark").Obj(), nil).Obj()
	if err := c.Create(ctx, aw); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(aw)
	util.ExpectAppWrapperPhase(ctx, c, key, awv1beta2.AppWrapperRunning)
	job := types.NamespacedName{Namespace: "bench", Name: "run-benchmark"}
	gomega.Eventually(func() error { return c.Get(ctx, job, &batchv1.Job{}) }, util.Timeout, util.Interval).Should(gomega.Succeed())
	util.JobStarted(ctx, c, job)
	util.JobComplete(ctx, c, job)
	gomega.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, key, &awv1beta2.AppWrapper{}))
	}, util.LongTimeout, util.Interval).Should(gomega.BeTrue(), "the manager did not delete the finished AppWrapper")
	logs.await(t, "Recorded outcome")
}

// serviceAccountKubeconfig writes a kubeconfig for the API server of cfg
// that holds only a token of the ServiceAccount namespace/name.
func serviceAccountKubeconfig(t *testing.T, cfg *rest.Config, namespace, name string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of ServiceAccount %s/%s: %v", namespace, name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["sa"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "sa"}
	kc.CurrentContext = "sa"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// cmpBool orders true before false.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// lines collects a process's output lines.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (ls *lines) read(r interface{ Read([]byte) (int, error) }) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		ls.mu.Lock()
		ls.l = append(ls.l, sc.Text())
		ls.mu.Unlock()
	}
}

func (ls *lines) all() []string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return append([]string(nil), ls.l...)
}

func (ls *lines) String() string { return strings.Join(ls.all(), "\n") }

// await waits until a line contains s.
func (ls *lines) await(t *testing.T, s string) {
	t.Helper()
	ls.awaitWithin(t, s, util.LongTimeout)
}

// awaitWithin waits up to d for a log line holding s.
func (ls *lines) awaitWithin(t *testing.T, s string, d time.Duration) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() bool {
		for _, l := range ls.all() {
			if strings.Contains(l, s) {
				return true
			}
		}
		return false
	}, d, util.Interval).Should(gomega.BeTrue(), "no log line says %q", s)
}

// containerArgs are the args of the manager container of the Deployment d.
func containerArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range containers {
		c := c.(map[string]any)
		if c["name"] != "manager" {
			continue
		}
		args, _, err := unstructured.NestedStringSlice(c, "args")
		if err != nil {
			t.Fatal(err)
		}
		return args
	}
	return nil
}

// reachByURL points every webhook of the configuration o at base, keeping
// its path.
func reachByURL(t *testing.T, o *unstructured.Unstructured, base string) {
	t.Helper()
	webhooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range webhooks {
		cc := w.(map[string]any)["clientConfig"].(map[string]any)
		svc := cc["service"].(map[string]any)
		delete(cc, "service")
		cc["url"] = base + svc["path"].(string)
	}
	if err := unstructured.SetNestedSlice(o.Object, webhooks, "webhooks"); err != nil {
		t.Fatal(err)
	}
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// projectSecret does what the kubelet does for a Secret volume: once the
// Secret key has a certificate, it writes tls.crt and tls.key into dir (each
// by a rename, so that a reader never sees half a file). It returns when
// done or when the test ends.
func projectSecret(t *testing.T, c client.Client, key types.NamespacedName, dir string) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	err := wait.PollUntilContextCancel(ctx, util.Interval, true, func(ctx context.Context) (bool, error) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, key, s); err != nil {
			return false, nil
		}
		if len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 {
			return false, nil
		}
		for _, f := range []string{"tls.key", "tls.crt"} {
			tmp := filepath.Join(dir, "."+f)
			if err := os.WriteFile(tmp, s.Data[f], 0o600); err != nil {
				return false, err
			}
			if err := os.Rename(tmp, filepath.Join(dir, f)); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil && ctx.Err() == nil {
		t.Errorf("projecting the webhook's Secret: %v", err)
	}
}

// checkWebhookDoc applies, with the control plane's kubectl, the rule that
// docs/install.md shows refused, and checks that the doc shows what kubectl
// prints (white space aside: the doc wraps it).
func checkWebhookDoc(t *testing.T, kubeconfig string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "not compile, with the compiler's message:\n\n```\n")
	shown, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/install.md: the webhook's refusal is not shown")
	}
	rule := filepath.Join(t.TempDir(), "rule.yaml")
	if err := os.WriteFile(rule, []byte(`apiVersion: wrapup.dev/v1alpha1
kind: CompletionRule
metadata:
  name: bench
spec:
  trigger: {apiGroup: batch, kind: Job}
  success: "object.status.succeeded >= undeclaredThreshold"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), "apply", "-f", "rule.yaml", "--kubeconfig", kubeconfig)
	cmd.Dir = filepath.Dir(rule)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("kubectl apply of a rule that does not compile succeeded: %s", out)
	}
	if got, want := strings.Join(strings.Fields(string(out)), " "), strings.Join(strings.Fields(shown), " "); got != want {
		t.Errorf("docs/install.md shows:\n%s\nkubectl prints:\n%s", want, got)
	}

	// A rule that compiles but reads an optional field without ?: admitted,
	// and kubectl prints the type check's warning as it applies it.
	if err := os.WriteFile(rule, []byte(`apiVersion: wrapup.dev/v1alpha1
kind: CompletionRule
metadata:
  name: bench-warned
spec:
  trigger: {apiGroup: batch, kind: Job}
  success: "object.status.conditions.exists(c, c.type == 'Complete' && c.status == 'True')"
  dryRun: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), "apply", "-f", "rule.yaml", "--kubeconfig", kubeconfig)
	cmd.Dir = filepath.Dir(rule)
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply of a rule that compiles: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Warning: spec.success: 1:14: conditions is optional in the Job schema") {
		t.Errorf("kubectl apply of a rule reading an optional field without ?: no type-check warning printed:\n%s", out)
	}
	t.Logf("kubectl apply printed:\n%s", out)
}

// checkWebhook checks the webhook as the API server calls it: the manager
// injected its CA into the configuration; a rule whose CEL does not compile
// is refused with the compiler's message and not stored; a good one is
// admitted.
func checkWebhook(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, types.NamespacedName{Name: "wrapup-validating-webhook-configuration"}, vwc); err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			t.Errorf("webhook %s: no caBundle injected", w.Name)
		}
	}
	bad := util.MakeRule("does-not-compile").TriggerKind("batch", "Job", "").Success("object.status.succeeded >= undeclaredThreshold").Obj()
	var err error
	// The API server may have to see the injected caBundle first.
	gomega.NewWithT(t).Eventually(func() error {
		err = c.Create(ctx, bad.DeepCopy())
		if err == nil {
			_ = c.Delete(ctx, bad)
			return errors.New("a rule that does not compile was admitted")
		}
		if !strings.Contains(err.Error(), `admission webhook "vcompletionrule.wrapup.dev" denied the request`) {
			return err
		}
		return nil
	}, util.LongTimeout, util.Interval).Should(gomega.Succeed())
	t.Logf("refused: %v", err)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "undeclaredThreshold") || !strings.Contains(err.Error(), "spec.success") {
		t.Errorf("the webhook's refusal should name the field and the compiler's error, got: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(bad), &wrapupv1alpha1.CompletionRule{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused rule is stored: %v", err)
	}
	good := util.MakeRule("compiles").TriggerKind("batch", "Job", "").Success("object.status.succeeded >= 1").DryRun().Obj()
	if err := c.Create(ctx, good); err != nil {
		t.Errorf("a rule that compiles was refused: %v", err)
	}
	if err := c.Delete(ctx, good); err != nil {
		t.Fatal(err)
	}
}
