package bench

import (
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: Summarize sorts
	}
	tests := []struct {
		name string
		in   []time.Duration
		want Summary
	}{
		{name: "empty", in: nil, want: Summary{}},
		{name: "one", in: ms(7), want: Summary{Count: 1, P50: 7 * time.Millisecond, P90: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond, Mean: 7 * time.Millisecond}},
		{
			name: "nearest rank over 1..100",
			in:   ms(hundred...),
			want: Summary{Count: 100, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond, Mean: 50500 * time.Microsecond},
		},
		{
			name: "p99 of ten is the max",
			in:   ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 1000),
			want: Summary{Count: 10, P50: 5 * time.Millisecond, P90: 9 * time.Millisecond, P99: 1000 * time.Millisecond, Max: 1000 * time.Millisecond, Mean: 104500 * time.Microsecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Summarize(tt.in); got != tt.want {
				t.Errorf("Summarize() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRatioOf(t *testing.T) {
	a := Summary{P50: 30, P90: 60, P99: 90, Max: 120}
	b := Summary{P50: 10, P90: 20, P99: 0, Max: 40}
	got := RatioOf(a, b)
	if got.P50 != 3 || got.P90 != 3 || !math.IsNaN(got.P99) || got.Max != 3 {
		t.Errorf("RatioOf() = %+v, want 3, 3, NaN, 3", got)
	}
}

func TestClassify(t *testing.T) {
	c := NewRequestCounter("")
	tests := []struct {
		method, url string
		want        RequestKey
	}{
		{"GET", "/apis/workload.codeflare.dev/v1beta2/namespaces/ns/appwrappers/aw", RequestKey{"get", "appwrappers.workload.codeflare.dev"}},
		{"GET", "/apis/batch/v1/jobs?labelSelector=x&watch=true&sendInitialEvents=true", RequestKey{"watch", "jobs.batch"}},
		{"GET", "/apis/batch/v1/jobs?labelSelector=x", RequestKey{"list", "jobs.batch"}},
		{"PATCH", "/apis/workload.codeflare.dev/v1beta2/namespaces/ns/appwrappers/aw", RequestKey{"patch", "appwrappers.workload.codeflare.dev"}},
		{"DELETE", "/apis/workload.codeflare.dev/v1beta2/namespaces/ns/appwrappers/aw", RequestKey{"delete", "appwrappers.workload.codeflare.dev"}},
		{"PUT", "/apis/wrapup.dev/v1alpha1/completionrules/r/status", RequestKey{"update", "completionrules.wrapup.dev/status"}},
		{"POST", "/apis/events.k8s.io/v1/namespaces/ns/events", RequestKey{"create", "events.events.k8s.io"}},
		{"GET", "/api/v1/namespaces/ns", RequestKey{"get", "namespaces"}},
		{"GET", "/apis/batch/v1", RequestKey{"discovery", "/apis/batch/v1"}},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, "https://127.0.0.1:6443"+tt.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Classify(req); got != tt.want {
			t.Errorf("Classify(%s %s) = %+v, want %+v", tt.method, tt.url, got, tt.want)
		}
	}
}

func TestRequestCounter(t *testing.T) {
	c := NewRequestCounter("github.com/wrapup-dev/wrapup/test/bench.TestRequestCounter")
	rt := c.Wrap(roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		code := http.StatusOK
		if req.Method == http.MethodPut {
			code = http.StatusConflict
		}
		return &http.Response{StatusCode: code, Body: http.NoBody}, nil
	}))
	do := func(method, url string) {
		req, _ := http.NewRequest(method, "https://127.0.0.1:6443"+url, nil)
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
	do("GET", "/api/v1/namespaces/ns")
	before := c.Snapshot()
	do("PUT", "/apis/wrapup.dev/v1alpha1/completionrules/r/status")
	do("PUT", "/apis/wrapup.dev/v1alpha1/completionrules/r/status")
	do("DELETE", "/apis/workload.codeflare.dev/v1beta2/namespaces/ns/appwrappers/aw")
	d := c.Snapshot().Sub(before)
	put := RequestKey{"update", "completionrules.wrapup.dev/status"}
	if d.Requests[put] != 2 || d.Conflicts[put] != 2 || len(d.Requests) != 2 {
		t.Errorf("delta = %+v, want 2 updates (2 conflicts) and 1 delete", d)
	}
	if d.OnPath[put] != 2 || len(d.OnPath) != 2 {
		t.Errorf("on path = %v, want the 3 writes, sent from within TestRequestCounter", d.OnPath)
	}
	other := NewRequestCounter("github.com/wrapup-dev/wrapup/gc.(*appWrapperReconciler).Reconcile")
	req, _ := http.NewRequest("DELETE", "https://127.0.0.1:6443/api/v1/namespaces/ns", nil)
	if _, err := other.Wrap(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})).RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if s := other.Snapshot(); len(s.OnPath) != 0 || len(s.Requests) != 1 {
		t.Errorf("a write from outside the path function: %+v", s)
	}
	if all, writes := d.Total(); all != 3 || writes != 3 {
		t.Errorf("Total() = %d, %d; want 3, 3", all, writes)
	}
	if keys := d.Keys(); len(keys) != 2 || keys[0].Resource != "appwrappers.workload.codeflare.dev" {
		t.Errorf("Keys() = %v, want writes sorted by resource", keys)
	}
}

func TestParseProcStat(t *testing.T) {
	name, ppid, cpu, ok := parseProcStat([]byte("4242 (kube-controller) S 17 4242 17 0 -1 4194560 1 0 0 0 250 50 0 0 20 0 12 0 100 0 0"))
	if !ok || name != "kube-controller" || ppid != 17 || cpu != 3*time.Second {
		t.Errorf("parseProcStat() = %q, %d, %v, %v; want kube-controller, 17, 3s, true", name, ppid, cpu, ok)
	}
	// A name with spaces and parentheses.
	if name, ppid, _, ok := parseProcStat([]byte("1 (a (b) c) R 9 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 0 0")); !ok || name != "a (b) c" || ppid != 9 {
		t.Errorf("parseProcStat() = %q, %d, %v; want \"a (b) c\", 9, true", name, ppid, ok)
	}
	if _, _, _, ok := parseProcStat([]byte("garbage")); ok {
		t.Error("parseProcStat(garbage) ok")
	}
}

func TestReportGoals(t *testing.T) {
	r := &Results{
		N: 10, Idle: time.Second,
		Latency: map[string]Summary{
			SeriesWrapupDelete:  {Count: 10, P99: 120 * time.Millisecond},
			SeriesTTLDelete:     {Count: 10, P99: 100 * time.Millisecond},
			SeriesWrapupRecord:  {Count: 10, P99: 90 * time.Millisecond},
			SeriesPodsSucceeded: {Count: 10, P99: 80 * time.Millisecond},
		},
		HeapBefore: HeapStats{Live: 1 << 20}, HeapIdle: HeapStats{Live: 1<<20 + 10*1024},
		Informers: 1,
		WrapupStart: RequestCounts{Requests: map[RequestKey]int64{
			{"watch", "jobs.batch"}: 1,
		}},
		WrapupCompletion: RequestCounts{
			Requests: map[RequestKey]int64{
				{"patch", "appwrappers.workload.codeflare.dev"}:  10,
				{"delete", "appwrappers.workload.codeflare.dev"}: 10,
				{"update", "completionrules.wrapup.dev/status"}:  10,
				{"create", "events.events.k8s.io"}:               20,
			},
			OnPath: map[RequestKey]int64{
				{"patch", "appwrappers.workload.codeflare.dev"}:  10,
				{"delete", "appwrappers.workload.codeflare.dev"}: 10,
				{"update", "completionrules.wrapup.dev/status"}:  10,
			},
		},
	}
	got := map[string]string{}
	for _, g := range r.goals() {
		got[g.name] = g.verdict
	}
	want := map[string]string{
		"p99 within 50 ms of the TTL-after-finished controller's":                                                       "met",
		"no worse than the AppWrapper controller's pod-driven detection":                                                "**not met**",
		"≤ 2 KiB heap per tracked trigger at 10,000":                                                                    "met",
		"one list+watch per trigger kind":                                                                               "met",
		"at most 2 writes per completion before the delete (record + delete), and the CompletionRecord with history on": "**not met**",
		"no polling": "met",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("goal %q: %q, want %q", k, got[k], v)
		}
	}
	var md, csv strings.Builder
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteCSV(&csv); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| wrapup: trigger status write → AppWrapper delete request | 10 |") {
		t.Errorf("Markdown lacks the latency row:\n%s", md.String())
	}
	if !strings.Contains(csv.String(), "latency,wrapup: trigger status write → AppWrapper delete request,p99,120.0,ms") {
		t.Errorf("CSV lacks the p99 row:\n%s", csv.String())
	}
}

func TestBuildWorkload(t *testing.T) {
	w := buildWorkload(250, 120, 100)
	if len(w.wrapup) != 250 || len(w.ttl) != 120 || len(w.pods) != 120 || len(w.objects) != 250+2*120 {
		t.Fatalf("items %d/%d/%d, objects %d; want 250/120/120, 490", len(w.wrapup), len(w.ttl), len(w.pods), len(w.objects))
	}
	if want := []string{"bench-000", "bench-001", "bench-002"}; strings.Join(w.namespaces, ",") != strings.Join(want, ",") {
		t.Errorf("namespaces %v, want %v", w.namespaces, want)
	}
	if got := w.wrapup[249].key; got.Namespace != "bench-002" || got.Name != "w-00249" {
		t.Errorf("last wrapup item %v", got)
	}
	seen := map[string]bool{}
	for _, o := range w.objects {
		if seen[o.GetNamespace()+"/"+o.GetName()] {
			t.Errorf("duplicate object %s/%s", o.GetNamespace(), o.GetName())
		}
		seen[o.GetNamespace()+"/"+o.GetName()] = true
		if o.GetLabels()[modeLabel] == "" {
			t.Errorf("%s/%s lacks %s: the benchmark's informers would not see it", o.GetNamespace(), o.GetName(), modeLabel)
		}
	}
}

func TestChunksAndInterleave(t *testing.T) {
	mk := func(m mode, n int) []*item {
		out := make([]*item, n)
		for i := range out {
			out[i] = &item{mode: m}
		}
		return out
	}
	a, b := mk(modeWrapup, 7), mk(modeTTL, 3)
	parts := chunks(a, 3)
	if len(parts) != 3 || len(parts[0])+len(parts[1])+len(parts[2]) != 7 {
		t.Fatalf("chunks(7, 3) = sizes %d, %d, %d", len(parts[0]), len(parts[1]), len(parts[2]))
	}
	got := interleave(a[:3], b)
	for i, it := range got {
		want := modeWrapup
		if i%2 == 1 {
			want = modeTTL
		}
		if it.mode != want {
			t.Errorf("interleave()[%d] = %s, want %s", i, it.mode, want)
		}
	}
}
