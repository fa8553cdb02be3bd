package framework

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// The LeaderWorkerSet controller in the bed that runs pods is the real one:
// the controller manager of sigs.k8s.io/lws (its cmd/main.go, with the
// LeaderWorkerSet and Pod controllers of pkg/controllers and the webhooks
// of pkg/webhooks), built by test/controlplane/build.sh from the module
// test/tools/lws pins, and run as a process as kube-controller-manager is.
// It is not run in the suite's manager, as Kueue is, for two reasons: Kueue
// v0.17.0 requires a later LeaderWorkerSet module than the one pinned, and
// the module's webhook package does not build against the project's
// controller-runtime (ctrl.NewWebhookManagedBy takes the object's type
// since v0.23). Its webhooks are needed, not optional: the Pod webhook
// (pkg/webhooks/pod_webhook.go, PodWebhook.Default) gives a group's pods
// the group-index and worker-index labels that the Pod controller
// (pkg/controllers/pod_controller.go, PodReconciler.Reconcile) requires to
// make a group's worker StatefulSet, and the LeaderWorkerSet webhook
// (pkg/webhooks/leaderworkerset_webhook.go, Default) sets the restart,
// rollout and subdomain policies the controller reads. A group's pods come
// from StatefulSets, which kube-controller-manager's statefulset controller
// makes (podControllers).

// lwsToolModule is where test/controlplane/build.sh builds the
// LeaderWorkerSet controller manager from.
const lwsToolModule = "test/tools/lws"

// LeaderWorkerSetCRDs is the folder of the LeaderWorkerSet CRD in the
// module the bed's controller is built from.
func LeaderWorkerSetCRDs() string {
	ginkgo.GinkgoHelper()
	return filepath.Join(lwsModuleDir(), "config", "crd", "bases")
}

// lwsModuleDir is the source of the LeaderWorkerSet module that
// test/tools/lws pins (not the project's: see above).
func lwsModuleDir() string {
	ginkgo.GinkgoHelper()
	moduleDirsMu.Lock()
	defer moduleDirsMu.Unlock()
	const key = lwsToolModule + ":sigs.k8s.io/lws"
	if d, ok := moduleDirs[key]; ok {
		return d
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/lws")
	cmd.Dir = filepath.Join(RepoRoot(), lwsToolModule)
	out, err := cmd.Output()
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "locating the LeaderWorkerSet module of %s (test/controlplane/build.sh downloads it)", lwsToolModule)
	d := strings.TrimSpace(string(out))
	gomega.Expect(d).NotTo(gomega.BeEmpty(), "the LeaderWorkerSet module of %s is not downloaded: run test/controlplane/build.sh", lwsToolModule)
	moduleDirs[key] = d
	return d
}

// LeaderWorkerSetController is the running LeaderWorkerSet controller manager.
type LeaderWorkerSetController struct {
	p        *process
	webhooks *envtest.WebhookInstallOptions
}

// Running reports whether it is still up.
func (l *LeaderWorkerSetController) Running() bool { return l.p.running() }

// Stop stops it (SIGTERM, then SIGKILL after 10 s) and removes its
// webhooks' certificates; its webhook configurations stay with the control
// plane.
func (l *LeaderWorkerSetController) Stop() {
	l.p.stop()
	_ = l.webhooks.Cleanup()
}

// StartLeaderWorkerSet installs the LeaderWorkerSet webhooks, pointed at a
// local port with a certificate of their own, starts the LeaderWorkerSet
// controller manager serving them there, and waits until it serves. The
// suite's CRDPaths must hold LeaderWorkerSetCRDs(), and the bed must run
// pods (Pods), whose kube-controller-manager makes the groups' pods from
// their StatefulSets.
func (f *Framework) StartLeaderWorkerSet() *LeaderWorkerSetController {
	ginkgo.GinkgoHelper()
	gomega.Expect(f.Pods).To(gomega.BeTrue(), "the LeaderWorkerSet controller needs the bed that runs pods")
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	bin := filepath.Join(assets, "lws")
	_, err := os.Stat(bin)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "no LeaderWorkerSet controller manager in KUBEBUILDER_ASSETS: run test/controlplane/build.sh")

	start := time.Now()
	mutating, validating := lwsWebhookConfigurations()
	hooks := &envtest.WebhookInstallOptions{
		MutatingWebhooks:   mutating,
		ValidatingWebhooks: validating,
		LocalServingHost:   "127.0.0.1",
	}
	gomega.Expect(hooks.Install(f.cfg)).To(gomega.Succeed(), "installing the LeaderWorkerSet webhooks")

	// The controller manager's configuration (sigs.k8s.io/lws
	// api/config/v1alpha1 Configuration): no leader election, no metrics
	// or health listeners, and the webhook server where the API server
	// calls it, with envtest's certificate in place of the one its
	// internal certificate manager would write into a Secret.
	config := filepath.Join(f.tmpDir, "lws-config.yaml")
	body := fmt.Sprintf(`apiVersion: config.lws.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: %s
  port: %d
  certDir: %s
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: "0"
`, hooks.LocalServingHost, hooks.LocalServingPort, hooks.LocalServingCertDir)
	gomega.Expect(os.WriteFile(config, []byte(body), 0o600)).To(gomega.Succeed())
	kubeconfig := f.adminKubeconfig("lws")
	l := &LeaderWorkerSetController{
		p:        f.startProcess(bin, "--config="+config, "--kubeconfig="+kubeconfig, "--zap-log-level=info"),
		webhooks: hooks,
	}

	// Until its webhook server answers, the API server refuses every
	// LeaderWorkerSet and every group's pod (failurePolicy Fail).
	pool := x509.NewCertPool()
	gomega.Expect(pool.AppendCertsFromPEM(hooks.LocalServingCAData)).To(gomega.BeTrue())
	address := net.JoinHostPort(hooks.LocalServingHost, strconv.Itoa(hooks.LocalServingPort))
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(l.Running()).To(gomega.BeTrue(), "the LeaderWorkerSet controller manager exited")
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", address, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		_ = conn.Close()
	}, 2*time.Minute, 50*time.Millisecond).Should(gomega.Succeed(), "the LeaderWorkerSet webhook server at %s", address)
	fmt.Fprintf(ginkgo.GinkgoWriter, "LeaderWorkerSet webhooks installed and served at %s %s after StartLeaderWorkerSet began\n",
		address, time.Since(start).Round(10*time.Millisecond))
	return l
}

// lwsWebhookConfigurations are the module's webhook configurations as its
// default install makes them (config/default): config/webhook/manifests.yaml
// with the JSON patches config/webhook/kustomization.yaml applies (the Pod
// webhooks only for pods of a LeaderWorkerSet, by an objectSelector on its
// name label) and the "lws-" name prefix.
func lwsWebhookConfigurations() ([]*admissionv1.MutatingWebhookConfiguration, []*admissionv1.ValidatingWebhookConfiguration) {
	ginkgo.GinkgoHelper()
	dir := filepath.Join(lwsModuleDir(), "config", "webhook")
	manifests, err := os.ReadFile(filepath.Join(dir, "manifests.yaml"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	patched := func(doc []byte, patchFile string) []byte {
		patchYAML, err := os.ReadFile(filepath.Join(dir, patchFile))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		patchJSON, err := yaml.YAMLToJSON(patchYAML)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		patch, err := jsonpatch.DecodePatch(patchJSON)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), patchFile)
		docJSON, err := yaml.YAMLToJSON(doc)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		out, err := patch.Apply(docJSON)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "applying %s", patchFile)
		return out
	}
	var mutating []*admissionv1.MutatingWebhookConfiguration
	var validating []*admissionv1.ValidatingWebhookConfiguration
	for _, doc := range bytes.Split(manifests, []byte("\n---")) {
		var meta struct{ Kind string }
		gomega.Expect(yaml.Unmarshal(doc, &meta)).To(gomega.Succeed())
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionv1.MutatingWebhookConfiguration{}
			gomega.Expect(yaml.Unmarshal(patched(doc, "mutating-patch.yaml"), m)).To(gomega.Succeed())
			m.Name = "lws-" + m.Name
			mutating = append(mutating, m)
		case "ValidatingWebhookConfiguration":
			v := &admissionv1.ValidatingWebhookConfiguration{}
			gomega.Expect(yaml.Unmarshal(patched(doc, "validating-patch.yaml"), v)).To(gomega.Succeed())
			v.Name = "lws-" + v.Name
			validating = append(validating, v)
		}
	}
	gomega.Expect(mutating).To(gomega.HaveLen(1), "the LeaderWorkerSet module's mutating webhook configuration")
	gomega.Expect(validating).To(gomega.HaveLen(1), "the LeaderWorkerSet module's validating webhook configuration")
	return mutating, validating
}
