package gc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/read"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// Timings of the worker connections.
const (
	// secretRecheck is how long a worker's Secret is trusted before it is
	// read again (an edited Secret is taken up within it).
	secretRecheck = 30 * time.Second
	// workerTimeout bounds each request to a worker.
	workerTimeout = 10 * time.Second
	// workerFailFast is how long after a worker failed to answer its
	// AppWrappers are decided unreachable without asking it again.
	workerFailFast = 5 * time.Second
)

// workerClusters reaches the worker clusters of a MultiKueue manager
// cluster, one connection per MultiKueueCluster, each made from a kubeconfig
// Secret of wrapup's own in its namespace, named after the MultiKueueCluster
// (key "kubeconfig"): wrapup needs only to read AppWrappers and trigger
// kinds on a worker, and Kueue's MultiKueueCluster Secrets carry Kueue's
// much broader rights there. Each connection keeps trigger watches
// (triggers.Watches) of the kinds the AppWrappers dispatched to that worker
// read, claimed per AppWrapper and stopped when none does; their events
// reconcile the AppWrapper of the same namespace and name here.
type workerClusters struct {
	// Secrets reads the kubeconfig Secrets (uncached: wrapup neither lists
	// nor watches Secrets).
	Secrets client.Reader
	// Cache finds Workloads here by their controller (read.WorkloadOwnerIndex);
	// Live reads them from the API server.
	Cache, Live client.Reader
	// Namespace is where the Secrets are: wrapup's own.
	Namespace string
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// Recheck defaults to secretRecheck.
	Recheck time.Duration
	// Known is the workers' triggers.Options.Known (rulesRead).
	Known func(schema.GroupKind) celpolicies.Fields

	events chan event.GenericEvent
	scheme *runtime.Scheme

	mu    sync.Mutex
	ctx   context.Context
	conns map[string]*workerConn
}

// workerSource is how the AppWrapper controller reaches the worker
// clusters of AppWrappers that MultiKueue dispatches: workerClusters.
type workerSource interface {
	// workload finds the Workload of aw on this cluster, from the cache, or
	// read from the API server when live; nil when it has none.
	workload(ctx context.Context, aw *awv1beta2.AppWrapper, live bool) (*kueue.Workload, error)
	// conn returns the connection to the worker named cluster.
	conn(ctx context.Context, cluster string) (*workerConn, error)
	// release drops the claims of the AppWrapper key on the watches of
	// cluster.
	release(cluster string, key types.NamespacedName)
}

// workerConn is the connection to one worker.
type workerConn struct {
	cluster string
	// secretRV is the resourceVersion of the Secret it was made from.
	secretRV string
	checked  time.Time
	reader   client.Reader
	// triggers are the worker's trigger watches: watches, or a test's.
	triggers triggerCache
	watches  *triggers.Watches
	cancel   context.CancelFunc

	mu sync.Mutex
	// failure is the error of the worker's last failed answer, at failedAt;
	// nil once it answers again.
	failure  error
	failedAt time.Time
}

// newWorkerClusters returns the worker connections of wrapup in namespace,
// reading their Secrets with secrets.
func newWorkerClusters(secrets client.Reader, namespace string) *workerClusters {
	s := runtime.NewScheme()
	utilruntime.Must(awv1beta2.AddToScheme(s))
	return &workerClusters{Secrets: secrets, Namespace: namespace, Clock: clock.RealClock{}, events: make(chan event.GenericEvent, 1024), scheme: s, conns: map[string]*workerConn{}}
}

// Events is where changes of triggers on workers arrive, as the AppWrapper
// (on this cluster) to reconcile.
func (ws *workerClusters) Events() <-chan event.GenericEvent { return ws.events }

// Start records the manager's context and stops every connection when it ends.
func (ws *workerClusters) Start(ctx context.Context) error {
	ws.mu.Lock()
	ws.ctx = ctx
	ws.mu.Unlock()
	<-ctx.Done()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, c := range ws.conns {
		c.cancel()
	}
	clear(ws.conns)
	return nil
}

// NeedLeaderElection: workers are read by the acting replica only.
func (ws *workerClusters) NeedLeaderElection() bool { return true }

// conn returns the connection to cluster, made or remade from its Secret
// when that changed.
func (ws *workerClusters) conn(ctx context.Context, cluster string) (*workerConn, error) {
	ws.mu.Lock()
	c := ws.conns[cluster]
	base := ws.ctx
	recheck := ws.Recheck
	if recheck <= 0 {
		recheck = secretRecheck
	}
	fresh := c != nil && ws.Clock.Now().Sub(c.checked) < recheck
	ws.mu.Unlock()
	if base == nil {
		return nil, errors.New("the worker connections are not started yet")
	}
	if fresh {
		return c, nil
	}
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: ws.Namespace, Name: cluster}
	if err := ws.Secrets.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no kubeconfig Secret %s for worker cluster %s: create it with key %q (see docs/multikueue.md)", key, cluster, read.KubeconfigKey)
		}
		return nil, fmt.Errorf("reading the kubeconfig Secret %s of worker cluster %s: %w", key, cluster, err)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if c := ws.conns[cluster]; c != nil && c.secretRV == secret.ResourceVersion {
		c.checked = ws.Clock.Now()
		return c, nil
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[read.KubeconfigKey])
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig Secret %s of worker cluster %s: key %q: %w", key, cluster, read.KubeconfigKey, err)
	}
	nc, err := ws.connect(base, cluster, cfg)
	if err != nil {
		return nil, fmt.Errorf("worker cluster %s: %w", cluster, err)
	}
	nc.secretRV, nc.checked = secret.ResourceVersion, ws.Clock.Now()
	if old := ws.conns[cluster]; old != nil {
		// The Secret changed: the AppWrappers that watched kinds on the old
		// connection are reconciled, to claim them again on the new one,
		// whose informers list afresh (else a trigger that finishes before
		// their next reconcile would go unseen).
		old.cancel()
		keys := old.watches.Claimants()
		go func() {
			for _, k := range keys {
				select {
				case ws.events <- triggers.AppWrapperEvent(k):
				case <-base.Done():
					return
				}
			}
		}()
	}
	ws.conns[cluster] = nc
	return nc, nil
}

// failFast says, when the worker of c failed to answer less than
// workerFailFast ago, why: its AppWrappers do not each wait on it again
// (up to workerTimeout), which would hold the controller's workers.
func (c *workerConn) failFast(now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failure != nil && now.Sub(c.failedAt) < workerFailFast {
		return fmt.Errorf("%w (at %s; asked again after %s)", c.failure, c.failedAt.UTC().Format(time.RFC3339), workerFailFast)
	}
	return nil
}

// answered records whether the worker of c answered a read.
func (c *workerConn) answered(now time.Time, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && !apierrors.IsNotFound(err) {
		c.failure, c.failedAt = err, now
		return
	}
	c.failure = nil
}

// connect makes the clients and the watches of one worker.
func (ws *workerClusters) connect(base context.Context, cluster string, cfg *rest.Config) (*workerConn, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = workerTimeout
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	reader, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: ws.scheme, Mapper: mapper})
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	w := triggers.NewWatches(dyn, mapper, disc, triggers.Options{Cluster: cluster, Access: triggers.SelfAccessReview(dyn), Known: ws.Known})
	ctx, cancel := context.WithCancel(base)
	go func() { _ = w.Start(ctx) }()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-w.Events():
				select {
				case ws.events <- e:
				case <-ctx.Done():
					return
				}
			case <-w.Gone():
				// Rules are claimed on this cluster's watches only.
			}
		}
	}()
	<-w.Started()
	return &workerConn{cluster: cluster, reader: reader, triggers: w, watches: w, cancel: cancel}, nil
}

func (ws *workerClusters) lookup(cluster string) *workerConn {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.conns[cluster]
}

func (ws *workerClusters) release(cluster string, key types.NamespacedName) {
	if c := ws.lookup(cluster); c != nil {
		c.watches.Keep(key, nil)
	}
}

func (ws *workerClusters) workload(ctx context.Context, aw *awv1beta2.AppWrapper, live bool) (*kueue.Workload, error) {
	if live {
		return read.FindWorkload(ctx, ws.Cache, ws.Live, aw)
	}
	return read.FindWorkload(ctx, ws.Cache, nil, aw)
}

// readWorker reads what a decision on aw needs of its worker cluster: the
// Workload here (from cache, and from live when set), the connection, and
// MultiKueue's copy there, read from the worker's API server. A worker
// that cannot be read comes back with its Problem said.
func (r *appWrapperReconciler) readWorker(ctx context.Context, live bool, aw *awv1beta2.AppWrapper) (*decision.Worker, *workerConn) {
	if r.Clusters == nil {
		return &decision.Worker{Problem: "wrapup was started without MultiKueue support (Kueue's Workload kind is not served here, or wrapup has no namespace for worker Secrets)"}, nil
	}
	wl, err := r.Clusters.workload(ctx, aw, live)
	var c *workerConn
	w := read.WorkerOf(ctx, aw, wl, err, func(cluster string) (client.Reader, error) {
		var err error
		if c, err = r.Clusters.conn(ctx, cluster); err != nil {
			return nil, err
		}
		if err := c.failFast(r.Clock.Now()); err != nil {
			return nil, err
		}
		return &answerReader{Reader: c.reader, c: c, clock: r.Clock}, nil
	})
	reached := 1.0
	if w.Problem != "" {
		reached, c = 0, nil
	}
	if w.Cluster != "" {
		workerReachableGauge.WithLabelValues(w.Cluster).Set(reached)
	}
	return w, c
}

// answerReader records on its connection whether the worker answered.
type answerReader struct {
	client.Reader
	c     *workerConn
	clock clock.PassiveClock
}

func (a *answerReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := a.Reader.Get(ctx, key, obj, opts...)
	a.c.answered(a.clock.Now(), err)
	return err
}
