package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	kueuejob "sigs.k8s.io/kueue/pkg/controller/jobs/job"
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
	return setupKueue(ctx, mgr, false)
}

// SetupKueueWithJobs is SetupKueue with Kueue's batch/v1 Job integration
// too, wired as Kueue's Job integration suite wires it
// (test/integration/singlecluster/controller/jobs/job/suite_test.go,
// managerSetup; pkg/controller/jobs/job NewReconciler): a Job created
// suspended with the queue-name label is admitted, and its Workload
// finished when it completes, by Kueue alone. A Job that an AppWrapper
// owns carries no queue name and is left to the AppWrapper's.
func SetupKueueWithJobs(ctx context.Context, mgr ctrl.Manager) error {
	return setupKueue(ctx, mgr, true)
}

func setupKueue(ctx context.Context, mgr ctrl.Manager, jobs bool) error {
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

	opts := []jobframework.Option{jobframework.WithQueues(queues), jobframework.WithCache(cache)}
	if err := setupIntegration(ctx, mgr, mgr.GetClient(), "appwrapper", kueueappwrapper.SetupIndexes, kueueappwrapper.NewReconciler, opts); err != nil {
		return err
	}
	if jobs {
		// Kueue reads its Jobs from its cache, with its indexes (Kueue's
		// own manager caches every kind); this bed's manager client reads
		// Jobs from the API server (NewManager), so Kueue's Job
		// integration is given a client that reads from the manager's
		// cache.
		cached, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			Cache: &client.CacheOptions{Reader: mgr.GetCache()}})
		if err != nil {
			return fmt.Errorf("kueue job client: %w", err)
		}
		if err := setupIntegration(ctx, mgr, cached, "job", kueuejob.SetupIndexes, kueuejob.NewReconciler, opts); err != nil {
			return err
		}
		jobframework.EnableIntegration(kueuejob.FrameworkName)
	}
	//nolint:staticcheck // Kueue's scheduler takes the legacy recorder.
	sched := scheduler.New(queues, cache, mgr.GetClient(), mgr.GetEventRecorderFor(constants.AdmissionName),
		scheduler.WithPreemptionExpectations(expectations))
	if err := sched.Start(ctx); err != nil {
		return fmt.Errorf("kueue scheduler: %w", err)
	}
	return nil
}

// setupIntegration runs one of Kueue's job integrations in mgr: its
// indexes, then its reconciler, reading through c, with opts.
func setupIntegration(ctx context.Context, mgr ctrl.Manager, c client.Client, name string, indexes func(context.Context, client.FieldIndexer) error,
	newReconciler jobframework.ReconcilerFactory, opts []jobframework.Option) error {
	if err := indexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("kueue %s indexes: %w", name, err)
	}
	//nolint:staticcheck // Kueue's reconcilers take the legacy recorder.
	r, err := newReconciler(ctx, c, mgr.GetFieldIndexer(), mgr.GetEventRecorderFor(constants.JobControllerName), opts...)
	if err != nil {
		return fmt.Errorf("kueue %s reconciler: %w", name, err)
	}
	// Its watch handlers read through the manager's client
	// (jobframework's genericReconciler.SetupWithManager): the same c.
	if err := r.SetupWithManager(clientManager{Manager: mgr, c: c}); err != nil {
		return fmt.Errorf("kueue %s reconciler: %w", name, err)
	}
	return nil
}

// clientManager is a manager whose client is c.
type clientManager struct {
	ctrl.Manager
	c client.Client
}

func (m clientManager) GetClient() client.Client { return m.c }

// KueueAndWrapup is a ManagerSetup that runs Kueue (SetupKueue) and wrapup
// with opts in the manager.
func KueueAndWrapup(opts gc.Options) ManagerSetup { return kueueAndWrapup(false, opts) }

// KueueWithJobsAndWrapup is KueueAndWrapup with Kueue's Job integration
// (SetupKueueWithJobs).
func KueueWithJobsAndWrapup(opts gc.Options) ManagerSetup { return kueueAndWrapup(true, opts) }

func kueueAndWrapup(jobs bool, opts gc.Options) ManagerSetup {
	return func(ctx context.Context, mgr ctrl.Manager) error {
		if err := setupKueue(ctx, mgr, jobs); err != nil {
			return err
		}
		return gc.Setup(mgr, opts)
	}
}
