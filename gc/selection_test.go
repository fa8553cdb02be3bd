package gc

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

func rule(name string, prio int32, awSel, nsSel map[string]string) *wrapupv1alpha1.CompletionRule {
	r := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: name}}
	r.Spec.Priority = prio
	if awSel != nil {
		r.Spec.AppWrapperSelector = &metav1.LabelSelector{MatchLabels: awSel}
	}
	if nsSel != nil {
		r.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: nsSel}
	}
	return r
}

func TestWinningRule(t *testing.T) {
	bench := map[string]string{"role": "benchmark"}
	deleting := rule("deleting", 100, nil, nil)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	badSelector := rule("bad-selector", 100, nil, nil)
	badSelector.Spec.AppWrapperSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}}
	tests := []struct {
		name     string
		rules    []*wrapupv1alpha1.CompletionRule
		awLabels map[string]string
		nsLabels map[string]string
		unusable string
		want     string
	}{
		{name: "no rules", want: ""},
		{name: "empty selectors match everything", rules: []*wrapupv1alpha1.CompletionRule{rule("all", 0, nil, nil)}, want: "all"},
		{name: "appwrapper selector filters", rules: []*wrapupv1alpha1.CompletionRule{rule("bench", 0, bench, nil)}, awLabels: map[string]string{"role": "train"}, want: ""},
		{name: "namespace selector filters", rules: []*wrapupv1alpha1.CompletionRule{rule("team", 0, nil, map[string]string{"team": "a"})}, nsLabels: map[string]string{"team": "b"}, want: ""},
		{name: "highest priority wins", rules: []*wrapupv1alpha1.CompletionRule{rule("low", 1, nil, nil), rule("high", 10, bench, nil)}, awLabels: bench, want: "high"},
		{name: "ties go to the first name", rules: []*wrapupv1alpha1.CompletionRule{rule("b", 5, nil, nil), rule("a", 5, nil, nil)}, want: "a"},
		{name: "negative priority loses", rules: []*wrapupv1alpha1.CompletionRule{rule("annotated-triggers", -1000, nil, nil), rule("z", 0, nil, nil)}, want: "z"},
		{name: "rules being deleted are skipped", rules: []*wrapupv1alpha1.CompletionRule{deleting, rule("b", 0, nil, nil)}, want: "b"},
		{name: "a selector that does not parse matches nothing", rules: []*wrapupv1alpha1.CompletionRule{badSelector}, want: ""},
		{name: "unusable rules are skipped", rules: []*wrapupv1alpha1.CompletionRule{rule("broken", 10, nil, nil), rule("ok", 0, nil, nil)}, unusable: "broken", want: "ok"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := winningRule(tc.rules, tc.awLabels, tc.nsLabels, func(r *wrapupv1alpha1.CompletionRule) bool { return r.Name != tc.unusable })
			if ruleName(got) != tc.want {
				t.Errorf("winningRule = %q, want %q", ruleName(got), tc.want)
			}
		})
	}
}

func component(t *testing.T, apiVersion, kind, name string, annotations map[string]string) awv1beta2.AppWrapperComponent {
	t.Helper()
	obj := map[string]any{"metadata": map[string]any{}}
	if apiVersion != "" {
		obj["apiVersion"] = apiVersion
	}
	if kind != "" {
		obj["kind"] = kind
	}
	if name != "" {
		obj["metadata"].(map[string]any)["name"] = name
	} else {
		obj["metadata"].(map[string]any)["generateName"] = "gen-"
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return awv1beta2.AppWrapperComponent{Annotations: annotations, Template: runtime.RawExtension{Raw: raw}}
}

func TestFindTrigger(t *testing.T) {
	trig := map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}
	jobRule := rule("jobs", 0, nil, nil)
	jobRule.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"}
	namedRule := rule("named", 0, nil, nil)
	namedRule.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job", Name: "bench"}
	annotated := rule("annotated", 0, nil, nil)
	podRule := rule("pods", 0, nil, nil)
	podRule.Spec.Trigger = wrapupv1alpha1.TriggerSpec{Kind: "Pod"}

	tests := []struct {
		name       string
		rule       *wrapupv1alpha1.CompletionRule
		components func(t *testing.T) []awv1beta2.AppWrapperComponent
		statusName string
		want       triggerRef
		wantReason string
	}{
		{
			name: "the one Job among Deployments",
			rule: jobRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "apps/v1", "Deployment", "inf", nil), component(t, "batch/v1", "Job", "bench", nil)}
			},
			want: triggerRef{Index: 1, Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Name: "bench"},
		},
		{
			name: "two Jobs are ambiguous",
			rule: jobRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "Job", "a", nil), component(t, "batch/v1", "Job", "b", nil)}
			},
			wantReason: reasonAmbiguousTrigger,
		},
		{
			name: "a name picks one of two Jobs",
			rule: namedRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "Job", "warmup", nil), component(t, "batch/v1", "Job", "bench", nil)}
			},
			want: triggerRef{Index: 1, Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Name: "bench"},
		},
		{
			name: "no Job",
			rule: jobRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "apps/v1", "Deployment", "inf", nil)}
			},
			wantReason: reasonNoTrigger,
		},
		{
			name: "the group must match, not only the kind",
			rule: jobRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "example.com/v1", "Job", "other", nil)}
			},
			wantReason: reasonNoTrigger,
		},
		{
			name: "the annotated component",
			rule: annotated,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "Job", "a", nil), component(t, "kubeflow.org/v1", "PyTorchJob", "train", trig)}
			},
			want: triggerRef{Index: 1, Kind: schema.GroupKind{Group: "kubeflow.org", Kind: "PyTorchJob"}, Name: "train"},
		},
		{
			name: "no annotated component",
			rule: annotated,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "Job", "a", nil)}
			},
			wantReason: reasonNoTrigger,
		},
		{
			name: "an annotated component with no kind is reported",
			rule: annotated,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "", "a", trig)}
			},
			wantReason: reasonNoTrigger,
		},
		{
			name: "generateName takes the name from componentStatus",
			rule: podRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "v1", "Pod", "", nil)}
			},
			statusName: "gen-x7k2p",
			want:       triggerRef{Index: 0, Kind: schema.GroupKind{Kind: "Pod"}, Name: "gen-x7k2p"},
		},
		{
			name: "generateName before the AppWrapper controller created it",
			rule: podRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "v1", "Pod", "", nil)}
			},
			want: triggerRef{Index: 0, Kind: schema.GroupKind{Kind: "Pod"}},
		},
		{
			name: "a template that is not JSON is skipped",
			rule: jobRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{{Template: runtime.RawExtension{Raw: []byte("{not json")}}}
			},
			wantReason: reasonNoTrigger,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			aw := &awv1beta2.AppWrapper{}
			aw.Spec.Components = tc.components(t)
			if tc.statusName != "" {
				aw.Status.ComponentStatus = []awv1beta2.AppWrapperComponentStatus{{Name: tc.statusName}}
			}
			got, err := findTrigger(aw, tc.rule)
			if tc.wantReason != "" {
				var nt *noTriggerError
				if !errors.As(err, &nt) || nt.reason != tc.wantReason {
					t.Fatalf("findTrigger error = %v, want reason %s", err, tc.wantReason)
				}
				if !strings.Contains(nt.message, tc.rule.Name) {
					t.Errorf("message %q does not name the rule", nt.message)
				}
				return
			}
			if err != nil {
				t.Fatalf("findTrigger: %v", err)
			}
			if got != tc.want {
				t.Errorf("findTrigger = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFailureIsFinal(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	grace := 2 * time.Minute
	tests := []struct {
		name        string
		phase       awv1beta2.AppWrapperPhase
		annotation  string
		firstSeen   time.Time
		wantFinal   bool
		wantWaitMin time.Duration
	}{
		{name: "Failed is final", phase: awv1beta2.AppWrapperFailed, firstSeen: now, wantFinal: true},
		{name: "Resetting is a retry", phase: awv1beta2.AppWrapperResetting, firstSeen: now.Add(-time.Hour)},
		{name: "Resuming is a retry", phase: awv1beta2.AppWrapperResuming, firstSeen: now.Add(-time.Hour)},
		{name: "Running within the grace period waits", phase: awv1beta2.AppWrapperRunning, firstSeen: now.Add(-time.Minute), wantWaitMin: time.Minute},
		{name: "Running past the grace period is final", phase: awv1beta2.AppWrapperRunning, firstSeen: now.Add(-grace), wantFinal: true},
		{name: "the AppWrapper's own grace period counts", phase: awv1beta2.AppWrapperRunning, annotation: "10m", firstSeen: now.Add(-5 * time.Minute), wantWaitMin: 6 * time.Minute},
		{name: "a bad annotation falls back to the default", phase: awv1beta2.AppWrapperRunning, annotation: "soon", firstSeen: now.Add(-grace), wantFinal: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			aw := &awv1beta2.AppWrapper{}
			aw.Status.Phase = tc.phase
			if tc.annotation != "" {
				aw.Annotations = map[string]string{awv1beta2.FailureGracePeriodDurationAnnotation: tc.annotation}
			}
			final, wait := failureIsFinal(aw, tc.firstSeen, now, grace)
			if final != tc.wantFinal {
				t.Errorf("final = %v, want %v", final, tc.wantFinal)
			}
			if wait < tc.wantWaitMin || (tc.wantWaitMin == 0 && wait != 0) {
				t.Errorf("wait = %v, want at least %v", wait, tc.wantWaitMin)
			}
		})
	}
}

func TestTimeLeft(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	if got := timeLeft(at, 5*time.Minute, at.Add(time.Minute)); got != 4*time.Minute {
		t.Errorf("timeLeft = %v, want 4m", got)
	}
	if got := timeLeft(at, time.Minute, at.Add(time.Hour)); got != 0 {
		t.Errorf("timeLeft past the TTL = %v, want 0", got)
	}
}

func TestOwningAppWrapper(t *testing.T) {
	tests := []struct {
		name   string
		refs   []metav1.OwnerReference
		labels map[string]string
		want   string
	}{
		{name: "controller reference", refs: []metav1.OwnerReference{{APIVersion: "workload.codeflare.dev/v1beta2", Kind: "AppWrapper", Name: "aw", Controller: ptr.To(true)}}, want: "aw"},
		{name: "label only", labels: map[string]string{awv1beta2.AppWrapperLabel: "aw2"}, want: "aw2"},
		{name: "an AppWrapper kind of another group is not ours", refs: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "AppWrapper", Name: "x", Controller: ptr.To(true)}}, want: ""},
		{name: "nothing", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{}}
			u.SetOwnerReferences(tc.refs)
			u.SetLabels(tc.labels)
			if got := owningAppWrapper(u); got != tc.want {
				t.Errorf("owningAppWrapper = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAssignments(t *testing.T) {
	a := NewAssignments()
	x, y := types.NamespacedName{Namespace: "n", Name: "x"}, types.NamespacedName{Namespace: "n", Name: "y"}
	a.Set(x, "r1")
	a.Set(y, "r1")
	a.Set(x, "r1") // no change
	if got := a.Count("r1"); got != 2 {
		t.Fatalf("Count(r1) = %d, want 2", got)
	}
	a.Set(x, "r2")
	a.Set(y, "")
	if a.Count("r1") != 0 || a.Count("r2") != 1 {
		t.Fatalf("counts r1=%d r2=%d, want 0 and 1", a.Count("r1"), a.Count("r2"))
	}
	// Each change notifies the rules it touched: r1 (x, y, x moved away, y gone), r2 once.
	if got := len(a.events); got != 5 {
		t.Errorf("%d rule notifications, want 5", got)
	}
}

func TestKeepFields(t *testing.T) {
	newObj := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "batch/v1", "kind": "Job",
			"spec":   map[string]any{"template": map[string]any{"spec": map[string]any{}}},
			"status": map[string]any{"succeeded": int64(1)},
		}}
		u.SetName("j")
		u.SetNamespace("ns")
		u.SetUID("u1")
		u.SetResourceVersion("7")
		u.SetGeneration(3)
		u.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: "aw", "team": "a"})
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "workload.codeflare.dev/v1beta2", Kind: "AppWrapper", Name: "aw", UID: "a1", Controller: ptr.To(true)}})
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
		u.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "me"})
		return u
	}
	for _, tc := range []struct {
		keep     celpolicies.Fields
		wantSpec bool
		wantMeta bool
	}{
		{celpolicies.FieldsOf("status"), false, false},
		{celpolicies.FieldsOf("spec", "status"), true, false},
		{celpolicies.FieldsOf("metadata", "status"), false, true},
		{celpolicies.AllFields, true, true},
	} {
		out, err := keepFields(tc.keep)(newObj())
		if err != nil {
			t.Fatal(err)
		}
		cached := out.(*cachedTrigger)
		if cached.name != "j" || cached.namespace != "ns" || cached.uid != "u1" || cached.owner != "aw" {
			t.Errorf("%s: cached as %+v", tc.keep, cached)
		}
		if again, err := keepFields(tc.keep)(cached); err != nil || again != cached {
			t.Errorf("%s: a cached trigger transformed again: %v, %v", tc.keep, again, err)
		}
		got, err := cached.object()
		if err != nil {
			t.Fatal(err)
		}
		if len(got.GetManagedFields()) != 0 {
			t.Errorf("%s: managedFields kept", tc.keep)
		}
		if _, ok := got.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			t.Errorf("%s: last-applied annotation kept", tc.keep)
		}
		if got.GetName() != "j" || got.GetNamespace() != "ns" || got.GetUID() != "u1" || got.GetResourceVersion() != "7" ||
			got.GetKind() != "Job" || got.GetAPIVersion() != "batch/v1" || owningAppWrapper(got) != "aw" ||
			got.GetLabels()[awv1beta2.AppWrapperLabel] != "aw" || len(got.GetOwnerReferences()) != 1 {
			t.Errorf("%s: identity dropped: %v", tc.keep, got.Object)
		}
		if kept := got.GetAnnotations()["keep"] == "me" && got.GetLabels()["team"] == "a" && got.GetGeneration() == 3; kept != tc.wantMeta {
			t.Errorf("%s: other metadata kept = %v, want %v: %v", tc.keep, kept, tc.wantMeta, got.Object["metadata"])
		}
		if _, ok := got.Object["status"]; !ok {
			t.Errorf("%s: status dropped", tc.keep)
		}
		if _, ok := got.Object["spec"]; ok != tc.wantSpec {
			t.Errorf("%s: spec kept = %v, want %v", tc.keep, ok, tc.wantSpec)
		}
	}
}

func TestTruncate(t *testing.T) {
	if got := truncate("short", 10); got != "short" {
		t.Errorf("truncate kept %q", got)
	}
	got := truncate(strings.Repeat("é", 10), 9) // 2 bytes each
	if !utf8.ValidString(got) || len(got) > 9 || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate = %q (%d bytes): want valid UTF-8 of at most 9 bytes ending in …", got, len(got))
	}
}

func TestOwnedBy(t *testing.T) {
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "aw", UID: "u1"}}
	ref := func(apiVersion string, uid types.UID, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: "AppWrapper", Name: "aw", UID: uid, Controller: ptr.To(controller)}}
	}
	tests := []struct {
		name string
		refs []metav1.OwnerReference
		want bool
	}{
		{name: "controlled by the AppWrapper", refs: ref("workload.codeflare.dev/v1beta2", "u1", true), want: true},
		{name: "another AppWrapper of the same name", refs: ref("workload.codeflare.dev/v1beta2", "u2", true)},
		{name: "an owner, not the controller", refs: ref("workload.codeflare.dev/v1beta2", "u1", false)},
		{name: "an AppWrapper kind of another group", refs: ref("example.com/v1", "u1", true)},
		{name: "no owner"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{OwnerReferences: tc.refs}
			if got := ownedBy(obj, aw); got != tc.want {
				t.Errorf("ownedBy = %v, want %v", got, tc.want)
			}
		})
	}
}
