// Package pods runs the end-to-end story on a bed that runs pods: the real
// kube-scheduler binds them to fake GPU nodes that kwok plays, the real Job,
// ReplicaSet, Deployment and StatefulSet controllers and the LeaderWorkerSet
// controller make and finish them, Kueue admits by GPU quota, the
// AppWrapper controller deploys, and wrapup finishes. No test writes a
// pod's or a Job's status.
package pods

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
)

var (
	fwk       *framework.Framework
	lws       *framework.LeaderWorkerSetController
	cfg       *rest.Config
	k8sClient client.Client
	ctx       context.Context
	cancel    context.CancelFunc
)

func TestPods(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "End-to-end Suite with pods (kube-scheduler, kwok, Job, Deployment and LeaderWorkerSet controllers, Kueue, AppWrapper, wrapup)")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	fwk = &framework.Framework{
		CRDPaths: []string{framework.KueueCRDs(), framework.LeaderWorkerSetCRDs()},
		Pods:     true,
	}
	cfg = fwk.Init()
	lws = fwk.StartLeaderWorkerSet()
	var err error
	k8sClient, err = client.New(cfg, client.Options{Scheme: framework.Scheme})
	Expect(err).NotTo(HaveOccurred())
	fwk.StartManager(ctx, cfg, framework.KueueAndWrapup(gc.Options{FailureGracePeriod: 5 * time.Second}))
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if lws != nil {
		lws.Stop()
	}
	if fwk != nil {
		fwk.Teardown()
	}
})
