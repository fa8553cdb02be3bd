// Package throughput measures wrapup against the limit the API server
// sets: how many completions per second a plain client achieves with
// exactly wrapup's writes per completion (the CompletionRecord, the
// precondition delete), swept over its concurrency,
// beside wrapup's rate on the same burst at several worker counts and the
// TTL-after-finished controller's rate with kube-controller-manager's
// client limits as shipped and raised; then the latency of each under a
// steady, seeded Poisson load at fractions of that limit.
//
// The benchmark plays the AppWrapper controller's part itself (each
// AppWrapper is written Running with its trigger Job, owned and labelled
// as that controller does it): its own writes would load the API server
// during the measure, and it is measured in test/bench. `make
// bench-throughput` writes test/bench/results/throughput-N.md; `make test`
// runs it at a smoke size.
package throughput

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/bench"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

var (
	flagN           = flag.Int("tp.n", 100, "AppWrappers (and plain Jobs) per burst")
	flagSweep       = flag.Int("tp.sweep", 50, "AppWrappers per concurrency of the limit's sweep")
	flagConcurrency = flag.String("tp.concurrency", "1,8", "concurrencies of the plain client's sweep")
	flagWorkers     = flag.String("tp.workers", "4", "wrapup's worker counts measured on a burst")
	flagSteady      = flag.String("tp.steady", "0.5", "steady-load arrival rates, as fractions of the limit")
	flagSteadyN     = flag.Int("tp.steady-n", 50, "completions per steady-load phase")
	flagSteadyOf    = flag.Float64("tp.steady-of", 0, "completions/s that -tp.steady's fractions are of, in place of the limit measured in the run (0): to compare two runs under the same load")
	flagSteadyMax   = flag.Duration("tp.steady-max", 10*time.Minute, "longest arrival window of a steady-load phase")
	flagSteadyW     = flag.Int("tp.steady-workers", gc.DefaultWorkers, "wrapup's workers under steady load")
	flagDrain       = flag.Duration("tp.drain", time.Minute, "how long a phase waits for its deletions after its last completion")
	flagTTL         = flag.Bool("tp.ttl", true, "measure the TTL-after-finished controller too (bursts and steady load)")
	flagVariants    = flag.Bool("tp.variants", true, "measure the plain client without the Events and with the final check's reads too")
	flagTTLQPS      = flag.Int("tp.ttl-qps", 1000, "kube-controller-manager's --kube-api-qps and --kube-api-burst for the raised TTL baseline")
	flagApart       = flag.Bool("tp.apart", false, "give the control plane (kube-apiserver, etcd, kube-controller-manager) CPU 0 and the benchmark's process (wrapup, the plain client, the load) the other CPUs, as when wrapup runs on a node of its own; the results go to throughput-N-apart.md")
	flagSeed        = flag.Uint64("tp.seed", 1, "seed of the steady load's arrivals")
	flagOut         = flag.String("tp.out", "", "folder to write throughput-N.md into")
	flagImpersonate = flag.Bool("tp.impersonate", false, "wrapup and the plain client authenticate with the admin's client certificate and impersonate wrapup's ServiceAccount, instead of a token of it")
	flagCPUProfile  = flag.String("tp.cpuprofile", "", "write a CPU profile of each wrapup burst to FILE-<workers>")
	flagAPIProfile  = flag.String("tp.apiserver-profile", "", "write CPU profiles of kube-apiserver over 5 s of the limit's burst and of each wrapup burst, from 0.5 s after its first AppWrapper deletion, to FILE-limit, FILE-limit-without-events and FILE-limit-with-reads (with -tp.variants) and FILE-wrapup-<workers>")
	flagHeapProfile = flag.String("tp.heapprofile", "", "write heap profiles of the heap phase to FILE-before (wrapup idle with the first AppWrappers), FILE-tracking (with all) and FILE-restarted (with all, after a restart), and goroutine profiles to FILE-goroutines-<the same>")
	flagLog         = flag.String("tp.log", "", "keep the controllers' log (wrapup's, with timestamps to the nanosecond) in FILE; by default it is written to a temporary file, removed at the end. The log is sampled as in production: of a message repeated within a second, the first 100, then every 100th")
	flagHeapN       = flag.Int("tp.heap-n", 100, "AppWrappers (a Deployment and a trigger Job each) whose live heap in wrapup is measured; 0: not measured")
)

const (
	// label marks what the benchmark creates: wrapup's rule matches
	// "wrapup" only.
	label = "wrapup-bench/throughput"
	// heapLabel marks the heap phase's AppWrappers and Jobs.
	heapLabel = "wrapup-bench/heap"
	perNS     = 100
	writers   = 32
)

func TestThroughput(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "wrapup throughput benchmark")
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		Expect(err).NotTo(HaveOccurred(), "parsing %q", s)
		out = append(out, v)
	}
	return out
}

func floats(s string) []float64 {
	var out []float64
	if s == "" {
		return nil
	}
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		Expect(err).NotTo(HaveOccurred(), "parsing %q", s)
		out = append(out, v)
	}
	return out
}

// seen records when the benchmark's watch first saw each object deleted
// (gone, or with a deletionTimestamp: the delete request's effect), and
// when wrapup's transport sent the delete of each AppWrapper.
type seen struct {
	mu       sync.Mutex
	deleted  map[types.NamespacedName]time.Time
	requests map[types.NamespacedName]time.Time
	// reads and records are when wrapup sent its read of each
	// AppWrapper's trigger (the final check) and the create of its run's
	// CompletionRecord (the outcome recorded).
	reads, records map[types.NamespacedName]time.Time
	// rulesList and triggerGet are the round trips of wrapup's final
	// check's reads: its consistent LIST of the rules, its GET of the
	// trigger.
	rulesList, triggerGet []time.Duration
	// appWrappersDeleted counts the AppWrappers seen deleted.
	appWrappersDeleted int
}

// readTimes returns the round trips of the final check's reads recorded from
// the indexes from on, and the indexes to start from next.
func (s *seen) readTimes(from [2]int) (rules, trigger []time.Duration, next [2]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rulesList[from[0]:]), slices.Clone(s.triggerGet[from[1]:]), [2]int{len(s.rulesList), len(s.triggerGet)}
}

func (s *seen) see(obj any, gone, appWrapper bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || (!gone && m.DeletionTimestamp == nil) {
		return
	}
	now := time.Now()
	key := client.ObjectKeyFromObject(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.deleted[key]; !ok {
		s.deleted[key] = now
		if appWrapper {
			s.appWrappersDeleted++
		}
	}
}

// collectDeleted appends to times when each of pending was seen deleted,
// and returns those not seen deleted yet.
func (s *seen) collectDeleted(pending []*run, times *[]time.Time) []*run {
	s.mu.Lock()
	defer s.mu.Unlock()
	left := pending[:0]
	for _, r := range pending {
		if t, ok := s.deleted[r.key]; ok {
			*times = append(*times, t)
		} else {
			left = append(left, r)
		}
	}
	return left
}

// appWrappersSeenDeleted is how many AppWrappers were seen deleted so far.
func (s *seen) appWrappersSeenDeleted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appWrappersDeleted
}

func (s *seen) deletedAt(key types.NamespacedName) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.deleted[key]
	return t, ok
}

func (s *seen) requestAt(key types.NamespacedName) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.requests[key]
	return t, ok
}

// steps are when wrapup read the trigger, recorded the outcome and sent
// the delete of key.
func (s *seen) steps(key types.NamespacedName) (read, record, del time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	read, ok1 := s.reads[key]
	record, ok2 := s.records[key]
	del, ok3 := s.requests[key]
	return read, record, del, ok1 && ok2 && ok3
}

// firstSteps are the times from start to wrapup's first read of a
// trigger, first outcome recorded and first delete request among runs.
func (s *seen) firstSteps(runs []*run, start time.Time) (read, record, del time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := func(m map[types.NamespacedName]time.Time) time.Duration {
		var t time.Time
		for _, r := range runs {
			if at, ok := m[r.key]; ok && (t.IsZero() || at.Before(t)) {
				t = at
			}
		}
		if t.IsZero() {
			return 0
		}
		return t.Sub(start)
	}
	return first(s.reads), first(s.records), first(s.requests)
}

// wrap records the send time of wrapup's first delete of each AppWrapper.
func (s *seen) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		// /apis/GROUP/VERSION/namespaces/NS/RESOURCE/NAME
		p := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
		var took *[]time.Duration
		q := req.URL.Query()
		switch {
		case q.Has("watch") || q.Has("resourceVersion"):
			// An informer's list or watch, not a read of the final check.
		case len(p) == 4 && p[1] == wrapupv1alpha1.GroupVersion.Group && p[3] == "completionrules" && req.Method == http.MethodGet:
			took = &s.rulesList
		case len(p) == 7 && p[1] == "batch" && p[5] == "jobs" && req.Method == http.MethodGet:
			took = &s.triggerGet
		}
		if len(p) == 6 && p[1] == wrapupv1alpha1.GroupVersion.Group && p[3] == "namespaces" && p[5] == "completionrecords" && req.Method == http.MethodPost {
			if name := createdName(req); name != "" {
				s.first(s.records, types.NamespacedName{Namespace: p[4], Name: appWrapperOfRecord(name)})
			}
		}
		if len(p) == 7 && p[0] == "apis" && p[3] == "namespaces" {
			var m map[types.NamespacedName]time.Time
			key := types.NamespacedName{Namespace: p[4], Name: p[6]}
			switch {
			case p[1] == awv1beta2.GroupVersion.Group && p[5] == "appwrappers" && req.Method == http.MethodDelete:
				m = s.requests
			case p[1] == "batch" && p[5] == "jobs" && req.Method == http.MethodGet:
				m, key.Name = s.reads, strings.TrimSuffix(key.Name, "-trigger")
			}
			if m != nil {
				s.first(m, key)
			}
		}
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		if took != nil {
			d := time.Since(start)
			s.mu.Lock()
			*took = append(*took, d)
			s.mu.Unlock()
		}
		return resp, err
	})
}

// first sets m[key] to now, unless set.
func (s *seen) first(m map[types.NamespacedName]time.Time, key types.NamespacedName) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := m[key]; !ok {
		m[key] = now
	}
}

// createdName is the metadata.name of the object req creates, read from a
// copy of its JSON body (the first "name" key is metadata's: apiVersion
// and kind come before it); "" when it has none.
func createdName(req *http.Request) string {
	if req.GetBody == nil {
		return ""
	}
	body, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return ""
	}
	const key = `"name":"`
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return ""
	}
	b = b[i+len(key):]
	j := bytes.IndexByte(b, '"')
	if j < 0 {
		return ""
	}
	return string(b[:j])
}

// appWrapperOfRecord is the AppWrapper name of the CompletionRecord name
// (wrapupv1alpha1.RecordName: the AppWrapper's name and "-" and 8 hex
// digits of its UID's hash).
func appWrapperOfRecord(name string) string {
	if len(name) < 9 {
		return name
	}
	return name[:len(name)-9]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// run is one completion to measure: an AppWrapper (its trigger Job is
// name-trigger) or a plain Job.
type run struct {
	key  types.NamespacedName
	aw   *awv1beta2.AppWrapper
	sent time.Time
}

func (r *run) job() types.NamespacedName {
	if r.aw == nil {
		return r.key
	}
	return types.NamespacedName{Namespace: r.key.Namespace, Name: r.key.Name + "-trigger"}
}

// Rate is a burst's completions per second: from the first deletion the
// benchmark's watch saw to the last, over the deletions between.
type Rate struct {
	What        string
	Concurrency int
	N           int
	PerSecond   float64
	// FirstAfter is the time from the burst's start (its controller's
	// start, or the plain client's first write) to the first deletion.
	FirstAfter time.Duration
	// CPU is the CPU time per completion over the burst: of this process
	// (wrapup or the plain client; nothing else of it is busy then), of
	// kube-apiserver and of etcd.
	CPUSelf, CPUAPIServer, CPUEtcd time.Duration
	// Requests are wrapup's requests over the burst, by kind.
	Requests map[bench.RequestKey]int64
	// FirstRead, FirstRecord and FirstRequest are, for wrapup, the time
	// from its start to its first final check's read of a trigger, its
	// first create of a CompletionRecord and its first delete request; QueueMean and
	// ReconcileMean its AppWrapper controller's mean wait in the queue and
	// mean reconcile over the burst.
	FirstRead, FirstRecord, FirstRequest time.Duration
	QueueMean, ReconcileMean             time.Duration
	// Reconciles counts the AppWrapper controller's reconciles over the
	// burst.
	Reconciles float64
	// FirstReconcile is, for wrapup, the time from its start to its
	// AppWrapper controller's first reconcile; TriggerStarted and
	// TriggerSynced to its trigger informer's start and first list.
	FirstReconcile, TriggerStarted, TriggerSynced time.Duration
	// API is kube-apiserver's CPU per completion in a profile of the
	// burst (-tp.apiserver-profile); nil without one.
	API *APIShare
}

// APIShare is kube-apiserver's CPU per completion in 5 s of a burst: in
// all, and in each of bench.APIParts.
type APIShare struct {
	Completions int
	Total       time.Duration
	Parts       []time.Duration
	// Past is how long the profile ran on after the burst's last
	// deletion: what kube-apiserver did then (kube-controller-manager's
	// garbage collector, mostly) is in the figures too.
	Past time.Duration
}

// Steady is one steady-load phase.
type Steady struct {
	Fraction, PerSecond float64
	What                string
	N, Undeleted        int
	Window              time.Duration
	// Deleted is status write → deletion seen; Request (wrapup only) is
	// status write → delete request.
	Deleted, Request bench.Summary
	// Lag is how late the status writes were sent against the schedule.
	Lag bench.Summary
	// wrapup's steps: status write → its read of the live trigger (the
	// watch event, the queue, the decision on the caches, the rules'
	// read), → its create of the CompletionRecord, → its delete request.
	ToRead, ToRecord, ToDelete bench.Summary
	// QueueMean and ReconcileMean are the means of controller-runtime's
	// histograms for wrapup's AppWrapper controller over the phase: the
	// wait in its queue, and a reconcile's duration.
	QueueMean, ReconcileMean time.Duration
	Reconciles               float64
	// FinalChecks counts wrapup's final checks (wrapup_final_checks_total)
	// over the phase.
	FinalChecks float64
	// RulesList and TriggerGet are the round trips of wrapup's final
	// check's reads over the phase.
	RulesList, TriggerGet bench.Summary
}

// awaitWrapupIdle waits until wrapup's AppWrapper controller has not
// reconciled anything for two seconds.
func awaitWrapupIdle(what string) { awaitIdleFor(what, 2*time.Second) }

// awaitIdleFor waits until wrapup's AppWrapper controller has reconciled
// nothing for window.
func awaitIdleFor(what string, window time.Duration) {
	last := -1.0
	Eventually(func() bool {
		count, _ := histogram("controller_runtime_reconcile_time_seconds", "controller", "wrapup-appwrapper")
		idle := count == last
		last = count
		return idle
	}).WithTimeout(5*time.Minute).WithPolling(window).Should(BeTrue(), what)
}

// triggersListed says whether wrapup's batch/Job informer has listed
// (wrapup_trigger_informer_synced; a stopped wrapup's series are deleted).
func triggersListed() bool {
	fams, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	return triggersListedIn(fams)
}

func triggersListedIn(fams []*dto.MetricFamily) bool {
	for _, m := range series(fams, "wrapup_trigger_informer_synced", "kind", "Job.batch") {
		if m.GetGauge().GetValue() == 1 {
			return true
		}
	}
	return false
}

// series are the series of the family name labelled label=value.
func series(fams []*dto.MetricFamily, name, label, value string) []*dto.Metric {
	var out []*dto.Metric
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// counter is the value of the unlabelled counter name, on the registry
// wrapup serves its metrics on.
func counter(name string) float64 {
	fams, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range fams {
		if f.GetName() == name {
			v := 0.0
			for _, m := range f.GetMetric() {
				v += m.GetCounter().GetValue()
			}
			return v
		}
	}
	return 0
}

// histogram is the count and sum of the histogram name's series labelled
// label=value in controller-runtime's registry.
func histogram(name, label, value string) (count, sum float64) {
	fams, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	return histogramIn(fams, name, label, value)
}

func histogramIn(fams []*dto.MetricFamily, name, label, value string) (count, sum float64) {
	for _, m := range series(fams, name, label, value) {
		count += float64(m.GetHistogram().GetSampleCount())
		sum += m.GetHistogram().GetSampleSum()
	}
	return count, sum
}

var _ = Describe("wrapup's throughput against the API server's", Ordered, func() {
	var (
		ctx      context.Context
		cancel   context.CancelFunc
		fwk      *framework.Framework
		c        client.Client
		limitCfg *rest.Config
		saCfg    *rest.Config
		adminCfg *rest.Config
		watched  *seen
		phase    int
	)

	BeforeAll(func() {
		ctx, cancel = context.WithCancel(context.Background())
		var logFile *os.File
		var err error
		if *flagLog != "" {
			logFile, err = os.Create(*flagLog)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = logFile.Close() })
		} else {
			logFile, err = os.CreateTemp("", "wrapup-throughput-*.log")
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = logFile.Close(); _ = os.Remove(logFile.Name()) })
		}
		ctrl.SetLogger(zap.New(zap.WriteTo(logFile), func(o *zap.Options) { o.TimeEncoder = zapcore.RFC3339NanoTimeEncoder }))

		fwk = &framework.Framework{ExtraKubeControllers: []string{"ttl-after-finished"}, WithoutAppWrapperController: true}
		cfg := fwk.Init()
		adminCfg = cfg
		if *flagApart {
			Expect(bench.PinApart()).To(Succeed())
		}
		benchCfg := bench.OwnConnection(cfg, "wrapup-bench")
		benchCfg.QPS, benchCfg.Burst = -1, 0
		c, err = client.New(benchCfg, client.Options{Scheme: framework.Scheme})
		Expect(err).NotTo(HaveOccurred())
		framework.InstallControllerRBAC(ctx, c)
		// wrapup and the plain client are the same ServiceAccount, in
		// the same API Priority and Fairness flow, unthrottled on the
		// client side as cmd/manager is by default; with a token of it,
		// as its pod has, unless -tp.impersonate.
		if *flagImpersonate {
			saCfg = framework.ServiceAccountConfig(cfg, framework.ControllerNamespace, framework.ControllerServiceAccount)
		} else {
			saCfg = framework.ServiceAccountTokenConfig(ctx, cfg, framework.ControllerNamespace, framework.ControllerServiceAccount, 24*time.Hour)
		}
		saCfg.QPS, saCfg.Burst = -1, 0
		limitCfg = bench.OwnConnection(saCfg, "plain-client")

		rule := util.MakeRule("throughput").TriggerKind("batch", "Job", "").
			AppWrapperLabels(map[string]string{label: "wrapup"}).
			OnSuccess(wrapupv1alpha1.ActionDeleteAll, 0).Obj()
		Expect(c.Create(ctx, rule)).To(Succeed())

		watched = &seen{deleted: map[types.NamespacedName]time.Time{}, requests: map[types.NamespacedName]time.Time{},
			reads: map[types.NamespacedName]time.Time{}, records: map[types.NamespacedName]time.Time{}}
		sel, err := labels.Parse(label)
		Expect(err).NotTo(HaveOccurred())
		meta := func(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(gvk)
			return m
		}
		kinds := []client.Object{meta(awv1beta2.GroupVersion.WithKind("AppWrapper")), meta(batchv1.SchemeGroupVersion.WithKind("Job"))}
		byObject := map[client.Object]crcache.ByObject{}
		for _, k := range kinds {
			byObject[k] = crcache.ByObject{Label: sel}
		}
		cache, err := crcache.New(bench.OwnConnection(cfg, "wrapup-bench-watch"), crcache.Options{Scheme: framework.Scheme, ByObject: byObject,
			DefaultTransform: crcache.TransformStripManagedFields()})
		Expect(err).NotTo(HaveOccurred())
		for i, k := range kinds {
			inf, err := cache.GetInformer(ctx, k)
			Expect(err).NotTo(HaveOccurred())
			appWrapper := i == 0
			_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				UpdateFunc: func(_, obj any) { watched.see(obj, false, appWrapper) },
				DeleteFunc: func(obj any) { watched.see(obj, true, appWrapper) },
			})
			Expect(err).NotTo(HaveOccurred())
		}
		go func() {
			defer GinkgoRecover()
			Expect(cache.Start(ctx)).To(Succeed())
		}()
		Expect(cache.WaitForCacheSync(ctx)).To(BeTrue())
	})

	AfterAll(func() {
		if cancel != nil {
			cancel()
		}
		if fwk != nil {
			fwk.Teardown()
		}
	})

	// settle deletes every benchmark Job that earlier phases left, and
	// waits until they are gone: those of deleted AppWrappers, for
	// kube-controller-manager's garbage collector, and those of a TTL
	// baseline it had not deleted yet. At its default 20 QPS, it would
	// otherwise still be deleting thousands of them, on the same cores and
	// through the same API server, while the next phase is measured; it
	// still looks up each one it had queued (a GET, which finds it gone).
	// Each phase's own deletions it garbage-collects during that phase, as
	// in any cluster. It deletes the CompletionRecords of earlier phases
	// too (the plain client's, wrapup's), so that a wrapup started for a
	// phase does not list and decode thousands of records of the phases
	// before it within its measure; again while any is left, as a wrapup
	// that runs on (the steady rows') may still write some, for runs
	// that a phase left not deleted.
	settle := func() {
		Eventually(func(g Gomega) {
			records := &metav1.PartialObjectMetadataList{}
			records.SetGroupVersionKind(wrapupv1alpha1.GroupVersion.WithKind("CompletionRecordList"))
			g.Expect(c.List(ctx, records)).To(Succeed())
			withRecords := map[string]bool{}
			for _, r := range records.Items {
				withRecords[r.Namespace] = true
			}
			for ns := range withRecords {
				g.Expect(client.IgnoreNotFound(c.DeleteAllOf(ctx, &wrapupv1alpha1.CompletionRecord{}, client.InNamespace(ns)))).To(Succeed())
			}
			g.Expect(records.Items).To(BeEmpty(), "CompletionRecords of earlier phases left")
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		var jobs batchv1.JobList
		Expect(c.List(ctx, &jobs, client.HasLabels{label})).To(Succeed())
		namespaces := map[string]bool{}
		for _, j := range jobs.Items {
			namespaces[j.Namespace] = true
		}
		for ns := range namespaces {
			Expect(client.IgnoreNotFound(c.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.HasLabels{label},
				client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(c.List(ctx, &jobs, client.HasLabels{label}, client.Limit(1))).To(Succeed())
			g.Expect(jobs.Items).To(BeEmpty(), "Jobs of earlier phases left")
		}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	}

	// create makes n AppWrappers labelled mode (or, for mode "ttl", plain
	// Jobs with ttlSecondsAfterFinished 0) in namespaces of their own, once
	// what earlier phases left is gone (settle).
	create := func(mode string, n int) []*run {
		settle()
		phase++
		runs := make([]*run, n)
		for i := range runs {
			runs[i] = &run{key: types.NamespacedName{Namespace: fmt.Sprintf("tp-%d-%s-%d", phase, mode, i/perNS), Name: fmt.Sprintf("%s-%d", mode, i)}}
		}
		for i := 0; i < n; i += perNS {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: runs[i].key.Namespace}}
			Expect(c.Create(ctx, ns)).To(Succeed())
		}
		Expect(bench.Parallel(writers, runs, func(r *run) error {
			if mode == "ttl" {
				job := util.MakeJob(r.key.Name).Obj()
				job.Namespace, job.Labels = r.key.Namespace, map[string]string{label: mode}
				job.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
				return c.Create(ctx, job)
			}
			var err error
			r.aw, err = createRunning(ctx, c, r.key, mode)
			return err
		})).To(Succeed())
		return runs
	}

	// complete writes each run's Job Complete, with writers at once.
	complete := func(runs []*run) {
		Expect(bench.Parallel(writers, runs, func(r *run) error { return completeJob(ctx, c, r) })).To(Succeed())
	}

	// awaitDeleted waits until the watch saw every run deleted and
	// returns the burst's rate.
	awaitDeleted := func(what string, conc int, runs []*run, start time.Time, cpu bench.CPUSample) Rate {
		// Only the runs not seen deleted yet are looked up again, under one
		// lock: looking up all of 10,000 runs every 200 ms took 4 s of this
		// process's CPU in a burst, counted as the controller's.
		times := make([]time.Time, 0, len(runs))
		pending := slices.Clone(runs)
		Eventually(func(g Gomega) {
			pending = watched.collectDeleted(pending, &times)
			g.Expect(len(pending)).To(BeZero(), "%s: runs not deleted yet", what)
		}).WithTimeout(*flagDrain + time.Duration(len(runs))*100*time.Millisecond).WithPolling(200 * time.Millisecond).Should(Succeed())
		r := rateOf(what, conc, times, start)
		after, err := bench.SampleCPU()
		Expect(err).NotTo(HaveOccurred())
		per := func(d time.Duration) time.Duration { return d / time.Duration(len(runs)) }
		r.CPUSelf = per(after.Self - cpu.Self)
		r.CPUAPIServer = per(after.Children["kube-apiserver"] - cpu.Children["kube-apiserver"])
		r.CPUEtcd = per(after.Children["etcd"] - cpu.Children["etcd"])
		return r
	}
	// profileAPIServer starts kube-apiserver's CPU profile of a burst
	// with -tp.apiserver-profile, from 0.5 s after its first AppWrapper
	// deletion (its controller's start is not in it); nil without the flag.
	profileAPIServer := func(suffix string) *bench.APIProfile {
		if *flagAPIProfile == "" {
			return nil
		}
		before := watched.appWrappersSeenDeleted()
		first := func() bool { return watched.appWrappersSeenDeleted() > before }
		return bench.ProfileAPIServer(ctx, adminCfg, *flagAPIProfile+"-"+suffix, first, 500*time.Millisecond, 5*time.Second)
	}
	// apiShare waits for the profile p of the burst of runs and returns
	// kube-apiserver's CPU per completion in it: its parts, divided by the
	// runs the benchmark's watch saw deleted while it was taken.
	apiShare := func(p *bench.APIProfile, runs []*run) *APIShare {
		if p == nil {
			return nil
		}
		Expect(p.Wait()).To(Succeed())
		n := 0
		var last time.Time
		for _, r := range runs {
			t, ok := watched.deletedAt(r.key)
			if !ok {
				continue
			}
			if !t.Before(p.Start) && t.Before(p.End) {
				n++
			}
			if t.After(last) {
				last = t
			}
		}
		a := &APIShare{Completions: n}
		if p.End.After(last) {
			a.Past = p.End.Sub(last)
		}
		if n == 0 {
			return a
		}
		total, parts, err := bench.ProfileParts(p.Path, bench.APIParts)
		Expect(err).NotTo(HaveOccurred())
		a.Total = total / time.Duration(n)
		for _, d := range parts {
			a.Parts = append(a.Parts, d/time.Duration(n))
		}
		return a
	}
	sampleCPU := func() bench.CPUSample {
		s, err := bench.SampleCPU()
		Expect(err).NotTo(HaveOccurred())
		return s
	}

	// restartKCM restarts kube-controller-manager, on CPU 0 again with
	// -tp.apart.
	restartKCM := func(args ...string) {
		fwk.RestartKubeControllerManager(args...)
		if *flagApart {
			Expect(bench.PinApart()).To(Succeed())
		}
	}

	It("measures the limit, wrapup's rate and the TTL controller's on a burst, then the latency under steady load", func() {
		res := &Results{Machine: bench.ReadMachine(), Version: bench.Versions(saCfg), N: *flagN, Sweep: *flagSweep, SteadyWorkers: *flagSteadyW, Seed: *flagSeed, Apart: *flagApart, Impersonate: *flagImpersonate}
		limitClient, err := client.New(limitCfg, client.Options{Scheme: framework.Scheme})
		Expect(err).NotTo(HaveOccurred())

		By("sweeping the plain client's concurrency")
		best := Rate{}
		for _, conc := range ints(*flagConcurrency) {
			runs := create("limit", *flagSweep)
			complete(runs)
			cpu, start := sampleCPU(), time.Now()
			Expect(plainClient(ctx, limitClient, conc, runs, plain{events: true})).To(Succeed())
			r := awaitDeleted("plain client", conc, runs, start, cpu)
			res.Sweep_ = append(res.Sweep_, r)
			if r.PerSecond > best.PerSecond {
				best = r
			}
		}

		By(fmt.Sprintf("the limit: the plain client at concurrency %d on a burst of %d", best.Concurrency, *flagN))
		runs := create("limit", *flagN)
		complete(runs)
		cpu, start := sampleCPU(), time.Now()
		profiled := profileAPIServer("limit")
		Expect(plainClient(ctx, limitClient, best.Concurrency, runs, plain{events: true})).To(Succeed())
		res.Limit = awaitDeleted("plain client (the limit)", best.Concurrency, runs, start, cpu)
		res.Limit.API = apiShare(profiled, runs)

		if *flagVariants {
			By(fmt.Sprintf("the plain client without the Events, at concurrency %d on a burst of %d", best.Concurrency, *flagN))
			runs = create("limit", *flagN)
			complete(runs)
			cpu, start = sampleCPU(), time.Now()
			profiled = profileAPIServer("limit-without-events")
			Expect(plainClient(ctx, limitClient, best.Concurrency, runs, plain{})).To(Succeed())
			res.LimitNoEvents = awaitDeleted("plain client without Events", best.Concurrency, runs, start, cpu)
			res.LimitNoEvents.API = apiShare(profiled, runs)

			By(fmt.Sprintf("the plain client with the final check's reads, at concurrency %d on a burst of %d", best.Concurrency, *flagN))
			runs = create("limit", *flagN)
			complete(runs)
			cpu, start = sampleCPU(), time.Now()
			profiled = profileAPIServer("limit-with-reads")
			Expect(plainClient(ctx, limitClient, best.Concurrency, runs, plain{events: true, reads: true})).To(Succeed())
			res.LimitReads = awaitDeleted("plain client with reads", best.Concurrency, runs, start, cpu)
			res.LimitReads.API = apiShare(profiled, runs)
		}

		for _, w := range ints(*flagWorkers) {
			By(fmt.Sprintf("wrapup with %d workers on a burst of %d", w, *flagN))
			runs := create("wrapup", *flagN)
			complete(runs)
			if *flagCPUProfile != "" {
				f, err := os.Create(fmt.Sprintf("%s-%d", *flagCPUProfile, w))
				Expect(err).NotTo(HaveOccurred())
				Expect(pprof.StartCPUProfile(f)).To(Succeed())
			}
			cpu, start := sampleCPU(), time.Now()
			requests := bench.NewRequestCounter("")
			qc, qs := histogram("workqueue_queue_duration_seconds", "name", "wrapup-appwrapper")
			rc, rs := histogram("controller_runtime_reconcile_time_seconds", "controller", "wrapup-appwrapper")
			profiled := profileAPIServer(fmt.Sprintf("wrapup-%d", w))
			stop, started := startWrapup(ctx, saCfg, watched, w, requests.Wrap)
			r := awaitDeleted("wrapup", w, runs, start, cpu)
			stop()
			r.API = apiShare(profiled, runs)
			r.FirstReconcile, r.TriggerStarted, r.TriggerSynced = started.get()
			r.Requests = requests.Snapshot().Requests
			r.FirstRead, r.FirstRecord, r.FirstRequest = watched.firstSteps(runs, start)
			qc2, qs2 := histogram("workqueue_queue_duration_seconds", "name", "wrapup-appwrapper")
			rc2, rs2 := histogram("controller_runtime_reconcile_time_seconds", "controller", "wrapup-appwrapper")
			if qc2 > qc {
				r.QueueMean = time.Duration((qs2 - qs) / (qc2 - qc) * float64(time.Second))
			}
			if rc2 > rc {
				r.ReconcileMean = time.Duration((rs2 - rs) / (rc2 - rc) * float64(time.Second))
			}
			r.Reconciles = rc2 - rc
			res.Wrapup = append(res.Wrapup, r)
			if *flagCPUProfile != "" {
				pprof.StopCPUProfile()
			}
		}

		for _, raised := range []bool{false, true} {
			if !*flagTTL {
				break
			}
			what, args := ttlName(raised)
			By(fmt.Sprintf("%s on a burst of %d Jobs", what, *flagN))
			fwk.StopKubeControllerManager()
			runs := create("ttl", *flagN)
			complete(runs)
			cpu, start := sampleCPU(), time.Now()
			restartKCM(args...)
			res.TTL = append(res.TTL, awaitDeleted(what, 0, runs, start, cpu))
		}

		By("steady load")
		rng := rand.New(rand.NewPCG(*flagSeed, 0))
		// The steady rows' wrapup starts without the bursts' records.
		settle()
		stop, _ := startWrapup(ctx, saCfg, watched, *flagSteadyW, nil)
		defer stop()
		of := res.Limit.PerSecond
		if *flagSteadyOf > 0 {
			of = *flagSteadyOf
		}
		res.SteadyOf = *flagSteadyOf
		for _, f := range floats(*flagSteady) {
			perSecond := f * of
			for _, v := range []struct {
				ttl, raised bool
			}{{}, {ttl: true}, {ttl: true, raised: true}} {
				if v.ttl && !*flagTTL {
					continue
				}
				name, mode := "wrapup", "wrapup"
				if v.ttl {
					var args []string
					name, args = ttlName(v.raised)
					mode = "ttl"
					// Before the restart, whose garbage collector would
					// list the wrapup row's Jobs again.
					settle()
					restartKCM(args...)
				}
				By(fmt.Sprintf("%s at %.0f%% of the limit (%.1f/s)", name, 100*f, perSecond))
				runs := create(mode, *flagSteadyN)
				res.Steady = append(res.Steady, steady(ctx, c, watched, rng, name, f, perSecond, runs))
			}
		}
		restartKCM()

		By("writing the results")
		out := *flagOut
		if out == "" {
			out = GinkgoT().TempDir()
		}
		name := fmt.Sprintf("throughput-%d.md", *flagN)
		if *flagApart {
			name = fmt.Sprintf("throughput-%d-apart.md", *flagN)
		}
		if *flagImpersonate {
			name = strings.TrimSuffix(name, ".md") + "-impersonate.md"
		}
		path := filepath.Join(out, name)
		f, err := os.Create(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.WriteMarkdown(f)).To(Succeed())
		Expect(f.Close()).To(Succeed())
		fmt.Fprintf(GinkgoWriter, "Results: %s\n", path)

		By("checking that every measurement was taken (never how fast)")
		Expect(res.Limit.PerSecond).To(BeNumerically(">", 0))
		for _, r := range append(append([]Rate{}, res.Wrapup...), res.TTL...) {
			Expect(r.PerSecond).To(BeNumerically(">", 0), r.What)
		}
		for _, r := range res.Wrapup {
			// wrapup's steps were seen: its final check's read, its create
			// of a CompletionRecord, its delete.
			Expect([]time.Duration{r.FirstRead, r.FirstRecord, r.FirstRequest}).To(HaveEach(BeNumerically(">", 0)), "wrapup, %d workers: first read, record, delete", r.Concurrency)
		}
		for _, s := range res.Steady {
			Expect(s.Deleted.Count+s.Undeleted).To(Equal(s.N), "%s at %.0f%%: every completion measured or counted as not deleted", s.What, 100*s.Fraction)
			Expect(s.Deleted.Count).To(BeNumerically(">", 0), "%s at %.0f%%", s.What, 100*s.Fraction)
		}
	})

	It("keeps little per tracked AppWrapper", func() {
		if *flagHeapN <= 0 {
			Skip("-tp.heap-n=0")
		}
		// Not while the Jobs of the measures before are deleted: wrapup's
		// trigger informer would change between the readings.
		settle()
		n := *flagHeapN
		if *flagHeapProfile != "" {
			// Every allocation sampled: the profile accounts for the heap
			// per AppWrapper to the byte, not in 512 KiB samples.
			defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
			runtime.MemProfileRate = 64
		}
		// The heap's AppWrappers and Jobs carry heapLabel, not label: the
		// benchmark's own watch does not hold them, and only this rule
		// selects them.
		rule := util.MakeRule("throughput-heap").TriggerKind("batch", "Job", "").
			AppWrapperLabels(map[string]string{heapLabel: "yes"}).
			OnSuccess(wrapupv1alpha1.ActionDeleteAll, 0).Obj()
		Expect(c.Create(ctx, rule)).To(Succeed())
		phase++
		keys := make([]types.NamespacedName, n+perNS)
		for i := range keys {
			keys[i] = types.NamespacedName{Namespace: fmt.Sprintf("tp-%d-heap-%d", phase, i/perNS), Name: fmt.Sprintf("heap-%d", i)}
			if i%perNS == 0 {
				Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keys[i].Namespace}})).To(Succeed())
			}
		}
		var sample *awv1beta2.AppWrapper
		var sampleJob *batchv1.Job
		var mu sync.Mutex
		createRuns := func(keys []types.NamespacedName) {
			Expect(bench.Parallel(writers, keys, func(key types.NamespacedName) error {
				aw, job, err := createBenchmarkRun(ctx, c, key)
				if err == nil && key.Name == "heap-0" {
					mu.Lock()
					sample, sampleJob = aw, job
					mu.Unlock()
				}
				return err
			})).To(Succeed())
		}
		// start starts wrapup and returns its reconciles so far, for
		// tracked.
		start := func() (stop func(), reconciled float64) {
			reconciled, _ = histogram("controller_runtime_reconcile_time_seconds", "controller", "wrapup-appwrapper")
			stop, _ = startWrapup(ctx, saCfg, watched, gc.DefaultWorkers, nil)
			return stop, reconciled
		}
		// tracked waits until wrapup has reconciled at least want times
		// since it started, its trigger informer has listed, and no
		// reconcile has come for longer than an AppWrapper waiting for its
		// trigger kind waits before it is looked at again.
		tracked := func(reconciled float64, want int, what string) {
			Eventually(func(g Gomega) {
				count, _ := histogram("controller_runtime_reconcile_time_seconds", "controller", "wrapup-appwrapper")
				g.Expect(count-reconciled).To(BeNumerically(">=", want), "reconciles")
				g.Expect(triggersListed()).To(BeTrue(), "the trigger informer has listed")
			}).WithTimeout(10*time.Minute).WithPolling(time.Second).Should(Succeed(), what)
			awaitIdleFor(what, decision.PendingRetry+time.Second)
		}
		// settled is the live heap once a stopped wrapup's goroutines (its
		// informers stop after the manager returns) have let go of it: two
		// readings a second apart within 64 KiB.
		settled := func() uint64 {
			last := bench.ReadHeap().Live
			Eventually(func() bool {
				live := bench.ReadHeap().Live
				d := int64(live) - int64(last)
				last = live
				return d > -64<<10 && d < 64<<10
			}).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue(), "the live heap settles once wrapup stopped")
			return last
		}

		// What an AppWrapper costs wrapup is the growth of its live heap
		// from tracking the first perNS to tracking all n+perNS: what
		// wrapup keeps whatever it tracks (its informers, the rules,
		// Namespaces and CompletionRecords earlier phases left) is in
		// both readings, and the first perNS show that its caches are
		// synced and its trigger informer runs. wrapup is started and
		// stopped once before: what its first start in a process sets up
		// once is not counted as its own, which a restart pays again.
		By(fmt.Sprintf("starting and stopping wrapup once with %d AppWrappers with a Deployment and a trigger Job, Running", perNS))
		createRuns(keys[:perNS])
		stop, reconciled := start()
		tracked(reconciled, perNS, "wrapup idle with the first AppWrappers tracked")
		stop()
		before := settled()
		By("starting wrapup again")
		stop, reconciled = start()
		tracked(reconciled, perNS, "wrapup idle with the first AppWrappers tracked")
		idle := bench.ReadHeap().Live
		writeHeapProfile(*flagHeapProfile, "before")

		By(fmt.Sprintf("creating %d more, and measuring wrapup's live heap once it tracks them all", n))
		createRuns(keys[perNS:])
		tracked(reconciled, n+perNS, "wrapup idle with every AppWrapper tracked")
		after := bench.ReadHeap().Live
		writeHeapProfile(*flagHeapProfile, "tracking")
		stop()

		// After a restart wrapup lists them all at once, as its caches
		// start: measured too, from wrapup stopped to wrapup idle again.
		By("restarting wrapup: it lists them all")
		stopped := settled()
		stop, reconciled = start()
		tracked(reconciled, n+perNS, "wrapup restarted, idle with every AppWrapper tracked")
		restarted := bench.ReadHeap().Live
		writeHeapProfile(*flagHeapProfile, "restarted")
		stop()
		Expect(c.Delete(ctx, rule)).To(Succeed())

		res := HeapResult{N: n, First: perNS, Before: before, Idle: idle, After: after, Stopped: stopped, Restarted: restarted, Floor: floorBytes(sample, sampleJob)}
		out := *flagOut
		if out == "" {
			out = GinkgoT().TempDir()
		}
		path := filepath.Join(out, fmt.Sprintf("heap-%d.md", n))
		Expect(os.WriteFile(path, []byte(res.markdown()), 0o644)).To(Succeed())
		fmt.Fprintf(GinkgoWriter, "Results: %s\n", path)
		Expect(after).To(BeNumerically(">", 0), "the heap was measured")
	})
})

// writeHeapProfile writes the live heap's profile to path-suffix, if a
// path is given.
func writeHeapProfile(path, suffix string) {
	if path == "" {
		return
	}
	f, err := os.Create(path + "-" + suffix)
	Expect(err).NotTo(HaveOccurred())
	Expect(pprof.Lookup("heap").WriteTo(f, 0)).To(Succeed())
	Expect(f.Close()).To(Succeed())
	g, err := os.Create(path + "-goroutines-" + suffix)
	Expect(err).NotTo(HaveOccurred())
	Expect(pprof.Lookup("goroutine").WriteTo(g, 1)).To(Succeed())
	Expect(g.Close()).To(Succeed())
}

// createBenchmarkRun creates an AppWrapper as test/bench does (a
// Deployment and a trigger Job; its label and grace-period annotations)
// and what the AppWrapper controller writes once it runs: its finalizer,
// its status (Running, the conditions, the components' status) and the
// trigger Job, controlled by it. Deployments are not created: wrapup does
// not watch them.
func createBenchmarkRun(ctx context.Context, c client.Client, key types.NamespacedName) (*awv1beta2.AppWrapper, *batchv1.Job, error) {
	job := util.MakeJob(key.Name + "-trigger").Obj()
	aw := util.MakeAppWrapper(key.Name, key.Namespace).Label(heapLabel, "yes").
		Annotation(awv1beta2.AdmissionGracePeriodDurationAnnotation, "2h").
		Annotation(awv1beta2.WarmupGracePeriodDurationAnnotation, "2h").
		Component(util.MakeDeployment(key.Name+"-server", 1), nil).Component(job, nil).Obj()
	aw.Finalizers = []string{"workload.codeflare.dev/finalizer"}
	if err := c.Create(ctx, aw); err != nil {
		return nil, nil, err
	}
	now := metav1.Now()
	cond := func(t awv1beta2.AppWrapperCondition, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: string(t), Status: status, Reason: reason, Message: reason, LastTransitionTime: now}
	}
	deployed := []metav1.Condition{{Type: "ResourcesDeployed", Status: metav1.ConditionTrue, Reason: "ComponentCreatedSuccessfully", LastTransitionTime: now}}
	aw.Status = awv1beta2.AppWrapperStatus{Phase: awv1beta2.AppWrapperRunning,
		Conditions: []metav1.Condition{cond(awv1beta2.QuotaReserved, metav1.ConditionTrue, "Resuming"), cond(awv1beta2.ResourcesDeployed, metav1.ConditionTrue, "Resuming"),
			cond(awv1beta2.PodsReady, metav1.ConditionTrue, "PodsReady"), cond(awv1beta2.Unhealthy, metav1.ConditionFalse, "Resuming")},
		ComponentStatus: []awv1beta2.AppWrapperComponentStatus{
			{Name: key.Name + "-server", Kind: "Deployment", APIVersion: "apps/v1", PodSets: []awv1beta2.AppWrapperPodSet{{Replicas: ptr.To[int32](1), Path: "template.spec.template"}}, Conditions: deployed},
			{Name: job.Name, Kind: "Job", APIVersion: "batch/v1", PodSets: []awv1beta2.AppWrapperPodSet{{Replicas: ptr.To[int32](1), Path: "template.spec.template"}}, Conditions: deployed}}}
	if err := c.Status().Update(ctx, aw); err != nil {
		return nil, nil, err
	}
	job.Namespace = key.Namespace
	job.Labels = map[string]string{awv1beta2.AppWrapperLabel: aw.Name, heapLabel: "yes"}
	job.Annotations = map[string]string{"workload.codeflare.dev.appwrapper/componentIndex": "1"}
	job.OwnerReferences = []metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: aw.Name, UID: aw.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	if err := c.Create(ctx, job); err != nil {
		return nil, nil, err
	}
	job.Status = batchv1.JobStatus{Active: 1, Ready: ptr.To[int32](1), StartTime: &now}
	return aw, job, c.Status().Update(ctx, job)
}

// floorBytes estimates what wrapup must keep of a run to decide on it: of
// the AppWrapper its key, UID (16 bytes) and resourceVersion (8), labels
// and annotations (a selector or the decision may read any), its
// components' kinds and names, its phase and the two conditions decisions
// read; of the trigger its name, UID, owner and the status its rule reads.
// Bytes of content only: any Go structure adds headers and map buckets.
func floorBytes(aw *awv1beta2.AppWrapper, job *batchv1.Job) int {
	n := len(aw.Namespace) + len(aw.Name) + 16 + 8
	for k, v := range aw.Labels {
		n += len(k) + len(v)
	}
	for k, v := range aw.Annotations {
		n += len(k) + len(v)
	}
	for _, c := range aw.Spec.Components {
		var id struct {
			APIVersion, Kind string
			Metadata         struct{ Name string }
		}
		_ = json.Unmarshal(c.Template.Raw, &id)
		n += len(id.APIVersion) + len(id.Kind) + len(id.Metadata.Name)
	}
	n += len(aw.Status.Phase)
	for _, c := range aw.Status.Conditions {
		if c.Type == string(awv1beta2.Unhealthy) || c.Type == string(awv1beta2.DeletingResources) {
			n += len(c.Type) + len(c.Status) + len(c.Reason) + len(c.Message) + 8
		}
	}
	n += len(job.Name) + 16 + 8 + 16 // the trigger's name, UID, resourceVersion, its owner's UID
	status, _ := json.Marshal(job.Status)
	return n + len(status)
}

// HeapResult is wrapup's live heap: Before it starts again (started once
// with the First AppWrappers and stopped), Idle once it tracks those,
// After once it tracks N more; then Stopped, and Restarted once it has
// listed and tracks all First+N.
type HeapResult struct {
	N, First                                int
	Before, Idle, After, Stopped, Restarted uint64
	Floor                                   int
}

func (h HeapResult) markdown() string {
	per := (float64(h.After) - float64(h.Idle)) / float64(h.N)
	own := float64(h.Idle) - float64(h.Before) - per*float64(h.First)
	total := h.N + h.First
	listed := (float64(h.Restarted) - float64(h.Stopped) - own) / float64(total)
	mib := func(v uint64) float64 { return float64(v) / (1 << 20) }
	var b strings.Builder
	fmt.Fprintf(&b, "# wrapup's live heap per tracked AppWrapper, N=%d\n\n", h.N)
	fmt.Fprintf(&b, "Run %s; reproduce with `make bench-throughput` (`-tp.heap-n=%d`). Machine: %d cores, %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), h.N, runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(&b, "AppWrappers as test/bench makes them (a Deployment and a trigger Job; a label, two annotations, the AppWrapper controller's finalizer, status and conditions), each with its Job Running, all selected by one rule. wrapup runs in the benchmark's process, which does nothing else then (no AppWrapper controller: the benchmark writes what it would; the benchmark's own watch does not select these). Heaps are HeapAlloc after two collections.\n\n")
	fmt.Fprintf(&b, "- **As they come**: wrapup is started with %d of them and stopped once (what the first start in a process sets up once is then in every reading), started again and, once it tracks them, its trigger informer has listed and it is idle, %d more are created; an AppWrapper's share is the growth of the live heap between wrapup idle with the first %d and wrapup idle with all of them, over the %d: the AppWrapper and its trigger in wrapup's caches, the informers' stores, and what its controllers keep per AppWrapper. What wrapup keeps whatever it tracks (its informers, the rules, and the Namespaces and CompletionRecords the benchmark's earlier phases left) is in both readings; wrapup's own is the growth from wrapup stopped to idle with the first %d, less their share.\n", h.First, h.N, h.First, h.N, h.First)
	fmt.Fprintf(&b, "- **After a restart**: wrapup is stopped and started again, and lists all %d at once; an AppWrapper's share is the growth from wrapup stopped to wrapup idle again, less wrapup's own, over the %d.\n\n", total, total)
	fmt.Fprintf(&b, "| measure | value |\n|---|---:|\n")
	fmt.Fprintf(&b, "| live heap with wrapup stopped / idle with %d / with %d (MiB) | %.1f / %.1f / %.1f |\n", h.First, total, mib(h.Before), mib(h.Idle), mib(h.After))
	fmt.Fprintf(&b, "| wrapup's own, whatever it tracks (MiB) | %.1f |\n", own/(1<<20))
	fmt.Fprintf(&b, "| per tracked AppWrapper, with its trigger, as they come (KiB) | %.2f |\n", per/1024)
	fmt.Fprintf(&b, "| live heap with wrapup stopped / restarted and idle with %d (MiB) | %.1f / %.1f |\n", total, mib(h.Stopped), mib(h.Restarted))
	fmt.Fprintf(&b, "| per tracked AppWrapper, with its trigger, after a restart (KiB) | %.2f |\n", listed/1024)
	fmt.Fprintf(&b, "| floor: the bytes wrapup must keep per AppWrapper and trigger, content only (B) | ≈ %d |\n\n", h.Floor)
	worst := max(per, listed)
	verdict := "**not met**"
	if worst <= 2048 {
		verdict = "met"
	}
	fmt.Fprintf(&b, "| goal | measured (the larger of the two) | |\n|---|---|---|\n| ≤ 2 KiB per tracked AppWrapper at 10,000 | %.2f KiB at %d | %s |\n", worst/1024, h.N, verdict)
	return b.String()
}

func ttlName(raised bool) (string, []string) {
	if !raised {
		return "TTL-after-finished, kube-controller-manager's client limits (20 QPS, burst 30)", nil
	}
	q := strconv.Itoa(*flagTTLQPS)
	return fmt.Sprintf("TTL-after-finished, client limits raised (%s QPS, burst %s)", q, q),
		[]string{"--kube-api-qps=" + q, "--kube-api-burst=" + q}
}

// createRunning creates an AppWrapper with one Job component, then does
// what the AppWrapper controller does once it has deployed it: the status
// Running with the component's status, and the Job, labelled with the
// AppWrapper's name and controlled by it.
func createRunning(ctx context.Context, c client.Client, key types.NamespacedName, mode string) (*awv1beta2.AppWrapper, error) {
	job := util.MakeJob(key.Name + "-trigger").Obj()
	aw := util.MakeAppWrapper(key.Name, key.Namespace).Label(label, mode).Component(job, nil).Obj()
	if err := c.Create(ctx, aw); err != nil {
		return nil, err
	}
	aw.Status = awv1beta2.AppWrapperStatus{Phase: awv1beta2.AppWrapperRunning, ComponentStatus: []awv1beta2.AppWrapperComponentStatus{{
		Name: job.Name, Kind: "Job", APIVersion: "batch/v1", PodSets: []awv1beta2.AppWrapperPodSet{}}}}
	if err := c.Status().Update(ctx, aw); err != nil {
		return nil, err
	}
	job.Namespace = key.Namespace
	job.Labels = map[string]string{awv1beta2.AppWrapperLabel: aw.Name, label: mode}
	job.OwnerReferences = []metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: aw.Name, UID: aw.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	return aw, c.Create(ctx, job)
}

// completeJob writes the run's Job Complete, as the Job controller would.
func completeJob(ctx context.Context, c client.Client, r *run) error {
	now := metav1.Now()
	start := metav1.NewTime(now.Add(-time.Second))
	cond := func(t batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: "CompletionsReached",
			Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now}
	}
	patch, err := json.Marshal(map[string]any{"status": batchv1.JobStatus{StartTime: &start, CompletionTime: &now, Succeeded: 1, Ready: ptr.To[int32](0),
		Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet), cond(batchv1.JobComplete)}}})
	if err != nil {
		return err
	}
	key := r.job()
	r.sent = time.Now()
	return c.Status().Patch(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, client.RawPatch(types.MergePatchType, patch))
}

// plain is what the plain client sends besides wrapup's writes.
type plain struct {
	// events: wrapup's two Events per completion (events.k8s.io/v1, to
	// the same API server and etcd: they share the writes' path), after
	// the CompletionRecord's create and after the delete.
	events bool
	// reads: the reads of wrapup's final check, before the writes: the
	// run's CompletionRecord (none yet), then the rules and the live
	// trigger, sent together.
	reads bool
}

// plainClient sends, for each run, exactly wrapup's writes per completion
// and in its order: the create of the run's CompletionRecord (its
// memory: the outcome recorded), and the delete with UID and
// resourceVersion preconditions, Background (an AppWrapper deleted at
// once gets no mirror of its outcome on its metadata), and what with
// adds; conc runs at once. No decision, no caches.
func plainClient(ctx context.Context, c client.Client, conc int, runs []*run, with plain) error {
	return bench.Parallel(conc, runs, func(r *run) error {
		aw := r.aw
		if with.reads {
			// As wrapup's final check: the AppWrapper's GET and the
			// record's, then the trigger's GET sent with the rules' LIST.
			if err := c.Get(ctx, r.key, &awv1beta2.AppWrapper{}); err != nil {
				return fmt.Errorf("reading %s: %w", r.key, err)
			}
			err := c.Get(ctx, types.NamespacedName{Namespace: aw.Namespace, Name: wrapupv1alpha1.RecordName(aw.Name, aw.UID)}, &wrapupv1alpha1.CompletionRecord{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("reading the record of %s: %w", r.key, err)
			}
			listed := make(chan error, 1)
			go func() { listed <- c.List(ctx, &wrapupv1alpha1.CompletionRuleList{}) }()
			job := r.job()
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
			err = c.Get(ctx, job, u)
			if lerr := <-listed; lerr != nil {
				return fmt.Errorf("listing rules: %w", lerr)
			}
			if err != nil {
				return fmt.Errorf("reading %s: %w", job, err)
			}
		}
		at := time.Now()
		rec := &decision.Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "throughput", RuleUID: plainRuleUID, FinishedAt: at,
			Message: "Job " + aw.Name + "-trigger succeeded", Policy: wrapupv1alpha1.TriggerPolicyOne,
			Triggers: []decision.RecordedTrigger{{Index: 0, UID: "9d2f0b1e-0000-4000-8000-000000000000"}},
			Stamp: decision.Stamp{Rule: "throughput", RuleUID: plainRuleUID, Since: at, DueAt: at,
				Action: wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](0)}}}
		cr := record(aw, rec)
		if err := c.Create(ctx, cr); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("recording %s: %w", r.key, err)
		}
		if with.events {
			if err := c.Create(ctx, event(aw, wrapupv1alpha1.ReasonTriggerSucceeded, "RecordOutcome", rec.Message)); err != nil {
				return fmt.Errorf("event for %s: %w", r.key, err)
			}
		}
		uid, rv := aw.UID, aw.ResourceVersion
		if err := c.Delete(ctx, aw, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			return fmt.Errorf("deleting %s: %w", r.key, err)
		}
		if with.events {
			if err := c.Create(ctx, event(aw, wrapupv1alpha1.ReasonDeleted, "Delete", "rule throughput: trigger succeeded; AppWrapper deleted with its components")); err != nil {
				return fmt.Errorf("event for %s: %w", r.key, err)
			}
		}
		return nil
	})
}

// plainRuleUID is the rule UID the plain client's records name.
const plainRuleUID = "5e1c7a9b-0000-4000-8000-000000000000"

// event is an Event as wrapup's recorder writes it about aw.
func event(aw *awv1beta2.AppWrapper, reason, action, note string) *eventsv1.Event {
	now := time.Now()
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: aw.Namespace, Name: fmt.Sprintf("%s.%x", aw.Name, now.UnixNano())},
		EventTime:  metav1.NewMicroTime(now), ReportingController: "wrapup", ReportingInstance: "wrapup-limit",
		Action: action, Reason: reason, Note: note, Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Namespace: aw.Namespace, Name: aw.Name,
			UID: aw.UID, ResourceVersion: aw.ResourceVersion},
	}
}

// record is a CompletionRecord of the size wrapup writes for a one-Job
// run (decision.CompletionRecordOf) deleted at once, with history on.
func record(aw *awv1beta2.AppWrapper, rec *decision.Record) *wrapupv1alpha1.CompletionRecord {
	t := rec.Triggers[0]
	return &wrapupv1alpha1.CompletionRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: aw.Namespace, Name: wrapupv1alpha1.RecordName(aw.Name, aw.UID),
			Labels: map[string]string{label: "limit", wrapupv1alpha1.OutcomeLabel: string(rec.Outcome),
				wrapupv1alpha1.RecordAppWrapperLabel: aw.Name, wrapupv1alpha1.RecordRuleLabel: rec.Rule}},
		AppWrapper: wrapupv1alpha1.RecordedAppWrapper{Name: aw.Name, UID: aw.UID, Labels: aw.Labels},
		Rule:       rec.Rule, RuleUID: rec.RuleUID, Policy: rec.Policy, Outcome: rec.Outcome, Message: rec.Message, FinishedAt: metav1.NewMicroTime(rec.FinishedAt),
		Action: wrapupv1alpha1.RecordedAction{Rule: rec.Stamp.Rule, RuleUID: rec.Stamp.RuleUID, Action: rec.Stamp.Action.Action,
			TTLSecondsAfterFinished: rec.Stamp.Action.TTLSecondsAfterFinished, Since: ptr.To(metav1.NewMicroTime(rec.Stamp.Since)), DeleteAfter: ptr.To(metav1.NewTime(rec.Stamp.DueAt))},
		Triggers: []wrapupv1alpha1.RecordedTrigger{{ComponentIndex: int32(t.Index), APIVersion: "batch/v1", Kind: "Job", Name: aw.Name + "-trigger", UID: t.UID,
			State: "Succeeded", Decided: true, Conditions: []wrapupv1alpha1.RecordedCondition{
				{Type: "SuccessCriteriaMet", Status: "True", Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"},
				{Type: "Complete", Status: "True", Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"}}}},
		Retention: wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: wrapupv1alpha1.DefaultHistoryTTLSeconds, LimitPerNamespace: wrapupv1alpha1.DefaultHistoryLimit},
	}
}

// startWrapup runs wrapup as cmd/manager does (its cache options, the
// controller's ServiceAccount) with workers workers, on a connection of
// its own whose deletes are recorded.
func startWrapup(ctx context.Context, saCfg *rest.Config, s *seen, workers int, count func(http.RoundTripper) http.RoundTripper) (stop func(), started *startTimes) {
	cfg := gc.RESTConfig(bench.OwnConnection(saCfg, fmt.Sprintf("wrapup-%d", workers)))
	cfg.WrapTransport = s.wrap
	if count != nil {
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return count(s.wrap(rt)) }
	}
	mgr := framework.NewBareManager(cfg, func(o *ctrl.Options) { o.Cache = gc.CacheOptions() })
	Expect(gc.Setup(mgr, gc.Options{Workers: workers})).To(Succeed())
	started = observeStart(ctx)
	return framework.RunManager(ctx, mgr), started
}

// startTimes are the times from wrapup's start to its AppWrapper
// controller's first reconcile (its AppWrapper cache listed) and to its
// trigger informer's start and first list (the rule reconciled, the
// triggers listed); zero until seen.
type startTimes struct {
	mu                                            sync.Mutex
	firstReconcile, triggerStarted, triggerSynced time.Duration
}

func (t *startTimes) get() (firstReconcile, triggerStarted, triggerSynced time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.firstReconcile, t.triggerStarted, t.triggerSynced
}

// observeStart watches, from now, for mgr's AppWrapper controller's first
// reconcile and its batch/Job informer's start and first list
// (wrapup_trigger_informer_synced: no series until the informer starts, 0
// until it has listed, then 1; a stopped wrapup's series are deleted).
func observeStart(ctx context.Context) *startTimes {
	t := &startTimes{}
	start := time.Now()
	before, _ := histogram("controller_runtime_reconcile_time_seconds", "controller", "wrapup-appwrapper")
	go func() {
		defer GinkgoRecover()
		// Every 100 ms: a gather of the registry costs this process's CPU,
		// which the burst counts as wrapup's.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		set := func(d *time.Duration, ok bool) {
			if ok && *d == 0 {
				*d = time.Since(start)
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			fams, err := crmetrics.Registry.Gather()
			Expect(err).NotTo(HaveOccurred())
			reconciled, _ := histogramIn(fams, "controller_runtime_reconcile_time_seconds", "controller", "wrapup-appwrapper")
			informer := len(series(fams, "wrapup_trigger_informer_synced", "kind", "Job.batch")) > 0
			synced := triggersListedIn(fams)
			t.mu.Lock()
			set(&t.firstReconcile, reconciled > before)
			set(&t.triggerStarted, informer)
			set(&t.triggerSynced, synced)
			done := t.firstReconcile > 0 && t.triggerSynced > 0
			t.mu.Unlock()
			if done {
				return
			}
		}
	}()
	return t
}

// rateOf is a burst's rate from the deletions' times.
func rateOf(what string, conc int, times []time.Time, start time.Time) Rate {
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	r := Rate{What: what, Concurrency: conc, N: len(times)}
	if len(times) > 1 {
		r.PerSecond = float64(len(times)-1) / times[len(times)-1].Sub(times[0]).Seconds()
		r.FirstAfter = times[0].Sub(start)
	}
	return r
}

// steady writes the runs' Jobs Complete at the times of a seeded Poisson
// process of rate perSecond (its arrival window at most -tp.steady-max),
// and measures each completion's time to its deletion.
func steady(ctx context.Context, c client.Client, s *seen, rng *rand.Rand, what string, fraction, perSecond float64, runs []*run) Steady {
	at := make([]time.Duration, len(runs))
	var t float64
	for i := range at {
		t += rng.ExpFloat64() / perSecond
		at[i] = time.Duration(t * float64(time.Second))
	}
	if last := at[len(at)-1]; last > *flagSteadyMax {
		n := sort.Search(len(at), func(i int) bool { return at[i] > *flagSteadyMax })
		runs, at = runs[:n], at[:n]
	}
	res := Steady{Fraction: fraction, PerSecond: perSecond, What: what, N: len(runs), Window: at[len(at)-1]}
	// wrapup first reconciles the AppWrappers just created (their
	// creation, status and Job): the phase starts once it is idle.
	awaitWrapupIdle("wrapup idle before the phase")
	qc, qs := histogram("workqueue_queue_duration_seconds", "name", "wrapup-appwrapper")
	rc, rs := histogram("controller_runtime_reconcile_time_seconds", "controller", "wrapup-appwrapper")
	fc := counter("wrapup_final_checks_total")
	_, _, readsFrom := s.readTimes([2]int{})
	lag := make([]time.Duration, len(runs))
	ch := make(chan int, len(runs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				if err := completeJob(ctx, c, runs[i]); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	start := time.Now()
	for i := range runs {
		// The load's schedule: the next completion is due at at[i].
		select {
		case <-time.After(time.Until(start.Add(at[i]))):
		case <-ctx.Done():
			return res
		}
		lag[i] = time.Since(start.Add(at[i]))
		ch <- i
	}
	close(ch)
	wg.Wait()
	Expect(firstErr).NotTo(HaveOccurred())
	var deleted, request []time.Duration
	// Up to -tp.drain for the deletions; what is not deleted by then is
	// counted as such, not a failure.
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, *flagDrain, true, func(context.Context) (bool, error) {
		deleted, request = deleted[:0], request[:0]
		for _, r := range runs {
			if t, ok := s.deletedAt(r.key); ok {
				deleted = append(deleted, t.Sub(r.sent))
			}
			if t, ok := s.requestAt(r.key); ok && r.aw != nil {
				request = append(request, t.Sub(r.sent))
			}
		}
		return len(deleted) == len(runs), nil
	})
	var toRead, toRecord, toDelete []time.Duration
	for _, r := range runs {
		if read, record, del, ok := s.steps(r.key); ok && r.aw != nil {
			toRead, toRecord, toDelete = append(toRead, read.Sub(r.sent)), append(toRecord, record.Sub(read)), append(toDelete, del.Sub(record))
		}
	}
	res.ToRead, res.ToRecord, res.ToDelete = bench.Summarize(toRead), bench.Summarize(toRecord), bench.Summarize(toDelete)
	rules, trigger, _ := s.readTimes(readsFrom)
	res.RulesList, res.TriggerGet = bench.Summarize(rules), bench.Summarize(trigger)
	qc2, qs2 := histogram("workqueue_queue_duration_seconds", "name", "wrapup-appwrapper")
	rc2, rs2 := histogram("controller_runtime_reconcile_time_seconds", "controller", "wrapup-appwrapper")
	if qc2 > qc {
		res.QueueMean = time.Duration((qs2 - qs) / (qc2 - qc) * float64(time.Second))
	}
	if rc2 > rc {
		res.ReconcileMean = time.Duration((rs2 - rs) / (rc2 - rc) * float64(time.Second))
	}
	res.Reconciles = rc2 - rc
	res.FinalChecks = counter("wrapup_final_checks_total") - fc
	res.Undeleted = len(runs) - len(deleted)
	res.Deleted, res.Request, res.Lag = bench.Summarize(deleted), bench.Summarize(request), bench.Summarize(lag)
	return res
}

// Results are what the benchmark measured.
type Results struct {
	Machine       bench.Machine
	Version       map[string]string
	N, Sweep      int
	SteadyWorkers int
	// SteadyOf is what the steady load's fractions are of, when not the
	// limit (0).
	SteadyOf float64
	Seed     uint64
	// Apart says the control plane and the benchmark ran on CPUs of
	// their own (-tp.apart).
	Apart bool
	// Impersonate: wrapup and the plain client impersonated their
	// ServiceAccount with the admin's certificate (-tp.impersonate).
	Impersonate bool
	Sweep_      []Rate
	Limit       Rate
	// LimitNoEvents is the plain client without wrapup's Events,
	// LimitReads with the final check's reads.
	LimitNoEvents, LimitReads Rate
	Wrapup, TTL               []Rate
	Steady                    []Steady
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

// ms2 is d in milliseconds to two decimals.
func ms2(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

// writeAPIShares writes the table of kube-apiserver's CPU per completion
// by part, for the bursts profiled.
func (r *Results) writeAPIShares(p func(string, ...any)) {
	type col struct {
		name string
		a    *APIShare
	}
	var cols []col
	add := func(name string, a *APIShare) {
		if a != nil {
			cols = append(cols, col{name, a})
		}
	}
	add("the limit", r.Limit.API)
	add("without the Events", r.LimitNoEvents.API)
	add("with the final check's reads", r.LimitReads.API)
	for _, w := range r.Wrapup {
		add(fmt.Sprintf("wrapup, %d workers", w.Concurrency), w.API)
	}
	if len(cols) == 0 {
		return
	}
	p("\n### kube-apiserver's CPU per completion, by part of its work\n\nFrom a CPU profile of kube-apiserver (`-tp.apiserver-profile`) over 5 s of the limit's bursts and of wrapup's, from 0.5 s after the first AppWrapper deletion (so not wrapup's start), divided by the completions the benchmark's watch saw in those 5 s. ")
	p("A part is the samples whose stack holds its function (k8s.io/apiserver pkg/registry/generic/registry's Store methods, the watch server, the etcd watch's decoding); the handlers' parts include the garbage collector's assists that their allocations pay for, background GC is the collector's own workers; the parts do not add up to the total (TLS, authentication, authorization, API Priority and Fairness and the rest of each request are in the total only). ")
	p("Every column includes kube-controller-manager's garbage collector deleting each deleted AppWrapper's Job (a GET and a DELETE, at its 20 QPS): its share per completion is larger in slower columns, and all of it when the profile ran on past the burst's last deletion (the last row). One sample is 10 ms of CPU, about 0.02 ms per completion here.\n\n")
	p("| ms per completion |")
	for _, c := range cols {
		p(" %s |", c.name)
	}
	p("\n|---|")
	for range cols {
		p("---:|")
	}
	p("\n| **total** |")
	for _, c := range cols {
		if c.a.Completions == 0 {
			p(" – |")
			continue
		}
		p(" **%s** |", ms2(c.a.Total))
	}
	p("\n")
	for i, part := range bench.APIParts {
		name, seen := part.Name, false
		for _, c := range cols {
			seen = seen || (c.a.Completions > 0 && c.a.Parts[i] > 0)
		}
		if !seen {
			// A function renamed in this kube-apiserver's version.
			name += " (in no profile: is " + part.Funcs[0] + " still its name?)"
		}
		p("| %s |", name)
		for _, c := range cols {
			if c.a.Completions == 0 {
				p(" – |")
				continue
			}
			p(" %s |", ms2(c.a.Parts[i]))
		}
		p("\n")
	}
	p("| completions in the profile |")
	for _, c := range cols {
		p(" %d |", c.a.Completions)
	}
	p("\n| profile past the last deletion (s) |")
	for _, c := range cols {
		p(" %.1f |", c.a.Past.Seconds())
	}
	p("\n")
}

// WriteMarkdown writes the report.
func (r *Results) WriteMarkdown(f *os.File) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# wrapup's throughput against the API server's, N=%d\n\n", r.N)
	p("Run %s; reproduce with `make bench-throughput` (flags `%s`).\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), tpFlags())
	share := "The API server, etcd, kube-controller-manager, wrapup and the benchmark share it."
	if r.Apart {
		share = "CPUs apart (`-tp.apart`): kube-apiserver, etcd and kube-controller-manager share CPU 0, the benchmark's process (wrapup, the plain client, the load and the benchmark's watch) has the others, as when wrapup runs on a node of its own; other processes of the machine are not kept off either."
	}
	p("- **Machine**: %d cores (%s), %.1f GiB memory, Linux %s; load average %s at the end. %s\n",
		r.Machine.Cores, r.Machine.CPUModel, float64(r.Machine.MemTotal)/(1<<30), r.Machine.Kernel, bench.LoadAvg(), share)
	p("- **Versions**: %s.\n", versions(r.Version))
	auth := "as wrapup does, with a token the API server issued for it (TokenRequest), as its pod has"
	if r.Impersonate {
		auth = "as wrapup does, impersonating it with the admin's client certificate (`-tp.impersonate`): each request's certificate is verified and its impersonation authorized, which a pod's token does not cost"
	}
	p("- **Workload**: AppWrappers with one Job component, Running, written by the benchmark as the AppWrapper controller writes them (the controller itself is not running: its writes would load the API server during the measure); one CompletionRule (trigger batch/Job, onSuccess DeleteAll, TTL 0, history on); %d per namespace. Completions are the Job's status write (Complete), as the Job controller's. Before each phase, the benchmark deletes every CompletionRecord earlier phases wrote (the plain client's and wrapup's), and every one of its Jobs that earlier phases left (those of deleted AppWrappers, which kube-controller-manager's garbage collector deletes at its client rate; a TTL baseline's not deleted yet), so that no phase is measured while kube-controller-manager still deletes an earlier one's (it still looks up those it had queued, a GET each). The steady rows of wrapup run with kube-controller-manager as the TTL baselines before them left it: its client limits raised, when they run.\n", perNS)
	p("- **Rate** of a burst: every run's trigger is complete before its controller starts (wrapup, the TTL controller) or before the plain client's first write; completions/s is (deletions − 1) ÷ (last deletion − first deletion), deletions as the benchmark's watch sees them (the object gone, or with a deletionTimestamp).\n")
	p("- **The limit** is a plain client (no decision, no caches, no reads) sending exactly wrapup's writes per completion, in its order: the create of the run's CompletionRecord (the outcome recorded), its Event, the delete with UID and resourceVersion preconditions, its Event (an AppWrapper deleted at once gets no mirror of its outcome on its metadata). The Events go to the same API server and etcd as the writes (they share the path), so they are part of the limit; the table also shows the plain client without them. It runs as wrapup's ServiceAccount (the same API Priority and Fairness flow), %s, unthrottled on the client side as wrapup is by default; swept over its concurrency on %d AppWrappers each, then run at the best on the burst.\n\n", auth, r.Sweep)

	p("## The limit's sweep\n\n| concurrency | AppWrappers | completions/s |\n|---:|---:|---:|\n")
	for _, s := range r.Sweep_ {
		p("| %d | %d | %.1f |\n", s.Concurrency, s.N, s.PerSecond)
	}
	p("\n## Burst of %d\n\nCPU is per completion, over the burst: this process's (wrapup's, or the plain client's; for the TTL controller, only the benchmark's watch), kube-apiserver's and etcd's.\n\n", r.N)
	p("| controller | completions/s | ÷ the limit | start → first deletion (ms) | CPU ms: own / kube-apiserver / etcd |\n|---|---:|---:|---:|---|\n")
	row := func(what string, x Rate) {
		p("| %s | %.1f | %.2f | %s | %s / %s / %s |\n", what, x.PerSecond, x.PerSecond/r.Limit.PerSecond, ms(x.FirstAfter), ms(x.CPUSelf), ms(x.CPUAPIServer), ms(x.CPUEtcd))
	}
	row(fmt.Sprintf("the limit: plain client, wrapup's writes and Events, concurrency %d", r.Limit.Concurrency), r.Limit)
	if r.LimitNoEvents.PerSecond > 0 {
		row(fmt.Sprintf("plain client, wrapup's writes without the Events, concurrency %d", r.LimitNoEvents.Concurrency), r.LimitNoEvents)
	}
	if r.LimitReads.PerSecond > 0 {
		row(fmt.Sprintf("plain client, writes, Events and the final check's reads (the record, the rules, the live trigger), concurrency %d", r.LimitReads.Concurrency), r.LimitReads)
	}
	for _, w := range r.Wrapup {
		row(fmt.Sprintf("wrapup, %d workers", w.Concurrency), w)
	}
	for _, t := range r.TTL {
		row(t.What, t)
	}
	r.writeAPIShares(p)
	if len(r.Wrapup) > 0 {
		p("\n### wrapup's start and its queue in the burst\n\nFrom wrapup's start (ms) to its AppWrapper controller's first reconcile (its AppWrapper cache listed, and the trigger kinds its rules name), its trigger informer's start (the rule reconciled) and first list (the triggers listed), its first final check's read of a trigger (sent with the rules' LIST), its first create of a CompletionRecord, its first delete request and the first deletion the benchmark's watch saw; and its AppWrapper controller's mean wait in the queue, mean reconcile and reconciles per completion over the burst (every AppWrapper is queued at the start, when its cache lists it):\n\n| workers | → first reconcile | → trigger informer started | → triggers listed | → first read | → first record | → first delete request | → first deletion | queue wait (mean) | reconcile (mean) | reconciles per completion |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, w := range r.Wrapup {
			p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f |\n", w.Concurrency, ms(w.FirstReconcile), ms(w.TriggerStarted), ms(w.TriggerSynced), ms(w.FirstRead), ms(w.FirstRecord), ms(w.FirstRequest), ms(w.FirstAfter), ms(w.QueueMean), ms(w.ReconcileMean), w.Reconciles/float64(r.N))
		}
		p("\n### wrapup's requests per completion in the burst\n\nThe plain client sends 1 create of a CompletionRecord, 1 delete and 2 creates of Events per completion. wrapup's requests over the burst (its start included: the lists and watches of its caches) ÷ %d:\n\n| verb | resource |", r.N)
		keys := map[bench.RequestKey]bool{}
		for _, w := range r.Wrapup {
			p(" %d workers |", w.Concurrency)
			for k := range w.Requests {
				keys[k] = true
			}
		}
		p("\n|---|---|%s\n", strings.Repeat("---:|", len(r.Wrapup)))
		sorted := make([]bench.RequestKey, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Slice(sorted, func(i, j int) bool {
			if sorted[i].IsWrite() != sorted[j].IsWrite() {
				return sorted[i].IsWrite()
			}
			return sorted[i].Resource+sorted[i].Verb < sorted[j].Resource+sorted[j].Verb
		})
		for _, k := range sorted {
			p("| %s | %s |", k.Verb, k.Resource)
			for _, w := range r.Wrapup {
				p(" %.2f |", float64(w.Requests[k])/float64(r.N))
			}
			p("\n")
		}
	}
	of := "the limit"
	if r.SteadyOf > 0 {
		of = fmt.Sprintf("%.1f completions/s (-tp.steady-of), not of the limit measured in this run", r.SteadyOf)
	}
	p("\n## Steady load\n\nCompletions arrive as a seeded Poisson process (seed %d) at a fraction of %s; wrapup runs with %d workers. Latency is from the trigger's status write to its deletion as the watch sees it (for wrapup also to its delete request).\n\n", r.Seed, of, r.SteadyWorkers)
	p("| rate | controller | completions | window (s) | p50 | p99 | max | not deleted | → delete request p50 / p99 / max | status write lag p99 |\n|---|---|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, s := range r.Steady {
		req := ""
		if s.Request.Count > 0 {
			req = ms(s.Request.P50) + " / " + ms(s.Request.P99) + " / " + ms(s.Request.Max)
		}
		p("| %.0f%% (%.1f/s) | %s | %d | %.1f | %s | %s | %s | %d | %s | %s |\n", 100*s.Fraction, s.PerSecond, s.What, s.N, s.Window.Seconds(),
			ms(s.Deleted.P50), ms(s.Deleted.P99), ms(s.Deleted.Max), s.Undeleted, req, ms(s.Lag.P99))
	}
	p("\nwrapup's steps (p50 / p99, ms): status write → its read of the live trigger, sent with the rules' LIST as its final check starts (watch event, queue, decision on the caches) → its create of the CompletionRecord (the reads answered) → its delete request; and its AppWrapper controller's mean wait in the queue and mean reconcile, with reconciles and final checks (decisions on what the API server says) per completion:\n\n| rate | → read | → record | → delete request | queue wait (mean) | reconcile (mean) | reconciles per completion | final checks per completion | the final check's LIST of the rules, round trip | its GET of the trigger, round trip |\n|---|---|---|---|---:|---:|---:|---:|---|---|\n")
	for _, s := range r.Steady {
		if s.ToRead.Count > 0 {
			p("| %.0f%% | %s / %s | %s / %s | %s / %s | %s | %s | %.2f | %.2f | %s / %s | %s / %s |\n", 100*s.Fraction, ms(s.ToRead.P50), ms(s.ToRead.P99), ms(s.ToRecord.P50), ms(s.ToRecord.P99), ms(s.ToDelete.P50), ms(s.ToDelete.P99),
				ms(s.QueueMean), ms(s.ReconcileMean), s.Reconciles/float64(s.N), s.FinalChecks/float64(s.N), ms(s.RulesList.P50), ms(s.RulesList.P99), ms(s.TriggerGet.P50), ms(s.TriggerGet.P99))
		}
	}
	p("\n## Goals (measured, not asserted)\n\n| goal | measured | |\n|---|---|---|\n")
	for _, w := range r.Wrapup {
		ratio := w.PerSecond / r.Limit.PerSecond
		p("| wrapup ≥ 0.9 × the limit (%d workers) | %.2f × | %s |\n", w.Concurrency, ratio, verdict(ratio >= 0.9))
	}
	for _, s := range r.Steady {
		if s.What == "wrapup" && math.Abs(s.Fraction-0.5) < 1e-9 {
			p("| p99 ≤ 100 ms at 50%% of the limit | p99 %s ms (to the delete request: %s ms) | %s |\n", ms(s.Deleted.P99), ms(s.Request.P99), verdict(s.Undeleted == 0 && s.Deleted.P99 <= 100*time.Millisecond))
		}
	}
	p("\nGo %s, GOMAXPROCS %d.\n", runtime.Version(), runtime.GOMAXPROCS(0))
	_, err := f.WriteString(b.String())
	return err
}

// tpFlags are the benchmark's flags as this run set them.
func tpFlags() string {
	var out []string
	flag.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "tp.") && f.Name != "tp.out" {
			out = append(out, "-"+f.Name+"="+f.Value.String())
		}
	})
	return strings.Join(out, " ")
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func versions(v map[string]string) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + v[k]
	}
	return strings.Join(parts, ", ")
}
