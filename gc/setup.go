package gc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	memcache "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/read"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// Options tune the controllers.
type Options struct {
	// FailureGracePeriod is how long a Running AppWrapper with a failed
	// trigger is given to start a retry (the AppWrapper controller's
	// failureGracePeriod). Default DefaultFailureGracePeriod.
	FailureGracePeriod time.Duration
	// Workers is how many AppWrappers are reconciled at once (never the
	// same one twice at once). Default DefaultWorkers.
	Workers int
	// MultiKueue makes wrapup finish, on a MultiKueue manager cluster, the
	// AppWrappers that MultiKueue dispatches to worker clusters: it reads
	// Kueue's Workloads here, and each worker through the kubeconfig
	// Secret named after its MultiKueueCluster in Namespace.
	MultiKueue bool
	// Namespace is wrapup's own namespace (MultiKueue's worker Secrets).
	Namespace string
	// WorkerSecretRecheck is how long a worker's kubeconfig Secret is
	// trusted before it is read again; default 30s.
	WorkerSecretRecheck time.Duration
}

// DefaultWorkers: a reconcile waits on a few API round trips (the final
// check's reads, the outcome patch, the CompletionRecord, the delete), so
// few workers queue completions behind each other under load. In
// test/bench/throughput (2 cores), a burst of 1,000 completions ran at
// 33/s with 4 workers and at 38-43/s with 8, 16 or 32, where the API
// server's CPU is the limit; 16 keeps that rate on API servers with longer
// round trips than a local one.
const DefaultWorkers = 16

// RESTConfig is cfg as wrapup talks to the API server of its own cluster:
// without asking for gzip. The API server compresses every answer of more
// than 128 KiB (k8s.io/apiserver pkg/endpoints/handlers/responsewriters,
// deferredResponseWriter) and, from Kubernetes 1.37, the watch each
// informer starts with (a watch-list, sendInitialEvents), a gzip stream
// per flush of events until that watch times out after 5 to 10 minutes
// (handlers/watch.go, WatchServer.HandleHTTP and
// watchResponseWriter.BeginStream, feature WatchListCompression): at a
// start, every AppWrapper and trigger comes gzipped, event by event.
// Beside the API server, in its cluster, wrapup would pay CPU at both ends
// for bandwidth it does not need. The connections to MultiKueue worker
// clusters, from their kubeconfig Secrets, keep client-go's default.
func RESTConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	return cfg
}

// Setup adds wrapup's controllers to mgr.
func Setup(mgr ctrl.Manager, opts Options) error {
	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating discovery client: %w", err)
	}
	policies := &celpolicies.Cache{}
	known := rulesRead(mgr.GetClient(), policies)
	watches := triggers.NewWatches(dyn, mgr.GetRESTMapper(), dc, triggers.Options{Access: triggers.SelfAccessReview(dyn), Known: known})
	if err := mgr.Add(watches); err != nil {
		return fmt.Errorf("adding trigger watches: %w", err)
	}
	cached := memcache.NewMemCacheClient(dc)
	counters := newRuleCounters(mgr.GetClient(), mgr.GetAPIReader())
	counters.Log = mgr.GetLogger().WithName("rule-counters")
	if err := mgr.Add(counters); err != nil {
		return fmt.Errorf("adding rule counters: %w", err)
	}
	assign := newAssignments()
	recorder := mgr.GetEventRecorder("wrapup")
	if err := (&ruleReconciler{
		Client:     mgr.GetClient(),
		Recorder:   recorder,
		Policies:   policies,
		Watches:    watches,
		Assign:     assign,
		Mapper:     mgr.GetRESTMapper(),
		Schemas:    &resolver.ClientDiscoveryResolver{Discovery: cached},
		Invalidate: cached.Invalidate,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the rule controller: %w", err)
	}
	// A run's CompletionRecord is wrapup's memory of it: without its CRD
	// (an install of an older version's CRDs), nothing can be finished.
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: wrapupv1alpha1.GroupVersion.Group, Kind: "CompletionRecord"}); err != nil {
		return fmt.Errorf("the CompletionRecord CRD is not installed (install config/crd): %w", err)
	}
	var clusters workerSource
	if opts.MultiKueue {
		if opts.Namespace == "" {
			return errors.New("MultiKueue support needs wrapup's namespace, where the workers' kubeconfig Secrets are")
		}
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), &kueue.Workload{}, read.WorkloadOwnerIndex, read.WorkloadController); err != nil {
			return fmt.Errorf("indexing Kueue Workloads (is Kueue installed?): %w", err)
		}
		ws := newWorkerClusters(mgr.GetAPIReader(), opts.Namespace)
		ws.Cache, ws.Live, ws.Recheck, ws.Known = mgr.GetClient(), mgr.GetAPIReader(), opts.WorkerSecretRecheck, known
		clusters = ws
		if err := mgr.Add(ws); err != nil {
			return fmt.Errorf("adding the worker clusters: %w", err)
		}
	}
	if err := (&appWrapperReconciler{
		Clusters:           clusters,
		Cache:              mgr.GetClient(),
		Writer:             mgr.GetClient(),
		APIReader:          mgr.GetAPIReader(),
		Recorder:           recorder,
		Policies:           policies,
		Triggers:           watches,
		Assign:             assign,
		Counters:           counters,
		FailureGracePeriod: opts.FailureGracePeriod,
		Workers:            opts.Workers,
	}).SetupWithManager(mgr, watches.Events()); err != nil {
		return fmt.Errorf("setting up the appwrapper controller: %w", err)
	}
	if err := (&historyReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the history controller: %w", err)
	}
	return nil
}

// rulesRead says what the rules in the cache rules read of a kind's
// triggers (each compiled through policies), for the trigger informers to
// keep from their start (triggers.Options.Known).
func rulesRead(rules client.Reader, policies *celpolicies.Cache) func(schema.GroupKind) celpolicies.Fields {
	return func(gk schema.GroupKind) celpolicies.Fields {
		var list wrapupv1alpha1.CompletionRuleList
		var fields celpolicies.Fields
		if err := rules.List(context.Background(), &list); err != nil {
			return fields
		}
		for i := range list.Items {
			rule := &list.Items[i]
			// A rule with no kind reads the annotated triggers of any.
			if k := decision.RuleKind(rule); k.Kind != "" && k != gk || !rule.DeletionTimestamp.IsZero() {
				continue
			}
			if p, err := policies.Get(rule); err == nil {
				fields = fields.Union(decision.TriggerFields(p, gk))
			}
		}
		return fields
	}
}
