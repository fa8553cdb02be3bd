package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/wrapup-dev/wrapup/gc"
	kueueconfig "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	kueueappwrapper "sigs.k8s.io/kueue/pkg/controller/jobs/appwrapper"
	"sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
)

func init() {
	utilruntime.Must(kueue.AddToScheme(Scheme))
	utilruntime.Must(kueueconfig.AddToScheme(Scheme))
}

// KueueCRDs is the folder of Kueue's CRDs in its module.
func KueueCRDs() string {
	return filepath.Join(ModuleDir("sigs.k8s.io/kueue"), "config", "components", "crd", "bases")
}

// SetupKueue runs Kueue's own core controllers, its scheduler and its
// AppWrapper integration in mgr, wired as Kueue's AppWrapper integration
// suite wires them. Kueue's webhooks are not served: AppWrappers for Kueue
// are created suspended, with the kueue.x-k8s.io/queue-name label.
func SetupKueue(ctx context.Context, mgr ctrl.Manager) error {
	if err := indexer.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("kueue indexes: %w", err)
	}
	cache := schdcache.New(mgr.GetClient())
	expectations := preemptexpectations.New()
	requeuer := qcache.NewRequeuer(qcache.WithBatchPeriod(100 * time.Millisecond))
	go func() { _ = requeuer.Start(ctx) }()
	queues := qcache.NewManager(mgr.GetClient(), cache, requeuer, qcache.WithPreemptionExpectations(expectations))

	configuration := &kueueconfig.Configuration{}
	mgr.GetScheme().Default(configuration)
	if failed, err := core.SetupControllers(mgr, queues, cache, configuration, nil, expectations, nil); err != nil {
		return fmt.Errorf("kueue controller %s: %w", failed, err)
	}

	if err := kueueappwrapper.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("kueue appwrapper indexes: %w", err)
	}
	//nolint:staticcheck // Kueue's reconciler takes the legacy recorder.
	r, err := kueueappwrapper.NewReconciler(ctx, mgr.GetClient(), mgr.GetFieldIndexer(),
		mgr.GetEventRecorderFor(constants.JobControllerName),
		jobframework.WithQueues(queues), jobframework.WithCache(cache))
	if err != nil {
		return fmt.Errorf("kueue appwrapper reconciler: %w", err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("kueue appwrapper reconciler: %w", err)
	}
	//nolint:staticcheck // Kueue's scheduler takes the legacy recorder.
	sched := scheduler.New(queues, cache, mgr.GetClient(), mgr.GetEventRecorderFor(constants.AdmissionName),
		scheduler.WithPreemptionExpectations(expectations))
	if err := sched.Start(ctx); err != nil {
		return fmt.Errorf("kueue scheduler: %w", err)
	}
	return nil
}

// KueueAndWrapup is a ManagerSetup that runs Kueue (SetupKueue) and wrapup
// with opts in the manager.
func KueueAndWrapup(opts gc.Options) ManagerSetup {
	return func(ctx context.Context, mgr ctrl.Manager) error {
		if err := SetupKueue(ctx, mgr); err != nil {
			return err
		}
		return gc.Setup(mgr, opts)
	}
}
