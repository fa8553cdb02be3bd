package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Latency series, in the order the report lists them.
const (
	SeriesWrapupRecord   = "wrapup: trigger status write → outcome recorded"
	SeriesWrapupDelete   = "wrapup: trigger status write → AppWrapper delete request"
	SeriesWrapupRecToDel = "wrapup: outcome recorded → AppWrapper delete request"
	SeriesTTLDelete      = "TTL-after-finished: Job status write → Job deleted"
	SeriesPodsSucceeded  = "AppWrapper controller: pod status write → phase Succeeded"
	SeriesWriteRTT       = "the status write's own round trip (all kinds)"
)

var seriesOrder = []string{SeriesWrapupRecord, SeriesWrapupDelete, SeriesWrapupRecToDel, SeriesTTLDelete, SeriesPodsSucceeded, SeriesWriteRTT}

// Results is everything one run measured.
type Results struct {
	// Parameters.
	N, Baseline, Waves, PerNamespace, Writers int
	// WrapupWorkers is how many AppWrappers wrapup reconciles at once.
	WrapupWorkers int
	// History says whether the rule writes a CompletionRecord per run.
	History bool
	Idle    time.Duration

	When     time.Time
	Machine  Machine
	LoadEnd  string
	Versions map[string]string

	Setup, Tracking, Completion time.Duration

	Latency map[string]Summary
	// DeletesSeenAsGone counts AppWrappers whose deletionTimestamp was
	// never seen, only their removal (the time is then an upper bound).
	DeletesSeenAsGone int

	// Heap in use and RSS before wrapup starts, once it tracks every
	// AppWrapper, and at the end.
	HeapBefore, HeapTracking HeapStats
	// HeapIdle is read again at the end of the idle window, with wrapup
	// tracking and nothing happening for a while: the most settled figure.
	HeapIdle               HeapStats
	RSSBefore, RSSTracking uint64
	RSSEnd                 uint64
	// AppWrappersCached and TriggersCached are what wrapup's caches hold
	// while tracking (the baseline AppWrappers and their Jobs included).
	AppWrappersCached, TriggersCached int
	// EvaluationsWhileTracking is how many trigger evaluations wrapup made
	// between its start and the first completion.
	EvaluationsWhileTracking uint64

	// CPU used during the completion phase.
	CPU         CPUUse
	Completions int

	Informers     float64
	InformerKinds []string

	// wrapup's own requests: while it starts and tracks, while idle, and
	// during the completion phase (until it has forgotten every finished
	// AppWrapper).
	WrapupStart, WrapupIdle, WrapupCompletion RequestCounts
	// InProcess is rest_client_requests_total over the completion phase, by
	// method: every client in the process.
	InProcess map[string]float64
	// Reconciles over the completion phase, by controller and result.
	Reconciles map[string]float64
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

func mib(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) }

func ratio(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func perCompletion(v int64, n int) string {
	if n == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(v)/float64(n), 'f', 2, 64)
}

// growth is how much more a heap figure is once wrapup tracks.
func growth(before, after uint64) uint64 {
	if after < before {
		return 0
	}
	return after - before
}

// HeapPerTracked is wrapup's live heap growth per rule-matched AppWrapper.
// Live bytes (HeapAlloc after a collection), not HeapInuse: the setup
// leaves spans with free slots that wrapup's objects then fill, so the
// growth of HeapInuse understates what wrapup keeps.
func (r *Results) HeapPerTracked() float64 {
	if r.N == 0 {
		return 0
	}
	return float64(growth(r.HeapBefore.Live, r.HeapIdle.Live)) / float64(r.N)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// PathWrites are the writes per completion that wrapup's AppWrapper
// reconciler sends itself, between a finished trigger and the delete
// (the CompletionRecord's create, the delete, and whatever else it waits on); Events,
// sent by the recorder's goroutine, and writes of other goroutines are not
// on that path.
func (r *Results) PathWrites() float64 {
	var n int64
	for _, v := range r.WrapupCompletion.OnPath {
		n += v
	}
	if r.N == 0 {
		return 0
	}
	return float64(n) / float64(r.N)
}

// pathWriteKinds lists the kinds of writes on the path, with counts.
func (r *Results) pathWriteKinds() string {
	var parts []string
	for _, k := range (RequestCounts{Requests: r.WrapupCompletion.OnPath}).Keys() {
		parts = append(parts, fmt.Sprintf("%s %s %s", k.Verb, k.Resource, perCompletion(r.WrapupCompletion.OnPath[k], r.N)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// listWatches counts list and watch requests on a resource.
func listWatches(c RequestCounts, resource string) (lists, watches int64) {
	for k, v := range c.Requests {
		if k.Resource != resource {
			continue
		}
		switch k.Verb {
		case "list":
			lists += v
		case "watch":
			watches += v
		}
	}
	return lists, watches
}

// idleRequests counts the requests wrapup started while idle.
func (r *Results) idleRequests() int64 {
	all, _ := r.WrapupIdle.Total()
	return all
}

type goal struct{ name, measured, verdict string }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func (r *Results) goals() []goal {
	wd, ttl := r.Latency[SeriesWrapupDelete], r.Latency[SeriesTTLDelete]
	rec, pods := r.Latency[SeriesWrapupRecord], r.Latency[SeriesPodsSucceeded]
	startL, startW := listWatches(r.WrapupStart, "jobs.batch")
	compL, compW := listWatches(r.WrapupCompletion, "jobs.batch")
	perTracked := r.HeapPerTracked()
	perTrigger := perTracked
	if r.TriggersCached > 0 {
		perTrigger = float64(growth(r.HeapBefore.Live, r.HeapIdle.Live)) / float64(r.TriggersCached)
	}
	heapNote := ""
	if r.N < 10000 {
		heapNote = fmt.Sprintf(" (at N=%d; the goal is stated at 10,000)", r.N)
	}
	return []goal{
		{
			"p99 within 50 ms of the TTL-after-finished controller's",
			fmt.Sprintf("p99 %s ms vs %s ms: %+.1f ms", ms(wd.P99), ms(ttl.P99), float64(wd.P99-ttl.P99)/float64(time.Millisecond)),
			verdict(wd.P99-ttl.P99 <= 50*time.Millisecond),
		},
		{
			"no worse than the AppWrapper controller's pod-driven detection",
			fmt.Sprintf("outcome recorded p99 %s ms vs phase Succeeded p99 %s ms (p50 %s vs %s)", ms(rec.P99), ms(pods.P99), ms(rec.P50), ms(pods.P50)),
			verdict(rec.P99 <= pods.P99),
		},
		{
			"≤ 2 KiB heap per tracked trigger at 10,000",
			fmt.Sprintf("%.1f KiB of live heap per trigger in wrapup's informer (%d, each with its AppWrapper in wrapup's cache; wrapup tracks every AppWrapper's trigger, rule-matched or not); %.1f KiB per rule-matched AppWrapper%s",
				perTrigger/1024, r.TriggersCached, perTracked/1024, heapNote),
			verdict(perTrigger <= 2048),
		},
		{
			"one list+watch per trigger kind",
			fmt.Sprintf("%.0f informer(s) %v; jobs.batch: %d list + %d watch while starting, %d list + %d watch during the completions",
				r.Informers, r.InformerKinds, startL, startW, compL, compW),
			verdict(r.Informers == 1 && startL+startW <= 2 && compL == 0),
		},
		{
			"at most 2 writes per completion before the delete (record + delete), and the CompletionRecord with history on",
			fmt.Sprintf("%.2f writes per completion sent by the AppWrapper reconciler itself (%s); history %s", r.PathWrites(), r.pathWriteKinds(), onOff(r.History)),
			verdict(r.PathWrites() <= 2.0001+b2f(r.History)),
		},
		{
			"no polling",
			fmt.Sprintf("%d request(s) in %s idle with %d AppWrappers tracked", r.idleRequests(), r.Idle, r.N),
			verdict(r.idleRequests() == 0),
		},
	}
}

// WriteMarkdown writes the report as Markdown.
func (r *Results) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.Machine
	p("# wrapup scale and latency benchmark, N=%d\n\n", r.N)
	p("Run %s; reproduce with `make bench N=%d` (test flags `-bench.n=%d -bench.baseline=%d -bench.waves=%d -bench.per-namespace=%d -bench.writers=%d -bench.idle=%s`).\n\n",
		r.When.UTC().Format("2006-01-02 15:04 MST"), r.N, r.N, r.Baseline, r.Waves, r.PerNamespace, r.Writers, r.Idle)
	p("- **Machine**: %d cores (%s), %.1f GiB memory, Linux %s.\n", m.Cores, m.CPUModel, float64(m.MemTotal)/(1<<30), m.Kernel)
	others := 0.0
	if r.CPU.Wall > 0 {
		others = float64(r.CPU.Others) / float64(r.CPU.Wall)
	}
	p("- **Load**: the machine is shared with other work. Load average %s at the start, %s at the end; during the completion phase other processes used %.2f of the %d cores.\n",
		m.LoadAvg, r.LoadEnd, others, m.Cores)
	p("- **Versions**: wrapup %s; Kubernetes %s (kube-apiserver, kube-controller-manager), AppWrapper %s, controller-runtime %s, client-go %s, %s.\n",
		r.Versions["wrapup"], r.Versions["server"], r.Versions["appwrapper"], r.Versions["controller-runtime"], r.Versions["client-go"], r.Versions["go"])
	p("- **Workload**: %d AppWrappers (a Deployment and a trigger Job each) under one CompletionRule (trigger batch/Job, onSuccess DeleteAll, TTL 0); "+
		"baselines of %d plain Jobs with `ttlSecondsAfterFinished: 0` and %d Job-only AppWrappers no rule matches; %d per namespace; "+
		"completed in %d waves, the three kinds interleaved, by %d concurrent writers. wrapup runs with `gc.Setup`'s defaults (%d workers); history (a CompletionRecord per run) %s.\n",
		r.N, r.Baseline, r.Baseline, r.PerNamespace, r.Waves, r.Writers, r.WrapupWorkers, onOff(r.History))
	p("- **Phases**: setup %s, wrapup start to every AppWrapper tracked %s, completions %s (%.0f completions/s of all kinds).\n\n",
		r.Setup.Round(time.Millisecond), r.Tracking.Round(time.Millisecond), r.Completion.Round(time.Millisecond),
		float64(r.Completions)/r.Completion.Seconds())

	p("## Latency (ms)\n\n| path | n | p50 | p90 | p99 | max | mean |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, name := range seriesOrder {
		s := r.Latency[name]
		p("| %s | %d | %s | %s | %s | %s | %s |\n", name, s.Count, ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max), ms(s.Mean))
	}
	if r.DeletesSeenAsGone > 0 {
		p("\n%d AppWrapper deletions were seen only as the object's removal (their time is an upper bound).\n", r.DeletesSeenAsGone)
	}

	p("\n## Ratios\n\n| wrapup ÷ baseline | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|\n")
	for _, rr := range []struct {
		name string
		a, b string
	}{
		{"delete request ÷ TTL-after-finished deletion", SeriesWrapupDelete, SeriesTTLDelete},
		{"outcome recorded ÷ AppWrapper controller's Succeeded", SeriesWrapupRecord, SeriesPodsSucceeded},
		{"delete request ÷ AppWrapper controller's Succeeded", SeriesWrapupDelete, SeriesPodsSucceeded},
	} {
		x := RatioOf(r.Latency[rr.a], r.Latency[rr.b])
		p("| %s | %s | %s | %s | %s |\n", rr.name, ratio(x.P50), ratio(x.P90), ratio(x.P99), ratio(x.Max))
	}

	p("\n## Goals (measured, not asserted)\n\n| goal | measured | |\n|---|---|---|\n")
	for _, g := range r.goals() {
		p("| %s | %s | %s |\n", g.name, g.measured, g.verdict)
	}

	p("\n## Resources\n\n")
	p("The controllers run in the benchmark's process, so heap and RSS include the AppWrapper controller, the benchmark's own informers and every in-process API client; wrapup's share is the growth from just before it starts to the end of the idle window (it tracks every AppWrapper, its work queues are empty), the rest already being there. " +
		"Live heap (HeapAlloc after a collection) is the measure that counts: HeapInuse grows less than what wrapup keeps, since wrapup's objects fill spans that the setup left partly free.\n\n")
	p("| measure | value |\n|---|---:|\n")
	p("| heap in use (HeapInuse) before wrapup starts / every AppWrapper tracked / after %s idle (MiB) | %s / %s / %s |\n", r.Idle, mib(r.HeapBefore.Inuse), mib(r.HeapTracking.Inuse), mib(r.HeapIdle.Inuse))
	p("| live heap (HeapAlloc after GC) before / tracked / idle (MiB) | %s / %s / %s |\n", mib(r.HeapBefore.Live), mib(r.HeapTracking.Live), mib(r.HeapIdle.Live))
	p("| wrapup's heap growth after idle, in use / live (MiB) | %s / %s |\n", mib(growth(r.HeapBefore.Inuse, r.HeapIdle.Inuse)), mib(growth(r.HeapBefore.Live, r.HeapIdle.Live)))
	p("| … per rule-matched AppWrapper, in use / live (KiB) | %.1f / %.1f |\n", perN(growth(r.HeapBefore.Inuse, r.HeapIdle.Inuse), r.N), r.HeapPerTracked()/1024)
	p("| … per cached AppWrapper (%d, baselines included), in use / live (KiB) | %.1f / %.1f |\n", r.AppWrappersCached,
		perN(growth(r.HeapBefore.Inuse, r.HeapIdle.Inuse), r.AppWrappersCached), perN(growth(r.HeapBefore.Live, r.HeapIdle.Live), r.AppWrappersCached))
	p("| goroutines before wrapup / tracked / idle | %d / %d / %d |\n", r.HeapBefore.Goroutines, r.HeapTracking.Goroutines, r.HeapIdle.Goroutines)
	p("| trigger-kind objects in wrapup's informer | %d |\n", r.TriggersCached)
	p("| trigger evaluations between wrapup's start and the first completion | %d |\n", r.EvaluationsWhileTracking)
	p("| RSS before wrapup / tracking / at the end (MiB) | %s / %s / %s |\n", mib(r.RSSBefore), mib(r.RSSTracking), mib(r.RSSEnd))
	p("| CPU of the benchmark process in the completion phase (s) | %.2f |\n", r.CPU.Self.Seconds())
	p("| … per 1,000 completions of all kinds (s) | %.2f |\n", per1000(r.CPU.Self, r.Completions))
	for _, name := range sortedKeys(r.CPU.Children) {
		p("| CPU of %s in the completion phase, per 1,000 completions (s) | %.2f |\n", name, per1000(r.CPU.Children[name], r.Completions))
	}
	p("| informers for trigger kinds (wrapup_trigger_informers) | %.0f |\n", r.Informers)
	if r.EvaluationsWhileTracking < uint64(r.N) {
		p("\n%d of the %d rule-matched AppWrappers were not evaluated while wrapup started: reconciled before its trigger informer had synced, they wait for their trigger's next change.\n",
			uint64(r.N)-r.EvaluationsWhileTracking, r.N)
	}

	p("\n## API requests\n\nwrapup's own requests, counted on its transport (rest.Config.WrapTransport), by verb and resource. Per completion = over the completion phase (until wrapup has forgotten every finished AppWrapper) ÷ %d.\n\n", r.N)
	p("| verb | resource | while starting | idle (%s) | completion phase | per completion | of which sent by the AppWrapper reconciler | conflicts (409) |\n|---|---|---:|---:|---:|---:|---:|---:|\n", r.Idle)
	keys := map[RequestKey]bool{}
	for _, c := range []RequestCounts{r.WrapupStart, r.WrapupIdle, r.WrapupCompletion} {
		for k := range c.Requests {
			keys[k] = true
		}
	}
	all := RequestCounts{Requests: map[RequestKey]int64{}}
	for k := range keys {
		all.Requests[k] = 1
	}
	for _, k := range all.Keys() {
		onPath := ""
		if k.IsWrite() {
			onPath = perCompletion(r.WrapupCompletion.OnPath[k], r.N)
		}
		p("| %s | %s | %d | %d | %d | %s | %s | %d |\n", k.Verb, k.Resource, r.WrapupStart.Requests[k], r.WrapupIdle.Requests[k],
			r.WrapupCompletion.Requests[k], perCompletion(r.WrapupCompletion.Requests[k], r.N), onPath, r.WrapupCompletion.Conflicts[k])
	}
	tot, writes := r.WrapupCompletion.Total()
	p("| **all** | | | | %d | %s | | |\n| **writes** | | | | %d | %s | %.2f | |\n", tot, perCompletion(tot, r.N), writes, perCompletion(writes, r.N), r.PathWrites())

	p("\nEvery in-process client (the benchmark's writers and informers, the AppWrapper controller, wrapup), from client-go's `rest_client_requests_total` over the completion phase:\n\n| method | requests | per completion of any kind |\n|---|---:|---:|\n")
	for _, k := range sortedKeys(r.InProcess) {
		p("| %s | %.0f | %s |\n", k, r.InProcess[k], perCompletion(int64(r.InProcess[k]), r.Completions))
	}
	p("\nReconciles over the completion phase (controller-runtime's `controller_runtime_reconcile_total`):\n\n| controller, result | reconciles |\n|---|---:|\n")
	for _, k := range sortedKeys(r.Reconciles) {
		p("| %s | %.0f |\n", k, r.Reconciles[k])
	}

	p("\n## How this was measured\n\n")
	p("etcd, kube-apiserver and kube-controller-manager (garbage collector, ClusterRole aggregation and the TTL-after-finished controller, with kube-controller-manager's default client limits of 20 QPS, burst 30: at a GET and a DELETE per Job, about 10 Jobs/s, so with more than ~15 plain Jobs finishing at once its latency is mostly that client-side wait, and the completion phase lasts at least baseline ÷ 10 seconds) run as processes; the AppWrapper controller and wrapup (`gc.Setup`, as its ServiceAccount with config/rbac) run in the benchmark's process, each in its own manager on its own HTTP connection, as separate processes would. Nothing runs pods: the benchmark creates them Running, labelled and owned as the workload controllers would, and writes Job and pod status as the Job controller and the kubelet would.\n\n")
	p("Each latency starts when the benchmark sends the status write (its own round trip is listed) and ends when the benchmark's informer on the API server sees the result: the run's CompletionRecord created (the outcome recorded), the AppWrapper's deletionTimestamp, the Job's removal, the AppWrapper's phase Succeeded. Percentiles are nearest-rank. Each wave waits until every result of the previous one was seen.\n\n")
	p("CPU is from getrusage (the benchmark process: wrapup, the AppWrapper controller, the benchmark's writers and informers) and /proc (the control plane processes, the rest of the machine). A CPU profile of the completion phase (`-bench.cpuprofile`) is labelled by component: `go tool pprof -tagfocus=component=wrapup` shows wrapup alone.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// perN is b per item, in KiB.
func perN(b uint64, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(b) / float64(n) / 1024
}

func per1000(d time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return d.Seconds() * 1000 / float64(n)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WriteCSV writes the numbers as rows of group, name, stat, value, unit.
func (r *Results) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	row := func(group, name, stat, value, unit string) { _ = cw.Write([]string{group, name, stat, value, unit}) }
	row("group", "name", "stat", "value", "unit")
	row("params", "n", "", strconv.Itoa(r.N), "count")
	row("params", "baseline", "", strconv.Itoa(r.Baseline), "count")
	row("params", "waves", "", strconv.Itoa(r.Waves), "count")
	row("params", "per-namespace", "", strconv.Itoa(r.PerNamespace), "count")
	row("params", "writers", "", strconv.Itoa(r.Writers), "count")
	row("params", "wrapup-workers", "", strconv.Itoa(r.WrapupWorkers), "count")
	row("params", "history", "", strconv.FormatBool(r.History), "bool")
	row("machine", "cores", "", strconv.Itoa(r.Machine.Cores), "count")
	row("machine", "memory", "", strconv.FormatUint(r.Machine.MemTotal, 10), "bytes")
	row("machine", "cpu", "", r.Machine.CPUModel, "")
	row("machine", "loadavg-start", "", r.Machine.LoadAvg, "")
	row("machine", "loadavg-end", "", r.LoadEnd, "")
	row("machine", "other-cpu-during-completions", "", strconv.FormatFloat(r.CPU.Others.Seconds(), 'f', 2, 64), "s")
	for _, k := range sortedKeys(r.Versions) {
		row("version", k, "", r.Versions[k], "")
	}
	row("phase", "setup", "", ms(r.Setup), "ms")
	row("phase", "tracking", "", ms(r.Tracking), "ms")
	row("phase", "completion", "", ms(r.Completion), "ms")
	for _, name := range seriesOrder {
		s := r.Latency[name]
		row("latency", name, "count", strconv.Itoa(s.Count), "count")
		for _, st := range []struct {
			n string
			d time.Duration
		}{{"p50", s.P50}, {"p90", s.P90}, {"p99", s.P99}, {"max", s.Max}, {"mean", s.Mean}} {
			row("latency", name, st.n, ms(st.d), "ms")
		}
	}
	for _, rr := range []struct{ name, a, b string }{
		{"wrapup-delete/ttl", SeriesWrapupDelete, SeriesTTLDelete},
		{"wrapup-record/appwrapper-succeeded", SeriesWrapupRecord, SeriesPodsSucceeded},
		{"wrapup-delete/appwrapper-succeeded", SeriesWrapupDelete, SeriesPodsSucceeded},
	} {
		x := RatioOf(r.Latency[rr.a], r.Latency[rr.b])
		for _, st := range []struct {
			n string
			v float64
		}{{"p50", x.P50}, {"p90", x.P90}, {"p99", x.P99}, {"max", x.Max}} {
			row("ratio", rr.name, st.n, ratio(st.v), "")
		}
	}
	row("memory", "heap-inuse-before", "", strconv.FormatUint(r.HeapBefore.Inuse, 10), "bytes")
	row("memory", "heap-inuse-tracking", "", strconv.FormatUint(r.HeapTracking.Inuse, 10), "bytes")
	row("memory", "heap-live-before", "", strconv.FormatUint(r.HeapBefore.Live, 10), "bytes")
	row("memory", "heap-live-tracking", "", strconv.FormatUint(r.HeapTracking.Live, 10), "bytes")
	row("memory", "heap-inuse-idle", "", strconv.FormatUint(r.HeapIdle.Inuse, 10), "bytes")
	row("memory", "heap-live-idle", "", strconv.FormatUint(r.HeapIdle.Live, 10), "bytes")
	row("memory", "heap-per-tracked-appwrapper", "", strconv.FormatFloat(r.HeapPerTracked(), 'f', 0, 64), "bytes")
	row("memory", "rss-before", "", strconv.FormatUint(r.RSSBefore, 10), "bytes")
	row("memory", "rss-tracking", "", strconv.FormatUint(r.RSSTracking, 10), "bytes")
	row("memory", "rss-end", "", strconv.FormatUint(r.RSSEnd, 10), "bytes")
	row("cpu", "self", "per-1000-completions", strconv.FormatFloat(per1000(r.CPU.Self, r.Completions), 'f', 3, 64), "s")
	for _, name := range sortedKeys(r.CPU.Children) {
		row("cpu", name, "per-1000-completions", strconv.FormatFloat(per1000(r.CPU.Children[name], r.Completions), 'f', 3, 64), "s")
	}
	row("informers", "wrapup_trigger_informers", "", strconv.FormatFloat(r.Informers, 'f', 0, 64), "count")
	for _, k := range r.WrapupCompletion.Keys() {
		row("wrapup-requests", k.Verb+" "+k.Resource, "per-completion", perCompletion(r.WrapupCompletion.Requests[k], r.N), "requests")
	}
	row("wrapup-requests", "writes sent by the AppWrapper reconciler", "per-completion", strconv.FormatFloat(r.PathWrites(), 'f', 2, 64), "requests")
	for _, k := range r.WrapupIdle.Keys() {
		row("wrapup-requests-idle", k.Verb+" "+k.Resource, "total", strconv.FormatInt(r.WrapupIdle.Requests[k], 10), "requests")
	}
	for _, k := range sortedKeys(r.InProcess) {
		row("in-process-requests", k, "total", strconv.FormatFloat(r.InProcess[k], 'f', 0, 64), "requests")
	}
	for _, g := range r.goals() {
		row("goal", g.name, strings.Trim(g.verdict, "*"), g.measured, "")
	}
	cw.Flush()
	return cw.Error()
}
