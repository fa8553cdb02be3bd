package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
)

// failureGracePeriod is short so that the suite can show a failure that the
// AppWrapper controller does not retry becoming final.
const failureGracePeriod = 2 * time.Second

var (
	fwk       *framework.Framework
	cfg       *rest.Config
	k8sClient client.Client
	ctx       context.Context
	cancel    context.CancelFunc
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Integration Suite")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	fwk = &framework.Framework{
		CRDPaths: []string{
			filepath.Join(framework.ModuleDir("sigs.k8s.io/jobset"), "config", "components", "crd", "bases"),
			filepath.Join(framework.ModuleDir("github.com/kubeflow/training-operator"), "manifests", "base", "crds", "kubeflow.org_pytorchjobs.yaml"),
			filepath.Join(framework.ModuleDir("github.com/ray-project/kuberay/ray-operator"), "config", "crd", "bases", "ray.io_rayjobs.yaml"),
			filepath.Join("testdata", "crds"),
		},
		// Knobs that prove the bed is real: with either set, the smoke test fails.
		WithoutGarbageCollector:     os.Getenv("WRAPUP_TEST_WITHOUT_GC") == "1",
		WithoutAppWrapperController: os.Getenv("WRAPUP_TEST_WITHOUT_APPWRAPPER_CONTROLLER") == "1",
	}
	cfg = fwk.Init()
	var err error
	k8sClient, err = client.New(cfg, client.Options{Scheme: framework.Scheme})
	Expect(err).NotTo(HaveOccurred())
	fwk.StartManager(ctx, cfg, func(_ context.Context, mgr ctrl.Manager) error {
		return gc.Setup(mgr, gc.Options{FailureGracePeriod: failureGracePeriod})
	})
})

// wrapup retries its own write conflicts (or avoids them): none may reach
// its logs as errors, whatever the AppWrapper controller writes meanwhile.
var _ = AfterEach(func() {
	Expect(fwk.Errors.Conflicts("wrapup-")).To(BeEmpty(), "wrapup logged write conflicts")
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if fwk != nil {
		fwk.Teardown()
	}
})
