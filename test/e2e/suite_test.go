// Package e2e runs wrapup beside the real Kueue (core controllers,
// scheduler, AppWrapper integration), the real AppWrapper controller and
// kube-controller-manager's garbage collector on one API server, and shows
// the user's real need: when a benchmark finishes, its quota comes back and
// the next queued AppWrapper is admitted.
package e2e

import (
	"context"
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

var (
	fwk       *framework.Framework
	cfg       *rest.Config
	k8sClient client.Client
	ctx       context.Context
	cancel    context.CancelFunc
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "End-to-end Suite (Kueue, AppWrapper, wrapup)")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	fwk = &framework.Framework{
		CRDPaths:     []string{framework.KueueCRDs()},
		WebhookPaths: []string{filepath.Join(framework.RepoRoot(), "config", "webhook")},
	}
	cfg = fwk.Init()
	var err error
	k8sClient, err = client.New(cfg, client.Options{Scheme: framework.Scheme})
	Expect(err).NotTo(HaveOccurred())
	fwk.StartManager(ctx, cfg, func(ctx context.Context, mgr ctrl.Manager) error {
		if err := framework.SetupKueue(ctx, mgr); err != nil {
			return err
		}
		if err := (&gc.RuleValidator{}).SetupWebhookWithManager(mgr); err != nil {
			return err
		}
		return gc.Setup(mgr, gc.Options{FailureGracePeriod: 2 * time.Second})
	})
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if fwk != nil {
		fwk.Teardown()
	}
})
