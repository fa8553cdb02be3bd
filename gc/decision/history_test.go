package decision

import (
	"context"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// A record's retention is its deciding rule's (by UID); a rule that keeps
// no history keeps the record only while its AppWrapper exists: no TTL,
// and an ownerReference to the AppWrapper, so that it goes with it.
func TestRetentionOfTheDecidingRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule *wrapupv1alpha1.CompletionRule
		ttl  int32
		// owned: the record is owned by its AppWrapper.
		owned bool
	}{
		{"the default history", jobs().Obj(), wrapupv1alpha1.DefaultHistoryTTLSeconds, false},
		{"an hour of history", jobs().History(wrapupv1alpha1.HistorySpec{TTLSecondsAfterFinished: ptr.To[int32](3600)}).Obj(), 3600, false},
		{"history disabled", jobs().History(wrapupv1alpha1.HistorySpec{Disabled: true}).Obj(), 0, true},
		{"a history of 0 seconds", jobs().History(wrapupv1alpha1.HistorySpec{TTLSecondsAfterFinished: ptr.To[int32](0)}).Obj(), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Another rule, of a long history, is there too: the record's
			// retention is the rule's that decided.
			other := util.MakeRule("other").UID("uid-other").TriggerKind("batch", "Job", "other").
				History(wrapupv1alpha1.HistorySpec{TTLSecondsAfterFinished: ptr.To[int32](99999)}).Obj()
			in := input(t, appWrapper().Obj(), trigger(bench(jobUID).Complete(now)), tc.rule, other)
			d := Decide(context.Background(), in)
			if d.Store == nil {
				t.Fatalf("%s: no record to write: %s", d.Verdict, d.Reason)
			}
			if got := d.Store.Retention.TTLSecondsAfterFinished; got != tc.ttl {
				t.Errorf("retention %ds, want %ds", got, tc.ttl)
			}
			owned := len(d.Store.OwnerReferences) == 1 && d.Store.OwnerReferences[0].UID == awUID && d.Store.OwnerReferences[0].Kind == "AppWrapper"
			if owned != tc.owned || !tc.owned && len(d.Store.OwnerReferences) > 0 {
				t.Errorf("owner references %+v, want owned by the AppWrapper: %v", d.Store.OwnerReferences, tc.owned)
			}
		})
	}
}

// A record's name is the AppWrapper's, cut to fit, and a hash of its UID:
// the same for a retry, another for an AppWrapper created again.
func TestRecordName(t *testing.T) {
	a, b := RecordName("run", "uid-1"), RecordName("run", "uid-2")
	if a != RecordName("run", "uid-1") || a == b || !strings.HasPrefix(a, "run-") {
		t.Errorf("names %q and %q", a, b)
	}
	if long := RecordName(strings.Repeat("x", 300), "uid-1"); len(long) != 253 {
		t.Errorf("a long name gives %d characters, want 253", len(long))
	}
}
